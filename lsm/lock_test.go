package lsm

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// TestOpenLocked: while a DB is open, a second Open of its directory (same
// FS: a MemFS, or the OS where the lock is flock(2)) fails with ErrLocked and
// touches nothing; after Close the directory opens again; a failed Open
// (corruption) releases the lock too.
func TestOpenLocked(t *testing.T) {
	for _, impl := range []string{"mem", "os"} {
		t.Run("impl="+impl, func(t *testing.T) {
			var fs vfs.FS = vfs.NewMem()
			dir := "/db"
			if impl == "os" {
				fs, dir = vfs.Default(), filepath.Join(t.TempDir(), "db")
			}
			opts := smallOptions(fs)
			opts.Dir = dir
			d, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			installBatch(t, d, newGen(rand.New(rand.NewPCG(1, 2)), crashKeys).batch(8), 100)
			if err := d.Persist(100, []byte("a")); err != nil {
				t.Fatal(err)
			}
			before := dirSnapshot(t, fs, dir)
			for range 2 {
				d2, err := Open(opts)
				if !errors.Is(err, ErrLocked) || !errors.Is(err, syscall.EWOULDBLOCK) {
					if d2 != nil {
						d2.Close()
					}
					t.Fatalf("second Open: %v, want ErrLocked", err)
				}
			}
			if after := dirSnapshot(t, fs, dir); !equalSnap(before, after) {
				t.Fatalf("a refused Open changed the directory: %v -> %v", keysOf(before), keysOf(after))
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d, err = Open(opts)
			if err != nil {
				t.Fatalf("Open after Close: %v", err)
			}
			if seq, meta, ok := d.PersistedMeta(); !ok || seq != 100 || string(meta) != "a" {
				t.Fatalf("PersistedMeta %d %q %v", seq, meta, ok)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			// A failed Open releases the lock.
			cur := filepath.Join(dir, currentName)
			b, _ := vfs.ReadFile(fs, cur)
			b[20] ^= 1
			writeFile(t, fs, cur, b)
			if _, err := Open(opts); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("damaged CURRENT: %v", err)
			}
			l, err := fs.Lock(filepath.Join(dir, lockName))
			if err != nil {
				t.Fatalf("lock left held by a failed Open: %v", err)
			}
			l.Close()
		})
	}
}

func equalSnap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestOpenLockedAcrossProcesses: a child process (this test binary) cannot
// Open a directory this process has open — ErrLocked — and can once it is
// closed.
func TestOpenLockedAcrossProcesses(t *testing.T) {
	if dir := os.Getenv("LSM_LOCK_CHILD"); dir != "" {
		opts := smallOptions(vfs.Default())
		opts.Dir = dir
		d, err := Open(opts)
		switch {
		case errors.Is(err, ErrLocked):
			os.Exit(3)
		case err != nil:
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := filepath.Join(t.TempDir(), "db")
	child := func() int {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LSM_LOCK_CHILD="+dir)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ee.ExitCode() != 3 {
				t.Logf("child: %s", out)
			}
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	opts := smallOptions(vfs.Default())
	opts.Dir = dir
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if code := child(); code != 3 {
		t.Fatalf("child opened a directory this process has open (exit %d)", code)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if code := child(); code != 0 {
		t.Fatalf("child could not open the closed directory (exit %d)", code)
	}
}

// TestParseFileName: only names the DB writes are its own: "%06d" numbers
// below maxFileNum; everything else is unknown and never deleted by Open.
func TestParseFileName(t *testing.T) {
	cases := []struct {
		name string
		kind fileKind
		num  uint64
	}{
		{"000012.sst", kindTable, 12},
		{"1234567.sst", kindTable, 1234567},
		{"MANIFEST-000007", kindManifest, 7},
		{"CURRENT", kindCurrent, 0},
		{"CURRENT.tmp", kindTemp, 0},
		{"LOCK", kindLock, 0},
		{"000000.sst", kindUnknown, 0},
		{"12.sst", kindUnknown, 0},
		{"0000012.sst", kindUnknown, 0},
		{"+00012.sst", kindUnknown, 0},
		{"18446744073709551615.sst", kindUnknown, 0},
		{"4611686018427387904.sst", kindUnknown, 0}, // maxFileNum
		{"99999999999999999999.sst", kindUnknown, 0},
		{"backup.sst", kindUnknown, 0},
		{"000001.sst.bak", kindUnknown, 0},
		{"MANIFEST-7", kindUnknown, 0},
		{"notes.txt", kindUnknown, 0},
	}
	for _, c := range cases {
		if k, n := parseFileName(c.name); k != c.kind || n != c.num {
			t.Errorf("parseFileName(%q) = %d, %d; want %d, %d", c.name, k, n, c.kind, c.num)
		}
	}
	// Open leaves names it could not have written alone.
	fs := vfs.NewMem()
	fs.MkdirAll("/db", 0o755)
	foreign := []string{"18446744073709551615.sst", "12.sst", "notes.txt", "MANIFEST-7"}
	for _, n := range foreign {
		writeFile(t, fs, "/db/"+n, []byte("x"))
	}
	d, err := Open(smallOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(smallOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	for _, n := range foreign {
		if !fileExists(fs, "/db/"+n) {
			t.Errorf("Open deleted %s", n)
		}
	}
}
