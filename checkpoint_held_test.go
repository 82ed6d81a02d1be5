package strata

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// TestCheckpointWaitKeepsHeldValues: waiting for a checkpoint, notifying its completion or
// abort, waiting for its GC and reading stats install no tier work, so values read through
// Bytes before them stay valid (package doc, invariant 2). CI's model run on arm64 caught a
// Wait that installed a finished transform and freed the segment a held value pointed into.
func TestCheckpointWaitKeepsHeldValues(t *testing.T) {
	for _, cl := range []bool{false, true} {
		t.Run(fmt.Sprintf("changelog=%v", cl), func(t *testing.T) {
			ctx := context.Background()
			st, err := checkpoint.NewDirStorage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			o := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
				Checkpoint: CheckpointOptions{Storage: st, Grace: checkpoint.NoGrace}}
			if cl {
				o.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
			}
			s, err := Open(t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
			val := bytes.Repeat([]byte("v"), 1000)
			const keys = 20000 // 20 MB: more than one 16 MiB segment
			for i := range keys {
				if err := v.Put(s.Key([]byte(fmt.Sprintf("key-%06d", i))), val); err != nil {
					t.Fatal(err)
				}
			}
			for id := uint64(1); id <= 3; id++ {
				p, err := s.StartCheckpoint(id, nil) // seals: a transform is queued
				if err != nil {
					t.Fatal(err)
				}
				type heldValue struct{ got, want []byte }
				var held []heldValue
				for i := 0; i < keys; i += 97 {
					b, _, err := v.Get(s.Key([]byte(fmt.Sprintf("key-%06d", i))))
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, heldValue{b, bytes.Clone(b)})
				}
				before := s.e.Stats()
				for deadline := time.Now().Add(time.Minute); !s.e.Finished() && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				if _, err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				if id == 2 {
					err = s.NotifyCheckpointAborted(id)
				} else {
					err = s.NotifyCheckpointComplete(id)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := s.WaitCheckpointGC(); err != nil {
					t.Fatal(err)
				}
				s.ChangelogStats()
				s.Stats()
				if after := s.e.Stats(); after.Transforms != before.Transforms || after.Compactions != before.Compactions {
					t.Fatalf("checkpoint %d: waiting and notifying installed tier work: transforms %d -> %d, compactions %d -> %d",
						id, before.Transforms, after.Transforms, before.Compactions, after.Compactions)
				}
				for i, h := range held {
					if !bytes.Equal(h.got, h.want) {
						t.Fatalf("checkpoint %d: held value %d changed", id, i)
					}
				}
				for i := range 2000 { // rewrite some: the next cut seals a segment again
					if err := v.Put(s.Key([]byte(fmt.Sprintf("key-%06d", i))), val); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
