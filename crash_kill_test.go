package strata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The SIGKILL crash test: a child process (this test binary, TestAttackCrashChild) runs
// sessions of a write-heavy workload on a real directory — Open, ops, Close, then records the
// session number in a progress file beside the store (written after Close returned) — until
// the parent kills it with SIGKILL at a random moment. The parent reopens the store and checks
// every slot against the model of the sessions up to the recorded one (or one more: the kill
// may fall between Close returning and the progress file being renamed into place).

const (
	attackChildEnv = "STRATA_ATTACK_CHILD_DIR"
	attackCrashOps = 150_000
	attackSeed     = 20260522
)

var attackCrashWorkload = attackWorkload(20_000, 1500)

func attackCrashOptions() Options {
	return Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2}
}

// readProgress returns the last session whose Close returned (-1: none).
func readProgress(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "progress"))
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// writeProgress records n durably (temp file, fsync, rename, fsync of the directory).
func writeProgress(dir string, n int) error {
	tmp := filepath.Join(dir, "progress.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%d\n", n); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(dir, "progress")); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// TestAttackCrashChild is the child's workload; it does nothing unless run by
// TestAttackCrashKill.
func TestAttackCrashChild(t *testing.T) {
	root := os.Getenv(attackChildEnv)
	if root == "" {
		t.Skip("child mode of TestAttackCrashKill")
	}
	store := filepath.Join(root, "store")
	for {
		n, err := readProgress(root)
		if err != nil {
			t.Fatal(err)
		}
		n++
		s, err := Open(store, attackCrashOptions())
		if err != nil {
			t.Fatalf("child: open before session %d: %v", n, err)
		}
		st, err := registerModel(s, attackCrashWorkload.u)
		if err != nil {
			t.Fatal(err)
		}
		if err := attackCrashWorkload.session(attackSeed, n, attackCrashOps, newModel(), st); err != nil {
			t.Fatalf("child: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("child: close session %d: %v", n, err)
		}
		if err := writeProgress(root, n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttackCrashKill kills the child with SIGKILL at random moments and checks that the store
// reopens to the state of the last completed Close each time.
func TestAttackCrashKill(t *testing.T) {
	if os.Getenv(attackChildEnv) != "" {
		t.Skip("parent mode")
	}
	kills := 8
	if testing.Short() || raceEnabled {
		kills = 3
	}
	if v, err := strconv.Atoi(os.Getenv("STRATA_ATTACK_KILLS")); err == nil {
		kills = v
	}
	root := t.TempDir()
	store := filepath.Join(root, "store")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	model, modelN := newModel(), -1 // the model of sessions 0..modelN
	advance := func(to int) {
		for modelN < to {
			modelN++
			attackCrashWorkload.session(attackSeed, modelN, attackCrashOps, model, nil)
		}
	}
	for kill := range kills {
		cmd := exec.Command(exe, "-test.run=^TestAttackCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), attackChildEnv+"="+root)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			if errors.Is(err, syscall.ENOEXEC) {
				// qemu-user runs this binary, but the kernel cannot exec it without a binfmt
				// handler: no child process to kill on this machine.
				t.Skipf("cannot exec the test binary (%v): running under user-mode emulation", err)
			}
			t.Fatal(err)
		}
		delay := time.Duration(200+rng.IntN(4000)) * time.Millisecond
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Fatalf("kill %d: child exited by itself (%v):\n%s", kill, err, out.String())
		case <-time.After(delay):
		}
		if kill == kills-1 && modelN < 1 {
			// No kill has yet fallen after a completed Close (slow machines, -race): let the
			// last child finish at least one more session first, so the test always checks a
			// reopen onto a persisted session, whatever the timing.
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
				if n, err := readProgress(root); err == nil && n >= 1 && n > modelN {
					break
				}
				select {
				case err := <-exited:
					t.Fatalf("kill %d: child exited by itself (%v):\n%s", kill, err, out.String())
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		n, err := readProgress(root)
		if err != nil {
			t.Fatal(err)
		}
		if n < modelN {
			t.Fatalf("kill %d: progress went back from %d to %d", kill, modelN, n)
		}
		advance(n)
		s, err := Open(store, attackCrashOptions())
		if err != nil {
			t.Fatalf("kill %d after %v (progress %d): reopen: %v", kill, delay, n, err)
		}
		st, err := registerModel(s, attackCrashWorkload.u)
		if err != nil {
			t.Fatal(err)
		}
		err = st.checkAll(model)
		if errors.Is(err, errMismatch) {
			// Killed between Close and the progress file? Then the store is at session n+1.
			next := model.clone()
			attackCrashWorkload.session(attackSeed, n+1, attackCrashOps, next, nil)
			if err2 := st.checkAll(next); err2 == nil {
				t.Logf("kill %d: the store is at session %d, one past the progress file (killed after Close)", kill, n+1)
				model, modelN, err = next, n+1, nil
				if err := writeProgress(root, n+1); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err != nil {
			s.Close()
			t.Fatalf("kill %d after %v (progress %d): %v", kill, delay, n, err)
		}
		stats := s.Stats()
		if err := s.Close(); err != nil {
			t.Fatalf("kill %d: close after check: %v", kill, err)
		}
		t.Logf("kill %d after %v: store at session %d matches (LSM files %d, %d bytes)", kill, delay, modelN,
			stats.LSM.Files, stats.LSM.Bytes)
	}
	if modelN < 1 {
		t.Errorf("only %d sessions completed across %d kills: the kills never fell after a Close", modelN+1, kills)
	}
}
