package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// faultWorkload runs ten operations through f, each independent of the others' success, and
// returns one character per operation: 'x' if it failed, '.' if not.
//
//	1 Create /db/wal/2.log    2 Write  wal/1.log    3 Write wal/1.log   4 Sync wal/1.log
//	5 Create /db/000002.sst   6 Write  000001.sst   7 Sync  000001.sst  8 MkdirAll /db/chk
//	9 Write  /db/MANIFEST.tmp 10 Rename MANIFEST.tmp → MANIFEST
func faultWorkload(t *testing.T, f *FaultFS) string {
	t.Helper()
	// Handles opened on the inner FS, so that opening them does not count.
	wrap := func(name string) File {
		file, err := f.Inner().Create(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { file.Close() })
		return &faultFile{fs: f, f: file, name: name}
	}
	wal, sst, man := wrap("/db/wal/1.log"), wrap("/db/000001.sst"), wrap("/db/MANIFEST.tmp")
	create := func(name string) error {
		file, err := f.Create(name)
		if err == nil {
			file.Close()
		}
		return err
	}
	steps := []func() error{
		func() error { return create("/db/wal/2.log") },
		func() error { return writeErr(wal, "a") },
		func() error { return writeErr(wal, "b") },
		wal.Sync,
		func() error { return create("/db/000002.sst") },
		func() error { return writeErr(sst, "t") },
		sst.Sync,
		func() error { return f.MkdirAll("/db/chk", 0o755) },
		func() error { return writeErr(man, "m") },
		func() error { return f.Rename("/db/MANIFEST.tmp", "/db/MANIFEST") },
	}
	var b strings.Builder
	for _, step := range steps {
		err := step()
		switch {
		case err == nil:
			b.WriteByte('.')
		case errors.Is(err, ErrInjected):
			b.WriteByte('x')
		default:
			t.Fatalf("step %d: a real error: %v", b.Len()+1, err)
		}
	}
	return b.String()
}

func writeErr(f File, s string) error { _, err := f.Write([]byte(s)); return err }

func TestFaultMatching(t *testing.T) {
	cases := []struct {
		name  string
		fault Fault
		want  string
	}{
		{"kind: sync", Fault{Ops: Ops(OpSync), Sticky: true}, "...x..x..."},
		{"kind: create and write", Fault{Ops: Ops(OpCreate, OpWrite), Sticky: true}, "xxx.xx..x."},
		{"kind: WriteOps", Fault{Ops: WriteOps, Sticky: true}, "xxxxxxxxxx"},
		{"kind: ReadOps", Fault{Ops: ReadOps, Sticky: true}, ".........."},
		{"kind: zero means all", Fault{Sticky: true}, "xxxxxxxxxx"},
		{"path: glob on the base name", Fault{Path: PathGlob("*.sst"), Sticky: true}, "....xxx..."},
		{"path: glob on the whole path", Fault{Path: PathGlob("/db/wal/*"), Sticky: true}, "xxxx......"},
		{"path: prefix", Fault{Path: PathPrefix("/db/wal/"), Sticky: true}, "xxxx......"},
		{"path: prefix with slash is a directory", Fault{Path: PathPrefix("/db/wa/"), Sticky: true}, ".........."},
		{"path: predicate", Fault{Path: func(p string) bool { return strings.HasPrefix(filepath.Base(p), "MANIFEST") }, Sticky: true}, "........xx"},
		{"path: rename matches the new name", Fault{Ops: Ops(OpRename), Path: PathGlob("MANIFEST")}, ".........x"},
		{"path: rename matches the old name", Fault{Ops: Ops(OpRename), Path: PathGlob("MANIFEST.tmp")}, ".........x"},
		{"count: next matching op", Fault{Ops: Ops(OpWrite)}, ".x........"},
		{"count: the 2nd matching op only", Fault{Ops: Ops(OpWrite), Nth: 2}, "..x......."},
		{"count: the 2nd and every later", Fault{Ops: Ops(OpWrite), Nth: 2, Sticky: true}, "..x..x..x."},
		{"count: only matching paths count", Fault{Ops: Ops(OpWrite, OpSync), Path: PathGlob("*.sst"), Nth: 2}, "......x..."},
		{"count: beyond the workload", Fault{Ops: Ops(OpWrite), Nth: 5}, ".........."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			if err := m.MkdirAll("/db/wal", 0o755); err != nil {
				t.Fatal(err)
			}
			f := NewFaultFS(m, tc.fault)
			if got := faultWorkload(t, f); got != tc.want {
				t.Fatalf("failures %s, want %s", got, tc.want)
			}
			if want := int64(strings.Count(tc.want, "x")); f.Injected() != want {
				t.Fatalf("Injected() = %d, want %d", f.Injected(), want)
			}
			if got := f.Count(AllOps &^ Ops(OpClose)); got != 10 {
				t.Fatalf("Count = %d, want 10", got)
			}
		})
	}
}

// TestFaultErrorIdentity: an injected error is a *fs.PathError (or *os.LinkError) naming the
// operation and path, and errors.Is finds both ErrInjected and the cause (invariant 8).
func TestFaultErrorIdentity(t *testing.T) {
	for _, cause := range []error{syscall.ENOSPC, syscall.EIO, io.ErrShortWrite, fs.ErrPermission} {
		t.Run(fmt.Sprint(cause), func(t *testing.T) {
			f := NewFaultFS(NewMem(), Fault{Ops: Ops(OpWrite, OpRename), Err: cause, Sticky: true})
			file, err := f.Create("/f")
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			_, err = file.Write([]byte("x"))
			if !errors.Is(err, cause) || !errors.Is(err, ErrInjected) {
				t.Fatalf("Write: %v; want errors.Is %v and ErrInjected", err, cause)
			}
			if errors.Is(err, ErrCrashed) {
				t.Fatalf("Write: %v is ErrCrashed", err)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Op != "write" || pe.Path != "/f" {
				t.Fatalf("Write: %#v, want *fs.PathError{Op: write, Path: /f}", err)
			}
			var ie *InjectedError
			if !errors.As(err, &ie) || ie.Op != OpWrite || ie.Err != cause {
				t.Fatalf("Write: %#v, want *InjectedError{OpWrite, %v}", err, cause)
			}
			if want := "write /f: " + cause.Error() + " (injected)"; err.Error() != want {
				t.Fatalf("Error() = %q, want %q", err.Error(), want)
			}
			err = f.Rename("/f", "/g")
			var le *os.LinkError
			if !errors.Is(err, cause) || !errors.As(err, &le) || le.Old != "/f" || le.New != "/g" {
				t.Fatalf("Rename: %#v", err)
			}
		})
	}
	// A default fault is EIO, and real errors pass through untouched.
	f := NewFaultFS(NewMem(), Fault{Ops: Ops(OpStat)})
	if _, err := f.Stat("/"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("default cause: %v, want EIO", err)
	}
	if _, err := f.Stat("/missing"); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInjected) {
		t.Fatalf("real error: %v", err)
	}
}

// TestFaultOverOS: faults work over the operating system too, ENOSPC included.
func TestFaultOverOS(t *testing.T) {
	dir := t.TempDir()
	f := NewFaultFS(Default(), Fault{Ops: Ops(OpWrite), Path: PathGlob("*.log"), Nth: 2, Err: syscall.ENOSPC, ShortWrite: true})
	p := filepath.Join(dir, "1.log")
	file, err := f.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write([]byte("first|")); err != nil {
		t.Fatal(err)
	}
	n, err := file.Write([]byte("12345678"))
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write = %d, %v; want 4, ENOSPC", n, err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "first|1234" {
		t.Fatalf("on disk %q, %v", b, err)
	}
}

// TestShortWrite: a short write puts exactly len(p)/2 bytes into the inner file and reports
// that count with the error, as io.Writer requires.
func TestShortWrite(t *testing.T) {
	for _, tc := range []struct {
		cause error
		p     string
		want  string
	}{
		{syscall.ENOSPC, "abcdefgh", "abcd"},
		{io.ErrShortWrite, "abcdefg", "abc"},
		{syscall.ENOSPC, "a", ""},
	} {
		t.Run(fmt.Sprint(tc.cause, "/", len(tc.p)), func(t *testing.T) {
			m := NewMem()
			f := NewFaultFS(m, Fault{Ops: Ops(OpWrite), Err: tc.cause, ShortWrite: true})
			file, err := f.Create("/f")
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			n, err := file.Write([]byte(tc.p))
			if n != len(tc.want) || !errors.Is(err, tc.cause) {
				t.Fatalf("Write = %d, %v; want %d, %v", n, err, len(tc.want), tc.cause)
			}
			if got := readFile(t, m, "/f"); got != tc.want {
				t.Fatalf("inner file %q, want %q", got, tc.want)
			}
			// Not sticky: the next write goes through whole.
			if n, err := file.Write([]byte("Z")); n != 1 || err != nil {
				t.Fatalf("next Write = %d, %v", n, err)
			}
		})
	}
	// ShortWrite does not apply to other operations: they fail without effect.
	m := NewMem()
	f := NewFaultFS(m, Fault{Ops: Ops(OpCreate), ShortWrite: true})
	if _, err := f.Create("/f"); !errors.Is(err, ErrInjected) {
		t.Fatal(err)
	}
	if _, err := m.Stat("/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Create reached the inner FS: %v", err)
	}
}

// TestFailedSyncIsNotDurable: an injected Sync failure leaves nothing durable (invariant 9).
func TestFailedSyncIsNotDurable(t *testing.T) {
	m := NewMem()
	f := NewFaultFS(m, Fault{Ops: Ops(OpSync), Path: PathGlob("*.log")})
	file, err := f.Create("/1.log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	syncDir(t, f, "/") // a directory sync does not match *.log
	appendSync(t, file, "abc", false)
	if err := file.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync = %v, want injected EIO", err)
	}
	if got := tree(t, m.CrashClone()); got["/1.log"] != "" {
		t.Fatalf("after a failed Sync the clone holds %q", got["/1.log"])
	}
}

// TestInjectedCloseStillCloses: Close closes the inner file even when it reports an error.
func TestInjectedCloseStillCloses(t *testing.T) {
	f := NewFaultFS(Default(), Fault{Ops: Ops(OpClose)})
	file, err := f.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Close = %v, want injected", err)
	}
	f.ClearFaults()
	if err := file.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close = %v, want fs.ErrClosed from the inner file", err)
	}
}

// TestFirstInjectedFaultWins: when two faults fire together the earlier one's cause is reported,
// and both count the operation.
func TestFirstInjectedFaultWins(t *testing.T) {
	f := NewFaultFS(NewMem(),
		Fault{Ops: Ops(OpMkdirAll), Nth: 2, Err: syscall.ENOSPC},
		Fault{Ops: Ops(OpMkdirAll), Sticky: true, Err: syscall.EIO})
	var causes []error
	for range 3 {
		err := f.MkdirAll("/d", 0o755)
		var ie *InjectedError
		if !errors.As(err, &ie) {
			t.Fatalf("MkdirAll = %v", err)
		}
		causes = append(causes, ie.Err)
	}
	want := []error{syscall.EIO, syscall.ENOSPC, syscall.EIO}
	for i := range want {
		if causes[i] != want[i] {
			t.Fatalf("causes %v, want %v", causes, want)
		}
	}
}

func TestCrashAt(t *testing.T) {
	m := NewMem()
	f := NewFaultFS(m)
	f.CrashAt(3)                // the 3rd write op from now
	file, err := f.Create("/f") // 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat("/f"); err != nil { // a read op: not counted
		t.Fatal(err)
	}
	if err := writeErr(file, "a"); err != nil { // 2
		t.Fatal(err)
	}
	if f.Crashed() {
		t.Fatal("crashed early")
	}
	if err := file.Sync(); !errors.Is(err, ErrCrashed) || !errors.Is(err, ErrInjected) { // 3
		t.Fatalf("Sync = %v, want ErrCrashed", err)
	}
	if !f.Crashed() {
		t.Fatal("not crashed")
	}
	// Everything but Close now fails, reads included, and nothing reaches the inner FS.
	if _, err := f.Stat("/f"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Stat after crash = %v", err)
	}
	if err := writeErr(file, "b"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Write after crash = %v", err)
	}
	if _, err := f.Create("/g"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Create after crash = %v", err)
	}
	if err := file.Close(); err != nil {
		t.Fatalf("Close after crash = %v", err)
	}
	if got := readFile(t, m, "/f"); got != "a" {
		t.Fatalf("inner file %q: a write after the crash reached it", got)
	}
	if err, want := fmt.Sprint(f.Rename("/f", "/g")), "rename /f /g: vfs: crashed (injected)"; err != want {
		t.Fatalf("Error() = %q, want %q", err, want)
	}
	if got := f.Count(WriteOps); got != 6 {
		t.Fatalf("Count(WriteOps) = %d, want 6", got)
	}
	if got := f.Injected(); got != 5 {
		t.Fatalf("Injected() = %d, want 5", got)
	}
	if got := tree(t, m.CrashClone()); len(got) != 0 {
		t.Fatalf("clone %q: nothing was synced", got)
	}

	// Crash now, and CrashAt(0) does not undo a crash.
	f = NewFaultFS(NewMem())
	f.Crash()
	f.CrashAt(0)
	if _, err := f.List("/"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("List after Crash = %v", err)
	}
}

// commitManifest installs version v of /db/MANIFEST: with the full protocol (write a temp file,
// sync it, rename it over, sync the directory), or — when buggy — without the directory sync.
// It returns the first error.
func commitManifest(fsys FS, v int, buggy bool) error {
	f, err := fsys.Create("/db/MANIFEST.tmp")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write([]byte(fmt.Sprintf("version %d", v))); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := fsys.Rename("/db/MANIFEST.tmp", "/db/MANIFEST"); err != nil {
		return err
	}
	if buggy {
		return nil
	}
	d, err := fsys.OpenDir("/db")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// crashEveryWrite runs the manifest workload, crashing at every write op in turn, and reports
// the crash points whose clone lost an acknowledged commit or held a torn manifest.
func crashEveryWrite(t *testing.T, buggy bool) (points int64, bad []string) {
	workload := func(fsys FS) (acked int) {
		if err := fsys.MkdirAll("/db", 0o755); err != nil {
			return 0
		}
		for _, d := range []string{"/", "/db"} {
			dir, err := fsys.OpenDir(d)
			if err != nil {
				return 0
			}
			err = dir.Sync()
			dir.Close()
			if err != nil {
				return 0
			}
		}
		for v := 1; v <= 3; v++ {
			if commitManifest(fsys, v, buggy) != nil {
				return acked
			}
			acked = v
		}
		return acked
	}
	dry := NewFaultFS(NewMem())
	if acked := workload(dry); acked != 3 {
		t.Fatalf("the workload fails without faults (acked %d)", acked)
	}
	points = dry.Count(WriteOps)
	for n := int64(1); n <= points; n++ {
		m := NewMem()
		f := NewFaultFS(m)
		f.CrashAt(n)
		acked := workload(f)
		if !f.Crashed() {
			t.Fatalf("crash point %d of %d not reached", n, points)
		}
		clone := m.CrashClone()
		got := 0
		if fi, err := clone.Stat("/db/MANIFEST"); err == nil && !fi.IsDir() {
			s := readFile(t, clone, "/db/MANIFEST")
			if _, err := fmt.Sscanf(s, "version %d", &got); err != nil {
				bad = append(bad, fmt.Sprintf("crash at %d: torn manifest %q", n, s))
				continue
			}
		}
		if got < acked {
			bad = append(bad, fmt.Sprintf("crash at %d: manifest version %d after commit %d was acknowledged", n, got, acked))
		}
	}
	return points, bad
}

// TestCrashAtEveryWrite is the harness the store's crash tests follow: the full metadata protocol
// survives a crash at every write; leaving out the directory sync does not, and the harness
// notices.
func TestCrashAtEveryWrite(t *testing.T) {
	points, bad := crashEveryWrite(t, false)
	if len(bad) > 0 || points < 10 {
		t.Fatalf("%d crash points; correct protocol lost data:\n%s", points, strings.Join(bad, "\n"))
	}
	t.Logf("correct protocol: %d crash points, all recovered", points)
	points, bad = crashEveryWrite(t, true)
	if len(bad) == 0 {
		t.Fatalf("%d crash points; the protocol without a directory sync lost nothing, so the harness cannot see a missing sync", points)
	}
	t.Logf("without directory sync: %d of %d crash points lose an acknowledged commit, e.g. %s", len(bad), points, bad[0])
}

// TestFaultFSConcurrent exercises FaultFS from several goroutines under -race.
func TestFaultFSConcurrent(t *testing.T) {
	f := NewFaultFS(NewMem(), Fault{Ops: Ops(OpWrite), Nth: 100, Sticky: true, Err: syscall.ENOSPC})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for g := range 8 {
		wg.Go(func() {
			file, err := f.Create(fmt.Sprintf("/%d", g))
			if err != nil {
				t.Error(err)
				return
			}
			defer file.Close()
			for range 50 {
				if _, err := file.Write([]byte("x")); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Error(err)
					}
					mu.Lock()
					failed++
					mu.Unlock()
				}
				file.Sync()
				f.Count(AllOps)
			}
		})
	}
	wg.Wait()
	if failed != 8*50-99 {
		t.Fatalf("%d writes failed, want %d", failed, 8*50-99)
	}
}

// TestFaultReadOps: every observing operation can be made to fail, and Remove and Link too.
func TestFaultReadOps(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "/f", "abc", false)
	f := NewFaultFS(m)
	file, err := f.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	f.Inject(Fault{Ops: ReadOps | Ops(OpRemove, OpLink), Sticky: true, Err: syscall.EIO})
	type namedOp struct {
		name string
		op   func() error
	}
	ops := []namedOp{ // in an order that keeps every one possible after ClearFaults
		{"open", func() error { _, err := f.Open("/f"); return err }},
		{"opendir", func() error { _, err := f.OpenDir("/"); return err }},
		{"list", func() error { _, err := f.List("/"); return err }},
		{"stat", func() error { _, err := f.Stat("/f"); return err }},
		{"read", func() error { _, err := file.Read(make([]byte, 1)); return err }},
		{"readat", func() error { _, err := file.ReadAt(make([]byte, 1), 0); return err }},
		{"fstat", func() error { _, err := file.Stat(); return err }},
		{"link", func() error { return f.Link("/f", "/g") }},
		{"remove", func() error { return f.Remove("/f") }},
	}
	for _, o := range ops {
		if err := o.op(); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrInjected) {
			t.Errorf("%s: %v, want injected EIO", o.name, err)
		}
	}
	if got := tree(t, m); len(got) != 1 || got["/f"] != "abc" {
		t.Fatalf("failed operations changed the inner FS: %q", got)
	}
	f.ClearFaults()
	for _, o := range ops {
		if err := o.op(); err != nil {
			t.Errorf("%s after ClearFaults: %v", o.name, err)
		}
	}
	if got := Op(200).String(); got != "Op(200)" {
		t.Fatalf("String = %q", got)
	}
}
