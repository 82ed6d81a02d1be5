package main

import (
	"math/bits"
	"time"
)

// hist is a log-linear latency histogram in the spirit of HdrHistogram: values (nanoseconds) below
// 2^histSubBits are exact; above, each power of two is split into 2^histSubBits equal buckets,
// so a recorded value is known within 1/2^histSubBits (6.25 %). Fixed size, no allocation.
type hist struct {
	counts [64 << histSubBits]uint64
	n      uint64
	max    int64
}

const histSubBits = 4

func histIndex(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	e := bits.Len64(v) - histSubBits - 1 // v >> e is in [2^sub, 2^(sub+1))
	return (e+1)<<histSubBits + int(v>>e) - 1<<histSubBits
}

// histBucket returns the lowest value and the width of bucket i.
func histBucket(i int) (lo, width uint64) {
	if i < 1<<histSubBits {
		return uint64(i), 1
	}
	e := i>>histSubBits - 1
	m := uint64(i&(1<<histSubBits-1)) + 1<<histSubBits
	return m << e, 1 << e
}

func (h *hist) record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[histIndex(uint64(v))]++
	h.n++
	h.max = max(h.max, v)
}

// quantile returns the q-quantile (0 < q <= 1) as the midpoint of its bucket, 0 when empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := histBucket(i)
			return time.Duration(min(int64(lo+(w-1)/2), h.max))
		}
	}
	return time.Duration(h.max)
}
