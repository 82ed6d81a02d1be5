package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// The first half of a transform and of a flush: the live records of a sealed segment in entry
// order. Entries are not materialized on the Go heap: one pass over the segment keeps a 40-byte
// record per live entry (its order hash, its hash, its offset in the segment and a tie-break
// for the entries of one map; no pointers, so the garbage collector never scans it), a radix
// sort on the order hash puts them in order, runs of equal order hashes (the entries of one map,
// or hash collisions) are ordered by the tie-break, or by base.Compare on the decoded entries
// when the tie-break cannot decide, and the iterator decodes each entry again from the segment
// when the consumer reaches it, touching a batch of records first so that their cache misses
// overlap. The record buffers are mapped outside the Go heap and reused (recBuf).

// segRec is one live entry of a sealed segment, for the sort.
type segRec struct {
	order uint64 // entry.Order
	hash  uint64 // entry.Hash
	tie   uint64 // map entries: the first 8 bytes of UserKey, big-endian, zero-padded
	off   uint32 // the record's offset in the segment (fresh.SealedSegment.EntryAt)
	kref  uint32 // fresh.SealedIter.KeyRef: equal krefs, equal keys
	uklen uint8  // len(UserKey), capped at 255
}

// recBuf is a growable []segRec in memory mapped outside the Go heap (memory.MapScratch). A
// segment's records take about as much memory as the segment (40 bytes per entry; the radix
// sort's scratch as much again), outside the budget. On the Go heap and pooled, the last
// flush's buffers stayed live across the next one and the garbage collector paced the heap
// from twice their size (the namespaces shape of TestMemoryShapes: up to 174 MiB VmHWM of a 160
// MiB bound); allocated per transform, their page faults and collection slowed a transform by
// 40% (BenchmarkTransform). Mapped, they are outside the heap's pacing, their pages stay
// faulted in for the next transform, and Engine.Close unmaps them. segRec holds no pointers,
// so memory the collector does not scan may hold it.
type recBuf struct{ mem []byte }

// recs returns the buffer as records: length 0, capacity all of it.
func (b *recBuf) recs() []segRec {
	if len(b.mem) == 0 {
		return nil
	}
	return unsafe.Slice((*segRec)(unsafe.Pointer(unsafe.SliceData(b.mem))), len(b.mem)/int(unsafe.Sizeof(segRec{})))[:0]
}

// grow makes room for at least n records, keeping recs (a slice of b) in the new mapping.
func (b *recBuf) grow(recs []segRec, n int) ([]segRec, error) {
	if n <= cap(recs) && len(b.mem) > 0 {
		return recs, nil
	}
	mem, err := memory.MapScratch(max(n, 2*cap(recs), 1<<12) * int(unsafe.Sizeof(segRec{})))
	if err != nil {
		return recs, err
	}
	old := b.mem
	b.mem = mem
	out := append(b.recs(), recs...)
	if len(old) > 0 {
		if err := memory.UnmapScratch(old); err != nil {
			panic("strata: invariant: munmap of a sort buffer failed: " + err.Error())
		}
	}
	return out, nil
}

func (b *recBuf) free() {
	if len(b.mem) > 0 {
		_ = memory.UnmapScratch(b.mem)
		b.mem = nil
	}
}

// sortBufs is the Engine's pair of record buffers, used by one transform or flush at a time
// (segmentEntries takes them, segIter.release gives them back); another one in flight at the
// same time (a Persist's, say) uses the Go heap.
type sortBufs struct {
	busy      atomic.Bool
	recs, tmp recBuf
}

// segIter is the base.Iterator over a sealed segment in entry order (segmentEntries).
type segIter struct {
	seg  *fresh.SealedSegment
	recs []segRec
	bufs *sortBufs // the Engine's buffers recs lies in (nil: recs is on the Go heap)
	i    int
	e    base.Entry
	err  error
	// touched keeps the loads of Touch alive (their value is meaningless).
	touched byte
}

// touchBatch is how many records segIter touches before decoding them: the records sit at
// random places in a segment of tens of MiB, so each decode misses the caches; touched in a
// batch of independent loads, the misses of a batch overlap (memory-level parallelism).
const touchBatch = 16

// touchRecs touches the records recs point to, then the map headers of their map entries, and
// returns a value that depends on every load (keep it, or the loads may go).
func touchRecs(seg *fresh.SealedSegment, recs []segRec) byte {
	var x byte
	for i := range recs {
		x ^= seg.Touch(recs[i].off)
	}
	for i := range recs {
		x ^= seg.TouchHeader(recs[i].off)
	}
	return x
}

func (it *segIter) Next() bool {
	it.i++
	if it.err != nil || it.i >= len(it.recs) {
		return false
	}
	if it.i%touchBatch == 0 {
		it.touched ^= touchRecs(it.seg, it.recs[it.i:min(it.i+touchBatch, len(it.recs))])
	}
	r := &it.recs[it.i]
	e, err := it.seg.EntryAt(r.off)
	if err != nil {
		it.err = err
		return false
	}
	e.Hash, e.Order = r.hash, r.order
	if e.Kind == base.KindMapEntry || e.Kind == base.KindMapEntryTombstone {
		e.UserHash = base.HashUserKey(e.UserKey)
	}
	it.e = e
	return true
}

func (it *segIter) Entry() *base.Entry { return &it.e }
func (it *segIter) Err() error         { return it.err }

// release gives the iterator's buffers back to the Engine; the iterator is unusable after.
func (it *segIter) release() {
	if it.bufs != nil {
		it.bufs.busy.Store(false)
		it.bufs = nil
	}
	it.recs = nil
}

// segmentEntries returns an iterator over the live records of a sealed segment as entries with
// their hashes (Hash of the composite key, the order hash of its key group, the user-key hash
// of map entries), in entry order (base.Compare). The caller releases it when done; the
// entries' bytes alias the segment, which must outlive the iteration.
func (t *Engine) segmentEntries(ctx context.Context, seg *fresh.SealedSegment) (*segIter, error) {
	// The Engine's mapped buffers when free (one transform or flush at a time is the rule),
	// else the Go heap. The first guess of the record count: 24 bytes per record of the segment
	// (mapped pages cost nothing until touched).
	var bufs *sortBufs
	var recs, tmp []segRec
	if t.sb.busy.CompareAndSwap(false, true) {
		bufs = &t.sb
		recs, tmp = bufs.recs.recs(), bufs.tmp.recs()
		if r, err := bufs.recs.grow(recs, int(seg.DataBytes()/24)); err == nil {
			recs = r
		}
	}
	fail := func(err error) (*segIter, error) {
		if bufs != nil {
			bufs.busy.Store(false)
		}
		return nil, err
	}
	it := seg.Entries()
	for it.Next() {
		e := it.Entry()
		h, kg, ok := base.HashCompositeKey(e.Key)
		if !ok {
			return fail(base.Corrupt("", -1, nil, "malformed composite key %x", e.Key))
		}
		r := segRec{order: base.OrderHash(kg, t.stride, h), hash: h, off: it.Offset(), kref: it.KeyRef()}
		if n := len(e.UserKey); n > 0 {
			var p [8]byte
			copy(p[:], e.UserKey)
			r.tie, r.uklen = binary.BigEndian.Uint64(p[:]), uint8(min(n, 255))
		}
		if bufs != nil && len(recs) == cap(recs) {
			var err error
			if recs, err = bufs.recs.grow(recs, len(recs)+1); err != nil {
				return fail(err)
			}
		}
		recs = append(recs, r)
	}
	if err := it.Err(); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if bufs != nil && len(recs) >= 64 {
		var err error
		if tmp, err = bufs.tmp.grow(tmp, len(recs)); err != nil {
			return fail(err)
		}
	}
	radixSortSegRecs(recs, tmp) // a heap scratch if tmp is too small (none: one map's segment)
	if err := sortEqualOrders(seg, recs); err != nil {
		return fail(err)
	}
	return &segIter{seg: seg, recs: recs, bufs: bufs, i: -1}, nil
}

// radixSortSegRecs sorts recs by order, stably (the segment order stays within equal orders),
// using tmp as scratch, and returns the scratch (grown) for reuse.
//
// An LSD radix sort over 11-bit digits, but only over the most significant digits that vary,
// and only as many as needed for their distinct values to multiply to n: order hashes are
// uniform below the key-group prefix, so records that still tie on those digits are about one
// per value, and an insertion sort finishes the order in about n/4 moves. Two passes of 40-byte
// records instead of six (the sort took a quarter of a transform's CPU). A digit every record
// shares costs nothing. If the digits' values are correlated (their product overstates how
// many combinations occur) the insertion sort stops after 8n moves and the sort passes over
// every varying digit, from the order the stopped insertion sort left: every step is stable,
// so the result is the same.
func radixSortSegRecs(recs, tmp []segRec) []segRec {
	n := len(recs)
	if n < 2 {
		return tmp
	}
	if n < 64 {
		insertionSortSegRecs(recs, n*n)
		return tmp
	}
	counts := new([radixDigits][1 << radixBits]uint32)
	countDigits(recs, counts)
	// The varying digits, most significant first. A segment of one map shares one order:
	// nothing moves, and the scratch (as large as recs, Go heap outside the budget) is not
	// needed.
	var vary [radixDigits]int
	nv := 0
	for d := radixDigits - 1; d >= 0; d-- {
		if int(counts[d][recs[0].order>>(radixBits*d)&radixMask]) != n {
			vary[nv] = d
			nv++
		}
	}
	if nv == 0 {
		return tmp
	}
	if cap(tmp) < n {
		tmp = make([]segRec, n)
	}
	tmp = tmp[:n]
	k, combos := 0, 1
	for k < nv && combos < n {
		distinct := 0
		for _, c := range counts[vary[k]] {
			if c != 0 {
				distinct++
			}
		}
		combos *= distinct
		k++
	}
	radixPasses(recs, tmp, counts, vary[:k])
	if k == nv || insertionSortSegRecs(recs, 8*n) {
		return tmp
	}
	countDigits(recs, counts) // the passes consumed their digits' counts
	radixPasses(recs, tmp, counts, vary[:nv])
	return tmp
}

const radixBits, radixDigits = 11, 6 // 6 × 11 ≥ 64
const radixMask = 1<<radixBits - 1

// countDigits counts the values of every digit of recs' orders in one pass.
func countDigits(recs []segRec, counts *[radixDigits][1 << radixBits]uint32) {
	*counts = [radixDigits][1 << radixBits]uint32{}
	for i := range recs {
		o := recs[i].order
		for d := range radixDigits {
			counts[d][o>>(radixBits*d)&radixMask]++
		}
	}
}

// radixPasses sorts recs stably by the digits ds (most significant first; counts holds their
// counts), one scatter pass per digit from the least significant, through tmp (len(recs)).
func radixPasses(recs, tmp []segRec, counts *[radixDigits][1 << radixBits]uint32, ds []int) {
	src, dst := recs, tmp
	for i := len(ds) - 1; i >= 0; i-- {
		c := &counts[ds[i]]
		shift := uint(radixBits * ds[i])
		sum := uint32(0)
		for j := range c {
			c[j], sum = sum, sum+c[j]
		}
		for j := range src {
			b := src[j].order >> shift & radixMask
			dst[c[b]] = src[j]
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &recs[0] {
		copy(recs, src)
	}
}

// insertionSortSegRecs sorts recs stably by order with at most budget moves; it reports
// whether it finished (else recs is a permutation with equal orders still in their first
// relative order).
func insertionSortSegRecs(recs []segRec, budget int) bool {
	for i := 1; i < len(recs); i++ {
		if recs[i].order >= recs[i-1].order {
			continue
		}
		x := recs[i]
		j := i
		for j > 0 && x.order < recs[j-1].order {
			recs[j] = recs[j-1]
			j--
		}
		recs[j] = x
		if budget -= i - j; budget < 0 {
			return false
		}
	}
	return true
}

// sortEqualOrders orders every run of records with the same order hash by base.Compare (the
// radix sort left them in segment order): the entries of one map share their map key's order
// hash, and different keys may collide.
func sortEqualOrders(seg *fresh.SealedSegment, recs []segRec) error {
	var ents []base.Entry
	var idx []int
	var touched byte
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].order == recs[i].order {
			j++
		}
		if j-i > 1 && !sortMapRun(recs[i:j]) {
			run := recs[i:j]
			touched ^= touchRecs(seg, run)
			ents = ents[:0]
			for _, r := range run {
				e, err := seg.EntryAt(r.off)
				if err != nil {
					return err
				}
				e.Order = r.order
				ents = append(ents, e)
			}
			idx = idx[:0]
			for k := range run {
				idx = append(idx, k)
			}
			if len(idx) <= 16 { // the entries of a small map in one segment
				for a := 1; a < len(idx); a++ {
					for b := a; b > 0 && base.Compare(&ents[idx[b]], &ents[idx[b-1]]) < 0; b-- {
						idx[b], idx[b-1] = idx[b-1], idx[b]
					}
				}
			} else {
				slices.SortFunc(idx, func(x, y int) int { return base.Compare(&ents[x], &ents[y]) })
			}
			sorted := true
			for k, x := range idx {
				if x != k {
					sorted = false
					break
				}
			}
			if !sorted {
				tmp := make([]segRec, len(run))
				for k, x := range idx {
					tmp[k] = run[x]
				}
				copy(run, tmp)
			}
		}
		i = j
	}
	touchSink.Store(uint32(touched))
	return nil
}

// touchSink keeps sortEqualOrders' touches alive (atomic: a checkpoint's upload sorts a
// segment while a transform sorts another).
var touchSink atomic.Uint32

// sortMapRun orders a run of equal orders without decoding it when it can: every record holds
// the same key (one kref: the entries of one map, and its base header) and every user key is at
// most 8 bytes, so (tie, uklen) orders them as base.Compare does, unless two are equal (then
// the versions need their sequence numbers). It reports whether it did; if not, the run's order
// is unspecified.
func sortMapRun(run []segRec) bool {
	for i := range run {
		if run[i].kref != run[0].kref || run[i].uklen > 8 {
			return false
		}
	}
	less := func(a, b *segRec) bool { return a.tie < b.tie || a.tie == b.tie && a.uklen < b.uklen }
	if len(run) <= 16 {
		for a := 1; a < len(run); a++ {
			for b := a; b > 0 && less(&run[b], &run[b-1]); b-- {
				run[b], run[b-1] = run[b-1], run[b]
			}
		}
	} else {
		slices.SortFunc(run, func(a, b segRec) int {
			if c := cmp.Compare(a.tie, b.tie); c != 0 {
				return c
			}
			return cmp.Compare(a.uklen, b.uklen)
		})
	}
	for i := 1; i < len(run); i++ {
		if !less(&run[i-1], &run[i]) {
			return false
		}
	}
	return true
}
