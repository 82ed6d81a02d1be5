// Command nexmark runs Nexmark queries (bench/nexmark) on Strata and on the plain Go model in
// one process, on the same deterministic events, and prints per query: events/s of each and
// their ratio, CPU per event, peak RSS, the state's size, the checkpoints (taken every
// -checkpoint-every events with the changelog on, as the flight demo), and check: OK when the
// Strata run emitted exactly what the model did. Beside them: the Flink-on-RocksDB events/s
// per core that nexmark/nexmark published (Flink 1.13, 8 TaskManagers × 1 slot; other
// hardware, so context, not a comparison of equals).
//
// The event-time rate (-rate) defaults to Nexmark's own 10 000 events/s: 10 M events span
// 1 000 s of event time, so the 10 s windows and sessions fire about 100 times.
//
// -kill-after N runs the Strata side in a child process (this executable again) that is
// SIGKILLed once it reported N events; the parent restores the newest checkpoint (CLAIM),
// replays the rest from its input position and checks the output against the model's.
//
// Usage (from bench/):
//
//	go run ./cmd/nexmark -query q5,q7,q11 -events 10000000
//	go run ./cmd/nexmark -query q20 -events 3000000 -budget 64MiB   # state past the budget
//	go run ./cmd/nexmark -query q11 -events 2000000 -kill-after 1200000
//
// It exits non-zero when any query's Strata output differs from its model's.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/jobopts"
	"github.com/strata-db/strata/bench/nexmark"
	"github.com/strata-db/strata/checkpoint"
)

const childEnv = "NEXMARK_KILL_CHILD"

func main() {
	if os.Getenv(childEnv) != "" {
		if err := runChild(os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "nexmark (child):", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nexmark:", err)
		os.Exit(1)
	}
}

type config struct {
	queries     []string
	events      int64
	rate        int64
	seed        uint64
	budget      int64
	dir         string
	every       int64
	changelog   bool
	materialize time.Duration
	killAfter   int64
	model       bool
	prof        string
	hot         int64 // strata.Options.HotTierSize; -1: an eighth of the budget
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("nexmark", flag.ContinueOnError)
	var c config
	var qs string
	fs.StringVar(&qs, "query", "q0,q5,q7,q11,q18,q19,q20", "comma-separated `queries` (all: every implemented one)")
	fs.Int64Var(&c.events, "events", 1_000_000, "events per query")
	fs.Int64Var(&c.rate, "rate", nexmark.DefaultRate, "event-time rate in events per second (the event time of event n is base + n/rate s)")
	fs.Uint64Var(&c.seed, "seed", 1, "generator seed")
	fs.Int64Var(&c.budget, "budget", 64<<20, "Strata memory budget in `bytes` (0: Strata's default, 1 GiB)")
	fs.StringVar(&c.dir, "dir", "", "directory of the Stores and checkpoints (default: a temporary directory, removed at exit)")
	fs.Int64Var(&c.every, "checkpoint-every", -1, "checkpoint every `n` events (0: never; default: a tenth of the events)")
	fs.BoolVar(&c.changelog, "changelog", true, "checkpoint with the changelog (false: native incremental checkpoints)")
	fs.DurationVar(&c.materialize, "materialize-every", 2*time.Second, "with -changelog, the `interval` between materializations")
	fs.Int64Var(&c.killAfter, "kill-after", 0, "run Strata in a child process, SIGKILL it after `n` events, restore its last checkpoint and finish")
	fs.BoolVar(&c.model, "model", true, "also run the Go model (the ratio's denominator and the check)")
	fs.Int64Var(&c.hot, "hot", -1, "hot tier bound in `bytes` (strata.Options.HotTierSize): -1 = an eighth of the budget, as the flight demo; 0 = off")
	fs.StringVar(&c.prof, "cpuprofile", "", "write a CPU profile of the Strata runs to `file` (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if qs == "all" {
		for _, q := range nexmark.Queries {
			c.queries = append(c.queries, q.Name)
		}
	} else {
		c.queries = strings.Split(qs, ",")
	}
	for _, q := range c.queries {
		if _, err := nexmark.Lookup(q); err != nil {
			return c, err
		}
	}
	if c.events <= 0 || c.rate <= 0 {
		return c, fmt.Errorf("-events %d, -rate %d: must be positive", c.events, c.rate)
	}
	if c.every < 0 {
		c.every = max(c.events/10, 1)
	}
	if c.killAfter < 0 || c.killAfter >= c.events {
		return c, fmt.Errorf("-kill-after %d: must be in [0, -events)", c.killAfter)
	}
	if c.killAfter > 0 && c.every == 0 {
		return c, fmt.Errorf("-kill-after needs checkpoints (-checkpoint-every > 0)")
	}
	return c, nil
}

// storeOptions are the options of the query's Store, checkpointing into storage.
func storeOptions(c config, q string, storage checkpoint.Storage, mode strata.RestoreMode) strata.Options {
	opts := strata.Options{MemoryBudget: c.budget, HotTierSize: jobopts.HotTierSize(c.hot, c.budget)}
	opts.Checkpoint = strata.CheckpointOptions{Storage: storage, Owner: "nexmark-" + q, Retain: 1, RestoreMode: mode}
	if c.changelog {
		opts.Checkpoint.Changelog = &strata.ChangelogOptions{MaterializationInterval: c.materialize}
	}
	return opts
}

// result is one query's run on one back-end.
type result struct {
	out     nexmark.Out
	wall    time.Duration
	cpu     time.Duration
	peakRSS int64
	events  int64 // run by this process (after a restore: the rest)
	stats   strata.Stats
	cks     []ckRecord
	restore string
}

func run(args []string, w io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "nexmark-"); err != nil {
			return err
		}
		defer os.RemoveAll(c.dir)
	}
	fmt.Fprintf(w, "nexmark: %d events per query, seed %d, event-time rate %d events/s (%.0f s of event time), Strata budget %.0f MiB, GOMAXPROCS %d\n",
		c.events, c.seed, c.rate, float64(c.events)/float64(c.rate), float64(c.budget)/(1<<20), runtime.GOMAXPROCS(0))
	failed := 0
	var rows []string
	for _, name := range c.queries {
		spec, _ := nexmark.Lookup(name)
		fmt.Fprintf(w, "\n%s: %s\n", spec.Name, spec.What)
		var m result
		if c.model {
			if m, err = runModel(c, spec); err != nil {
				return err
			}
			fmt.Fprintf(w, "  model : %s\n", m.line())
		}
		var s result
		if c.killAfter > 0 {
			s, err = runKilled(c, spec, w)
		} else {
			s, err = runStrata(c, spec, nil, 0)
		}
		if err != nil {
			return fmt.Errorf("%s on strata: %w", spec.Name, err)
		}
		fmt.Fprintf(w, "  strata: %s\n", s.line())
		fmt.Fprintf(w, "  state : %s\n", stateLine(s.stats, c.budget))
		printCheckpoints(w, s.cks)
		if s.restore != "" {
			fmt.Fprintf(w, "  %s\n", s.restore)
		}
		check := "skipped (-model=false)"
		ratio, cpuRatio := 0.0, 0.0
		if c.model {
			ratio, cpuRatio = s.rate()/m.rate(), s.ratePerCore()/m.ratePerCore()
			check = "OK"
			if s.out != m.out {
				check = fmt.Sprintf("FAILED: strata %v, model %v", s.out, m.out)
				failed++
			}
			fmt.Fprintf(w, "  ratio : Strata / Go model = %.2f in events/s, %.2f in events per CPU-second (less sensitive to other load on the machine)\n", ratio, cpuRatio)
		}
		flink := "none published"
		if spec.Flink > 0 {
			flink = fmt.Sprintf("%.1f K events/s per core (Strata %.0f× it, one core's share: other hardware)", spec.Flink/1e3, s.ratePerCore()/spec.Flink)
		}
		fmt.Fprintf(w, "  Flink-on-RocksDB, published (nexmark/nexmark, Flink 1.13, 8 × 1 slot): %s\n", flink)
		fmt.Fprintf(w, "  output: %v\n  check: %s\n", s.out, check)
		rows = append(rows, fmt.Sprintf("| %s | %.0f | %.0f | %.2f | %.0f / %.0f | %.2f | %.0f | %s |", spec.Name, s.rate(), m.rate(), ratio,
			float64(s.cpu.Nanoseconds())/float64(s.events), float64(m.cpu.Nanoseconds())/float64(max(m.events, 1)), cpuRatio, spec.Flink, check))
	}
	fmt.Fprintf(w, "\n| query | Strata events/s | Go model events/s | ratio | CPU ns/event Strata / model | CPU ratio | Flink published events/s/core | check |\n|---|---|---|---|---|---|---|---|\n%s\n",
		strings.Join(rows, "\n"))
	if failed > 0 {
		return fmt.Errorf("%d queries' Strata output differs from the Go model's", failed)
	}
	return nil
}

func (r result) rate() float64 { return float64(r.events) / r.wall.Seconds() }

// ratePerCore is events per CPU-second: the throughput per core that a core-for-core
// comparison with Flink's published per-core figures takes.
func (r result) ratePerCore() float64 { return float64(r.events) / r.cpu.Seconds() }

func (r result) line() string {
	return fmt.Sprintf("%9.0f events/s, %6.0f ns CPU/event (%.0f events per CPU-second), %.2f s wall, peak RSS %.0f MiB",
		r.rate(), float64(r.cpu.Nanoseconds())/float64(r.events), r.ratePerCore(), r.wall.Seconds(), float64(r.peakRSS)/(1<<20))
}

func stateLine(st strata.Stats, budget int64) string {
	const mib = 1 << 20
	total := st.Fresh.DataBytes + st.Slices.Bytes + st.LSM.Bytes
	return fmt.Sprintf("%.1f MiB (FreshTable %.1f, slices %.1f, LsmStore %.1f in %d files) = %.1f× the %.0f MiB budget; %d evictions",
		float64(total)/mib, float64(st.Fresh.DataBytes)/mib, float64(st.Slices.Bytes)/mib, float64(st.LSM.Bytes)/mib, st.LSM.Files,
		float64(total)/float64(max(budget, 1)), float64(budget)/mib, st.Slices.Evictions) + hotLine(st.HotTier)
}

// hotLine is the hot tier's figures (strata.HotTierStats), or "" when it is off.
func hotLine(h strata.HotTierStats) string {
	if h.Limit == 0 {
		return ""
	}
	return fmt.Sprintf("; hot tier %.0f MiB: %.1f%% of %d point reads hit, %d write-backs of %d entries, when full %d drops of every entry and %d of the clean entries only, %d tables turned off",
		float64(h.Limit)/(1<<20), 100*float64(h.Hits)/float64(max(h.Hits+h.Misses, 1)), h.Hits+h.Misses, h.Syncs, h.WrittenBack, h.Drops, h.CleanDrops, h.TablesOff)
}

// measure runs f and returns its wall and CPU time and the process's peak RSS during it
// (VmHWM, reset before through /proc/self/clear_refs, after returning the Go heap the run
// before left, e.g. the model's maps, to the OS).
func measure(f func() error) (wall, cpu time.Duration, peak int64, err error) {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	c0 := cpuTime()
	t0 := time.Now()
	err = f()
	return time.Since(t0), cpuTime() - c0, procStatus("VmHWM"), err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

func runModel(c config, spec nexmark.QuerySpec) (result, error) {
	var r result
	q, err := spec.New(&nexmark.ModelBackend{}, &r.out)
	if err != nil {
		return r, err
	}
	d := nexmark.Driver{Gen: nexmark.NewGenerator(c.seed, c.rate), Query: q, Out: &r.out, To: c.events}
	r.wall, r.cpu, r.peakRSS, err = measure(d.Run)
	r.events = c.events
	return r, err
}

// runStrata runs spec on a new Store (from event 0), or on the Store restored from the
// checkpoint h (from its position); progress, when not nil, sees every 1024 events and each
// completed checkpoint.
func runStrata(c config, spec nexmark.QuerySpec, h *strata.CheckpointHandle, attempt int) (result, error) {
	var r result
	storage, err := checkpoint.NewDirStorage(filepath.Join(c.dir, spec.Name+"-checkpoints"))
	if err != nil {
		return r, err
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("%s-store-%d", spec.Name, attempt))
	var store *strata.Store
	from := int64(0)
	if h == nil {
		store, err = strata.Open(dir, storeOptions(c, spec.Name, storage, strata.NoClaim))
	} else {
		pos, perr := nexmark.DecodePosition(h.InputPosition)
		if perr != nil {
			return r, perr
		}
		from, r.out = pos.Events, pos.Out
		t0 := time.Now()
		store, err = strata.Restore(dir, storeOptions(c, spec.Name, storage, strata.Claim), storage, *h)
		if err == nil {
			st := store.RestoreStats()
			r.restore = fmt.Sprintf("restore: checkpoint %d (event %d) in %v: %d tables, %.1f MiB, %d changelog records replayed; resumed at event %d",
				h.ID, from, time.Since(t0).Round(time.Millisecond), st.Tables, float64(st.Bytes)/(1<<20), st.ChangelogRecords, from)
		}
	}
	if err != nil {
		return r, err
	}
	defer store.Close()
	q, err := spec.New(&nexmark.StrataBackend{Store: store}, &r.out)
	if err != nil {
		return r, err
	}
	ck := &checkpointer{store: store, storage: storage, nextID: 1}
	if h != nil {
		ck.nextID = h.ID + 1
	}
	d := nexmark.Driver{Gen: nexmark.NewGenerator(c.seed, c.rate), Query: q, Out: &r.out, From: from, To: c.events,
		CheckpointEvery: c.every}
	d.Checkpoint = func(n int64) error { return ck.start(n, r.out) }
	if os.Getenv(childEnv) != "" {
		d.Progress = func(n int64) { fmt.Printf("progress %d\n", n) }
		ck.onDone = func(rec ckRecord) { fmt.Printf("checkpoint %d %d\n", rec.id, rec.events) }
	}
	if c.prof != "" && os.Getenv(childEnv) == "" {
		f, err := os.Create(c.prof)
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer pprof.StopCPUProfile()
	}
	r.wall, r.cpu, r.peakRSS, err = measure(func() error {
		if err := d.Run(); err != nil {
			return err
		}
		return ck.finish()
	})
	r.events = c.events - from
	r.stats = store.Stats()
	r.cks = ck.taken
	if err != nil {
		return r, err
	}
	return r, store.Close()
}

// ckRecord is one completed checkpoint.
type ckRecord struct {
	id                 uint64
	events             int64
	sync, async        time.Duration
	uploaded, logBytes int64
	materializations   int64
}

// checkpointer takes the run's checkpoints asynchronously, one at a time, as the flight
// demo's: the replay goes on during the upload; the checkpoint in flight is completed when
// the next one starts or at the end.
type checkpointer struct {
	store   *strata.Store
	storage checkpoint.Storage
	nextID  uint64
	pending *strata.PendingCheckpoint
	events  int64
	taken   []ckRecord
	onDone  func(ckRecord)
}

func (c *checkpointer) start(n int64, out nexmark.Out) error {
	if err := c.finish(); err != nil {
		return err
	}
	p, err := c.store.StartCheckpoint(c.nextID, nexmark.Position{Events: n, Out: out}.Encode())
	if err != nil {
		return err
	}
	c.pending, c.events = p, n
	c.nextID++
	return nil
}

func (c *checkpointer) finish() error {
	if c.pending == nil {
		return nil
	}
	h, err := c.pending.Wait(context.Background())
	c.pending = nil
	if err != nil {
		return err
	}
	if err := c.store.NotifyCheckpointComplete(h.ID); err != nil {
		return err
	}
	cs := c.store.ChangelogStats()
	rec := ckRecord{id: h.ID, events: c.events, sync: h.Stats.SyncPause, async: h.Stats.AsyncDuration, uploaded: h.Stats.UploadedBytes,
		logBytes: cs.LogBytes, materializations: cs.Materializations}
	c.taken = append(c.taken, rec)
	if c.onDone != nil {
		c.onDone(rec)
	}
	return nil
}

func printCheckpoints(w io.Writer, cks []ckRecord) {
	if len(cks) == 0 {
		fmt.Fprintf(w, "  checkpoints: none in this process\n")
		return
	}
	var sync, async []time.Duration
	var up, upMax int64
	for _, r := range cks {
		sync, async = append(sync, r.sync), append(async, r.async)
		up += r.uploaded
		upMax = max(upMax, r.uploaded)
	}
	last := cks[len(cks)-1]
	fmt.Fprintf(w, "  checkpoints: %d; sync pause p50 %v max %v; async p50 %v max %v; uploaded mean %.1f MiB max %.1f MiB; %d materializations, log since the last %.1f MiB\n",
		len(cks), quantile(sync, 0.5), quantile(sync, 1), quantile(async, 0.5), quantile(async, 1),
		float64(up)/float64(len(cks))/(1<<20), float64(upMax)/(1<<20), last.materializations, float64(last.logBytes)/(1<<20))
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)].Round(time.Microsecond)
}

// --- -kill-after ---

// runChild is the child process of -kill-after: the Strata run of one query from event 0,
// reporting "progress <events>" every 1024 events and "checkpoint <id> <events>" for each
// completed checkpoint on its standard output.
func runChild(args []string, w io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	spec, _ := nexmark.Lookup(c.queries[0])
	_, err = runStrata(c, spec, nil, 0)
	if err == nil {
		fmt.Fprintln(w, "done")
	}
	return err
}

// runKilled runs spec in a child process, SIGKILLs it after c.killAfter events, restores its
// newest checkpoint and finishes the run in this process.
func runKilled(c config, spec nexmark.QuerySpec, w io.Writer) (result, error) {
	exe, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	args := []string{"-query", spec.Name, "-events", strconv.FormatInt(c.events, 10), "-rate", strconv.FormatInt(c.rate, 10),
		"-seed", strconv.FormatUint(c.seed, 10), "-budget", strconv.FormatInt(c.budget, 10), "-dir", c.dir,
		"-checkpoint-every", strconv.FormatInt(c.every, 10), "-changelog=" + strconv.FormatBool(c.changelog),
		"-materialize-every", c.materialize.String()}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	killed, cks := int64(0), 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "progress":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if killed == 0 && n >= c.killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					return result{}, err
				}
				killed = n
			}
		case len(f) == 3 && f[0] == "checkpoint":
			cks++
		}
	}
	werr := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if killed == 0 || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return result{}, fmt.Errorf("child process %d was not killed by SIGKILL after %d events: %v", cmd.Process.Pid, c.killAfter, werr)
	}
	fmt.Fprintf(w, "  kill  : child process %d SIGKILLed after reporting %d events and %d completed checkpoints\n", cmd.Process.Pid, killed, cks)
	storage, err := checkpoint.NewDirStorage(filepath.Join(c.dir, spec.Name+"-checkpoints"))
	if err != nil {
		return result{}, err
	}
	h, err := strata.LatestCheckpoint(context.Background(), storage, "nexmark-"+spec.Name)
	if err != nil {
		return result{}, fmt.Errorf("no checkpoint to restore: %w", err)
	}
	r, err := runStrata(c, spec, &h, 1)
	if err != nil && errors.Is(err, nexmark.ErrCodec) {
		return r, fmt.Errorf("checkpoint %d: %w", h.ID, err)
	}
	return r, err
}
