package slice

import (
	"bytes"
)

// lowerBound returns the first index i with fps[i] >= x, or len(fps) if
// there is none; fps is sorted ascending. It is the hook the SIMD kernels
// plug into: search_arm64.go sets it to asm_arm64.LowerBound (same
// contract); elsewhere it stays lowerBoundGo, the pure-Go twin and the
// reference in tests.
var lowerBound = lowerBoundGo

// lowerBoundGo is a branch-free binary search: the loop runs
// ⌈log2(len)⌉ times whatever x is, and the compiler turns the conditional
// add into a conditional move, so no misprediction depends on the data.
func lowerBoundGo(fps []uint64, x uint64) int {
	n := len(fps)
	if n == 0 {
		return 0
	}
	base := 0
	for n > 1 {
		half := n >> 1
		if fps[base+half-1] < x {
			base += half
		}
		n -= half
	}
	if fps[base] < x {
		base++
	}
	return base
}

// seek returns the first entry of s at or after (order, key, uk) with the
// newest sequence number, i.e. the first index whose (order, key, userKey)
// is >= the target. Allocation-free.
func (s *Slice) seek(order uint64, key, uk []byte) int {
	lo, hi := s.orderRange(order)
	return s.seekIn(lo, hi, key, uk)
}

// orderRange returns [lo, hi), the entries of s whose order hash is order
// (lo == hi at the insertion point when there is none): usually one entry,
// several for a map or a list's operands or a hash collision.
func (s *Slice) orderRange(order uint64) (lo, hi int) {
	lo = s.lowerBoundFP(order)
	if lo == s.count || s.fps[lo] != order {
		return lo, lo
	}
	hi = lo + 1
	if hi < s.count && s.fps[hi] == order {
		// Gallop from lo: the range is short (a map's entries, a list's
		// operands), and its end is in the cache lines lo brought in.
		step := 2
		for lo+step < s.count && s.fps[lo+step] == order {
			hi = lo + step + 1
			step <<= 1
		}
		end := min(lo+step, s.count)
		if order == ^uint64(0) {
			hi = end // nothing sorts above: [hi, end) all equal order
		} else {
			hi += lowerBound(s.fps[hi:end], order+1)
		}
	}
	return lo, hi
}

// lowerBoundFP is lowerBound(s.fps, order), found by interpolation: order
// hashes are uniform within a slice's [minOrder, maxOrder] (a bucket lies in
// a key group, and a key group's order hashes are uniform), so the rank of
// order is within a few entries of its interpolated position g (standard
// deviation at most √n / 2: about 5 entries in a 16 KiB slice of 100 B
// values). It loads the cache line of g — one miss — and walks from there
// towards order, at most scanLimit entries, which usually stays in that
// line or its neighbour; a walk that goes further (skewed data, a long run
// of equal hashes) finishes with a binary search of the side it was
// heading to, so the result is always exact. A binary search over the
// whole array would cost about log2(n/8) dependent misses instead.
func (s *Slice) lowerBoundFP(order uint64) int {
	return searchUniform(s.fps[:s.count], order, s.minOrder, s.scale)
}

// offsetHint returns the record offset at order's interpolated rank in s
// (minOrder <= order), 0 for an empty slice. The lookups call it before their search
// and add the result to Table.sink: the load of that offsets line then
// overlaps the search's load of the fingerprint line at the same rank,
// instead of waiting for it, and the entry found is usually within the
// same line of offsets (16 per line).
func (s *Slice) offsetHint(order uint64) uint32 {
	if s.count == 0 {
		return 0
	}
	g := min(int(float64(order-s.minOrder)*s.scale), s.count-1)
	return s.offs[g]
}

// touchLimit is the most records touchRecords loads: a map with more entries
// in one slice is searched by halving, which touches about log2 of them.
const touchLimit = 16

// touchRecords loads the first byte of each record in [lo, hi) when there
// are at most touchLimit of them, and returns their sum, which the caller
// adds to Table.sink. MapGet calls it on the entries that share the map's
// order hash before searching them by key and user key: the search's loads
// of about three records (at 10 entries per map), each a cache miss that
// waited for the one before, then find them in cache; the loads issued here
// overlap, as they depend on nothing but the offsets line.
func (s *Slice) touchRecords(lo, hi int) uint32 {
	if hi-lo > touchLimit {
		return 0
	}
	var x uint32
	for _, o := range s.offs[lo:hi] {
		x += uint32(s.buf[o])
	}
	return x
}

// searchUniform is lowerBound(a, x) for a sorted a whose values are about
// uniform in [lo, a[len(a)-1]] (a[0] >= lo), scale = len(a) / (a[len(a)-1]
// - lo), or 0 (then the guess is 0; the result is exact whatever scale
// is): the interpolated guess, then a walk of at most scanLimit entries,
// then a binary search of the side the walk was heading to.
func searchUniform(a []uint64, x, lo uint64, scale float64) int {
	n := len(a)
	if n <= 16 {
		return lowerBound(a, x)
	}
	if x <= lo {
		return 0
	}
	if x > a[n-1] {
		return n
	}
	// lo < x <= a[n-1]: the guess is in [0, n] before the clamp (n when x
	// is a[n-1]; rounding cannot leave [0, n+1)).
	g := min(int(float64(x-lo)*scale), n-1)
	if a[g] < x {
		// The answer is above g: walk up.
		for end := min(g+scanLimit, n); ; {
			g++
			if g == end {
				if g == n {
					return n
				}
				return g + lowerBound(a[g:], x)
			}
			if a[g] >= x {
				return g
			}
		}
	}
	// a[g] >= x: the answer is g or below.
	for end := max(g-scanLimit, 0); g > end; g-- {
		if a[g-1] < x {
			return g
		}
	}
	if g == 0 {
		return 0
	}
	return lowerBound(a[:g], x)
}

// scanLimit is how many entries lowerBoundFP walks from its interpolated
// guess before it switches to a binary search: two cache lines of
// fingerprints, about three standard deviations of the guess's error in a
// default-size slice.
const scanLimit = 16

// seekKey is seek(order, key, nil) for callers that check the key of the
// entry it returns themselves (Get, ListGet): when one entry alone carries
// order it returns that entry without comparing keys.
func (s *Slice) seekKey(order uint64, key []byte) int {
	lo, hi := s.orderRange(order)
	if hi-lo <= 1 {
		return lo
	}
	return s.seekIn(lo, hi, key, nil)
}

// seekIn returns the first index in [lo, hi) whose (key, userKey) is >=
// (key, uk), or hi; the entries in [lo, hi) share one order hash and are
// sorted by (key, userKey, newest first). Allocation-free.
func (s *Slice) seekIn(lo, hi int, key, uk []byte) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, u := s.keyAt(m)
		c := bytes.Compare(k, key)
		if c == 0 {
			c = bytes.Compare(u, uk)
		}
		if c < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// seekUK is seekIn(lo, hi, key, uk) when record ref's key is key: the
// records that share ref's key home (ukAt) are compared by user key alone,
// without decoding the key they point back to; a record with another home
// is compared in full, so the result is seekIn's whatever the builder
// inlined.
func (s *Slice) seekUK(ref, lo, hi int, key, uk []byte) int {
	home0, _ := s.ukAt(ref)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		home, u := s.ukAt(m)
		var c int
		if home == home0 {
			c = bytes.Compare(u, uk)
		} else {
			k, u := s.keyAt(m)
			if c = bytes.Compare(k, key); c == 0 {
				c = bytes.Compare(u, uk)
			}
		}
		if c < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// first returns the index of the first slice of the run whose order range
// may hold order (maxOrder >= order); callers stop at a slice whose
// minOrder > order. It searches r.maxs, the run's slices' maxOrder in one
// contiguous array, by interpolation (a run's slices split its order range
// about evenly): it touches neither the other slices' headers (a dependent
// miss each in a binary search) nor more than a line or two of maxs.
func (r *run) first(order uint64) int {
	return searchUniform(r.maxs, order, r.lo, r.scale)
}

// index sets the search fields of r (maxs, lo, scale) from r.slices; called
// whenever r.slices changes.
func (r *run) index() {
	r.maxs = r.maxs[:0]
	for _, s := range r.slices {
		r.maxs = append(r.maxs, s.maxOrder)
	}
	r.lo, r.scale = 0, 0
	if n := len(r.slices); n > 0 {
		r.lo = r.slices[0].minOrder
		if span := r.maxs[n-1] - r.lo; span > 0 {
			r.scale = float64(n) / float64(span)
		}
	}
}
