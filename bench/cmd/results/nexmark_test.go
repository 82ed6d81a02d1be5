package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nexmarkRaw is the raw file of a plan's three runs, as cmd/nexmark prints them (shortened).
const nexmarkRaw = `=== nexmark -query q0,q5 -events 1000
nexmark: 1000 events per query
  state : 0.0 MiB (FreshTable 0.0, slices 0.0, LsmStore 0.0 in 0 files) = 0.0× the 64 MiB budget; 0 evictions
  state : 1.5 MiB (FreshTable 1.5, slices 0.0, LsmStore 0.0 in 0 files) = 0.0× the 64 MiB budget; 0 evictions

| query | Strata events/s | Go model events/s | ratio | CPU ns/event Strata / model | CPU ratio | Flink published events/s/core | check |
|---|---|---|---|---|---|---|---|
| q0 | 3000000 | 4000000 | 0.75 | 500 / 400 | 0.80 | 155000 | OK |
| q5 | 400000 | 1000000 | 0.40 | 2000 / 800 | 0.40 | 22100 | OK |
=== nexmark -query q20 -events 3000 -budget 50331648 -model=false
  state : 500.0 MiB (FreshTable 20.0, slices 0.0, LsmStore 480.0 in 60 files) = 10.4× the 48 MiB budget; 40 evictions
| q20 | 100000 | +Inf | 0.00 | 6000 / 0 | 0.00 | 19000 | skipped (-model=false) |
=== nexmark -query q20 -events 3000 -budget 2147483648 -model=false
  state : 500.0 MiB (FreshTable 500.0, slices 0.0, LsmStore 0.0 in 0 files) = 0.24× the 2048 MiB budget; 0 evictions
| q20 | 250000 | +Inf | 0.00 | 3000 / 0 | 0.00 | 19000 | skipped (-model=false) |
`

// TestWriteNexmark: the section tables each query against its targets (the ½-of-model target
// on the CPU ratio, the 10× Flink target per core), the q20 past-budget row against its
// in-memory run, and embeds a chart that is a well-formed SVG document.
func TestWriteNexmark(t *testing.T) {
	runs, err := parseNexmark(nexmarkRaw)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || len(runs[0].Rows) != 2 || runs[1].Rows[0].StateX != 10.4 {
		t.Fatalf("parsed %+v", runs)
	}
	dir := t.TempDir()
	chart := filepath.Join(dir, "results", "nexmark.svg")
	var md bytes.Buffer
	if err := writeNexmark(&md, runs, "results/nexmark.txt", chart, "results/nexmark.svg"); err != nil {
		t.Fatal(err)
	}
	s := md.String()
	for _, want := range []string{
		"| q0 | 3000000 | 4000000 | 0.75 | 500 / 400 | 0.80 | – (no state) | 2000000 | 155000 | 12.9× pass | OK |",
		"| q5 | 400000 | 1000000 | 0.40 | 2000 / 800 | 0.40 | **MISS** | 500000 | 22100 | 22.6× pass | OK |",
		"| q20 past the budget | 10.4 | 100000 | 6000 | 2.00 | pass |",
		"](results/nexmark.svg)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	checkSVG(t, chart)
}

// checkSVG fails unless path holds a well-formed XML document whose root is an svg element
// with drawing in it.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	root, elems := "", 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			elems++
		}
	}
	if root != "svg" || elems < 20 {
		t.Fatalf("%s: root element %q with %d elements, want svg with a drawing", path, root, elems)
	}
}

// TestReplaceSection: -only nexmark replaces the section in place, or inserts it before the
// first heading named when the report has none.
func TestReplaceSection(t *testing.T) {
	rep := "# R\n\n## A\n\na\n\n## Nexmark\n\nold\n\n## benchstat\n\nb\n"
	got := string(replaceSection([]byte(rep), "## Nexmark\n", []byte("## Nexmark\n\nnew\n\n"), "## benchstat\n"))
	if want := "# R\n\n## A\n\na\n\n## Nexmark\n\nnew\n\n## benchstat\n\nb\n"; got != want {
		t.Errorf("replace: got %q, want %q", got, want)
	}
	rep = "# R\n\n## A\n\na\n\n## benchstat\n\nb\n"
	got = string(replaceSection([]byte(rep), "## Nexmark\n", []byte("## Nexmark\n\nnew\n\n"), "## Rows not run\n", "## benchstat\n"))
	if want := "# R\n\n## A\n\na\n\n## Nexmark\n\nnew\n\n## benchstat\n\nb\n"; got != want {
		t.Errorf("insert: got %q, want %q", got, want)
	}
}

// TestWriteFlight: the flight job's section reads the demo's -series file, charts events/s
// over time as a well-formed SVG and leaves the demo's progress lines out of its output.
func TestWriteFlight(t *testing.T) {
	series := "# flightdemo series: seconds events kind\n0.000 1 progress\n0.300 30000 progress\n0.600 60001 progress\n" +
		"0.650 50000 checkpoint\n0.900 90001 progress\n0.950 90001 materialization\n1.200 120001 progress\n"
	ss, err := parseFlightSeries(series)
	if err != nil {
		t.Fatal(err)
	}
	if r := flightRates(ss, 0.5); len(r) != 2 || r[0].X != 0.6 || r[0].Y != 100000 {
		t.Fatalf("rates %v", r)
	}
	out := "loaded …\n      40000 / 120001 events   33.3%  0.10 M events/s\ncheck: OK\n"
	chart := filepath.Join(t.TempDir(), "flight.svg")
	var md bytes.Buffer
	if err := writeFlight(&md, []byte(out), []byte(series), "results/flight.txt", "results/flight-series.txt", chart, "results/flight.svg"); err != nil {
		t.Fatal(err)
	}
	if s := md.String(); !strings.Contains(s, "check: OK") || strings.Contains(s, "M events/s") || !strings.Contains(s, "](results/flight.svg)") {
		t.Errorf("section:\n%s", s)
	}
	checkSVG(t, chart)
	if _, err := parseFlightSeries("0.1 x progress\n"); err == nil {
		t.Error("a malformed series line parsed")
	}
}
