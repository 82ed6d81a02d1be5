package lsm

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/invariants"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
)

// DB is the LsmStore of one store: table files in levels, named by a
// manifest. Concurrency (doc.go, "Concurrency"): one owner goroutine calls
// Get, GetLoc, ReadAt, MapRange, InstallL0, Discard, PickCompaction, CompactLevel,
// InstallCompaction, Persist, PersistedMeta, Metrics, LastSeq, Snapshot,
// ReleaseSnapshot, Sync and Close, never concurrently;
// WriteL0 and CompactionJob.Run may run on other goroutines (the root
// package runs them through the scheduler) concurrently with the owner and
// each other, until Close.
type DB struct {
	opts Options
	fs   vfs.FS
	dir  string

	nextFile atomic.Uint64 // next file number (tables and manifests); WriteL0 and Run take numbers
	lock     io.Closer     // the directory's LOCK, held from Open to Close
	tc       *tableCache   // the open table files (tablecache.go); safe for concurrent use
	// cache is the block cache of tables opened from now on: Options.Cache, or what SetCache
	// set since (read by table opens on any goroutine).
	cache atomic.Pointer[sstable.Cache]

	// Owner-only state below.
	closed  bool
	current *version
	lastSeq uint64
	// persisted is the version as of the last persist point (nil before the
	// first): it holds one reference, so its files stay on disk until the
	// next Persist replaces it (doc.go, invariant 10). pp is that point's
	// record.
	persisted   *version
	pp          persistPoint
	manifest    vfs.File // open for appending; nil while broken
	manifestNum uint64
	manifestLen int64
	broken      bool        // the last manifest write failed: the next edit starts a new manifest
	oldManifest []uint64    // manifests a durable CURRENT may still name (a rotation whose directory sync failed)
	deferred    []uint64    // table files to remove once a new manifest is durable
	busy        []bool      // per level: an input or output level of a picked, not yet installed job
	jobs        int         // picked, not yet installed jobs
	forgets     uint64      // ForgetExpiry calls (sweep.go)
	compactPtr  []uint64    // per level: MinOrder where the next L1+ compaction looks first
	snaps       []*Snapshot // unreleased snapshots, each pinning a version
	m           counters
	mr          mapRangeScratch
	buf         []byte
}

type counters struct {
	flushes, compactions                      int64
	bytesIngested, bytesFlushed, bytesCompact int64
	bytesCompactRead, manifestBytes           int64
	clipped                                   int64
	rotations, manifestErrors, persists       int64
	deleteErrors                              atomic.Int64 // also counted by background WriteL0/Run cleanup
}

// Open opens the DB in opts.Dir, creating it if there is no CURRENT file.
// It first locks the directory's LOCK file, held until Close (doc.go,
// invariant 12). Recovery (doc.go, "Recovery"): read CURRENT, replay the
// manifest it names (a torn record after everything CURRENT vouches for is
// ignored; any other damage, and a manifest missing the synced records or
// the persist point CURRENT names, is a *base.CorruptionError naming the file
// and offset) and take the version as of its last persist point — edits
// after it are ignored, and a manifest without one gives an empty DB —
// check that every table of that version exists with its recorded size and
// open it, write a fresh manifest and point CURRENT at it, then delete
// every table, manifest and temporary file the recovered version does not
// reference. Nothing is deleted unless all of that succeeded (invariant
// 11). PersistedMeta returns the recovered persist point.
//
// Errors: ErrInvalidOptions (wrapped, naming the field); ErrLocked (also
// syscall.EWOULDBLOCK) when another open DB, in this process or another,
// holds the directory; base.ErrCorruption (*base.CorruptionError) for damaged or
// missing files; I/O errors wrapped with the file name (base.ErrNoSpace for
// ENOSPC).
func Open(opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	tc := newTableCache(opts.MaxOpenFiles)
	d := &DB{
		opts:       opts,
		fs:         tc.fs(opts.FS),
		dir:        opts.Dir,
		busy:       make([]bool, opts.NumLevels),
		compactPtr: make([]uint64, opts.NumLevels),
		tc:         tc,
	}
	d.cache.Store(opts.Cache)
	if err := d.fs.MkdirAll(d.dir, 0o755); err != nil {
		return nil, ioError("create directory", d.dir, err)
	}
	if err := d.lockDir(); err != nil {
		return nil, err
	}
	if err := d.open(); err != nil {
		d.closeAll()
		d.lock.Close()
		return nil, err
	}
	return d, nil
}

// lockDir takes the directory's LOCK (doc.go, "Files in the directory").
func (d *DB) lockDir() error {
	name := filepath.Join(d.dir, lockName)
	l, err := d.fs.Lock(name)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("lock %s: %w: %w", d.dir, ErrLocked, err)
	}
	if err != nil {
		return ioError("lock", name, err)
	}
	d.lock = l
	return nil
}

// open is Open after the lock: recovery or creation, then the removal of
// obsolete files — only after a clean recovery (doc.go, invariant 11).
func (d *DB) open() error {
	opts := d.opts
	names, err := d.fs.List(d.dir)
	if err != nil {
		return ioError("list", d.dir, err)
	}
	maxNum := uint64(0)
	for _, n := range names {
		if _, num := parseFileName(n); num > maxNum {
			maxNum = num
		}
	}
	d.nextFile.Store(maxNum + 1)

	cur := filepath.Join(d.dir, currentName)
	cb, err := vfs.ReadFile(d.fs, cur)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new DB. Tables exist only once CURRENT was durable (Open had
		// succeeded), so tables without CURRENT mean damage, not a crash
		// during creation: refuse rather than delete them.
		for _, n := range names {
			if kind, _ := parseFileName(n); kind == kindTable {
				return base.Corrupt(d.errName(cur), -1, err, "CURRENT is missing but %s holds table %s", d.dir, n)
			}
		}
		// Its directory entry must be durable before CURRENT is.
		if err := syncDir(d.fs, filepath.Dir(filepath.Clean(d.dir))); err != nil {
			return err
		}
		d.current = &version{levels: make([][]*tableFile, opts.NumLevels), refs: 1}
		if err := d.rotate(nil, nil); err != nil {
			return err
		}
	case err != nil:
		return ioError("read", cur, err)
	default:
		if err := d.recover(cur, cb); err != nil {
			return err
		}
		// Start a new manifest so a torn tail is never appended to; if that
		// fails (full disk) the DB still opens and the next edit retries.
		if err := d.rotate(nil, nil); err != nil {
			d.broken = true
		}
	}
	d.removeObsolete(names)
	return nil
}

// recover replays the manifest named by CURRENT's bytes cb into d.current and
// opens its tables.
func (d *DB) recover(cur string, cb []byte) error {
	c, err := decodeCurrent(d.errName(cur), cb)
	if err != nil {
		return err
	}
	num := c.Manifest
	name := manifestName(d.dir, num)
	mb, err := vfs.ReadFile(d.fs, name)
	if errors.Is(err, fs.ErrNotExist) {
		return base.Corrupt(d.errName(cur), fileHeaderSize, err, "CURRENT names %s, which is missing", filepath.Base(name))
	}
	if err != nil {
		return ioError("read", name, err)
	}
	b := newBuilder(nil, d.opts.NumLevels, true)
	var nextFile uint64
	var pv *version // the version at the last persist point
	var pp persistPoint
	var ppOff int64
	pointFound := c.PersistEnd == 0
	syncedFound := c.Synced == fileHeaderSize
	validEnd, _, err := decodeManifest(d.errName(name), mb, func(r recordPos, e *edit) error {
		off := r.Off
		if r.End == c.Synced {
			syncedFound = true
		}
		if r.End == c.PersistEnd && e.Persist != nil && e.Persist.LastSeq == c.PersistSeq && r.CRC == c.PersistCRC {
			pointFound = true
		}
		if e.HasNextFile {
			nextFile = max(nextFile, e.NextFile)
		}
		if err := b.apply(e, nil); err != nil {
			if errors.Is(err, ErrInvalidOptions) {
				return fmt.Errorf("%s at offset %d: %w", d.errName(name), off, err)
			}
			return base.Corrupt(d.errName(name), off, nil, "%v", err)
		}
		if e.Persist != nil {
			pv, pp, ppOff = b.snapshot(), *e.Persist, off
		}
		return nil
	})
	if err != nil {
		return err
	}
	// A torn tail is only a tail: the records CURRENT vouches for were
	// synced before it was written, so losing any of them is damage
	// (truncation, lost sectors), never a crash. Refuse rather than recover
	// an older persist point or an empty DB — and delete nothing.
	if !pointFound {
		return base.Corrupt(d.errName(name), c.PersistEnd, nil,
			"the persist point CURRENT names (the record ending at offset %d, lastSeq %d) is missing: the manifest's valid records end at offset %d of %d bytes",
			c.PersistEnd, c.PersistSeq, validEnd, len(mb))
	}
	if !syncedFound || validEnd < c.Synced {
		return base.Corrupt(d.errName(name), min(validEnd, c.Synced), nil,
			"CURRENT says the first %d bytes were synced, but the manifest's valid records end at offset %d of %d bytes",
			c.Synced, validEnd, len(mb))
	}
	// The whole manifest must describe valid versions, though only the
	// persisted one is used: damage after the persist point is damage too.
	if msg := b.version().checkLevels(); msg != "" {
		return base.Corrupt(d.errName(name), 0, nil, "recovered version breaks the level invariants: %s", msg)
	}
	// Edits after the last persist point are ignored: their files are
	// obsolete (deleted by Open). Without a persist point the DB is empty.
	v := pv
	if v == nil {
		v = &version{levels: make([][]*tableFile, d.opts.NumLevels)}
	} else {
		d.persisted = v
		d.pp = pp
	}
	if msg := v.checkLevels(); msg != "" {
		return base.Corrupt(d.errName(name), ppOff, nil, "persisted version breaks the level invariants: %s", msg)
	}
	lastSeq := pp.LastSeq
	d.current = v
	v.refs = 1
	if d.persisted != nil {
		v.refs = 2 // current and persisted
	}
	d.manifestNum = num
	d.lastSeq = lastSeq
	if nextFile > d.nextFile.Load() {
		d.nextFile.Store(nextFile)
	}
	if num >= d.nextFile.Load() {
		d.nextFile.Store(num + 1)
	}
	for _, files := range v.levels {
		for _, t := range files {
			t.refs = 1
			if t.meta.Num >= d.nextFile.Load() {
				d.nextFile.Store(t.meta.Num + 1)
			}
			if err := d.openTable(t, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// openTable opens t's file for reading through the table cache (its Reader
// reads through a tableHandle, which may close the file and open it again
// later) and checks its size against the manifest named manifest.
func (d *DB) openTable(t *tableFile, manifest string) error {
	t.name = tableName(d.dir, t.meta.Num)
	f, err := d.tc.openHandle(t.name)
	if errors.Is(err, fs.ErrNotExist) {
		return base.Corrupt(d.errName(t.name), -1, err, "table file named by %s is missing", filepath.Base(manifest))
	}
	if err != nil {
		return ioError("open", t.name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return ioError("stat", t.name, err)
	}
	if st.Size() != t.meta.Size {
		f.Close()
		var cause error // a longer file is damage too, but not a truncation
		if st.Size() < t.meta.Size {
			cause = base.ErrTruncated
		}
		return base.Corrupt(d.errName(t.name), min(st.Size(), t.meta.Size), cause, "table file is %d bytes, %s records %d",
			st.Size(), filepath.Base(manifest), t.meta.Size)
	}
	t.cacheID = cacheIDs.Add(1)
	r, err := sstable.Open(f, d.errName(t.name), t.meta.Size, d.cache.Load(), t.cacheID)
	if err != nil {
		f.Close()
		return err
	}
	t.f, t.r = nil, r // the Reader owns f (its table-cache handle) now
	return nil
}

// errName is how errors name the file at path in d.dir: Options.Name/base
// when Name is set (the Store's relative path), else path as given.
func (d *DB) errName(path string) string {
	if d.opts.Name == "" {
		return path
	}
	return filepath.Join(d.opts.Name, filepath.Base(path))
}

// removeObsolete deletes the tables, manifests and temporary files in names
// (a listing of d.dir made before recovery) that the current version and
// manifest do not use. Failures are counted, not returned: the next Open
// retries.
func (d *DB) removeObsolete(names []string) {
	live := map[uint64]bool{}
	for _, files := range d.current.levels {
		for _, t := range files {
			live[t.meta.Num] = true
		}
	}
	for _, n := range names {
		kind, num := parseFileName(n)
		switch {
		case kind == kindTable && !live[num],
			kind == kindManifest && num != d.manifestNum && !slices.Contains(d.oldManifest, num),
			kind == kindTemp:
			if err := d.fs.Remove(filepath.Join(d.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				d.m.deleteErrors.Add(1)
			}
		}
	}
}

// logAndApply makes e durable in the manifest (appending, or starting a new
// manifest when the current one is broken or too long), then installs the
// version it produces, with added supplying the opened tables of e.Added.
// On error nothing changes in memory and the manifest is marked broken; a
// file e adds may still be named by a durable manifest, so the caller must
// not delete it until a later rotation succeeds (d.deferred).
func (d *DB) logAndApply(e *edit, added []*tableFile) error {
	b := newBuilder(d.current, d.opts.NumLevels, false)
	if err := b.apply(e, added); err != nil {
		panic("strata: invariant: edit does not apply to the current version: " + err.Error())
	}
	nv := b.version()
	if msg := nv.checkLevels(); msg != "" {
		panic("strata: invariant: " + msg)
	}
	if invariants.Enabled {
		if msg := nv.checkFilesOnce(); msg != "" {
			panic("strata: invariant: after a manifest edit: " + msg)
		}
	}
	e.HasNextFile, e.NextFile = true, d.nextFile.Load()
	e.HasLastSeq, e.LastSeq = true, max(d.lastSeq, e.LastSeq)
	if d.broken || d.manifest == nil || d.manifestLen >= d.opts.MaxManifestBytes {
		if err := d.rotate(e, nil); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return err
		}
	} else {
		d.buf = appendRecord(d.buf[:0], e.encode(nil))
		name := manifestName(d.dir, d.manifestNum)
		if _, err := d.manifest.Write(d.buf); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return ioError("append to", name, err)
		}
		if err := d.manifest.Sync(); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return ioError("sync", name, err)
		}
		d.manifestLen += int64(len(d.buf))
		d.m.manifestBytes += int64(len(d.buf))
	}
	d.lastSeq = e.LastSeq
	d.install(nv, e)
	return nil
}

// install makes nv current, marks the files e deleted obsolete and releases
// the previous version.
func (d *DB) install(nv *version, e *edit) {
	for _, files := range nv.levels {
		for _, t := range files {
			t.refs++
		}
	}
	nv.refs = 1
	old := d.current
	d.current = nv
	for _, del := range e.Deleted {
		for _, t := range old.levels[del.Level] {
			if t.meta.Num == del.Num {
				t.obsolete = true
			}
		}
	}
	d.unrefVersion(old)
}

// unrefVersion drops one reference to v; at zero it releases v's files, and
// a file no version holds is closed and, if obsolete, removed from disk.
func (d *DB) unrefVersion(v *version) {
	v.refs--
	if v.refs > 0 {
		return
	}
	if v.refs < 0 {
		panic("strata: invariant: version reference count below zero")
	}
	for _, files := range v.levels {
		for _, t := range files {
			t.refs--
			if t.refs == 0 {
				d.releaseTable(t, t.obsolete)
			}
		}
	}
}

// releaseTable closes t (the Reader closes its file and drops its cached
// blocks) and, if remove, deletes its file. Safe from background goroutines
// for a table no version holds.
func (d *DB) releaseTable(t *tableFile, remove bool) {
	if t.r != nil {
		t.r.Close()
		t.r, t.f = nil, nil
	}
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	if remove {
		if err := d.fs.Remove(t.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.m.deleteErrors.Add(1)
		}
	}
}

// rotate writes a new manifest, syncs it, and points CURRENT at it (temp
// file, Sync, Rename, directory Sync). The manifest holds (doc.go, "Manifest
// rewrites"):
//
//   - with pp (Persist): a snapshot of the current version, then the persist
//     point pp;
//   - after a persist point: a snapshot of the persisted version, its
//     persist point, then the edits from it to the current version, then e;
//   - before any persist point: a snapshot of the current version, then e.
//
// On success the previous manifests and the deferred tables are removed. On
// failure before the rename every new file is removed and the old manifest
// stays current; if only the directory sync failed, CURRENT may durably name
// either manifest, so both are kept until a later rotation succeeds.
func (d *DB) rotate(e *edit, pp *persistPoint) error {
	num := d.nextFile.Add(1) - 1
	name := manifestName(d.dir, num)
	buf := appendFileHeader(nil, manifestMagic)
	lastSeq := d.lastSeq
	if e != nil {
		lastSeq = max(lastSeq, e.LastSeq)
	}
	nextFile := d.nextFile.Load()
	var recs []edit
	switch {
	case pp != nil:
		recs = snapshotEdits(d.current, nextFile, pp.LastSeq)
		recs = append(recs, edit{Persist: pp})
	case d.persisted != nil:
		recs = snapshotEdits(d.persisted, nextFile, d.pp.LastSeq)
		recs = append(recs, edit{Persist: &d.pp})
		diff := diffEdits(d.persisted, d.current)
		// The check is O(files), cheap beside the rotation's I/O.
		b := newBuilder(d.persisted, d.opts.NumLevels, false)
		for i := range diff {
			if err := b.apply(&diff[i], nil); err != nil {
				panic("strata: invariant: manifest diff does not apply to the persisted version: " + err.Error())
			}
		}
		if !sameFiles(b.version(), d.current) {
			panic("strata: invariant: manifest diff does not rebuild the current version")
		}
		if len(diff) == 0 && lastSeq != d.pp.LastSeq {
			diff = append(diff, edit{})
		}
		if len(diff) > 0 {
			diff[len(diff)-1].HasLastSeq, diff[len(diff)-1].LastSeq = true, lastSeq
		}
		recs = append(recs, diff...)
	default:
		recs = snapshotEdits(d.current, nextFile, lastSeq)
	}
	c := current{Manifest: num}
	for i := range recs {
		payload := recs[i].encode(nil)
		buf = appendRecord(buf, payload)
		if p := recs[i].Persist; p != nil {
			c.PersistEnd, c.PersistSeq, c.PersistCRC = int64(len(buf)), p.LastSeq, crc32.Checksum(payload, base.CRC32C)
		}
	}
	if e != nil {
		e.HasNextFile, e.NextFile = true, nextFile
		buf = appendRecord(buf, e.encode(nil))
	}
	c.Synced = int64(len(buf))
	f, err := d.fs.Create(name)
	if err != nil {
		return ioError("create", name, err)
	}
	fail := func(what string, err error) error {
		f.Close()
		d.fs.Remove(name)
		return ioError(what, name, err)
	}
	if _, err := f.Write(buf); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("sync", err)
	}
	if err := d.replaceCurrent(c); err != nil {
		f.Close()
		d.fs.Remove(name)
		return err
	}
	if d.manifestNum != 0 {
		d.oldManifest = append(d.oldManifest, d.manifestNum)
	}
	if d.manifest != nil {
		d.manifest.Close()
	}
	d.manifest, d.manifestNum, d.manifestLen = f, num, int64(len(buf))
	d.m.manifestBytes += int64(len(buf))
	d.m.rotations++
	if err := syncDir(d.fs, d.dir); err != nil {
		return err
	}
	// CURRENT durably names the new manifest: nothing older is needed.
	for _, old := range d.oldManifest {
		if err := d.fs.Remove(manifestName(d.dir, old)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.m.deleteErrors.Add(1)
		}
	}
	d.oldManifest = d.oldManifest[:0]
	for _, n := range d.deferred {
		if err := d.fs.Remove(tableName(d.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.m.deleteErrors.Add(1)
		}
	}
	d.deferred = d.deferred[:0]
	d.broken = false
	return nil
}

// replaceCurrent writes CURRENT for c: CURRENT.tmp, Sync, Rename over
// CURRENT. The caller syncs the directory. On failure CURRENT.tmp is
// removed and CURRENT is the old one, unless the error came from Rename.
func (d *DB) replaceCurrent(c current) error {
	cur := filepath.Join(d.dir, currentName)
	tmp := filepath.Join(d.dir, currentTempName)
	if err := writeFileSynced(d.fs, tmp, encodeCurrent(c)); err != nil {
		return err
	}
	if err := d.fs.Rename(tmp, cur); err != nil {
		d.fs.Remove(tmp)
		return ioError("rename", tmp, err)
	}
	return nil
}

// SetCache makes c the block cache of every table the DB opens from now on (a table open
// already keeps the cache it was opened with until the table cache closes it); nil means none.
// A store that maps its cache only once the DB holds data (so that an empty LsmStore costs its
// budget nothing) calls it before the first install. The caller keeps owning c: it must stay
// open until the DB is closed. Owner only; safe with table opens running on other goroutines.
func (d *DB) SetCache(c *sstable.Cache) { d.cache.Store(c) }

// Empty reports whether the DB holds no table file. Owner only.
func (d *DB) Empty() bool {
	for _, l := range d.current.levels {
		if len(l) > 0 {
			return false
		}
	}
	return true
}

// Close releases every open file. It does not persist: a reopen recovers the
// last persist point, so a caller wanting the installed state back calls
// Persist first. If a manifest write failed since the last successful one,
// Close first writes a new manifest (as Sync) and returns that write's error
// if it fails — the DB still closes, and a reopen may then also see the
// persist point whose Persist failed (never anything else). WriteL0 and CompactionJob.Run must not be running
// (the root closes the scheduler first); pending files and jobs not installed
// are left on disk for the next Open to delete. Close releases the
// directory's LOCK whatever else fails. A second Close returns base.ErrClosed.
func (d *DB) Close() error {
	if d.closed {
		return base.ErrClosed
	}
	err := d.Sync()
	d.closed = true
	d.closeAll()
	if d.lock != nil {
		err = errors.Join(err, d.lock.Close())
		d.lock = nil
	}
	return err
}

// Sync settles the manifest if a failed write left it in doubt (doc.go,
// "Failed manifest writes"): it writes a new manifest (the persisted
// version, its persist point, the edits since) and points CURRENT at it.
// Otherwise it does nothing. It does not make a persist point: that is
// Persist. Owner only. Errors: I/O
// errors (base.ErrNoSpace), base.ErrClosed.
func (d *DB) Sync() error {
	if d.closed {
		return base.ErrClosed
	}
	if !d.broken && d.manifest != nil {
		return nil
	}
	if err := d.rotate(nil, nil); err != nil {
		d.broken = true
		d.m.manifestErrors++
		return err
	}
	return nil
}

// Persist makes the current version a persist point (doc.go, "Persist
// points"): it appends a persist-point record holding lastSeq and meta to the
// manifest, syncs it and replaces CURRENT with one naming that record (or,
// when the manifest is broken or past MaxManifestBytes, writes a new
// manifest holding a snapshot of the current version and the record, and
// points CURRENT at it). After a crash, Open
// recovers exactly the version of the last successful Persist, with its
// lastSeq and meta (PersistedMeta); installs since are lost. The recorded
// sequence number is max(lastSeq, LastSeq()). meta is the caller's opaque
// blob (the store's state registry), copied, at most MaxPersistMeta bytes.
//
// On success the files only the previous persisted version still held
// (compaction inputs since) are removed. On error nothing changes: the
// previous persist point stays the one Open recovers (the record may still
// have become durable, so the DB writes a new manifest before its next
// edit), and a later Persist may succeed. Owner only.
//
// Errors: base.ErrClosed; ErrMetaTooLarge (wrapped, with the size); I/O errors
// wrapped with the file name (base.ErrNoSpace for ENOSPC).
func (d *DB) Persist(lastSeq uint64, meta []byte) error {
	if d.closed {
		return base.ErrClosed
	}
	if len(meta) > MaxPersistMeta {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(meta), MaxPersistMeta)
	}
	pp := persistPoint{LastSeq: max(lastSeq, d.lastSeq), Meta: append([]byte{}, meta...)}
	if d.broken || d.manifest == nil || d.manifestLen >= d.opts.MaxManifestBytes {
		if err := d.rotate(nil, &pp); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return err
		}
	} else {
		e := &edit{HasNextFile: true, NextFile: d.nextFile.Load(), HasLastSeq: true, LastSeq: pp.LastSeq, Persist: &pp}
		payload := e.encode(nil)
		d.buf = appendRecord(d.buf[:0], payload)
		name := manifestName(d.dir, d.manifestNum)
		if _, err := d.manifest.Write(d.buf); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return ioError("append to", name, err)
		}
		if err := d.manifest.Sync(); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return ioError("sync", name, err)
		}
		d.manifestLen += int64(len(d.buf))
		d.m.manifestBytes += int64(len(d.buf))
		// CURRENT names the new persist point, so that recovery can tell
		// a manifest that lost it (damage) from one torn after it (a crash).
		c := current{Manifest: d.manifestNum, Synced: d.manifestLen, PersistEnd: d.manifestLen,
			PersistSeq: pp.LastSeq, PersistCRC: crc32.Checksum(payload, base.CRC32C)}
		if err := d.replaceCurrent(c); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return err
		}
		if err := syncDir(d.fs, d.dir); err != nil {
			d.broken = true
			d.m.manifestErrors++
			return err
		}
	}
	old := d.persisted
	d.persisted, d.pp, d.lastSeq = d.current, pp, pp.LastSeq
	d.current.refs++
	d.m.persists++
	if old != nil {
		d.unrefVersion(old)
	}
	return nil
}

// PersistedMeta returns the persist point Open recovered, or the last one
// Persist wrote since: its sequence number (max of Persist's lastSeq and
// LastSeq then) and a copy of its metadata (empty, not nil, if Persist got
// none). ok is false while there is none: a new DB, or one whose manifest
// held no persist point (it recovered empty). Owner only.
func (d *DB) PersistedMeta() (lastSeq uint64, meta []byte, ok bool) {
	if d.persisted == nil {
		return 0, nil, false
	}
	return d.pp.LastSeq, bytes.Clone(d.pp.Meta), true
}

func (d *DB) closeAll() {
	if d.manifest != nil {
		d.manifest.Close()
		d.manifest = nil
	}
	if d.current == nil {
		return
	}
	seen := map[*tableFile]bool{}
	vs := []*version{d.current, d.persisted}
	for _, s := range d.snaps {
		vs = append(vs, s.v) // Close ends every snapshot: its files are closed, not removed
		s.v = nil
	}
	d.snaps = nil
	for _, v := range vs {
		if v == nil {
			continue
		}
		for _, files := range v.levels {
			for _, t := range files {
				if !seen[t] {
					seen[t] = true
					d.releaseTable(t, false)
				}
			}
		}
	}
	d.current, d.persisted = nil, nil
}

// LastSeq returns the largest sequence number installed or persisted so far
// (InstallL0's and Persist's lastSeq, the files' MaxSeq); after Open, the
// recovered persist point's (0 without one): the root continues numbering
// writes after it (fresh.Options.StartSeq). Owner only.
func (d *DB) LastSeq() uint64 { return d.lastSeq }

// GetLoc is Get, also handing visit the place of each version (base.Loc:
// the table's file number, the data block, the offset in it), for ReadAt.
// As Get otherwise: owner only; allocates nothing.
func (d *DB) GetLoc(order uint64, key, userKey []byte, visit func(*base.Entry, base.Loc) bool) error {
	if d.closed {
		return base.ErrClosed
	}
	v := d.current
	cont := true
	var num uint64
	fn := func(e *base.Entry, block, off uint32) bool {
		cont = visit(e, base.Loc{File: num, Block: block, Off: off})
		return cont
	}
	for _, t := range v.levels[0] {
		if order < t.meta.MinOrder || order > t.meta.MaxOrder {
			continue
		}
		num = t.meta.Num
		if err := t.r.GetLoc(order, key, userKey, fn); err != nil {
			return err
		}
		if !cont {
			return nil
		}
	}
	for l := 1; l < len(v.levels); l++ {
		t := findFile(v.levels[l], order)
		if t == nil {
			continue
		}
		num = t.meta.Num
		if err := t.r.GetLoc(order, key, userKey, fn); err != nil {
			return err
		}
		if !cont {
			return nil
		}
	}
	return nil
}

// ReadAt calls visit with the version of (order, key) at loc, a place GetLoc
// reported; the entry is valid only during the call. It finds the table in
// the current version (L0 by number, L1+ by order) and reads one block,
// through the block cache. Owner only.
//
// Errors: base.ErrClosed; ErrLocGone when the current version no longer
// holds the table (an install since GetLoc); base.ErrCorruption for a
// damaged block or a place that does not hold a version of (order, key);
// I/O errors from the table file.
func (d *DB) ReadAt(order uint64, key []byte, loc base.Loc, visit func(*base.Entry)) error {
	if d.closed {
		return base.ErrClosed
	}
	v := d.current
	var t *tableFile
	for _, f := range v.levels[0] {
		// A clipped table's file may hold order outside its range: such a
		// place is not one GetLoc reports.
		if f.meta.Num == loc.File && order >= f.meta.MinOrder && order <= f.meta.MaxOrder {
			t = f
			break
		}
	}
	for l := 1; t == nil && l < len(v.levels); l++ {
		if f := findFile(v.levels[l], order); f != nil && f.meta.Num == loc.File {
			t = f
		}
	}
	if t == nil {
		return fmt.Errorf("%w: table %d", ErrLocGone, loc.File)
	}
	ok := false
	err := t.r.EntryAt(loc.Block, loc.Off, func(e *base.Entry) {
		if e.Order == order && bytes.Equal(e.Key, key) {
			ok = true
			visit(e)
		}
	})
	if err == nil && !ok {
		err = base.Corrupt(t.r.Name(), 0, nil, "block %d offset %d holds no version of the key read", loc.Block, loc.Off)
	}
	return err
}

// Get visits the versions of (key, userKey) with the given Order held in the
// DB, newest first — L0 files newest first, then L1, L2, … — until visit
// returns false. The entry and its slices are valid only during the call of
// visit. Get does not resolve anything: a caller wanting a value stops at the
// first entry that is not a KindListAppend operand; for a map entry, the
// map's clear is the KindTombstone of (key, nil), which the caller looks up
// too (or uses MapRange). Owner only; allocates nothing.
//
// Errors: base.ErrClosed; base.ErrCorruption (the sstable's
// *base.CorruptionError) for a damaged block; I/O errors from the table file.
func (d *DB) Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error {
	if d.closed {
		return base.ErrClosed
	}
	v := d.current
	cont := true
	fn := func(e *base.Entry) bool {
		cont = visit(e)
		return cont
	}
	for _, t := range v.levels[0] {
		if order < t.meta.MinOrder || order > t.meta.MaxOrder {
			continue
		}
		if err := t.r.Get(order, key, userKey, fn); err != nil {
			return err
		}
		if !cont {
			return nil
		}
	}
	for l := 1; l < len(v.levels); l++ {
		t := findFile(v.levels[l], order)
		if t == nil {
			continue
		}
		if err := t.r.Get(order, key, userKey, fn); err != nil {
			return err
		}
		if !cont {
			return nil
		}
	}
	return nil
}
