package nexmark

import (
	"testing"

	"github.com/strata-db/strata"
)

// testEvents is the length of the short checked runs: 20 s of event time at the default
// rate, so that 10 s windows, sessions and the q5 hop windows fire a few times.
const testEvents = 200_000

func openStore(t testing.TB, budget int64) *strata.Store {
	t.Helper()
	opts := strata.Options{MemoryBudget: budget}
	if budget > 0 && budget < 256<<20 {
		opts.SegmentSize = 16 << 20
	}
	s, err := strata.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func runOn(t testing.TB, spec QuerySpec, b Backend, from, to int64) Out {
	t.Helper()
	var o Out
	q, err := spec.New(b, &o)
	if err != nil {
		t.Fatal(err)
	}
	d := Driver{Gen: NewGenerator(1, 0), Query: q, Out: &o, From: from, To: to}
	if err := d.Run(); err != nil {
		t.Fatalf("%s on %s: %v", spec.Name, b.Name(), err)
	}
	return o
}

// TestQueriesMatchModel is the short checked run of every query: its output on Strata equals
// its output on the Go model (check: OK), and is not empty.
func TestQueriesMatchModel(t *testing.T) {
	for _, spec := range Queries {
		t.Run(spec.Name, func(t *testing.T) {
			want := runOn(t, spec, &ModelBackend{}, 0, testEvents)
			got := runOn(t, spec, &StrataBackend{Store: openStore(t, 64<<20)}, 0, testEvents)
			if got != want {
				t.Fatalf("%s: strata %v, model %v", spec.Name, got, want)
			}
			if want.Rows <= 0 || want.Changes <= 0 {
				t.Fatalf("%s: emitted nothing: %v", spec.Name, want)
			}
			t.Logf("%s: %v", spec.Name, want)
		})
	}
}

// TestQueryPastBudget is the short checked run of q20 with its state more than 10× the
// memory budget (4 MiB segments, a 5 MiB budget: MinMemoryBudget of the segment size: most of the join state is in the LsmStore):
// its output still equals the model's. The speed of the same query past the budget against
// in memory is in bench/RESULTS.md (cmd/results, the Nexmark section).
func TestQueryPastBudget(t *testing.T) {
	const budget, events = 5 << 20, 330_000
	spec, err := Lookup("q20")
	if err != nil {
		t.Fatal(err)
	}
	s, err := strata.Open(t.TempDir(), strata.Options{MemoryBudget: budget, SegmentSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := runOn(t, spec, &ModelBackend{}, 0, events)
	got := runOn(t, spec, &StrataBackend{Store: s}, 0, events)
	if got != want {
		t.Fatalf("q20 past the budget: strata %v, model %v", got, want)
	}
	st := s.Stats()
	state := st.Fresh.DataBytes + st.Slices.Bytes + st.LSM.Bytes
	if state < 10*budget || st.LSM.Bytes == 0 {
		t.Fatalf("state %d bytes (LsmStore %d) = %.1f× the %d-byte budget, want ≥ 10×", state, st.LSM.Bytes,
			float64(state)/budget, budget)
	}
	t.Logf("q20: %v; state %.1f MiB = %.1f× the budget, LsmStore %.1f MiB", want, float64(state)/(1<<20),
		float64(state)/budget, float64(st.LSM.Bytes)/(1<<20))
}
