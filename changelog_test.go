package strata

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/vfs"
)

// changelogObjects counts the changelog objects stored under owner.
func (e *ckEnv) changelogObjects(owner string) int {
	e.t.Helper()
	objs, err := e.st.List(context.Background(), owner+"/")
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		if strings.Contains(o.Name, "/changelog/") {
			n++
		}
	}
	return n
}

// TestChangelogCheckpointRestore: with the changelog on, the first checkpoint is a native one
// (the first materialization); later ones store only the log's tail (no memory table, the
// materialization's tables reused); each restores to exactly the model at its cut — into a
// Store with the changelog on or off. A materialization in the background then a completed
// checkpoint on top of it truncate the log: the old generations close and garbage collection
// deletes the changelog objects no retained checkpoint reaches.
func TestChangelogCheckpointRestore(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	e.opts.Checkpoint.Retain = 10
	r := e.open(nil)
	defer r.st.s.Close()
	s := r.st.s
	r.writes(raceScale(6000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(1000))
	h1, err := s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h1.Stats.MemoryBytes == 0 {
		t.Fatalf("checkpoint 1 (the first materialization) has no memory table: %+v", h1.Stats)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	handles := []CheckpointHandle{h1}
	models := []*model{r.m.clone()}
	for id := uint64(2); id <= 6; id++ {
		r.writes(raceScale(800))
		if id == 4 { // a materialization between checkpoints 3 and 4
			if err := s.e.Materialize(ctx); err != nil {
				t.Fatal(err)
			}
			r.writes(raceScale(300))
		}
		p, err := s.StartCheckpoint(id, []byte(fmt.Sprint(id)))
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, r.m.clone())
		r.writes(raceScale(300)) // during the upload: not in the checkpoint
		h, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Stats.MemoryBytes != 0 || h.Stats.UploadedObjects == 0 || h.Stats.ReusedObjects == 0 {
			t.Fatalf("checkpoint %d is not a changelog checkpoint: %+v", id, h.Stats)
		}
		handles = append(handles, h)
		if id != 6 { // 6 stays pending: it must restore all the same
			if err := s.NotifyCheckpointComplete(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.ChangelogStats()
	if !st.Enabled || st.Materializations != 1 || st.Generations != 1 || st.LastError != nil {
		t.Fatalf("changelog stats after checkpoint 5 completed on the materialization: %+v", st)
	}
	nextID := uint64(100)
	for i, h := range handles {
		for _, on := range []bool{true, false} {
			o := e.opts
			if !on {
				o.Checkpoint.Changelog = nil
			}
			// A lineage of its own: a restored Store that checkpoints into the original's
			// lineage fences the original (and the checkpoints after the one restored).
			o.Checkpoint.Owner = fmt.Sprintf("restored-%d-%v", i, on)
			sv := e.opts
			e.opts = o
			rr := e.restore(nil, NoClaim, h)
			e.opts = sv
			rr.m = models[i].clone()
			if err := rr.st.checkAll(rr.m); err != nil {
				t.Fatalf("restore of checkpoint %d (changelog on: %v): %v", h.ID, on, err)
			}
			if i > 0 && rr.st.s.RestoreStats().ChangelogRecords == 0 {
				t.Fatalf("restore of checkpoint %d replayed no record", h.ID)
			}
			// The restored Store goes on and checkpoints (a native one first).
			rr.writes(raceScale(200))
			nextID++
			if _, err := rr.st.s.Checkpoint(ctx, nextID, nil); err != nil {
				t.Fatal(err)
			}
			rr.st.s.Close()
		}
	}

	// Truncation and GC: with Retain 1, a materialization and a checkpoint on it leave only
	// the newest generation and the changelog objects that checkpoint reaches.
	s.opts.Checkpoint.Retain = 1
	before := e.changelogObjects(s.owner())
	if err := s.NotifyCheckpointComplete(6); err != nil {
		t.Fatal(err)
	}
	if err := s.e.Materialize(ctx); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(200))
	h7, err := s.Checkpoint(ctx, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	m7 := r.m.clone()
	if err := s.NotifyCheckpointComplete(7); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	after := e.changelogObjects(s.owner())
	if st := s.ChangelogStats(); st.Generations != 1 || st.Materializations != 2 {
		t.Fatalf("after the second materialization completed: %+v", st)
	}
	if after >= before || after > 2 {
		t.Fatalf("changelog objects: %d before, %d after truncation and GC", before, after)
	}
	rr := e.restore(nil, NoClaim, h7)
	defer rr.st.s.Close()
	rr.m = m7
	if err := rr.st.checkAll(rr.m); err != nil {
		t.Fatalf("restore of checkpoint 7 after truncation: %v", err)
	}
}

// TestChangelogRescale: a changelog checkpoint restored into two Stores splitting its key
// groups: each replays only its key groups' records and holds exactly its part.
func TestChangelogRescale(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(4000))
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(3000))
	h, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Stats.UploadedBytes == 0 {
		t.Fatalf("changelog checkpoint 2 after 3000 writes stored nothing: %+v", h.Stats)
	}
	// Nothing written since: the next checkpoint lists the same segments and stores none.
	if h3, err := r.st.s.Checkpoint(ctx, 3, nil); err != nil || h3.Stats.UploadedBytes != 0 || h3.Stats.ReusedBytes < h.Stats.UploadedBytes {
		t.Fatalf("checkpoint 3 with no writes since 2: %+v, %v; want nothing uploaded, 2's segments reused", h3.Stats, err)
	}
	m := r.m.clone()
	var total int64
	for i := range 2 {
		kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 2, i)
		p := e.restore(&kg, NoClaim, h)
		p.m = m.clone()
		if err := p.st.checkOwned(p.m); err != nil {
			t.Fatalf("part %d (%v): %v", i, kg, err)
		}
		total += p.st.s.RestoreStats().ChangelogRecords
		p.st.s.Close()
	}
	one := e.restore(nil, NoClaim, h)
	defer one.st.s.Close()
	if n := one.st.s.RestoreStats().ChangelogRecords; n != total || n == 0 {
		t.Fatalf("the parts replayed %d records, the whole %d", total, n)
	}
}

// TestChangelogSharedWriterAndCap: two Stores share one ChangelogWriter (one object per
// persist for both), each restores from its own changelog checkpoint; a small
// SpaceAmplificationCap starts materializations in the background without being asked.
func TestChangelogSharedWriterAndCap(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	w, err := NewChangelogWriter(ChangelogWriterOptions{Storage: e.st, Prefix: "tm-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.opts.Checkpoint.Changelog = &ChangelogOptions{Writer: w, MaterializationInterval: -1, SpaceAmplificationCap: 1.01}
	var parts []*modelRun
	for i := range 2 {
		kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 2, i)
		p := e.open(&kg)
		defer p.st.s.Close()
		parts = append(parts, p)
	}
	write := func(p *modelRun, n int) {
		for range n {
			slot := p.rng.Int32N(p.w.u.slots())
			if !p.st.owns(slot) {
				continue
			}
			if err := p.valPut(slot); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range parts {
		write(p, raceScale(2000))
		if _, err := p.st.s.Checkpoint(ctx, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range parts {
		write(p, raceScale(6000))
	}
	for i, p := range parts {
		h, err := p.st.s.Checkpoint(ctx, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st := p.st.s.ChangelogStats(); st.Materializations == 0 && !st.MaterializationRunning {
			t.Errorf("part %d: no materialization started by the space-amplification cap: %+v", i, st)
		}
		kg := p.st.s.KeyGroups()
		rr := e.restore(&kg, NoClaim, h)
		rr.m = p.m.clone()
		if err := rr.st.checkOwned(rr.m); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		rr.st.s.Close()
	}
}

// countGets counts the reads of changelog objects, whole and ranged, per name.
type countGets struct {
	checkpoint.Storage
	mu           sync.Mutex
	whole, parts map[string]int
}

func (c *countGets) Get(ctx context.Context, name string) ([]byte, error) {
	c.count(c.whole, name)
	return c.Storage.Get(ctx, name)
}

func (c *countGets) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	c.count(c.parts, name)
	return c.Storage.GetRange(ctx, name, off, n)
}

func (c *countGets) count(m map[string]int, name string) {
	if strings.Contains(name, "/changelog/") {
		c.mu.Lock()
		m[name]++
		c.mu.Unlock()
	}
}

// TestChangelogRestoreCache: three Stores restoring one Store's changelog checkpoint (a
// scale-out) through one ChangelogCache fetch each changelog object once, whole, and read
// none in ranges (FLINK-27155); each Store holds exactly its key groups' state. Without the
// cache every Store reads every object's footer and spans.
func TestChangelogRestoreCache(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(3000))
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(3000))
	h, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	for _, cached := range []bool{true, false} {
		cs := &countGets{Storage: e.st, whole: map[string]int{}, parts: map[string]int{}}
		o := e.opts
		if cached {
			c, err := NewChangelogCache(filepath.Join(e.root, "cache"), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			o.Checkpoint.ChangelogCache = c
		}
		var records int64
		for i := range 3 {
			kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 3, i)
			o.KeyGroups = &kg
			s, err := Restore(e.newDir(), o, cs, h)
			if err != nil {
				t.Fatal(err)
			}
			p := e.run(s)
			p.m = m.clone()
			if err := p.st.checkOwned(p.m); err != nil {
				t.Fatalf("cached %v, part %d (%v): %v", cached, i, kg, err)
			}
			records += s.RestoreStats().ChangelogRecords
			s.Close()
		}
		if records == 0 || len(cs.whole)+len(cs.parts) == 0 {
			t.Fatalf("cached %v: %d records replayed, %d objects read: the test restored no changelog", cached, records, len(cs.whole)+len(cs.parts))
		}
		if cached {
			for name, n := range cs.whole {
				if n != 1 {
					t.Errorf("%s fetched %d times by three restores through one cache", name, n)
				}
			}
			if len(cs.parts) != 0 {
				t.Errorf("ranged reads of changelog objects past the cache: %v", cs.parts)
			}
			if st := o.Checkpoint.ChangelogCache.Stats(); st.Fetches != int64(len(cs.whole)) || st.Hits < 2*st.Fetches {
				t.Errorf("cache stats %+v for %d objects and three restores", st, len(cs.whole))
			}
		} else {
			for name, n := range cs.parts {
				if n < 3 {
					t.Errorf("without the cache, %s read %d times by three restores (each should read it)", name, n)
				}
			}
		}
	}
}

// ckNamed returns the names every manifest of owner lists.
func (e *ckEnv) ckNamed(owner string) map[string]bool {
	e.t.Helper()
	ctx := context.Background()
	ids, err := checkpoint.ListCheckpoints(ctx, e.st, owner)
	if err != nil {
		e.t.Fatal(err)
	}
	named := map[string]bool{}
	for _, id := range ids {
		m, err := checkpoint.ReadManifest(ctx, e.st, owner, id)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, o := range m.Objects {
			named[o.Name] = true
		}
	}
	return named
}

// changelogNames lists the changelog objects under prefix.
func (e *ckEnv) changelogNames(prefix string) []string {
	e.t.Helper()
	objs, err := e.st.List(context.Background(), prefix+"/changelog/")
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

// TestChangelogCloseDropsUnreferenced: the changelog objects background persists uploaded
// after the last checkpoint are deleted by Close (Flink discards them when the backend
// closes; no GC ever runs for a job that ended), those a committed checkpoint — completed or
// pending — names are kept and restore. With a ChangelogWriter shared by two Stores, Close of
// one keeps every object that holds the other's segments, and the other's checkpoint
// restores.
func TestChangelogCloseDropsUnreferenced(t *testing.T) {
	ctx := context.Background()
	t.Run("own-writer", func(t *testing.T) {
		e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
		e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
		e.opts.Checkpoint.Retain = 10
		r := e.open(nil)
		s := r.st.s
		r.writes(2000)
		if _, err := s.Checkpoint(ctx, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.NotifyCheckpointComplete(1); err != nil {
			t.Fatal(err)
		}
		r.writes(800)
		h2, err := s.Checkpoint(ctx, 2, nil) // pending: never completed
		if err != nil {
			t.Fatal(err)
		}
		m2 := r.m.clone()
		for range 8 { // background persists (PersistDelay 10 ms) ahead of any checkpoint
			r.writes(300)
			time.Sleep(15 * time.Millisecond)
		}
		owner := s.owner()
		named := e.ckNamed(owner)
		var ahead int
		for _, n := range e.changelogNames(owner) {
			if !named[n] {
				ahead++
			}
		}
		if ahead == 0 {
			t.Fatalf("no changelog object persisted ahead of a checkpoint (persists: %d)", s.ChangelogStats().Persists)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for _, n := range e.changelogNames(owner) {
			if !named[n] {
				t.Errorf("Close left %s, which no checkpoint names (%d were ahead)", n, ahead)
			}
		}
		for n := range named {
			if _, err := e.st.Get(ctx, n); err != nil {
				t.Errorf("Close deleted %s, which a checkpoint names: %v", n, err)
			}
		}
		x := e.restore(nil, NoClaim, h2)
		if err := x.st.checkAll(m2); err != nil {
			t.Fatal(err)
		}
		x.st.s.Close()
	})
	t.Run("shared-writer", func(t *testing.T) {
		const maxP = 128
		e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
		w, err := NewChangelogWriter(ChangelogWriterOptions{Storage: e.st, Prefix: "tm-1"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		e.opts.Checkpoint.Changelog = &ChangelogOptions{Writer: w, MaterializationInterval: -1}
		var parts []*modelRun
		for i := range 2 {
			kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 2, i)
			parts = append(parts, e.open(&kg))
		}
		for _, p := range parts {
			p.ownedSteps(1500, writeWeights)
			if _, err := p.st.s.Checkpoint(ctx, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 6 {
			for _, p := range parts {
				p.ownedSteps(300, writeWeights)
			}
			time.Sleep(15 * time.Millisecond)
		}
		h, err := parts[1].st.s.Checkpoint(ctx, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := parts[1].m.clone()
		if err := parts[0].st.s.Close(); err != nil {
			t.Fatal(err)
		}
		kg := parts[1].st.s.KeyGroups()
		if err := parts[1].st.s.Close(); err != nil {
			t.Fatal(err)
		}
		rr := e.restore(&kg, NoClaim, h)
		rr.m = m
		if err := rr.st.checkOwned(rr.m); err != nil {
			t.Fatal(err)
		}
		rr.st.s.Close()
	})
}
