package suite

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var flagJobArgs = flag.String("jobargs", "", "more flags for the flight demo of BenchmarkJob, space-separated (e.g. \"-scale 1 -budget 268435456\")")

// BenchmarkJob is the job-level row of issue 22 (item 4): the flight demo's replay
// (bench/cmd/flightdemo, its default settings: 64 MiB budget, changelog on, a checkpoint
// every 50 000 events) run as a whole, beside its Go model doing the same work in the same
// process, at GOMAXPROCS=1 and 2 (the demo's process; the suite's own -cpu does not apply).
// One op is one run of the job. It reports, from the demo's "job:" line (its Stats' cost
// accounting):
//
//	events/s         the job's replay throughput
//	model-ratio      events/s ÷ the Go model's (gate: ≥ 0.5)
//	task-us/event    the task's CPU per event (process CPU minus background, µs)
//	bg-us/event      the background's CPU per event (worker thread CPU, µs)
//	cpu/model        (task + background) CPU per event ÷ the Go model's (gate: ≤ 3)
//	bg/task          background CPU ÷ task CPU (gate: ≤ 1)
//	changelog/task   the changelog append's share of the task's CPU (gate: ≤ 0.15)
//	ckpt/changed     bytes per checkpoint ÷ bytes changed since the previous one
//	evictions        evictions to the LsmStore (gate: 0 — the job's state fits 64 MiB)
func BenchmarkJob(b *testing.B) {
	if testing.Short() {
		b.Skip("a whole job per op: not in -short")
	}
	bin := filepath.Join(b.TempDir(), "flightdemo")
	build := exec.Command("go", "build", "-o", bin, "./cmd/flightdemo")
	build.Dir = ".." // the bench module
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the flight demo: %v\n%s", err, out)
	}
	for _, procs := range []int{1, 2} {
		b.Run("job=flight/procs="+strconv.Itoa(procs)+"/impl=strata", func(b *testing.B) {
			sums := map[string]float64{}
			for range b.N {
				cmd := exec.Command(bin, strings.Fields(*flagJobArgs)...)
				cmd.Dir = ".." // the demo finds testdata/ from the bench module
				cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("flight demo: %v\n%s", err, tail(out))
				}
				m, err := parseJobLine(out)
				if err != nil {
					b.Fatalf("%v\n%s", err, tail(out))
				}
				sums["events/s"] += m["events/s"]
				sums["model-ratio"] += m["events/s"] / m["model-events/s"]
				sums["task-us/event"] += m["task-us/event"]
				sums["bg-us/event"] += m["bg-us/event"]
				sums["cpu/model"] += (m["task-us/event"] + m["bg-us/event"]) / m["model-us/event"]
				sums["bg/task"] += m["bg/task"]
				sums["changelog/task"] += m["changelog/task"]
				sums["ckpt/changed"] += m["ckpt/changed"]
				sums["evictions"] += m["evictions"]
			}
			for unit, v := range sums {
				b.ReportMetric(v/float64(b.N), unit)
			}
		})
	}
}

// parseJobLine reads the flight demo's "job: key=value …" line.
func parseJobLine(out []byte) (map[string]float64, error) {
	for _, line := range bytes.Split(out, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("job: "))
		if !ok {
			continue
		}
		m := map[string]float64{}
		for _, f := range strings.Fields(string(rest)) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("flight demo: job line field %q", f)
			}
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("flight demo: job line field %q: %w", f, err)
			}
			m[k] = x
		}
		for _, k := range []string{"events/s", "model-events/s", "task-us/event", "bg-us/event", "model-us/event"} {
			if m[k] <= 0 {
				return nil, fmt.Errorf("flight demo: job line without a positive %s", k)
			}
		}
		return m, nil
	}
	return nil, fmt.Errorf("flight demo: no job line in its output")
}

// tail returns the last lines of a run's output, for a failure message.
func tail(out []byte) []byte {
	if i := len(out) - 4000; i > 0 {
		return out[i:]
	}
	return out
}
