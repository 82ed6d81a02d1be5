package engine

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
)

// Bulk changelog replay (doc.go, "Bulk changelog replay"; invariants 15-18).

const (
	// bulkRecords and bulkBytes bound one batch of a bulk replay: its sort index (40 bytes per
	// record, outside the Go heap) and the L0 file it becomes (about its record bytes).
	bulkRecords = 1 << 20
	bulkBytes   = 256 << 20
)

// bulkSource is the records a bulk replay reads, in seq order, by index: a changelog.Batch
// (a changelog tail) or BulkEntries (a canonical savepoint's entries, BulkLoad).
type bulkSource interface {
	Len() int
	Record(i int, r *changelog.Record) error
}

// replayByApply makes every restore replay through Apply (ReplayByApply).
var replayByApply atomic.Bool

// ReplayByApply makes every changelog replay of the process go through Apply (on) or in bulk
// where it can (off, the default), and returns the previous setting: a hook for tests and
// benchmarks that compare the two paths in one run. Safe for concurrent use; a replay reads
// it once per restored checkpoint.
func ReplayByApply(on bool) bool { return replayByApply.Swap(on) }

// canBulkReplay reports whether a replay may go in bulk (invariant 15): a lower tier to write
// to and nothing in the upper tiers nor in flight toward the lower one.
func (t *Engine) canBulkReplay() bool {
	if replayByApply.Load() || t.low == nil || t.eviction != nil || len(t.compactions) != 0 || len(t.fifo) != 0 {
		return false
	}
	if t.rc != nil && t.rc.n > 0 {
		return false
	}
	if fs := t.f.Stats(); fs.Records != 0 || fs.Sealed != 0 {
		return false
	}
	return t.sl.Stats().Slices == 0
}

// opEntryKind returns the kind of the entry the FreshTable makes of a change of kind k (doc.go,
// "Bulk changelog replay"), and false for a kind it does not know.
func opEntryKind(k OpKind) (base.Kind, bool) {
	switch k {
	case OpPut:
		return base.KindValue, true
	case OpDelete, OpListDelete, OpMapClear:
		return base.KindTombstone, true
	case OpListAppend:
		return base.KindListAppend, true
	case OpListReplace:
		return base.KindListBase, true
	case OpMapPut:
		return base.KindMapEntry, true
	case OpMapRemove:
		return base.KindMapEntryTombstone, true
	}
	return 0, false
}

// bulkReplay writes the records of b that keep marks (replayKeep; nil: every record) to the
// lower tier in batches of consecutive records, each resolved and written as one L0 file and
// installed before the next (invariant 16). It returns the records that reached a file and
// those the Resolver found superseded (a newer version, a map clear or a duplicate hides
// them; a list's base joined with its operands counts too). With kick, the LSM compactions of
// the new files start at once; without, at the next kick (a write's). Owner only; the caller
// checked canBulkReplay. Errors: a *base.CorruptionError naming object for a record of an unknown kind;
// the lower tier's (ErrNoSpace, I/O); ctx's.
func (t *Engine) bulkReplay(ctx context.Context, b bulkSource, keep []bool, object string, kick bool) (applied, skipped int64, err error) {
	bufs := &t.sb
	if !bufs.busy.CompareAndSwap(false, true) {
		bufs = nil // in use (nothing should be in flight): the Go heap
	}
	defer func() {
		if bufs != nil {
			bufs.busy.Store(false)
		}
	}()
	var recs, tmp []segRec
	if bufs != nil {
		recs, tmp = bufs.recs.recs(), bufs.tmp.recs()
	}
	var r changelog.Record
	var maxSeq uint64
	n := b.Len()
	for lo := 0; lo < n; {
		if err := ctx.Err(); err != nil {
			return applied, skipped, err
		}
		recs = recs[:0]
		size := 0
		hi := lo
		for ; hi < n && len(recs) < bulkRecords && size < bulkBytes; hi++ {
			if keep != nil && !keep[hi] {
				continue
			}
			if err := b.Record(hi, &r); err != nil {
				return applied, skipped, err
			}
			if _, ok := opEntryKind(OpKind(r.Kind)); !ok {
				return applied, skipped, base.Corrupt(object, -1, nil, "changelog record of seq %d has the unknown kind %d", r.Seq, r.Kind)
			}
			h, kg, ok := base.HashCompositeKey(r.Key)
			if !ok {
				return applied, skipped, base.Corrupt(object, -1, nil, "changelog record of seq %d has no composite key", r.Seq)
			}
			sr := segRec{order: base.OrderHash(kg, t.stride, h), hash: h, off: uint32(hi)}
			if bufs != nil && len(recs) == cap(recs) {
				if recs, err = bufs.recs.grow(recs, max(len(recs)+1, min(n-lo, bulkRecords))); err != nil {
					return applied, skipped, err
				}
			}
			recs = append(recs, sr)
			size += len(r.Key) + len(r.UserKey) + len(r.Value)
			maxSeq = max(maxSeq, r.Seq)
		}
		lo = hi
		if len(recs) == 0 {
			continue
		}
		if maxSeq > t.f.Seq() {
			return applied, skipped, fmt.Errorf("strata: invariant: a changelog record of seq %d is above the restored Store's seq %d", maxSeq, t.f.Seq())
		}
		slices.Reverse(recs) // newest first: the stable sort keeps a key's versions so
		if bufs != nil && len(recs) >= 64 {
			if tmp, err = bufs.tmp.grow(tmp, len(recs)); err != nil {
				tmp = nil
			}
		}
		tmp = radixSortSegRecs(recs, tmp)
		if err := sortEqualOrderRecords(b, recs); err != nil {
			return applied, skipped, err
		}
		it := &bulkIter{b: b, recs: recs}
		it.res = base.Resolver{Stable: true, MaxList: base.MaxListPiece, Emit: it.emit}
		p, err := t.low.Evict(it)
		if err != nil {
			return applied, skipped, err
		}
		if err := t.low.Install(p, t.f.Seq()); err != nil {
			t.low.Discard(p)
			return applied, skipped, err
		}
		t.bulkFiles++
		t.bumpEpoch()
		t.noteL0()
		t.mapCaches()
		rs := it.res.Stats()
		applied, skipped = applied+rs.In-rs.Hidden, skipped+rs.Hidden
	}
	if applied > 0 && kick {
		t.kick() // LSM compactions of the new L0 files
	}
	return applied, skipped, nil
}

// sortEqualOrderRecords orders every run of records with one order hash (the versions of a
// key, the entries of a map, colliding keys) by base.Compare on the decoded records, which
// the radix sort left newest first within the run.
func sortEqualOrderRecords(b bulkSource, recs []segRec) error {
	var ents []base.Entry
	var idx []int
	var r changelog.Record
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].order == recs[i].order {
			j++
		}
		if j-i > 1 {
			run := recs[i:j]
			ents = ents[:0]
			for _, sr := range run {
				if err := b.Record(int(sr.off), &r); err != nil {
					return err
				}
				ents = append(ents, base.Entry{Order: sr.order, Seq: r.Seq, Key: r.Key, UserKey: r.UserKey})
			}
			sorted := true
			for k := 1; k < len(ents); k++ {
				if base.Compare(&ents[k-1], &ents[k]) > 0 {
					sorted = false
					break
				}
			}
			if !sorted {
				idx = idx[:0]
				for k := range run {
					idx = append(idx, k)
				}
				slices.SortFunc(idx, func(x, y int) int { return base.Compare(&ents[x], &ents[y]) })
				out := make([]segRec, len(run))
				for k, x := range idx {
					out[k] = run[x]
				}
				copy(run, out)
			}
		}
		i = j
	}
	return nil
}

// bulkIter is the base.Iterator lsm WriteL0 pulls from: the records of recs (entry order)
// fed to the Resolver, which pushes the resolved entries into a queue the iterator drains.
type bulkIter struct {
	b    bulkSource
	recs []segRec
	i    int
	res  base.Resolver
	q    []base.Entry // resolved entries not yet yielded; q[qi-1] is the current one
	qi   int
	// arena holds the values of queued list entries (a joined list lies in the Resolver's
	// buffer only during Emit); a new arena is started rather than grown, so queued values
	// never move.
	arena []byte
	cur   base.Entry
	in    base.Entry // the entry fed to the Resolver (a field: through Emit it escapes)
	// dec holds the records recs[base:ahead], decoded ahead of the Resolver.
	dec         [touchBatch]changelog.Record
	base, ahead int
	finished    bool
	err         error
}

func (it *bulkIter) emit(e *base.Entry) error {
	c := *e
	if (c.Kind == base.KindListBase || c.Kind == base.KindListAppend) && len(c.Value) > 0 {
		if cap(it.arena)-len(it.arena) < len(c.Value) {
			it.arena = make([]byte, 0, max(64<<10, len(c.Value)))
		}
		n := len(it.arena)
		it.arena = append(it.arena, c.Value...)
		c.Value = it.arena[n:len(it.arena):len(it.arena)]
	}
	it.q = append(it.q, c)
	return nil
}

func (it *bulkIter) Next() bool {
	for {
		if it.qi < len(it.q) {
			it.cur = it.q[it.qi]
			it.qi++
			return true
		}
		clear(it.q)
		it.q, it.qi, it.arena = it.q[:0], 0, it.arena[:0]
		if it.err != nil || it.finished {
			return false
		}
		if it.i == len(it.recs) {
			it.finished = true
			if it.err = it.res.Finish(); it.err != nil {
				return false
			}
			continue
		}
		if it.i == it.ahead {
			// The records lie at random places of the Batch's spans (sorted by key, not by
			// seq): decoded touchBatch at a time, the cache misses of independent records
			// overlap instead of stalling each decode.
			it.base = it.i
			it.ahead = min(it.i+touchBatch, len(it.recs))
			for j := it.i; j < it.ahead; j++ {
				if it.err = it.b.Record(int(it.recs[j].off), &it.dec[j-it.i]); it.err != nil {
					return false
				}
			}
		}
		sr, rec := &it.recs[it.i], &it.dec[it.i-it.base]
		it.i++
		k, _ := opEntryKind(OpKind(rec.Kind)) // checked by bulkReplay
		it.in = base.Entry{Order: sr.order, Hash: sr.hash, Seq: rec.Seq, Kind: k, Key: rec.Key, UserKey: rec.UserKey, Value: rec.Value}
		if k == base.KindMapEntry || k == base.KindMapEntryTombstone {
			it.in.UserHash = base.HashUserKey(rec.UserKey)
		} else {
			it.in.UserKey = nil
		}
		if it.err = it.res.Add(&it.in); it.err != nil {
			return false
		}
	}
}

func (it *bulkIter) Entry() *base.Entry { return &it.cur }
func (it *bulkIter) Err() error         { return it.err }
