package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/strata-db/strata/bench/internal/report"
)

// The lazy restore section (issue 24, item 3; bench/suite/lazyrestore_test.go): time to first
// read and reads per second in the first seconds after a lazy restore against a full one.

const lazyHead = "## Lazy restore\n"

// Targets of the issue: first read < 1 s at any state size; reads/s at once ≥ 50 % of steady
// state.
const (
	lazyFirstReadMs = 1000.0
	lazyAtOnce      = 0.5
	lazyTo90S       = 60.0 // ≥ 90 % of steady state within 60 s
)

// lazySection runs BenchmarkLazyRestore alone (or reads rawPath with reuse) and writes its
// section: the -only lazy path.
func lazySection(md *bytes.Buffer, reuse bool, count int, suiteArgs, rawPath string) {
	var raw []byte
	if reuse {
		var err error
		if raw, err = os.ReadFile(rawPath); err != nil {
			logf("no lazy restore section: %v", err)
			return
		}
	} else {
		args := append([]string{"test", "-run", "^$", "-bench", "^BenchmarkLazyRestore$", "-benchtime", "1x",
			"-count", fmt.Sprint(count), "-timeout", "60m", "-v", "./suite"}, strings.Fields(suiteArgs)...)
		logf("running: go %s", strings.Join(args, " "))
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			fatalf("lazy restore rows: %v\n%s", err, out)
		}
		raw = out
		must(os.MkdirAll(filepath.Dir(rawPath), 0o755))
		must(os.WriteFile(rawPath, raw, 0o644))
	}
	d, err := report.Parse(bytes.NewReader(raw))
	must(err)
	writeLazy(md, d, rawPath)
}

// writeLazy writes the lazy restore section from the LazyRestore rows of d and reports whether
// there were any (none: it writes nothing).
func writeLazy(md *bytes.Buffer, d *report.Data, rawPath string) bool {
	var rows []string
	for _, n := range d.Order {
		if w, _, _, ok := report.Split(n); ok && strings.HasPrefix(w, "LazyRestore/") {
			rows = append(rows, n)
		}
	}
	if len(rows) == 0 {
		return false
	}
	med := func(n, unit string) string {
		if v, ok := d.Median(n, unit); ok {
			return fnum(v)
		}
		return "–"
	}
	md.WriteString(lazyHead + "\n")
	fmt.Fprintf(md, "CheckpointOptions.LazyRestore against a full restore of the Restore rows' checkpoint "+
		"(bench/suite/lazyrestore_test.go; raw output in %s): dir is the local DirStorage (tables hard-linked; "+
		"a full restore checks every CRC32C first, a lazy one in the background); s3sim wraps it in a storage "+
		"that links nothing and answers each ranged read after 20 ms + 10 ns/byte (an object store's first-byte "+
		"latency, 100 MB/s per stream). After each restore one goroutine reads uniformly random keys; reads/s are "+
		"those of the first and of the last second of the window after Restore returned; local ms is when every "+
		"table was local and verified (the window's end if it was not). × full last is the first second's "+
		"reads/s over the full restore's last second on the same storage; 90 %% at s is the end of the first "+
		"second whose reads reach 90 %% of steady state, the full restore's median second over the last half of its "+
		"window (the window + 1 if none did; each round's reads per second, the curve, are in the raw output). Targets: first read < %g ms; × full last ≥ %g; 90 %% within %g s.\n\n",
		rawPath, lazyFirstReadMs, lazyAtOnce, lazyTo90S)
	md.WriteString("| row | restore ms | first read ms | reads/s first s | reads/s last s | local ms | × full last | 90 % at s | first read | at once | 90 % |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n")
	verdict := func(pass bool) string {
		if pass {
			return "pass"
		}
		return "**MISS**"
	}
	for _, n := range rows {
		w, _, row, _ := report.Split(n)
		first, at, to90 := "–", "–", "–"
		if v, ok := d.Median(n, "first-read-ms"); ok {
			first = verdict(v < lazyFirstReadMs)
		}
		if v, ok := d.Median(n, "x-full-last"); ok && strings.HasSuffix(row, "restore=lazy") {
			at = verdict(v >= lazyAtOnce)
		}
		if v, ok := d.Median(n, "s-to-90pct"); ok && strings.HasSuffix(row, "restore=lazy") {
			to90 = verdict(v <= lazyTo90S)
		}
		fmt.Fprintf(md, "| %s/%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(w, "LazyRestore/"), row,
			med(n, "restore-ms"), med(n, "first-read-ms"), med(n, "reads/s-first-s"), med(n, "reads/s-last-s"),
			med(n, "local-ms"), med(n, "x-full-last"), med(n, "s-to-90pct"), first, at, to90)
	}
	md.WriteString("\n")
	return true
}
