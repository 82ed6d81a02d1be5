package slice

import (
	"math/bits"

	"github.com/strata-db/strata/memory"
)

// A run's filter (invariant 17): a blocked Bloom filter over the order hashes of the run's
// entries, one 64-bit word per hash with four of its bits set, about filterBitsPerKey bits an
// entry (about 2 % false positives). A point read of a key the run does not hold — a key
// never written, or not since the run was built, the common case for a new window or day —
// then costs one cache line instead of the run's search: its order array, the slice header,
// the slice's fingerprints (three to five dependent loads a run). Nothing of it is persisted.

// filterBitsPerKey is the filter's bits per entry of its run.
const filterBitsPerKey = 10

// filterMul mixes an order hash for the filter: the order's top bits are its bucket's,
// shared by the whole run, so the word index must come from all of its bits.
const filterMul = 0x9E3779B97F4A7C15

// runFilter is a run's filter: nil holds nothing back (every key may be in the run).
type runFilter []uint64

// filterFor builds the filter of a run of slices (their fingerprints, in one pass), charged
// to the budget of a (memory.PurposeSlice); nil when the budget refuses the bytes (the run
// is then searched as without a filter). Owner goroutine; O(entries).
func filterFor(a *Allocator, slices []*Slice) runFilter {
	n := 0
	for _, s := range slices {
		n += s.count
	}
	if n == 0 || a == nil || a.pool == nil {
		return nil
	}
	words := (n*filterBitsPerKey + 63) / 64
	if a.pool.Budget().Charge(int64(words)*8, memory.PurposeSlice) != nil {
		return nil
	}
	f := make(runFilter, words)
	for _, s := range slices {
		prev := ^s.fps[0]
		for _, o := range s.fps[:s.count] {
			if o != prev { // a key's versions and a map's entries share the order
				f.add(o)
				prev = o
			}
		}
	}
	return f
}

// word returns the index of order's word and its four bits.
func (f runFilter) word(order uint64) (int, uint64) {
	x := order * filterMul
	i, _ := bits.Mul64(x, uint64(len(f)))
	m := uint64(1)<<(x&63) | uint64(1)<<(x>>6&63) | uint64(1)<<(x>>12&63) | uint64(1)<<(x>>18&63)
	return int(i), m
}

func (f runFilter) add(order uint64) {
	i, m := f.word(order)
	f[i] |= m
}

// mayHold reports whether the run may hold entries of order hash order: false is certain
// (invariant 17), true may be a false positive; a nil filter says true.
func (f runFilter) mayHold(order uint64) bool {
	if f == nil {
		return true
	}
	i, m := f.word(order)
	return f[i]&m == m
}

// release refunds f's bytes (when the run leaves the table).
func (f runFilter) release(a *Allocator) {
	if f != nil {
		a.pool.Budget().Refund(int64(len(f))*8, memory.PurposeSlice)
	}
}
