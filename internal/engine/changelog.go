package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/scheduler"
)

// Checkpoints with the changelog (doc.go, "Changelog"): Flink's generic log-based
// incremental checkpoints (FLIP-158) over package changelog.
//
// Generations. The engine writes its records into a chain of changelog.Logs, one per
// materialization cut: the generation opened at the cut of a materialization at seq M holds
// exactly the records with seq > M (until the next cut). So a segment never straddles a
// materialization, and a checkpoint based on materialization M lists the segments of M's
// generation and every later one: replaying all of them (up to the checkpoint's LastSeq) on
// top of M's tables gives the state at the cut, with no sequence number to store in the
// manifest (no format change). Truncation closes the generations before the materialization
// of a completed checkpoint; their objects go by garbage collection, by reachability.

// Defaults of ChangelogOptions (Flink's state.backend.changelog.periodic-materialize.interval
// and materialization.max-allowed-failures).
const (
	DefaultMaterializationInterval    = 10 * time.Minute
	DefaultMaxMaterializationFailures = 3
	// materializationRetry is the least time between a failed materialization and the next.
	materializationRetry = time.Second
	// persistCheckEvery is how many logged writes go between two PersistDue checks (a clock
	// read each).
	persistCheckEvery = 64
)

// ChangelogOptions turn the changelog on (Options.Changelog).
type ChangelogOptions struct {
	// Writer receives the records: a Writer shared by several engines. nil: the engine
	// creates its own from NewWriter, with InFlight set to its checkpoints' in-flight set (so
	// its GC never deletes a segment a Log still references), and closes it at Close.
	Writer *changelog.Writer
	// NewWriter configures the engine's own Writer when Writer is nil.
	NewWriter changelog.WriterOptions
	// Spec is what a materialization needs of a checkpoint spec: Storage, Owner (also the
	// Logs' store id), MaxParallelism, KeyGroups. ID and the blobs are ignored.
	Spec CheckpointSpec
	// MaterializationInterval is the time between materializations (0: the default, 10 min;
	// negative: only the space-amplification cap starts them).
	MaterializationInterval time.Duration
	// MaxMaterializationFailures consecutive failed materializations stop the engine
	// (sticky error); 0: 3.
	MaxMaterializationFailures int
	// SpaceAmplificationCap: a materialization starts early once the bytes logged since the
	// last materialization exceed (cap − 1) × the materialized size; 0: off. At least 1.
	SpaceAmplificationCap float64
}

// clState is the engine's changelog bookkeeping (owner only, except what the tasks share,
// which is marked).
type clState struct {
	o    ChangelogOptions
	gens []*clGen    // oldest first; the last takes the appends
	mats []*matState // durable materializations still referenced, oldest first
	// pendingMat maps a durable checkpoint id to the materialization it is based on.
	pendingMat map[uint64]*matState

	run      *PendingCheckpoint // the background materialization in flight
	fails    int
	lastCut  time.Time // the last materialization cut (or Open)
	logBytes int64     // record bytes appended since the last materialization cut
	n        uint32    // writes since the last PersistDue check
	// replaying: ReplayChangelog is applying restored records; Apply does not log them again
	// (a restoring Store has no materialization, so its first checkpoint is native and holds
	// them), and no materialization starts meanwhile.
	replaying bool

	persist     *scheduler.Handle
	persistDone atomic.Bool
	persistErr  error // shared with the persist task until persistDone

	materializations int64
	matFailures      int64
	persists         int64
	lastErr          error
}

// clSegment names one changelog segment: its object and offset.
type clSegment struct {
	name string
	off  int64
}

// clGen is one generation: a Log holding the records with seq > after.
type clGen struct {
	log   *changelog.Log
	after uint64
}

// matState is a durable materialization: a native checkpoint's tables at seq seq.
type matState struct {
	seq     uint64
	gen     *clGen // the generation opened at its cut
	objects []checkpoint.Object
	tables  map[uint64]checkpoint.Object
	names   []string // held in flight while referenced (GC must not take them)
	size    int64
}

// initChangelog turns the changelog on (Open).
func (t *Engine) initChangelog(o *ChangelogOptions) error {
	if o.MaterializationInterval == 0 {
		o.MaterializationInterval = DefaultMaterializationInterval
	}
	if o.MaxMaterializationFailures == 0 {
		o.MaxMaterializationFailures = DefaultMaxMaterializationFailures
	}
	if o.Writer == nil {
		wo := o.NewWriter
		wo.InFlight = &t.ck.inflight
		w, err := changelog.NewWriter(wo)
		if err != nil {
			return fmt.Errorf("strata: changelog: %w", err)
		}
		o.Writer = w
		t.ownWriter = true
	}
	t.cl = &clState{o: *o, lastCut: time.Now()}
	_, err := t.cl.roll(t.f.Seq())
	return err
}

// roll opens a new generation for the records after seq after.
func (c *clState) roll(after uint64) (*clGen, error) {
	s := &c.o.Spec
	l, err := c.o.Writer.Log(s.Owner, changelog.KeyGroupRange{Start: s.KeyGroups.Start, End: s.KeyGroups.End})
	if err != nil {
		return nil, fmt.Errorf("strata: changelog: %w", err)
	}
	g := &clGen{log: l, after: after}
	c.gens = append(c.gens, g)
	return g, nil
}

// logChange appends the write op, just applied to the FreshTable, to the changelog (Apply
// step 4; doc.go, Changelog invariant 1). Its seq is the FreshTable's after the write (a write
// may take several; every one is <= the next cut and > the previous one). A refusal for memory
// persists the buffer on this goroutine — or, when nothing was buffered, waits for background
// work to free memory as a refused FreshTable write does (backpressure) — and retries until
// Options.BackpressureTimeout; then, and for any other refusal, the engine stops with a sticky
// error: the FreshTable holds a change the changelog lacks, which no checkpoint may miss.
func (t *Engine) logChange(op *Op) error {
	c := t.cl
	g := c.gens[len(c.gens)-1]
	kg := uint16(op.Key[0])<<8 | uint16(op.Key[1])
	var deadline time.Time
	for {
		err := g.log.Append(uint8(op.Kind), kg, t.f.Seq(), op.Key, op.UserKey, op.Value)
		if err == nil {
			break
		}
		if errors.Is(err, memory.ErrMemoryBudget) {
			if deadline.IsZero() {
				deadline = time.Now().Add(t.bpTimeout)
			}
			if time.Now().Before(deadline) {
				t.bpWaits++
				r, perr := c.o.Writer.Persist(context.Background())
				if perr != nil {
					c.lastErr = perr
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if r.Size > 0 {
					continue // the buffer's charge is refunded
				}
				// Nothing buffered to free: the tiers fill the budget (the changelog, a
				// writer's purpose, may not use the background reserve). Wait for the
				// background work that frees it, as a refused FreshTable write does; only the
				// owner installs it, so persisting alone would spin until the deadline.
				if t.backpressure(err) != nil {
					time.Sleep(time.Millisecond) // nothing in flight yet: a persist or pollChangelog may free some
				}
				continue
			}
		}
		t.stick("changelog append", err)
		return t.bgErr
	}
	c.logBytes += int64(len(op.Key) + len(op.UserKey) + len(op.Value) + 16)
	if c.n++; c.n >= persistCheckEvery {
		c.n = 0
		t.pollChangelog(time.Now())
	}
	return nil
}

// pollChangelog submits a background persist when one is due and none runs, and starts a
// materialization when one is due (owner).
func (t *Engine) pollChangelog(now time.Time) {
	c := t.cl
	if c == nil || t.closing {
		return
	}
	if c.persist != nil && c.persistDone.Load() {
		c.persist = nil
		if c.persistErr != nil {
			c.lastErr = c.persistErr
		}
	}
	if c.persist == nil && c.o.Writer.PersistDue(now) {
		c.persistDone.Store(false)
		c.persistErr = nil
		w := c.o.Writer
		h, err := t.sched.SubmitMetered(scheduler.Upload, "changelog persist", t.meter(BgChangelogPersist), func(ctx context.Context) error {
			defer c.persistDone.Store(true)
			defer recoverInto(&c.persistErr, "changelog persist")
			var r changelog.PersistResult
			r, c.persistErr = w.Persist(ctx)
			t.costBytes(BgChangelogPersist, 0, r.Size)
			return c.persistErr
		})
		if err == nil {
			c.persist = h
			c.persists++
		}
	}
	if c.run == nil && t.materializationDue(now) {
		if err := t.startMaterialization(now); err != nil {
			c.lastErr = err
			c.lastCut = now.Add(materializationRetry - c.o.MaterializationInterval) // retry later
		}
	}
}

// materializationDue reports whether a materialization should start: the interval has passed
// since the last cut, or the log outgrew the space-amplification cap.
func (t *Engine) materializationDue(now time.Time) bool {
	c := t.cl
	if c.logBytes == 0 {
		return false
	}
	if iv := c.o.MaterializationInterval; iv > 0 && now.Sub(c.lastCut) >= iv {
		return true
	}
	if cp := c.o.SpaceAmplificationCap; cp >= 1 && len(c.mats) > 0 {
		m := c.mats[len(c.mats)-1]
		return float64(c.logBytes) > (cp-1)*float64(m.size)
	}
	return false
}

// cut pins the state for a native checkpoint or a materialization (owner): seals the active
// segment, pins the sealed segments, the slices and the LsmStore version, and — with the
// changelog on — opens the generation of the records after the cut.
func (t *Engine) cut(p *PendingCheckpoint) error {
	if err := t.f.Seal(); err != nil {
		return err
	}
	t.checkSealed()
	p.segs = t.f.Sealed()
	t.f.PinSealed()
	p.ssnap = t.sl.Snapshot()
	if t.db != nil {
		p.lsnap = t.db.Snapshot()
	}
	p.seq = t.f.Seq()
	if t.cl != nil {
		g, err := t.cl.roll(p.seq)
		if err != nil {
			t.releaseCheckpoint(p)
			return err
		}
		p.gen = g
		t.cl.lastCut, t.cl.logBytes = time.Now(), 0
	}
	return nil
}

// startMaterialization cuts a materialization and submits its upload (owner): a native
// checkpoint that commits no manifest; its tables become the base of later changelog
// checkpoints once durable (installMaterialization).
func (t *Engine) startMaterialization(now time.Time) error {
	if t.low != nil && t.db == nil {
		return ErrNoCheckpoint
	}
	c := t.cl
	spec := c.o.Spec
	spec.ID = max(t.ck.lastCompleted, 1) // names only: they carry a random part
	p := &PendingCheckpoint{spec: spec, start: now, base: t.ck.base, baseID: t.ck.baseID, noCommit: true}
	if err := t.cut(p); err != nil {
		return err
	}
	p.pause = time.Since(now)
	h, err := t.sched.SubmitMetered(scheduler.Upload, "materialization", t.meter(BgMaterialization), func(ctx context.Context) error {
		defer t.finished(&p.fin)
		defer recoverInto(&p.err, "materialization")
		p.err = t.upload(ctx, p)
		t.costBytes(BgMaterialization, 0, p.res.UploadedBytes)
		return p.err
	})
	if err != nil {
		t.releaseCheckpoint(p)
		return err
	}
	p.h = h
	c.run = p
	return nil
}

// installMaterialization ends a finished materialization (install, owner): a durable one
// becomes the base of later changelog checkpoints; a failed one counts towards
// MaxMaterializationFailures.
func (t *Engine) installMaterialization() {
	c := t.cl
	p := c.run
	if p == nil {
		return
	}
	if !p.fin.Load() && p.memDone.Load() {
		t.releaseMemory(p)
	}
	if !p.fin.Load() {
		if !isDone(p.h) {
			return
		}
		p.err = fmt.Errorf("strata: materialization: %w", context.Canceled)
	}
	c.run = nil
	if p.err != nil {
		t.releaseCheckpoint(p)
		c.fails++
		c.matFailures++
		c.lastErr = p.err
		c.lastCut = time.Now().Add(materializationRetry - c.o.MaterializationInterval)
		if c.fails >= c.o.MaxMaterializationFailures {
			t.stick("materialization", fmt.Errorf("%d consecutive failures, the last: %w", c.fails, p.err))
		}
		return
	}
	c.fails = 0
	c.materializations++
	t.keepMaterialization(p)
	t.releaseCheckpoint(p)
}

// keepMaterialization records durable checkpoint p (a materialization, or a native
// checkpoint with the changelog on) as the newest materialization, holding its objects in
// flight until a completed checkpoint supersedes it (owner, before releaseCheckpoint).
func (t *Engine) keepMaterialization(p *PendingCheckpoint) *matState {
	m := &matState{seq: p.seq, gen: p.gen, tables: p.tables}
	for _, o := range p.res.Manifest.Objects {
		if o.Kind == checkpoint.KindTable {
			m.objects = append(m.objects, o)
			m.names = append(m.names, o.Name)
			m.size += o.Size
		}
	}
	t.ck.inflight.Add(m.names...)
	// A background materialization and a native checkpoint may end out of cut order: keep
	// the list in seq order, so the last one is the newest state.
	t.cl.mats = append(t.cl.mats, m)
	slices.SortStableFunc(t.cl.mats, func(a, b *matState) int { return cmp.Compare(a.seq, b.seq) })
	return m
}

// startChangelogCheckpoint is StartCheckpoint with the changelog on and a durable
// materialization: the cut only marks the sequence number; the task persists the log's tail
// and commits a manifest listing the materialization's tables and the segments after it.
func (t *Engine) startChangelogCheckpoint(spec CheckpointSpec, start time.Time) (*PendingCheckpoint, error) {
	c := t.cl
	m := c.mats[len(c.mats)-1]
	i := slices.Index(c.gens, m.gen)
	if i < 0 {
		panic("strata: invariant: a materialization's generation was truncated while it is the newest")
	}
	p := &PendingCheckpoint{spec: spec, start: start, base: m.tables, baseID: t.ck.baseID,
		memReleased: true, seq: t.f.Seq(), mat: m, gens: slices.Clone(c.gens[i:]), clPrev: t.ck.clPrev}
	if spec.Timers != nil {
		// Timers are snapshotted whole at every checkpoint, changelog ones too: they are not
		// logged (doc.go, "Timers"). The frozen timers are the checkpoint's only memory pin.
		p.timers, p.memReleased = spec.Timers(), false
	}
	t.ck.running = append(t.ck.running, p)
	p.pause = time.Since(start)
	h, err := t.sched.SubmitMetered(scheduler.Upload, "changelog checkpoint", t.meter(BgCheckpoint), func(ctx context.Context) error {
		defer t.finished(&p.fin)
		defer recoverInto(&p.err, "changelog checkpoint")
		p.err = t.uploadChangelog(ctx, p)
		// The changelog segments it lists new were written by persists (counted there), or by
		// its own Log.Checkpoint: the class counts the rest, timers and manifest.
		t.costBytes(BgCheckpoint, 0, p.res.UploadedBytes-p.clNew)
		return p.err
	})
	if err != nil {
		t.ck.running = t.ck.running[:len(t.ck.running)-1]
		t.releaseMemory(p)
		return nil, err
	}
	p.h = h
	return p, nil
}

// uploadChangelog is the task of a changelog checkpoint: persist the tail up to the cut's seq
// (one Writer.Persist if needed) and commit the manifest.
func (t *Engine) uploadChangelog(ctx context.Context, p *PendingCheckpoint) error {
	spec := &p.spec
	m := &checkpoint.Manifest{ID: spec.ID, Parent: p.baseID, Epoch: spec.Epoch,
		CreatedUnixMilli: p.start.UnixMilli(), MaxParallelism: spec.MaxParallelism, KeyGroups: spec.KeyGroups,
		Registry: spec.Registry, InputPosition: spec.InputPosition, OperatorState: spec.OperatorState, LastSeq: p.seq}
	if h := t.ck.hook; h != nil {
		h()
	}
	tm, tmPath, err := t.timerObject(ctx, p)
	t.memWritten(p)
	if tmPath != "" {
		defer t.ck.tmpFS.Remove(tmPath)
	}
	if err != nil {
		return fmt.Errorf("strata: checkpoint %d: timers: %w", spec.ID, err)
	}
	m.Objects = slices.Clone(p.mat.objects)
	p.tables = p.mat.tables
	res := &p.res
	res.ReusedObjects, res.ReusedBytes = len(p.mat.objects), p.mat.size
	p.clNames = map[clSegment]bool{}
	for _, g := range p.gens {
		hs, err := g.log.Checkpoint(ctx, p.seq)
		if err != nil {
			return fmt.Errorf("strata: checkpoint %d: changelog: %w", spec.ID, err)
		}
		for _, h := range hs {
			h.KeyGroups.Start = max(h.KeyGroups.Start, spec.KeyGroups.Start)
			h.KeyGroups.End = min(h.KeyGroups.End, spec.KeyGroups.End)
			m.Objects = append(m.Objects, h)
			t.hold(p, h.Name)
			// A segment the previous checkpoint listed already is reused, not uploaded again:
			// what this one stored is the tail since then.
			seg := clSegment{h.Name, h.Offset}
			p.clNames[seg] = true
			if p.clPrev[seg] {
				res.ReusedObjects++
				res.ReusedBytes += h.Length
			} else {
				res.UploadedObjects++
				res.UploadedBytes += h.Length
				p.clNew += h.Length
			}
		}
	}
	if err := t.putTimers(ctx, p, m, tm, tmPath); err != nil {
		return err
	}
	return t.commit(ctx, p, m)
}

// truncateChangelog runs when checkpoint id completes (CompleteCheckpoint, owner): the
// generations before its materialization are closed (Flink's truncate after
// materialization) and older materializations stop holding their objects in flight. The
// objects themselves go by garbage collection, once no retained manifest reaches them.
func (t *Engine) truncateChangelog(id uint64) {
	c := t.cl
	m, ok := c.pendingMat[id]
	for pid := range c.pendingMat {
		if pid <= id {
			delete(c.pendingMat, pid)
		}
	}
	if !ok {
		return
	}
	i := slices.Index(c.mats, m)
	if i < 0 {
		return // an older materialization than one already truncated to
	}
	for _, old := range c.mats[:i] {
		t.ck.inflight.Release(old.names...)
	}
	c.mats = slices.Delete(c.mats, 0, i)
	j := slices.Index(c.gens, m.gen)
	for _, g := range c.gens[:j] {
		g.log.Close()
	}
	c.gens = slices.Delete(c.gens, 0, j)
}

// closeChangelog closes the generations' Logs and releases what the materializations hold
// (Close, after the scheduler stopped).
func (t *Engine) closeChangelog() {
	c := t.cl
	if c == nil {
		return
	}
	if c.run != nil {
		t.releaseCheckpoint(c.run)
		c.run = nil
	}
	for _, g := range c.gens {
		g.log.Close()
	}
	c.gens = nil
	for _, m := range c.mats {
		t.ck.inflight.Release(m.names...)
	}
	c.mats = nil
	if t.ownWriter {
		c.o.Writer.Close()
	}
}

// ChangelogStats describes the changelog of an engine.
type ChangelogStats struct {
	// Enabled is false when the changelog is off (every other field 0).
	Enabled bool
	// Generations is the number of Logs not truncated; Handles their persisted segments.
	Generations, Handles int
	// LogBytes estimates the record bytes appended since the last materialization cut.
	LogBytes int64
	// Materializations counts the durable ones, MaterializationFailures the failed ones;
	// MaterializedSeq is the seq of the newest durable one (0: none).
	Materializations, MaterializationFailures int64
	MaterializedSeq                           uint64
	// MaterializationRunning is true while one uploads.
	MaterializationRunning bool
	// Persists counts the background persists submitted.
	Persists int64
	// LastError is the last failure of a persist or a materialization, nil if none.
	LastError error
}

// ChangelogStats returns the changelog's figures (owner).
func (t *Engine) ChangelogStats() ChangelogStats {
	c := t.cl
	if c == nil {
		return ChangelogStats{}
	}
	t.settleCheckpoints()
	s := ChangelogStats{Enabled: true, Generations: len(c.gens), LogBytes: c.logBytes,
		Materializations: c.materializations, MaterializationFailures: c.matFailures,
		MaterializationRunning: c.run != nil, Persists: c.persists, LastError: c.lastErr}
	for _, g := range c.gens {
		hs, _ := g.log.Handles(^uint64(0))
		s.Handles += len(hs)
	}
	if len(c.mats) > 0 {
		s.MaterializedSeq = c.mats[len(c.mats)-1].seq
	}
	return s
}

// Materialize starts a materialization now if none runs (tests, and callers that want one
// before a restart), and waits for it. Errors: the materialization's, ErrNoCheckpoint when the
// changelog is off. Owner only.
func (t *Engine) Materialize(ctx context.Context) error {
	c := t.cl
	if c == nil {
		return fmt.Errorf("%w: the changelog is off", ErrNoCheckpoint)
	}
	if t.bgErr != nil {
		return t.bgErr
	}
	if c.run == nil {
		if err := t.startMaterialization(time.Now()); err != nil {
			return err
		}
	}
	p := c.run
	select {
	case <-p.h.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	t.install()
	return p.err
}

// ChangelogWriter and ChangelogWriterOptions are package changelog's, for the root package
// (which does not import the tiers).
type (
	ChangelogWriter        = changelog.Writer
	ChangelogWriterOptions = changelog.WriterOptions
)

// ChangelogCache is package changelog's Cache, for the root package.
type ChangelogCache = changelog.Cache

// ChangelogCacheStats are package changelog's CacheStats.
type ChangelogCacheStats = changelog.CacheStats

// NewChangelogCache is changelog.NewCache.
func NewChangelogCache(dir string, idle time.Duration) (*ChangelogCache, error) {
	return changelog.NewCache(dir, idle)
}

// NewChangelogWriter is changelog.NewWriter.
func NewChangelogWriter(o ChangelogWriterOptions) (*ChangelogWriter, error) {
	return changelog.NewWriter(o)
}

// ReplayChangelog applies the changelog segments listed by sources (restored manifests) to
// the engine, for the key groups kg: every record with seq <= its manifest's LastSeq, in seq
// order, through Apply (Restore, after the tables; doc.go, "Changelog": the segments a
// manifest lists all come after its materialization), read through cache when not nil
// (each object fetched once per process). With the changelog on, the records are
// not logged again: the restoring Store has no materialization yet, so its first checkpoint
// is native and holds them. Records a later one supersedes are skipped (replayKeep). It
// returns the records applied and skipped.
// Errors: ReplayRange's (ErrCorruption naming the object, the storage's), Apply's. Owner only.
func (t *Engine) ReplayChangelog(ctx context.Context, s checkpoint.Storage, cache *ChangelogCache, sources []*checkpoint.Manifest, kg checkpoint.KeyGroupRange) (applied, skipped int64, err error) {
	if c := t.cl; c != nil {
		if len(c.mats) > 0 || c.run != nil {
			return 0, 0, errors.New("strata: invariant: changelog replay into a Store that has a materialization")
		}
		c.replaying = true
		defer func() { c.replaying = false }()
	}
	if cache != nil {
		r := cache.Reader(s)
		defer r.Close()
		s = r
	}
	for _, m := range sources {
		var segs []checkpoint.Object
		for _, o := range m.Objects {
			if o.Kind == checkpoint.KindChangelog {
				segs = append(segs, o)
			}
		}
		lo, hi := max(m.KeyGroups.Start, kg.Start), min(m.KeyGroups.End, kg.End)
		if len(segs) == 0 || lo > hi {
			continue
		}
		a, k, err := t.replaySource(ctx, s, m, segs, changelog.KeyGroupRange{Start: lo, End: hi})
		applied, skipped = applied+a, skipped+k
		if err != nil {
			return applied, skipped, replayError(m.ID, err)
		}
	}
	return applied, skipped, nil
}
