package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/scheduler"
)

// Bulk changelog replay (doc.go, "Bulk changelog replay"; invariants 15-18).

const (
	// bulkRecords and bulkBytes bound one batch of a bulk replay: its sort index (40 bytes per
	// record, outside the Go heap) and the L0 file it becomes (about its record bytes).
	bulkRecords = 1 << 20
	bulkBytes   = 256 << 20
)

// maxBulkParts bounds the parts one batch is split into (invariant 30).
const maxBulkParts = 8

// DefaultBulkParallelMin is the fewest records of a batch that a bulk replay splits into parts
// (Options.BulkParallelMin): below it a task's start and one more L0 file cost more than the
// half of the sort and write they move to another core.
const DefaultBulkParallelMin = 1 << 15

// bulkSource is the records a bulk replay reads, in seq order, by index: a changelog.Batch
// (a changelog tail) or BulkEntries (a canonical savepoint's entries, BulkLoad).
type bulkSource interface {
	Len() int
	Record(i int, r *changelog.Record) error
	// Touch loads record i's first byte (and what locates it) and returns it: a group of
	// records touched before they are decoded in key order has its cache misses overlap.
	Touch(i int) byte
}

// canBulkReplay reports whether a replay may go in bulk (invariant 15): a lower tier to write
// to and nothing in the upper tiers nor in flight toward the lower one (and not
// Options.ReplayByApply).
func (t *Engine) canBulkReplay() bool {
	if t.replayByApply || t.low == nil || t.eviction != nil || len(t.compactions) != 0 || len(t.fifo) != 0 {
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
// the new files start at once; without, at the next kick (a write's). A lazy tail still
// pending is installed first (invariant 34). Owner only; the caller checked canBulkReplay.
// Errors: a *base.CorruptionError naming object for a record of an unknown kind; the lower
// tier's (ErrNoSpace, I/O); ctx's; a lazy tail's failure.
func (t *Engine) bulkReplay(ctx context.Context, b bulkSource, keep []bool, object string, kick bool) (applied, skipped int64, err error) {
	if t.tail != nil {
		if err := t.awaitTail(); err != nil {
			return 0, 0, err
		}
	}
	err = t.bulkWrite(ctx, b, keep, object, t.f.Seq(), t.forEachParallel, func(bb *bulkBatch) error {
		if bb.err == nil {
			bb.err = t.installBulkParts(bb.ps)
		}
		if bb.err != nil {
			for _, p := range bb.ps {
				t.low.Discard(p)
			}
			return bb.err
		}
		t.installedBulk(bb)
		applied, skipped = applied+bb.applied, skipped+bb.skipped
		return nil
	})
	if applied > 0 && kick {
		t.kick() // LSM compactions of the new L0 files
	}
	return applied, skipped, err
}

// BulkReplayed returns the L0 files bulk changelog replays installed since Open (restores and
// the lazy tail, which installs after Restore returns) and how many of their batches were split
// into parts by key-group range and written at once (invariant 30): the root's
// RestoreStats.BulkFiles and BulkParallelBatches. Owner goroutine.
func (t *Engine) BulkReplayed() (files, parallel int64) { return t.bulkFiles, t.bulkParallel }

// installedBulk does the owner's bookkeeping of one batch's files just installed (bulkReplay,
// awaitTail): counts, the epoch, the L0 count, the caches the lower tier's data may map.
func (t *Engine) installedBulk(bb *bulkBatch) {
	t.bulkFiles += int64(len(bb.ps))
	if bb.parallel {
		t.bulkParallel++
	}
	t.bumpEpoch()
	t.noteL0()
	t.mapCaches()
}

// bulkBatch is what bulkWrite made of one batch: its parts' pending runs (not installed), the
// Resolver's counts, whether it was split into parts, and the first part's error.
type bulkBatch struct {
	ps               []any
	parallel         bool
	applied, skipped int64
	err              error
}

// bulkWrite is bulkReplay without the install: it cuts b (the records keep marks) into
// batches of at most bulkRecords records and bulkBytes bytes in seq order, splits a batch
// large enough into parts by key-group range (invariant 30), runs its parts on lanes (the
// owner's forEachParallel, or the lazy tail driver's lanes) and calls each with every batch
// written — with a failed one too (bb.err set; its written runs in bb.ps for the caller to
// discard), then stops. each's error stops it too. No record may have a seq above maxSeq (the
// FreshTable's: invariant 16). It touches no tier but through Evict (WriteL0) and reads only
// b, so it may run on a task (invariant 32); the sort buffers it takes (Engine.sb) are given
// back before it returns. Errors: each's; a *base.CorruptionError naming object for a record
// of an unknown kind or without a composite key; ctx's; the sort buffer's mapping; a b of
// more than 2^32 records (its sort records number them in 32 bits).
func (t *Engine) bulkWrite(ctx context.Context, b bulkSource, keep []bool, object string, maxSeqAllowed uint64,
	lanes func(name string, n int, f func(i int) error) error, each func(*bulkBatch) error) error {
	bufs := &t.sb
	if !bufs.busy.CompareAndSwap(false, true) {
		bufs = nil // in use (a transform, a lazy tail): the Go heap
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
	var err error
	n := b.Len()
	if n > math.MaxUint32 {
		return fmt.Errorf("strata: a changelog tail of %d records: more than a sort record addresses (2^32)", n)
	}
	// The batch's records per key group, for the parts' cuts (nil: one part).
	var hist []int32
	if _, ok := t.low.(lowerInstallAll); ok && t.sched.Workers() > 0 && min(n, bulkRecords) >= t.bulkParallelMin {
		hist = make([]int32, 1<<16)
	}
	for lo := 0; lo < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs = recs[:0]
		clear(hist)
		size := 0
		hi := lo
		for ; hi < n && len(recs) < bulkRecords && size < bulkBytes; hi++ {
			if keep != nil && !keep[hi] {
				continue
			}
			if err := b.Record(hi, &r); err != nil {
				return err
			}
			if _, ok := opEntryKind(OpKind(r.Kind)); !ok {
				return base.Corrupt(object, -1, nil, "changelog record of seq %d has the unknown kind %d", r.Seq, r.Kind)
			}
			h, kg, ok := base.HashCompositeKey(r.Key)
			if !ok {
				return base.Corrupt(object, -1, nil, "changelog record of seq %d has no composite key", r.Seq)
			}
			sr := segRec{order: base.OrderHash(kg, t.stride, h), hash: h, off: uint32(hi)}
			if bufs != nil && len(recs) == cap(recs) {
				if recs, err = bufs.recs.grow(recs, max(len(recs)+1, min(n-lo, bulkRecords))); err != nil {
					return err
				}
			}
			recs = append(recs, sr)
			if hist != nil {
				hist[kg]++
			}
			size += len(r.Key) + len(r.UserKey) + len(r.Value)
			maxSeq = max(maxSeq, r.Seq)
		}
		lo = hi
		if len(recs) == 0 {
			continue
		}
		if maxSeq > maxSeqAllowed {
			return fmt.Errorf("strata: invariant: a changelog record of seq %d is above the restored Store's seq %d", maxSeq, maxSeqAllowed)
		}
		slices.Reverse(recs) // newest first: the stable sort keeps a key's versions so
		if bufs != nil && len(recs) >= 64 {
			if tmp, err = bufs.tmp.grow(tmp, len(recs)); err != nil {
				tmp = nil
			}
		}
		var parts [maxBulkParts]bulkPart
		k := 1
		if hist != nil && len(recs) >= t.bulkParallelMin {
			if cap(tmp) < len(recs) {
				tmp = make([]segRec, len(recs))
			}
			k = t.splitBulkParts(recs, tmp[:len(recs)], hist, parts[:min(t.sched.Workers()+1, maxBulkParts)])
		}
		if k == 1 {
			parts[0] = bulkPart{recs: recs, tmp: tmp}
			t.writeBulkPart(b, &parts[0])
			tmp = parts[0].tmp
		} else {
			t.writeBulkParts(b, parts[:k], lanes)
		}
		bb := &bulkBatch{parallel: k > 1}
		for i := range parts[:k] {
			pt := &parts[i]
			if pt.p != nil {
				bb.ps = append(bb.ps, pt.p)
			}
			if bb.err == nil {
				bb.err = pt.err
			}
			bb.applied, bb.skipped = bb.applied+pt.in-pt.hidden, bb.skipped+pt.hidden
		}
		if err := each(bb); err != nil {
			return err
		}
		if bb.err != nil {
			return bb.err
		}
	}
	return nil
}

// bulkPart is one key-group range of a batch (invariant 30): its records, newest first until
// sorted, the scratch of its sort, and what writing it gave.
type bulkPart struct {
	recs, tmp  []segRec
	p          any // the lower tier's pending run (nil: not written)
	in, hidden int64
	err        error
}

// splitBulkParts splits recs (newest first) into at most len(parts) parts by key-group range,
// the cuts placed where the running count of hist (the records per key group) passes each
// equal share: it scatters recs into tmp stably, part after part, and sets parts[i].recs to
// part i's range of tmp and parts[i].tmp to the same range of recs (its sort's scratch). It
// returns the number of parts, 1 (parts untouched) when every record lies in one part.
func (t *Engine) splitBulkParts(recs, tmp []segRec, hist []int32, parts []bulkPart) int {
	total := len(recs)
	k := len(parts)
	var bounds [maxBulkParts - 1]uint64 // part i holds the orders in [bounds[i-1], bounds[i])
	nb, cum := 0, 0
	for kg := 0; kg < len(hist) && nb < k-1; kg++ {
		if hist[kg] == 0 {
			continue // no empty part
		}
		cum += int(hist[kg])
		if cum >= total {
			break
		}
		if cum*k >= (nb+1)*total {
			bounds[nb] = uint64(kg+1) * t.stride
			nb++
		}
	}
	if nb == 0 {
		return 1
	}
	partOf := func(order uint64) int {
		i := 0
		for i < nb && order >= bounds[i] {
			i++
		}
		return i
	}
	var counts [maxBulkParts]int
	for i := range recs {
		counts[partOf(recs[i].order)]++
	}
	var offs [maxBulkParts]int
	for i, off := 0, 0; i <= nb; i++ {
		offs[i] = off
		parts[i] = bulkPart{recs: tmp[off : off+counts[i] : off+counts[i]], tmp: recs[off : off+counts[i] : off+counts[i]]}
		off += counts[i]
	}
	for i := range recs {
		p := partOf(recs[i].order)
		tmp[offs[p]] = recs[i]
		offs[p]++
	}
	return nb + 1
}

// writeBulkParts writes every part of parts (writeBulkPart) at once on lanes
// (forEachParallel, or the lazy tail's) and returns once all of them ended (invariant 30),
// each part's outcome in its err.
func (t *Engine) writeBulkParts(b bulkSource, parts []bulkPart, lanes func(name string, n int, f func(i int) error) error) {
	err := lanes("bulk replay", len(parts), func(i int) error {
		t.writeBulkPart(b, &parts[i])
		return parts[i].err
	})
	if err != nil && parts[0].err == nil {
		parts[0].err = err // a part that never ran (the scheduler refused its lane), or a panic
	}
}

// forEachParallel calls f(i) for every i in [0, n) on up to min(n, workers+1, maxBulkParts)
// lanes, each taking the next i in turn until none is left or a call failed: lane 0 on the
// owner (which would otherwise only wait), the others as Transform tasks of the scheduler
// (so the work gets the scheduler's workers and no goroutine of its own). It returns once
// every lane ended, with an error of f (or a lane's: the scheduler refused or cancelled it,
// or f panicked there) — then some i may not have been called. f must be safe to call
// concurrently for different i. Owner only.
func (t *Engine) forEachParallel(name string, n int, f func(i int) error) error {
	return t.forEachLanes(name, n, min(n, t.sched.Workers()+1, maxBulkParts), f)
}

// forEachInTask is forEachParallel for a scheduler task (the lazy tail's driver): the caller
// holds a worker and is lane 0, so it submits at most workers-1 lanes — a lane queued behind
// the caller's own worker would never run while the caller waits for it (scheduler.Handle.
// Wait). Safe on any goroutine.
func (t *Engine) forEachInTask(name string, n int, f func(i int) error) error {
	return t.forEachLanes(name, n, min(n, max(t.sched.Workers(), 1), maxBulkParts), f)
}

// forEachLanes is forEachParallel on lanes lanes (at most maxBulkParts): lane 0 on the calling
// goroutine, the others Transform tasks. It returns only after every lane ended; a lane's
// panic is its error (recoverInto), lane 0's too.
func (t *Engine) forEachLanes(name string, n, lanes int, f func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	var errs [maxBulkParts]error
	lane := func(l int) error {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				break
			}
			if errs[l] = f(i); errs[l] != nil {
				failed.Store(true)
			}
		}
		return errs[l]
	}
	var hs [maxBulkParts]*scheduler.Handle
	for l := 1; l < lanes; l++ {
		h, err := t.sched.SubmitMetered(scheduler.Transform, name, t.meter(BgTransform), func(context.Context) error {
			defer recoverInto(&errs[l], name)
			return lane(l)
		})
		if err != nil {
			break // refused (closed): the owner's lane and those submitted take every i
		}
		hs[l] = h
	}
	func() {
		// As on the other lanes, a panic is the lane's error: every lane is waited for below
		// before this returns, so what f reads — a Batch's off-heap buffer, the sort buffers —
		// is never released under a lane still running.
		defer func() {
			if errs[0] != nil {
				failed.Store(true)
			}
		}()
		defer recoverInto(&errs[0], name)
		lane(0)
	}()
	var first error
	for l := 1; l < lanes; l++ {
		if hs[l] == nil {
			continue
		}
		if err := hs[l].Wait(); err != nil && errs[l] == nil {
			errs[l] = err // cancelled before it ran
		}
	}
	for l := range lanes {
		if first == nil && errs[l] != nil {
			first = errs[l]
		}
	}
	return first
}

// writeBulkPart sorts pt.recs (newest first) into entry order, resolves them and writes them to
// the lower tier as one pending run in pt.p, with the Resolver's counts; the error in pt.err.
// It reads only b and pt (invariant 30), so parts run at once on different goroutines.
func (t *Engine) writeBulkPart(b bulkSource, pt *bulkPart) {
	pt.tmp = radixSortSegRecs(pt.recs, pt.tmp)
	if pt.err = sortEqualOrderRecords(b, pt.recs); pt.err != nil {
		return
	}
	it := &bulkIter{b: b, recs: pt.recs}
	it.res = base.Resolver{Stable: true, MaxList: base.MaxListPiece, Emit: it.emit}
	if pt.p, pt.err = t.low.Evict(it); pt.err != nil {
		pt.p = nil
		return
	}
	rs := it.res.Stats()
	pt.in, pt.hidden = rs.In, rs.Hidden
}

// installBulkParts installs the pending runs of one batch as the newest runs of the lower
// tier, together (install protocol item 6) where the tier can, at the FreshTable's seq.
func (t *Engine) installBulkParts(ps []any) error {
	if ia, ok := t.low.(lowerInstallAll); ok && len(ps) > 1 {
		return ia.InstallAll(ps, t.f.Seq())
	}
	for _, p := range ps { // one part (split only where the tier has InstallAll)
		if err := t.low.Install(p, t.f.Seq()); err != nil {
			return err
		}
	}
	return nil
}

// sortEqualOrderRecords orders every run of records with one order hash (the versions of a
// key, the entries of a map, colliding keys) by base.Compare on the decoded records, which
// the radix sort left newest first within the run.
func sortEqualOrderRecords(b bulkSource, recs []segRec) error {
	var ents []base.Entry
	var idx []int
	var out []segRec
	var r changelog.Record
	// The records of runs of more than one in recs[i:tp] have been touched (bulkSource.Touch),
	// tp kept touchWindow records ahead of i: they are decoded below, at random places of
	// the Batch, and touched ahead their misses overlap (bulkIter.touchAhead).
	const touchWindow = 4 * touchBatch
	var touched byte
	tp := 0
	for i := 0; i < len(recs); {
		if tp < i+touchWindow {
			end := min(i+2*touchWindow, len(recs))
			for k := max(tp, i); k < end; k++ {
				if (k > 0 && recs[k].order == recs[k-1].order) || (k+1 < len(recs) && recs[k].order == recs[k+1].order) {
					touched ^= b.Touch(int(recs[k].off))
				}
			}
			tp = end
		}
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
				out = out[:0]
				for _, x := range idx {
					out = append(out, run[x])
				}
				copy(run, out)
			}
		}
		i = j
	}
	touchSink.Store(uint32(touched))
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
	// dec holds the records recs[base:ahead], decoded ahead of the Resolver; the next
	// touchBatch records after them have been touched (touchAhead).
	dec         [touchBatch]changelog.Record
	base, ahead int
	touched     byte // keeps the loads of touchAhead alive (its value is meaningless)
	finished    bool
	err         error
}

// touchAhead touches the records recs[from:from+touchBatch] (bulkSource.Touch): they lie at
// random places of the Batch's spans (sorted by key, not by seq), so their cache and TLB
// misses, taken in a group of independent loads one group ahead of the decode, overlap with
// each other and with the Resolver's and the writer's work on the group before.
func (it *bulkIter) touchAhead(from int) {
	x := it.touched
	for _, sr := range it.recs[from:min(from+touchBatch, len(it.recs))] {
		x ^= it.b.Touch(int(sr.off))
	}
	it.touched = x
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
			// Decoded touchBatch at a time, touched one group ahead (touchAhead).
			if it.i == 0 {
				it.touchAhead(0)
			}
			it.base = it.i
			it.ahead = min(it.i+touchBatch, len(it.recs))
			it.touchAhead(it.ahead)
			for j := it.i; j < it.ahead; j++ {
				if it.err = it.b.Record(int(it.recs[j].off), &it.dec[j-it.i]); it.err != nil {
					return false
				}
			}
			// A record's value may reach a cache line or two past the one touched: loaded
			// together here, those misses overlap too before the writer copies the values.
			x := it.touched
			for j := range it.ahead - it.base {
				if v := it.dec[j].Value; len(v) > 0 {
					x ^= v[len(v)-1]
				}
			}
			it.touched = x
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

// OrdersHint is lsm.OrdersHinter: at most one distinct order hash per record.
func (it *bulkIter) OrdersHint() int { return len(it.recs) }

func (it *bulkIter) Entry() *base.Entry { return &it.cur }
func (it *bulkIter) Err() error         { return it.err }
