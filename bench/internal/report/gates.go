package report

import "fmt"

// Gate is one DESIGN.md §5 target checked on one benchmark row.
type Gate struct {
	Target   string // the §5 figure
	Workload string
	Row      string
	Peer     string  // "" for an allocation gate
	Min      float64 // minimum speedup over Peer
	// MaxAllocs, when Peer and Unit are "", is the maximum Strata allocs/op.
	MaxAllocs float64
	// Unit, when set, makes a bound gate on Strata's own row: the median of its metric
	// Unit (b.ReportMetric) must be ≥ Bound, or ≤ Bound with AtMost (the job rows).
	Unit   string
	Bound  float64
	AtMost bool
}

// Gates are the throughput targets of DESIGN.md §5 (issue 5, items 4 and 5; issue 14 item 6,
// "honest gates"): in memory, value get/put at 1M keys ≥ 10× Pebble, ≥ 1× the Go map, 0
// allocs/op, read-modify-write ≥ 10× Pebble, list append and map get/put ≥ 5× Pebble, each in
// both key shapes (Shapes: 8 B keys, and a windowed job's 16 B keys in an 8 B namespace); at
// equal memory (every store at a 256 MiB budget or cache, state about half of it) value get
// and map get ≥ 3× Pebble; and state 10× the memory budget with Zipf 0.99 keys ≥ 3× Pebble
// given the same memory (the LargerThanMemory rows, read-only and 50/50); batched access
// (issue 14 item 4) ≥ 2× single calls per key, value get and put at 10M keys in memory and
// get at 10× the budget (uniform keys: Zipf's hot keys leave little to overlap). Every gate reads
// the rows measured at GOMAXPROCS=1 (names without a -N suffix; see Parse): a task thread of
// a stream processor shares the machine with other task threads, so Strata's background work
// gets no core of its own. The Go heap, checkpoint, restore and kernel targets are measured
// elsewhere (tests, the demo, asm_arm64 benchmarks).
var Gates = func() []Gate {
	const point = "point get/put in memory: ≥ 10× Pebble, ≥ 1× Go map, 0 allocs/op"
	const rmw = "read-modify-write in place: ≥ 10× Pebble"
	const lm = "list append, map put/get: ≥ 5× Pebble"
	const eq = "equal memory (256 MiB each, state ≈ half): ≥ 3× Pebble"
	const ltm = "state 10× the memory budget, Zipf 0.99: ≥ 3× Pebble"
	var g []Gate
	for _, key := range Shapes {
		for _, op := range []string{"op=get", "op=update"} {
			w := "FlinkValue/keys=1M/key=" + key
			g = append(g,
				Gate{Target: point, Workload: w, Row: op, Peer: "pebble", Min: 10},
				Gate{Target: point, Workload: w, Row: op, Peer: "gomap", Min: 1},
				Gate{Target: point, Workload: w, Row: op, MaxAllocs: 0})
		}
		for _, v := range []string{"8B", "100B"} {
			w := "YCSB/keys=1M/key=" + key + "/value=" + v
			g = append(g,
				Gate{Target: point, Workload: w, Row: "dist=uniform/mix=C", Peer: "pebble", Min: 10},
				Gate{Target: point, Workload: w, Row: "dist=uniform/mix=C", Peer: "gomap", Min: 1},
				Gate{Target: rmw, Workload: w, Row: "dist=uniform/mix=F", Peer: "pebble", Min: 10})
		}
		g = append(g,
			Gate{Target: lm, Workload: "FlinkList/keys=500K/key=" + key, Row: "op=append", Peer: "pebble", Min: 5},
			Gate{Target: lm, Workload: "FlinkMap/keys=500K/key=" + key, Row: "op=get", Peer: "pebble", Min: 5},
			Gate{Target: lm, Workload: "FlinkMap/keys=500K/key=" + key, Row: "op=put", Peer: "pebble", Min: 5})
	}
	for _, key := range Shapes {
		g = append(g,
			Gate{Target: eq, Workload: EqualMemoryPrefix + "state=value/keys=1M/key=" + key + "/value=100B", Row: "op=get", Peer: "pebble", Min: 3},
			Gate{Target: eq, Workload: EqualMemoryPrefix + "state=map/keys=100K/key=" + key + "/map=10x100B", Row: "op=get", Peer: "pebble", Min: 3})
	}
	for _, mix := range []string{"mix=C", "mix=A"} {
		g = append(g, Gate{Target: ltm, Workload: LTMWorkload, Row: "dist=zipf0.99/" + mix, Peer: "pebble", Min: 3},
			Gate{Target: ltm, Workload: LTMWindowedWorkload, Row: "dist=zipf0.99/" + mix, Peer: "pebble", Min: 3})
	}
	const batched = "batched access (GetBatch/PutBatch) per key: ≥ 2× single calls"
	for _, w := range []string{BatchMemWorkload + "/op=get", BatchMemWorkload + "/op=put", BatchLTMWorkload + "/dist=uniform/op=get"} {
		g = append(g, Gate{Target: batched, Workload: w, Peer: BatchSingle, Min: 2})
	}
	// The whole job (issue 22; DESIGN §5 "a whole job"): the flight demo at its default
	// settings beside its Go model in the same process, at GOMAXPROCS=1 and 2 of the demo's
	// process (bench/suite BenchmarkJob).
	const job = "a whole job beside its Go model: ≥ ½ events/s, CPU ≤ 3×, bg ≤ task, changelog ≤ 15 %, no eviction at 64 MiB"
	for _, w := range JobWorkloads {
		g = append(g,
			Gate{Target: job, Workload: w, Unit: "model-ratio", Bound: 0.5},
			Gate{Target: job, Workload: w, Unit: "cpu/model", Bound: 3, AtMost: true},
			Gate{Target: job, Workload: w, Unit: "bg/task", Bound: 1, AtMost: true},
			Gate{Target: job, Workload: w, Unit: "changelog/task", Bound: 0.15, AtMost: true},
			Gate{Target: job, Workload: w, Unit: "evictions", Bound: 0, AtMost: true})
	}
	return g
}()

// BatchMemWorkload and BatchLTMWorkload are the workloads of bench/suite's batched-access
// rows (BenchmarkBatchedAccess; issue 14 item 4): 10M windowed keys in memory, and the
// larger-than-memory store (10× a 64 MiB budget). Their rows are impl=strata (batched:
// GetBatch, PutBatch) and impl=BatchSingle (the same store through Get and Put), so a gate
// with Peer BatchSingle reads single ÷ batched ns per key.
const (
	BatchMemWorkload = "BatchedAccess/keys=10M/key=16B+ns8B/value=8B"
	BatchLTMWorkload = "BatchedAccess/keys=6100K/value=100B/budget=64MiB"
	BatchSingle      = "strata-single"
)

// JobWorkloads are the workloads of bench/suite's job rows (BenchmarkJob): the flight demo's
// process at GOMAXPROCS=1 and 2; each has one row, impl=strata, and its figures are metrics.
var JobWorkloads = []string{"Job/job=flight/procs=1", "Job/job=flight/procs=2"}

// Shapes are the key= values of bench/suite's point-op rows (suite.Shapes): 8 B keys in the
// void namespace, and 16 B keys in an 8 B namespace.
var Shapes = []string{"8B", "16B+ns8B"}

// EqualMemoryPrefix starts the names of the equal-memory workloads of bench/suite (every
// store at a 256 MiB budget or block cache, state about half of it).
const EqualMemoryPrefix = "EqualMemory/budget=256MiB/"

// LTMWorkload is the larger-than-memory workload of bench/suite (6.1M keys ×
// 110 B = 10× a 64 MiB budget).
const LTMWorkload = "LargerThanMemory/keys=6100K/value=100B/budget=64MiB"

// LTMWindowedWorkload is the same with the rows of a windowed job (16 B keys
// in an 8 B namespace, 100 B values: 6.1M × 124 B ≈ 11× a 64 MiB budget;
// issue 14: the row cache must hold such rows).
const LTMWindowedWorkload = "LargerThanMemoryWindowed/keys=6100K/key=16B/ns=8B/value=100B/budget=64MiB"

// Outcome is a gate's result.
type Outcome struct {
	Gate
	Got     float64
	Pass    bool
	Missing bool
}

// Name is the gate's benchmark row and comparison, e.g.
// "FlinkValue/keys=1M/key=8B op=get vs pebble".
func (o Outcome) Name() string {
	if o.Unit != "" {
		return fmt.Sprintf("%s %s", o.Workload, o.Unit)
	}
	if o.Peer == "" {
		return fmt.Sprintf("%s %s allocs/op", o.Workload, o.Row)
	}
	return fmt.Sprintf("%s %s vs %s", o.Workload, o.Row, o.Peer)
}

// Want formats the target, e.g. "≥ 10×".
func (o Outcome) Want() string {
	if o.Unit != "" {
		if o.AtMost {
			return fmt.Sprintf("≤ %g", o.Bound)
		}
		return fmt.Sprintf("≥ %g", o.Bound)
	}
	if o.Peer == "" {
		return fmt.Sprintf("≤ %g allocs/op", o.MaxAllocs)
	}
	return fmt.Sprintf("≥ %g×", o.Min)
}

// GotString formats the measured figure.
func (o Outcome) GotString() string {
	switch {
	case o.Missing:
		return "no data"
	case o.Unit != "":
		return fmt.Sprintf("%.3g", o.Got)
	case o.Peer == "":
		return fmt.Sprintf("%g allocs/op", o.Got)
	}
	return fmt.Sprintf("%.2f×", o.Got)
}

// Miss describes by how much a failed gate misses, e.g. "needs 1.72× more".
func (o Outcome) Miss() string {
	switch {
	case o.Pass:
		return ""
	case o.Missing:
		return "row missing from the data"
	case o.Unit != "" && o.AtMost:
		return fmt.Sprintf("over by %.3g", o.Got-o.Bound)
	case o.Unit != "":
		return fmt.Sprintf("short by %.3g", o.Bound-o.Got)
	case o.Peer == "":
		return fmt.Sprintf("%g allocs/op over", o.Got-o.MaxAllocs)
	}
	return fmt.Sprintf("short by %.2f× (Strata needs %.2f× its current throughput)", o.Min-o.Got, o.Min/o.Got)
}

// Check evaluates every gate on d.
func (d *Data) Check() []Outcome {
	out := make([]Outcome, 0, len(Gates))
	for _, g := range Gates {
		o := Outcome{Gate: g}
		if g.Unit != "" {
			v, ok := d.Median(Join(g.Workload, "strata", g.Row), g.Unit)
			o.Got, o.Missing = v, !ok
			o.Pass = ok && (g.AtMost && v <= g.Bound || !g.AtMost && v >= g.Bound)
		} else if g.Peer == "" {
			a, ok := d.Median(Join(g.Workload, "strata", g.Row), "allocs/op")
			o.Got, o.Missing, o.Pass = a, !ok, ok && a <= g.MaxAllocs
		} else {
			r, ok := d.Speedup(g.Workload, g.Row, g.Peer)
			o.Got, o.Missing, o.Pass = r, !ok, ok && r >= g.Min
		}
		out = append(out, o)
	}
	return out
}
