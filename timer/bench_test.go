package timer

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/memory"
	"github.com/zeebo/xxh3"
)

// BenchmarkQueue: pending timers already queued over 128 key groups (8-byte keys, 8-byte
// namespaces, timestamps spread over ten times the pending count). op=addpop: one op is an Add
// and a Pop, the queue level of the bench suite's BenchmarkTimers. op=deladd: one op deletes a
// key's timer and adds the key's next one later (a session window extended by an event, as
// Nexmark q11 does): the live count stays steady, so only ghosts come and go.
func BenchmarkQueue(b *testing.B) {
	for _, pending := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("op=addpop/pending=%d", pending), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("op=deladd/pending=%d", pending), func(b *testing.B) { benchDeleteAdd(b, pending) })
	}
}

func benchDeleteAdd(b *testing.B, pending int) {
	budget := memory.NewBudget(4 << 30)
	q := NewQueue(budget, 0, 128)
	defer q.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	var ns [8]byte
	keys := make([][8]byte, pending)
	khs := make([]uint64, pending)
	tss := make([]int64, pending)
	nh := xxh3.Hash(ns[:])
	for i := range pending {
		binary.BigEndian.PutUint64(keys[i][:], uint64(i))
		khs[i] = xxh3.Hash(keys[i][:])
		tss[i] = rng.Int64N(int64(10 * pending))
		kh := khs[i]
		if _, err := q.Add(int(kh%128), Hash(kh, nh, tss[i]), int32(kh), keys[i][:], ns[:], tss[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		i := rng.IntN(pending)
		kh, ts := khs[i], tss[i]
		if ok, err := q.Delete(int(kh%128), Hash(kh, nh, ts), keys[i][:], ns[:], ts); !ok || err != nil {
			b.Fatal(ok, err)
		}
		ts += 1 + rng.Int64N(int64(pending))
		tss[i] = ts
		if ok, err := q.Add(int(kh%128), Hash(kh, nh, ts), int32(kh), keys[i][:], ns[:], ts); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(budget.UsedBy(memory.PurposeTimers))/float64(q.Len()), "B/timer")
}
