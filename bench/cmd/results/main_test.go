package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/bench/internal/report"
)

// TestMergeRaw: a -merge run replaces exactly the lines of the top-level benchmarks it ran.
func TestMergeRaw(t *testing.T) {
	old := `goos: linux
BenchmarkA/x-2   	 10	 5 ns/op
--- BENCH: BenchmarkA/x-2
    a_test.go:1: old A log
BenchmarkCheckpoint/state=256MiB-2   	 1	 9 ns/op
--- SKIP: BenchmarkCheckpoint/state=1GiB
    ck_test.go:2: needs -big
BenchmarkB-2   	 10	 7 ns/op
PASS
`
	fresh := `goos: linux
BenchmarkCheckpoint/state=256MiB-2   	 1	 3 ns/op
BenchmarkCheckpoint/state=1GiB-2   	 1	 4 ns/op
--- BENCH: BenchmarkCheckpoint/state=1GiB-2
    ck_test.go:3: new log
PASS
`
	got, names := mergeRaw([]byte(old), []byte(fresh))
	if !slices.Equal(names, []string{"BenchmarkCheckpoint"}) {
		t.Fatalf("names %v", names)
	}
	s := string(got)
	for _, gone := range []string{"9 ns/op", "needs -big", "--- SKIP"} {
		if strings.Contains(s, gone) {
			t.Errorf("merged output keeps %q:\n%s", gone, s)
		}
	}
	for _, kept := range []string{"5 ns/op", "old A log", "7 ns/op", "3 ns/op", "4 ns/op", "new log"} {
		if !strings.Contains(s, kept) {
			t.Errorf("merged output lacks %q:\n%s", kept, s)
		}
	}
}

// TestWriteBatched: the batched-access table pairs each batched row with its single-call row
// and judges the ratio against the target; the gates read the same rows.
func TestWriteBatched(t *testing.T) {
	raw := `BenchmarkBatchedAccess/keys=10M/key=16B+ns8B/value=8B/op=get/impl=strata-single   	 100	 3000 ns/op	 0 B/op	 0 allocs/op
BenchmarkBatchedAccess/keys=10M/key=16B+ns8B/value=8B/op=get/impl=strata   	 100	 1000 ns/op	 0 B/op	 0 allocs/op
BenchmarkBatchedAccess/keys=6100K/value=100B/budget=64MiB/dist=uniform/op=get/impl=strata-single   	 100	 9000 ns/op	 0 B/op	 0 allocs/op
BenchmarkBatchedAccess/keys=6100K/value=100B/budget=64MiB/dist=uniform/op=get/impl=strata   	 100	 6000 ns/op	 0 B/op	 0 allocs/op
`
	d, err := report.Parse(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	writeBatched(&md, d)
	s := md.String()
	for _, want := range []string{
		"| keys=10M/key=16B+ns8B/value=8B | op=get | 3000 | 1000 | 3.00 | 0 | pass |",
		"| keys=6100K/value=100B/budget=64MiB | dist=uniform/op=get | 9000 | 6000 | 1.50 | 0 | **MISS** |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	passed, missed := 0, 0
	for _, o := range d.Check() {
		if o.Peer != report.BatchSingle || o.Missing {
			continue
		}
		if o.Pass {
			passed++
		} else {
			missed++
		}
	}
	if passed != 1 || missed != 1 {
		t.Errorf("batched gates: %d passed, %d missed; want 1 and 1", passed, missed)
	}
}

// TestKeepOnlyHeads: a section rebuilt from the raw file of an earlier -only run keeps that
// run's line; a section that has its own line, or had none, is left as it is.
func TestKeepOnlyHeads(t *testing.T) {
	old := "# R\n\nintro\n\n## A\n\n" + onlyLine + "-only a` on then.\n\nold a\n\n## B\n\nold b\n\n## C\n\n" + onlyLine + "-only c` on then.\n\nold c\n"
	md := "# R\n\nintro\n\n## A\n\nnew a\n\n## B\n\nnew b\n\n## C\n\n" + onlyLine + "-only c` on now.\n\nnew c\n"
	want := "# R\n\nintro\n\n## A\n\n" + onlyLine + "-only a` on then.\n\nnew a\n\n## B\n\nnew b\n\n## C\n\n" + onlyLine + "-only c` on now.\n\nnew c\n"
	if got := string(keepOnlyHeads([]byte(md), []byte(old))); got != want {
		t.Fatalf("keepOnlyHeads:\n%s\nwant\n%s", got, want)
	}
}

// TestKeepProfilesOnce: a -merge run over a report that kept its profiles before says so once.
func TestKeepProfilesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "R.md")
	report := "# R\n\n## Profiles of the top Strata workloads\n\nprofile text\n"
	for range 3 {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
		var md bytes.Buffer
		md.WriteString("# R\n\n")
		keepProfiles(&md, path)
		report = md.String()
	}
	if n := strings.Count(report, "(Kept from the report"); n != 1 || !strings.Contains(report, "profile text") {
		t.Fatalf("after three merges: %d kept notes:\n%s", n, report)
	}
}

// TestWriteJobRows: the job rows are tabled by the demo's own figures, one line per procs, and
// left out of the peer tables (where they had neither peers nor ns/op worth reading).
func TestWriteJobRows(t *testing.T) {
	raw := `BenchmarkJob/job=flight/procs=1/impl=strata 	1	38662745266 ns/op	3.584 bg-us/event	0.6839 bg/task	0.1308 changelog/task	1.721 ckpt/changed	7.993 cpu/model	98765 events/s	2.000 evictions	0.1089 model-ratio	5.240 task-us/event
BenchmarkJob/job=flight/procs=2/impl=strata 	1	30458428500 ns/op	3.461 bg-us/event	0.5755 bg/task	0.09000 changelog/task	1.448 ckpt/changed	7.098 cpu/model	134200 events/s	0 evictions	0.1884 model-ratio	6.013 task-us/event
`
	d, err := report.Parse(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	writeJobRows(&md, d)
	s := md.String()
	for _, want := range []string{
		"| job=flight/procs=1 | 98765 | 0.109 | 5.24 | 3.58 | 7.99 | 0.68 | 0.131 | 1.72 | 2 |",
		"| job=flight/procs=2 | 134200 | 0.188 | 6.01 | 3.46 | 7.10 | 0.58 | 0.090 | 1.45 | 0 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	md.Reset()
	writeTables(&md, d)
	if strings.Contains(md.String(), "Job/") {
		t.Errorf("the peer tables still show the job rows:\n%s", md.String())
	}
}
