package report

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkFlinkValue/keys=1M/impl=strata/op=get-2   	  650304	       100.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/impl=strata/op=get-2   	  650304	       300.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/impl=strata/op=get-2   	  650304	       200.0 ns/op	   2777860 ops/s	       621.0 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/impl=pebble/op=get-2   	  129592	      2000 ns/op	    477281 ops/s	      3005 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkValue/keys=1M/impl=gomap/op=get-2    	  129592	       150 ns/op	    477281 ops/s	      3005 p99-ns	       0 B/op	       0 allocs/op
BenchmarkFlinkTTL/state=value
    flink_test.go:171: TTL not built yet: changelog/TTL issue
--- SKIP: BenchmarkFlinkTTL/state=value
`

func TestParseAndGates(t *testing.T) {
	d, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := d.Median("FlinkValue/keys=1M/impl=strata/op=get", "ns/op"); m != 200 {
		t.Fatalf("median = %v, want 200", m)
	}
	if r, _ := d.Speedup("FlinkValue/keys=1M", "op=get", "pebble"); r != 10 {
		t.Fatalf("speedup = %v, want 10", r)
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
