// Package report parses `go test -bench` output of bench/suite and computes
// what RESULTS.md and the gate command show: medians per benchmark and
// unit, Strata's speedup over each peer, and the DESIGN.md §5 gates.
//
// # Terms
//
//   - Name: a benchmark's full name without the "Benchmark" prefix, e.g.
//     "FlinkValue/keys=1M/key=8B/impl=pebble/op=get". The testing package
//     marks a row measured at GOMAXPROCS=N > 1 with a -N suffix and one at
//     GOMAXPROCS=1 with none; Parse keeps such rows apart by naming them
//     WithProcs(name, N): a gomaxprocs=N element before impl=, so that they
//     form workloads of their own ("FlinkValue/keys=1M/key=8B/gomaxprocs=2")
//     and the plain names, which the gates read, are the GOMAXPROCS=1 rows.
//   - Workload: the name up to (not including) its impl= element, e.g.
//     "FlinkValue/keys=1M/key=8B"; Row: the rest after impl=, e.g. "op=get".
//   - Speedup (Strata ×): the peer's median ns/op over Strata's median
//     ns/op for the same workload and row: Strata's throughput as a
//     multiple of the peer's; above 1 means Strata is faster.
//
// # Invariants
//
//  1. Medians only: with -count repeats on a noisy machine the median is
//     the robust centre (benchstat reports the same centre).
//  2. A gate whose rows are missing from the data is reported as missing,
//     never as passed.
//  3. Gates read GOMAXPROCS=1 rows only: output of a run at GOMAXPROCS=2
//     (every name with -2) leaves every gate missing, never passed.
package report

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Data holds every sample: Name -> unit -> values, and skip reasons.
type Data struct {
	Samples map[string]map[string][]float64
	Order   []string          // names in order of first appearance
	Skips   map[string]string // name -> reason, from -v output
	// Procs are the GOMAXPROCS values the rows were measured at, ascending (1 for a name
	// without a -N suffix).
	Procs []int
}

var (
	benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-(\d+))?\s+(\d+)\s+(.*)$`)
	skipLine  = regexp.MustCompile(`^\s*--- SKIP: Benchmark(\S+)`)
	logLine   = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
)

// Parse reads `go test -bench` output (with or without -v).
func Parse(r io.Reader) (*Data, error) {
	d := &Data{Samples: map[string]map[string][]float64{}, Skips: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lastLog := "" // the test log line before a --- SKIP line is its reason
	var err error
	for sc.Scan() {
		line := sc.Text()
		if m := skipLine.FindStringSubmatch(line); m != nil {
			d.Skips[m[1]] = lastLog
			lastLog = ""
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil {
			lastLog = m[1]
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, procs := m[1], 1
		if m[2] != "" {
			if procs, err = strconv.Atoi(m[2]); err != nil {
				return nil, fmt.Errorf("report: %q: %w", line, err)
			}
			name = WithProcs(name, procs)
		}
		if !slices.Contains(d.Procs, procs) {
			d.Procs = append(d.Procs, procs)
			slices.Sort(d.Procs)
		}
		fields := strings.Fields(m[4])
		units := d.Samples[name]
		if units == nil {
			units = map[string][]float64{}
			d.Samples[name] = units
			d.Order = append(d.Order, name)
		}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("report: %q: %w", line, err)
			}
			units[fields[i+1]] = append(units[fields[i+1]], v)
		}
	}
	return d, sc.Err()
}

// WithProcs returns the name Parse gives row name measured at GOMAXPROCS=procs: name itself
// for 1, else name with a gomaxprocs=<procs> element inserted before its impl= element (at its
// end when it has none), e.g. "FlinkValue/keys=1M/key=8B/gomaxprocs=2/impl=pebble/op=get".
func WithProcs(name string, procs int) string {
	if procs == 1 {
		return name
	}
	el := fmt.Sprintf("gomaxprocs=%d", procs)
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "impl=") {
			return strings.Join(append(parts[:i:i], append([]string{el}, parts[i:]...)...), "/")
		}
	}
	return name + "/" + el
}

// Median returns the median of name's samples in unit and whether there is one.
func (d *Data) Median(name, unit string) (float64, bool) {
	xs := d.Samples[name][unit]
	if len(xs) == 0 {
		return 0, false
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// Spread returns (max-min)/median of name's ns/op samples, in percent.
func (d *Data) Spread(name string) float64 {
	xs := d.Samples[name]["ns/op"]
	med, ok := d.Median(name, "ns/op")
	if !ok || med == 0 {
		return 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return 100 * (hi - lo) / med
}

// Split splits a name into workload, implementation and row.
func Split(name string) (workload, impl, row string, ok bool) {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if v, found := strings.CutPrefix(p, "impl="); found {
			return strings.Join(parts[:i], "/"), v, strings.Join(parts[i+1:], "/"), true
		}
	}
	return "", "", "", false
}

// Join is the inverse of Split.
func Join(workload, impl, row string) string {
	s := workload + "/impl=" + impl
	if row != "" {
		s += "/" + row
	}
	return s
}

// Speedup returns peer ns/op over Strata ns/op for workload and row.
func (d *Data) Speedup(workload, row, peer string) (float64, bool) {
	s, ok1 := d.Median(Join(workload, "strata", row), "ns/op")
	p, ok2 := d.Median(Join(workload, peer, row), "ns/op")
	if !ok1 || !ok2 || s == 0 {
		return 0, false
	}
	return p / s, true
}

// Workloads returns the workloads in order of appearance, each with its rows
// and implementations in order of appearance.
func (d *Data) Workloads() (names []string, rows, impls map[string][]string) {
	rows, impls = map[string][]string{}, map[string][]string{}
	seen := map[string]bool{}
	for _, n := range d.Order {
		w, impl, row, ok := Split(n)
		if !ok {
			continue
		}
		if !seen[w] {
			seen[w] = true
			names = append(names, w)
		}
		if !seen[w+"\x00r"+row] {
			seen[w+"\x00r"+row] = true
			rows[w] = append(rows[w], row)
		}
		if !seen[w+"\x00i"+impl] {
			seen[w+"\x00i"+impl] = true
			impls[w] = append(impls[w], impl)
		}
	}
	return names, rows, impls
}
