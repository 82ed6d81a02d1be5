package nexmark

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// TestRestoreMatchesModel checkpoints a query's Strata run (changelog on) every 25 000
// events, discards the Store after event 115 000 as a crash would (nothing persisted since the
// last checkpoint), restores the newest checkpoint, replays from its input position and must
// end with the model's output: timers (q5, q11), merging windows (q11), lists (q20) and the
// dedup's values (q18) survive the checkpoint and its changelog.
func TestRestoreMatchesModel(t *testing.T) {
	const every, crashAt = testEvents / 8, testEvents * 23 / 40
	for _, name := range []string{"q5", "q11", "q18", "q19", "q20"} {
		t.Run(name, func(t *testing.T) {
			spec, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			want := runOn(t, spec, &ModelBackend{}, 0, testEvents)
			dir := t.TempDir()
			storage, err := checkpoint.NewDirStorage(filepath.Join(dir, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			opts := strata.Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20}
			opts.Checkpoint = strata.CheckpointOptions{Storage: storage, Owner: "t", Retain: 1,
				Changelog: &strata.ChangelogOptions{MaterializationInterval: -1, SpaceAmplificationCap: 1.5}}
			s, err := strata.Open(filepath.Join(dir, "a"), opts)
			if err != nil {
				t.Fatal(err)
			}
			var o Out
			q, err := spec.New(&StrataBackend{Store: s}, &o)
			if err != nil {
				t.Fatal(err)
			}
			id := uint64(0)
			d := Driver{Gen: NewGenerator(1, 0), Query: q, Out: &o, To: crashAt, CheckpointEvery: every, Checkpoint: func(n int64) error {
				id++
				_, err := s.Checkpoint(context.Background(), id, Position{Events: n, Out: o}.Encode())
				if err == nil {
					err = s.NotifyCheckpointComplete(id)
				}
				return err
			}}
			if err := d.Run(); err != nil { // Run fires the final watermark: the output past the checkpoint is dropped below
				t.Fatal(err)
			}
			if err := s.Discard(); err != nil {
				t.Fatal(err)
			}
			h, err := strata.LatestCheckpoint(context.Background(), storage, "t")
			if err != nil {
				t.Fatal(err)
			}
			pos, err := DecodePosition(h.InputPosition)
			if err != nil {
				t.Fatal(err)
			}
			if pos.Events != crashAt/every*every {
				t.Fatalf("restoring checkpoint %d at event %d, want the last before %d", h.ID, pos.Events, crashAt)
			}
			opts.Checkpoint.RestoreMode = strata.Claim
			r, err := strata.Restore(filepath.Join(dir, "b"), opts, storage, h)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			o = pos.Out
			if q, err = spec.New(&StrataBackend{Store: r}, &o); err != nil {
				t.Fatal(err)
			}
			d = Driver{Gen: NewGenerator(1, 0), Query: q, Out: &o, From: pos.Events, To: testEvents}
			if err := d.Run(); err != nil {
				t.Fatal(err)
			}
			if o != want {
				t.Fatalf("restored at event %d: strata %v, model %v", pos.Events, o, want)
			}
		})
	}
}

// TestPositionDecode checks the input position's round trip and each rejection.
func TestPositionDecode(t *testing.T) {
	p := Position{Events: 12345, Out: Out{Rows: -3, Changes: 9, Sum: 0xdeadbeef}}
	b := p.Encode()
	if got, err := DecodePosition(b); err != nil || got != p {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	for i, bad := range [][]byte{b[:len(b)-1], append([]byte{'x'}, b[1:]...), append(append([]byte{}, b[:4]...), append([]byte{0, 0, 0, 2}, b[8:]...)...)} {
		if _, err := DecodePosition(bad); err == nil {
			t.Errorf("case %d: decoded a bad position", i)
		}
	}
}
