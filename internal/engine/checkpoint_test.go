package engine

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/memory"
)

// TestCheckpointWaitKeepsHeldValues: waiting for a checkpoint (WaitCheckpoint), notifying its
// completion or abort (CompleteCheckpoint, AbortCheckpoint), waiting for its GC (WaitGC) and
// reading stats (Stats, ChangelogStats) install no tier work, so values read before them stay
// valid (doc.go: reads never install). CI's model run on arm64 caught a Wait that installed a
// finished transform and freed the segment a held value pointed into. Native checkpoints and
// changelog ones. (Moved from the root package, issue 26: the root's calls of the same names
// call these and nothing that installs.)
func TestCheckpointWaitKeepsHeldValues(t *testing.T) {
	for _, cl := range []bool{false, true} {
		t.Run(fmt.Sprintf("changelog=%v", cl), func(t *testing.T) {
			ctx := context.Background()
			st, err := checkpoint.NewDirStorage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			const owner = "held"
			kg := checkpoint.KeyGroupRange{Start: 0, End: 127}
			spec := CheckpointSpec{Storage: st, Owner: owner, MaxParallelism: 128, KeyGroups: kg}
			budget := memory.NewBudget(128 << 20)
			o := Options{Dir: t.TempDir(), Budget: budget, SegmentSize: 16 << 20, Workers: 2, UploadWorkers: 1,
				KeyGroups: kg, EvictionRoom: 20 << 20}
			if cl { // as the root's changelogEngineOptions with MaterializationInterval -1
				o.Changelog = &ChangelogOptions{
					NewWriter: ChangelogWriterOptions{Storage: st, Prefix: owner, Budget: budget,
						Threshold: OwnWriterThreshold(budget.Limit()), PreemptiveThreshold: OwnWriterThreshold(budget.Limit()) / 2},
					Spec: spec, MaterializationInterval: -1}
			}
			h := newHarness(t, o)
			gc := checkpoint.GCOptions{Owner: owner, Retain: 1, Grace: checkpoint.NoGrace}
			const val = 1
			v := bytes.Repeat([]byte("v"), 1000)
			const keys = 20000 // 20 MB: more than one 16 MiB segment
			key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
			for i := range keys {
				h.put(val, key(i), v)
			}
			for id := uint64(1); id <= 3; id++ {
				spec.ID = id
				p, err := h.e.StartCheckpoint(spec) // seals: a transform is queued
				if err != nil {
					t.Fatal(err)
				}
				type heldValue struct{ got, want []byte }
				var held []heldValue
				for i := 0; i < keys; i += 97 {
					b, _ := h.get(val, key(i))
					held = append(held, heldValue{b, bytes.Clone(b)})
				}
				before := h.e.Stats()
				for deadline := time.Now().Add(time.Minute); !h.e.Finished() && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if !h.e.Finished() {
					t.Fatalf("checkpoint %d: no background work finished in a minute", id)
				}
				if _, err := h.e.WaitCheckpoint(ctx, p); err != nil {
					t.Fatal(err)
				}
				if id == 2 {
					h.e.AbortCheckpoint(id, st, gc)
				} else {
					h.e.CompleteCheckpoint(id, st, gc)
				}
				if err := h.e.WaitGC(); err != nil {
					t.Fatal(err)
				}
				h.e.ChangelogStats()
				if after := h.e.Stats(); after.Transforms != before.Transforms || after.Compactions != before.Compactions {
					t.Fatalf("checkpoint %d: waiting and notifying installed tier work: transforms %d -> %d, compactions %d -> %d",
						id, before.Transforms, after.Transforms, before.Compactions, after.Compactions)
				}
				for i, x := range held {
					if !bytes.Equal(x.got, x.want) {
						t.Fatalf("checkpoint %d: held value %d changed", id, i)
					}
				}
				for i := range 2000 { // rewrite some: the next cut seals a segment again
					h.put(val, key(i), v)
				}
			}
		})
	}
}
