package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// implementations returns each FS under test with a fresh, empty directory to work in.
func implementations(t *testing.T) map[string]func(t *testing.T) (FS, string) {
	return map[string]func(t *testing.T) (FS, string){
		"impl=os": func(t *testing.T) (FS, string) { return Default(), t.TempDir() },
		"impl=mem": func(t *testing.T) (FS, string) {
			m := NewMem()
			if err := m.MkdirAll("/tmp/test", 0o755); err != nil {
				t.Fatal(err)
			}
			return m, "/tmp/test"
		},
		"impl=fault-over-mem": func(t *testing.T) (FS, string) {
			m := NewMem()
			if err := m.MkdirAll("/tmp/test", 0o755); err != nil {
				t.Fatal(err)
			}
			return NewFaultFS(m), "/tmp/test"
		},
	}
}

func writeFile(t *testing.T, fsys FS, name, contents string, sync bool) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte(contents)); err != nil || n != len(contents) {
		t.Fatalf("Write(%s) = %d, %v", name, n, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func syncDir(t *testing.T, fsys FS, dir string) {
	t.Helper()
	d, err := fsys.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRoundTrip runs one scenario against the OS, MemFS and FaultFS without faults, so the
// in-memory model cannot drift from what the OS does.
func TestRoundTrip(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			sub := filepath.Join(dir, "a", "b")
			if err := fsys.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(sub, 0o755); err != nil {
				t.Fatalf("MkdirAll of an existing directory: %v", err)
			}
			p := filepath.Join(sub, "000001.log")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []string{"hello ", "strata ", "world"} {
				if _, err := f.Write([]byte(chunk)); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			// A handle from Create reads too.
			buf := make([]byte, 6)
			if n, err := f.ReadAt(buf, 6); err != nil || string(buf[:n]) != "strata" {
				t.Fatalf("ReadAt = %q, %v", buf[:n], err)
			}
			if n, err := f.ReadAt(buf, 15); n != 3 || err != io.EOF || string(buf[:n]) != "rld" {
				t.Fatalf("short ReadAt = %d %q, %v; want 3 \"rld\", io.EOF", n, buf[:n], err)
			}
			if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
				t.Fatalf("ReadAt past the end = %d, %v", n, err)
			}
			fi, err := f.Stat()
			if err != nil || fi.Size() != 18 || fi.Name() != "000001.log" || fi.IsDir() {
				t.Fatalf("File.Stat = %v, %v", fi, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, p); got != "hello strata world" {
				t.Fatalf("read back %q", got)
			}
			syncDir(t, fsys, sub)

			// Metadata protocol: new file, sync, rename over, sync dir.
			writeFile(t, fsys, filepath.Join(sub, "MANIFEST"), "v1", true)
			writeFile(t, fsys, filepath.Join(sub, "MANIFEST.tmp"), "v2", true)
			if err := fsys.Rename(filepath.Join(sub, "MANIFEST.tmp"), filepath.Join(sub, "MANIFEST")); err != nil {
				t.Fatal(err)
			}
			syncDir(t, fsys, sub)
			if got := readFile(t, fsys, filepath.Join(sub, "MANIFEST")); got != "v2" {
				t.Fatalf("after rename: %q", got)
			}
			if err := fsys.Link(p, filepath.Join(dir, "a", "linked.log")); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, filepath.Join(dir, "a", "linked.log")); got != "hello strata world" {
				t.Fatalf("through link: %q", got)
			}
			names, err := fsys.List(sub)
			if err != nil || !slices.Equal(names, []string{"000001.log", "MANIFEST"}) {
				t.Fatalf("List = %v, %v", names, err)
			}
			names, err = fsys.List(filepath.Join(dir, "a"))
			if err != nil || !slices.Equal(names, []string{"b", "linked.log"}) {
				t.Fatalf("List = %v, %v", names, err)
			}
			fi, err = fsys.Stat(sub)
			if err != nil || !fi.IsDir() || fi.Name() != "b" {
				t.Fatalf("Stat(dir) = %v, %v", fi, err)
			}
			// Create truncates.
			writeFile(t, fsys, p, "new", false)
			if got := readFile(t, fsys, p); got != "new" {
				t.Fatalf("after re-Create: %q", got)
			}
			for _, n := range []string{p, filepath.Join(sub, "MANIFEST"), filepath.Join(dir, "a", "linked.log"), sub} {
				if err := fsys.Remove(n); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fsys.Stat(sub); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Stat after Remove: %v", err)
			}
		})
	}
}

// TestReadSemantics pins io.Reader behaviour at the end of a file and on empty buffers.
func TestReadSemantics(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			p := filepath.Join(dir, "f")
			writeFile(t, fsys, p, "abcde", false)
			f, err := fsys.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 3)
			var got []byte
			var calls []int
			for {
				n, err := f.Read(buf)
				got = append(got, buf[:n]...)
				calls = append(calls, n)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if string(got) != "abcde" || !slices.Equal(calls, []int{3, 2, 0}) {
				t.Fatalf("reads %v gave %q", calls, got)
			}
			if n, err := f.Read(nil); n != 0 || err != nil && err != io.EOF {
				t.Fatalf("empty Read = %d, %v", n, err)
			}
			if n, err := f.ReadAt(nil, 2); n != 0 || err != nil {
				t.Fatalf("empty ReadAt = %d, %v", n, err)
			}
		})
	}
}

// TestErrorIdentity checks that MemFS and FaultFS report the errno the OS reports, in the same
// error type (invariant 7).
func TestErrorIdentity(t *testing.T) {
	type errCase struct {
		name string
		op   func(fsys FS, dir string) error
		want error
	}
	j := filepath.Join
	cases := []errCase{
		{"open missing", func(fsys FS, d string) error { _, err := fsys.Open(j(d, "nope")); return err }, syscall.ENOENT},
		{"create in missing dir", func(fsys FS, d string) error { _, err := fsys.Create(j(d, "nope", "f")); return err }, syscall.ENOENT},
		{"create over dir", func(fsys FS, d string) error { _, err := fsys.Create(j(d, "dir")); return err }, syscall.EISDIR},
		{"create below file", func(fsys FS, d string) error { _, err := fsys.Create(j(d, "file", "f")); return err }, syscall.ENOTDIR},
		{"opendir missing", func(fsys FS, d string) error { _, err := fsys.OpenDir(j(d, "nope")); return err }, syscall.ENOENT},
		{"opendir file", func(fsys FS, d string) error { _, err := fsys.OpenDir(j(d, "file")); return err }, syscall.ENOTDIR},
		{"stat missing", func(fsys FS, d string) error { _, err := fsys.Stat(j(d, "nope")); return err }, syscall.ENOENT},
		{"stat below file", func(fsys FS, d string) error { _, err := fsys.Stat(j(d, "file", "x")); return err }, syscall.ENOTDIR},
		{"list missing", func(fsys FS, d string) error { _, err := fsys.List(j(d, "nope")); return err }, syscall.ENOENT},
		{"list file", func(fsys FS, d string) error { _, err := fsys.List(j(d, "file")); return err }, syscall.ENOTDIR},
		{"remove missing", func(fsys FS, d string) error { return fsys.Remove(j(d, "nope")) }, syscall.ENOENT},
		{"remove non-empty dir", func(fsys FS, d string) error { return fsys.Remove(j(d, "dir")) }, syscall.ENOTEMPTY},
		{"rename missing", func(fsys FS, d string) error { return fsys.Rename(j(d, "nope"), j(d, "x")) }, syscall.ENOENT},
		{"rename onto dir", func(fsys FS, d string) error { return fsys.Rename(j(d, "file"), j(d, "dir")) }, syscall.EEXIST},
		{"rename into missing dir", func(fsys FS, d string) error { return fsys.Rename(j(d, "file"), j(d, "nope", "x")) }, syscall.ENOENT},
		{"rename dir below itself", func(fsys FS, d string) error { return fsys.Rename(j(d, "dir"), j(d, "dir", "sub", "x")) }, syscall.EINVAL},
		{"rename dir onto file", func(fsys FS, d string) error { return fsys.Rename(j(d, "dir"), j(d, "file")) }, syscall.ENOTDIR},
		{"rename dir onto empty dir", func(fsys FS, d string) error { return fsys.Rename(j(d, "dir"), j(d, "dir", "sub")) }, syscall.EEXIST},
		{"link missing", func(fsys FS, d string) error { return fsys.Link(j(d, "nope"), j(d, "x")) }, syscall.ENOENT},
		{"link onto existing", func(fsys FS, d string) error { return fsys.Link(j(d, "file"), j(d, "file2")) }, syscall.EEXIST},
		{"link dir", func(fsys FS, d string) error { return fsys.Link(j(d, "dir"), j(d, "x")) }, syscall.EPERM},
		{"mkdirall through file", func(fsys FS, d string) error { return fsys.MkdirAll(j(d, "file", "x"), 0o755) }, syscall.ENOTDIR},
		{"mkdirall on file", func(fsys FS, d string) error { return fsys.MkdirAll(j(d, "file"), 0o755) }, syscall.ENOTDIR},
		{"write read-only", func(fsys FS, d string) error {
			f, err := fsys.Open(j(d, "file"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte("x"))
			return err
		}, syscall.EBADF},
		{"read dir", func(fsys FS, d string) error {
			f, err := fsys.OpenDir(j(d, "dir"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Read(make([]byte, 8))
			return err
		}, syscall.EISDIR},
		{"write after close", func(fsys FS, d string) error {
			f, err := fsys.Create(j(d, "closed"))
			if err != nil {
				return err
			}
			f.Close()
			_, err = f.Write([]byte("x"))
			return err
		}, fs.ErrClosed},
		{"close twice", func(fsys FS, d string) error {
			f, err := fsys.Create(j(d, "closed"))
			if err != nil {
				return err
			}
			f.Close()
			return f.Close()
		}, fs.ErrClosed},
	}
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					fsys, dir := mk(t)
					if err := fsys.MkdirAll(j(dir, "dir", "sub"), 0o755); err != nil {
						t.Fatal(err)
					}
					writeFile(t, fsys, j(dir, "file"), "x", false)
					writeFile(t, fsys, j(dir, "file2"), "y", false)
					err := tc.op(fsys, dir)
					if !errors.Is(err, tc.want) {
						t.Fatalf("err = %v; want errors.Is %v", err, tc.want)
					}
					var pe *fs.PathError
					var le interface{ Unwrap() error }
					if !errors.As(err, &pe) && !errors.As(err, &le) {
						t.Fatalf("err = %T, want *fs.PathError or *os.LinkError", err)
					}
				})
			}
		})
	}
}

// TestRenameDirectory: a directory moves with its entries; renaming onto itself is a no-op.
func TestRenameDirectory(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			j := filepath.Join
			if err := fsys.MkdirAll(j(dir, "chk-1", "shared"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fsys, j(dir, "chk-1", "shared", "1.sst"), "t", false)
			if err := fsys.Rename(j(dir, "chk-1"), j(dir, "chk-2")); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, fsys, j(dir, "chk-2", "shared", "1.sst")); got != "t" {
				t.Fatalf("moved file holds %q", got)
			}
			p := j(dir, "chk-2", "shared", "1.sst")
			if err := fsys.Rename(p, p); err != nil {
				t.Fatalf("rename onto itself: %v", err)
			}
			if names, err := fsys.List(dir); err != nil || !slices.Equal(names, []string{"chk-2"}) {
				t.Fatalf("List = %v, %v", names, err)
			}
		})
	}
}

// TestRemoveOpenFile: handles outlive the name, as after unlink(2).
func TestRemoveOpenFile(t *testing.T) {
	for name, mk := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			p := filepath.Join(dir, "f")
			f, err := fsys.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := fsys.Remove(p); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("still here")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 10)
			if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, []byte("still here")) {
				t.Fatalf("ReadAt = %q, %v", buf, err)
			}
			if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Stat = %v", err)
			}
		})
	}
}
