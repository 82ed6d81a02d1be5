package fresh

import (
	"fmt"
	"strings"
	"testing"

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
