// Command results runs the side-by-side benchmark suite (bench/suite) with
// -count repeats, compares the implementations with benchstat, profiles the
// top Strata workloads and writes RESULTS.md. Nothing in RESULTS.md is
// typed by hand: every figure and sentence in it comes from this program
// and the run it made.
//
//	cd bench && go run ./cmd/results                     # default suite, ~35 minutes on 2 cores
//	cd bench && go run ./cmd/results -count 10 -big      # more repeats, plus the 10M-key rows
//	cd bench && go run ./cmd/results -cpu 1,2            # every row also at GOMAXPROCS=2 (twice the time)
//	cd bench && go run ./cmd/results -only nexmark       # rerun and rewrite only the Nexmark section (~3 minutes)
//	cd bench && go run ./cmd/results -only nexmark,flight # … and the flight job's section (its chart)
//	cd bench && go run ./cmd/results -only kafka         # the flight job on Kafka's section and package kafka's benchmarks (~6 minutes)
//	cd bench && go run ./cmd/results -only s3 -count 1   # the section "Checkpoints on S3", against versitygw (~15 minutes)
//	cd bench && go run ./cmd/results -only lazy          # the lazy restore section (~5 minutes at -count 3)
//
// The suite runs with -test.cpu 1 (and GOMAXPROCS=1 in its environment): GOMAXPROCS=1 for the
// whole benchmark process, so that Strata's background workers and the peers' compactions
// share the one P with the foreground, as a task thread of a stream processor shares the
// machine with other task threads. The gates read those rows only. -cpu 1,2 adds GOMAXPROCS=2
// rows (named with -2, tabled as gomaxprocs=2 workloads of their own; see report.WithProcs).
//
// It keeps the raw output in results/bench.txt (read by cmd/gates) and the
// machine description in results/machine.txt (for -reuse). One test binary,
// built first, serves the suite and the profiles.
// Benchmarks are built with -tags pebblegozstd, so Pebble links the pure-Go
// zstd and the binary is cgo-free (Pebble runs without compression anyway).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/strata-db/strata/bench/internal/report"
)

const benchstatPkg = "golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

// profiled are the Strata workloads profiled for RESULTS.md: the gated rows
// and the window workload where Strata trails the maps.
var profiled = []struct{ title, bench string }{
	{"value get, 1M keys", `^BenchmarkFlinkValue$/^keys=1M$/^key=8B$/^impl=strata$/^op=get$`},
	{"value update, 1M keys", `^BenchmarkFlinkValue$/^keys=1M$/^key=8B$/^impl=strata$/^op=update$`},
	{"list append, 500K keys", `^BenchmarkFlinkList$/^keys=500K$/^key=8B$/^impl=strata$/^op=append$`},
	{"map get, 500K keys × 10", `^BenchmarkFlinkMap$/^keys=500K$/^key=8B$/^impl=strata$/^op=get$`},
	{"map put, 500K keys × 10", `^BenchmarkFlinkMap$/^keys=500K$/^key=8B$/^impl=strata$/^op=put$`},
	{"value get at equal memory, 256 MiB, 16 B keys + 8 B namespace",
		`^BenchmarkEqualMemory$/^budget=256MiB$/^state=value$/^keys=1M$/^key=16B\+ns8B$/^value=100B$/^impl=strata$/^op=get$`},
	{"Gadget incremental window", `^BenchmarkGadget$/^window=incremental$/^keys=1M$/^impl=strata$`},
}

func main() {
	count := flag.Int("count", 3, "go test -count (repeats per row)")
	benchtime := flag.String("benchtime", "200ms", "go test -benchtime per repeat")
	bench := flag.String("bench", ".", "go test -bench filter")
	big := flag.Bool("big", false, "also run the 10M-key YCSB rows (slow)")
	cpu := flag.String("cpu", "1", "go test -cpu: the GOMAXPROCS values every row runs at (the gates read GOMAXPROCS=1; 1,2 doubles the run)")
	out := flag.String("out", "RESULTS.md", "report to write")
	rawPath := flag.String("raw", "results/bench.txt", "where to keep the raw benchmark output")
	reuse := flag.Bool("reuse", false, "do not run the suite; rebuild the report from -raw")
	merge := flag.Bool("merge", false, "run only -bench and replace those benchmarks' rows in -raw, keeping the others (the S3, Nexmark, flight and Kafka sections are rebuilt from their raw files, as with -reuse)")
	profTime := flag.String("proftime", "3s", "-benchtime of each profiled workload (0 skips profiles)")
	suiteArgs := flag.String("suiteargs", "", "more flags for the suite binary, space-separated (e.g. \"-restorerounds 1 -clrounds 30\")")
	nxQueries := flag.String("nexmark", "all", "Nexmark queries of the Nexmark section (cmd/nexmark -query; empty: no section)")
	nxEvents := flag.Int64("nexmark-events", 1_000_000, "events per Nexmark query")
	nxPastEvents := flag.Int64("nexmark-past-events", 3_000_000, "events of the q20 runs past the budget and in memory")
	nxPastBudget := flag.Int64("nexmark-past-budget", 48<<20, "Strata budget in bytes of the q20 run past the budget")
	flight := flag.Bool("flight", true, "run the flight demo with -series for the flight job's section and chart (about a minute)")
	kafka := flag.Bool("kafka", true, "run the flight job on Kafka (cmd/flightkafka, all 3M flights on kfake) and package kafka's benchmarks for its section (about six minutes)")
	s3 := flag.Bool("s3", true, "run the S3 checkpoint, restore and savepoint rows (bench/suite/s3_test.go) under scripts/versitygw.sh for the section \"Checkpoints on S3\" (about 5 minutes per -count at 256 MiB)")
	s3Server := flag.String("s3server", "versitygw", "the S3 server of those rows: versitygw (started by scripts/versitygw.sh run) or gofakes3 (in the benchmark process)")
	only := flag.String("only", "", "comma-separated sections (nexmark, flight, kafka, s3, lazy) to run alone and replace in -out, keeping the rest of it")
	flag.Parse()

	nxRaw := filepath.Join(filepath.Dir(*rawPath), "nexmark.txt")
	nxChart := filepath.Join(filepath.Dir(*rawPath), "nexmark.svg")
	nxChartRel := relTo(*out, nxChart)
	nxPlan := nexmarkPlan(*nxQueries, *nxEvents, *nxPastEvents, *nxPastBudget)
	nexmarkSection := func(md *bytes.Buffer, reuse bool) {
		if *nxQueries == "" {
			return
		}
		var raw []byte
		if reuse {
			var err error
			if raw, err = os.ReadFile(nxRaw); err != nil {
				logf("no Nexmark section: %v", err)
				return
			}
		} else {
			raw = runNexmark(nxPlan)
			must(os.MkdirAll(filepath.Dir(nxRaw), 0o755))
			must(os.WriteFile(nxRaw, raw, 0o644))
		}
		runs, err := parseNexmark(string(raw))
		must(err)
		must(writeNexmark(md, runs, nxRaw, nxChart, nxChartRel))
	}
	flOut := filepath.Join(filepath.Dir(*rawPath), "flight.txt")
	flSeries := filepath.Join(filepath.Dir(*rawPath), "flight-series.txt")
	flChart := filepath.Join(filepath.Dir(*rawPath), "flight.svg")
	flChartRel := relTo(*out, flChart)
	flightSection := func(md *bytes.Buffer, reuse bool) {
		var out []byte
		if reuse {
			var err error
			if out, err = os.ReadFile(flOut); err != nil {
				logf("no flight section: %v", err)
				return
			}
		} else {
			must(os.MkdirAll(filepath.Dir(flOut), 0o755))
			out = runFlight(flSeries)
			must(os.WriteFile(flOut, out, 0o644))
		}
		series, err := os.ReadFile(flSeries)
		must(err)
		must(writeFlight(md, out, series, flOut, flSeries, flChart, flChartRel))
	}
	kaOut := filepath.Join(filepath.Dir(*rawPath), "kafka.txt")
	kaBench := filepath.Join(filepath.Dir(*rawPath), "kafka-bench.txt")
	kafkaSection := func(md *bytes.Buffer, reuse bool) {
		var out, bench []byte
		if reuse {
			var err error
			if out, err = os.ReadFile(kaOut); err != nil {
				logf("no Kafka section: %v", err)
				return
			}
			if bench, err = os.ReadFile(kaBench); err != nil {
				logf("no tables of package kafka's benchmarks: %v", err)
			}
		} else {
			must(os.MkdirAll(filepath.Dir(kaOut), 0o755))
			out = runKafka()
			must(os.WriteFile(kaOut, out, 0o644))
			bench = runKafkaBench()
			must(os.WriteFile(kaBench, bench, 0o644))
		}
		must(writeKafka(md, out, kaOut, bench, kaBench))
	}
	s3Raw := filepath.Join(filepath.Dir(*rawPath), "s3.txt")
	s3Section := func(md *bytes.Buffer, reuse bool) {
		args := []string{"-test.count", fmt.Sprint(*count), "-test.benchtime", *benchtime}
		if *big {
			args = append(args, "-big")
		}
		args = append(args, strings.Fields(*suiteArgs)...)
		var raw []byte
		if reuse {
			var err error
			if raw, err = os.ReadFile(s3Raw); err != nil {
				logf("no S3 section: %v", err)
				return
			}
		} else {
			raw = runS3(*s3Server, args)
			must(os.MkdirAll(filepath.Dir(s3Raw), 0o755))
			must(os.WriteFile(s3Raw, raw, 0o644))
		}
		writeS3(md, raw, s3Raw, strings.Join(args, " "))
	}
	if *only != "" {
		old, err := os.ReadFile(*out)
		must(err)
		for _, name := range strings.Split(*only, ",") {
			var sec bytes.Buffer
			var head string
			before := []string{"## Rows not run\n", "## benchstat\n"}
			switch name {
			case "nexmark":
				nexmarkSection(&sec, *reuse)
				head, before = "## Nexmark\n", append([]string{"## Flight job\n", "## Flight job on Kafka\n"}, before...)
			case "flight":
				flightSection(&sec, *reuse)
				head = "## Flight job\n"
				before = append([]string{"## Flight job on Kafka\n"}, before...)
			case "kafka":
				kafkaSection(&sec, *reuse)
				head = "## Flight job on Kafka\n"
			case "s3":
				s3Section(&sec, *reuse)
				head = s3Head
				before = append([]string{lazyHead, "## Memory efficiency\n", "## Nexmark\n", "## Flight job\n", "## Flight job on Kafka\n"}, before...)
			case "lazy":
				lazySection(&sec, *reuse, *count, *suiteArgs, filepath.Join(filepath.Dir(*rawPath), "lazy.txt"))
				head = lazyHead
				before = append([]string{"## Memory efficiency\n", "## Nexmark\n", "## Flight job\n", "## Flight job on Kafka\n"}, before...)
			default:
				fatalf("-only %q: the sections are nexmark, flight, kafka, s3 and lazy", name)
			}
			old = replaceSection(old, head, onlyHead(sec.Bytes()), before...)
		}
		must(os.WriteFile(*out, old, 0o644))
		logf("rewrote the %s sections of %s", *only, *out)
		return
	}

	var md bytes.Buffer
	started := time.Now()
	machinePath := filepath.Join(filepath.Dir(*rawPath), "machine.txt")

	// One test binary serves the suite run and the profiles, so that both
	// measure the same code even if the repository changes meanwhile (the
	// bench module builds the root module from the working tree).
	dir, err := os.MkdirTemp("", "strata-results-")
	must(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "suite.test")
	logf("building the suite (go test -tags pebblegozstd -c)")
	if out, err := exec.Command("go", "test", "-tags", "pebblegozstd", "-c", "-o", bin, "./suite").CombinedOutput(); err != nil {
		fatalf("building the suite: %v\n%s", err, out)
	}
	machine := machineInfo()

	var raw []byte
	if !*reuse {
		args := []string{"-test.run", "^$", "-test.bench", *bench, "-test.count", fmt.Sprint(*count),
			"-test.benchtime", *benchtime, "-test.cpu", *cpu, "-test.timeout", "180m", "-test.v"}
		if *big {
			args = append(args, "-big")
		}
		args = append(args, strings.Fields(*suiteArgs)...)
		logf("running: suite.test %s", strings.Join(args, " "))
		var buf bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Dir = "suite"
		// The first leaf loads its store before the testing package sets GOMAXPROCS from -cpu:
		// start the process at the first value too.
		first, _, _ := strings.Cut(*cpu, ",")
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+first)
		cmd.Stdout = io.MultiWriter(&buf, &progress{})
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fatalf("benchmark run failed: %v", err)
		}
		raw = buf.Bytes()
		if *merge {
			old, err := os.ReadFile(*rawPath)
			if err != nil {
				fatalf("-merge: %v", err)
			}
			if st, err := os.Stat(*rawPath); err == nil {
				mergedFrom = st.ModTime().UTC().Format("2006-01-02 15:04 UTC")
			}
			var names []string
			raw, names = mergeRaw(old, raw)
			mergedNames = names
		}
		must(os.MkdirAll(filepath.Dir(*rawPath), 0o755))
		must(os.WriteFile(*rawPath, raw, 0o644))
		must(os.WriteFile(machinePath, []byte(machine), 0o644))
	} else {
		if raw, err = os.ReadFile(*rawPath); err != nil {
			fatalf("%v", err)
		}
		if m, err := os.ReadFile(machinePath); err == nil {
			machine = string(m)
		} else {
			machine += "(machine.txt of the run is missing: this section describes the rebuild)\n\n"
		}
	}
	d, err := report.Parse(bytes.NewReader(raw))
	must(err)
	runFor := time.Since(started)

	fmt.Fprintf(&md, "# Strata side by side with its peers\n\n")
	fmt.Fprintf(&md, "Generated by `cd bench && go run ./cmd/results %s` on %s. Do not edit: rerun the command.\n\n",
		strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if *reuse {
		st, _ := os.Stat(*rawPath)
		fmt.Fprintf(&md, "Tables rebuilt (-reuse) from %s, written by a suite run that ended %s; the "+
			"profiles are from this rebuild's code.\n\n", *rawPath, st.ModTime().UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		fmt.Fprintf(&md, "Suite run: %s.\n\n", runFor.Round(time.Second))
	}
	if *merge {
		fmt.Fprintf(&md, "Merged run (-merge): the rows of %s are from this run; every other row is from the run "+
			"that wrote %s before (last changed %s), on the same machine type.\n\n",
			strings.Join(mergedNames, ", "), *rawPath, mergedFrom)
	}
	md.WriteString(machine)
	md.WriteString(setupText(*count, *benchtime, d.Procs))
	writeGates(&md, d)
	writeTables(&md, d)
	writeCheckpoints(&md, d)
	writeTTLTimers(&md, d)
	writeBatched(&md, d)
	writeJobRows(&md, d)
	// A -merge run reruns only -bench: the job sections are rebuilt from their raw files.
	keep := *reuse || *merge
	if *s3 {
		s3Section(&md, keep)
	}
	// The lazy restore rows run apart (-only lazy, into lazy.txt): a suite run that has none
	// keeps that file's section.
	if !writeLazy(&md, d, *rawPath) {
		lazySection(&md, true, *count, *suiteArgs, filepath.Join(filepath.Dir(*rawPath), "lazy.txt"))
	}
	writeMemory(&md, d)
	nexmarkSection(&md, keep)
	if *flight {
		flightSection(&md, keep)
	}
	if *kafka {
		kafkaSection(&md, keep)
	}
	writeSkips(&md, d)
	writeBenchstat(&md, *rawPath)
	if *profTime != "0" {
		writeProfiles(&md, bin, *profTime)
	} else if *merge {
		keepProfiles(&md, *out)
	}
	if keep {
		// The sections rebuilt from raw files an earlier -only run wrote keep its line.
		if old, err := os.ReadFile(*out); err == nil {
			kept := keepOnlyHeads(md.Bytes(), old) // a new slice: md may be reset
			md.Reset()
			md.Write(kept)
		}
	}
	must(os.WriteFile(*out, md.Bytes(), 0o644))
	logf("wrote %s (%d bytes) in %s", *out, md.Len(), time.Since(started).Round(time.Second))
}

// mergedNames and mergedFrom describe a -merge run for the report's header.
var mergedNames []string
var mergedFrom string

// mergeRaw returns the raw output old with every line of the top-level benchmarks that
// fresh ran (results, --- BENCH/SKIP/FAIL lines and the log lines after them) replaced by
// fresh's output, and those benchmarks' names.
func mergeRaw(old, fresh []byte) ([]byte, []string) {
	top := func(name string) string {
		name, _, _ = strings.Cut(name, "/")
		if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
			name = name[:i]
		}
		return name
	}
	owner := func(line, cur string) string {
		for _, p := range []string{"--- BENCH: ", "--- SKIP: ", "--- FAIL: "} {
			if rest, ok := strings.CutPrefix(line, p); ok {
				return top(strings.Fields(rest + " x")[0])
			}
		}
		switch {
		case strings.HasPrefix(line, "Benchmark"):
			return top(strings.Fields(line)[0])
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			return cur
		}
		return ""
	}
	ran := map[string]bool{}
	cur := ""
	for _, line := range strings.Split(string(fresh), "\n") {
		if cur = owner(line, cur); cur != "" {
			ran[cur] = true
		}
	}
	var out bytes.Buffer
	cur = ""
	for _, line := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		if cur = owner(line, cur); !ran[cur] {
			out.WriteString(line + "\n")
		}
	}
	out.Write(fresh)
	return out.Bytes(), slices.Sorted(maps.Keys(ran))
}

// progress echoes benchmark result lines to stderr while the suite runs.
type progress struct{ partial []byte }

func (w *progress) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if l := string(w.partial[:i]); strings.HasPrefix(l, "Benchmark") && strings.Contains(l, "ns/op") {
			fmt.Fprintln(os.Stderr, l)
		}
		w.partial = w.partial[i+1:]
	}
}

func machineInfo() string {
	var b strings.Builder
	b.WriteString("## Machine\n\n```\n")
	fmt.Fprintf(&b, "%s", run("go", "version"))
	fmt.Fprintf(&b, "NumCPU=%d (the suite's GOMAXPROCS: -cpu, see Setup)\n", runtime.NumCPU())
	fmt.Fprintf(&b, "kernel: %s", run("uname", "-srm"))
	for _, f := range []string{"enabled", "defrag"} {
		v, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/" + f)
		fmt.Fprintf(&b, "THP %s: %s\n", f, orNA(string(v)))
	}
	if v, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"); err == nil {
		fmt.Fprintf(&b, "governor: %s", v)
	} else {
		b.WriteString("governor: n/a (no cpufreq: virtual machine)\n")
	}
	if v, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource"); err == nil {
		fmt.Fprintf(&b, "clocksource: %s", v)
	}
	if v, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "load average at start (1/5/15 min): %s", strings.Join(strings.Fields(string(v))[:3], " ")+"\n")
	}
	if v, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(v), "\n") {
			if strings.HasPrefix(l, "MemTotal") || strings.HasPrefix(l, "MemAvailable") {
				b.WriteString(strings.Join(strings.Fields(l), " ") + "\n")
			}
		}
	}
	fmt.Fprintf(&b, "git (when the suite was built): %s", run("git", "log", "-1", "--format=%h %s"))
	if dirty := run("git", "status", "--porcelain", "--untracked-files=no", "--", ".."); dirty != "" {
		fmt.Fprintf(&b, "modified tracked files built into the suite (the bench module builds the root from the working tree):\n%s", dirty)
	}
	b.WriteString("\n")
	b.WriteString(run("lscpu"))
	b.WriteString("```\n\n")
	return b.String()
}

func setupText(count int, benchtime string, procs []int) string {
	cpu := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(procs)), ","), "[]")
	return fmt.Sprintf(`## Setup

- One binary, one goroutine, every implementation on the same keys in the same order; %d repeats
  of %s per row (`+"`-count %d -benchtime %s`"+`); figures are medians; ± is (max − min) / median of ns/op.
- GOMAXPROCS of the rows: %s (go test -cpu; cmd/results -cpu, default 1). At GOMAXPROCS=1, what the gates read,
  the whole benchmark process has one P: Strata's background workers (segment transforms,
  evictions, flushes) and the peers' compactions and flushes share it with the foreground, as a
  task thread of a stream processor shares the machine with other task threads; nothing runs
  free on the second core. Rows at GOMAXPROCS=2 (`+"`go run ./cmd/results -cpu 1,2`"+`) are named
  with -2 and tabled as workloads …/gomaxprocs=2 of their own.
- **Strata ×** = peer ns/op ÷ Strata ns/op: Strata's throughput as a multiple of the peer's
  (above 1: Strata is faster). Rows on the same machine and run only; the machine is a shared
  2-vCPU VM, so single rows vary (see ±).
- Memory budget (default 1 GiB; 4 GiB for 10M keys; 256 MiB for the EqualMemory rows, whose
  state is about half of it; 64 MiB for LargerThanMemory): Strata's MemoryBudget; the block cache of
  Pebble, Badger and goleveldb. bbolt has no cache setting (OS page cache through its mmap); the
  Go map and cockroachdb/swiss are unbounded Go heap.
- Key layout (every peer): Flink's RocksDB composite key — key group (u16, as Flink's
  KeyGroupRangeAssignment over 128 key groups, computed per operation) + serialized key + namespace
  + map user key (8 B). Every point-op row runs in two key shapes, named in its path: key=8B (an
  8 B Long, no namespace) and key=16B+ns8B (a 16 B key — 8 B hash prefix + 8 B id — in one 8 B
  namespace, the rows of a windowed job); the Gadget window rows use 10 B keys in an 8 B window.
  Go map and swiss key their maps by the same bytes; map state is a nested map per
  (key, namespace), as Flink's heap backend.
- Durability off where Strata has none: Pebble DisableWAL, no compression; Badger SyncWrites off,
  conflict detection off, no compression, one transaction per operation (its value log is its WAL
  and cannot be disabled); goleveldb writes without sync, no compression (its journal cannot be
  disabled); bbolt NoSync, one read-write transaction committed every 1000 writes.
  Pebble, goleveldb: flushed and compacted after loading (Flink compacts RocksDB after setup);
  Strata: Store.WaitBackground after loading (sealed segments transformed, evictions installed).
- Lists: Pebble appends with its merge operator (Flink's RocksDB list state); Badger, goleveldb and
  bbolt have none and read-modify-write. Elements are framed [uvarint len][bytes].
- Pebble is built with the pebblegozstd tag (pure-Go zstd, cgo-free binary); no level compresses.
- p99-ns is sampled on every 64th operation. Window rows count one event (with its share of the
  window-close work) as one op.

`, count, benchtime, count, benchtime, cpu)
}

func writeGates(md *bytes.Buffer, d *report.Data) {
	md.WriteString("## DESIGN.md §5 gates\n\n")
	md.WriteString("Also `go run ./cmd/gates`, which exits non-zero on a miss.\n\n")
	md.WriteString("| target | row | measured | want | result |\n|---|---|---|---|---|\n")
	misses := 0
	for _, o := range d.Check() {
		res := "pass"
		if !o.Pass {
			res = "**MISS** — " + o.Miss()
			misses++
		}
		fmt.Fprintf(md, "| %s | %s | %s | %s | %s |\n", o.Target, o.Name(), o.GotString(), o.Want(), res)
	}
	fmt.Fprintf(md, "\n%d of %d gates missed.\n\n", misses, len(report.Gates))
}

func writeTables(md *bytes.Buffer, d *report.Data) {
	names, rows, impls := d.Workloads()
	md.WriteString("## Results\n\n")
	for _, w := range names {
		if isCheckpointWorkload(w) || strings.HasPrefix(w, "MemoryEfficiency/") || strings.HasPrefix(w, "Job/") {
			continue // writeCheckpoints, writeMemory and writeJobRows table them by their own figures
		}
		fmt.Fprintf(md, "### %s\n\n", w)
		// Speedup matrix.
		md.WriteString("Strata × (peer ns/op ÷ Strata ns/op):\n\n| row |")
		var peers []string
		for _, impl := range impls[w] {
			if impl != "strata" {
				peers = append(peers, impl)
				fmt.Fprintf(md, " %s |", impl)
			}
		}
		md.WriteString("\n|---|" + strings.Repeat("---:|", len(peers)) + "\n")
		for _, r := range rows[w] {
			fmt.Fprintf(md, "| %s |", orNA(r))
			for _, p := range peers {
				if x, ok := d.Speedup(w, r, p); ok {
					fmt.Fprintf(md, " %.2f |", x)
				} else {
					md.WriteString(" – |")
				}
			}
			md.WriteString("\n")
		}
		md.WriteString("\n| row | impl | ns/op | ± | allocs/op | B/op | p99-ns | ops/s | Strata × |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range rows[w] {
			for _, impl := range impls[w] {
				n := report.Join(w, impl, r)
				ns, ok := d.Median(n, "ns/op")
				if !ok {
					continue
				}
				al, _ := d.Median(n, "allocs/op")
				by, _ := d.Median(n, "B/op")
				p99, _ := d.Median(n, "p99-ns")
				ops, _ := d.Median(n, "ops/s")
				x := "–"
				if impl != "strata" {
					if s, ok := d.Speedup(w, r, impl); ok {
						x = fmt.Sprintf("%.2f", s)
					}
				}
				name := impl
				if impl == "strata" {
					name = "**strata**"
				}
				fmt.Fprintf(md, "| %s | %s | %s | %.0f%% | %g | %g | %s | %s | %s |\n",
					orNA(r), name, fnum(ns), d.Spread(n), al, by, fnum(p99), fnum(ops), x)
			}
		}
		md.WriteString("\n")
	}
}

// isCheckpointWorkload reports whether workload w is one of the rows tabled by their own
// figures rather than against peers: checkpoint and restore (bench/suite/checkpoint_test.go,
// changelog_test.go: pauses, bytes and restore times), TTL on vs off and timers
// (bench/suite/ttl_test.go: Strata only, the peers have neither), and batched access
// (bench/suite/batch_test.go: Strata's batched path against its single calls), and the S3 and
// savepoint rows (bench/suite/s3_test.go, tabled by writeS3).
func isCheckpointWorkload(w string) bool {
	for _, p := range []string{"Checkpoint/", "Restore/", "ChangelogCheckpoint/", "ChangelogRestore/", "FlinkTTL/", "Timers/", "BatchedAccess/",
		"S3Checkpoint/", "S3Restore/", "Savepoint/", "LazyRestore/"} {
		if strings.HasPrefix(w, p) {
			return true
		}
	}
	return false
}

// Targets of the checkpoint rows (the issue "Benchmarks: checkpoint sync pause and async
// duration"): sync pause p99 at every size, bytes per incremental checkpoint beyond the
// memory tiers as a multiple of the bytes changed, and a rescaled restore over a plain one.
const (
	ckSyncP99Ms    = 5.0
	ckBytesFactor  = 1.3
	ckRestoreRatio = 1.2
)

// Targets of the changelog rows (the issue "Benchmarks: Changelog on vs off"): with the
// changelog, checkpoint duration p99 at every size within clP99Growth × the 256 MiB row's;
// foreground updates/s at least clThroughput × the changelog-off row's; space amplification
// (the last checkpoint's objects over the live state) at most clSpaceAmp; restore at most
// clRestoreRatio × the changelog-off restore.
const (
	clP99Growth    = 1.5
	clThroughput   = 0.9
	clSpaceAmp     = 1.5
	clRestoreRatio = 1.5
)

func writeCheckpoints(md *bytes.Buffer, d *report.Data) {
	var ck, rs, clc, clr []string
	for _, n := range d.Order {
		w, _, _, ok := report.Split(n)
		switch {
		case !ok:
		case strings.HasPrefix(w, "Checkpoint/"):
			ck = append(ck, n)
		case strings.HasPrefix(w, "Restore/"):
			rs = append(rs, n)
		case strings.HasPrefix(w, "ChangelogCheckpoint/"):
			clc = append(clc, n)
		case strings.HasPrefix(w, "ChangelogRestore/"):
			clr = append(clr, n)
		}
	}
	if len(ck) == 0 && len(rs) == 0 && len(clc) == 0 && len(clr) == 0 {
		return
	}
	med := func(n, unit string) string {
		if v, ok := d.Median(n, unit); ok {
			return fnum(v)
		}
		return "–"
	}
	mib := func(n, unit string) string {
		if v, ok := d.Median(n, unit); ok {
			return fmt.Sprintf("%.2f", v/(1<<20))
		}
		return "–"
	}
	verdict := func(pass bool) string {
		if pass {
			return "pass"
		}
		return "**MISS**"
	}
	md.WriteString("## Checkpoints and restore\n\n")
	md.WriteString("Value state of 16 B keys and 100 B values on disk under a 64 MiB budget; 1 % of the keys " +
		"updated before each checkpoint; checkpoints into a directory on the same file system (table files " +
		"hard-linked, as Pebble's DB.Checkpoint links its sstables). Pebble's checkpoint is all synchronous: " +
		"DB.Flush (its WAL is off) + DB.Checkpoint; \"new\" bytes are the files of its checkpoint that are not " +
		"sstables of the previous one. How each figure is taken: bench/suite/checkpoint_test.go. Medians over " +
		"the repeats; each repeat's percentiles are over its own checkpoints (ckpts).\n\n")
	if len(ck) > 0 {
		fmt.Fprintf(md, "Targets: sync pause p99 ≤ %g ms at every size; bytes per incremental checkpoint ≤ %g × the "+
			"bytes changed + a constant, the constant being the memory tiers stored whole at each cut (mem MiB, "+
			"bounded by the memory budget, not by the changes): the column beyond mem ÷ changed must be ≤ %g.\n\n",
			ckSyncP99Ms, ckBytesFactor, ckBytesFactor)
		md.WriteString("| row | impl | ckpts | sync p50 ms | sync p99 ms | sync max ms | async p50 ms | async p99 ms | " +
			"MiB/ckpt | changed MiB | ÷ changed | mem MiB (constant) | beyond mem ÷ changed | ms/ckpt (with update) | sync p99 | bytes |\n" +
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, n := range ck {
			w, impl, _, _ := report.Split(n)
			row := strings.TrimPrefix(w, "Checkpoint/")
			p99, okP := d.Median(n, "sync-p99-ms")
			by, okB := d.Median(n, "bytes/ckpt")
			ch, okC := d.Median(n, "changed-B/ckpt")
			mem, _ := d.Median(n, "mem-B/ckpt")
			beyond, sync, bytesV := "–", "–", "–"
			if okB && okC && ch > 0 {
				beyond = fmt.Sprintf("%.2f", (by-mem)/ch)
				if impl == "strata" { // the targets are Strata's; the peer's row is for comparison
					bytesV = verdict((by-mem)/ch <= ckBytesFactor)
				}
			}
			if okP && impl == "strata" {
				sync = verdict(p99 <= ckSyncP99Ms)
			}
			nsop, _ := d.Median(n, "ns/op")
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				row, impl, med(n, "ckpts"), med(n, "sync-p50-ms"), med(n, "sync-p99-ms"), med(n, "sync-max-ms"),
				med(n, "async-p50-ms"), med(n, "async-p99-ms"), mib(n, "bytes/ckpt"), mib(n, "changed-B/ckpt"),
				med(n, "bytes/changed"), mib(n, "mem-B/ckpt"), beyond, fnum(nsop/1e6), sync, bytesV)
		}
		md.WriteString("\n")
	}
	if len(rs) > 0 {
		fmt.Fprintf(md, "Restore: the last checkpoint into a new directory, Open and a first read included; scaleout "+
			"restores two Stores of half the key groups each, one after the other (restore ms is the sum, "+
			"subtask max the slower one: what parallel subtasks would wait); scalein restores the two halves' "+
			"checkpoints into one Store. Target: ≤ %g × plain.\n\n", ckRestoreRatio)
		md.WriteString("| row | mode | restore ms | subtask max ms | × plain | subtask max × plain | result |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, n := range rs {
			w, _, row, _ := report.Split(n)
			state := strings.TrimPrefix(w, "Restore/")
			mode := strings.TrimPrefix(row, "mode=")
			x, sub, res := "–", "–", "–"
			plain, okPlain := d.Median(report.Join(w, "strata", "mode=plain"), "restore-ms")
			if v, ok := d.Median(n, "restore-ms"); ok && okPlain && plain > 0 && mode != "plain" {
				x = fmt.Sprintf("%.2f", v/plain)
				res = verdict(v/plain <= ckRestoreRatio)
				if m, ok := d.Median(n, "subtask-max-ms"); ok {
					sub = fmt.Sprintf("%.2f", m/plain)
					res += " one after the other, " + verdict(m/plain <= ckRestoreRatio) + " in parallel"
				}
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s |\n", state, mode, med(n, "restore-ms"),
				med(n, "subtask-max-ms"), x, sub, res)
		}
		md.WriteString("\n")
	}
	writeChangelog(md, d, clc, clr, med, mib, verdict)
}

// writeChangelog tables the changelog on/off rows (bench/suite/changelog_test.go) with their
// targets (clP99Growth, clThroughput, clSpaceAmp, clRestoreRatio).
func writeChangelog(md *bytes.Buffer, d *report.Data, clc, clr []string, med, mib func(n, unit string) string, verdict func(bool) string) {
	if len(clc) > 0 {
		fmt.Fprintf(md, "### Changelog on vs off\n\nThe same value state under a steady load of random-key updates on the task's "+
			"goroutine, a checkpoint started every second while it runs (StartCheckpoint; waited for and completed when done, "+
			"the load stalling only if one outlasts the interval); with the changelog, materializations start on the "+
			"space-amplification cap. Duration is sync pause + async. Space amplification: the distinct objects the last "+
			"checkpoint's manifest lists over the live state (keys × 116 B). Targets (changelog on): duration p99 within %g× "+
			"the 256MiB row's at every size; updates/s ≥ %g × changelog off; space amplification ≤ %g.\n\n",
			clP99Growth, clThroughput, clSpaceAmp)
		md.WriteString("| row | changelog | ckpts | p50 ms | p99 ms | p99.9 ms | sync p99 ms | MiB/ckpt | space amp | updates/s | × off | mats | p99 growth | throughput | space amp |\n" +
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
		// The base of the p99 growth: the 256MiB on row of the same GOMAXPROCS (the workload
		// with its state= element replaced).
		stateEl := regexp.MustCompile(`state=[^/]+`)
		baseP99 := func(w string) (float64, bool) {
			return d.Median(report.Join(stateEl.ReplaceAllString(w, "state=256MiB"), "strata", "changelog=on"), "ckpt-p99-ms")
		}
		for _, n := range clc {
			w, _, row, _ := report.Split(n)
			state := strings.TrimPrefix(w, "ChangelogCheckpoint/")
			mode := strings.TrimPrefix(row, "changelog=")
			x, growth, thr, amp := "–", "–", "–", "–"
			if mode == "on" {
				rate, ok1 := d.Median(n, "updates/s")
				off, ok2 := d.Median(report.Join(w, "strata", "changelog=off"), "updates/s")
				if ok1 && ok2 && off > 0 {
					x = fmt.Sprintf("%.2f", rate/off)
					thr = verdict(rate/off >= clThroughput)
				}
				p99, ok := d.Median(n, "ckpt-p99-ms")
				if base, okBase := baseP99(w); ok && okBase && base > 0 {
					growth = fmt.Sprintf("%.2f× %s", p99/base, verdict(p99/base <= clP99Growth))
				}
				if a, ok := d.Median(n, "space-amp"); ok {
					amp = verdict(a <= clSpaceAmp)
				}
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				state, mode, med(n, "ckpts"), med(n, "ckpt-p50-ms"), med(n, "ckpt-p99-ms"), med(n, "ckpt-p999-ms"),
				med(n, "sync-p99-ms"), mib(n, "bytes/ckpt"), med(n, "space-amp"), med(n, "updates/s"), x, med(n, "mats"),
				growth, thr, amp)
		}
		md.WriteString("\n")
	}
	if len(clr) > 0 {
		fmt.Fprintf(md, "Changelog restore: a checkpoint of a known log tail into a new directory (Open, changelog replay and a "+
			"first read included). The on row's checkpoint is taken after a materialization and then -cltail × the keys "+
			"random updates (default 0.25: half the log the space-amplification cap of 1.5 allows), so that its log tail is "+
			"those updates; the off row's after the same updates, natively (bench/suite/changelog_test.go, restorePoint). lazy is the on row's checkpoint restored with CheckpointOptions.LazyRestore (Restore returns once "+
			"the manifests are read and the log's tail is collected and indexed; the tail is written in the background, and a value "+
			"Get is answered from the collected tail meanwhile: the engine's invariant 39). "+
			"Target: changelog on ≤ %g × off.\n\n", clRestoreRatio)
		md.WriteString("Log records: applied for the on row (the superseded ones apart), collected for lazy (RestoreStats.ChangelogRecords). " +
			"Tail installed: lazily, when a batched read, which waits for the tail, returned after the first read (ms from Restore's start).\n\n")
		md.WriteString("| row | changelog | restore ms | log records | tail installed ms | × off | result |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, n := range clr {
			w, _, row, _ := report.Split(n)
			state := strings.TrimPrefix(w, "ChangelogRestore/")
			mode := strings.TrimPrefix(row, "changelog=")
			x, res := "–", "–"
			if mode != "off" { // on and lazy
				v, ok1 := d.Median(n, "restore-ms")
				off, ok2 := d.Median(report.Join(w, "strata", "changelog=off"), "restore-ms")
				if ok1 && ok2 && off > 0 {
					x = fmt.Sprintf("%.2f", v/off)
					res = verdict(v/off <= clRestoreRatio)
				}
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s |\n", state, mode, med(n, "restore-ms"), med(n, "log-records"), med(n, "installed-ms"), x, res)
		}
		md.WriteString("\n")
	}
}

// Targets of the TTL and timer rows (the issue "TTL …, timers …: Benchmarks"): ttl=on at
// most ttlOverhead slower than ttl=off per op; at least timersPerCore timers registered and
// fired per second of one core's CPU, at 1M and at 10M pending.
const (
	ttlOverhead   = 0.15
	timersPerCore = 1e6
)

// writeTTLTimers tables the TTL on/off rows and the timer rows (bench/suite/ttl_test.go).
func writeTTLTimers(md *bytes.Buffer, d *report.Data) {
	var ttl, tm []string
	for _, n := range d.Order {
		w, _, _, ok := report.Split(n)
		switch {
		case !ok:
		case strings.HasPrefix(w, "FlinkTTL/") && strings.Contains(w, "/ttl=on"):
			ttl = append(ttl, n)
		case strings.HasPrefix(w, "Timers/"):
			tm = append(tm, n)
		}
	}
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "**MISS**"
	}
	if len(ttl) > 0 {
		fmt.Fprintf(md, "### TTL on vs off\n\nFlink's TTL state benchmarks (ttl/Ttl{Value,List,Map}StateBenchmark): the ops of the "+
			"value, list and map rows above on Strata's states without a TTL and with one (1 h, never reached; Flink's defaults; "+
			"the default clock), in the same run. The peers have no TTL. Target: ttl=on ≤ %.0f %% slower than ttl=off.\n\n", ttlOverhead*100)
		md.WriteString("| state | op | ttl=off ns/op | ttl=on ns/op | on ÷ off | allocs/op (on) | result |\n|---|---|---:|---:|---:|---:|---|\n")
		for _, n := range ttl {
			w, _, row, _ := report.Split(n)
			state := strings.Replace(strings.TrimPrefix(w, "FlinkTTL/state="), "/ttl=on", "", 1)
			on, ok1 := d.Median(n, "ns/op")
			off, ok2 := d.Median(report.Join(strings.Replace(w, "/ttl=on", "/ttl=off", 1), "strata", row), "ns/op")
			al, _ := d.Median(n, "allocs/op")
			x, res := "–", "–"
			if ok1 && ok2 && off > 0 {
				x = fmt.Sprintf("%.2f", on/off)
				res = verdict(on/off <= 1+ttlOverhead)
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %g | %s |\n", state, strings.TrimPrefix(row, "op="),
				fnumOK(off, ok2), fnumOK(on, ok1), x, al, res)
		}
		md.WriteString("\n")
	}
	if len(tm) > 0 {
		fmt.Fprintf(md, "### Timers\n\nFlink's InternalTimerService under a steady load: one op registers an event-time timer "+
			"and advances the watermark by 1 ms, about one timer firing per op, with 1M or 10M pending. timers/cpu-s: "+
			"timers registered and fired per second of the process's CPU time (one core's worth on this shared machine). "+
			"Target: ≥ %.0f M timers/s per core, memory inside the budget (B/timer: budget bytes per pending timer, "+
			"outside the Go heap).\n\n", timersPerCore/1e6)
		md.WriteString("| pending | ns/op | timers/s | timers/cpu-s | B/timer | allocs/op | result |\n|---|---:|---:|---:|---:|---:|---|\n")
		for _, n := range tm {
			w, _, _, _ := report.Split(n)
			rate, ok := d.Median(n, "timers/cpu-s")
			ns, _ := d.Median(n, "ns/op")
			wall, _ := d.Median(n, "timers/s")
			bt, _ := d.Median(n, "B/timer")
			al, _ := d.Median(n, "allocs/op")
			res := "–"
			if ok {
				res = verdict(rate >= timersPerCore)
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %.1f | %g | %s |\n", strings.TrimPrefix(w, "Timers/pending="),
				fnum(ns), fnum(wall), fnumOK(rate, ok), bt, al, res)
		}
		md.WriteString("\n")
	}
}

// batchTarget is the batched-access target (issue 14 item 4): single ÷ batched ns per key.
const batchTarget = 2.0

// rowsOf returns the names of d's rows whose workload begins with prefix, in d's order.
func rowsOf(d *report.Data, prefix string) []string {
	var rows []string
	for _, n := range d.Order {
		if w, _, _, ok := report.Split(n); ok && strings.HasPrefix(w, prefix) {
			rows = append(rows, n)
		}
	}
	return rows
}

// writeJobRows tables the job-level rows (bench/suite/job_test.go, BenchmarkJob: the flight
// demo's replay beside its Go model, at GOMAXPROCS=1 and 2) by the figures the demo's "job:"
// line reports; the Gates section checks them (internal/report's job gates).
func writeJobRows(md *bytes.Buffer, d *report.Data) {
	rows := rowsOf(d, "Job/")
	if len(rows) == 0 {
		return
	}
	md.WriteString("### Job rows\n\nBenchmarkJob (bench/suite/job_test.go): the flight demo at its default settings " +
		"(64 MiB budget, changelog on, a checkpoint every 50 000 events, the hot tier at an eighth of the budget: " +
		"strata.Options.HotTierSize, -hot), one run per op, beside its Go model in the same " +
		"process, with the process at GOMAXPROCS=procs. CPU per event from the demo's Stats cost accounting; the targets " +
		"are issue 22's, checked in the Gates section. ckpt ÷ changed divides the bytes new in each checkpoint by the bytes " +
		"the engine applied between the cuts: with the hot tier those are the net changes written back (one per dirty key " +
		"per cut), not one per call, so the ratio rises while both figures fall (the demo's output gives them per event).\n\n")
	md.WriteString("| row | events/s | ÷ model | task µs/event | background µs/event | CPU ÷ model | background ÷ task | changelog ÷ task | ckpt ÷ changed | evictions |\n")
	md.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range rows {
		w, _, _, _ := report.Split(n)
		cell := func(unit, f string) string {
			if v, ok := d.Median(n, unit); ok {
				return fmt.Sprintf(f, v)
			}
			return "–"
		}
		fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(w, "Job/"),
			cell("events/s", "%.0f"), cell("model-ratio", "%.3f"), cell("task-us/event", "%.2f"), cell("bg-us/event", "%.2f"),
			cell("cpu/model", "%.2f"), cell("bg/task", "%.2f"), cell("changelog/task", "%.3f"), cell("ckpt/changed", "%.2f"),
			cell("evictions", "%.0f"))
	}
	md.WriteString("\n")
}

// writeBatched tables the batched-access rows (bench/suite/batch_test.go): per workload and
// op, ns per key through single calls and through GetBatch/PutBatch, and their ratio.
func writeBatched(md *bytes.Buffer, d *report.Data) {
	var rows []string
	for _, n := range d.Order {
		if w, impl, _, ok := report.Split(n); ok && strings.HasPrefix(w, "BatchedAccess/") && impl == "strata" {
			rows = append(rows, n)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(md, "### Batched access\n\nValueState.GetBatch and PutBatch (32 keys per call: the engine issues the "+
		"independent cache misses of the keys tier by tier and reads the LsmStore in key order, as Flink 2.0's "+
		"asynchronous state API batches state reads) against Get and Put on the same store and keys, Strata only. "+
		"One op is one key. Target: single ÷ batched ≥ %.0f× (gated for uniform keys).\n\n", batchTarget)
	md.WriteString("| workload | row | single ns/key | batched ns/key | single ÷ batched | allocs/op (batched) | result |\n|---|---|---:|---:|---:|---:|---|\n")
	for _, n := range rows {
		w, _, row, _ := report.Split(n)
		bt, ok1 := d.Median(n, "ns/op")
		sg, ok2 := d.Median(report.Join(w, report.BatchSingle, row), "ns/op")
		al, _ := d.Median(n, "allocs/op")
		x, res := "–", "–"
		if ok1 && ok2 && bt > 0 {
			x = fmt.Sprintf("%.2f", sg/bt)
			res = "pass"
			if sg/bt < batchTarget {
				res = "**MISS**"
			}
		}
		// w is BatchedAccess/<store>[/dist=…]/op=…: the store in one column, the rest in the other.
		wl, op, _ := strings.Cut(strings.TrimPrefix(w, "BatchedAccess/"), "/op=")
		op = "op=" + op
		if i := strings.LastIndex(wl, "/dist="); i >= 0 {
			wl, op = wl[:i], wl[i+1:]+"/"+op
		}
		fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %g | %s |\n", wl, op, fnumOK(sg, ok2), fnumOK(bt, ok1), x, al, res)
	}
	md.WriteString("\n")
}

// fnumOK is fnum(v), or "–" when !ok.
func fnumOK(v float64, ok bool) string {
	if !ok {
		return "–"
	}
	return fnum(v)
}

// keepProfiles copies the profiles section of the report at path (a -merge run without
// profiles keeps those of the run before it, marked as such).
func keepProfiles(md *bytes.Buffer, path string) {
	old, err := os.ReadFile(path)
	if err != nil {
		return
	}
	const head = "## Profiles of the top Strata workloads\n"
	i := bytes.Index(old, []byte(head))
	if i < 0 {
		return
	}
	md.WriteString(head)
	const kept = "\n(Kept from the report this -merge run replaced: it took no profiles, -proftime 0.)\n"
	md.WriteString(kept)
	rest := old[i+len(head):]
	for bytes.HasPrefix(rest, []byte(kept)) { // kept before: said once
		rest = rest[len(kept):]
	}
	md.Write(rest)
}

// onlyLine starts the line onlyHead puts after a section's heading.
const onlyLine = "Section written by `cd bench && go run ./cmd/results "

// keepOnlyHeads returns report md with, after each "## " heading whose section in the report
// old began with onlyHead's line and in md does not, that line: a run that rebuilds a section
// from the raw file an earlier -only run wrote (-reuse, -merge) keeps saying which run that was.
func keepOnlyHeads(md, old []byte) []byte {
	heads := map[string][]byte{}
	for _, sec := range bytes.Split(old, []byte("\n## "))[1:] {
		h, body, ok := bytes.Cut(sec, []byte("\n\n"))
		if ok && bytes.HasPrefix(body, []byte(onlyLine)) {
			line, _, _ := bytes.Cut(body, []byte("\n"))
			heads[string(h)] = line
		}
	}
	secs := bytes.Split(md, []byte("\n## "))
	for i, sec := range secs[1:] {
		h, body, ok := bytes.Cut(sec, []byte("\n\n"))
		line := heads[string(h)]
		if !ok || line == nil || bytes.HasPrefix(body, []byte(onlyLine)) {
			continue
		}
		secs[i+1] = slices.Concat(h, []byte("\n\n"), line, []byte("\n\n"), body)
	}
	return bytes.Join(secs, []byte("\n## "))
}

// memTarget is the target of the memory-efficiency rows (issue 14, "Performance at equal
// memory"): the budget Strata needs to keep a state all in memory, over the state's bytes.
const memTarget = 1.5

// writeMemory tables the MemoryEfficiency rows (bench/suite/memeff_test.go): per state kind,
// the smallest budget that keeps the state in memory as a multiple of its bytes.
func writeMemory(md *bytes.Buffer, d *report.Data) {
	rows := rowsOf(d, "MemoryEfficiency/")
	if len(rows) == 0 {
		return
	}
	md.WriteString("## Memory efficiency\n\n")
	fmt.Fprintf(md, "The smallest memory budget (whole MiB, by bisection) at which a Strata store on disk keeps the "+
		"whole state in memory — after loading and WaitBackground nothing was evicted or flushed to the LsmStore — "+
		"over the state's bytes N (keys + namespaces + values as written: 16 B key, 8 B namespace; value: 100 B; "+
		"list: 10 × 10 B elements; map: 10 × (8 B user key + 10 B value)), every other option at its default. "+
		"How: bench/suite/memeff_test.go. Target: budget ÷ N ≤ %g.\n\n", memTarget)
	md.WriteString("| row | state MiB | budget MiB | budget ÷ state | target |\n|---|---:|---:|---:|---|\n")
	for _, n := range rows {
		w, _, _, _ := report.Split(n)
		st, _ := d.Median(n, "state-MiB")
		bu, _ := d.Median(n, "budget-MiB")
		x, ok := d.Median(n, "budget/state")
		res := "–"
		if ok {
			res = "pass"
			if x > memTarget {
				res = fmt.Sprintf("**MISS** (%.2f > %g)", x, memTarget)
			}
		}
		fmt.Fprintf(md, "| %s | %.1f | %.0f | %.2f | %s |\n", strings.TrimPrefix(w, "MemoryEfficiency/"), st, bu, x, res)
	}
	md.WriteString("\n")
}

func writeSkips(md *bytes.Buffer, d *report.Data) {
	if len(d.Skips) == 0 {
		return
	}
	md.WriteString("## Rows not run\n\n| benchmark | reason |\n|---|---|\n")
	for _, n := range sortedKeys(d.Skips) {
		fmt.Fprintf(md, "| %s | %s |\n", n, orNA(d.Skips[n]))
	}
	md.WriteString("\n")
}

func writeBenchstat(md *bytes.Buffer, rawPath string) {
	md.WriteString("## benchstat\n\n")
	fmt.Fprintf(md, "`benchstat -col /impl %s` (%s): one column per implementation, the first (strata) "+
		"is the base; deltas are the peer relative to Strata, with 95%% confidence intervals.\n\n", rawPath, benchstatPkg)
	out, err := exec.Command("go", "run", benchstatPkg, "-col", "/impl", rawPath).CombinedOutput()
	if err != nil {
		fmt.Fprintf(md, "benchstat failed: %v\n\n```\n%s\n```\n\n", err, out)
		return
	}
	md.WriteString("<details><summary>benchstat output</summary>\n\n```\n")
	md.Write(out)
	md.WriteString("```\n\n</details>\n\n")
}

var topLine = regexp.MustCompile(`^\s*(\S+)\s+(\S+)%\s+(\S+)%\s+(\S+)\s+(\S+)%\s+(.+)$`)

func writeProfiles(md *bytes.Buffer, bin, profTime string) {
	md.WriteString("## Profiles of the top Strata workloads\n\n")
	fmt.Fprintf(md, "Each workload alone with `-benchtime %s -cpu 1 -cpuprofile -memprofile`; the CPU profile "+
		"includes loading the store (a few hundred ms). `go tool pprof -top`, first frames.\n\n", profTime)
	dir, err := os.MkdirTemp("", "strata-prof-")
	must(err)
	defer os.RemoveAll(dir)
	for i, p := range profiled {
		cpu := filepath.Join(dir, fmt.Sprintf("cpu%d.prof", i))
		mem := filepath.Join(dir, fmt.Sprintf("mem%d.prof", i))
		logf("profiling %s", p.title)
		cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", p.bench, "-test.benchtime", profTime, "-test.cpu", "1",
			"-test.cpuprofile", cpu, "-test.memprofile", mem, "-test.benchmem")
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			fmt.Fprintf(md, "### %s\n\nprofile run failed: %v\n\n```\n%s\n```\n\n", p.title, err, out)
			continue
		}
		result := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Benchmark") {
				result = strings.Join(strings.Fields(l), " ")
			}
		}
		cpuTop := run("go", "tool", "pprof", "-top", "-nodecount=15", bin, cpu)
		memTop := run("go", "tool", "pprof", "-top", "-nodecount=8", "-sample_index=alloc_space", bin, mem)
		fmt.Fprintf(md, "### %s\n\n`%s`\n\n", p.title, result)
		fmt.Fprintf(md, "Note: %s\n\n", note(cpuTop, memTop))
		fmt.Fprintf(md, "<details><summary>CPU top</summary>\n\n```\n%s```\n\n</details>\n\n", cpuTop)
		fmt.Fprintf(md, "<details><summary>memory top (alloc_space)</summary>\n\n```\n%s```\n\n</details>\n\n", memTop)
	}
}

// note summarises the top frames: the three largest flat CPU shares and the
// largest allocation site.
func note(cpuTop, memTop string) string {
	var parts []string
	for _, f := range frames(cpuTop, 4) {
		parts = append(parts, fmt.Sprintf("%s %s%% flat", f[6], f[2]))
	}
	s := "CPU is led by " + strings.Join(parts, ", ") + "."
	if m := frames(memTop, 1); len(m) > 0 {
		s += fmt.Sprintf(" Most bytes allocated (whole run, setup included): %s (%s%%).", m[0][6], m[0][2])
	}
	return s
}

func frames(top string, n int) [][]string {
	var out [][]string
	inTable := false
	for _, l := range strings.Split(top, "\n") {
		if strings.Contains(l, "flat%") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if m := topLine.FindStringSubmatch(l); m != nil {
			out = append(out, m)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

func fnum(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func orNA(s string) string {
	if strings.TrimSpace(s) == "" {
		return "–"
	}
	return strings.TrimSpace(s)
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func run(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("(%s: %v)\n", name, err)
	}
	return string(out)
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "results: "+format+"\n", args...) }

func fatalf(format string, args ...any) {
	logf(format, args...)
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

// onlyHead returns the section sec with a line after its heading saying that it was written
// by this -only run, not by the run the rest of the report comes from.
func onlyHead(sec []byte) []byte {
	head := fmt.Sprintf(onlyLine+"%s` on %s (%s, %d CPUs); the rest of "+
		"this report is from the run named at its top.\n\n", strings.Join(os.Args[1:], " "),
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.Version(), runtime.NumCPU())
	i := bytes.Index(sec, []byte("\n\n"))
	if i < 0 {
		return sec
	}
	return append(append(append([]byte{}, sec[:i+2]...), head...), sec[i+2:]...)
}

// relTo returns path relative to the directory of the report at out (as the report embeds it).
func relTo(out, path string) string {
	o, err := filepath.Abs(filepath.Dir(out))
	must(err)
	p, err := filepath.Abs(path)
	must(err)
	r, err := filepath.Rel(o, p)
	must(err)
	return filepath.ToSlash(r)
}
