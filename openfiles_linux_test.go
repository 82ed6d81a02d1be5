//go:build linux

package strata

// A real RLIMIT_NOFILE (the issue "Nothing lost to a passing fault"): a child process (this test
// binary, TestOpenFilesChild) lowers its soft limit on open files to 64 with setrlimit(2) and
// writes a state of hundreds of table files; the parent then reopens the directory and checks
// every acknowledged put. Two runs:
//
//   - lift: the limit drops after Open (the Store sized its table cache for the old limit), so
//     the process runs out of descriptors; every put must still be acknowledged, and once the
//     limit is raised again WaitBackground and Close succeed;
//   - low: the limit is 64 from before Open, so the table cache is sized from it (32 files):
//     everything must succeed with no background failure at all, with several times more
//     tables than the limit.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

const (
	openFilesChildEnv = "STRATA_OPENFILES_CHILD" // "<mode>:<store directory>"
	openFilesLimit    = 64
	openFilesKeys     = 80_000
	openFilesPuts     = 160_000
)

func openFilesOptions() (Options, func(*engine.Options)) {
	return Options{MaxParallelism: 128, MemoryBudget: 48 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BackpressureTimeout: 10 * time.Second, fs: vfs.Default()},
		func(o *engine.Options) { o.TableSize = 256 << 10 } // hundreds of tables
}

// TestOpenFilesChild is the child's side; it does nothing unless run by TestOpenFilesLimit.
func TestOpenFilesChild(t *testing.T) {
	mode, dir, ok := strings.Cut(os.Getenv(openFilesChildEnv), ":")
	if !ok {
		t.Skip("child mode of TestOpenFilesLimit")
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = openFilesLimit
	setLimit := func(l syscall.Rlimit) {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Fatalf("setrlimit(RLIMIT_NOFILE, %d): %v", l.Cur, err)
		}
	}
	if mode == "low" {
		setLimit(low)
	}
	opts, adjust := openFilesOptions()
	s, err := open(dir, opts, adjust)
	if err != nil {
		t.Fatal(err)
	}
	p := newPutLoad(openFilesKeys)
	if err := p.attach(s); err != nil {
		t.Fatal(err)
	}
	if mode == "lift" {
		setLimit(low)
	}
	if err := p.run(openFilesPuts); err != nil {
		t.Fatalf("%s: with RLIMIT_NOFILE %d: %v", mode, openFilesLimit, err)
	}
	if mode == "lift" {
		// The background work the puts queued runs at the limit too: the table cache, sized
		// for the old limit, fills the descriptors, and the LsmStore's own files then meet
		// EMFILE (shed, or retried).
		if err := s.WaitBackground(); err != nil {
			t.Fatalf("WaitBackground at RLIMIT_NOFILE %d: %v", openFilesLimit, err)
		}
		st := s.Stats()
		fmt.Printf("at the limit: tables %d, open tables %d, out of files %d, background errors %d, retries %d, last %q\n",
			st.LSM.Files, st.LSM.OpenTables, st.LSM.OutOfFiles, st.Background.Errors, st.Background.Retries, st.Background.LastError)
		if st.LSM.OutOfFiles == 0 && st.Background.Retries == 0 {
			t.Fatalf("the process never ran out of descriptors at RLIMIT_NOFILE %d (%d tables, %d open)",
				openFilesLimit, st.LSM.Files, st.LSM.OpenTables)
		}
		setLimit(lim)
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatalf("%s: WaitBackground: %v", mode, err)
	}
	st := s.Stats()
	fmt.Printf("stats: tables %d, open tables %d, cache hits %d, misses %d, out of files %d, background errors %d, retries %d, LSM compactions %d\n",
		st.LSM.Files, st.LSM.OpenTables, st.LSM.TableCacheHits, st.LSM.TableCacheMisses, st.LSM.OutOfFiles, st.Background.Errors,
		st.Background.Retries, st.LSM.Compactions)
	if mode == "low" {
		if st.LSM.Files < 2*openFilesLimit {
			t.Fatalf("only %d tables: not enough to need the table cache under a limit of %d", st.LSM.Files, openFilesLimit)
		}
		if st.Background.Errors != 0 || st.LSM.OutOfFiles != 0 || st.LSM.OpenTables > openFilesLimit/2 {
			t.Fatalf("under a limit of %d from Open: %d background errors (last %q), %d times out of files, %d tables open",
				openFilesLimit, st.Background.Errors, st.Background.LastError, st.LSM.OutOfFiles, st.LSM.OpenTables)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("%s: Close: %v", mode, err)
	}
}

// TestOpenFilesLimit runs TestOpenFilesChild in a child process for each mode and checks what
// it persisted.
func TestOpenFilesLimit(t *testing.T) {
	if os.Getenv(openFilesChildEnv) != "" {
		t.Skip("parent mode")
	}
	if os.Getenv("STRATA_EMULATED") != "" {
		t.Skip("re-executes the test binary as a child process with a lowered RLIMIT_NOFILE, which user-mode emulation (qemu, STRATA_EMULATED) cannot run")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	model := newPutLoad(openFilesKeys)
	if err := model.run(openFilesPuts); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"lift", "low"} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			dir := filepath.Join(t.TempDir(), "db")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, "-test.run=^TestOpenFilesChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), openFilesChildEnv+"="+mode+":"+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child (%s): %v:\n%s", mode, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "stats:") || strings.HasPrefix(line, "at the limit:") {
					t.Log(line)
				}
			}
			opts, adjust := openFilesOptions()
			s, err := open(dir, opts, adjust)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p := &putLoad{ver: model.ver}
			if err := p.attach(s); err != nil {
				t.Fatal(err)
			}
			if err := p.check(); err != nil {
				t.Fatalf("after the child's Close under RLIMIT_NOFILE %d (%s): %v", openFilesLimit, mode, err)
			}
			t.Logf("%s: %v", mode, time.Since(start))
		})
	}
}
