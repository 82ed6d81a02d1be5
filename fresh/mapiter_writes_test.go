package fresh

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/memory"
)

// TestMapIterWritesOthers writes entries other than the current one during
// an iteration: an entry that exists throughout the iteration (only its
// value rewritten) must be yielded exactly once, in the same segment and
// across segments.
func TestMapIterWritesOthers(t *testing.T) {
	for _, sealEvery := range []int{0, 10, 7} {
		for _, mode := range []string{"put-larger", "put-smaller", "remove-then-put", "clear-and-put"} {
			t.Run(fmt.Sprintf("seal=%d/mode=%s", sealEvery, mode), func(t *testing.T) {
				tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
				const n = 40
				for i := 0; i < n; i++ {
					must(t, mput(tb, "m", fmt.Sprintf("k%02d", i), "v"))
					if sealEvery > 0 && i%sealEvery == sealEvery-1 {
						must(t, tb.Seal())
					}
				}
				it := tb.MapIter(hashOf([]byte("m")), []byte("m"))
				seen := map[string]int{}
				for it.Next() {
					k := string(it.UserKey())
					seen[k]++
					// rewrite every entry (the current one too)
					for i := 0; i < n; i++ {
						o := fmt.Sprintf("k%02d", i)
						switch mode {
						case "put-larger":
							must(t, mput(tb, "m", o, strings.Repeat("w", 10+len(seen))))
						case "put-smaller":
							must(t, mput(tb, "m", o, ""))
						case "clear-and-put":
							if i == 0 {
								must(t, tb.MapClear(hashOf([]byte("m")), []byte("m")))
							}
							must(t, mput(tb, "m", o, "after clear"))
						case "remove-then-put":
							if o != k {
								continue
							}
							must(t, mrem(tb, "m", o))
							must(t, mput(tb, "m", o, "again"))
						}
					}
				}
				for i := 0; i < n; i++ {
					if k := fmt.Sprintf("k%02d", i); seen[k] != 1 {
						t.Errorf("%s yielded %d times", k, seen[k])
					}
				}
				must(t, tb.Verify())
			})
		}
	}
}

// TestMapIterRandomWrites: random puts of any entry (existing or new),
// removes of the current one, clears and seals during iterations over
// small segments. Every entry present at the start is yielded exactly once,
// with its value at the start or one written to it before it was reached;
// no entry added during the iteration is yielded.
func TestMapIterRandomWrites(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	tb, _ := newTestTable(t, 8<<30, memory.SegmentSize16M, 4096)
	model := map[string]string{}
	uk := func() string { return fmt.Sprintf("u%d", rng.IntN(60)) }
	val := func() string { return strings.Repeat("v", rng.IntN(40)) + fmt.Sprint(rng.IntN(1000)) }
	for round := 0; round < 200; round++ {
		for i := rng.IntN(30); i > 0; i-- {
			k := uk()
			if rng.IntN(4) == 0 {
				must(t, mrem(tb, "m", k))
				delete(model, k)
			} else {
				v := val()
				must(t, mput(tb, "m", k, v))
				model[k] = v
			}
			if rng.IntN(40) == 0 {
				must(t, tb.Seal())
			}
		}
		// allowed[k]: the values an entry may be yielded with.
		allowed := map[string]map[string]bool{}
		for k, v := range model {
			allowed[k] = map[string]bool{v: true}
		}
		seen := map[string]bool{}
		it := tb.MapIter(hashOf([]byte("m")), []byte("m"))
		for it.Next() {
			k, v := string(it.UserKey()), string(it.Value())
			if seen[k] {
				t.Fatalf("round %d: %s yielded twice", round, k)
			}
			seen[k] = true
			if !allowed[k][v] {
				t.Fatalf("round %d: %s = %q, allowed %v", round, k, v, allowed[k])
			}
			for i := rng.IntN(4); i > 0; i-- {
				switch p := rng.IntN(200); {
				case p == 0:
					must(t, tb.Seal())
				case p < 4:
					must(t, tb.MapClear(hashOf([]byte("m")), []byte("m")))
					clear(model)
				case p < 40:
					must(t, mrem(tb, "m", k))
					delete(model, k)
				default:
					o, v := uk(), val()
					must(t, mput(tb, "m", o, v))
					model[o] = v
					if allowed[o] != nil && !seen[o] {
						allowed[o][v] = true
					}
				}
			}
		}
		for k := range allowed {
			if !seen[k] {
				t.Fatalf("round %d: %s present at the start, not yielded", round, k)
			}
		}
		if len(seen) != len(allowed) {
			t.Fatalf("round %d: yielded %d entries, %d at the start", round, len(seen), len(allowed))
		}
		if got, want := mall(t, tb, "m"), modelString(model); got != want {
			t.Fatalf("round %d: after the iteration\n got %s\nwant %s", round, got, want)
		}
	}
	must(t, tb.Verify())
	t.Logf("stats %+v", tb.Stats())
}

func modelString(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
