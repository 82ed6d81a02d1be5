package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
)

// TestReplayKeep: a restore that skips the records replayKeep marks superseded ends in the
// same state as one that applies every record — random op sequences over four value, list and
// map keys, checked key by key — and each op kind has a rule the table below names, so a new
// OpKind fails here until it is decided.
func TestReplayKeep(t *testing.T) {
	rules := map[OpKind]string{
		OpPut: "whole", OpDelete: "whole", OpListReplace: "whole", OpListDelete: "whole",
		OpListAppend: "appends", OpMapClear: "map whole", OpMapPut: "map entry", OpMapRemove: "map entry",
	}
	for k := OpKind(1); k < numOpKinds; k++ {
		if rules[k] == "" {
			t.Errorf("OpKind %v has no replayKeep rule in this test: decide what it supersedes (replay.go)", k)
		}
	}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			src, w, st := openChangelogTest(t)
			type key struct {
				k []byte
				h uint64
			}
			var vals, lists, maps []key
			for i := range 4 {
				k, h := testKey(1, fmt.Appendf(nil, "v%d", i))
				vals = append(vals, key{k, h})
				k, h = testKey(2, fmt.Appendf(nil, "l%d", i))
				lists = append(lists, key{k, h})
				k, h = testKey(3, fmt.Appendf(nil, "m%d", i))
				maps = append(maps, key{k, h})
			}
			uks := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
			n := 50 + rng.IntN(300)
			for i := range n {
				v := fmt.Appendf(nil, "x%d", i)
				var op Op
				switch rng.IntN(3) {
				case 0:
					k := vals[rng.IntN(len(vals))]
					op = opPut(k.k, k.h, v)
					if rng.IntN(4) == 0 {
						op = Op{Kind: OpDelete, Hash: k.h, Key: k.k}
					}
				case 1:
					k := lists[rng.IntN(len(lists))]
					switch rng.IntN(6) {
					case 0:
						op = Op{Kind: OpListReplace, Hash: k.h, Key: k.k, Value: frame(v)}
					case 1:
						op = Op{Kind: OpListDelete, Hash: k.h, Key: k.k}
					default:
						op = Op{Kind: OpListAppend, Hash: k.h, Key: k.k, Value: frame(v)}
					}
				default:
					k := maps[rng.IntN(len(maps))]
					uk := uks[rng.IntN(len(uks))]
					switch rng.IntN(6) {
					case 0:
						op = Op{Kind: OpMapClear, Hash: k.h, Key: k.k}
					case 1:
						op = opMapRemove(k.k, k.h, uk)
					default:
						op = opMapPut(k.k, k.h, uk, v)
					}
				}
				if err := src.Apply(op); err != nil {
					t.Fatal(err)
				}
			}
			src.cl.publishLog() // the owner's records reach the persist at its Publish
			if _, err := w.Persist(context.Background()); err != nil {
				t.Fatal(err)
			}
			hs, err := src.cl.gens[0].log.Handles(src.Seq())
			if err != nil {
				t.Fatal(err)
			}
			b, err := changelog.Collect(context.Background(), st, hs, changelog.KeyGroupRange{Start: 0, End: 127}, 0, src.Seq())
			if err != nil {
				t.Fatal(err)
			}
			keep, err := replayKeep(b, "test")
			if err != nil {
				t.Fatal(err)
			}
			all, kept := openTest(t, Options{}), openTest(t, Options{})
			var r changelog.Record
			skipped := 0
			for i := range b.Len() {
				if err := b.Record(i, &r); err != nil {
					t.Fatal(err)
				}
				op := Op{Kind: OpKind(r.Kind), Key: r.Key, UserKey: r.UserKey, Value: r.Value}
				op.Hash, _, _ = base.HashCompositeKey(r.Key)
				if op.Kind == OpMapPut || op.Kind == OpMapRemove {
					op.UserHash = opMapPut(nil, 0, r.UserKey, nil).UserHash
				}
				if err := all.Apply(op); err != nil {
					t.Fatal(err)
				}
				if !keep[i] {
					skipped++
					continue
				}
				if err := kept.Apply(op); err != nil {
					t.Fatal(err)
				}
			}
			if n > 100 && skipped == 0 {
				t.Fatalf("%d records over 12 keys, none skipped", n)
			}
			for _, e := range []*Engine{src, all, kept} {
				if err := e.Seal(); err != nil { // reads cross the tiers' boundary too
					t.Fatal(err)
				}
			}
			for _, k := range vals {
				a, sa := all.Get(k.h, k.k)
				a = bytes.Clone(a)
				b, sb := kept.Get(k.h, k.k)
				if sa != sb || !bytes.Equal(a, b) {
					t.Fatalf("value %q: all %v %q, kept %v %q", k.k, sa, a, sb, b)
				}
			}
			for _, k := range lists {
				a, sa, _ := all.ListGet(k.h, k.k, nil, nil)
				a = slices.Clone(a)
				b, sb, _ := kept.ListGet(k.h, k.k, nil, nil)
				if sa != sb || !bytes.Equal(bytes.Join(a, nil), bytes.Join(b, nil)) {
					t.Fatalf("list %q: all %v %q, kept %v %q", k.k, sa, a, sb, b)
				}
			}
			for _, k := range maps {
				for _, uk := range uks {
					uh := opMapPut(nil, 0, uk, nil).UserHash
					a, sa := all.MapGet(k.h, k.k, uh, uk)
					a = bytes.Clone(a)
					b, sb := kept.MapGet(k.h, k.k, uh, uk)
					if sa != sb || !bytes.Equal(a, b) {
						t.Fatalf("map %q[%s]: all %v %q, kept %v %q", k.k, uk, sa, a, sb, b)
					}
				}
			}
		})
	}
}

// benchPutLog returns the changelog batch of records value puts (100-byte values) to keys
// random keys, seqs 1..records, as a restore collects it (changelog.Collect): the input of
// the replay benchmarks.
func benchPutLog(b *testing.B, records, keys int) *changelog.Batch {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 100)
	bt := memTail(b, uint64(records), func(l *changelog.Log, w *changelog.Writer) error {
		for i := range records {
			k, _ := testKey(1, u64(uint64(rng.IntN(keys))))
			if err := l.Append(uint8(OpPut), uint16(k[0])<<8|uint16(k[1]), uint64(i+1), k, nil, val); err != nil {
				return err
			}
			if w.PersistDue(time.Now()) {
				if _, err := w.Persist(context.Background()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return bt
}

// BenchmarkReplayKeep: the superseded-record pass of a restore over 200,000 value puts to
// 100,000 keys (ns/op is per record).
func BenchmarkReplayKeep(b *testing.B) {
	const records, keys = 200_000, 100_000
	bt := benchPutLog(b, records, keys)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := replayKeep(bt, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
}
