package lsm

import (
	"errors"
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm/sstable"
)

// PendingFile is a table file written by WriteL0 and not yet installed: it is
// complete and durable (file and directory entry synced) but no manifest
// names it, so no reader sees it and a crash makes it garbage that Open
// deletes. Give it to InstallL0 (again, after an error) or to Discard.
type PendingFile struct {
	t        *tableFile // nil for an empty batch
	ingested int64      // bytes of keys, user keys and values written
	maxSeq   uint64
	done     bool // installed or discarded
}

// Meta returns the file's manifest record (zero for an empty batch).
func (p *PendingFile) Meta() FileMeta {
	if p.t == nil {
		return FileMeta{}
	}
	return p.t.meta
}

// OrdersHinter is an optional interface of the iterator WriteL0 takes:
// OrdersHint returns about how many distinct Orders it will yield (an upper
// bound is fine), which sizes the table writer's list of them once
// (sstable.WriterOptions.OrdersHint).
type OrdersHinter interface {
	OrdersHint() int
}

// WriteL0 writes the entries of it, which must come in entry order (Order
// asc, Key asc, UserKey asc, Seq desc; sstable.ErrOutOfOrder otherwise), into
// a new table file, syncs the file and the directory, and opens it for
// reading. An empty iterator gives a PendingFile without a file (InstallL0
// then records only lastSeq). It is the write half of a flush or an eviction
// from the SliceTable and is safe to call from background goroutines
// concurrently with the owner and with other WriteL0 calls; it changes no
// version. On error the partial file is removed.
//
// Errors: the iterator's Err; sstable errors from Add; I/O errors wrapped with
// the file name (base.ErrNoSpace for ENOSPC).
func (d *DB) WriteL0(it base.Iterator) (*PendingFile, error) {
	p := &PendingFile{}
	if !it.Next() {
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("flush input: %w", err)
		}
		return p, nil
	}
	ow := d.newOutput()
	if h, ok := it.(OrdersHinter); ok {
		ow.ordersHint = h.OrdersHint()
	}
	for ok := true; ok; ok = it.Next() {
		e := it.Entry()
		if err := ow.add(e); err != nil {
			ow.abandon()
			return nil, err
		}
		p.ingested += int64(len(e.Key) + len(e.UserKey) + len(e.Value))
	}
	if err := it.Err(); err != nil {
		ow.abandon()
		return nil, fmt.Errorf("flush input: %w", err)
	}
	t, err := ow.finish()
	if err != nil {
		return nil, err
	}
	if err := syncDir(d.fs, d.dir); err != nil {
		d.releaseTable(t, true)
		return nil, err
	}
	if err := d.openTable(t, "flush"); err != nil {
		d.releaseTable(t, true)
		return nil, err
	}
	p.t, p.maxSeq = t, t.meta.MaxSeq
	return p, nil
}

// output is one table file being written by WriteL0 or a compaction.
type output struct {
	d          *DB
	t          *tableFile
	w          *sstable.Writer
	err        error
	open       bool
	ordersHint int // sstable.WriterOptions.OrdersHint of its file (WriteL0)
}

func (d *DB) newOutput() *output { return &output{d: d} }

func (o *output) add(e *base.Entry) error {
	if o.err != nil {
		return o.err
	}
	if !o.open {
		num := o.d.nextFile.Add(1) - 1
		o.t = &tableFile{meta: FileMeta{Num: num}, name: tableName(o.d.dir, num)}
		f, err := o.d.fs.Create(o.t.name)
		if err != nil {
			o.err = ioError("create", o.t.name, err)
			return o.err
		}
		o.t.f = f
		o.w = sstable.NewWriter(f, sstable.WriterOptions{BlockSize: o.d.opts.BlockSize, OrdersHint: o.ordersHint})
		o.open = true
	}
	if err := o.w.Add(e); err != nil {
		o.err = o.wrap("write", err)
		return o.err
	}
	if x := o.d.opts.Expiry; x != nil {
		x(&o.t.exp, e)
	}
	return nil
}

func (o *output) wrap(what string, err error) error {
	if errors.Is(err, sstable.ErrOutOfOrder) || errors.Is(err, sstable.ErrFinished) {
		return fmt.Errorf("%s %s: %w", what, o.t.name, err)
	}
	return ioError(what, o.t.name, err)
}

// finish completes the file (Finish syncs it) and closes the write handle.
// The returned tableFile has its meta set and no reader yet. On error the
// file is removed.
func (o *output) finish() (*tableFile, error) {
	if o.err != nil {
		o.abandon()
		return nil, o.err
	}
	m, err := o.w.Finish()
	if err != nil {
		err = o.wrap("finish", err)
		o.abandon()
		return nil, err
	}
	t := o.t
	if err := t.f.Close(); err != nil {
		t.f = nil
		o.d.releaseTable(t, true)
		return nil, ioError("close", t.name, err)
	}
	t.f = nil
	t.expKnown = o.d.opts.Expiry != nil
	t.meta = FileMeta{Num: t.meta.Num, Size: m.Size, Entries: m.Entries, Blocks: m.Blocks,
		Tombstones: m.Tombstones, MinOrder: m.MinOrder, MaxOrder: m.MaxOrder, MinSeq: m.MinSeq, MaxSeq: m.MaxSeq}
	o.t, o.w, o.open = nil, nil, false
	return t, nil
}

// abandon closes and removes a partial file.
func (o *output) abandon() {
	if o.t != nil {
		o.d.releaseTable(o.t, true)
	}
	o.t, o.w, o.open = nil, nil, false
}

// InstallL0 makes p's file the newest L0 file and records lastSeq (the
// largest sequence number the caller has now handed to the DB; the DB keeps
// the maximum of it and p's MaxSeq): one manifest record, synced, then the
// new version is current and reads see the file. It survives a crash or
// reopen only once a later Persist succeeds (doc.go, "Persist points").
// Owner only.
//
// The caller guarantees the install order contract (doc.go, invariant 6): for
// every (Order, Key), the entries of a file installed later are newer than
// those of every file installed before — the SliceTable evicts each bucket's
// oldest slices first.
//
// On error (I/O, base.ErrNoSpace) nothing is visible and p stays pending: call
// InstallL0 again or Discard. Errors: base.ErrClosed; an error if p was already
// installed or discarded.
func (d *DB) InstallL0(p *PendingFile, lastSeq uint64) error {
	return d.InstallL0s([]*PendingFile{p}, lastSeq)
}

// InstallL0s is InstallL0 of every file of ps at once: one manifest record
// adds them all (ps[len(ps)-1] the newest L0 file), so a crash or an error
// leaves all of them pending or none. The install order contract applies
// between the files of ps too; a caller that wrote them from disjoint Order
// ranges (a parallel bulk load) meets it in any order. Owner only. Errors as
// InstallL0; on error every file of ps stays pending.
func (d *DB) InstallL0s(ps []*PendingFile, lastSeq uint64) error {
	if d.closed {
		return base.ErrClosed
	}
	e := &edit{LastSeq: lastSeq}
	var added []*tableFile
	for _, p := range ps {
		if p.done {
			return errors.New("lsm: InstallL0 of a file already installed or discarded")
		}
		e.LastSeq = max(e.LastSeq, p.maxSeq)
		if p.t != nil {
			e.Added = append(e.Added, newFile{Level: 0, Meta: p.t.meta})
			added = append(added, p.t)
		}
	}
	if err := d.logAndApply(e, added); err != nil {
		return err
	}
	for _, p := range ps {
		p.done = true
		d.m.flushes++
		d.m.bytesIngested += p.ingested
		if p.t != nil {
			d.m.bytesFlushed += p.t.meta.Size
		}
	}
	return nil
}

// Discard drops a pending file that will not be installed: it closes it and
// removes it, or, if a failed manifest write may have named it, defers the
// removal until a new manifest is durable. Owner only; no effect on an
// installed or discarded file.
func (d *DB) Discard(p *PendingFile) {
	if p.done {
		return
	}
	p.done = true
	if p.t == nil {
		return
	}
	d.discardTable(p.t)
}

func (d *DB) discardTable(t *tableFile) {
	if d.broken {
		d.releaseTable(t, false)
		d.deferred = append(d.deferred, t.meta.Num)
		return
	}
	d.releaseTable(t, true)
}
