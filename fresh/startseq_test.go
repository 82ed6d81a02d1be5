package fresh

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-db/strata/memory"
)

// TestStartSeq: a Table's sequence numbers continue after Options.StartSeq
// (the first write gets StartSeq+1), through every record kind, a seal and
// the sealed segment's entries — also just below MaxStartSeq, where the
// 56-bit record field holds the whole number; StartSeq >= MaxStartSeq is
// ErrStartSeq.
func TestStartSeq(t *testing.T) {
	for _, start := range []uint64{0, 1, 1000, 1 << 40, 1<<55 + 12345, MaxStartSeq - 1} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			p, err := memory.NewPool(memory.NewBudget(1<<30), memory.SegmentSize16M)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			tb, err := New(Options{Pool: p, StartSeq: start})
			if err != nil {
				t.Fatal(err)
			}
			defer tb.Close()
			if tb.Seq() != start {
				t.Fatalf("Seq before any write %d, want %d", tb.Seq(), start)
			}
			b := func(s string) []byte { return []byte(s) }
			must(t, tb.Put(hashOf(b("k")), b("k"), b("v1")))
			if tb.Seq() != start+1 {
				t.Fatalf("first write got seq %d, want %d", tb.Seq(), start+1)
			}
			must(t, tb.Put(hashOf(b("k")), b("k"), b("v2"))) // in place
			must(t, tb.ListAppend(hashOf(b("l")), b("l"), b("x")))
			must(t, mput(tb, "m", "a", "1"))
			must(t, mput(tb, "m", "b", "2"))
			must(t, mrem(tb, "m", "a"))
			must(t, tb.Delete(hashOf(b("d")), b("d")))
			last := tb.Seq()
			if last <= start+6 || last > start+20 {
				t.Fatalf("Seq %d after 7 writes from %d", last, start)
			}
			if v, st := tb.Get(hashOf(b("k")), b("k")); st != Found || string(v) != "v2" {
				t.Fatalf("Get k: %q %v", v, st)
			}
			if v, st := mget(tb, "m", "b"); st != Found || v != "2" {
				t.Fatalf("MapGet m/b: %q %v", v, st)
			}
			if _, st := mget(tb, "m", "a"); st != Deleted {
				t.Fatalf("MapGet m/a: %v", st)
			}
			must(t, tb.Seal())
			ss := tb.Sealed()
			if len(ss) != 1 {
				t.Fatalf("%d sealed segments", len(ss))
			}
			es := collect(t, ss[0].Entries())
			if len(es) == 0 {
				t.Fatal("no entries")
			}
			seen := map[uint64]bool{}
			var maxSeq uint64
			for _, e := range es {
				if e.Seq <= start || e.Seq > last || seen[e.Seq] {
					t.Fatalf("entry %v: seq outside (%d, %d] or repeated", e, start, last)
				}
				seen[e.Seq] = true
				maxSeq = max(maxSeq, e.Seq)
				if e.Key == "k" && (e.V != "v2" || e.Seq != start+2) {
					t.Fatalf("entry %v, want k=v2 at seq %d", e, start+2)
				}
			}
			if maxSeq != last {
				t.Fatalf("newest entry seq %d, Table.Seq %d", maxSeq, last)
			}
		})
	}
	for _, start := range []uint64{MaxStartSeq, MaxStartSeq + 1, 1 << 56, ^uint64(0)} {
		p, err := memory.NewPool(memory.NewBudget(1<<30), memory.SegmentSize16M)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(Options{Pool: p, StartSeq: start}); !errors.Is(err, ErrStartSeq) {
			t.Fatalf("StartSeq %d: %v, want ErrStartSeq", start, err)
		}
		if u := p.Budget().Used(); u != 0 {
			t.Fatalf("StartSeq %d: %d bytes mapped", start, u)
		}
		p.Close()
	}
}
