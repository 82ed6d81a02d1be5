package report

import (
	"strings"
	"testing"
)

// TestJobGates: the job rows' metrics are gated by bound — a row that meets every issue-22
// target passes, and each figure past its bound misses its own gate only.
func TestJobGates(t *testing.T) {
	const raw = `BenchmarkJob/job=flight/procs=1/impl=strata 	1	30000000000 ns/op	0.95 bg/task	0.1 changelog/task	2.9 cpu/model	0 evictions	0.55 model-ratio
BenchmarkJob/job=flight/procs=2/impl=strata 	1	30000000000 ns/op	1.2 bg/task	0.2 changelog/task	3.5 cpu/model	335 evictions	0.1 model-ratio
`
	d, err := Parse(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, o := range d.Check() {
		if o.Unit == "" {
			continue
		}
		if o.Missing {
			t.Fatalf("%s: missing", o.Name())
		}
		got[o.Name()] = o.Pass
	}
	if len(got) != 10 {
		t.Fatalf("%d job gates, want 5 per row: %v", len(got), got)
	}
	for name, pass := range got {
		if want := strings.Contains(name, "procs=1"); pass != want {
			t.Errorf("%s: pass %v, want %v", name, pass, want)
		}
	}
}
