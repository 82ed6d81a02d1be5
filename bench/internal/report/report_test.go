package report

import (
	"slices"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkFlinkValue/keys=1M/key=8B/impl=strata/op=get   	  650304	       100.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=strata/op=get   	  650304	       300.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=strata/op=get   	  650304	       200.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=strata/op=get-2 	  650304	        50.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=pebble/op=get   	  129592	      2000 ns/op	    477281 ops/s	      3005 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=pebble/op=get-2 	  129592	      1000 ns/op	    477281 ops/s	      3005 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=gomap/op=get    	  129592	       150 ns/op	    477281 ops/s	      3005 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkMap/keys=500K/key=16B+ns8B/impl=strata/op=put-new-2 	  129592	       150 ns/op
BenchmarkFlinkTTL/state=value
    flink_test.go:171: TTL not built yet: changelog/TTL issue
--- SKIP: BenchmarkFlinkTTL/state=value
`

func TestParseAndGates(t *testing.T) {
	d, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := d.Median("FlinkValue/keys=1M/key=8B/impl=strata/op=get", "ns/op"); m != 200 {
		t.Fatalf("median = %v, want 200 (the GOMAXPROCS=2 sample must not be mixed in)", m)
	}
	if r, _ := d.Speedup("FlinkValue/keys=1M/key=8B", "op=get", "pebble"); r != 10 {
		t.Fatalf("speedup = %v, want 10", r)
	}
	if r, _ := d.Speedup("FlinkValue/keys=1M/key=8B/gomaxprocs=2", "op=get", "pebble"); r != 20 {
		t.Fatalf("GOMAXPROCS=2 speedup = %v, want 20", r)
	}
	if _, ok := d.Median("FlinkMap/keys=500K/key=16B+ns8B/gomaxprocs=2/impl=strata/op=put-new", "ns/op"); !ok {
		t.Fatalf("no GOMAXPROCS=2 row for a name with a dash; names: %v", d.Order)
	}
	if !slices.Equal(d.Procs, []int{1, 2}) {
		t.Fatalf("Procs = %v, want [1 2]", d.Procs)
	}
	names, _, _ := d.Workloads()
	if want := []string{"FlinkValue/keys=1M/key=8B", "FlinkValue/keys=1M/key=8B/gomaxprocs=2", "FlinkMap/keys=500K/key=16B+ns8B/gomaxprocs=2"}; !slices.Equal(names, want) {
		t.Fatalf("workloads %q, want %q", names, want)
	}
	if got := d.Skips["FlinkTTL/state=value"]; got != "TTL not built yet: changelog/TTL issue" {
		t.Fatalf("skip reason %q", got)
	}
	w, i, r, ok := Split("YCSB/keys=1M/value=8B/impl=swiss/dist=uniform/mix=A")
	if !ok || w != "YCSB/keys=1M/value=8B" || i != "swiss" || r != "dist=uniform/mix=A" {
		t.Fatalf("Split = %q %q %q", w, i, r)
	}
	var pass, miss, missing int
	for _, o := range d.Check() {
		switch {
		case o.Missing:
			missing++
		case o.Pass:
			pass++
		default:
			miss++
		}
	}
	// get: vs pebble 10× passes, vs gomap 0.75× misses, allocs 0 passes; the rest has no data.
	if pass != 2 || miss != 1 || missing != len(Gates)-3 {
		t.Fatalf("pass %d miss %d missing %d", pass, miss, missing)
	}
}

func TestWithProcs(t *testing.T) {
	for _, c := range []struct {
		name  string
		procs int
		want  string
	}{
		{"FlinkValue/keys=1M/key=8B/impl=strata/op=get", 1, "FlinkValue/keys=1M/key=8B/impl=strata/op=get"},
		{"FlinkValue/keys=1M/key=8B/impl=strata/op=get", 2, "FlinkValue/keys=1M/key=8B/gomaxprocs=2/impl=strata/op=get"},
		{"Checkpoint/state=256MiB/impl=pebble", 4, "Checkpoint/state=256MiB/gomaxprocs=4/impl=pebble"},
		{"FlinkTTL/state=value", 2, "FlinkTTL/state=value/gomaxprocs=2"},
	} {
		if got := WithProcs(c.name, c.procs); got != c.want {
			t.Errorf("WithProcs(%q, %d) = %q, want %q", c.name, c.procs, got, c.want)
		}
	}
}

// TestGatesMissAtTwoProcs: output of a GOMAXPROCS=2 run (every name with -2) passes no gate.
func TestGatesMissAtTwoProcs(t *testing.T) {
	const two = `BenchmarkFlinkValue/keys=1M/key=8B/impl=strata/op=get-2 	 1000	 1.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkFlinkValue/keys=1M/key=8B/impl=pebble/op=get-2 	 1000	 1000 ns/op	 0 B/op	 0 allocs/op
`
	d, err := Parse(strings.NewReader(two))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range d.Check() {
		if !o.Missing {
			t.Errorf("gate %s reads a GOMAXPROCS=2 row", o.Name())
		}
	}
}

// TestGatesCoverShapes: every in-memory gate exists in both key shapes, and the equal-memory
// gates are there. The batched-access gates are not per shape: they compare Strata's batched
// path with its single calls on one (the windowed) shape.
func TestGatesCoverShapes(t *testing.T) {
	count := map[string]int{}
	for _, g := range Gates {
		if g.Peer == BatchSingle {
			continue
		}
		for _, s := range Shapes {
			if strings.Contains(g.Workload, "/key="+s) {
				count[s]++
			}
		}
	}
	if count["8B"] == 0 || count["8B"] != count["16B+ns8B"] {
		t.Fatalf("gates per key shape: %v", count)
	}
	eq := 0
	for _, g := range Gates {
		if strings.HasPrefix(g.Workload, EqualMemoryPrefix) {
			eq++
		}
	}
	if eq != 4 {
		t.Fatalf("%d equal-memory gates, want 4 (value and map get, two shapes)", eq)
	}
}
