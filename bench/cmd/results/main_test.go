package main

import (
	"slices"
	"strings"
	"testing"
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
