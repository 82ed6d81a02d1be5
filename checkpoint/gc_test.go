package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// clockFS stamps every file with a test clock's time when it is created or linked, and reports
// that time as ModTime (MemFS keeps no times), so grace periods can be tested on MemFS.
type clockFS struct {
	vfs.FS
	mu    sync.Mutex
	now   time.Time
	times map[string]time.Time
}

func newClockFS(inner vfs.FS) *clockFS {
	return &clockFS{FS: inner, now: time.Unix(1_700_000_000, 0), times: make(map[string]time.Time)}
}

func (c *clockFS) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clockFS) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
func (c *clockFS) stamp(name string) {
	c.mu.Lock()
	c.times[filepath.Clean(name)] = c.now
	c.mu.Unlock()
}

func (c *clockFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	if err == nil {
		c.stamp(name)
	}
	return f, err
}

func (c *clockFS) Link(oldname, newname string) error {
	err := c.FS.Link(oldname, newname)
	if err == nil {
		c.stamp(newname) // link(2) updates the node's ctime, which DirStorage reads
	}
	return err
}

func (c *clockFS) Rename(oldname, newname string) error {
	err := c.FS.Rename(oldname, newname)
	if err == nil {
		c.mu.Lock()
		c.times[filepath.Clean(newname)] = c.times[filepath.Clean(oldname)]
		c.mu.Unlock()
	}
	return err
}

type stampedInfo struct {
	fs.FileInfo
	t time.Time
}

func (s stampedInfo) ModTime() time.Time { return s.t }
func (s stampedInfo) Sys() any           { return nil }

func (c *clockFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := c.FS.Stat(name)
	if err != nil || fi.IsDir() {
		return fi, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return stampedInfo{fi, c.times[filepath.Clean(name)]}, nil
}

// ckpt writes one checkpoint of owner: it puts the objects in fresh (new names) and commits a
// manifest listing them and reused (names already stored), holding them all in flight (if f is
// not nil) until the commit, as the engine will.
func ckpt(t *testing.T, s Storage, f *InFlight, owner string, id uint64, reused []string, fresh int) (*Manifest, []string) {
	t.Helper()
	ctx := context.Background()
	m := &Manifest{ID: id, Parent: id - 1, MaxParallelism: 128, KeyGroups: KeyGroupRange{Start: 0, End: 127}}
	var added []string
	for range fresh {
		added = append(added, SharedName(owner, m.KeyGroups, id, "sst"))
	}
	all := append(slices.Clone(reused), added...)
	if f != nil {
		f.Add(all...)
		defer f.Release(all...)
	}
	for _, name := range added {
		if err := s.Put(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range all {
		m.Objects = append(m.Objects, Object{Name: name, Kind: KindTable, Size: int64(len(name)), KeyGroups: m.KeyGroups, MaxOrder: ^uint64(0)})
	}
	if err := Commit(ctx, s, owner, m); err != nil {
		t.Fatal(err)
	}
	return m, all
}

// present returns the names stored under prefix.
func present(t *testing.T, s Storage, prefix string) []string {
	t.Helper()
	l, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	return names(l)
}

// checkReachable fails unless every object the manifests of ids name is stored, and the manifests.
func checkReachable(t *testing.T, s Storage, owner string, ids ...uint64) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		m, err := ReadManifest(ctx, s, owner, id)
		if err != nil {
			t.Fatalf("manifest %d: %v", id, err)
		}
		for _, o := range m.Objects {
			if b, err := s.Get(ctx, o.Name); err != nil || int64(len(b)) != o.Size {
				t.Fatalf("checkpoint %d: object %s: %v", id, o.Name, err)
			}
		}
	}
}

// TestGCRetention: the Retain newest completed manifests, every pending one and the pinned ones
// are kept with what they reach; subsumed and aborted ones are deleted with the objects only
// they reached; LastCompleted 0 keeps everything; another owner's objects are never touched.
func TestGCRetention(t *testing.T) {
	ctx := context.Background()
	d, _ := newMemStorage(t)
	_, o1 := ckpt(t, d, nil, "job", 1, nil, 2)
	_, o2 := ckpt(t, d, nil, "job", 2, o1[1:], 1) // incremental: reuses o1[1]
	_, o3 := ckpt(t, d, nil, "job", 3, o2, 1)
	_, o4 := ckpt(t, d, nil, "job", 4, o3[2:], 1) // will be aborted
	_, o5 := ckpt(t, d, nil, "job", 5, o3, 1)     // pending
	ckpt(t, d, nil, "other", 1, nil, 2)
	otherBefore := present(t, d, "other/")
	all := present(t, d, "job/")

	gc := func(o GCOptions) GCResult {
		t.Helper()
		o.Owner, o.Grace = "job", NoGrace
		res, err := GC(ctx, d, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Nothing known to be completed (a restart before any notification): nothing is deleted.
	if res := gc(GCOptions{}); len(res.Deleted) != 0 || len(res.Kept) != 5 {
		t.Fatalf("GC with LastCompleted 0 deleted %v, kept %v", res.Deleted, res.Kept)
	}
	if got := present(t, d, "job/"); !slices.Equal(got, all) {
		t.Fatalf("objects changed: %v", got)
	}
	// Checkpoint 3 completed, 4 aborted, 5 pending, Retain 2, pin 1.
	res := gc(GCOptions{LastCompleted: 3, Aborted: []uint64{4}, Retain: 2, Pinned: []uint64{1}})
	wantKept := []string{ManifestName("job", 1), ManifestName("job", 2), ManifestName("job", 3), ManifestName("job", 5)}
	if !slices.Equal(res.Kept, wantKept) {
		t.Fatalf("kept %v, want %v", res.Kept, wantKept)
	}
	wantDeleted := []string{ManifestName("job", 4), o4[1]}
	if !slices.Equal(res.Deleted, wantDeleted) {
		t.Fatalf("deleted %v, want %v", res.Deleted, wantDeleted)
	}
	checkReachable(t, d, "job", 1, 2, 3, 5)
	// Unpin 1, checkpoint 5 completed, Retain 1: only 5 and what it reaches stay.
	res = gc(GCOptions{LastCompleted: 5})
	checkReachable(t, d, "job", 5)
	want := append([]string{ManifestName("job", 5)}, o5...)
	slices.Sort(want)
	if got := present(t, d, "job/"); !slices.Equal(got, want) {
		t.Fatalf("after GC: %v\nwant %v (deleted %v)", got, want, res.Deleted)
	}
	if !slices.Contains(res.Deleted, o1[0]) || slices.Contains(res.Deleted, o1[1]) {
		t.Fatalf("deleted %v: o1[0] is garbage, o1[1] is reached through 2, 3 and 5", res.Deleted)
	}
	if got := present(t, d, "other/"); !slices.Equal(got, otherBefore) {
		t.Fatalf("GC of job touched other: %v", got)
	}
	// A second run finds nothing (idempotent), and a damaged kept manifest stops GC before
	// it deletes anything.
	if res := gc(GCOptions{LastCompleted: 5}); len(res.Deleted) != 0 {
		t.Fatalf("second run deleted %v", res.Deleted)
	}
	garbage := SharedName("job", KeyGroupRange{End: 127}, 9, "sst")
	d.Put(ctx, garbage, []byte("x"))
	d.Put(ctx, ManifestName("job", 5), []byte("not a manifest"))
	if _, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: 5, Grace: NoGrace}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("GC over a damaged manifest: %v", err)
	}
	if !slices.Contains(present(t, d, "job/"), garbage) {
		t.Fatal("GC deleted an object although it could not read a kept manifest")
	}
	for _, bad := range []GCOptions{{}, {Owner: "a/b"}, {Owner: "job", Retain: -1}, {Owner: "job", Grace: -2}, {Owner: "job", Claimed: []Claim{{Owner: "job"}}}} {
		if _, err := GC(ctx, d, bad); err == nil {
			t.Errorf("GC(%+v) accepted bad options", bad)
		}
	}
}

// TestGCFLINK29913: shared files are not deleted under concurrent checkpoints. A checkpoint being
// written while GC runs — its new objects uploaded, old ones reused, its manifest not yet
// committed — keeps all of its objects: deterministically (GC between upload and commit), and
// with GC running in a loop beside a writer.
func TestGCFLINK29913(t *testing.T) {
	ctx := context.Background()
	t.Run("between upload and commit", func(t *testing.T) {
		d, _ := newMemStorage(t)
		var f InFlight
		_, o1 := ckpt(t, d, &f, "job", 1, nil, 2)
		_, o2 := ckpt(t, d, &f, "job", 2, o1[:1], 1)
		// Checkpoint 3 is under way: it reuses o1[0] (reached only through 2, which a GC
		// with LastCompleted 2 keeps) and o2's new object, and uploads one of its own.
		fresh := SharedName("job", KeyGroupRange{End: 127}, 3, "sst")
		refs := []string{o1[0], o2[1], fresh}
		f.Add(refs...)
		d.Put(ctx, fresh, []byte(fresh))
		// Checkpoint 2 completed: retention moves on, and 1's own objects go.
		res, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: 2, InFlight: &f, Grace: NoGrace})
		if err != nil {
			t.Fatal(err)
		}
		if res.InFlightKept != 1 || slices.Contains(res.Deleted, fresh) {
			t.Fatalf("GC deleted %v, kept %d in flight: the uncommitted upload must stay", res.Deleted, res.InFlightKept)
		}
		m := &Manifest{ID: 3, Parent: 2, MaxParallelism: 128, KeyGroups: KeyGroupRange{End: 127}}
		for _, n := range refs {
			m.Objects = append(m.Objects, Object{Name: n, Kind: KindTable, Size: int64(len(n)), KeyGroups: m.KeyGroups})
		}
		if err := Commit(ctx, d, "job", m); err != nil {
			t.Fatal(err)
		}
		f.Release(refs...)
		// Checkpoint 3 completed before 2 was collected: everything it names is there.
		if _, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: 3, InFlight: &f, Grace: NoGrace}); err != nil {
			t.Fatal(err)
		}
		checkReachable(t, d, "job", 3)
		if f.Len() != 0 {
			t.Fatalf("%d names left in flight", f.Len())
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		d, _ := newMemStorage(t)
		var f InFlight
		var last atomic.Uint64
		done := make(chan struct{})
		var gcErr error
		var runs int
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: last.Load(), InFlight: &f, Grace: NoGrace}); err != nil {
					gcErr = err
					return
				}
				runs++
			}
		}()
		var prev []string
		const checkpoints = 40
		for id := uint64(1); id <= checkpoints; id++ {
			// Reuse half of the previous checkpoint's objects, as an incremental one does.
			_, objs := ckpt(t, d, &f, "job", id, prev[len(prev)/2:], 3)
			checkReachable(t, d, "job", id) // pending: no GC may have touched it
			last.Store(id)
			prev = objs
		}
		close(done)
		wg.Wait()
		if gcErr != nil {
			t.Fatal(gcErr)
		}
		if _, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: checkpoints, InFlight: &f, Grace: NoGrace}); err != nil {
			t.Fatal(err)
		}
		checkReachable(t, d, "job", checkpoints)
		if got := len(present(t, d, "job/")); got != len(prev)+1 {
			t.Fatalf("%d objects left after the last GC, want %d (the last manifest and its objects)", got, len(prev)+1)
		}
		t.Logf("%d GC runs beside %d checkpoints", runs, checkpoints)
	})
}

// TestGCFLINK30461: a checkpoint whose upload failed (and which was aborted) leaves no object
// behind after the next GC once the grace period has passed — neither its uploaded objects nor
// the temporary of the failed upload — and none before.
func TestGCFLINK30461(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	clock := newClockFS(mem)
	ffs := vfs.NewFaultFS(clock)
	d, err := newDirStorage(ffs, "/ckpt")
	if err != nil {
		t.Fatal(err)
	}
	var f InFlight
	ckpt(t, d, &f, "job", 1, nil, 2)
	// Checkpoint 2 uploads one object, then the next upload fails at its sync, and the
	// removal of its temporary fails too (the disk went away), so the temporary stays.
	kg := KeyGroupRange{End: 127}
	up := []string{SharedName("job", kg, 2, "sst"), SharedName("job", kg, 2, "sst")}
	f.Add(up...)
	if err := d.Put(ctx, up[0], []byte("uploaded")); err != nil {
		t.Fatal(err)
	}
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpSync, vfs.OpRemove), Sticky: true})
	if err := d.Put(ctx, up[1], []byte("failed")); err == nil {
		t.Fatal("the upload did not fail")
	}
	ffs.ClearFaults()
	f.Release(up...) // aborted
	grace := 5 * time.Minute
	gc := func() GCResult {
		t.Helper()
		res, err := GC(ctx, d, GCOptions{Owner: "job", LastCompleted: 1, InFlight: &f, Grace: grace, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	clock.Advance(grace / 2)
	if res := gc(); len(res.Deleted) != 0 || res.Temporaries != 0 || res.Young != 1 {
		t.Fatalf("GC within the grace period: %+v", res)
	}
	clock.Advance(grace / 2)
	res := gc()
	if !slices.Equal(res.Deleted, up[:1]) || res.Temporaries != 1 {
		t.Fatalf("GC after the grace period: %+v", res)
	}
	checkReachable(t, d, "job", 1)
	var stray []string
	var walk func(dir string)
	walk = func(dir string) {
		ns, _ := mem.List(dir)
		for _, n := range ns {
			p := dir + "/" + n
			if fi, _ := mem.Stat(p); fi.IsDir() {
				walk(p)
			} else if strings.HasPrefix(n, ".") {
				stray = append(stray, p)
			}
		}
	}
	walk("/ckpt")
	if len(stray) > 0 {
		t.Fatalf("files left behind: %v", stray)
	}
}

// TestGCFLINK7268: GC after a restart — a new DirStorage over what a crash kept, no InFlight,
// no memory of earlier runs — deletes nothing any retained or pending manifest reaches, whatever
// LastCompleted the restarted job knows (0, the restored checkpoint, or the newest).
func TestGCFLINK7268(t *testing.T) {
	ctx := context.Background()
	for _, last := range []uint64{0, 3, 5} {
		t.Run(fmt.Sprintf("last=%d", last), func(t *testing.T) {
			d, mem := newMemStorage(t)
			var prev []string
			for id := uint64(1); id <= 5; id++ {
				_, prev = ckpt(t, d, nil, "job", id, prev[len(prev)/2:], 2)
			}
			d2, err := newDirStorage(mem.CrashClone(), "/ckpt")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := GC(ctx, d2, GCOptions{Owner: "job", LastCompleted: last, Grace: NoGrace}); err != nil {
				t.Fatal(err)
			}
			keep := []uint64{1, 2, 3, 4, 5}
			if last > 0 {
				keep = keep[last-1:]
			}
			checkReachable(t, d2, "job", keep...)
			ids, err := ListCheckpoints(ctx, d2, "job")
			if err != nil || !slices.Equal(ids, keep) {
				t.Fatalf("checkpoints after GC: %v, %v; want %v", ids, err, keep)
			}
		})
	}
}

// TestGCClaim: a lineage restored in CLAIM mode is collected with ours — its pinned restore
// source and what our manifests reach stay, the rest goes — and without a Claim it is never
// touched (NO_CLAIM).
func TestGCClaim(t *testing.T) {
	ctx := context.Background()
	d, _ := newMemStorage(t)
	_, old1 := ckpt(t, d, nil, "old", 1, nil, 2)
	_, old2 := ckpt(t, d, nil, "old", 2, nil, 2)
	// The new lineage restored from old/2 and references one of its objects.
	ckpt(t, d, nil, "new", 3, old2[:1], 1)
	before := present(t, d, "old/")
	if _, err := GC(ctx, d, GCOptions{Owner: "new", LastCompleted: 3, Grace: NoGrace}); err != nil {
		t.Fatal(err)
	}
	if got := present(t, d, "old/"); !slices.Equal(got, before) {
		t.Fatalf("NO_CLAIM GC touched the restore source: %v", got)
	}
	res, err := GC(ctx, d, GCOptions{Owner: "new", LastCompleted: 3, Grace: NoGrace, Claimed: []Claim{{Owner: "old", Pinned: []uint64{2}}}})
	if err != nil {
		t.Fatal(err)
	}
	checkReachable(t, d, "old", 2)
	if !slices.Contains(res.Deleted, ManifestName("old", 1)) || !slices.Contains(res.Deleted, old1[0]) {
		t.Fatalf("CLAIM GC deleted %v", res.Deleted)
	}
	if _, err := GC(ctx, d, GCOptions{Owner: "new", LastCompleted: 3, Grace: NoGrace, Claimed: []Claim{{Owner: "old"}}}); err != nil {
		t.Fatal(err)
	}
	checkReachable(t, d, "new", 3)
	if got := present(t, d, "old/"); !slices.Equal(got, old2[:1]) {
		t.Fatalf("after the claim ended: %v, want only what new/3 reaches %v", got, old2[:1])
	}
}

// TestGCClaimSiblings: two Stores claim one lineage (a scale out, doc.go "Claims shared by
// several Stores"). While sibling b has no manifest, a's GC keeps the whole checkpoint b
// restored; once b has one, a's GC keeps what b's manifests reach and collects the rest, and
// the claim markers stay. The marker names round-trip.
func TestGCClaimSiblings(t *testing.T) {
	ctx := context.Background()
	d, _ := newMemStorage(t)
	_, old := ckpt(t, d, nil, "old", 1, nil, 3)
	for _, c := range []string{"a", "b-part-1"} {
		if err := WriteClaim(ctx, d, "old", c, 1); err != nil {
			t.Fatal(err)
		}
		if err := WriteClaim(ctx, d, "old", c, 1); err != nil { // again: an earlier restore's marker
			t.Fatal(err)
		}
		owner, claimant, id, ok := ParseClaimMarkerName(ClaimMarkerName("old", c, 1))
		if !ok || owner != "old" || claimant != c || id != 1 {
			t.Fatalf("ParseClaimMarkerName: %q %q %d %v", owner, claimant, id, ok)
		}
	}
	if _, _, _, ok := ParseClaimMarkerName(ManifestName("old", 1)); ok {
		t.Fatal("a manifest parsed as a claim marker")
	}
	// a moved off every restored object; b has checkpointed nothing yet.
	ckpt(t, d, nil, "a", 2, nil, 1)
	gc := func() {
		t.Helper()
		if _, err := GC(ctx, d, GCOptions{Owner: "a", LastCompleted: 2, Grace: NoGrace, Claimed: []Claim{{Owner: "old"}}}); err != nil {
			t.Fatal(err)
		}
	}
	gc()
	checkReachable(t, d, "old", 1)
	// b's first checkpoint reaches one restored object: the rest goes, the markers stay.
	ckpt(t, d, nil, "b-part-1", 2, old[1:2], 0)
	gc()
	want := []string{old[1], ClaimMarkerName("old", "a", 1), ClaimMarkerName("old", "b-part-1", 1)}
	slices.Sort(want)
	if got := present(t, d, "old/"); !slices.Equal(got, want) {
		t.Fatalf("after b's first checkpoint: %v, want %v", got, want)
	}
}
