package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-db/strata/bench/internal/report"
)

// s3Bench selects the rows of the section "Checkpoints on S3" (bench/suite/s3_test.go).
const s3Bench = "^Benchmark(S3Checkpoint|Savepoint|S3Restore)$"

// s3Head is the heading of the section "Checkpoints on S3".
const s3Head = "## Checkpoints on S3\n"

// runS3 builds the suite and runs the S3 rows (-s3) with the suite flags args, under
// scripts/versitygw.sh run (a versitygw server on 127.0.0.1 for the run) when server is
// "versitygw", or against the suite's in-process gofakes3 when it is "gofakes3". It returns
// the benchmark output, after the script's line naming the server it started (its version,
// PID and address), prefixed "# ".
func runS3(server string, args []string) []byte {
	dir, err := os.MkdirTemp("", "strata-results-s3-")
	must(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "suite.test")
	logf("building the suite (go test -tags pebblegozstd -c)")
	if out, err := exec.Command("go", "test", "-tags", "pebblegozstd", "-c", "-o", bin, "./suite").CombinedOutput(); err != nil {
		fatalf("building the suite: %v\n%s", err, out)
	}
	args = append([]string{"-test.run", "^$", "-test.bench", s3Bench, "-test.cpu", "1", "-test.timeout", "180m",
		"-test.v", "-s3"}, args...)
	var cmd *exec.Cmd
	switch server {
	case "versitygw":
		script, err := filepath.Abs("../scripts/versitygw.sh")
		must(err)
		cmd = exec.Command(script, append([]string{"run", bin}, args...)...)
	case "gofakes3":
		cmd = exec.Command(bin, args...)
	default:
		fatalf("-s3server %q: versitygw or gofakes3", server)
	}
	logf("running: %s", strings.Join(cmd.Args, " "))
	loadStart := loadAvg()
	var out, errOut bytes.Buffer
	cmd.Dir = "suite"
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stdout = io.MultiWriter(&out, &progress{})
	cmd.Stderr = io.MultiWriter(&errOut, os.Stderr)
	if err := cmd.Run(); err != nil {
		fatalf("S3 rows: %v", err)
	}
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "# load average (1/5/15 min) at start: %s, at end: %s\n", loadStart, loadAvg())
	for _, l := range strings.Split(errOut.String(), "\n") {
		if strings.HasPrefix(l, "versitygw ") && strings.Contains(l, " (PID ") { // "versitygw v1.8.0 (PID n) on …"
			raw.WriteString("# " + l + "\n")
		}
	}
	raw.Write(out.Bytes())
	return raw.Bytes()
}

// loadAvg returns the 1, 5 and 15 minute load averages, "n/a" where there are none.
func loadAvg() string {
	v, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(v)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "n/a"
}

// writeS3 writes the section "Checkpoints on S3" from raw, the output of runS3 kept at
// rawPath: checkpoint, restore and savepoint rows on S3 beside the same on a local directory,
// with the targets of the section "Checkpoints and restore" (ckSyncP99Ms, ckBytesFactor,
// ckRestoreRatio) where the issue sets one.
func writeS3(md *bytes.Buffer, raw []byte, rawPath string, args string) {
	d, err := report.Parse(bytes.NewReader(raw))
	must(err)
	var ck, rs, sp []string
	for _, n := range d.Order {
		w, _, _, ok := report.Split(n)
		switch {
		case !ok:
		case strings.HasPrefix(w, "S3Checkpoint/"):
			ck = append(ck, n)
		case strings.HasPrefix(w, "S3Restore/"):
			rs = append(rs, n)
		case strings.HasPrefix(w, "Savepoint/"):
			sp = append(sp, n)
		}
	}
	// The raw output may join several runs (e.g. the 256 MiB rows and, later, the -big ones):
	// each run's load is named, and each server once.
	var server, loads []string
	load := ""
	for _, l := range strings.Split(string(raw), "\n") {
		if s, ok := strings.CutPrefix(l, "# load average "); ok {
			loads = append(loads, s)
		}
		if s, ok := strings.CutPrefix(l, "# "); ok && strings.Contains(s, " (PID ") {
			s, _, _ = strings.Cut(s, " (PID ")
			if !slices.Contains(server, s) {
				server = append(server, s)
			}
		}
	}
	if len(loads) == 1 {
		load = "Load average " + loads[0] + " (a shared 2-vCPU VM). "
	} else if len(loads) > 1 {
		load = fmt.Sprintf("The raw output joins %d runs, in order; their load averages: %s (a shared 2-vCPU VM). ",
			len(loads), strings.Join(loads, "; "))
	}
	md.WriteString(s3Head + "\n")
	where := "gofakes3 in the benchmark process (no server was given: storage=s3-gofakes3)"
	if len(server) > 0 {
		where = "a real S3-compatible server, started for the run by `scripts/versitygw.sh run` (" +
			strings.Join(server, ", ") + ", posix back-end on the local disk, on 127.0.0.1)"
	}
	fmt.Fprintf(md, "The state of the section \"Checkpoints and restore\" (16 B keys, 100 B values, 64 MiB budget, 1 %% of "+
		"the keys updated before each checkpoint) in two Stores loaded alike, one checkpointing into a local directory "+
		"(storage=local: table files hard-linked) and one into S3 through package checkpoint/s3 (every new table "+
		"uploaded; 16 MiB parts, 4 in flight), against %s. Each Store is checkpointed once in full before its rows. "+
		"The restore rows restore its last checkpoint from that storage into a new directory (from S3: every table "+
		"downloaded), Open and a first read included; scaleout is two Stores of half the key groups one after the other "+
		"(subtask max: the slower), scalein one Store from the two halves' checkpoints. The savepoint rows write "+
		"Store.Savepoint of the whole state into the same storage (native: a checkpoint copied object by object with "+
		"checkpoint.CopyNative; canonical: the logical entries as one stream), then restore it into a new Store with a "+
		"first read; per GiB is over the state's bytes (keys × 116 B). Loopback HTTP adds no network latency or "+
		"bandwidth limit: the S3 rows measure the protocol and the server, not a network. %sHow: "+
		"bench/suite/s3_test.go; raw output in %s (`suite.test %s`). Targets (DESIGN §5, issue 24): sync pause p99 ≤ "+
		"%g ms and bytes beyond the memory tiers ≤ %g × the bytes changed, on S3 as locally; rescale 1→2 and 2→1 "+
		"through S3 ≤ %g × a plain restore through S3 (the result column reads the sum for scaleout, the slower "+
		"subtask as parallel subtasks would wait, after the comma). The savepoint rows have no target.\n\n",
		where, load, rawPath, args, ckSyncP99Ms, ckBytesFactor, ckRestoreRatio)
	med := func(n, unit string) string {
		if v, ok := d.Median(n, unit); ok {
			return fnum(v)
		}
		return "–"
	}
	verdict := func(pass bool) string {
		if pass {
			return "pass"
		}
		return "**MISS**"
	}
	// vsLocal is n's unit over the storage=local row's of the same workload and mode.
	vsLocal := func(n, unit string) string {
		w, impl, row, _ := report.Split(n)
		storage, rest, _ := strings.Cut(row, "/")
		if storage == "storage=local" {
			return "–"
		}
		local := "storage=local"
		if rest != "" {
			local += "/" + rest
		}
		v, ok1 := d.Median(n, unit)
		l, ok2 := d.Median(report.Join(w, impl, local), unit)
		if !ok1 || !ok2 || l == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", v/l)
	}
	if len(ck) > 0 {
		md.WriteString("| row | storage | ckpts | sync p50 ms | sync p99 ms | async p50 ms | async p99 ms | async p50 ÷ local | " +
			"async p99 ÷ local | MiB/ckpt | bytes ÷ local | beyond mem ÷ changed | sync p99 | bytes |\n" +
			"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
		for _, n := range ck {
			w, _, row, _ := report.Split(n)
			beyond, bytesV, sync := "–", "–", "–"
			by, okB := d.Median(n, "bytes/ckpt")
			ch, okC := d.Median(n, "changed-B/ckpt")
			mem, _ := d.Median(n, "mem-B/ckpt")
			if okB && okC && ch > 0 {
				beyond = fmt.Sprintf("%.2f", (by-mem)/ch)
				bytesV = verdict((by-mem)/ch <= ckBytesFactor)
			}
			if p99, ok := d.Median(n, "sync-p99-ms"); ok {
				sync = verdict(p99 <= ckSyncP99Ms)
			}
			mibV := "–"
			if okB {
				mibV = fmt.Sprintf("%.2f", by/(1<<20))
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				strings.TrimPrefix(w, "S3Checkpoint/"), strings.TrimPrefix(row, "storage="), med(n, "ckpts"),
				med(n, "sync-p50-ms"), med(n, "sync-p99-ms"), med(n, "async-p50-ms"), med(n, "async-p99-ms"),
				vsLocal(n, "async-p50-ms"), vsLocal(n, "async-p99-ms"), mibV, vsLocal(n, "bytes/ckpt"), beyond, sync, bytesV)
		}
		md.WriteString("\n")
	}
	if len(rs) > 0 {
		md.WriteString("| row | storage | mode | restore ms | ÷ local | subtask max ms | × plain | subtask max × plain | " +
			"MiB restored | MiB ÷ plain | result |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		var why []string
		for _, n := range rs {
			w, impl, row, _ := report.Split(n)
			storage, mode, _ := strings.Cut(row, "/")
			x, sub, res, mibX := "–", "–", "–", "–"
			plainN := report.Join(w, impl, storage+"/mode=plain")
			plain, okPlain := d.Median(plainN, "restore-ms")
			mibV, okM := d.Median(n, "restored-MiB")
			mibP, okMP := d.Median(plainN, "restored-MiB")
			if okM && okMP && mibP > 0 && mode != "mode=plain" {
				mibX = fmt.Sprintf("%.2f", mibV/mibP)
			}
			if v, ok := d.Median(n, "restore-ms"); ok && okPlain && plain > 0 && mode != "mode=plain" {
				x = fmt.Sprintf("%.2f", v/plain)
				res = verdict(v/plain <= ckRestoreRatio)
				if m, ok := d.Median(n, "subtask-max-ms"); ok {
					sub = fmt.Sprintf("%.2f", m/plain)
					res += " one after the other, " + verdict(m/plain <= ckRestoreRatio) + " in parallel"
				}
				if storage == "storage=local" {
					res = "(" + res + ")" // the target is the S3 rows'; the local rows are tabled in "Checkpoints and restore"
				} else if v/plain > ckRestoreRatio && okM && okMP && mibP > 0 {
					why = append(why, fmt.Sprintf("%s %s %s: %.2f × plain, its Stores restoring %.2f × the plain "+
						"restore's table bytes (%.0f MiB)", strings.TrimPrefix(w, "S3Restore/"),
						strings.TrimPrefix(storage, "storage="), strings.TrimPrefix(mode, "mode="), v/plain, mibV/mibP, mibV))
				}
			}
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(w, "S3Restore/"),
				strings.TrimPrefix(storage, "storage="), strings.TrimPrefix(mode, "mode="), med(n, "restore-ms"),
				vsLocal(n, "restore-ms"), med(n, "subtask-max-ms"), x, sub, med(n, "restored-MiB"), mibX, res)
		}
		md.WriteString("\n")
		if len(why) > 0 {
			// A rescaled restore costs what it fetches: the tables a half's Store restores are
			// whole objects (clipped to its key groups at read time, DESIGN §4 item 6), so a
			// table holding key groups of both halves is fetched by both.
			md.WriteString("Rescale misses through S3 — " + strings.Join(why, "; ") + ". MiB ÷ plain near 2 means every " +
				"table holds key groups of both halves: a scale-out fetches each table once per half-Store (whole objects, " +
				"clipped to the Store's key groups at read time), and a scale-in fetches both halves' checkpoints, each of " +
				"which holds whole tables again; over loopback HTTP the time follows the bytes.\n\n")
		}
	}
	if len(sp) > 0 {
		md.WriteString("| row | storage | kind | write ms | write s/GiB | write ÷ local | restore ms | restore s/GiB | " +
			"restore ÷ local | savepoint MiB |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range sp {
			w, _, row, _ := report.Split(n)
			storage, kind, _ := strings.Cut(row, "/")
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(w, "Savepoint/"),
				strings.TrimPrefix(storage, "storage="), strings.TrimPrefix(kind, "kind="), med(n, "write-ms"),
				med(n, "write-s/GiB"), vsLocal(n, "write-ms"), med(n, "restore-ms"), med(n, "restore-s/GiB"),
				vsLocal(n, "restore-ms"), med(n, "sp-MiB"))
		}
		md.WriteString("\n")
	}
	if len(d.Skips) > 0 {
		md.WriteString("Rows not run:\n\n")
		for _, n := range sortedKeys(d.Skips) {
			fmt.Fprintf(md, "- %s: %s\n", n, orNA(d.Skips[n]))
		}
		md.WriteString("\n")
	}
}
