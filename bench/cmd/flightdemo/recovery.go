package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/jobopts"
	"github.com/strata-db/strata/checkpoint"
)

// maxParallelism is the job's number of key groups (Flink's default lower bound): the unit of
// rescaling, fixed for the life of the job's checkpoints.
const maxParallelism = strata.DefaultMaxParallelism

// defaultCheckpointEvery is the default checkpoint interval in events: a 3 M-event run takes
// 59 checkpoints, one every ~0.15 s at the demo's throughput on 2 cores — short, as the
// changelog makes checkpoints cheap whatever the state's size. Inputs with fewer than 12
// intervals of it checkpoint every twelfth of their events instead, so that a small input
// checkpoints as often.
const defaultCheckpointEvery = 50_000

// defaultMaterializeEvery is the default time between changelog materializations: a few in
// a ~10 s run, so that checkpoints move from one materialization to the next and truncation
// runs (Flink's default, 10 minutes, would make every checkpoint of the demo list the first
// materialization and the whole log since).
const defaultMaterializeEvery = 2 * time.Second

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
	opts := strata.Options{MemoryBudget: c.budget, MaxParallelism: maxParallelism, KeyGroups: kg, Clock: c.clock.now,
		HotTierSize: jobopts.HotTierSize(c.hot, c.budget)}
	// SegmentSize stays Strata's default from the budget (2 MiB at 64 MiB): the budget's fixed
	// parts — the active segment with its index, the transform's reserve of one segment, the
	// room kept for the next one — cost about 3.5 segments (Stats.Budget.Fixed, within an
	// eighth of the budget), and 16 MiB segments left 0–4 MiB of a 64 MiB budget for slices
	// (328 evictions, write amplification 15.6 in the default run).
	opts.Checkpoint = strata.CheckpointOptions{Storage: storage, Owner: ownerOf(kg), Retain: 1, RestoreMode: mode}
	if c.changelog {
		opts.Checkpoint.Changelog = &strata.ChangelogOptions{MaterializationInterval: c.materialize,
			SpaceAmplificationCap: c.spaceAmp}
	}
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
	// Mats is the number of changelog materializations the process's Stores had completed
	// by this checkpoint (cumulative over every Store the process opened); LogBytes the
	// changelog's bytes since the last materialization cut, summed over the job's Stores
	// (ChangelogStats.LogBytes: what a restore replays on top of the materialization).
	Mats, LogBytes int64
	// New is the bytes of the objects (table files, changelog segments) the checkpoint's
	// manifests list that the previous checkpoint of the same owner did not: what an
	// incremental checkpoint stores anew, whether its upload or a background changelog
	// persist before it wrote them. (With the changelog, CheckpointStats.UploadedBytes counts
	// every segment listed since the materialization, persisted before or not.)
	New int64
	// Changed is the bytes changed since the previous checkpoint: the logical bytes (keys,
	// map user keys, values) of the changes the job's Stores applied between the two cuts
	// (Stats.Written.Changed).
	Changed int64
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

	mats map[*strata.Store]int64 // materializations of every Store the job used, at its last checkpoint
	// changed is each Store's Stats.Written.Changed at the last cut.
	changed map[*strata.Store]int64

	storage checkpoint.Storage         // where the manifests are, for New
	listed  map[string]map[string]bool // by owner: the objects of its last checkpoint
}

// newBytes returns the bytes of the objects the manifest of h lists that the previous
// checkpoint of its owner did not (ckRecord.New), and remembers h's.
func (c *checkpointer) newBytes(h strata.CheckpointHandle) (int64, error) {
	m, err := checkpoint.ReadManifest(context.Background(), c.storage, h.Owner, h.ID)
	if err != nil {
		return 0, err
	}
	if c.listed == nil {
		c.listed = map[string]map[string]bool{}
	}
	prev, cur := c.listed[h.Owner], map[string]bool{}
	var n int64
	for _, o := range m.Objects {
		k, size := o.Name, o.Size
		if o.Packed {
			k, size = fmt.Sprintf("%s@%d", o.Name, o.Offset), o.Length
		}
		if cur[k] {
			continue
		}
		cur[k] = true
		if !prev[k] {
			n += size
		}
	}
	c.listed[h.Owner] = cur
	return n, nil
}

// start begins checkpoint c.nextID of every Store of j at position row, after finishing the
// one in flight.
func (c *checkpointer) start(j *job, row int) error {
	if _, err := c.finish(j); err != nil {
		return err
	}
	id := c.nextID
	pos := j.positionAt(row).encode()
	if c.changed == nil {
		c.changed = map[*strata.Store]int64{}
	}
	var changed int64
	for _, p := range j.parts {
		w := p.store.Stats().Written.Changed
		changed += w - c.changed[p.store]
		c.changed[p.store] = w
	}
	for _, p := range j.parts {
		pc, err := p.store.StartCheckpoint(id, pos)
		if err != nil {
			return err
		}
		c.pending = append(c.pending, pc)
	}
	c.nextID++
	c.pendingRec = ckRecord{ID: id, Events: row * j.K, Stores: len(j.parts), Changed: changed}
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
		n, err := c.newBytes(h)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", r.ID, err)
		}
		r.New += n
		hs = append(hs, h)
	}
	c.pending = c.pending[:0]
	if c.mats == nil {
		c.mats = map[*strata.Store]int64{}
	}
	for _, p := range j.parts {
		if err := p.store.NotifyCheckpointComplete(r.ID); err != nil {
			return nil, fmt.Errorf("checkpoint %d: complete: %w", r.ID, err)
		}
		cs := p.store.ChangelogStats()
		if cs.LastError != nil && cs.MaterializationFailures > 0 {
			fmt.Fprintf(os.Stderr, "flightdemo: checkpoint %d: changelog: %v\n", r.ID, cs.LastError)
		}
		c.mats[p.store] = cs.Materializations
		r.LogBytes += cs.LogBytes
	}
	for _, m := range c.mats {
		r.Mats += m
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
	Records  int64 // changelog records replayed
	Fetched  int64 // changelog objects fetched through the restore's ChangelogCache
	Hits     int64 // reads of them served to another Store by the cache
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
	c.clock.set(pos.MaxT) // the restored TTL state is judged by the event time it was written at
	var stores []*strata.Store
	t0 := time.Now()
	// One changelog cache for the process: each changelog object fetched once, whatever the
	// number of Stores restoring from it (kept for the default idle timeout; deleted at Close).
	cacheDir, err := os.MkdirTemp("", "flightdemo-clcache-")
	if err != nil {
		return nil, rec, err
	}
	defer os.RemoveAll(cacheDir)
	cache, err := strata.NewChangelogCache(cacheDir, -1)
	if err != nil {
		return nil, rec, err
	}
	defer cache.Close()
	for i, kg := range kgs {
		o := storeOptions(c, storage, kg, mode)
		o.Checkpoint.ChangelogCache = cache
		if len(kgs) > 1 { // subtask i of len(kgs): each gets one copy of the broadcast state
			o.SubtaskIndex, o.Parallelism = i, len(kgs)
		}
		s, err := strata.Restore(dirs[i], o, storage, hs...)
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
		rec.Records += st.ChangelogRecords
		stores = append(stores, s)
	}
	rec.Took = time.Since(t0)
	cs := cache.Stats()
	rec.Fetched, rec.Hits = cs.Fetches, cs.Hits
	return stores, rec, nil
}

// printRestore describes a restore.
func printRestore(out io.Writer, what string, r restoreRecord) {
	var from []string
	for _, h := range r.From {
		from = append(from, fmt.Sprintf("%d of %s", h.ID, h.Owner))
	}
	fmt.Fprintf(out, "restore (%s): checkpoint %v into %d Store(s) in %v (%d tables, %.1f MiB, %d hard-linked; %d changelog records replayed, "+
		"%d changelog objects fetched once for all Stores, %d reads shared); "+
		"list lengths and the open day re-read from state in %v; resuming at event %d\n",
		what, from, r.Stores, r.Took.Round(time.Microsecond), r.Tables, float64(r.Bytes)/(1<<20), r.Linked, r.Records, r.Fetched, r.Hits,
		r.Resume.Round(time.Microsecond), r.Position.Row*int(r.Position.K))
}

// printCheckpoints summarizes the checkpoints taken and the restores done.
func printCheckpoints(out io.Writer, c config, taken []ckRecord, restores []restoreRecord) {
	every := c.every
	if len(taken) == 0 {
		fmt.Fprintf(out, "checkpoints: none taken (every %d events)\n", every)
	} else {
		child := 0
		var sync, async, total []time.Duration
		var up, reused, upMax, logSum, logMax, childMats, mats, fresh, freshMax int64
		for _, r := range taken {
			if r.Child {
				child++
				childMats = max(childMats, r.Mats)
			} else {
				mats = max(mats, r.Mats)
			}
			sync = append(sync, r.SyncPause)
			async = append(async, r.AsyncDuration)
			total = append(total, r.SyncPause+r.AsyncDuration)
			up += r.Uploaded
			reused += r.Reused
			upMax = max(upMax, r.Uploaded)
			fresh += r.New
			freshMax = max(freshMax, r.New)
			logSum += r.LogBytes
			logMax = max(logMax, r.LogBytes)
		}
		by := ""
		if child > 0 {
			by = fmt.Sprintf(" (%d reported complete by the killed child process, %d after the restore)", child, len(taken)-child)
		}
		n := int64(len(taken))
		const mib = 1 << 20
		kind := "native incremental (-changelog=false)"
		if c.changelog {
			kind = fmt.Sprintf("with the changelog, materialized every %v", c.materialize)
			if c.spaceAmp > 0 {
				kind += fmt.Sprintf(" or at space amplification %g", c.spaceAmp)
			}
		}
		fmt.Fprintf(out, "checkpoints: %d taken every %d events, %s%s\n", len(taken), every, kind, by)
		fmt.Fprintf(out, "  sync pause   p50 %10v  p99 %10v  max %10v\n", quantile(sync, 0.5), quantile(sync, 0.99), quantile(sync, 1))
		fmt.Fprintf(out, "  async        p50 %10v  p99 %10v  max %10v\n", quantile(async, 0.5), quantile(async, 0.99), quantile(async, 1))
		fmt.Fprintf(out, "  duration     p50 %10v  p99 %10v  max %10v  (sync + async)\n", quantile(total, 0.5), quantile(total, 0.99), quantile(total, 1))
		fmt.Fprintf(out, "  bytes per checkpoint (objects not in the previous checkpoint): mean %.2f MiB, max %.2f MiB\n",
			float64(fresh)/float64(n)/mib, float64(freshMax)/mib)
		what := "uploaded"
		if c.changelog {
			what = "listed beyond the materialization (log segments since it, persisted before or by the checkpoint)"
		}
		fmt.Fprintf(out, "  %s per checkpoint: mean %.2f MiB, max %.2f MiB; reused mean %.1f MiB\n",
			what, float64(up)/float64(n)/mib, float64(upMax)/mib, float64(reused)/float64(n)/mib)
		if c.changelog {
			byChild := ""
			if child > 0 {
				byChild = fmt.Sprintf(" (%d by the killed child process, %d after the restore)", childMats, mats)
			}
			fmt.Fprintf(out, "  changelog: %d materializations%s; log since the last materialization at a checkpoint: mean %.2f MiB, max %.2f MiB, at the last %.2f MiB\n",
				childMats+mats, byChild, float64(logSum)/float64(n)/mib, float64(logMax)/mib, float64(taken[len(taken)-1].LogBytes)/mib)
		}
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
