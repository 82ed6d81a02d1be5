package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// maxParallelism is the job's number of key groups (Flink's default lower bound): the unit of
// rescaling, fixed for the life of the job's checkpoints.
const maxParallelism = strata.DefaultMaxParallelism

// defaultCheckpointEvery is the default checkpoint interval in events: a 3 M-event run takes
// 11 checkpoints. Inputs with fewer than 12 intervals of it checkpoint every twelfth of their
// events instead, so that a small input checkpoints as often.
const defaultCheckpointEvery = 250_000

// checkpointEvery resolves the -checkpoint-every flag (-1: the default) for a run of events.
func checkpointEvery(flag, events int) int {
	if flag >= 0 {
		return flag
	}
	return min(defaultCheckpointEvery, max(1, events/12))
}

// ownerOf names the checkpoint lineage of the Store owning key groups kg (nil: all), one per
// subtask as Flink names a subtask's state handles by its key-group range.
func ownerOf(kg *strata.KeyGroupRange) string {
	r := strata.KeyGroupRange{Start: 0, End: maxParallelism - 1}
	if kg != nil {
		r = *kg
	}
	return fmt.Sprintf("flights-kg-%05d-%05d", r.Start, r.End)
}

// storeOptions are the options of a Store of the job owning key groups kg (nil: all),
// checkpointing into storage, restored (if it is) in mode.
func storeOptions(c config, storage checkpoint.Storage, kg *strata.KeyGroupRange, mode strata.RestoreMode) strata.Options {
	opts := strata.Options{MemoryBudget: c.budget, MaxParallelism: maxParallelism, KeyGroups: kg}
	if c.budget > 0 && c.budget < 256<<20 {
		opts.SegmentSize = 16 << 20 // four segments at least in the budget
	}
	opts.Checkpoint = strata.CheckpointOptions{Storage: storage, Owner: ownerOf(kg), Retain: 1, RestoreMode: mode}
	return opts
}

// ckRecord is one checkpoint of the job: one id over all its Stores.
type ckRecord struct {
	ID     uint64
	Events int // events [0, Events) are in it
	Stores int
	// SyncPause is the sum over the Stores (their cuts run one after the other on the job's
	// goroutine); AsyncDuration the longest; the bytes are sums.
	SyncPause, AsyncDuration time.Duration
	Uploaded, Reused         int64
	Child                    bool // taken by the child process that was killed
}

// checkpointer takes the job's checkpoints: every Store at one id and one input position (an
// aligned checkpoint, as Flink's barriers make one), asynchronously — the replay goes on during
// the upload, and the checkpoint is waited for and completed when the next one starts (one at
// a time, as Strata requires) or at the end.
type checkpointer struct {
	every  int    // events between checkpoints, 0 = none
	nextID uint64 // the next checkpoint id (ids only grow within an owner)

	pending    []*strata.PendingCheckpoint // of the checkpoint in flight, one per Store
	pendingRec ckRecord

	taken  []ckRecord
	onDone func(ckRecord) // may be nil; sees every completed checkpoint
}

// start begins checkpoint c.nextID of every Store of j at position row, after finishing the
// one in flight.
func (c *checkpointer) start(j *job, row int) error {
	if _, err := c.finish(j); err != nil {
		return err
	}
	id := c.nextID
	pos := j.positionAt(row).encode()
	for _, p := range j.parts {
		pc, err := p.store.StartCheckpoint(id, pos)
		if err != nil {
			return err
		}
		c.pending = append(c.pending, pc)
	}
	c.nextID++
	c.pendingRec = ckRecord{ID: id, Events: row * j.K, Stores: len(j.parts)}
	return nil
}

// finish waits until the checkpoint in flight, if any, is durable on every Store of j,
// completes it (NotifyCheckpointComplete: the base of the next incremental checkpoint; older
// ones are garbage-collected, Retain 1) and returns its handles, one per Store.
func (c *checkpointer) finish(j *job) ([]strata.CheckpointHandle, error) {
	if len(c.pending) == 0 {
		return nil, nil
	}
	ctx := context.Background()
	r := c.pendingRec
	var hs []strata.CheckpointHandle
	for _, pc := range c.pending {
		h, err := pc.Wait(ctx)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", r.ID, err)
		}
		r.SyncPause += h.Stats.SyncPause
		r.AsyncDuration = max(r.AsyncDuration, h.Stats.AsyncDuration)
		r.Uploaded += h.Stats.UploadedBytes
		r.Reused += h.Stats.ReusedBytes
		hs = append(hs, h)
	}
	c.pending = c.pending[:0]
	for _, p := range j.parts {
		if err := p.store.NotifyCheckpointComplete(r.ID); err != nil {
			return nil, fmt.Errorf("checkpoint %d: complete: %w", r.ID, err)
		}
	}
	c.taken = append(c.taken, r)
	if c.onDone != nil {
		c.onDone(r)
	}
	return hs, nil
}

// now takes a checkpoint of every Store of j at position row and waits until it is complete.
func (c *checkpointer) now(j *job, row int) ([]strata.CheckpointHandle, error) {
	if err := c.start(j, row); err != nil {
		return nil, err
	}
	return c.finish(j)
}

// restoreRecord is one restore of the job's state.
type restoreRecord struct {
	From     []strata.CheckpointHandle
	Stores   int
	Took     time.Duration // Restore of every Store
	Resume   time.Duration // job.resume: re-deriving the job's memory from the state
	Bytes    int64         // table bytes restored, over the Stores
	Tables   int
	Linked   int
	Position position
}

// restore creates one Store per key-group range of kgs (nil: all key groups) in dirs, from the
// checkpoints hs (one per Store of the checkpointed job, all at one input position), in mode,
// and returns them with the position to resume from.
func restore(c config, storage checkpoint.Storage, rows int, dirs []string, kgs []*strata.KeyGroupRange,
	mode strata.RestoreMode, hs []strata.CheckpointHandle) ([]*strata.Store, restoreRecord, error) {
	rec := restoreRecord{From: hs, Stores: len(kgs)}
	if len(hs) == 0 {
		return nil, rec, fmt.Errorf("restore: no checkpoint")
	}
	for _, h := range hs[1:] {
		if !bytes.Equal(h.InputPosition, hs[0].InputPosition) {
			return nil, rec, fmt.Errorf("restore: checkpoints %d of %s and %d of %s are at different input positions",
				hs[0].ID, hs[0].Owner, h.ID, h.Owner)
		}
	}
	pos, err := decodePosition(hs[0].InputPosition, rows, c.scale)
	if err != nil {
		return nil, rec, fmt.Errorf("restore of checkpoint %d of %s: %w", hs[0].ID, hs[0].Owner, err)
	}
	rec.Position = pos
	var stores []*strata.Store
	t0 := time.Now()
	for i, kg := range kgs {
		s, err := strata.Restore(dirs[i], storeOptions(c, storage, kg, mode), storage, hs...)
		if err != nil {
			for _, s := range stores {
				s.Discard()
			}
			return nil, rec, err
		}
		st := s.RestoreStats()
		rec.Bytes += st.Bytes
		rec.Tables += st.Tables
		rec.Linked += st.Linked
		stores = append(stores, s)
	}
	rec.Took = time.Since(t0)
	return stores, rec, nil
}

// printRestore describes a restore.
func printRestore(out io.Writer, what string, r restoreRecord) {
	var from []string
	for _, h := range r.From {
		from = append(from, fmt.Sprintf("%d of %s", h.ID, h.Owner))
	}
	fmt.Fprintf(out, "restore (%s): checkpoint %v into %d Store(s) in %v (%d tables, %.1f MiB, %d hard-linked); "+
		"list lengths and the open day re-read from state in %v; resuming at event %d\n",
		what, from, r.Stores, r.Took.Round(time.Microsecond), r.Tables, float64(r.Bytes)/(1<<20), r.Linked,
		r.Resume.Round(time.Microsecond), r.Position.Row*int(r.Position.K))
}

// printCheckpoints summarizes the checkpoints taken and the restores done.
func printCheckpoints(out io.Writer, every int, taken []ckRecord, restores []restoreRecord) {
	if len(taken) == 0 {
		fmt.Fprintf(out, "checkpoints: none taken (every %d events)\n", every)
	} else {
		child := 0
		var sync, async []time.Duration
		var up, reused, upMax int64
		for _, r := range taken {
			if r.Child {
				child++
			}
			sync = append(sync, r.SyncPause)
			async = append(async, r.AsyncDuration)
			up += r.Uploaded
			reused += r.Reused
			upMax = max(upMax, r.Uploaded)
		}
		by := ""
		if child > 0 {
			by = fmt.Sprintf(" (%d reported complete by the killed child process, %d after the restore)", child, len(taken)-child)
		}
		n := int64(len(taken))
		const mib = 1 << 20
		fmt.Fprintf(out, "checkpoints: %d taken every %d events%s\n", len(taken), every, by)
		fmt.Fprintf(out, "  sync pause   p50 %10v  p99 %10v  max %10v\n", quantile(sync, 0.5), quantile(sync, 0.99), quantile(sync, 1))
		fmt.Fprintf(out, "  async        p50 %10v  p99 %10v  max %10v\n", quantile(async, 0.5), quantile(async, 0.99), quantile(async, 1))
		fmt.Fprintf(out, "  uploaded per checkpoint: mean %.1f MiB, max %.1f MiB; reused (incremental) mean %.1f MiB\n",
			float64(up)/float64(n)/mib, float64(upMax)/mib, float64(reused)/float64(n)/mib)
	}
	for _, r := range restores {
		fmt.Fprintf(out, "restore time: %v into %d Store(s) from %d checkpoint(s) (+ %v re-reading the job's memory)\n",
			r.Took.Round(time.Microsecond), r.Stores, len(r.From), r.Resume.Round(time.Microsecond))
	}
}

// quantile returns the q-quantile of ds by nearest rank (exact: there are few checkpoints).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)].Round(time.Microsecond)
}
