package changelog

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// crashWorkload appends to two Stores and persists three times over a DirStorage on fsys,
// retrying a failed persist once, and returns each Store's model and the handles of every
// persist that returned nil.
func crashWorkload(fsys vfs.FS) (models map[string][]modelRec, acked map[string][]checkpoint.Object, err error) {
	models, acked = map[string][]modelRec{}, map[string][]checkpoint.Object{}
	d, err := checkpointfs.NewDirStorage(fsys, "/ck")
	if err != nil {
		return nil, nil, err
	}
	w, _ := NewWriter(WriterOptions{Storage: d, Prefix: "tm-1"})
	kgs := map[string]KeyGroupRange{"a": {Start: 0, End: 63}, "b": {Start: 64, End: 127}}
	logs := map[string]*Log{}
	for _, s := range []string{"a", "b"} {
		logs[s], _ = w.Log(s, kgs[s])
	}
	rng := rand.New(rand.NewPCG(7, 7))
	seq := uint64(0)
	for round := range 3 {
		for range 20 {
			seq++
			for _, s := range []string{"a", "b"} {
				r := randRec(rng, kgs[s], seq)
				if err := appendModel(logs[s], r); err != nil {
					return models, acked, err
				}
				models[s] = append(models[s], r)
			}
		}
		res, err := w.Persist(context.Background())
		if err != nil {
			return models, acked, err
		}
		for _, sh := range res.Segments {
			acked[sh.Store] = append(acked[sh.Store], sh.Object)
		}
		_ = round
	}
	return models, acked, nil
}

// TestCrashPersist crashes the workload at every write operation of its persists (FaultFS
// CrashAt over a DirStorage): after the crash, every handle a Persist returned replays exactly
// its records, and every changelog object the storage lists decodes whole — none is ever
// half-readable.
func TestCrashPersist(t *testing.T) {
	ctx := context.Background()
	ffs := vfs.NewFaultFS(vfs.NewMem())
	if _, _, err := crashWorkload(ffs); err != nil {
		t.Fatal(err)
	}
	total := ffs.Count(vfs.WriteOps)
	t.Logf("workload: %d write operations", total)
	for n := int64(1); n <= total+1; n++ {
		mem := vfs.NewMem()
		ffs := vfs.NewFaultFS(mem)
		ffs.CrashAt(n)
		models, acked, err := crashWorkload(ffs)
		if err != nil && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: workload stopped by %v, not the crash", n, err)
		}
		if n <= total && !ffs.Crashed() {
			t.Fatalf("crash at %d: not reached", n)
		}
		clone := mem.CrashClone()
		d, err := checkpointfs.NewDirStorage(clone, "/ck")
		if err != nil {
			t.Fatalf("crash at %d: reopen: %v", n, err)
		}
		list, err := d.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list {
			b, err := d.Get(ctx, o.Name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeObject(o.Name, b); err != nil {
				t.Fatalf("crash at %d: listed object is not whole: %v", n, err)
			}
		}
		for store, hs := range acked {
			kg := KeyGroupRange{Start: 0, End: 127}
			got := replayAll(t, d, hs, kg)
			var last uint64
			for _, h := range hs {
				last = max(last, h.MaxOrder)
			}
			want := slices.DeleteFunc(slices.Clone(models[store]), func(r modelRec) bool { return r.seq > last })
			if !slices.Equal(got, want) {
				t.Fatalf("crash at %d: store %s replays %d records, persisted %d", n, store, len(got), len(want))
			}
		}
	}
}
