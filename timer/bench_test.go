package timer

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/memory"
	"github.com/zeebo/xxh3"
)

// BenchmarkQueue: one op is an Add and a Pop with pending timers already queued over 128 key
// groups (8-byte keys, 8-byte namespaces, timestamps spread over ten times the pending
// count), the queue level of the bench suite's BenchmarkTimers.
func BenchmarkQueue(b *testing.B) {
	for _, pending := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			budget := memory.NewBudget(4 << 30)
			q := NewQueue(budget, 0, 128)
			defer q.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			var key, ns [8]byte
			next := int64(0)
			push := func(i int) {
				binary.BigEndian.PutUint64(key[:], uint64(i))
				binary.BigEndian.PutUint64(ns[:], uint64(i%16))
				ts := next + rng.Int64N(int64(10*pending))
				kh := xxh3.Hash(key[:])
				if _, err := q.Add(int(kh%128), Hash(kh, xxh3.Hash(ns[:]), ts), int32(kh), key[:], ns[:], ts); err != nil {
					b.Fatal(err)
				}
			}
			for i := range pending {
				push(i)
			}
			buf := make([]byte, 0, 64)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				push(pending + i)
				i++
				var ok bool
				var err error
				var t Timer
				t, buf, ok, err = q.Pop(1<<62, buf)
				if !ok || err != nil {
					b.Fatal(ok, err)
				}
				next = t.Timestamp
			}
			b.ReportMetric(float64(budget.UsedBy(memory.PurposeTimers))/float64(q.Len()), "B/timer")
		})
	}
}
