// Command flightdemo is Strata's demo job: it replays the 3M real US flight records of
// testdata/flights-3m.parquet (2001, U.S. DOT BTS) in event-time order through Strata keyed
// state and prints throughput, per-operation latency percentiles, state size and results a person
// can check, cross-checked against the same computation on plain Go maps.
//
// State, per event (one flight copy):
//
//	route "ORG-DST"  AggregatingState  delay count, sum, sum of squares, min, max
//	route "ORG-DST"  ListState         the last 10 delays (Add; Get + Update when it exceeds 10)
//	origin "ORG"     MapState          destination -> (count, sum of delays)
//	route, ns = day  ReducingState     max delay of the day; read and cleared when the day is over
//	route, ns = day  ListState         every delay of the day, kept: the flight history, so the
//	                                   state grows with days × routes × scale
//
// The store runs with a 64 MiB memory budget by default (-budget), so that the state outgrows
// memory at a modest scale and the job exercises all three tiers: what does not fit the budget
// is evicted to the LsmStore in the store's directory. At -scale 4 the state is about 4× the
// default budget on disk; the job prints its resident memory (VmRSS, peak VmHWM) beside the
// budget and the bytes of the store's files.
//
// Usage (from bench/):
//
//	go run ./cmd/flightdemo                   # all 3M flights, store in a temporary directory
//	go run ./cmd/flightdemo -scale 8          # 8 salted copies of every key and flight
//	go run ./cmd/flightdemo -budget 0         # Strata's default budget (1 GiB) instead of 64 MiB
//	go run ./cmd/flightdemo -json ../testdata/flights-20k.json
//
// It exits non-zero when the state disagrees with the plain Go map computation.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
	"unsafe"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/trace"
)

const defaultData = "flights-3m.parquet"

// defaultBudget is the demo's memory budget: small beside the state, so that the job runs
// through the FreshTable, the SliceTable and the LsmStore (Strata's own default is 1 GiB).
const defaultBudget = 64 << 20

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flightdemo:", err)
		os.Exit(1)
	}
}

type config struct {
	data   string // parquet path
	json   string // JSON path; replaces data when set
	rows   int    // parquet rows to read, 0 = all
	dir    string // store directory, "" = a temporary directory
	budget int64  // memory budget in bytes, 0 = Strata's default
	scale  int    // K
	prof   string // CPU profile of the replay, "" = none
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("flightdemo", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.data, "data", "", "flights parquet file (default: testdata/"+defaultData+" of the repository)")
	fs.StringVar(&c.json, "json", "", "flights JSON file (e.g. testdata/flights-20k.json), instead of -data")
	fs.IntVar(&c.rows, "rows", 0, "read only the first `n` parquet rows (0 = all)")
	fs.StringVar(&c.dir, "dir", "", "store directory (default: a temporary directory, removed at exit)")
	fs.Int64Var(&c.budget, "budget", defaultBudget, "memory budget in `bytes` (0 = Strata's default, 1 GiB)")
	fs.IntVar(&c.scale, "scale", 1, "salt every key `K` times and emit each flight K times (grows state K-fold)")
	fs.StringVar(&c.prof, "cpuprofile", "", "write a CPU profile of the replay to `file` (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.scale < 1 {
		return fmt.Errorf("-scale %d: must be >= 1", c.scale)
	}

	start := time.Now()
	tr, src, err := load(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %s: %d flights, %d airports, %d routes, trace %d bytes/row (%.2fs)\n",
		src, len(tr.Rows), len(tr.Airports), len(tr.Routes), rowSize, time.Since(start).Seconds())

	dir := c.dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "flightdemo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	opts := strata.Options{MemoryBudget: c.budget}
	if c.budget > 0 && c.budget < 256<<20 {
		opts.SegmentSize = 16 << 20 // four segments at least in the budget
	}
	store, err := strata.Open(dir, opts)
	if err != nil {
		return err
	}
	defer store.Close()
	j, err := newJob(store, tr, c.scale)
	if err != nil {
		return err
	}

	events := len(tr.Rows) * c.scale
	fmt.Fprintf(out, "replaying %d events (scale %d) into %s\n", events, c.scale, dir)
	if c.prof != "" {
		f, err := os.Create(c.prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	t0 := time.Now()
	err = j.replay(func(done int) {
		el := time.Since(t0).Seconds()
		fmt.Fprintf(out, "  %10d / %d events  %6.1f%%  %.2f M events/s\n", done, events,
			100*float64(done)/float64(events), float64(done)/el/1e6)
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(t0)
	if c.prof != "" {
		pprof.StopCPUProfile()
	}
	got, err := j.results()
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := store.Stats()

	t1 := time.Now()
	want := runModel(tr, c.scale, nil)
	modelTime := time.Since(t1)

	report(out, j, got, events, elapsed, st, ms.HeapAlloc, modelTime)

	t2 := time.Now()
	lists, hdiffs, err := j.checkHistory(10)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "history: %d (route, day) lists read back and checked in %.2fs\n", lists, time.Since(t2).Seconds())
	if err := store.Close(); err != nil { // persists: the files now hold the whole state
		return err
	}
	disk := dirBytes(dir)
	budget := st.BudgetLimit
	fmt.Fprintf(out, "memory: budget %.0f MiB, VmRSS %.0f MiB, peak VmHWM %.0f MiB, Go heap %.0f MiB (the trace and the Go map model included)\n",
		float64(budget)/(1<<20), float64(procStatus("VmRSS"))/(1<<20), float64(procStatus("VmHWM"))/(1<<20), float64(ms.HeapAlloc)/(1<<20))
	fmt.Fprintf(out, "disk: %d bytes (%.0f MiB) in %s after Close, %.1f× the budget\n",
		disk, float64(disk)/(1<<20), dir, float64(disk)/float64(budget))

	d := diff(got, want, 10)
	d = append(d, hdiffs...)
	if len(d) > 0 {
		fmt.Fprintln(out, "check: FAILED (Strata state differs from the plain Go map computation)")
		for _, s := range d {
			fmt.Fprintln(out, "  ", s)
		}
		return errors.New("check failed")
	}
	fmt.Fprintln(out, "check: OK (stats, last-10 lists, map entries, daily maxima, top-5 and every day's history equal the plain Go map computation)")
	return nil
}

// procStatus returns a field of /proc/self/status in bytes (VmRSS, VmHWM), or -1 without /proc.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// dirBytes returns the bytes of the regular files below dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// rowSize is the in-memory size of one trace row in bytes.
const rowSize = unsafe.Sizeof(trace.Row{})

func report(out io.Writer, j *job, got *results, events int, elapsed time.Duration, st strata.StoreStats,
	heap uint64, modelTime time.Duration) {
	fmt.Fprintf(out, "\nevents: %d in %.2fs: %.2f M events/s (plain Go maps: %.2fs, %.2f M events/s)\n",
		events, elapsed.Seconds(), float64(events)/elapsed.Seconds()/1e6,
		modelTime.Seconds(), float64(events)/modelTime.Seconds()/1e6)
	fmt.Fprintf(out, "latency per state operation (sampled every %d events):\n", j.sampleMask+1)
	fmt.Fprintf(out, "  %-11s %10s %10s %10s %10s\n", "op", "samples", "p50", "p99", "max")
	for o := range numOps {
		h := &j.lat[o]
		fmt.Fprintf(out, "  %-11s %10d %10v %10v %10v\n", opNames[o], h.n, h.quantile(0.5), h.quantile(0.99), time.Duration(h.max))
	}
	entries, routes := 0, 0
	for _, m := range got.Dests {
		entries += len(m)
	}
	for _, s := range got.Stats {
		if s.Count > 0 {
			routes++
		}
	}
	fmt.Fprintf(out, "keys: %d route keys x 2 states, %d origin keys with %d map entries, %d (route, day) maxima read and cleared\n",
		routes, len(got.Dests), entries, got.Days.N)
	fmt.Fprintf(out, "state: %s\n", statsLine(st))
	traceBytes := len(j.tr.Rows) * int(rowSize)
	fmt.Fprintf(out, "Go heap: %d bytes (%.1f MiB), of which the trace %d bytes (%.1f MiB)\n",
		heap, float64(heap)/(1<<20), traceBytes, float64(traceBytes)/(1<<20))

	fmt.Fprintf(out, "\nworst mean arrival delay (routes with >= %d flights):\n", minFlights)
	for i, r := range worstRoutes(got.Stats, 5, minFlights) {
		s := r.Stats
		fmt.Fprintf(out, "  %d. %-12s mean %6.2f min  stddev %6.2f  count %5d  min %5d  max %5d  last %d: %v\n",
			i+1, routeKeyName(j.tr, j.K, r.Key), s.mean(), s.stddev(), s.Count, s.Min, s.Max, lastN, got.Last[r.Key])
	}
}

// load decodes the configured input into a trace and names its source.
func load(c config) (*trace.Trace, string, error) {
	if c.json != "" {
		tr, err := trace.LoadJSON(c.json)
		return tr, c.json, err
	}
	path := c.data
	if path == "" {
		var err error
		if path, err = findData(defaultData); err != nil {
			return nil, "", err
		}
	}
	tr, err := trace.LoadParquet(path, c.rows)
	return tr, path, err
}

// findData looks for testdata/name of the repository: from the working directory (bench/ or
// the repository root), then next to this source file, then above the executable.
func findData(name string) (string, error) {
	cands := []string{filepath.Join("..", "testdata", name), filepath.Join("testdata", name)}
	if _, file, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", name))
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		for range 4 {
			cands = append(cands, filepath.Join(d, "testdata", name))
			d = filepath.Dir(d)
		}
	}
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (tried %s); pass -data", name, strings.Join(cands, ", "))
}
