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
	// materializationRetry is the least time between a failed materialization and the next
	// (the floor of its backoff in retry.go: each attempt seals the active segment).
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
	// MaxMaterializationFailures is the number of consecutive failed materializations from
	// which ChangelogStats.MaterializationFailing reports the failure (Flink's
	// materialization.max-allowed-failures, which fails the job: here nothing stops, since a
	// failure of the checkpoint storage may pass and the local state does not need it; a
	// failed materialization is retried on the backoff of retry.go); 0: 3.
	MaxMaterializationFailures int
	// SpaceAmplificationCap: a materialization starts early once the bytes logged since the
	// last materialization exceed (cap − 1) × the live state's size (liveStateBytes), or once
	// the state shrank and the last materialization with the log after it exceed cap × it
	// (doc.go, "Changelog"); 0: off. At least 1.
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
	lastMatErr       error // the last failed materialization's error (Stats)
	// gone sums the counts of the generations truncated (closed): with the live ones', the
	// changelog's totals since Open (Stats); truncated is what they had persisted.
	gone changelog.LogStats

	// live is liveStateBytes as of liveAt (refreshed at most every liveRefresh); liveAtCut
	// its value at the last materialization cut.
	live, liveAtCut int64
	liveAt          time.Time
}

// changelogStats fills the changelog block of st (owner).
func (t *Engine) changelogStats(st *Stats) {
	c := t.cl
	if c == nil {
		return
	}
	c.publishLog() // Log.Stats counts published records
	a := c.gone
	for _, g := range c.gens {
		ls := g.log.Stats()
		a.AppendedRecords += ls.AppendedRecords
		a.AppendedBytes += ls.AppendedBytes
		a.PersistedRecords += ls.PersistedRecords
		a.PersistedBytes += ls.PersistedBytes
	}
	st.ChangelogAppendedRecords, st.ChangelogAppendedBytes = a.AppendedRecords, a.AppendedBytes
	st.ChangelogPersistedRecords, st.ChangelogPersistedBytes = a.PersistedRecords, a.PersistedBytes
	st.ChangelogTruncatedRecords, st.ChangelogTruncatedBytes = c.gone.PersistedRecords, c.gone.PersistedBytes
	st.Materializations, st.MaterializationFailures = c.materializations, c.matFailures
	if c.lastMatErr != nil {
		st.LastMaterializationError = c.lastMatErr.Error()
	}
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

// roll opens a new generation for the records after seq after; the previous one publishes
// its owner batch and returns the room reserved for appends it will not get. Each Log has an
// owner batch (changelog.Log.OwnerBatch): the owner appends without a mutex and publishes
// (publishLog) before it asks for a persist, at a checkpoint cut and here.
func (c *clState) roll(after uint64) (*clGen, error) {
	s := &c.o.Spec
	l, err := c.o.Writer.Log(s.Owner, changelog.KeyGroupRange{Start: s.KeyGroups.Start, End: s.KeyGroups.End})
	if err != nil {
		return nil, fmt.Errorf("strata: changelog: %w", err)
	}
	l.OwnerBatch()
	if n := len(c.gens); n > 0 {
		c.gens[n-1].log.Publish()
		c.gens[n-1].log.Unreserve()
	}
	g := &clGen{log: l, after: after}
	c.gens = append(c.gens, g)
	return g, nil
}

// reserveLog reserves the changelog room of write op before Apply changes the FreshTable
// (doc.go, "Changelog": reserve, write, append), so that a full log buffer refuses the write
// with nothing applied instead of refusing the append of an applied change. One atomic load
// while room is reserved; else reserveWait.
func (t *Engine) reserveLog(op *Op) error {
	l := t.cl.gens[len(t.cl.gens)-1].log
	err := l.Reserve(op.Key, op.UserKey, op.Value)
	if err == nil {
		return nil
	}
	return t.reserveWait(l, op, err)
}

// reserveWait is the slow path of reserveLog, after Reserve refused with err. A refusal for
// memory is backpressure: the writer persists the buffer on this goroutine (unless a persist
// waits for its retry after a failure of the checkpoint storage: retry.go's backoff, kind
// bgPersist) and reserves again; when that is still refused, a refusal of the Writer's
// Threshold (changelog.ErrThreshold) waits a moment (or for the persist's retry), and a
// refusal of the budget waits for the tiers' background work that frees memory as a refused
// FreshTable write does (the tiers may hold the budget) — never evicting state for the
// Writer's own limit — until Options.BackpressureTimeout; then the write fails with ErrMemoryBudget naming the
// persist's failure, not wrapping it — nothing was applied and the engine goes on. Any other
// refusal (a record too large to log, a closed log) is returned as is, likewise with nothing
// applied.
//
//go:noinline
func (t *Engine) reserveWait(l *changelog.Log, op *Op, err error) error {
	if !errors.Is(err, memory.ErrMemoryBudget) {
		return err
	}
	if serr := t.f.CheckSizes(op.Key, op.UserKey, op.Value); serr != nil {
		return serr // the FreshTable refuses it anyway: say why, without waiting
	}
	c := t.cl
	start := time.Now()
	deadline := start.Add(t.bpTimeout)
	t.bpWaits++
	t.clWaits++
	defer func() {
		d := int64(time.Since(start))
		t.bpNanos += d
		t.clNanos += d
	}()
	for {
		if !t.waiting(bgPersist) {
			c.publishLog()
			_, perr := c.o.Writer.Persist(context.Background())
			t.jobEnded(bgPersist, "changelog persist", perr)
			if perr != nil {
				c.lastErr = perr
			}
		}
		// The persist above, or the background one it waited behind, may have freed the
		// buffer: try first, before any other work.
		if err = l.Reserve(op.Key, op.UserKey, op.Value); err == nil || !errors.Is(err, memory.ErrMemoryBudget) {
			return err
		}
		// Still refused. The Writer's own limit (changelog.ErrThreshold: records of other
		// Stores of a shared Writer, or a persist that fails) is freed only by a persist:
		// sealing or evicting state would not help, and evicting for it pushed state that
		// fitted the budget to the LsmStore, whose caches then took the room for good (the
		// flight demo at 64 MiB, 2026-12-05). A refusal of the budget is the tiers' memory:
		// wait for their background work as a refused FreshTable write does.
		if errors.Is(err, changelog.ErrThreshold) || t.backpressure(err) != nil {
			// Wait for the persist's retry, or a moment.
			now := time.Now()
			d := time.Millisecond
			if b := &t.retry[bgPersist]; b.fails > 0 && now.Before(b.at) {
				d = max(d, b.at.Sub(now))
			}
			time.Sleep(max(min(d, deadline.Sub(now)), 0))
			if err = l.Reserve(op.Key, op.UserKey, op.Value); err == nil || !errors.Is(err, memory.ErrMemoryBudget) {
				return err
			}
		}
		if t.bgErr != nil {
			return t.bgErr
		}
		if !time.Now().Before(deadline) {
			t.bpFailures++
			if b := &t.retry[bgPersist]; b.fails > 0 {
				return fmt.Errorf("%w: the changelog buffer is full (WriterOptions.Threshold or the budget) and persisting it fails: %v", err, b.err)
			}
			return t.memoryError(err)
		}
	}
}

// logChange appends the write op, just applied to the FreshTable, to the changelog (end of
// Apply step 3; doc.go, "Changelog" and invariant 8). Its seq is the FreshTable's after the write (a write
// may take several; every one is <= the next cut and > the previous one). reserveLog reserved
// its room, so the append is not refused for memory: a refusal now is a broken invariant, and
// the engine stops with a sticky error, since the FreshTable holds a change the changelog
// lacks, which no checkpoint may miss.
func (t *Engine) logChange(op *Op) error {
	c := t.cl
	g := c.gens[len(c.gens)-1]
	kg := uint16(op.Key[0])<<8 | uint16(op.Key[1])
	if err := g.log.Append(uint8(op.Kind), kg, t.f.Seq(), op.Key, op.UserKey, op.Value); err != nil {
		t.stick("changelog append", fmt.Errorf("%w: the append of an applied change was refused: %w", errInvariant, err))
		return t.bgErr
	}
	c.logBytes += int64(len(op.Key) + len(op.UserKey) + len(op.Value) + 5) // v2 framing: 3–5 bytes
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
		t.jobEnded(bgPersist, "changelog persist", c.persistErr)
	}
	// A failed persist or materialization (the checkpoint storage refused) is retried here,
	// once its backoff has passed (retry.go; kick does not retry remote work).
	if c.persist == nil && !t.waiting(bgPersist) && c.o.Writer.PersistDue(now) {
		c.publishLog()
		c.persistDone.Store(false)
		c.persistErr = nil
		w := c.o.Writer
		h, err := t.sched.SubmitMetered(scheduler.Persist, "changelog persist", t.meter(BgChangelogPersist), func(ctx context.Context) error {
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
			t.submitted(bgPersist)
		}
	}
	if c.run == nil && !t.waiting(bgMaterialization) && t.materializationDue(now) {
		if err := t.startMaterialization(now); err != nil {
			c.matFailures++
			c.lastErr, c.lastMatErr = err, err
			c.lastCut = now.Add(materializationRetry - c.o.MaterializationInterval) // retry later
		}
	}
}

// publishLog hands the current generation's owner batch to its Log's buffer, where a
// persist takes it (owner; changelog.Log.Publish: a mutex once per persist, not per record).
func (c *clState) publishLog() {
	if n := len(c.gens); n > 0 { // none after closeChangelog
		c.gens[n-1].log.Publish()
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
	if cp := c.o.SpaceAmplificationCap; cp >= 1 {
		return t.spaceCapDue(now, cp)
	}
	return false
}

// cut pins the state for a native checkpoint or a materialization (owner): seals the active
// segment, pins the sealed segments, the slices and the LsmStore version, and — with the
// changelog on — opens the generation of the records after the cut.
func (t *Engine) cut(p *PendingCheckpoint) error {
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // the cut holds the lazy tail (invariant 34)
			return err
		}
	}
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
		t.cl.liveAtCut = t.liveStateBytes()
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
	t.submitted(bgMaterialization)
	return nil
}

// installMaterialization ends a finished materialization (install, owner): a durable one
// becomes the base of later changelog checkpoints; a failed one ends in jobEnded, like any
// background job — retried after its backoff when the failure may pass (the checkpoint
// storage refused: EIO, ENOSPC, a timeout), sticky only for damage or a broken invariant —
// and counts towards MaxMaterializationFailures, which only reports.
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
		c.lastErr, c.lastMatErr = p.err, p.err
		t.jobEnded(bgMaterialization, "materialization", p.err)
		if t.retry[bgMaterialization].fails == 0 {
			// Refused memory or cancelled: not a failure retry.go schedules; not before
			// materializationRetry, as a cut that failed.
			c.lastCut = time.Now().Add(materializationRetry - c.o.MaterializationInterval)
		}
		return
	}
	c.fails = 0
	t.jobEnded(bgMaterialization, "materialization", nil)
	c.materializations++
	if slices.Contains(c.gens, p.gen) {
		t.keepMaterialization(p)
	} // else a checkpoint cut at the same seq after it completed and truncated its generation
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
	// the list in cut order, so the last one is the newest state. Two cuts may have the same
	// seq (no write between them): the later cut's generation comes later in gens, and
	// truncation to it closes the earlier one's, so the order is seq, then generation.
	c := t.cl
	c.mats = append(c.mats, m)
	slices.SortStableFunc(c.mats, func(a, b *matState) int {
		if o := cmp.Compare(a.seq, b.seq); o != 0 {
			return o
		}
		return cmp.Compare(slices.Index(c.gens, a.gen), slices.Index(c.gens, b.gen))
	})
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
	c.publishLog() // the task's Log.Checkpoint persists every record up to the cut
	p := &PendingCheckpoint{spec: spec, start: start, base: m.tables, baseID: t.ck.baseID,
		memReleased: true, seq: t.f.Seq(), mat: m, gens: slices.Clone(c.gens[i:]), clPrev: t.ck.clPrev}
	if spec.timers != nil {
		// Timers are snapshotted whole at every checkpoint, changelog ones too: they are not
		// logged (doc.go, "Timers"). The frozen timers are the checkpoint's only memory pin.
		p.timers, p.memReleased = spec.timers(), false
	}
	t.ck.running = append(t.ck.running, p)
	p.pause = time.Since(start)
	h, err := t.sched.SubmitMetered(scheduler.Upload, "changelog checkpoint", t.meter(BgCheckpoint), func(ctx context.Context) error {
		defer t.finished(&p.fin)
		defer recoverInto(&p.err, "changelog checkpoint")
		p.err = lowerError(t.uploadChangelog(ctx, p)) // a full checkpoint storage is ErrNoSpace, as a native checkpoint's
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
		ls := g.log.Stats()
		c.gone.AppendedRecords += ls.AppendedRecords
		c.gone.AppendedBytes += ls.AppendedBytes
		c.gone.PersistedRecords += ls.PersistedRecords
		c.gone.PersistedBytes += ls.PersistedBytes
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
	t.dropUnreferencedChangelog()
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

// dropUnreferencedChangelog deletes, at Close, the changelog objects this engine's Logs
// persisted ahead of any checkpoint (background persists) that nothing will ever reference —
// Flink discards them when the backend closes; without it they outlive a job that ended,
// since only a completion of the lineage's checkpoints runs GC. An object is deleted only if
// every condition holds (doc.go, "Changelog"):
//
//  1. it holds a persisted, not truncated segment of one of this engine's Logs;
//  2. no manifest of the lineage in the storage names it (committed checkpoints, completed
//     or pending, whatever their epoch; the scheduler has stopped, so no checkpoint of this
//     engine commits later);
//  3. no other Log of the Writer holds a segment of it (another Store of the process, or a
//     Store of the same owner restored beside this one, still needs it);
//  4. with a Writer shared with other Stores, its footer lists only segments of this owner
//     (another Store's checkpoints may reference it, and this engine cannot read their
//     manifests).
//
// Best effort: a failed List or manifest read deletes nothing, a failed Delete leaves the
// object (garbage that GC of the lineage, if it runs again, collects). Owner, at Close.
func (t *Engine) dropUnreferencedChangelog() {
	c := t.cl
	var mine []*changelog.Log
	var objs []checkpoint.Object
	for _, g := range c.gens {
		mine = append(mine, g.log)
		for _, o := range g.log.Objects() {
			if !slices.ContainsFunc(objs, func(x checkpoint.Object) bool { return x.Name == o.Name }) {
				objs = append(objs, o)
			}
		}
	}
	if len(objs) == 0 {
		return
	}
	ctx := context.Background()
	spec := &c.o.Spec
	ids, err := checkpoint.ListCheckpoints(ctx, spec.Storage, spec.Owner)
	if err != nil {
		return
	}
	named := map[string]bool{}
	for _, id := range ids {
		m, err := checkpoint.ReadManifest(ctx, spec.Storage, spec.Owner, id)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // collected meanwhile
		}
		if err != nil {
			return
		}
		for _, o := range m.Objects {
			named[o.Name] = true
		}
	}
	for _, o := range objs {
		if named[o.Name] || c.o.Writer.HeldElsewhere(o.Name, mine...) {
			continue
		}
		if !t.ownWriter {
			stores, err := changelog.ObjectStores(ctx, spec.Storage, o.Name, o.Size)
			if err != nil || slices.ContainsFunc(stores, func(s string) bool { return s != spec.Owner }) {
				continue
			}
		}
		spec.Storage.Delete(ctx, o.Name) // best effort: see above
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
	// MaterializationFailing is true once MaxMaterializationFailures materializations in a
	// row have failed, until one is durable again.
	MaterializationFailing bool
	// Persists counts the background persists submitted.
	Persists int64
	// LiveStateBytes is the live state's size that SpaceAmplificationCap compares with
	// (liveStateBytes: the FreshTable's data bytes, the SliceTable's memory and the
	// LsmStore's table bytes, now); MaterializedBytes the newest durable materialization's
	// table bytes (0: none).
	LiveStateBytes, MaterializedBytes int64
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
		MaterializationRunning: c.run != nil, Persists: c.persists, LastError: c.lastErr,
		MaterializationFailing: c.fails >= c.o.MaxMaterializationFailures, LiveStateBytes: t.liveStateBytes()}
	if len(c.mats) > 0 {
		s.MaterializedBytes = c.mats[len(c.mats)-1].size
	}
	for _, g := range c.gens {
		hs, _ := g.log.Handles(^uint64(0))
		s.Handles += len(hs)
	}
	if len(c.mats) > 0 {
		s.MaterializedSeq = c.mats[len(c.mats)-1].seq
	}
	return s
}

// Materialize runs a materialization cut now and waits until it is durable or failed
// (Store.Materialize; tests, and callers that want one before a restart). One already
// running, cut before the call, is waited for first (its outcome counted as usual), so the
// cut of the one Materialize returns for is at or after the call. Errors: the
// materialization's (also counted in Stats.MaterializationFailures), ErrNoCheckpoint when the
// changelog is off, the sticky background error, ctx's (the materialization then goes on in
// the background). Owner only.
func (t *Engine) Materialize(ctx context.Context) error {
	c := t.cl
	if c == nil {
		return fmt.Errorf("%w: the changelog is off", ErrNoCheckpoint)
	}
	if t.bgErr != nil {
		return t.bgErr
	}
	if p := c.run; p != nil {
		select {
		case <-p.h.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		t.install()
		if t.bgErr != nil {
			return t.bgErr
		}
	}
	if c.run == nil {
		if err := t.startMaterialization(time.Now()); err != nil {
			c.matFailures++
			c.lastErr, c.lastMatErr = err, err
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

// OwnWriterThreshold is the Threshold of a Store's own changelog writer under a budget of
// limit bytes: limit/16, between 1 MiB and changelog.DefaultThreshold, so that a small
// budget's buffer does not take the state's room (the root's ChangelogOptions.Writer).
func OwnWriterThreshold(limit int64) int64 {
	return min(max(limit/16, 1<<20), changelog.DefaultThreshold)
}

// NewChangelogWriter is changelog.NewWriter.
func NewChangelogWriter(o ChangelogWriterOptions) (*ChangelogWriter, error) {
	return changelog.NewWriter(o)
}

// ReplayChangelog applies the changelog segments listed by sources (restored manifests) to
// the engine, for the key groups kg: every record with seq <= its manifest's LastSeq, in bulk
// as L0 files of the LsmStore while nothing else was written (doc.go, "Bulk changelog
// replay"), else in seq order through Apply (Restore, after the tables; doc.go, "Changelog":
// the segments a manifest lists all come after its materialization), read through cache when
// not nil (each object fetched once per process). With the changelog on, the records are
// not logged again: the restoring Store has no materialization yet, so its first checkpoint
// is native and holds them. Records a later one supersedes are skipped (replayKeep). It
// returns the records applied and skipped.
// Errors: ReplayRange's (ErrCorruption naming the object, the storage's), Apply's, the lower
// tier's. Owner only.
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
