package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/scheduler"
	"github.com/strata-db/strata/slice"
	"github.com/strata-db/strata/timer"
)

// Native checkpoints (doc.go, "Checkpoints").
//
// The cut (StartCheckpoint, owner goroutine) seals the active FreshTable segment — the only
// mutable part of the state; sealing copies nothing — and pins what is immutable at that
// install boundary: the sealed segments (fresh.Table.PinSealed), the slices
// (slice.Table.Snapshot) and the LsmStore's version (lsm.DB.Snapshot). Pinning defers the
// release of memory and files that installs free meanwhile; it does not stop them, so the
// task goes on writing and background work goes on moving data while the checkpoint uploads.
// The cut costs O(slices + table files) pointer copies.
//
// The upload (a scheduler task) writes the pinned memory — slices and sealed segments, merged
// in entry order with every version kept — as one table file (the "memory table"), puts it
// and every table file of the pinned version that the base checkpoint does not already hold,
// then commits the manifest with Create. The install (owner, at its next write or in
// WaitCheckpoint) releases the pins.
//
// A restored or later checkpoint places the tables at their levels, the memory table as the
// newest L0 file, so the state at the cut is exactly: the version's files (oldest level
// first) below the memory table. At the cut every datum is in exactly one tier (installs move
// data between tiers in one owner step), so no list append is counted twice.

// CheckpointSpec is what the caller (the root package) gives a checkpoint besides the state.
type CheckpointSpec struct {
	ID             uint64
	Storage        checkpoint.Storage
	Owner          string
	Epoch          uint64
	MaxParallelism uint32
	KeyGroups      checkpoint.KeyGroupRange
	Registry       []byte
	InputPosition  []byte
	// OperatorState is the root's operator state blob at the cut, written into the manifest of
	// every checkpoint, native or changelog (Flink's changelog backend snapshots operator state
	// fully at each checkpoint too). Materializations ignore it.
	OperatorState []byte
	// timers is set by StartCheckpoint (callers outside the engine cannot set it): when not nil, it
	// freezes the engine's timer queues at the cut (timers.go, timer.Freeze): called once
	// the checkpoint is accepted, on the owner goroutine, right after the tiers are pinned (a
	// changelog checkpoint: after its sequence number is taken), so the timers are exactly
	// those of the cut. The upload writes them as one object of one section per key group,
	// at every checkpoint, native or changelog (a full snapshot each time: doc.go, "Timers");
	// the snapshot is released with the memory pins. Materializations ignore it.
	timers func() *timer.Snapshot
	// Fence, when not nil, is called by the upload right before the manifest's commit (not
	// by materializations); it fences the older writers of the lineage if that is not done
	// yet (checkpoint.WriteFence) and returns the writer epoch the manifest records, which
	// replaces Epoch. Called from the upload's goroutine. An error fails the checkpoint.
	Fence func(ctx context.Context) (uint64, error)
}

// CheckpointResult describes a durable checkpoint.
type CheckpointResult struct {
	Manifest *checkpoint.Manifest
	// SyncPause is the time the owner spent in StartCheckpoint (the cut).
	SyncPause time.Duration
	// AsyncDuration is from the end of the cut to the manifest's commit.
	AsyncDuration time.Duration
	// UploadedBytes and UploadedObjects count the objects this checkpoint stored; ReusedBytes
	// and ReusedObjects those it references from its base (incremental).
	UploadedBytes, ReusedBytes     int64
	UploadedObjects, ReusedObjects int
	// MemoryBytes is the size of the memory table (slices and segments at the cut).
	MemoryBytes int64
}

// PendingCheckpoint is a checkpoint whose cut is done and whose upload may still run.
type PendingCheckpoint struct {
	spec  CheckpointSpec
	start time.Time
	pause time.Duration
	res   CheckpointResult
	clNew int64 // bytes of changelog segments res counts as uploaded (cost accounting)
	err   error
	fin   atomic.Bool // set by the task once res and err are final
	// memDone is set by the task once the memory table is written: the memory pins (segments,
	// slices) may go then, long before the uploads end.
	memDone atomic.Bool

	// Owner-only pins, released at install.
	timers      *timer.Snapshot // frozen at the cut (spec.timers), released with the memory pins
	segs        []*fresh.SealedSegment
	ssnap       *slice.Snapshot
	lsnap       *lsm.Snapshot
	seq         uint64
	base        map[uint64]checkpoint.Object // the base's table objects by LSM file number
	baseID      uint64
	tables      map[uint64]checkpoint.Object // written by the task: this checkpoint's tables
	released    bool                         // every pin released
	memReleased bool                         // the memory pins released
	h           *scheduler.Handle
	inflight    []string

	// Changelog (changelog.go).
	noCommit bool      // a materialization: no manifest
	gen      *clGen    // the generation opened at this cut (native cut, changelog on)
	mat      *matState // a changelog checkpoint: the materialization it is based on
	gens     []*clGen  // a changelog checkpoint: the generations it lists
	// clPrev: the segments the previous changelog checkpoint listed (read by the task);
	// clNames: those this one lists (written by the task, read by the owner after fin).
	clPrev, clNames map[clSegment]bool
}

// Done is closed when the checkpoint is durable, has failed or was cancelled. Any goroutine.
func (p *PendingCheckpoint) Done() <-chan struct{} { return p.h.Done() }

// ID is the checkpoint id.
func (p *PendingCheckpoint) ID() uint64 { return p.spec.ID }

// ckState is the engine's checkpoint bookkeeping (owner only, except inflight, which GC and
// uploads share).
type ckState struct {
	running       []*PendingCheckpoint
	base          map[uint64]checkpoint.Object // tables of the last completed checkpoint (or restore)
	baseID        uint64
	pending       map[uint64]map[uint64]checkpoint.Object // durable, not yet complete: id → tables
	lastCompleted uint64
	lastCommitted uint64 // the largest id committed by this engine, or restored of its lineage
	aborted       []uint64
	inflight      checkpoint.InFlight
	tmpDir        string
	tmpFS         vfs.FS
	// memOrders is how many entries the last memory table held: the next one's
	// sstable.WriterOptions.OrdersHint, so that its Writer does not grow its list of orders
	// by append (0.32 s of the flight demo's CPU, 2026-12-05). Written by the checkpoint's
	// background job; checkpoints run one at a time.
	memOrders atomic.Int64

	gc      *scheduler.Handle
	gcNext  *gcRun // the next GC to run once the running one ends
	gcErr   error
	gcDone  atomic.Bool
	gcRes   checkpoint.GCResult
	gcRuns  int64
	gcFails int64
	gcDel   int64
	lastGC  error

	checkpoints int64
	failures    int64
	// clPrev are the changelog segments the last durable changelog checkpoint listed (its
	// successor counts them as reused).
	clPrev map[clSegment]bool
}

// ErrCheckpointInProgress: a checkpoint is still uploading; Flink's default of one concurrent
// checkpoint (execution.checkpointing.max-concurrent-checkpoints = 1).
var ErrCheckpointInProgress = errors.New("strata: a checkpoint is still in progress")

// ErrNoCheckpoint: the engine cannot checkpoint (a test lower tier that is not an LsmStore).
var ErrNoCheckpoint = errors.New("strata: this store cannot checkpoint")

// SetCheckpointBase seeds the base of incremental checkpoints after a restore: the tables the
// restore imported, by LSM file number, as the objects they came from (clipped), the id of
// the checkpoint restored (parent: the next manifest's Parent, 0: none) and the id of the
// newest completed checkpoint of the Store's own lineage among those restored (completed, 0:
// none — GC's LastCompleted: a restored checkpoint of another owner is no completed checkpoint
// of this lineage, whose ids need not exceed it). Owner only, before the first checkpoint.
func (t *Engine) SetCheckpointBase(parent, completed uint64, tables map[uint64]checkpoint.Object) {
	t.ck.base, t.ck.baseID, t.ck.lastCompleted = tables, parent, completed
	t.ck.lastCommitted = max(t.ck.lastCommitted, completed)
}

// LastCommittedCheckpoint returns the largest checkpoint id whose manifest this engine
// committed, or the restored checkpoint of its own lineage if larger (SetCheckpointBase's
// completed); 0 for none. It first records the checkpoints that finished since (settles,
// moving no state). Owner only.
func (t *Engine) LastCommittedCheckpoint() uint64 {
	t.settleCheckpoints()
	return t.ck.lastCommitted
}

// StartCheckpoint cuts checkpoint spec.ID (the synchronous part) and submits its upload. The
// returned checkpoint is durable once Done is closed and WaitCheckpoint returns its result.
// Errors: ErrCheckpointInProgress, ErrNoCheckpoint, a sticky background failure, ErrClosed,
// ErrMemoryBudget if no memory is left to seal the active segment. Owner goroutine only.
func (t *Engine) StartCheckpoint(spec CheckpointSpec) (*PendingCheckpoint, error) {
	start := time.Now()
	if t.bgErr != nil {
		return nil, t.bgErr
	}
	if t.low != nil && t.db == nil {
		return nil, ErrNoCheckpoint
	}
	for _, p := range t.ck.running {
		if !p.released {
			t.install()
			break
		}
	}
	if len(t.ck.running) > 0 {
		return nil, fmt.Errorf("%w: checkpoint %d", ErrCheckpointInProgress, t.ck.running[0].spec.ID)
	}
	// A state that shrank with no write since (TTL cleanup, compactions) is seen here too:
	// the space-amplification cap is checked at each checkpoint, not only every 64 writes.
	t.pollChangelog(start)
	spec.timers = t.freezeTimers()
	if t.cl != nil && len(t.cl.mats) > 0 {
		return t.startChangelogCheckpoint(spec, start)
	}
	p := &PendingCheckpoint{spec: spec, start: start, base: t.ck.base, baseID: t.ck.baseID}
	if err := t.cut(p); err != nil {
		return nil, err
	}
	if spec.timers != nil {
		p.timers = spec.timers()
	}
	t.ck.running = append(t.ck.running, p)
	p.pause = time.Since(start)
	h, err := t.sched.SubmitMetered(scheduler.Upload, "checkpoint", t.meter(BgCheckpoint), func(ctx context.Context) error {
		defer t.finished(&p.fin)
		defer recoverInto(&p.err, "checkpoint")
		p.err = lowerError(t.upload(ctx, p)) // a full checkpoint storage is ErrNoSpace too
		t.costBytes(BgCheckpoint, 0, p.res.UploadedBytes)
		return p.err
	})
	if err != nil {
		t.ck.running = t.ck.running[:len(t.ck.running)-1]
		t.releaseCheckpoint(p)
		return nil, err
	}
	p.h = h
	return p, nil
}

// WaitCheckpoint waits until p is durable (or failed, or ctx is done) and returns its result;
// it releases the checkpoint's pins. Owner goroutine only.
func (t *Engine) WaitCheckpoint(ctx context.Context, p *PendingCheckpoint) (CheckpointResult, error) {
	select {
	case <-p.h.Done():
	case <-ctx.Done():
		return CheckpointResult{}, ctx.Err()
	}
	t.settleCheckpoints()
	return p.res, p.err
}

// settleCheckpoints installs what finished checkpoints, materializations and checkpoint GC
// left — pins released, results recorded — and nothing of the tiers, so values a read handed
// out stay valid (invariant 2): a pin only defers the free of what an install (at a write)
// already took out of every read's reach. It reports whether memory was given back. Owner.
func (t *Engine) settleCheckpoints() bool {
	if len(t.ck.running) == 0 && t.ck.gc == nil && (t.cl == nil || t.cl.run == nil) {
		return false
	}
	pinned := t.memPinned()
	t.installCheckpoints()
	return t.memPinned() < pinned
}

// installCheckpoints releases the pins of finished checkpoints and records the durable ones as
// pending completion (install, owner).
func (t *Engine) installCheckpoints() {
	for i := 0; i < len(t.ck.running); {
		p := t.ck.running[i]
		if !p.fin.Load() && p.memDone.Load() {
			t.releaseMemory(p)
		}
		if !p.fin.Load() {
			select {
			case <-p.h.Done():
				// The task sets fin before Done closes: if it finished between the load above
				// and this select, its result stands (it was reported cancelled, a durable
				// checkpoint lost to the job). Only a task dropped before it ran leaves fin unset.
				if !p.fin.Load() {
					p.err = fmt.Errorf("strata: checkpoint %d: %w", p.spec.ID, context.Canceled)
				}
			default:
				i++
				continue
			}
		}
		t.ck.running = slices.Delete(t.ck.running, i, i+1)
		t.releaseCheckpoint(p)
		if p.err != nil {
			t.ck.failures++
			continue
		}
		t.ck.checkpoints++
		t.ck.lastCommitted = max(t.ck.lastCommitted, p.spec.ID)
		if p.clNames != nil {
			t.ck.clPrev = p.clNames
		}
		if slices.Contains(t.ck.aborted, p.spec.ID) {
			continue
		}
		if t.ck.pending == nil {
			t.ck.pending = map[uint64]map[uint64]checkpoint.Object{}
		}
		t.ck.pending[p.spec.ID] = p.tables
		if c := t.cl; c != nil {
			m := p.mat
			if m == nil { // a native checkpoint with the changelog on is a materialization
				m = t.keepMaterialization(p)
			}
			if c.pendingMat == nil {
				c.pendingMat = map[uint64]*matState{}
			}
			c.pendingMat[p.spec.ID] = m
		}
	}
	if t.cl != nil {
		t.installMaterialization()
	}
	if h := t.ck.gc; h != nil && isDone(h) {
		t.ck.gc = nil
		t.ck.gcRuns++
		t.ck.gcDel += int64(len(t.ck.gcRes.Deleted))
		if t.ck.gcErr != nil {
			t.ck.gcFails++
			t.ck.lastGC = t.ck.gcErr
		}
		if r := t.ck.gcNext; r != nil {
			t.ck.gcNext = nil
			t.submitGC(r)
		}
	}
}

// isDone reports whether a task has ended (run, or dropped by Cancel or Close).
func isDone(h *scheduler.Handle) bool {
	select {
	case <-h.Done():
		return true
	default:
		return false
	}
}

// releaseCheckpoint gives back what the cut pinned and the in-flight names (owner).
func (t *Engine) releaseCheckpoint(p *PendingCheckpoint) {
	if p.released {
		return
	}
	p.released = true
	t.releaseMemory(p)
	if p.lsnap != nil {
		t.db.ReleaseSnapshot(p.lsnap)
	}
	p.lsnap = nil
	if len(p.inflight) > 0 {
		t.ck.inflight.Release(p.inflight...)
		p.inflight = nil
	}
}

// releaseMemory releases the memory pins of p: the slices and sealed segments freed since
// its cut go back to the budget (owner).
func (t *Engine) releaseMemory(p *PendingCheckpoint) {
	if p.memReleased {
		return
	}
	p.memReleased = true
	if p.ssnap != nil { // a native cut's (a changelog checkpoint pins only its timers)
		t.sl.ReleaseSnapshot(p.ssnap)
		t.f.UnpinSealed()
	}
	p.segs, p.ssnap = nil, nil
	if p.timers != nil {
		p.timers.Release()
		p.timers = nil
	}
}

// orderRange returns the order hashes of key groups r: [r.Start·stride, (r.End+1)·stride − 1].
func (t *Engine) orderRange(r checkpoint.KeyGroupRange) (lo, hi uint64) {
	return OrderRange(t.stride, r)
}

// OrderRange returns the order hashes of key groups r under stride (base.Stride).
func OrderRange(stride uint64, r checkpoint.KeyGroupRange) (lo, hi uint64) {
	lo = uint64(r.Start) * stride
	hi = uint64(r.End)*stride + (stride - 1)
	if hi < lo { // the last key group of maxParallelism 1
		hi = ^uint64(0)
	}
	return lo, hi
}

// kgOf returns the key groups of orders [lo, hi] inside r.
func (t *Engine) kgOf(lo, hi uint64, r checkpoint.KeyGroupRange) checkpoint.KeyGroupRange {
	return kgOfOrders(t.stride, lo, hi, r)
}

// kgOfOrders returns the key groups of orders [lo, hi] (lo <= hi) inside r, under stride.
func kgOfOrders(stride, lo, hi uint64, r checkpoint.KeyGroupRange) checkpoint.KeyGroupRange {
	s, e := int(base.KeyGroupOfOrder(lo, stride)), int(base.KeyGroupOfOrder(hi, stride))
	return checkpoint.KeyGroupRange{Start: max(s, r.Start), End: max(min(e, r.End), max(s, r.Start))}
}

// upload is the asynchronous part of checkpoint p (a scheduler task): the memory table, the
// tables new since the base, the manifest.
func (t *Engine) upload(ctx context.Context, p *PendingCheckpoint) error {
	spec := &p.spec
	m := &checkpoint.Manifest{ID: spec.ID, Parent: p.baseID, Epoch: spec.Epoch,
		CreatedUnixMilli: p.start.UnixMilli(), MaxParallelism: spec.MaxParallelism, KeyGroups: spec.KeyGroups,
		Registry: spec.Registry, InputPosition: spec.InputPosition, OperatorState: spec.OperatorState, LastSeq: p.seq}
	p.tables = map[uint64]checkpoint.Object{}
	res := &p.res
	// The memory table first, into a local file: then the memory the cut pinned is released
	// (memDone; the owner's next install), however long the uploads take.
	mt, mtPath, err := t.memoryTable(ctx, p)
	if mtPath != "" {
		defer t.ck.tmpFS.Remove(mtPath)
	}
	if err != nil {
		t.memWritten(p)
		return fmt.Errorf("strata: checkpoint %d: memory table: %w", spec.ID, err)
	}
	tm, tmPath, err := t.timerObject(ctx, p)
	t.memWritten(p)
	if tmPath != "" {
		defer t.ck.tmpFS.Remove(tmPath)
	}
	if err != nil {
		return fmt.Errorf("strata: checkpoint %d: timers: %w", spec.ID, err)
	}
	klo, khi := t.orderRange(spec.KeyGroups)
	if p.lsnap != nil {
		for _, tb := range p.lsnap.Tables() {
			if err := ctx.Err(); err != nil {
				return err
			}
			lo, hi := max(tb.Meta.MinOrder, klo), min(tb.Meta.MaxOrder, khi)
			if lo > hi {
				continue // nothing of our key groups (a restored table clipped away)
			}
			o, ok := p.base[tb.Meta.Num]
			if ok {
				res.ReusedObjects++
				res.ReusedBytes += o.Size
				t.hold(p, o.Name)
			} else {
				crc, size, err := checkpointfs.FileCRC(t.ck.tmpFS, tb.Path)
				if err != nil {
					return fmt.Errorf("strata: checkpoint %d: %w", spec.ID, lowerError(err))
				}
				o = checkpoint.Object{Name: checkpoint.SharedName(spec.Owner, spec.KeyGroups, spec.ID, "sst"),
					Kind: checkpoint.KindTable, Size: size, CRC: crc}
				t.hold(p, o.Name)
				if err := checkpointfs.PutFile(ctx, spec.Storage, o.Name, t.ck.tmpFS, tb.Path); err != nil {
					return fmt.Errorf("strata: checkpoint %d: %w", spec.ID, err)
				}
				res.UploadedObjects++
				res.UploadedBytes += size
			}
			o.Level = uint8(tb.Level)
			o.MinOrder, o.MaxOrder = lo, hi
			o.KeyGroups = t.kgOf(lo, hi, spec.KeyGroups)
			p.tables[tb.Meta.Num] = o
			m.Objects = append(m.Objects, o)
		}
	}
	if mt != nil {
		t.hold(p, mt.Name)
		if err := checkpointfs.PutFile(ctx, spec.Storage, mt.Name, t.ck.tmpFS, mtPath); err != nil {
			return fmt.Errorf("strata: checkpoint %d: memory table: %w", spec.ID, err)
		}
		m.Objects = append(m.Objects, *mt)
		res.UploadedObjects++
		res.UploadedBytes += mt.Size
		res.MemoryBytes = mt.Size
	}
	if err := t.putTimers(ctx, p, m, tm, tmPath); err != nil {
		return err
	}
	if p.noCommit { // a materialization: its tables are listed by later checkpoints
		res.Manifest = m
		return nil
	}
	return t.commit(ctx, p, m)
}

// memWritten tells the owner that p's memory pins (and its timers) may go: what they hold is in
// local files now, or the upload failed (task).
func (t *Engine) memWritten(p *PendingCheckpoint) {
	p.memDone.Store(true)
	t.ready.Add(1)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// timerObject writes p's frozen timers into a local file, one section per key group with
// timers (timer.Snapshot.WriteTo), and returns the manifest entries they are to become (one per
// key group, packed in one object) and the file's path; nil and "" without timers (task).
func (t *Engine) timerObject(ctx context.Context, p *PendingCheckpoint) (_ []checkpoint.Object, path string, err error) {
	if p.timers == nil || p.timers.Timers() == 0 {
		return nil, "", nil
	}
	fsys, dir := t.ck.tmpFS, t.ck.tmpDir
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, "", lowerError(err)
	}
	path = filepath.Join(dir, fmt.Sprintf("%020d-%016x.tmr", p.spec.ID, rand.Uint64()))
	f, err := fsys.Create(path)
	if err != nil {
		return nil, "", lowerError(err)
	}
	secs, err := p.timers.WriteTo(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fsys.Remove(path)
		return nil, "", lowerError(err)
	}
	spec := &p.spec
	last := secs[len(secs)-1]
	name := checkpoint.PrivateName(spec.Owner, spec.ID, spec.KeyGroups, "tmr")
	objs := make([]checkpoint.Object, len(secs))
	for i, sec := range secs {
		kg := checkpoint.KeyGroupRange{Start: int(sec.KeyGroup), End: int(sec.KeyGroup)}
		objs[i] = checkpoint.Object{Name: name, Kind: checkpoint.KindTimers, Size: last.Offset + last.Length, CRC: sec.CRC,
			KeyGroups: kg, MinOrder: uint64(sec.MinTimestamp) ^ 1<<63, MaxOrder: uint64(sec.MaxTimestamp) ^ 1<<63,
			Packed: true, Offset: sec.Offset, Length: sec.Length}
	}
	return objs, path, nil
}

// putTimers stores the timer object written at path and adds its entries tm to m (task).
func (t *Engine) putTimers(ctx context.Context, p *PendingCheckpoint, m *checkpoint.Manifest, tm []checkpoint.Object, path string) error {
	if len(tm) == 0 {
		return nil
	}
	t.hold(p, tm[0].Name)
	if err := checkpointfs.PutFile(ctx, p.spec.Storage, tm[0].Name, t.ck.tmpFS, path); err != nil {
		return fmt.Errorf("strata: checkpoint %d: timers: %w", p.spec.ID, err)
	}
	m.Objects = append(m.Objects, tm...)
	p.res.UploadedObjects++
	p.res.UploadedBytes += tm[0].Size
	return nil
}

// hold puts name in the in-flight set (GC keeps it) until p's pins are released.
func (t *Engine) hold(p *PendingCheckpoint, name string) {
	t.ck.inflight.Add(name)
	p.inflight = append(p.inflight, name)
}

// commit writes m as checkpoint p's manifest with create-if-absent (the commit point; the
// caller stored every object it names) and fills p's result. Both kinds of checkpoint, native
// and changelog, end here.
func (t *Engine) commit(ctx context.Context, p *PendingCheckpoint, m *checkpoint.Manifest) error {
	spec := &p.spec
	t.hold(p, checkpoint.ManifestName(spec.Owner, spec.ID))
	if spec.Fence != nil {
		epoch, err := spec.Fence(ctx)
		if err != nil {
			return fmt.Errorf("strata: checkpoint %d: fencing older writers: %w", spec.ID, err)
		}
		m.Epoch = epoch
	}
	if err := checkpoint.Commit(ctx, spec.Storage, spec.Owner, m); err != nil {
		return fmt.Errorf("strata: checkpoint %d: commit: %w", spec.ID, err)
	}
	res := &p.res
	res.Manifest = m
	res.SyncPause = p.pause
	res.AsyncDuration = time.Since(p.start) - p.pause
	return nil
}

// memoryTable writes the pinned slices and sealed segments as one local table file in entry
// order, resolved by base.Resolver as a compaction that is not at the bottom (only the newest
// version of a value or map entry, list operands joined over the newest base among them,
// tombstones kept: the checkpoint's tables lie below; with TTL states that clean up in full
// snapshots, an expired value as a tombstone and a list batch without its expired elements:
// ttl.go), and returns the object it is to become and the file's path (the caller stores it,
// then removes the file); nil and "" when the memory tiers were empty. Writing every version
// instead made a memory table 2–2.7× the live bytes it held (TestCheckpointStorageBound).
func (t *Engine) memoryTable(ctx context.Context, p *PendingCheckpoint) (_ *checkpoint.Object, path string, err error) {
	srcs := []base.Iterator{p.ssnap.Iter()}
	var segs []*segIter
	defer func() {
		for _, s := range segs {
			s.release()
		}
	}()
	for _, seg := range p.segs {
		it, err := t.segmentEntries(ctx, seg)
		if err != nil {
			return nil, "", err
		}
		segs = append(segs, it)
		srcs = append(srcs, it)
	}
	it := base.NewMergingIter(srcs...)
	fsys, dir := t.ck.tmpFS, t.ck.tmpDir
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, "", lowerError(err)
	}
	path = filepath.Join(dir, fmt.Sprintf("%020d-%016x.sst", p.spec.ID, rand.Uint64()))
	f, err := fsys.Create(path)
	if err != nil {
		return nil, "", lowerError(err)
	}
	keep := false
	defer func() {
		if !keep {
			fsys.Remove(path)
		}
	}()
	hint := t.ck.memOrders.Load()
	w := sstable.NewWriter(f, sstable.WriterOptions{OrdersHint: int(hint + hint/8)})
	var lo, hi uint64
	n := 0
	// Resolved as a compaction of the memory tiers that is never at the bottom (the
	// checkpoint's tables lie below): a version a newer one shadows is not written, list
	// operands join the newest base above them, tombstones stay.
	res := &base.Resolver{MaxList: base.MaxListPiece, Emit: func(e *base.Entry) error {
		if n == 0 {
			lo = e.Order
		}
		hi = e.Order
		n++
		return w.Add(e)
	}}
	if ttl := t.ttl.snapshotFilter(); ttl != nil { // TTL cleanup in full snapshots (ttl.go)
		res.Filter = ttl.Filter
	}
	for in := 0; it.Next(); in++ {
		if err := res.Add(it.Entry()); err != nil {
			f.Close()
			return nil, "", lowerError(err)
		}
		if in%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				f.Close()
				return nil, "", err
			}
		}
	}
	if err := it.Err(); err != nil {
		f.Close()
		return nil, "", err
	}
	if err := res.Finish(); err != nil {
		f.Close()
		return nil, "", lowerError(err)
	}
	t.ck.memOrders.Store(int64(n))
	if n == 0 {
		f.Close()
		return nil, "", nil
	}
	_, err = w.Finish()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, "", lowerError(err)
	}
	crc, size, err := checkpointfs.FileCRC(fsys, path)
	if err != nil {
		return nil, "", lowerError(err)
	}
	spec := &p.spec
	o := &checkpoint.Object{Name: checkpoint.PrivateName(spec.Owner, spec.ID, spec.KeyGroups, "sst"),
		Kind: checkpoint.KindTable, Size: size, CRC: crc, MinOrder: lo, MaxOrder: hi, Level: 0}
	o.KeyGroups = t.kgOf(lo, hi, spec.KeyGroups)
	keep = true
	return o, path, nil
}

// CompleteCheckpoint is Flink's notifyCheckpointComplete: checkpoint id (and every pending one
// before it) is complete; its tables become the base of the next incremental checkpoint, and
// garbage collection runs in the background with gc (whose LastCompleted, Aborted and InFlight
// it fills). An id this engine did not write (before a restart) only advances LastCompleted.
// Owner goroutine only.
func (t *Engine) CompleteCheckpoint(id uint64, s checkpoint.Storage, gc checkpoint.GCOptions) {
	t.settleCheckpoints()
	if tables, ok := t.ck.pending[id]; ok {
		t.ck.base, t.ck.baseID = tables, id
	}
	for pid := range t.ck.pending {
		if pid <= id {
			delete(t.ck.pending, pid)
		}
	}
	t.ck.lastCompleted = max(t.ck.lastCompleted, id)
	if t.cl != nil {
		t.truncateChangelog(id)
	}
	t.scheduleGC(s, gc)
}

// AbortCheckpoint is Flink's notifyCheckpointAborted: checkpoint id will never complete. A
// running upload is cancelled; its objects and manifest become garbage for the next GC.
// Owner goroutine only.
func (t *Engine) AbortCheckpoint(id uint64, s checkpoint.Storage, gc checkpoint.GCOptions) {
	if !slices.Contains(t.ck.aborted, id) {
		t.ck.aborted = append(t.ck.aborted, id)
	}
	for _, p := range t.ck.running {
		if p.spec.ID == id && p.h != nil {
			p.h.Cancel()
		}
	}
	delete(t.ck.pending, id)
	t.settleCheckpoints()
	t.scheduleGC(s, gc)
}

// LastCompletedCheckpoint returns the id of the last checkpoint completed (or restored), 0 for
// none.
func (t *Engine) LastCompletedCheckpoint() uint64 { return t.ck.lastCompleted }

// scheduleGC runs GC with gc in the background, after the one running if any.
func (t *Engine) scheduleGC(s checkpoint.Storage, gc checkpoint.GCOptions) {
	gc.LastCompleted = t.ck.lastCompleted
	gc.Aborted = append(gc.Aborted, t.ck.aborted...)
	gc.InFlight = &t.ck.inflight
	if s == nil || gc.Owner == "" {
		return
	}
	r := &gcRun{s: s, o: gc}
	if t.ck.gc != nil {
		t.ck.gcNext = r
		return
	}
	t.submitGC(r)
}

// gcRun is one GC to run.
type gcRun struct {
	s checkpoint.Storage
	o checkpoint.GCOptions
}

func (t *Engine) submitGC(r *gcRun) {
	if t.closing {
		return
	}
	t.ck.gcDone.Store(false)
	o := r.o
	h, err := t.sched.SubmitMetered(scheduler.Upload, "checkpoint GC", t.meter(BgCheckpoint), func(ctx context.Context) error {
		defer t.finished(&t.ck.gcDone)
		t.ck.gcErr = nil
		defer recoverInto(&t.ck.gcErr, "checkpoint GC")
		t.ck.gcRes, t.ck.gcErr = checkpoint.GC(ctx, r.s, o)
		return t.ck.gcErr
	})
	if err != nil {
		t.ck.lastGC = err
		return
	}
	t.ck.gc = h
}

// WaitGC waits for the checkpoint GC in flight, if any, and returns its error (tests, Close).
// Owner goroutine only.
func (t *Engine) WaitGC() error {
	for t.ck.gc != nil {
		<-t.ck.gc.Done()
		t.settleCheckpoints()
	}
	err := t.ck.lastGC
	t.ck.lastGC = nil
	return err
}

// initCheckpoints sets where memory tables are written before their upload: Dir/checkpoint-tmp
// (emptied here: a crash leaves files there), or a directory under the system's temporary
// directory for an engine in memory only.
func (t *Engine) initCheckpoints(o *Options) error {
	if o.Dir != "" {
		t.ck.tmpFS, t.ck.tmpDir = o.FS, filepath.Join(o.Dir, "checkpoint-tmp")
		names, err := o.FS.List(t.ck.tmpDir)
		if err == nil {
			for _, n := range names {
				o.FS.Remove(filepath.Join(t.ck.tmpDir, n))
			}
		}
		return nil
	}
	t.ck.tmpFS, t.ck.tmpDir = vfs.Default(), filepath.Join(os.TempDir(), fmt.Sprintf("strata-checkpoint-%d-%016x", os.Getpid(), rand.Uint64()))
	return nil
}

// closeCheckpoints ends the checkpoints at Close (the scheduler has stopped every task).
func (t *Engine) closeCheckpoints() {
	for _, p := range t.ck.running {
		if !p.fin.Load() {
			p.err = fmt.Errorf("strata: checkpoint %d: %w", p.spec.ID, ErrClosed)
		}
		t.releaseCheckpoint(p)
	}
	t.ck.running = nil
	t.closeChangelog()
	if t.db == nil && t.ck.tmpDir != "" {
		t.ck.tmpFS.Remove(t.ck.tmpDir)
	}
}

// memPinned counts the running checkpoints and the running materialization that still pin
// memory (install: a drop means memory was given back, which a waiting writer retries on).
func (t *Engine) memPinned() int {
	n := 0
	for _, p := range t.ck.running {
		if !p.memReleased {
			n++
		}
	}
	if c := t.cl; c != nil && c.run != nil && !c.run.memReleased {
		n++
	}
	return n
}
