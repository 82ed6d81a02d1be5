package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteS3: the S3 section compares each S3 row with the local row of the same mode or kind,
// judges rescales through S3 against their plain restore (the local rows' verdicts only in
// parentheses), explains a miss by the bytes restored, and names the server of the run.
func TestWriteS3(t *testing.T) {
	raw := `# load average (1/5/15 min) at start: 1.00 1.00 1.00, at end: 2.00 2.00 2.00
# versitygw v1.8.0 (PID 42) on 127.0.0.1:30000, data in /tmp/x/data
BenchmarkS3Checkpoint/state=256MiB/impl=strata/storage=local 	 1	 1 ns/op	 100 async-p50-ms	 200 async-p99-ms	 1048576 bytes/ckpt	 1048576 changed-B/ckpt	 0 mem-B/ckpt	 0.1 sync-p99-ms	 0.05 sync-p50-ms	 20 ckpts
BenchmarkS3Checkpoint/state=256MiB/impl=strata/storage=s3-versitygw 	 1	 1 ns/op	 300 async-p50-ms	 800 async-p99-ms	 2097152 bytes/ckpt	 1048576 changed-B/ckpt	 0 mem-B/ckpt	 6 sync-p99-ms	 0.05 sync-p50-ms	 20 ckpts
BenchmarkS3Restore/state=256MiB/impl=strata/storage=local/mode=plain 	 1	 1 ns/op	 100 restore-ms	 400 restored-MiB
BenchmarkS3Restore/state=256MiB/impl=strata/storage=local/mode=scaleout 	 1	 1 ns/op	 300 restore-ms	 150 subtask-max-ms	 800 restored-MiB
BenchmarkS3Restore/state=256MiB/impl=strata/storage=s3-versitygw/mode=plain 	 1	 1 ns/op	 1000 restore-ms	 400 restored-MiB
BenchmarkS3Restore/state=256MiB/impl=strata/storage=s3-versitygw/mode=scaleout 	 1	 1 ns/op	 2000 restore-ms	 1000 subtask-max-ms	 800 restored-MiB
BenchmarkS3Restore/state=256MiB/impl=strata/storage=s3-versitygw/mode=scalein 	 1	 1 ns/op	 1100 restore-ms	 400 restored-MiB
BenchmarkSavepoint/state=256MiB/impl=strata/storage=local/kind=native 	 1	 1 ns/op	 1000 write-ms	 4 write-s/GiB	 500 restore-ms	 2 restore-s/GiB	 400 sp-MiB
BenchmarkSavepoint/state=256MiB/impl=strata/storage=s3-versitygw/kind=native 	 1	 1 ns/op	 3000 write-ms	 12 write-s/GiB	 1000 restore-ms	 4 restore-s/GiB	 400 sp-MiB
`
	var md bytes.Buffer
	writeS3(&md, []byte(raw), "results/s3.txt", "-test.count 1")
	s := md.String()
	for _, want := range []string{
		"## Checkpoints on S3\n",
		"(versitygw v1.8.0, posix back-end",
		"at start: 1.00 1.00 1.00, at end: 2.00 2.00 2.00",
		"| state=256MiB | local | 20.0 | 0.05 | 0.10 | 100 | 200 | – | – | 1.00 | – | 1.00 | pass | pass |",
		"| state=256MiB | s3-versitygw | 20.0 | 0.05 | 6.00 | 300 | 800 | 3.00 | 4.00 | 2.00 | 2.00 | 2.00 | **MISS** | **MISS** |",
		"| state=256MiB | local | scaleout | 300 | – | 150 | 3.00 | 1.50 | 800 | 2.00 | (**MISS** one after the other, **MISS** in parallel) |",
		"| state=256MiB | s3-versitygw | scaleout | 2000 | 6.67 | 1000 | 2.00 | 1.00 | 800 | 2.00 | **MISS** one after the other, pass in parallel |",
		"| state=256MiB | s3-versitygw | scalein | 1100 | – | – | 1.10 | – | 400 | 1.00 | pass |",
		"state=256MiB s3-versitygw scaleout: 2.00 × plain, its Stores restoring 2.00 × the plain restore's table bytes (800 MiB)",
		"| state=256MiB | s3-versitygw | native | 3000 | 12.0 | 3.00 | 1000 | 4.00 | 2.00 | 400 |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "s3-versitygw scalein:") {
		t.Errorf("a passing rescale is explained as a miss:\n%s", s)
	}
}
