package engine

import (
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/slice"
)

// BatchMax is the most keys one GetBatch call takes: enough independent misses to fill the
// out-of-order window of a core (tens of loads in flight), few enough that the per-key state
// of the stages lives in fixed arrays on the stack.
const BatchMax = 32

var _ = [1]int{}[BatchMax/(slice.PrefetchMax+1)] // BatchMax <= slice.PrefetchMax

// GetBatch reads keys[i] (hash hs[i]) for every i < len(keys) into vals[i] and sts[i], with
// the result of Get(hs[i], keys[i]) for each: the same values, statuses, row-cache hits and
// misses, slice hit counts and lower-tier copies (valid until the next write, as Get's). It
// returns the smallest index whose read failed (sts[i] == Failed; TakeErr returns that
// read's error), or -1. The other keys are read whatever fails.
//
// len(keys) <= BatchMax; hs, vals and sts are at least as long. Allocation-free; owner
// goroutine only, like Get.
//
// The keys are read in stages, each issuing one independent load per key before any key's
// dependent work (as Flink 2.0's asynchronous state access overlaps the state reads of many
// records; here the overlap is the CPU's, not threads'):
//
//  1. FreshTable: the index group of every key in every segment (fresh.Table.Prefetch), then
//     the record each group points at (PrefetchRecord), then the lookups (Get).
//  2. SliceTable, keys the FreshTable does not hold: the order hashes, then
//     slice.Table.PrefetchBatch, which walks every key's search in lock step (the newest
//     run's maxOrder line, the slice header, the fingerprints and offset at each
//     interpolated rank, the record), then the lookups.
//  3. Row cache and lower tier, keys neither holds: the row-cache set of every key, then,
//     in order-hash order (so consecutive reads reuse the LsmStore's index and data blocks),
//     the row cache and the lower tier as in Get. The lower-tier reads are one at a time.
func (t *Engine) GetBatch(hs []uint64, keys [][]byte, vals [][]byte, sts []Status) int {
	if t.cost.on {
		return t.sampledGetBatch(hs, keys, vals, sts)
	}
	if t.tail != nil && t.tailFailed(len(keys), vals, sts) { // invariant 33
		return 0
	}
	n := len(keys)
	if n > BatchMax {
		panic("strata: invariant: GetBatch of more than BatchMax keys")
	}
	hs, vals, sts = hs[:n], vals[:n], sts[:n]
	for _, h := range hs {
		t.f.Prefetch(h)
	}
	for _, h := range hs {
		t.f.PrefetchRecord(h)
	}
	var miss [BatchMax]uint8
	var orders [BatchMax]uint64
	m := 0
	for i := range n {
		v, st := t.f.Get(hs[i], keys[i])
		vals[i], sts[i] = v, st
		if st == absent {
			miss[m] = uint8(i)
			m++
		}
	}
	if m == 0 {
		return -1
	}
	var mo [BatchMax]uint64 // the misses' orders, contiguous for the SliceTable
	for j := range m {
		i := miss[j]
		orders[i] = t.orderOf(keys[i], hs[i])
		mo[j] = orders[i]
	}
	t.sl.PrefetchBatch(mo[:m])
	m2 := 0
	for j := range m {
		i := miss[j]
		v, st := t.sl.Get(orders[i], keys[i])
		vals[i], sts[i] = v, status(st)
		if status(st) == absent {
			miss[m2] = i
			m2++
		}
	}
	m = m2
	if m == 0 || t.low == nil {
		return -1
	}
	low := miss[:m]
	// Insertion sort by order hash (m <= BatchMax): the lower tier reads in key order.
	for j := 1; j < m; j++ {
		for k := j; k > 0 && orders[low[k]] < orders[low[k-1]]; k-- {
			low[k], low[k-1] = low[k-1], low[k]
		}
	}
	if t.rc != nil {
		for _, i := range low {
			t.rc.prefetch(orders[i])
		}
	}
	failedAt := -1
	for _, i := range low {
		v, st, err := t.lowGet(orders[i], keys[i])
		vals[i], sts[i] = v, st
		if err != nil && (failedAt < 0 || int(i) < failedAt) {
			failedAt, t.readErr = int(i), err
		}
	}
	return failedAt
}

// lowGet is the lower part of Get (row cache, then lower tier) for a key the upper tiers do
// not hold; a read error comes back with the failed status for the caller to record.
func (t *Engine) lowGet(order uint64, key []byte) ([]byte, status, error) {
	if t.rc != nil {
		if v, ok := t.rc.get(order, key); ok && !t.ttl.expired(key, v) {
			t.rcHits++
			return t.lr.copy(v), found, nil
		} else if ok {
			t.rc.drop(order, key)
		}
		t.rcMisses++
	}
	v, st, err := t.lr.get(t.low, order, key)
	if err != nil {
		return nil, failed, err
	}
	if st == found && t.rc != nil && t.lr.kind == base.KindValue {
		t.rc.put(order, key, v)
	}
	return v, st, nil
}

// Prefetch loads the FreshTable index group of every hash of hs in every segment, and then
// the record each group points at (two dependent loads per key and segment, the keys' loads
// overlapping), so that a Get or MapGet of them soon after finds both in the cache. It changes
// nothing. Allocation-free; owner goroutine only.
func (t *Engine) Prefetch(hs []uint64) {
	for _, h := range hs {
		t.f.Prefetch(h)
	}
	for _, h := range hs {
		t.f.PrefetchRecord(h)
	}
}

// PrefetchWrite is Prefetch for a batch of writes: the index groups and records of hs in the
// FreshTable's active segment only, the one a write looks a key up in (the sealed segments'
// groups and records would be misses no write uses). It changes nothing. Allocation-free;
// owner goroutine only.
func (t *Engine) PrefetchWrite(hs []uint64) {
	for _, h := range hs {
		t.f.PrefetchActive(h)
	}
	for _, h := range hs {
		t.f.PrefetchActiveRecord(h)
	}
}

// MapGetBatch reads the user keys uks[i] (hash hus[i]) of the maps mks[i] (hash hms[i]) for
// every i < len(mks) into vals[i] and sts[i], with the result of MapGet for each; it returns
// the smallest index whose read failed (TakeErr gives its error) or -1, as GetBatch. The same
// stages as GetBatch: the FreshTable's index groups and map headers of every key, then the
// lookups (the entry's index group hangs off the header, so it is not staged); for the
// misses, slice.Table.PrefetchBatch of the maps' order hashes (a map's entries share its
// order: the search lands on its first entry), then the lookups; the lower tier in
// order-hash order. len(mks) <= BatchMax; the other slices are at least as long.
// Allocation-free; owner goroutine only.
func (t *Engine) MapGetBatch(hms []uint64, mks [][]byte, hus []uint64, uks [][]byte, vals [][]byte, sts []Status) int {
	if t.cost.on {
		return t.sampledMapGetBatch(hms, mks, hus, uks, vals, sts)
	}
	if t.tail != nil && t.tailFailed(len(mks), vals, sts) { // invariant 33
		return 0
	}
	n := len(mks)
	if n > BatchMax {
		panic("strata: invariant: MapGetBatch of more than BatchMax keys")
	}
	hms, hus, uks, vals, sts = hms[:n], hus[:n], uks[:n], vals[:n], sts[:n]
	t.Prefetch(hms)
	var miss [BatchMax]uint8
	var orders, mo [BatchMax]uint64
	m := 0
	for i := range n {
		v, st := t.f.MapGet(hms[i], mks[i], hus[i], uks[i])
		vals[i], sts[i] = v, st
		if st == absent {
			miss[m] = uint8(i)
			orders[i] = t.orderOf(mks[i], hms[i])
			mo[m] = orders[i]
			m++
		}
	}
	if m == 0 {
		return -1
	}
	t.sl.PrefetchBatch(mo[:m])
	m2 := 0
	for j := range m {
		i := miss[j]
		v, st := t.sl.MapGet(orders[i], mks[i], uks[i])
		vals[i], sts[i] = v, status(st)
		if status(st) == absent {
			miss[m2] = i
			m2++
		}
	}
	if m2 == 0 || t.low == nil {
		return -1
	}
	low := miss[:m2]
	for j := 1; j < m2; j++ {
		for k := j; k > 0 && orders[low[k]] < orders[low[k-1]]; k-- {
			low[k], low[k-1] = low[k-1], low[k]
		}
	}
	failedAt := -1
	for _, i := range low {
		v, st, err := t.lr.mapGet(t.low, orders[i], mks[i], uks[i])
		if err != nil {
			v, st = nil, failed
			if failedAt < 0 || int(i) < failedAt {
				failedAt, t.readErr = int(i), err
			}
		}
		vals[i], sts[i] = v, st
	}
	return failedAt
}
