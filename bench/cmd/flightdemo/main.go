// Command flightdemo is Strata's demo job: it replays the 3M real US flight records of
// testdata/flights-3m.parquet (2001, U.S. DOT BTS) in event-time order through Strata keyed
// state and prints throughput, per-operation latency percentiles, state size and results a person
// can check, cross-checked against the same computation on plain Go maps. Its throughput is
// printed beside a Go model doing the same work (model_fair.go: the same states, history and
// timers as Go values in Go maps and a heap) and beside the plain model (model.go, less work).
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
// and the event-time operators (eventtime.go), on the departure in UTC (the local time shifted
// by the origin's zone from the airports broadcast state) with a watermark -out-of-order (6 h,
// the file's measured maximum) behind the latest event time:
//
//	route, ns = UTC day  AggregatingState  a tumbling day window, fired by an event-time timer
//	destination airport  ValueState        the open session windows (Flink's MergingWindowSet)
//	dest, ns = window    AggregatingState  a session's delays; sessions merge (MergeNamespaces)
//	route                ValueState, TTL   the route's activity period: 24 h of event time
//	                                       (Options.Clock is the latest event time)
//	"airports"           BroadcastState    testdata/airports.csv: IATA -> city, state, position
//
// The store runs with a 64 MiB memory budget by default (-budget), so that the state outgrows
// memory at a modest scale and the job exercises all three tiers: what does not fit the budget
// is evicted to the LsmStore in the store's directory. At -scale 4 the state is about 4× the
// default budget on disk; the job prints its resident memory (VmRSS, peak VmHWM) beside the
// budget and the bytes of the store's files.
//
// Checkpoints: the job checkpoints every -checkpoint-every events (default 50 000, so the 3M
// flights take 59) into a checkpoint directory, asynchronously (the replay goes on during the
// upload), with its input position: the row to resume from, and the little job memory the state
// does not hold (position.go). The changelog is on by default (-changelog=false: native
// incremental checkpoints): a checkpoint stores the log's tail on top of the last
// materialization, taken in the background every -materialize-every (default 2 s, a few per
// run; -space-amplification starts them early). It prints the sync pause, the async duration
// and their sum (p50/p99), the bytes per checkpoint (objects its manifest lists that the
// previous one did not; mean, max), the materializations and the log's size since the last
// one (strata.ChangelogStats). -checkpoints names the checkpoint directory, or an
// S3-compatible bucket as s3://bucket/prefix?endpoint=… (package checkpoint/s3, credentials
// from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; storage.go). The replay is deterministic from a position: the state
// after rows [0, i) plus the replay of [i, n) equals the replay of [0, n) (job invariant 3).
//
//   - -kill-after N runs the job in a child process (this executable again) and SIGKILLs it
//     once it reported N events; the parent restores the newest committed checkpoint into a new
//     directory (CLAIM mode), replays from its position to the end and checks (kill.go).
//   - -rescale P checkpoints at half the events and restores into P Stores, each owning the key
//     groups ComputeKeyGroupRangeForOperatorIndex(128, P, i) (NO_CLAIM: they share the one
//     lineage), routes every key to the Store owning its key group, checkpoints all P at three
//     quarters, restores the P checkpoints into one Store (scale in, CLAIM) and finishes.
//
// Usage (from bench/):
//
//	go run ./cmd/flightdemo                   # all 3M flights, store in a temporary directory
//	go run ./cmd/flightdemo -scale 8          # 8 salted copies of every key and flight
//	go run ./cmd/flightdemo -budget 0         # Strata's default budget (1 GiB) instead of 64 MiB
//	go run ./cmd/flightdemo -json testdata/flights-20k.json
//	go run ./cmd/flightdemo -kill-after 1700000 # SIGKILL past 1.7M events, restore, finish, check
//	go run ./cmd/flightdemo -rescale 2        # 1 -> 2 -> 1 Stores through checkpoints
//	go run ./cmd/flightdemo -changelog=false  # native incremental checkpoints, no changelog
//	go run ./cmd/flightdemo -series s.txt     # also write events over time, checkpoints, materializations (series.go)
//	go run ./cmd/flightdemo -kill-after 1700000 -checkpoints 's3://ckpt/demo?endpoint=http://127.0.0.1:7070'
//
// It exits non-zero when the state disagrees with the plain Go map computation.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/flightjob"
	"github.com/strata-db/strata/bench/internal/trace"
	"github.com/strata-db/strata/checkpoint"
)

const defaultData = "flights-3m.parquet"

// defaultBudget is the demo's memory budget: small beside the state, so that the job runs
// through the FreshTable, the SliceTable and the LsmStore (Strata's own default is 1 GiB).
const defaultBudget = 64 << 20

func main() {
	if os.Getenv(childEnv) != "" {
		if err := runChild(os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "flightdemo (child):", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flightdemo:", err)
		os.Exit(1)
	}
}

type config struct {
	data        string        // parquet path
	json        string        // JSON path; replaces data when set
	rows        int           // parquet rows to read, 0 = all
	dir         string        // store directory, "" = a temporary directory
	budget      int64         // memory budget in bytes, 0 = Strata's default
	hot         int64         // hot tier bound in bytes (strata.Options.HotTierSize); -1 = budget/8
	scale       int           // K
	prof        string        // CPU profile of the replay, "" = none
	checkpoints string        // checkpoint directory, "" = a temporary directory
	every       int           // events between checkpoints, 0 = none, -1 = the default
	killAfter   int           // events after which the child is SIGKILLed, 0 = no kill
	rescale     int           // parallelism to rescale to, 0 = none
	changelog   bool          // checkpoints with the changelog (strata.ChangelogOptions)
	materialize time.Duration // changelog materialization interval
	spaceAmp    float64       // changelog space-amplification cap, 0 = off
	airports    string        // airports CSV path, "" = testdata/airports.csv
	outOfOrder  time.Duration // the watermark's out-of-orderness bound
	clock       *eventClock   // the Stores' Options.Clock (eventtime.go)
	series      string        // -series file, "" = none
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("flightdemo", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.data, "data", "", "flights parquet file (default: bench/testdata/"+defaultData+" of the repository)")
	fs.StringVar(&c.json, "json", "", "flights JSON file (e.g. testdata/flights-20k.json), instead of -data")
	fs.IntVar(&c.rows, "rows", 0, "read only the first `n` parquet rows (0 = all)")
	fs.StringVar(&c.dir, "dir", "", "store directory (default: a temporary directory, removed at exit); with -kill-after or -rescale, the Stores go to subdirectories")
	fs.Int64Var(&c.budget, "budget", defaultBudget, "memory budget in `bytes` per Store (0 = Strata's default, 1 GiB)")
	fs.Int64Var(&c.hot, "hot", -1, "hot tier bound in `bytes` per Store (strata.Options.HotTierSize): -1 = an eighth of the budget, 0 = off")
	fs.IntVar(&c.scale, "scale", 1, "salt every key `K` times and emit each flight K times (grows state K-fold)")
	fs.StringVar(&c.prof, "cpuprofile", "", "write a CPU profile of the replay to `file` (go tool pprof)")
	fs.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint directory (default: a temporary directory, removed at exit), or an S3-compatible bucket: s3://bucket/prefix?endpoint=http://127.0.0.1:7070 (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	fs.IntVar(&c.every, "checkpoint-every", -1, fmt.Sprintf("checkpoint every `n` events (0 = never; default %d, or a twelfth of the events if that is less)", defaultCheckpointEvery))
	fs.IntVar(&c.killAfter, "kill-after", 0, "run the job in a child process, SIGKILL it after `n` events, restore the last checkpoint and finish")
	fs.BoolVar(&c.changelog, "changelog", true, "checkpoint with the changelog: each checkpoint stores the log's tail on top of a materialization taken in the background (false: native incremental checkpoints)")
	fs.DurationVar(&c.materialize, "materialize-every", defaultMaterializeEvery, "with -changelog, the `interval` between materializations")
	fs.Float64Var(&c.spaceAmp, "space-amplification", 0, "with -changelog, start a materialization early once the log exceeds (`cap` − 1) × the materialized size (0 = off; otherwise at least 1)")
	fs.StringVar(&c.airports, "airports", "", "airports CSV, the job's broadcast state (default: bench/testdata/airports.csv of the repository)")
	fs.DurationVar(&c.outOfOrder, "out-of-order", defaultOutOfOrder, "the watermark's out-of-orderness `bound`: the watermark is the largest event time seen minus it")
	fs.StringVar(&c.series, "series", "", "write the replay's progress over time (events, checkpoints, materializations) to `file` (series.go; cmd/results charts it; ignored with -kill-after)")
	fs.IntVar(&c.rescale, "rescale", 0, "at half the events, checkpoint and restore into `p` Stores splitting the key groups; at three quarters, back into one")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.clock = new(eventClock)
	if c.outOfOrder < 0 {
		return c, fmt.Errorf("-out-of-order %v: must not be negative", c.outOfOrder)
	}
	if c.scale < 1 {
		return c, fmt.Errorf("-scale %d: must be >= 1", c.scale)
	}
	if c.killAfter < 0 || c.rescale < 0 || c.rescale == 1 || c.rescale > maxParallelism {
		return c, fmt.Errorf("-kill-after %d, -rescale %d: the kill point must be positive, the parallelism in [2, %d]", c.killAfter, c.rescale, maxParallelism)
	}
	if c.changelog && c.materialize <= 0 {
		return c, fmt.Errorf("-materialize-every %v: must be positive", c.materialize)
	}
	if c.killAfter > 0 && c.rescale > 0 {
		return c, errors.New("-kill-after and -rescale: one at a time")
	}
	return c, nil
}

func run(args []string, out io.Writer) (err error) {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}

	start := time.Now()
	tr, src, err := load(c)
	if err != nil {
		return err
	}
	table, apath, err := loadAirportsTable(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %s: %d flights, %d airports, %d routes, trace %d bytes/row; %s: %d airports (%.2fs)\n",
		src, len(tr.Rows), len(tr.Airports), len(tr.Routes), rowSize, apath, len(table), time.Since(start).Seconds())
	fresh := etConfig{Bound: c.outOfOrder, Clock: c.clock, Airports: table}
	fromCkpt := etConfig{Bound: c.outOfOrder, Clock: c.clock}

	dir := c.dir
	if dir == "" {
		dir, err = os.MkdirTemp("", "flightdemo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	ckDir := c.checkpoints
	if ckDir == "" {
		ckDir, err = os.MkdirTemp("", "flightdemo-checkpoints-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ckDir)
	}
	storage, err := openStorage(ckDir)
	if err != nil {
		return err
	}
	n := len(tr.Rows)
	events := n * c.scale
	c.every = checkpointEvery(c.every, events)
	ck := &checkpointer{every: c.every, nextID: 1, storage: storage}

	// Every Store the run opens is released on the way out; the final one is closed (and so
	// persisted) explicitly below, so Discard then only reports ErrClosed.
	var opened []*strata.Store
	defer func() {
		for _, s := range opened {
			s.Discard()
		}
	}()
	var restores []restoreRecord
	var j *job
	from := 0 // the first row this process replays

	var elapsed time.Duration // replay time, restores excluded
	replayed := 0             // events replayed by this process
	if c.prof != "" {
		f, err := os.Create(c.prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var sr *series
	if c.series != "" && c.killAfter == 0 {
		if sr, err = newSeries(c.series); err != nil {
			return err
		}
		defer func() {
			if cerr := sr.close(); err == nil {
				err = cerr
			}
		}()
		ck.onDone = func(r ckRecord) { sr.record(r.Events, "checkpoint") }
	}
	play := func(from, to int) error {
		t0 := time.Now()
		last := t0
		err := j.replay(from, to, func(done int) {
			if sr != nil {
				sr.progress(done, func() (mats int64) {
					for _, p := range j.parts {
						mats += p.store.ChangelogStats().Materializations
					}
					return mats
				})
			}
			if now := time.Now(); now.Sub(last) >= time.Second {
				last = now
				fmt.Fprintf(out, "  %10d / %d events  %6.1f%%  %.2f M events/s\n", done, events,
					100*float64(done)/float64(events), float64(done-from*c.scale)/now.Sub(t0).Seconds()/1e6)
			}
		})
		elapsed += time.Since(t0)
		replayed += (to - from) * c.scale
		return err
	}
	resume := func(stores []*strata.Store, r *restoreRecord) error {
		opened = append(opened, stores...)
		t0 := time.Now()
		if err := j.attach(stores...); err != nil {
			return err
		}
		if err := j.resume(r.Position); err != nil {
			return err
		}
		r.Resume = time.Since(t0)
		restores = append(restores, *r)
		return nil
	}

	switch {
	case c.killAfter > 0:
		// The child's run, killed; then this process restores the newest committed checkpoint.
		childArgs := append(slices.Clone(args), "-dir", filepath.Join(dir, "killed"), "-checkpoints", ckDir,
			"-checkpoint-every", strconv.Itoa(c.every))
		killedAt, taken, err := killChild(childArgs, c.killAfter, out)
		if err != nil {
			return err
		}
		ck.taken = taken
		owner := ownerOf(nil)
		h, err := strata.LatestCheckpoint(context.Background(), storage, owner)
		restored := filepath.Join(dir, "restored")
		if errors.Is(err, strata.ErrNoCheckpoint) {
			// Killed before its first checkpoint: start over, as Flink does without one.
			fmt.Fprintf(out, "restore: no checkpoint committed under %s; replaying from event 0 (the child had processed %d)\n", owner, killedAt)
			s, err := strata.Open(restored, storeOptions(c, storage, nil, strata.NoClaim))
			if err != nil {
				return err
			}
			opened = append(opened, s)
			if j, err = newJob(tr, c.scale, fresh, s); err != nil {
				return err
			}
			break
		} else if err != nil {
			return err
		}
		// CLAIM: a failover of the same job takes its own lineage over; the next checkpoint is
		// incremental on the restored one.
		stores, r, err := restore(c, storage, n, []string{restored}, []*strata.KeyGroupRange{nil}, strata.Claim, []strata.CheckpointHandle{h})
		if err != nil {
			return err
		}
		if j, err = newJob(tr, c.scale, fromCkpt, stores...); err != nil {
			return err
		}
		if err := resume(stores, &r); err != nil {
			return err
		}
		printRestore(out, "after the kill", r)
		fmt.Fprintf(out, "kill: events %d to %d, which the child had processed after that checkpoint (at least), are replayed\n",
			r.Position.Row*c.scale, killedAt)
		ck.nextID = h.ID + 1
		from = r.Position.Row

	case c.rescale > 0:
		// 1 Store for [0, n/2); c.rescale Stores for [n/2, 3n/4); 1 Store again for [3n/4, n).
		s, err := strata.Open(filepath.Join(dir, "p1"), storeOptions(c, storage, nil, strata.NoClaim))
		if err != nil {
			return err
		}
		opened = append(opened, s)
		if j, err = newJob(tr, c.scale, fresh, s); err != nil {
			return err
		}
		j.ck = ck
		fmt.Fprintf(out, "replaying %d events (scale %d), 1 Store, to event %d\n", events, c.scale, n/2*c.scale)
		if err := play(0, n/2); err != nil {
			return err
		}
		hs, err := ck.now(j, n/2)
		if err != nil {
			return err
		}
		s.Discard() // its state is in the checkpoint: nothing to persist
		// NO_CLAIM: two Stores restore from one lineage, so neither may take it over (each
		// would garbage-collect the objects the other still references); their first
		// checkpoints are full.
		var dirs []string
		var kgs []*strata.KeyGroupRange
		for i := range c.rescale {
			kg := strata.ComputeKeyGroupRangeForOperatorIndex(maxParallelism, c.rescale, i)
			kgs = append(kgs, &kg)
			dirs = append(dirs, filepath.Join(dir, fmt.Sprintf("p%d-%d", c.rescale, i)))
		}
		stores, r, err := restore(c, storage, n, dirs, kgs, strata.NoClaim, hs)
		if err != nil {
			return err
		}
		if err := resume(stores, &r); err != nil {
			return err
		}
		printRestore(out, fmt.Sprintf("scale out 1 -> %d, key groups %v", c.rescale, kgRanges(kgs)), r)
		if err := play(n/2, n*3/4); err != nil {
			return err
		}
		if hs, err = ck.now(j, n*3/4); err != nil {
			return err
		}
		for _, s := range stores {
			s.Discard()
		}
		// CLAIM: each restored lineage has exactly one heir now.
		stores, r, err = restore(c, storage, n, []string{filepath.Join(dir, "p1-again")}, []*strata.KeyGroupRange{nil}, strata.Claim, hs)
		if err != nil {
			return err
		}
		if err := resume(stores, &r); err != nil {
			return err
		}
		printRestore(out, fmt.Sprintf("scale in %d -> 1", c.rescale), r)
		from = n * 3 / 4

	default:
		s, err := strata.Open(dir, storeOptions(c, storage, nil, strata.NoClaim))
		if err != nil {
			return err
		}
		opened = append(opened, s)
		if j, err = newJob(tr, c.scale, fresh, s); err != nil {
			return err
		}
	}
	j.ck = ck

	cl := "off"
	if c.changelog {
		cl = fmt.Sprintf("on, materializations every %v", c.materialize)
	}
	fmt.Fprintf(out, "replaying events %d to %d (scale %d) into %s, checkpoints every %d events into %s, changelog %s\n",
		from*c.scale, events, c.scale, j.parts[0].store.Dir(), c.every, ckDir, cl)
	if err := play(from, n); err != nil {
		return err
	}
	if _, err := ck.finish(j); err != nil {
		return err
	}
	if c.prof != "" {
		pprof.StopCPUProfile()
	}
	store := j.parts[0].store
	got, err := j.results()
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := store.Stats()

	// The two Go models, timed over every event (a restored run replays only part of them):
	// the fair one does the job's work on Go values in Go maps; the plain one less (model.go).
	t1, cpu1 := time.Now(), processCPU()
	fair, fairLists, fairDelays := runFairModel(tr, c.scale, fresh)
	fairTime, fairCPU := time.Since(t1), processCPU()-cpu1
	t1 = time.Now()
	want := runModel(tr, c.scale, fresh, nil)
	modelTime := time.Since(t1)

	report(out, j, got, replayed, elapsed, st, ms.HeapAlloc, events, fairTime, modelTime)
	reportET(out, j, got, len(table))
	printCheckpoints(out, c, ck.taken, restores)
	f := costTable(out, st, replayed, elapsed, events, fairTime, fairCPU, ck.taken)
	jobLine(out, f)

	t2 := time.Now()
	lists, hdiffs, err := j.checkHistory(10)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "history: %d (route, day) lists read back and checked in %.2fs\n", lists, time.Since(t2).Seconds())
	if err := store.Close(); err != nil { // persists: the files now hold the whole state
		return err
	}
	disk := dirBytes(store.Dir())
	budget := st.Budget.Limit
	fmt.Fprintf(out, "budget at the end: %s\n", budgetLine(st.Budget))
	if h := st.HotTier; h.Limit > 0 {
		fmt.Fprintf(out, "hot tier (Options.HotTierSize %.0f MiB): %d hits, %d misses (%.1f%% hits); %d write-backs of %d entries, %d deletes elided (made and cleared between cuts), when full %d drops of every entry and %d of the clean entries only; %d tables turned off; %d entries, %.1f MiB at the end\n",
			float64(h.Limit)/(1<<20), h.Hits, h.Misses, 100*float64(h.Hits)/float64(max(h.Hits+h.Misses, 1)), h.Syncs, h.WrittenBack, h.Elided, h.Drops, h.CleanDrops, h.TablesOff, h.Entries, float64(h.Bytes)/(1<<20))
	}
	fmt.Fprintf(out, "memory: budget %.0f MiB, VmRSS %.0f MiB, peak VmHWM %.0f MiB, Go heap %.0f MiB (the trace and the Go map model included)\n",
		float64(budget)/(1<<20), float64(procStatus("VmRSS"))/(1<<20), float64(procStatus("VmHWM"))/(1<<20), float64(ms.HeapAlloc)/(1<<20))
	fmt.Fprintf(out, "disk: %d bytes (%.0f MiB) in %s after Close, %.1f× the budget; checkpoints %.0f MiB in %s "+
		"(garbage collection keeps what is unreachable for %v, checkpoint.DefaultGrace, so a short run keeps every checkpoint's objects)\n",
		disk, float64(disk)/(1<<20), store.Dir(), float64(disk)/float64(budget), float64(storageBytes(storage, ckDir))/(1<<20), ckDir, checkpoint.DefaultGrace)

	d := diff(got, want, 10)
	d = append(d, hdiffs...)
	for _, s := range diff(fair, want, 10) {
		d = append(d, "fair Go model: "+s)
	}
	if fairLists != lists || fairDelays != events {
		d = append(d, fmt.Sprintf("fair Go model: %d history lists with %d delays, want %d with %d", fairLists, fairDelays, lists, events))
	}
	if len(d) > 0 {
		fmt.Fprintln(out, "check: FAILED (Strata state or the fair Go model differs from the plain Go map computation)")
		for _, s := range d {
			fmt.Fprintln(out, "  ", s)
		}
		return errors.New("check failed")
	}
	fmt.Fprintln(out, "check: OK (stats, last-10 lists, map entries, daily maxima, top-5, every day's history, the fired windows and sessions and the TTL expiries equal the plain Go computation)")
	return nil
}

// kgRanges formats key-group ranges as [start-end ...].
func kgRanges(kgs []*strata.KeyGroupRange) string {
	var s []string
	for _, kg := range kgs {
		s = append(s, fmt.Sprintf("%d-%d", kg.Start, kg.End))
	}
	return "[" + strings.Join(s, " ") + "]"
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

// report prints the replay's figures: events replayed by this process in elapsed, beside the
// two Go models' times for all the trace's total events (fairTime: runFairModel, the same
// work on Go maps; modelTime: runModel, the plain reference with no history).
func report(out io.Writer, j *job, got *results, events int, elapsed time.Duration, st strata.Stats,
	heap uint64, total int, fairTime, modelTime time.Duration) {
	fmt.Fprintf(out, "\nevents: %d in %.2fs: %.2f M events/s\n", events, elapsed.Seconds(), float64(events)/elapsed.Seconds()/1e6)
	fmt.Fprintf(out, "  Go model doing the same work: %.2f M events/s (%.2fs for %d events: the same states, history and timers on Go maps and a heap, no serialization, no budget, no checkpoints)\n",
		float64(total)/fairTime.Seconds()/1e6, fairTime.Seconds(), total)
	fmt.Fprintf(out, "  plain Go maps (no history, Go structs): %.2f M events/s (%.2fs; the reference the check compares with)\n",
		float64(total)/modelTime.Seconds()/1e6, modelTime.Seconds())
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
			i+1, routeKeyName(j.tr, j.K, r.Key), s.Mean(), s.Stddev(), s.Count, s.Min, s.Max, lastN, got.Last[r.Key])
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
		if path, err = flightjob.FindData(defaultData); err != nil {
			return nil, "", err
		}
	}
	tr, err := trace.LoadParquet(path, c.rows)
	return tr, path, err
}
