package lsm

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/strata-db/strata/lsm/sstable"
)

// ImportTable names one table file for Import: the file is
// TablePath(Options.Dir, Num), already written by the caller; Level is the
// level it is installed at; [MinOrder, MaxOrder] (inclusive) is the clip
// range — the key groups the new DB owns, as order hashes — which Import
// intersects with the file's own Order range (doc.go, "Clipping").
type ImportTable struct {
	Num                uint64
	Level              int
	MinOrder, MaxOrder uint64
}

// Import builds a new DB in opts.Dir from table files the caller has
// written there (hard links or downloads of the tables of one or several
// checkpoints' Snapshot.Tables), each clipped to its ImportTable range
// (doc.go, "Import"). Tables are given OLDEST FIRST: L0 tables are installed
// in slice order, a later one newer (invariant 6), so that of a snapshot's
// Tables() order is right; the others go to their Level.
//
// Import opens every table (header, footer, index and filter are checked,
// as by Open), narrows its FileMeta's [MinOrder, MaxOrder] to the
// intersection with the ImportTable's range, removes the files whose
// intersection is empty (and empty files) and checks the level invariants
// — two tables of one level ≥ 1 that still overlap after clipping are
// refused with ErrImportOverlap, before anything is written or removed. It
// then syncs every table and the directory and writes a manifest holding
// the version and one persist point (sequence number max(lastSeq, every
// given table's MaxSeq), metadata meta) and a CURRENT naming it, so that a
// later Open recovers exactly that version and PersistedMeta returns
// (that sequence number, meta).
//
// Crash safety: CURRENT is the commit point (renamed into place last, then
// the directory synced). A crash or an error anywhere in Import leaves
// either no CURRENT — Open then refuses the directory, which holds tables
// but no CURRENT (base.ErrCorruption); the caller deletes the directory and
// imports again — or, only when Import returned nil (or was cut off after
// its last directory sync), the complete DB. On an error the caller
// likewise deletes the directory and retries.
//
// Import takes the directory's LOCK for its duration. Files in opts.Dir
// that the ImportTables do not name are left alone; the first Open deletes
// those it recognises as its own (tables, manifests).
//
// Errors: ErrInvalidOptions (opts); ErrExists when opts.Dir holds CURRENT
// (a DB) — nothing is changed; ErrInvalidImport (file number 0 or reused,
// level out of range, inverted range); ErrImportOverlap; ErrMetaTooLarge;
// ErrLocked; base.ErrCorruption for a damaged table (*base.CorruptionError);
// I/O errors wrapped with the file name (fs.ErrNotExist for a missing table,
// base.ErrNoSpace).
func Import(opts Options, tables []ImportTable, lastSeq uint64, meta []byte) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.withDefaults()
	if len(meta) > MaxPersistMeta {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(meta), MaxPersistMeta)
	}
	seen := make(map[uint64]bool, len(tables))
	for i, it := range tables {
		var msg string
		switch {
		case it.Num == 0 || it.Num >= maxFileNum:
			msg = fmt.Sprintf("file number %d", it.Num)
		case seen[it.Num]:
			msg = fmt.Sprintf("file number %d given twice", it.Num)
		case it.Level < 0 || it.Level >= opts.NumLevels:
			msg = fmt.Sprintf("level %d, NumLevels is %d", it.Level, opts.NumLevels)
		case it.MinOrder > it.MaxOrder:
			msg = fmt.Sprintf("inverted range [%#x, %#x]", it.MinOrder, it.MaxOrder)
		}
		if msg != "" {
			return fmt.Errorf("%w: table %d: %s", ErrInvalidImport, i, msg)
		}
		seen[it.Num] = true
	}
	d := &DB{opts: opts, fs: opts.FS, dir: opts.Dir}
	if err := d.fs.MkdirAll(d.dir, 0o755); err != nil {
		return ioError("create directory", d.dir, err)
	}
	if err := d.lockDir(); err != nil {
		return err
	}
	defer d.lock.Close()
	err := d.importTables(tables, lastSeq, meta)
	if d.manifest != nil {
		d.manifest.Close()
	}
	return err
}

// importTables is Import under the lock, d being a bare DB (no table
// cache, no readers) that serves for its manifest writer, rotate.
func (d *DB) importTables(tables []ImportTable, lastSeq uint64, meta []byte) error {
	cur := filepath.Join(d.dir, currentName)
	if _, err := d.fs.Stat(cur); err == nil {
		return fmt.Errorf("import into %s: %w", d.dir, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return ioError("stat", cur, err)
	}
	b := newBuilder(nil, d.opts.NumLevels, true)
	var kept []*tableFile
	var dropped []string
	maxNum := uint64(0)
	for _, it := range tables {
		name := tableName(d.dir, it.Num)
		fm, err := d.tableMeta(name)
		if err != nil {
			return err
		}
		maxNum = max(maxNum, it.Num)
		lastSeq = max(lastSeq, fm.MaxSeq)
		lo, hi := max(fm.MinOrder, it.MinOrder), min(fm.MaxOrder, it.MaxOrder)
		if fm.Entries == 0 || lo > hi {
			dropped = append(dropped, name)
			continue
		}
		t := &tableFile{name: name, meta: FileMeta{Num: it.Num, Size: fm.Size, Entries: fm.Entries,
			Blocks: fm.Blocks, Tombstones: fm.Tombstones, MinOrder: lo, MaxOrder: hi,
			MinSeq: fm.MinSeq, MaxSeq: fm.MaxSeq}}
		// One edit per table, applied in slice order: L0 gains each at the
		// front, so the last given is the newest (invariant 6).
		if err := b.apply(&edit{Added: []newFile{{Level: it.Level, Meta: t.meta}}}, []*tableFile{t}); err != nil {
			panic("strata: invariant: import edit does not apply: " + err.Error())
		}
		kept = append(kept, t)
	}
	v := b.version()
	if msg := v.checkLevels(); msg != "" {
		return fmt.Errorf("import into %s: %w: %s", d.dir, ErrImportOverlap, msg)
	}
	// Invariant 2: a table is named by a manifest only once it and its
	// directory entry are durable; the caller may not have synced them.
	for _, t := range kept {
		if err := d.syncFile(t.name); err != nil {
			return err
		}
	}
	for _, name := range dropped {
		if err := d.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return ioError("remove", name, err)
		}
	}
	if err := syncDir(d.fs, d.dir); err != nil {
		return err
	}
	// The directory's own entry must be durable before CURRENT is (as Open
	// does for a new DB).
	if err := syncDir(d.fs, filepath.Dir(filepath.Clean(d.dir))); err != nil {
		return err
	}
	names, err := d.fs.List(d.dir)
	if err != nil {
		return ioError("list", d.dir, err)
	}
	for _, n := range names {
		if _, num := parseFileName(n); num > maxNum {
			maxNum = num
		}
	}
	d.nextFile.Store(maxNum + 1)
	v.refs = 1
	d.current = v
	// One rotation: a manifest holding a snapshot of v and the persist
	// point, synced, then CURRENT (tmp, sync, rename), then the directory
	// synced — the commit point.
	return d.rotate(nil, &persistPoint{LastSeq: lastSeq, Meta: append([]byte{}, meta...)})
}

// tableMeta opens the table file name, checks it as Open does and returns
// its own properties (Size is the file's size).
func (d *DB) tableMeta(name string) (sstable.Meta, error) {
	f, err := d.fs.Open(name)
	if err != nil {
		return sstable.Meta{}, ioError("open", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return sstable.Meta{}, ioError("stat", name, err)
	}
	r, err := sstable.Open(f, d.errName(name), st.Size(), nil, 0)
	if err != nil {
		f.Close()
		return sstable.Meta{}, err
	}
	m := r.Meta()
	if err := r.Close(); err != nil {
		return sstable.Meta{}, ioError("close", name, err)
	}
	return m, nil
}

// syncFile makes the contents of the file name durable.
func (d *DB) syncFile(name string) error {
	f, err := d.fs.Open(name)
	if err != nil {
		return ioError("open", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ioError("sync", name, err)
	}
	if err := f.Close(); err != nil {
		return ioError("close", name, err)
	}
	return nil
}
