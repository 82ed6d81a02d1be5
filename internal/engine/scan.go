package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/slice"
)

// Key scans (doc.go, "Key scans"): one merged, ordered walk over every tier — the FreshTable's
// segments (sealed and active), the SliceTable, the lower tier — that yields each composite key
// of one state with live state once, in batches, with the number of its live entries. It is
// what the root's Store.Keys, KeysAndNamespaces, NumEntries and ApplyToAllKeys (Flink's
// KeyedStateBackend#getKeys, getKeysAndNamespaces, applyToAllKeys and the test backends'
// numKeyValueStateEntries) are built on.
//
// A step (Next) runs on the owner goroutine between two writes, so the tiers do not change
// under it and it pins nothing: it reads the tiers as a point read does. Between steps the
// scan keeps only its position (the last composite key it finished), its batch, and a sorted
// index of each FreshTable segment (below); the next step starts a new merge after the
// position over the tiers as they are then. So writes between steps — the caller's, between
// the keys of a batch — are allowed and simply seen or not: a key finished before is never
// visited again, a key that has state from before the scan to after its step is visited once,
// a key given state or cleared ahead of the position during the scan is visited or not as
// its state is when the walk reaches it.
//
// The FreshTable's segments are not sorted, so the scan sorts them itself, as a transform
// does (segmentEntries: a 40-byte segRec per live record, a radix sort on the order hash), and
// keeps the sorted records of each segment across steps: sealed segments never change, and of
// the active segment it indexes at each step only the records appended since the last
// (fresh.Table.ScanSegments, EntriesFrom), as a new sorted run of that segment, and decodes
// every record again when it reads it (fresh.SealedSegment.LiveEntryAt skips one marked dead
// since; a value rewritten in place shows its new bytes). Records behind the position (a key
// the scan finished: ApplyToAllKeys' function rewriting the key it visits) are not indexed, as
// no later step reads them. The newest two runs of a segment are
// sorted again as one, without their dead records, while the newer is at least half the size
// of the older (or there are more than maxSegRuns): run sizes fall geometrically, so over a
// scan whose caller writes between steps each record is sorted O(log n) times. The index of
// a segment that left the read path (transformed, flushed) is dropped before anything is
// read.

// ScanSpec selects what a Scan yields: the composite keys of one state id, of one namespace
// or all, inside a key-group range.
type ScanSpec struct {
	// State is the state id (bytes 2..3 of the composite key).
	State uint16
	// Namespace is the namespace keys must have, exactly (never a prefix), unless
	// AnyNamespace.
	Namespace    []byte
	AnyNamespace bool
	// KeyGroups bounds the scan: a key of another key group is never yielded.
	KeyGroups checkpoint.KeyGroupRange
}

// maxSegRuns bounds the sorted runs of one FreshTable segment's index (index merges the
// newest runs earlier when their sizes do not fall geometrically).
const maxSegRuns = 8

// scanHeapRecs is the largest record index (in bytes) a scan keeps on the Go heap; a larger
// one is mapped outside the heap (memory.MapScratch), as a transform's sort buffer.
const scanHeapRecs = 1 << 20

// Scan is a key scan (Engine.NewScan). Owner goroutine only; not safe for concurrent use.
type Scan struct {
	t        *Engine
	spec     ScanSpec
	lo, hi   uint64 // order hashes of spec.KeyGroups
	pos      []byte // composite key of the last run finished (valid if started)
	posOrder uint64
	started  bool
	done     bool
	err      error
	listed   bool // in t.scans

	segs  []*scanSeg             // FreshTable segment indexes, oldest first
	segs2 []*scanSeg             // refresh's other buffer
	hs    []*fresh.SealedSegment // ScanSegments' output (reused)
	tmp   scanRecs               // radix sort scratch
	its   []scanRunIter
	srcs  []base.Iterator
	m     base.MergingIter
	sc    slice.Cursor
	low   LowerScan
	run   scanRun
	stage []byte // the batch's composite keys, back to back
	ends  []int  // end of each staged key in stage
	keys  [][]byte
	cnts  []int64
}

// scanRun is the resolution of one run (the versions of one composite key) in progress.
type scanRun struct {
	key        []byte // copy
	order      uint64
	keyDecided bool   // the newest key-level version was seen
	keyLive    bool   // and it is not a tombstone
	cleared    bool   // a KindTombstone was seen: map entries older than clearSeq are hidden
	clearSeq   uint64 // the newest KindTombstone's seq
	inGroup    bool   // uk is the current map user key (its newest version was seen)
	uk         []byte // copy
	entries    int64  // live map entries
}

// NewScan returns a scan of spec positioned before the first key. It reads nothing until
// Next. The caller must Close it. Owner goroutine only.
func (t *Engine) NewScan(spec ScanSpec) *Scan {
	s := &Scan{t: t, spec: spec}
	s.lo, s.hi = t.orderRange(spec.KeyGroups)
	t.scans = append(t.scans, s)
	s.listed = true
	return s
}

// Next reads the next batch of at most limit composite keys of live state, in scan order
// (order hash, then key bytes), each with its number of live entries (1 for a value, reducing
// or aggregating state and for a list; the live entries of a map). An empty batch with a nil
// error is the end. The keys are copies in one new arena per batch, valid as long as the
// caller keeps them; the counts slice is reused by the next Next. Errors, after which the scan
// yields nothing more: ErrCorruption (a damaged file, a malformed key), the lower tier's I/O
// errors, a failed mapping of the scan's index (its memory is outside the budget: doc.go), and
// ErrClosed once the engine closed.
func (s *Scan) Next(limit int) ([][]byte, []int64, error) {
	if s.err != nil || s.done {
		return nil, nil, s.err
	}
	if !s.listed {
		s.err = ErrClosed
		return nil, nil, s.err
	}
	if s.t.tail != nil {
		if err := s.t.awaitTail(); err != nil { // a lazy restore's tail (doc.go, invariant 33)
			s.err = err
			return nil, nil, s.err
		}
	}
	limit = max(limit, 1)
	if cap(s.ends) < limit { // sized once, not grown key by key
		s.ends, s.cnts, s.keys = make([]int, 0, limit), make([]int64, 0, limit), make([][]byte, 0, limit)
		s.stage = make([]byte, 0, 32*limit)
	}
	s.stage, s.ends, s.cnts = s.stage[:0], s.ends[:0], s.cnts[:0]
	if err := s.step(limit); err != nil {
		s.err = err
		s.release()
		return nil, nil, err
	}
	if len(s.ends) == 0 {
		return nil, nil, nil
	}
	arena := append([]byte(nil), s.stage...)
	s.keys = s.keys[:0]
	start := 0
	for _, end := range s.ends {
		s.keys = append(s.keys, arena[start:end:end])
		start = end
	}
	clear(s.keys[len(s.keys):cap(s.keys)])
	return s.keys, s.cnts, nil
}

// Close releases the scan's indexes, buffers and lower-tier walk. Idempotent.
func (s *Scan) Close() {
	s.release()
	if s.listed {
		s.listed = false
		for i, x := range s.t.scans {
			if x == s {
				s.t.scans = append(s.t.scans[:i], s.t.scans[i+1:]...)
				break
			}
		}
	}
	s.done = true
}

// release frees what the scan holds (Close, an error, the engine's Close).
func (s *Scan) release() {
	for _, g := range s.segs {
		g.recs.free()
	}
	clear(s.segs)
	s.segs = s.segs[:0]
	s.tmp.free()
	if s.low != nil {
		// The next scan reuses the walk and its read buffers (one per table it read, 256
		// KiB each): a TTL cleanup cursor over a small state starts a scan every few
		// accesses, and allocating them anew was most of its time.
		if t := s.t; t.spareLow == nil && s.listed {
			s.low.Release()
			t.spareLow = s.low
		} else {
			s.low.Close()
		}
		s.low = nil
	}
	clear(s.its)
	clear(s.srcs)
	s.its, s.srcs = s.its[:0], s.srcs[:0]
	s.m.Init(nil)
	s.sc = slice.Cursor{}
}

// closeScans ends every open scan (Engine.Close): their memory goes, later Next calls report
// ErrClosed.
func (t *Engine) closeScans() {
	for _, s := range t.scans {
		s.release()
		s.listed = false
	}
	t.scans = nil
}

// step runs one batch: it brings the segment indexes up to date, merges every tier from the
// position on, and resolves runs until the batch holds limit keys and the next run begins, or
// the tiers end.
func (s *Scan) step(limit int) error {
	t := s.t
	if err := s.refresh(); err != nil {
		return err
	}
	start := s.lo
	if s.started {
		start = max(start, s.posOrder)
	}
	// Sources newest first: FreshTable segments (newest first, and a segment's runs), the
	// SliceTable, the lower tier. Ties are the same version in two sources; any order does.
	n := 0
	for _, g := range s.segs {
		n += len(g.runs)
	}
	if cap(s.its) < n {
		s.its = make([]scanRunIter, 0, n)
	}
	s.its, s.srcs = s.its[:0], s.srcs[:0]
	for i := len(s.segs) - 1; i >= 0; i-- {
		g := s.segs[i]
		for r := range g.runs {
			lo, hi := g.runs[r], len(g.recs.r)
			if r+1 < len(g.runs) {
				hi = g.runs[r+1]
			}
			recs := g.recs.r[lo:hi]
			s.its = append(s.its, scanRunIter{h: g.h, recs: recs, i: firstOrder(recs, start) - 1})
		}
	}
	for i := range s.its {
		s.srcs = append(s.srcs, &s.its[i])
	}
	s.sc.Reset(t.sl, start)
	s.srcs = append(s.srcs, &s.sc)
	if t.low != nil {
		if s.low == nil {
			s.low, t.spareLow = t.spareLow, nil
		}
		low, err := t.low.Scan(s.low, start, s.hi)
		s.low = low
		if err != nil {
			return err
		}
		s.srcs = append(s.srcs, low)
	}
	defer func() {
		if s.low != nil {
			s.low.Release()
		}
	}()
	s.m.Init(s.srcs)
	r := &s.run
	inRun, full := false, false
	for s.m.Next() {
		e := s.m.Entry()
		if e.Order > s.hi {
			break
		}
		if s.started && e.Order == s.posOrder && bytes.Compare(e.Key, s.pos) <= 0 {
			continue // finished by an earlier step
		}
		if inRun && e.Order == r.order && bytes.Equal(e.Key, r.key) {
			r.add(e)
			continue
		}
		ok, err := s.match(e.Key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if inRun {
			s.finish()
			if len(s.ends) >= limit {
				full = true
				break
			}
		}
		r.begin(e)
		inRun = true
		r.add(e)
	}
	if err := s.m.Err(); err != nil {
		return err
	}
	if !full {
		if inRun {
			s.finish()
		}
		s.done = true
	}
	return nil
}

// match reports whether composite key k belongs to the scan: its key group in range, its state
// id, and (unless AnyNamespace) exactly its namespace — the key's length prefix tells where the
// namespace begins, so a namespace that is a prefix of another never matches it (FLINK-8679).
func (s *Scan) match(k []byte) (bool, error) {
	if len(k) < 5 {
		return false, base.Corrupt("", -1, nil, "malformed composite key %x", k)
	}
	kg := uint16(k[0])<<8 | uint16(k[1])
	if !s.spec.KeyGroups.Contains(int(kg)) {
		return false, nil
	}
	if uint16(k[2])<<8|uint16(k[3]) != s.spec.State {
		return false, nil
	}
	if s.spec.AnyNamespace {
		return true, nil
	}
	n, m := binary.Uvarint(k[4:])
	if m <= 0 || n > uint64(len(k)-4-m) {
		return false, base.Corrupt("", -1, nil, "malformed composite key %x", k)
	}
	return bytes.Equal(k[4+m+int(n):], s.spec.Namespace), nil
}

// begin starts the run of e's composite key.
func (r *scanRun) begin(e *base.Entry) {
	r.key = append(r.key[:0], e.Key...)
	r.order = e.Order
	r.keyDecided, r.keyLive, r.cleared, r.clearSeq, r.inGroup, r.entries = false, false, false, 0, false, 0
}

// add feeds one version of the run, in entry order (user keys ascending, each user key's
// versions newest first; key-level versions are in the group of the empty user key). It applies
// the merge rules (base doc, "Merge rules") as far as liveness needs them: the newest key-level
// version decides the key (a value, a list base or a list operand — whatever lies under an
// operand, the list has its elements — is live; a tombstone is not: rule 1 and 2); a map entry
// is live when the newest version of its user key is an entry newer than the newest
// KindTombstone of the map (rules 1 and 5). Value bytes are never read.
func (r *scanRun) add(e *base.Entry) {
	switch e.Kind {
	case base.KindMapEntry, base.KindMapEntryTombstone:
		if r.inGroup && bytes.Equal(e.UserKey, r.uk) {
			return // an older version of the user key
		}
		r.uk = append(r.uk[:0], e.UserKey...)
		r.inGroup = true
		if e.Kind == base.KindMapEntry && (!r.cleared || e.Seq > r.clearSeq) {
			r.entries++
		}
	default:
		if e.Kind == base.KindTombstone && !r.cleared {
			r.cleared, r.clearSeq = true, e.Seq
		}
		if !r.keyDecided {
			r.keyDecided, r.keyLive = true, e.Kind != base.KindTombstone
		}
	}
}

// finish ends the current run: a live one joins the batch; either becomes the position.
func (s *Scan) finish() {
	r := &s.run
	if n := r.entries; r.keyLive || n > 0 {
		if r.keyLive {
			n++
		}
		s.stage = append(s.stage, r.key...)
		s.ends = append(s.ends, len(s.stage))
		s.cnts = append(s.cnts, n)
	}
	s.pos = append(s.pos[:0], r.key...)
	s.posOrder, s.started = r.order, true
}

// scanSeg is the index of one FreshTable segment: its live records (as of when each was
// indexed) sorted in runs.
type scanSeg struct {
	h    *fresh.SealedSegment // the segment's handle, or the active segment's view of this step
	recs scanRecs
	runs []int  // start of each sorted run in recs.r, ascending
	upto uint32 // segment bytes indexed
}

// refresh brings the segment indexes up to date with the FreshTable (the start of a step):
// indexes of segments that left the read path are dropped, new segments and the records
// appended to the active one since the last step are indexed.
func (s *Scan) refresh() error {
	t := s.t
	s.hs = t.f.ScanSegments(s.hs[:0])
	old := s.segs
	next := s.segs2[:0]
	for _, h := range s.hs {
		var g *scanSeg
		for i, x := range old {
			if x != nil && x.h.Same(h) {
				g, old[i] = x, nil
				break
			}
		}
		if g == nil {
			g = &scanSeg{}
		}
		g.h = h
		next = append(next, g)
	}
	for _, g := range old {
		if g != nil {
			g.recs.free() // its segment left the read path: its offsets mean nothing now
		}
	}
	clear(old)
	s.segs, s.segs2 = next, old[:0]
	clear(s.hs)
	for _, g := range s.segs {
		if err := s.index(g); err != nil {
			return err
		}
	}
	return nil
}

// index adds the records of g's segment past g.upto to its index as a new sorted run, and
// merges its newest runs (below).
func (s *Scan) index(g *scanSeg) error {
	end := uint32(g.h.DataBytes())
	if end <= g.upto {
		return nil
	}
	start := len(g.recs.r)
	// A first guess of the records appended, as segmentEntries makes (mapped pages cost
	// nothing until touched): growing by doubling copied the index and faulted in new
	// mappings several times per segment.
	if err := g.recs.reserve(start + int(end-g.upto)/24); err != nil {
		return err
	}
	it := g.h.EntriesFrom(g.upto)
	for it.Next() {
		e := it.Entry()
		h, kg, ok := base.HashCompositeKey(e.Key)
		if !ok {
			return base.Corrupt("", -1, nil, "malformed composite key %x", e.Key)
		}
		r := segRec{order: base.OrderHash(kg, s.t.stride, h), hash: h, off: it.Offset(), kref: it.KeyRef()}
		if s.started && (r.order < s.posOrder || r.order == s.posOrder && bytes.Compare(e.Key, s.pos) <= 0) {
			continue // behind the position: no later step reads it (ApplyToAllKeys' own writes)
		}
		if n := len(e.UserKey); n > 0 {
			var p [8]byte
			copy(p[:], e.UserKey)
			r.tie, r.uklen = binary.BigEndian.Uint64(p[:]), uint8(min(n, 255))
		}
		if err := g.recs.append(r); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	g.upto = end
	if len(g.recs.r) == start {
		return nil
	}
	if err := s.sort(g.h, g.recs.r[start:]); err != nil {
		return err
	}
	g.runs = append(g.runs, start)
	// Merge the newest two runs while the newest is at least half the size of the one before
	// it, or there are too many: run sizes then fall geometrically, and a record is sorted
	// again O(log n) times over the scan, not once per step (an ApplyToAllKeys whose function
	// writes appends a run per step).
	for n := len(g.runs); n > 1; n = len(g.runs) {
		prev, last := g.runs[n-2], g.runs[n-1]
		if 2*(len(g.recs.r)-last) < last-prev && n <= maxSegRuns {
			break
		}
		// One run from prev on, without the records dead since they were indexed or behind
		// the position.
		live := g.recs.r[:prev]
		for _, r := range g.recs.r[prev:] {
			if r.order < s.posOrder {
				continue
			}
			_, ok, err := g.h.LiveEntryAt(r.off)
			if err != nil {
				return err
			}
			if ok {
				live = append(live, r)
			}
		}
		g.recs.r = live
		g.runs = g.runs[:n-1]
		if err := s.sort(g.h, live[prev:]); err != nil {
			return err
		}
	}
	return nil
}

// sort sorts recs (live records of seg) in entry order, as a transform does. The radix sort's
// scratch is the transforms' (Engine.sb.tmp, already mapped and faulted in) when no transform
// holds it — the sort ends before the step does — else the scan's own.
func (s *Scan) sort(seg *fresh.SealedSegment, recs []segRec) error {
	if len(recs) >= 64 {
		if sb := &s.t.sb; sb.busy.CompareAndSwap(false, true) {
			tmp, err := sb.tmp.grow(sb.tmp.recs(), len(recs))
			if err == nil {
				radixSortSegRecs(recs, tmp)
			}
			sb.busy.Store(false)
			if err != nil {
				return err
			}
			return sortEqualOrders(seg, recs)
		}
		if err := s.tmp.reserve(len(recs)); err != nil {
			return err
		}
	}
	radixSortSegRecs(recs, s.tmp.r[:0])
	return sortEqualOrders(seg, recs)
}

// scanRecs is a growable []segRec: on the Go heap while small, mapped outside it (like a
// transform's recBuf) once larger than scanHeapRecs bytes.
type scanRecs struct {
	r   []segRec
	mem []byte // the mapping r lies in (nil: r is on the heap)
}

func (b *scanRecs) append(x segRec) error {
	if len(b.r) == cap(b.r) {
		if err := b.reserve(len(b.r) + 1); err != nil {
			return err
		}
	}
	b.r = append(b.r, x)
	return nil
}

// reserve makes room for n records, keeping the ones held.
func (b *scanRecs) reserve(n int) error {
	if n <= cap(b.r) {
		return nil
	}
	size := int(unsafe.Sizeof(segRec{}))
	c := max(n, 2*cap(b.r), 64)
	if c*size <= scanHeapRecs {
		r := make([]segRec, len(b.r), c)
		copy(r, b.r)
		b.r = r
		return nil
	}
	mem, err := memory.MapScratch(c * size)
	if err != nil {
		return fmt.Errorf("a key scan's index of %d records: %w", c, err)
	}
	r := unsafe.Slice((*segRec)(unsafe.Pointer(unsafe.SliceData(mem))), c)[:len(b.r)]
	copy(r, b.r)
	b.free()
	b.r, b.mem = r, mem
	return nil
}

// free drops the records (unmapping them when mapped).
func (b *scanRecs) free() {
	if b.mem != nil {
		if err := memory.UnmapScratch(b.mem); err != nil {
			panic("strata: invariant: munmap of a key scan's index failed: " + err.Error())
		}
	}
	b.r, b.mem = nil, nil
}

// firstOrder returns the index of the first record of sorted recs with an order hash of at
// least order.
func firstOrder(recs []segRec, order uint64) int {
	lo, hi := 0, len(recs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if recs[m].order < order {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// scanRunIter is the base.Iterator over one sorted run of a segment's index: it decodes each
// record when it reaches it and skips the ones dead since they were indexed.
type scanRunIter struct {
	h       *fresh.SealedSegment
	recs    []segRec
	i       int
	e       base.Entry
	err     error
	touched byte // keeps the touches' loads alive (segIter)
}

func (it *scanRunIter) Next() bool {
	for it.err == nil {
		it.i++
		if it.i >= len(it.recs) {
			return false
		}
		if it.i%touchBatch == 0 { // overlap the cache misses of a batch, as a transform does
			it.touched ^= touchRecs(it.h, it.recs[it.i:min(it.i+touchBatch, len(it.recs))])
		}
		r := &it.recs[it.i]
		e, live, err := it.h.LiveEntryAt(r.off)
		if err != nil {
			it.err = err
			return false
		}
		if !live {
			continue
		}
		e.Hash, e.Order = r.hash, r.order
		it.e = e
		return true
	}
	return false
}

func (it *scanRunIter) Entry() *base.Entry { return &it.e }
func (it *scanRunIter) Err() error         { return it.err }
