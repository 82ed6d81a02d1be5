package vfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLock: a held lock refuses a second Lock of the same file (EWOULDBLOCK, as a PathError
// naming it) until it is closed; the lock file is created if missing and never truncated;
// other files lock independently; a second Close is fs.ErrClosed; a missing parent is ENOENT
// and a directory EISDIR.
func TestLock(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			lockName := filepath.Join(dir, "LOCK")
			writeFile(t, fsys, lockName, "keep", true)
			l1, err := fsys.Lock(lockName)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				_, err = fsys.Lock(lockName)
				var pe *fs.PathError
				if !errors.Is(err, syscall.EWOULDBLOCK) || !errors.As(err, &pe) || pe.Path != lockName {
					t.Fatalf("second Lock: %v, want EWOULDBLOCK naming %s", err, lockName)
				}
			}
			other, err := fsys.Lock(filepath.Join(dir, "OTHER"))
			if err != nil {
				t.Fatalf("another file: %v", err)
			}
			if _, err := fsys.Stat(filepath.Join(dir, "OTHER")); err != nil {
				t.Fatalf("lock file not created: %v", err)
			}
			if err := l1.Close(); err != nil {
				t.Fatal(err)
			}
			if err := l1.Close(); !errors.Is(err, fs.ErrClosed) {
				t.Fatalf("second Close: %v", err)
			}
			l2, err := fsys.Lock(lockName)
			if err != nil {
				t.Fatalf("Lock after Close: %v", err)
			}
			if got := readAll(t, fsys, lockName); got != "keep" {
				t.Fatalf("lock file contents %q, want them untouched", got)
			}
			l2.Close()
			other.Close()
			if _, err := fsys.Lock(filepath.Join(dir, "missing", "LOCK")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("missing parent: %v", err)
			}
			if _, err := fsys.Lock(dir); !errors.Is(err, syscall.EISDIR) {
				t.Fatalf("directory: %v", err)
			}
		})
	}
}

func readAll(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && len(b) > 0 {
		t.Fatal(err)
	}
	return string(b)
}

// TestMemLockCrashClone: locks are process state: a crash clone holds none, and the original
// keeps its own.
func TestMemLockCrashClone(t *testing.T) {
	m := NewMem()
	l, err := m.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := m.CrashClone()
	l2, err := c.Lock("/LOCK")
	if err != nil {
		t.Fatalf("crash clone: %v", err)
	}
	l2.Close()
	if _, err := m.Lock("/LOCK"); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("original after clone: %v", err)
	}
}

// TestFaultLock: FaultFS counts Lock as OpLock (outside WriteOps), injects into it, refuses it
// after a crash, and always releases the inner lock on Close.
func TestFaultLock(t *testing.T) {
	m := NewMem()
	f := NewFaultFS(m, Fault{Ops: Ops(OpLock)})
	if _, err := f.Lock("/LOCK"); !errors.Is(err, ErrInjected) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected: %v", err)
	}
	l, err := f.Lock("/LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if f.Count(Ops(OpLock)) != 2 || f.Count(WriteOps) != 0 {
		t.Fatalf("counts: lock %d, write ops %d", f.Count(Ops(OpLock)), f.Count(WriteOps))
	}
	f.Crash()
	if _, err := f.Lock("/OTHER"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("after crash: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close after crash: %v", err)
	}
	l2, err := m.Lock("/LOCK")
	if err != nil {
		t.Fatalf("inner lock not released: %v", err)
	}
	l2.Close()
}

// TestLockAcrossProcesses: Default's lock excludes another process (a child running this test
// binary) while held, and the child gets it once the parent releases it.
func TestLockAcrossProcesses(t *testing.T) {
	if p := os.Getenv("VFS_LOCK_CHILD"); p != "" {
		l, err := Default().Lock(p)
		switch {
		case errors.Is(err, syscall.EWOULDBLOCK):
			os.Exit(3)
		case err != nil:
			t.Fatal(err)
		}
		l.Close()
		return
	}
	name := filepath.Join(t.TempDir(), "LOCK")
	child := func() int {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "VFS_LOCK_CHILD="+name)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() != 3 {
				t.Logf("child output: %s", out)
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	l, err := Default().Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if code := child(); code != 3 {
		t.Fatalf("child locked a file this process holds (exit %d)", code)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if code := child(); code != 0 {
		t.Fatalf("child could not lock a released file (exit %d)", code)
	}
}
