package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

func newMemStorage(t *testing.T) (*DirStorage, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	d, err := newDirStorage(mem, "/ckpt")
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

// TestDirStorageSemantics checks what DirStorage adds to the Storage contract (which
// TestDirStorageConformance checks through package storagetest), on MemFS and on the operating
// system's file system: its errors also match fs.ErrNotExist, Delete removes the directories it
// empties, PutFile links or copies, and clean puts leave no temporaries.
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
				if d, err = newDirStorage(fsys, t.TempDir()+"/ckpt"); err != nil {
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
			must(d.Create(ctx, "o/chk-1/MANIFEST", []byte("m1")))
			if _, err := d.Get(ctx, "o/missing"); !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("Get missing: %v", err)
			}
			l, _ := d.List(ctx, "o/a/x")
			if len(l) != 1 || l[0].Size != 5 {
				t.Errorf("List size: %+v", l)
			}
			if impl == "os" && l[0].Created.IsZero() {
				t.Errorf("List on the OS gives no time: %+v", l)
			}
			must(d.Delete(ctx, "o/a/x"))
			if _, err := fsys.Stat(d.Dir() + "/o/a"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("emptied directory o/a not removed: %v", err)
			}
			// PutFile: linked on the same FS (the object shares the node), copied from another.
			must(fsys.MkdirAll(d.Dir()+"/../src", 0o755))
			src := d.Dir() + "/../src/000001.sst"
			f, err := fsys.Create(src)
			must(err)
			_, err = f.Write([]byte("table bytes"))
			must(err)
			must(f.Close())
			must(d.putFile(ctx, "o/shared/t.sst", fsys, src))
			other := vfs.NewMem()
			f, err = other.Create("/x.sst")
			must(err)
			f.Write([]byte("copied bytes"))
			f.Close()
			must(putFile(ctx, d, "o/shared/u.sst", other, "/x.sst"))
			if err := d.putFile(ctx, "o/shared/v.sst", fsys, src+".missing"); !errors.Is(err, fs.ErrNotExist) {
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
	if err := d.putFile(ctx, "o/t.sst", mem, "/000001.sst"); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("def")) // never done for real: only to observe the sharing
	f.Close()
	if b, _ := d.Get(ctx, "o/t.sst"); string(b) != "abcdef" {
		t.Fatalf("PutFile copied instead of linking: %q", b)
	}
	// Through a FaultFS that refuses links with EXDEV, PutFile falls back to a copy.
	ffs := vfs.NewFaultFS(mem, vfs.Fault{Ops: vfs.Ops(vfs.OpLink), Err: syscall.EXDEV, Sticky: true})
	d2, err := newDirStorage(ffs, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.putFile(ctx, "o/t2.sst", ffs, "/000001.sst"); err != nil {
		t.Fatalf("PutFile with EXDEV: %v", err)
	}
	if b, _ := d2.Get(ctx, "o/t2.sst"); string(b) != "abcdef" {
		t.Fatalf("copy fallback: %q", b)
	}
	if ffs.Count(vfs.Ops(vfs.OpLink)) != 1 {
		t.Fatalf("the link was not tried: %d", ffs.Count(vfs.Ops(vfs.OpLink)))
	}
}

// TestCreateRaceTemporaries: of concurrent Creates of one name, the losers remove their
// temporaries (the race itself is storagetest's CreateRace).
func TestCreateRaceTemporaries(t *testing.T) {
	ctx := context.Background()
	for _, impl := range []string{"mem", "os"} {
		t.Run("fs="+impl, func(t *testing.T) {
			for round := range 5 {
				var d *DirStorage
				if impl == "mem" {
					d, _ = newMemStorage(t)
				} else {
					var err error
					if d, err = newDirStorage(vfs.Default(), t.TempDir()); err != nil {
						t.Fatal(err)
					}
				}
				var wg sync.WaitGroup
				wins := make(chan int, 4)
				for w := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if d.Create(ctx, "o/chk-00000000000000000001/MANIFEST", bytes.Repeat([]byte{byte('a' + w)}, 1000)) == nil {
							wins <- w
						}
					}()
				}
				wg.Wait()
				if len(wins) != 1 {
					t.Fatalf("round %d: %d writers won", round, len(wins))
				}
				if n, err := d.Cleanup(ctx, "", time.Now(), 0); n != 0 || err != nil {
					t.Fatalf("round %d: %d temporaries left: %v", round, n, err)
				}
			}
		})
	}
}

// mkdirRaceFS fails the first MkdirAll with ENOENT, as os.MkdirAll does when a concurrent
// Delete removes a parent it has just created before it creates the child.
type mkdirRaceFS struct {
	vfs.FS
	failed bool
}

func (f *mkdirRaceFS) MkdirAll(dir string, perm fs.FileMode) error {
	if !f.failed {
		f.failed = true
		return &fs.PathError{Op: "mkdir", Path: dir, Err: fs.ErrNotExist}
	}
	return f.FS.MkdirAll(dir, perm)
}

// TestDirPutMkdirRace: a Put whose MkdirAll loses a parent to a concurrent Delete (the GC of
// emptied directories) tries again instead of failing.
func TestDirPutMkdirRace(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/ck", 0o755); err != nil {
		t.Fatal(err)
	}
	fsys := &mkdirRaceFS{FS: mem, failed: true} // armed after newDirStorage's own MkdirAll
	d, err := newDirStorage(fsys, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	fsys.failed = false
	if err := d.Put(context.Background(), "o/chk-1/x", []byte("x")); err != nil {
		t.Fatalf("Put after a MkdirAll that lost its parent: %v", err)
	}
	if !fsys.failed {
		t.Fatal("the race was not injected")
	}
}
