package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

func newMemStorage(t *testing.T) (*DirStorage, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	d, err := NewDirStorage(mem, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	return d, mem
}

func names(infos []ObjectInfo) []string {
	var r []string
	for _, o := range infos {
		r = append(r, o.Name)
	}
	return r
}

// TestDirStorageSemantics drives every Storage method of DirStorage, on MemFS and on the
// operating system's file system, and checks the documented results and errors.
func TestDirStorageSemantics(t *testing.T) {
	ctx := context.Background()
	for _, impl := range []string{"mem", "os"} {
		t.Run("fs="+impl, func(t *testing.T) {
			var d *DirStorage
			var fsys vfs.FS
			if impl == "mem" {
				d, _ = newMemStorage(t)
				fsys = d.fs
			} else {
				var err error
				fsys = vfs.Default()
				if d, err = NewDirStorage(fsys, t.TempDir()+"/ckpt"); err != nil {
					t.Fatal(err)
				}
			}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(d.Put(ctx, "o/a/x", []byte("hello")))
			must(d.PutReader(ctx, "o/a/y", strings.NewReader("world and more"), 5))
			must(d.Create(ctx, "o/chk-1/MANIFEST", []byte("m1")))
			if err := d.Create(ctx, "o/chk-1/MANIFEST", []byte("zombie")); !errors.Is(err, ErrExists) {
				t.Fatalf("second Create: %v, want ErrExists", err)
			}
			if err := d.PutReader(ctx, "o/a/short", strings.NewReader("abc"), 10); err == nil {
				t.Fatal("PutReader of a short reader succeeded")
			}
			must(d.Put(ctx, "p/z", nil))
			if b, err := d.Get(ctx, "o/a/y"); err != nil || string(b) != "world" {
				t.Fatalf("Get = %q, %v", b, err)
			}
			if b, err := d.Get(ctx, "o/chk-1/MANIFEST"); err != nil || string(b) != "m1" {
				t.Fatalf("Get manifest = %q, %v (the zombie's Create must not change it)", b, err)
			}
			if b, err := d.GetRange(ctx, "o/a/x", 1, 3); err != nil || string(b) != "ell" {
				t.Fatalf("GetRange = %q, %v", b, err)
			}
			if b, err := d.GetRange(ctx, "o/a/x", 5, 0); err != nil || len(b) != 0 {
				t.Fatalf("GetRange at the end = %q, %v", b, err)
			}
			for _, r := range [][2]int64{{-1, 1}, {0, -1}, {4, 2}, {6, 0}} {
				if _, err := d.GetRange(ctx, "o/a/x", r[0], r[1]); !errors.Is(err, ErrRange) {
					t.Errorf("GetRange(%d, %d) = %v, want ErrRange", r[0], r[1], err)
				}
			}
			if _, err := d.Get(ctx, "o/missing"); !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Get missing: %v", err)
			}
			if _, err := d.Get(ctx, "o/a/x/under-a-file"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get below a file: %v", err)
			}
			if _, err := d.Get(ctx, "o/a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of a directory: %v", err)
			}
			for _, bad := range []string{"../x", "/abs", "a//b", ".tmp.1"} {
				if err := d.Put(ctx, bad, nil); !errors.Is(err, ErrInvalidName) {
					t.Errorf("Put(%q) = %v, want ErrInvalidName", bad, err)
				}
				if _, err := d.Get(ctx, bad); !errors.Is(err, ErrInvalidName) {
					t.Errorf("Get(%q) = %v, want ErrInvalidName", bad, err)
				}
				if err := d.Delete(ctx, bad); !errors.Is(err, ErrInvalidName) {
					t.Errorf("Delete(%q) = %v, want ErrInvalidName", bad, err)
				}
			}
			for _, tc := range []struct {
				prefix string
				want   string
			}{
				{"", "o/a/x o/a/y o/chk-1/MANIFEST p/z"},
				{"o/", "o/a/x o/a/y o/chk-1/MANIFEST"},
				{"o/a", "o/a/x o/a/y"},
				{"o/chk-", "o/chk-1/MANIFEST"},
				{"o/a/y", "o/a/y"},
				{"q/", ""},
			} {
				l, err := d.List(ctx, tc.prefix)
				if err != nil || strings.Join(names(l), " ") != tc.want {
					t.Errorf("List(%q) = %v, %v; want %s", tc.prefix, names(l), err, tc.want)
				}
			}
			l, _ := d.List(ctx, "o/a/x")
			if len(l) != 1 || l[0].Size != 5 {
				t.Errorf("List size: %+v", l)
			}
			if impl == "os" && l[0].Created.IsZero() {
				t.Errorf("List on the OS gives no time: %+v", l)
			}
			if _, err := d.List(ctx, "/x"); !errors.Is(err, ErrInvalidName) {
				t.Errorf("List(/x) = %v", err)
			}
			must(d.Delete(ctx, "o/a/x"))
			must(d.Delete(ctx, "o/a/x")) // idempotent
			must(d.Delete(ctx, "o/never/was"))
			must(d.Delete(ctx, "o/a/y"))
			if _, err := fsys.Stat(d.Dir() + "/o/a"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("emptied directory o/a not removed: %v", err)
			}
			must(d.Put(ctx, "o/a/again", []byte("1"))) // the directory comes back
			if l, err := d.List(ctx, "o/"); err != nil || strings.Join(names(l), " ") != "o/a/again o/chk-1/MANIFEST" {
				t.Errorf("List after deletes = %v, %v", names(l), err)
			}
			// PutFile: linked on the same FS (the object shares the node), copied from another.
			must(fsys.MkdirAll(d.Dir()+"/../src", 0o755))
			src := d.Dir() + "/../src/000001.sst"
			f, err := fsys.Create(src)
			must(err)
			_, err = f.Write([]byte("table bytes"))
			must(err)
			must(f.Close())
			must(d.PutFile(ctx, "o/shared/t.sst", fsys, src))
			other := vfs.NewMem()
			f, err = other.Create("/x.sst")
			must(err)
			f.Write([]byte("copied bytes"))
			f.Close()
			must(PutFile(ctx, d, "o/shared/u.sst", other, "/x.sst"))
			if err := d.PutFile(ctx, "o/shared/v.sst", fsys, src+".missing"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("PutFile of a missing file: %v", err)
			}
			for name, want := range map[string]string{"o/shared/t.sst": "table bytes", "o/shared/u.sst": "copied bytes"} {
				if b, err := d.Get(ctx, name); err != nil || string(b) != want {
					t.Errorf("Get(%s) = %q, %v", name, b, err)
				}
			}
			if n, err := d.Cleanup(ctx, "", time.Now(), 0); err != nil || n != 0 {
				t.Errorf("Cleanup found %d temporaries after clean puts: %v", n, err)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := d.Put(cctx, "o/cancelled", []byte("x")); !errors.Is(err, context.Canceled) {
				t.Errorf("Put with a done context: %v", err)
			}
			if _, err := d.Get(ctx, "o/cancelled"); !errors.Is(err, ErrNotFound) {
				t.Errorf("a cancelled Put stored its object: %v", err)
			}
		})
	}
}

// TestDirStoragePutFileLinks: on one file system PutFile makes a hard link, not a copy — the
// object is the same node as the source (MemFS: a write through the source shows in the object).
func TestDirStoragePutFileLinks(t *testing.T) {
	ctx := context.Background()
	d, mem := newMemStorage(t)
	f, _ := mem.Create("/000001.sst")
	f.Write([]byte("abc"))
	if err := d.PutFile(ctx, "o/t.sst", mem, "/000001.sst"); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("def")) // never done for real: only to observe the sharing
	f.Close()
	if b, _ := d.Get(ctx, "o/t.sst"); string(b) != "abcdef" {
		t.Fatalf("PutFile copied instead of linking: %q", b)
	}
	// Through a FaultFS that refuses links with EXDEV, PutFile falls back to a copy.
	ffs := vfs.NewFaultFS(mem, vfs.Fault{Ops: vfs.Ops(vfs.OpLink), Err: syscall.EXDEV, Sticky: true})
	d2, err := NewDirStorage(ffs, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.PutFile(ctx, "o/t2.sst", ffs, "/000001.sst"); err != nil {
		t.Fatalf("PutFile with EXDEV: %v", err)
	}
	if b, _ := d2.Get(ctx, "o/t2.sst"); string(b) != "abcdef" {
		t.Fatalf("copy fallback: %q", b)
	}
	if ffs.Count(vfs.Ops(vfs.OpLink)) != 1 {
		t.Fatalf("the link was not tried: %d", ffs.Count(vfs.Ops(vfs.OpLink)))
	}
}

// TestCreateRace: concurrent Creates of one name — exactly one wins, every other one fails with
// ErrExists, and the object holds the winner's bytes (S3's If-None-Match: *).
func TestCreateRace(t *testing.T) {
	ctx := context.Background()
	for _, impl := range []string{"mem", "os"} {
		t.Run("fs="+impl, func(t *testing.T) {
			for round := range 20 {
				var d *DirStorage
				if impl == "mem" {
					d, _ = newMemStorage(t)
				} else {
					var err error
					if d, err = NewDirStorage(vfs.Default(), t.TempDir()); err != nil {
						t.Fatal(err)
					}
				}
				const writers = 4
				var wg sync.WaitGroup
				errs := make([]error, writers)
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[w] = d.Create(ctx, "o/chk-00000000000000000001/MANIFEST", bytes.Repeat([]byte{byte('a' + w)}, 1000))
					}()
				}
				wg.Wait()
				winner := -1
				for w, err := range errs {
					switch {
					case err == nil && winner >= 0:
						t.Fatalf("round %d: writers %d and %d both created the object", round, winner, w)
					case err == nil:
						winner = w
					case !errors.Is(err, ErrExists):
						t.Fatalf("round %d: writer %d: %v, want ErrExists", round, w, err)
					}
				}
				if winner < 0 {
					t.Fatalf("round %d: no writer won", round)
				}
				b, err := d.Get(ctx, "o/chk-00000000000000000001/MANIFEST")
				if err != nil || !bytes.Equal(b, bytes.Repeat([]byte{byte('a' + winner)}, 1000)) {
					t.Fatalf("round %d: object is not the winner's: %v", round, err)
				}
				if n, err := d.Cleanup(ctx, "", time.Now(), 0); n != 0 || err != nil {
					t.Fatalf("round %d: %d temporaries left: %v", round, n, err)
				}
			}
		})
	}
}
