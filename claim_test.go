package strata

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// TestClaimScaleOut (issue 21 item 7a): a CLAIM restore that scales out, as Flink's: both new
// Stores claim the old lineage and share its objects. One compacts the restored tables away
// and completes checkpoints (its GC collects what no claimant reaches) while the other has not
// checkpointed yet: the other's checkpoints, taken after, still find every object they name,
// and restore exactly. Once both have moved off the old tables, the old lineage holds nothing
// but the claim markers.
func TestClaimScaleOut(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMem()
	st := must(checkpointfs.NewDirStorage(fsys, "/ck"))
	opts := func(kg KeyGroupRange, owner string) Options {
		o := Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, KeyGroups: &kg,
			Checkpoint: CheckpointOptions{Storage: st, Owner: owner, Grace: checkpoint.NoGrace, RestoreMode: Claim}}
		o.fs = fsys
		return o
	}
	const n = 2000
	all := KeyGroupRange{Start: 0, End: 127}
	x := must(Open("/x", opts(all, "x")))
	v := must(NewValueState(x, ValueDescriptor[string]{Name: "v", Codec: String}))
	for i := range n {
		must(0, v.Put(x.Key(fmt.Appendf(nil, "k%d", i)), fmt.Sprint("x", i)))
	}
	hx := must(x.Checkpoint(ctx, 1, nil))
	must(0, x.NotifyCheckpointComplete(1))
	must(0, x.Close())

	// Both parts restore (and claim) before either completes a checkpoint (Flink's order).
	parts := []KeyGroupRange{{Start: 0, End: 63}, {Start: 64, End: 127}}
	var ps []*Store
	for i, kg := range parts {
		s, err := Restore(fmt.Sprintf("/p%d", i), opts(kg, fmt.Sprintf("p%d", i)), st, hx)
		if err != nil {
			t.Fatalf("CLAIM restore of part %v (a scale out): %v", kg, err)
		}
		defer s.Close()
		ps = append(ps, s)
	}
	check := func(s *Store, what string, overwritten bool) {
		t.Helper()
		vs := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
		kg := *s.opts.KeyGroups
		for i := range n {
			k := s.Key(fmt.Appendf(nil, "k%d", i))
			if int(k.kg) < kg.Start || int(k.kg) > kg.End {
				continue
			}
			want := fmt.Sprint("x", i)
			if overwritten && i%2 == 0 {
				want = fmt.Sprint("p", i)
			}
			if got, ok, err := vs.Get(k); err != nil || !ok || got != want {
				t.Fatalf("%s: key k%d: %q, %v, %v; want %q", what, i, got, ok, err, want)
			}
		}
	}
	// Part 0 rewrites its state out of the restored tables and completes two checkpoints.
	step := func(i int, id uint64) CheckpointHandle {
		t.Helper()
		s := ps[i]
		vs := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
		kg := *s.opts.KeyGroups
		for j := 0; j < n; j += 2 {
			k := s.Key(fmt.Appendf(nil, "k%d", j))
			if int(k.kg) >= kg.Start && int(k.kg) <= kg.End {
				must(0, vs.Put(k, fmt.Sprint("p", j)))
			}
		}
		must(0, s.seal())
		must(0, s.WaitBackground())
		must(0, s.e.CompactLSM())
		h := must(s.Checkpoint(ctx, id, nil))
		must(0, s.NotifyCheckpointComplete(id))
		must(0, s.WaitCheckpointGC())
		return h
	}
	step(0, 10)
	step(0, 11)
	// Part 1 checkpoints only now, incrementally on the tables it restored.
	h1 := must(ps[1].Checkpoint(ctx, 10, nil))
	if err := attackAllStored(ctx, st, h1); err != nil {
		t.Fatalf("part 1's first checkpoint after part 0's GC: %v", err)
	}
	must(0, ps[1].NotifyCheckpointComplete(10))
	must(0, ps[1].WaitCheckpointGC())
	r := must(Restore("/r1", opts(parts[1], "r1"), st, h1))
	check(r, "restore of part 1's checkpoint", false)
	must(0, r.Close())
	// Both move off the restored tables: the old lineage keeps its claim markers only.
	h0 := step(0, 12)
	step(1, 11)
	h1 = step(1, 12)
	must(0, ps[0].WaitCheckpointGC())
	for i, h := range []CheckpointHandle{h0, h1} {
		if err := attackAllStored(ctx, st, h); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	reached := map[string]bool{}
	for _, owner := range []string{"p0", "p1"} {
		for _, id := range must(checkpoint.ListCheckpoints(ctx, st, owner)) {
			for _, o := range must(checkpoint.ReadManifest(ctx, st, owner, id)).Objects {
				reached[o.Name] = true
			}
		}
	}
	for _, o := range must(st.List(ctx, "x/")) {
		if _, _, _, ok := checkpoint.ParseClaimMarkerName(o.Name); !ok && !reached[o.Name] {
			t.Errorf("the claimed lineage still holds %s, which no claimant reaches", o.Name)
		}
		if strings.HasSuffix(o.Name, checkpoint.ManifestFile) {
			t.Errorf("the claimed lineage still holds its manifest %s", o.Name)
		}
	}
	check(ps[0], "part 0", true)
	check(ps[1], "part 1", true)
}
