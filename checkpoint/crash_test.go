package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

// storageResult is what a storage workload acknowledged before it stopped.
type storageResult struct {
	want    map[string][]byte // the bytes each name was ever written with
	acked   map[string]bool   // names whose write returned nil and whose delete did not
	deleted map[string]bool   // names whose Delete was attempted
	err     error
}

const crashManifestName = "job/chk-00000000000000000042/MANIFEST"

// storageWorkload drives every writing method of DirStorage over fsys: Put, PutReader, PutFile
// (hard link and copy), Create (and a refused second Create), Delete.
func storageWorkload(fsys vfs.FS, other vfs.FS) storageResult {
	ctx := context.Background()
	res := storageResult{want: map[string][]byte{}, acked: map[string]bool{}, deleted: map[string]bool{}}
	d, err := newDirStorage(fsys, "/ckpt")
	if err != nil {
		res.err = err
		return res
	}
	manifest, _ := goldenManifest().Encode()
	big := bytes.Repeat([]byte("0123456789"), 300)
	steps := []struct {
		name string
		data []byte
		do   func() error
	}{
		{"job/shared/00000-00127/a.sst", []byte("a-bytes"), nil},
		{"job/shared/00000-00127/b.sst", big, nil},
		{"job/shared/00000-00063/linked.sst", []byte("source table"), nil},
		{"job/shared/00064-00127/copied.sst", []byte("other fs table"), nil},
		{crashManifestName, manifest, nil},
		{"", nil, nil}, // the zombie's Create
		{"-job/shared/00000-00127/a.sst", nil, nil},
		{"job/chk-00000000000000000001/private.bin", []byte("private"), nil},
		{"-job/chk-00000000000000000001/private.bin", nil, nil},
	}
	steps[0].do = func() error { return d.Put(ctx, steps[0].name, steps[0].data) }
	steps[1].do = func() error { return d.PutReader(ctx, steps[1].name, bytes.NewReader(big), int64(len(big))) }
	steps[2].do = func() error { return d.putFile(ctx, steps[2].name, fsys, "/src/000001.sst") }
	steps[3].do = func() error { return d.putFile(ctx, steps[3].name, other, "/000002.sst") }
	steps[4].do = func() error { return d.Create(ctx, steps[4].name, steps[4].data) }
	steps[5].do = func() error {
		if err := d.Create(ctx, crashManifestName, []byte("zombie")); !errors.Is(err, ErrExists) {
			if err == nil {
				return errors.New("the zombie's Create succeeded")
			}
			return err
		}
		return nil
	}
	steps[6].do = func() error { return d.Delete(ctx, steps[6].name[1:]) }
	steps[7].do = func() error { return d.Put(ctx, steps[7].name, steps[7].data) }
	steps[8].do = func() error { return d.Delete(ctx, steps[8].name[1:]) }
	for _, st := range steps {
		del := strings.HasPrefix(st.name, "-")
		if del {
			res.deleted[st.name[1:]] = true
		} else if st.name != "" {
			res.want[st.name] = st.data
		}
		if err := st.do(); err != nil {
			res.err = err
			return res
		}
		switch {
		case del:
			delete(res.acked, st.name[1:])
		case st.name != "":
			res.acked[st.name] = true
		}
	}
	return res
}

// stray lists the files under dir whose names begin with '.' (temporaries).
func stray(fsys vfs.FS, dir string) []string {
	var out []string
	ns, _ := fsys.List(dir)
	for _, n := range ns {
		p := dir + "/" + n
		if fi, err := fsys.Stat(p); err == nil && fi.IsDir() {
			out = append(out, stray(fsys, p)...)
		} else if strings.HasPrefix(n, ".") {
			out = append(out, p)
		}
	}
	return out
}

func newCrashFS(t *testing.T) (*vfs.MemFS, vfs.FS) {
	t.Helper()
	mem := vfs.NewMem()
	mem.MkdirAll("/src", 0o755)
	f, _ := mem.Create("/src/000001.sst")
	f.Write([]byte("source table"))
	f.Close() // not synced: PutFile must sync the source before linking
	other := vfs.NewMem()
	f, _ = other.Create("/000002.sst")
	f.Write([]byte("other fs table"))
	f.Close()
	vfs.SyncDir(mem, "/src")
	vfs.SyncDir(mem, "/")
	return mem, other
}

// TestCrashStorage crashes the storage workload at each of its write operations and opens a
// DirStorage over what the crash kept: every listed object is complete (its bytes are exactly
// the ones written), every acknowledged object is there, the committed manifest decodes, and
// Cleanup then leaves no temporary behind.
func TestCrashStorage(t *testing.T) {
	ctx := context.Background()
	mem, other := newCrashFS(t)
	ffs := vfs.NewFaultFS(mem)
	if res := storageWorkload(ffs, other); res.err != nil {
		t.Fatalf("workload without faults: %v", res.err)
	}
	total := ffs.Count(vfs.WriteOps)
	t.Logf("workload: %d write operations", total)
	for n := int64(1); n <= total+1; n++ {
		mem, other := newCrashFS(t)
		ffs := vfs.NewFaultFS(mem)
		ffs.CrashAt(n)
		res := storageWorkload(ffs, other)
		if n <= total && !ffs.Crashed() {
			t.Fatalf("crash at %d: the crash point was not reached", n)
		}
		if res.err != nil && !errors.Is(res.err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: workload stopped by %v, not the crash", n, res.err)
		}
		clone := mem.CrashClone()
		d, err := newDirStorage(clone, "/ckpt")
		if err != nil {
			t.Fatalf("crash at %d: reopen: %v", n, err)
		}
		l, err := d.List(ctx, "")
		if err != nil {
			t.Fatalf("crash at %d: List: %v", n, err)
		}
		for _, o := range l {
			want, ok := res.want[o.Name]
			if !ok {
				t.Fatalf("crash at %d: unexpected object %s", n, o.Name)
			}
			b, err := d.Get(ctx, o.Name)
			if err != nil || !bytes.Equal(b, want) || o.Size != int64(len(want)) {
				t.Fatalf("crash at %d: object %s torn: %d of %d bytes (%v)", n, o.Name, len(b), len(want), err)
			}
		}
		for name := range res.acked {
			if !slices.Contains(names(l), name) {
				t.Fatalf("crash at %d: acknowledged object %s lost (listed %v)", n, name, names(l))
			}
		}
		if slices.Contains(names(l), crashManifestName) {
			if _, err := ReadManifest(ctx, d, "job", 42); err != nil {
				t.Fatalf("crash at %d: committed manifest: %v", n, err)
			}
		}
		if _, err := d.Cleanup(ctx, "", time.Now(), 0); err != nil {
			t.Fatalf("crash at %d: Cleanup: %v", n, err)
		}
		if s := stray(clone, "/ckpt"); len(s) > 0 {
			t.Fatalf("crash at %d: temporaries left after Cleanup: %v", n, s)
		}
	}
}

// gcSetup writes five checkpoints (incremental, sharing objects), an aborted one and the
// orphans of a failed upload, all durable, and returns the file system.
func gcSetup(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	d, err := newDirStorage(mem, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	var prev []string
	for id := uint64(1); id <= 5; id++ {
		_, prev = ckpt(t, d, nil, "job", id, prev[len(prev)/2:], 3)
	}
	ckpt(t, d, nil, "job", 6, prev, 2) // aborted
	for range 3 {
		name := SharedName("job", KeyGroupRange{End: 127}, 7, "sst")
		d.Put(context.Background(), name, []byte("orphan"))
	}
	return mem
}

// TestCrashGC crashes GC at each of its write operations: whatever the crash kept, the retained
// manifest and everything it reaches are intact, every manifest left names only objects that
// are there, and a GC after the restart finishes the job.
func TestCrashGC(t *testing.T) {
	ctx := context.Background()
	base := gcSetup(t)
	opts := GCOptions{Owner: "job", LastCompleted: 5, Aborted: []uint64{6}, Grace: NoGrace}
	ffs := vfs.NewFaultFS(base.CrashClone())
	d, err := newDirStorage(ffs, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	ffs0 := ffs.Count(vfs.WriteOps)
	full, err := GC(ctx, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	total := ffs.Count(vfs.WriteOps) - ffs0
	want := present(t, d, "")
	t.Logf("GC: %d write operations, %d objects deleted", total, len(full.Deleted))
	if len(full.Deleted) < 10 {
		t.Fatalf("GC deleted only %v", full.Deleted)
	}
	for n := int64(1); n <= total+1; n++ {
		mem := base.CrashClone()
		d, err := newDirStorage(mem, "/ckpt")
		if err != nil {
			t.Fatal(err)
		}
		ffs := vfs.NewFaultFS(mem)
		d.fs = ffs
		ffs.CrashAt(n)
		_, err = GC(ctx, d, opts)
		if n <= total && !ffs.Crashed() {
			t.Fatalf("crash at %d: the crash point was not reached", n)
		}
		if err != nil && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: GC stopped by %v, not the crash", n, err)
		}
		d2, err := newDirStorage(mem.CrashClone(), "/ckpt")
		if err != nil {
			t.Fatal(err)
		}
		checkReachable(t, d2, "job", 5)
		ids, err := ListCheckpoints(ctx, d2, "job")
		if err != nil {
			t.Fatal(err)
		}
		checkReachable(t, d2, "job", ids...) // no manifest names a deleted object
		if _, err := GC(ctx, d2, opts); err != nil {
			t.Fatalf("crash at %d: GC after the restart: %v", n, err)
		}
		if got := present(t, d2, ""); !slices.Equal(got, want) {
			t.Fatalf("crash at %d: after the second GC %v\nwant %v", n, got, want)
		}
	}
}
