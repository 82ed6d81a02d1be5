package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteKafkaBench: the tables of package kafka's benchmarks hold each row's medians.
func TestWriteKafkaBench(t *testing.T) {
	bench := `goos: linux
BenchmarkEndToEndLatency/delivery=exactly-once/interval=100ms-2   	1	2259699549 ns/op	1780 events/s	394.9 max-ms	213.6 p50-ms	386.5 p99-ms	40 commit-ms	20 store-checkpoints-ms	1 B/op	1 allocs/op
BenchmarkEndToEndLatency/delivery=exactly-once/interval=100ms-2   	1	2259699549 ns/op	1790 events/s	394.9 max-ms	230.0 p50-ms	390.5 p99-ms	40 commit-ms	20 store-checkpoints-ms	1 B/op	1 allocs/op
BenchmarkEndToEndLatency/delivery=exactly-once/interval=100ms-2   	1	2259699549 ns/op	1800 events/s	394.9 max-ms	250.0 p50-ms	395.5 p99-ms	40 commit-ms	20 store-checkpoints-ms	1 B/op	1 allocs/op
BenchmarkRebalance/restore=full/storage=copy/state=256MiB-2   	1	6988887074 ns/op	633.2 checkpoint-MiB	0 fetch-ms	1592 group-ms	1993 handover-ms	6985 rebalance-ms	3400 restore-ms	256.0 state-MiB	1 B/op	1 allocs/op
PASS
`
	var md bytes.Buffer
	if err := writeKafkaBench(&md, []byte(bench), "results/kafka-bench.txt"); err != nil {
		t.Fatal(err)
	}
	s := md.String()
	for _, row := range []string{
		"| exactly-once | 100ms | 230 | 390 | 395 | 40 | 20 | 1790 |",
		"| full | copy | 256 | 6985 | 1993 | 1592 | 3400 | 0 | 633 |",
	} {
		if !strings.Contains(s, row) {
			t.Errorf("no row %q in:\n%s", row, s)
		}
	}
	md.Reset()
	if err := writeKafkaBench(&md, nil, "x"); err != nil || md.Len() != 0 {
		t.Errorf("no benchmark output: wrote %q, %v; want nothing", md.String(), err)
	}
}
