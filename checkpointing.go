package strata

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/engine"
)

// Checkpoints, completion, retention and restore with rescaling — Flink's checkpointing of a
// keyed state backend (CheckpointedFunction.snapshotState, CheckpointListener, RestoreMode),
// over the storage protocol of package checkpoint. The mechanism is internal/engine's
// (internal/engine/checkpoint.go, internal/engine/restore.go): a cut that pins the immutable tiers in O(slices + files), an
// upload in the background, a manifest committed last with create-if-absent.

// RestoreMode is how a restored Store treats the checkpoint it was restored from, as Flink's
// RestoreMode (FLIP-193). Part of no format.
type RestoreMode uint8

const (
	// NoClaim (the default, as Flink's): the restored checkpoint stays the user's. The Store
	// never deletes its objects, and its first checkpoint references none of them (a full
	// checkpoint), so the restored one may be deleted independently afterwards.
	NoClaim RestoreMode = iota
	// Claim: the Store takes the restored checkpoint over. Its first checkpoint references the
	// restored objects (incremental from the start), and garbage collection deletes them, with
	// the restored lineage's manifests, once no retained checkpoint reaches them — its own, or
	// those of the other Stores that claimed the same checkpoint (a scale out: Restore leaves a
	// claim marker in the restored lineage, and every claimant's GC keeps what the others
	// still reach, checkpoint/doc.go "Claims shared by several Stores"). Every Store that
	// claims a checkpoint must restore it before any of them completes a checkpoint (Flink's
	// order: a checkpoint completes once every subtask acknowledged it); a claimant that never
	// commits a checkpoint keeps the claimed checkpoint from collection (a leak, never a loss).
	Claim
)

// String returns "NO_CLAIM" or "CLAIM", Flink's names.
func (m RestoreMode) String() string {
	if m == Claim {
		return "CLAIM"
	}
	return "NO_CLAIM"
}

// CheckpointOptions configure a Store's checkpoints (Options.Checkpoint).
type CheckpointOptions struct {
	// Storage is where checkpoints go (checkpoint.NewDirStorage for a local or mounted
	// directory, or any object store implementing checkpoint.Storage). nil: Checkpoint fails
	// with ErrNoCheckpointStorage — except after Restore, which defaults it to the storage
	// restored from.
	Storage checkpoint.Storage
	// Owner names the Store's lineage of checkpoints: one name segment (checkpoint.ValidateOwner),
	// the prefix of every object the Store writes; one per operator subtask of a job, stable
	// across restarts. Default "kg-<start>-<end>" of Options.KeyGroups (five digits each).
	Owner string
	// Retain is how many completed checkpoints are kept (Flink's
	// state.checkpoints.num-retained); older ones are garbage-collected after each
	// NotifyCheckpointComplete. Default 1. Must not be negative.
	Retain int
	// Grace is how old an unreachable object must be before garbage collection deletes it
	// (checkpoint.GCOptions.Grace): it must exceed the longest upload of another process
	// writing under the same Owner (a zombie). Default checkpoint.DefaultGrace;
	// checkpoint.NoGrace deletes at once. When Options.Clock is set, an object ages as that
	// clock advances: GC's time is the wall clock at Open plus the time Options.Clock moved
	// since (never its epoch: the storage dates objects on the wall clock), so a test that
	// drives the clock past the grace sees the objects go, and a clock that runs faster than
	// the wall clock (an event-time replay) shortens the grace in wall time.
	Grace time.Duration
	// RestoreMode applies to Restore: NoClaim (default) or Claim.
	RestoreMode RestoreMode
	// LazyRestore makes Restore return once the manifests are read and the directory's
	// skeleton is written, without waiting for the table objects' bytes (issue 24, item 3; as
	// ForSt, Flink 2.0's disaggregated state backend, reads restored files from the remote
	// file system before they are local). Tables not yet local are read through ranged reads
	// of the checkpoint storage while a background prefetch (at most 4 files in flight, on
	// workers of its own beside BackgroundWorkers)
	// copies them in and checks each one's CRC32C as it arrives; from a DirStorage on the same
	// file system they are hard links at once and only the check runs in the background.
	// Stats.LazyRestore follows the prefetch. A file found damaged fails the reads that need
	// it with ErrCorruption; a transient storage error is retried. Until the prefetch
	// finished the directory is incomplete: a crash or a Close before then leaves it refused
	// by Open (ErrRestoreIncomplete) — remove it and restore again. Default false: Restore
	// fetches and checks every table first. The changelog, timers and canonical savepoints
	// are restored before Restore returns either way.
	LazyRestore bool
	// Changelog, when not nil, turns the changelog on (see ChangelogOptions): checkpoints
	// store the log's tail on top of a materialization taken in the background. nil: off,
	// every checkpoint is a native incremental one. Needs Storage.
	Changelog *ChangelogOptions
	// ChangelogCache, when not nil, is the process's cache through which Restore reads
	// the changelog objects of the checkpoints it restores (each fetched once per process,
	// see ChangelogCache). nil: Restore reads them from Storage, each object's footer and the
	// spans of its key groups once per Restore.
	ChangelogCache *ChangelogCache
}

// CheckpointHandle identifies a durable checkpoint of one Store: what Restore needs, with the
// figures of its making. Handles are plain values; keep them (or the Owner and ID) wherever the
// job keeps its checkpoint metadata.
type CheckpointHandle struct {
	// Owner and ID name the checkpoint's manifest in its storage
	// (checkpoint.ManifestName(Owner, ID)).
	Owner string
	ID    uint64
	// MaxParallelism and KeyGroups are those of the Store that wrote it.
	MaxParallelism int
	KeyGroups      KeyGroupRange
	// InputPosition is the caller's source position given to Checkpoint (Kafka offsets, a file
	// offset), opaque to Strata.
	InputPosition []byte
	// Stats describes the checkpoint's making; zero for a handle read back with LoadCheckpoint.
	Stats CheckpointStats
}

// CheckpointStats are the figures of one checkpoint.
type CheckpointStats struct {
	// SyncPause is the synchronous part, the time the task's goroutine spent in the cut.
	SyncPause time.Duration
	// AsyncDuration is the rest: from the cut to the manifest's commit.
	AsyncDuration time.Duration
	// UploadedBytes / UploadedObjects: what this checkpoint stored; ReusedBytes /
	// ReusedObjects: what it references from the last completed checkpoint (incremental).
	UploadedBytes, ReusedBytes     int64
	UploadedObjects, ReusedObjects int
	// MemoryBytes is the part of UploadedBytes that held the memory tiers at the cut.
	MemoryBytes int64
}

// PendingCheckpoint is a checkpoint whose synchronous part is done (StartCheckpoint) and whose
// upload runs in the background while the task goes on.
type PendingCheckpoint struct {
	s *Store
	p *engine.PendingCheckpoint
}

// Done is closed when the checkpoint is durable, failed or was cancelled. Safe from any
// goroutine.
func (p *PendingCheckpoint) Done() <-chan struct{} { return p.p.Done() }

// ID returns the checkpoint id.
func (p *PendingCheckpoint) ID() uint64 { return p.p.ID() }

// Wait waits until the checkpoint is durable and returns its handle; the checkpoint is then
// pending completion (NotifyCheckpointComplete). Errors: the upload's — the storage's, a full
// disk, ErrCheckpointExists when another writer committed this id (a zombie: stop) —, ctx's
// error (the checkpoint goes on), ErrClosed. Like every Store method, on the Store's goroutine.
func (p *PendingCheckpoint) Wait(ctx context.Context) (CheckpointHandle, error) {
	s := p.s
	if s.closed {
		return CheckpointHandle{}, ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	r, err := s.e.WaitCheckpoint(ctx, p.p)
	if err != nil {
		return CheckpointHandle{}, err
	}
	return s.handleOf(r.Manifest, CheckpointStats{SyncPause: r.SyncPause, AsyncDuration: r.AsyncDuration,
		UploadedBytes: r.UploadedBytes, ReusedBytes: r.ReusedBytes, UploadedObjects: r.UploadedObjects,
		ReusedObjects: r.ReusedObjects, MemoryBytes: r.MemoryBytes}), nil
}

// handleOf returns the handle of manifest m written by s's lineage.
func (s *Store) handleOf(m *checkpoint.Manifest, st CheckpointStats) CheckpointHandle {
	return CheckpointHandle{Owner: s.owner(), ID: m.ID, MaxParallelism: int(m.MaxParallelism),
		KeyGroups:     m.KeyGroups,
		InputPosition: m.InputPosition, Stats: st}
}

// owner returns the Store's checkpoint owner (CheckpointOptions.Owner or its default).
func (s *Store) owner() string { return ownerOf(&s.opts) }

// ownerOf returns the checkpoint owner of a Store of opts (defaults applied).
func ownerOf(opts *Options) string {
	if o := opts.Checkpoint.Owner; o != "" {
		return o
	}
	kg := *opts.KeyGroups
	return fmt.Sprintf("kg-%05d-%05d", kg.Start, kg.End)
}

// StartCheckpoint takes checkpoint id of the Store's state as of now (Flink's snapshotState):
// the synchronous part seals the active segment and pins the immutable tiers — a few
// milliseconds whatever the state's size — and the upload runs in the background; the Store
// may be written at once, and later writes are not in the checkpoint. inputPosition is stored
// in the manifest (the source offsets to replay from after a restore). id must be at least 1
// and larger than every id committed before under the Store's Owner (Flink's checkpoint ids
// only grow); one checkpoint runs at a time.
//
// The checkpoint is incremental: table files already in the last completed checkpoint are
// referenced, not stored again; the memory tiers at the cut are stored as one table. It
// becomes the base of later checkpoints only once completed (NotifyCheckpointComplete). The
// operator state (operator.go) is encoded in the cut (O(its size), at most
// MaxOperatorStateSize) and stored whole in the manifest, with
// the Store's SubtaskIndex and Parallelism — with the changelog on too, as Flink's changelog
// backend snapshots operator state fully at every checkpoint; a union list as the subtask
// holds it, each element with its id (opstate.go). The timers (timers.go) are frozen in the cut (copy on write:
// O(key groups), nothing copied per timer until a key group's timers next change) and stored
// whole as one section per key group, at every checkpoint, changelog ones too.
//
// The cut installs finished background work and seals the active segment: like a write, it
// ends the validity of values read through aliasing codecs (package doc, invariant 2).
// PendingCheckpoint.Wait, NotifyCheckpointComplete, NotifyCheckpointAborted, WaitCheckpointGC
// and the stats do not: they release pins and record results, and move no state.
//
// Errors: ErrNoCheckpointStorage, ErrCheckpointInProgress, ErrInvalidOptions (id 0, or an id
// at or below the last checkpoint this Store committed or the checkpoint of its own Owner it
// was restored from: a smaller id would commit a checkpoint LatestCheckpoint never returns),
// a sticky background failure, ErrMemoryBudget, ErrClosed; the upload (Wait) may fail with
// ErrFenced when another Store restored the Owner's lineage since (this one is a zombie).
func (s *Store) StartCheckpoint(id uint64, inputPosition []byte) (*PendingCheckpoint, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.opts.Checkpoint.Storage == nil {
		return nil, ErrNoCheckpointStorage
	}
	if id == 0 {
		return nil, fmt.Errorf("%w: checkpoint id 0 (ids start at 1)", ErrInvalidOptions)
	}
	if len(inputPosition) > checkpoint.MaxBlob {
		return nil, fmt.Errorf("%w: input position of %d bytes, more than %d", ErrInvalidOptions, len(inputPosition), checkpoint.MaxBlob)
	}
	s.enter(opCall)
	defer s.exit()
	if last := s.e.LastCommittedCheckpoint(); id <= last {
		return nil, fmt.Errorf("%w: checkpoint id %d is not above %d, the last committed or restored checkpoint of owner %q (ids only grow)",
			ErrInvalidOptions, id, last, s.owner())
	}
	kg := *s.opts.KeyGroups
	s.fenceMu.Lock()
	epoch := s.epoch
	s.fenceMu.Unlock()
	p, err := s.e.StartCheckpoint(engine.CheckpointSpec{ID: id, Storage: s.opts.Checkpoint.Storage, Owner: s.owner(),
		Epoch: epoch, Fence: s.fenceCheckpoint, MaxParallelism: s.maxP, KeyGroups: kg,
		Registry: s.encodeRegistry(), InputPosition: slices.Clone(inputPosition), OperatorState: s.opSnapshot().Encode()})
	if err != nil {
		return nil, fmt.Errorf("strata: checkpoint %d: %w", id, err)
	}
	return &PendingCheckpoint{s: s, p: p}, nil
}

// fenceCheckpoint is every checkpoint's engine.CheckpointSpec.Fence: the first checkpoint
// after Restore fences the older writers of the Store's lineage (checkpoint.WriteFence, from
// the newest checkpoint restored or, if newer, the newest the lineage held at the restore): it
// claims the epoch Restore chose, under the Store's writer id (kept in the directory's WRITER
// file, so a reopened Store finds its own fence again); it returns the Store's writer epoch,
// or ErrFenced when a later writer claimed that epoch or a higher one first. The fence waits
// for the first checkpoint rather than Restore, so a Store restored only to read a checkpoint
// (a test, a verification, an inspection) never fences the lineage's writer. Called from
// checkpoint uploads (one runs at a time).
func (s *Store) fenceCheckpoint(ctx context.Context) (uint64, error) {
	s.fenceMu.Lock()
	defer s.fenceMu.Unlock()
	if s.fenceDue {
		f, err := checkpoint.WriteFence(ctx, s.opts.Checkpoint.Storage, s.owner(), s.epoch, s.fencePoint, s.writerID, time.Now())
		if err != nil {
			return 0, err
		}
		s.epoch, s.fenceDue = f.Epoch, false
	}
	return s.epoch, nil
}

// Checkpoint is StartCheckpoint followed by Wait: it returns once checkpoint id is durable.
// The Store cannot be used meanwhile (it is the caller's goroutine that waits); use
// StartCheckpoint to go on writing during the upload.
func (s *Store) Checkpoint(ctx context.Context, id uint64, inputPosition []byte) (CheckpointHandle, error) {
	p, err := s.StartCheckpoint(id, inputPosition)
	if err != nil {
		return CheckpointHandle{}, err
	}
	return p.Wait(ctx)
}

// NotifyCheckpointComplete tells the Store that checkpoint id is complete (Flink's
// CheckpointListener.notifyCheckpointComplete: every task acknowledged it). It becomes the base
// of the next incremental checkpoint, pending checkpoints before it are subsumed, and garbage
// collection runs in the background: it keeps the Retain newest completed checkpoints, any
// pinned one, the restored one in NO_CLAIM mode, and every pending (newer) one, and deletes
// whatever none of them reaches (never by counters: checkpoint.GC). Errors: ErrClosed,
// ErrNoCheckpointStorage; a failure of the previous GC run (the next run retries it).
func (s *Store) NotifyCheckpointComplete(id uint64) error {
	if err := s.ckCheck(); err != nil {
		return err
	}
	s.enter(opCall)
	defer s.exit()
	s.e.CompleteCheckpoint(id, s.opts.Checkpoint.Storage, s.gcOptions(id))
	return nil
}

// NotifyCheckpointAborted tells the Store that checkpoint id will not complete (Flink's
// CheckpointListener.notifyCheckpointAborted). An upload still running is cancelled; whatever
// it stored, manifest included, is deleted by the next garbage collection. Errors: ErrClosed,
// ErrNoCheckpointStorage.
func (s *Store) NotifyCheckpointAborted(id uint64) error {
	if err := s.ckCheck(); err != nil {
		return err
	}
	s.enter(opCall)
	defer s.exit()
	s.e.AbortCheckpoint(id, s.opts.Checkpoint.Storage, s.gcOptions(0))
	return nil
}

// PinCheckpoint keeps checkpoint id of the Store's lineage from garbage collection until
// UnpinCheckpoint (a checkpoint the user wants to keep, like a retained externalized
// checkpoint). Pins live as long as the Store.
func (s *Store) PinCheckpoint(id uint64) {
	if !slices.Contains(s.pins, id) {
		s.pins = append(s.pins, id)
	}
}

// UnpinCheckpoint undoes PinCheckpoint; the next garbage collection may delete it.
func (s *Store) UnpinCheckpoint(id uint64) {
	s.pins = slices.DeleteFunc(s.pins, func(p uint64) bool { return p == id })
}

// WaitCheckpointGC waits for the garbage collection in flight, if any, and returns the error
// of the last one that failed since the previous call (tests, and jobs that want to know).
func (s *Store) WaitCheckpointGC() error {
	if s.closed {
		return ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	return s.e.WaitGC()
}

func (s *Store) ckCheck() error {
	if s.closed {
		return ErrClosed
	}
	if s.opts.Checkpoint.Storage == nil {
		return ErrNoCheckpointStorage
	}
	return nil
}

// gcOptions returns the GC options of the Store's lineage (the engine fills LastCompleted,
// Aborted and InFlight), completing being the id whose completion runs this GC (0: none).
func (s *Store) gcOptions(completing uint64) checkpoint.GCOptions {
	o := checkpoint.GCOptions{Owner: s.owner(), Retain: s.opts.Checkpoint.Retain, Grace: s.opts.Checkpoint.Grace,
		Pinned: slices.Clone(s.pins)}
	if s.opts.Clock != nil {
		// The Store's clock, as TTL's: a test (or a job on simulated time) that drives it
		// ages unreachable objects by it (Options.Checkpoint.Grace; gcNow).
		o.Now = s.gcNow
	}
	for _, r := range s.restored {
		switch {
		case s.opts.Checkpoint.RestoreMode == NoClaim && r.Owner == o.Owner:
			o.Pinned = append(o.Pinned, r.ID)
		case s.opts.Checkpoint.RestoreMode == Claim && r.Owner != o.Owner:
			c := checkpoint.Claim{Owner: r.Owner}
			if max(s.e.LastCompletedCheckpoint(), completing) == s.restoredOwn { // none of ours completed yet
				c.Pinned = []uint64{r.ID}
			}
			o.Claimed = append(o.Claimed, c)
		}
	}
	return o
}

// LoadCheckpoint reads the manifest of checkpoint id of owner from storage and returns its
// handle. Errors: checkpoint.ErrNotFound (never committed, or collected), ErrCorruption for a
// damaged manifest, the storage's.
func LoadCheckpoint(ctx context.Context, storage checkpoint.Storage, owner string, id uint64) (CheckpointHandle, error) {
	m, err := checkpoint.ReadManifest(ctx, storage, owner, id)
	if err != nil {
		return CheckpointHandle{}, err
	}
	return CheckpointHandle{Owner: owner, ID: m.ID, MaxParallelism: int(m.MaxParallelism),
		KeyGroups:     m.KeyGroups,
		InputPosition: m.InputPosition}, nil
}

// LatestCheckpoint returns the handle of the newest checkpoint committed under owner — after a
// crash, the one to restore (a committed manifest is complete; whether the job completed it is
// the job's knowledge, not the storage's). A manifest a fence of owner fences (written by a
// zombie after a restore of the lineage, checkpoint package doc "Writer fencing") was never
// committed and is passed over. Errors: ErrNoCheckpoint when there is none; LoadCheckpoint's
// and checkpoint.ReadFences's.
func LatestCheckpoint(ctx context.Context, storage checkpoint.Storage, owner string) (CheckpointHandle, error) {
	ids, err := checkpoint.ListCheckpoints(ctx, storage, owner)
	if err != nil {
		return CheckpointHandle{}, err
	}
	if len(ids) == 0 {
		return CheckpointHandle{}, fmt.Errorf("%w under owner %q", ErrNoCheckpoint, owner)
	}
	fences, err := checkpoint.ReadFences(ctx, storage, owner, 0)
	if err != nil {
		return CheckpointHandle{}, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		m, err := checkpoint.ReadManifest(ctx, storage, owner, ids[i])
		if err != nil {
			return CheckpointHandle{}, err
		}
		if slices.ContainsFunc(fences, func(f checkpoint.Fence) bool { return f.Fences(m.Epoch, m.ID) }) {
			continue
		}
		return CheckpointHandle{Owner: owner, ID: m.ID, MaxParallelism: int(m.MaxParallelism),
			KeyGroups:     m.KeyGroups,
			InputPosition: m.InputPosition}, nil
	}
	return CheckpointHandle{}, fmt.Errorf("%w under owner %q (every manifest there is fenced)", ErrNoCheckpoint, owner)
}

// Restore creates a Store in dir, which must be empty or missing, holding the state of the
// given checkpoints for the key groups opts.KeyGroups owns, and opens it as Open would. The
// handles' key-group ranges may be larger, smaller or overlapping with opts.KeyGroups: scale
// out (one handle, a sub-range), scale in (several handles, one Store), or both. Each
// checkpoint's table files that hold keys of opts.KeyGroups are fetched once (hard links from a
// checkpoint.DirStorage on the same file system) and used as they are, clipped to the key
// groups they answer for: entries of other key groups are never visible and compactions drop
// them; no key is rewritten. Key groups no handle covers start empty. Changelog segments the
// checkpoints list are replayed on top of their tables, and the result is persisted (as Close
// would) before Restore returns, so dir reopens to the checkpoints' state. The restored Store's
// checkpoints go to opts.Checkpoint.Storage (default: storage), as opts.Checkpoint.RestoreMode
// says (NoClaim by default).
//
// Keyed states are matched by name, as Flink identifies state: the checkpoints' Stores may have
// registered their states in different orders, or different sets of states (a subtask registers a
// state when its first record needs it). Their state ids then differ; the restored Store keeps each
// checkpoint's ids in the key groups it came from (state id aliases, internal/engine/registry.go
// and restoreIDs) instead of rewriting any key, and every access, scan and TTL cleanup of a state
// goes to the id its key group holds it under.
//
// Operator state (operator.go) is redistributed as Flink's RoundRobinOperatorStateRepartitioner
// does, by the new subtask's opts.SubtaskIndex and opts.Parallelism and the old subtasks'
// indices and parallelism recorded in the checkpoints: an even-split list gets its contiguous
// share of the old lists concatenated in old subtask order (each subtask keeps its own list
// when the parallelism is unchanged), a union list the whole concatenation, each element
// once by its id, a broadcast state one old subtask's copy. For that, give Restore the handles of
// EVERY subtask of the old job, as Flink gives every new subtask all old operator state
// handles: those whose key groups do not overlap opts.KeyGroups are read for their operator
// state only (their manifests, not their tables).
//
// A canonical savepoint (SavepointCanonical) among the handles brings its registry and
// operator state as any checkpoint does; its entries and timers of opts.KeyGroups (only the
// blocks of those key groups are read) are written into the Store through the engine's write
// path and persisted before Restore returns (savepoint_canonical.go; RestoreStats.CanonicalEntries).
//
// Timers (timers.go) move with their key groups: the Store gets exactly the timers of
// opts.KeyGroups the checkpoints hold (each checkpoint's timer object read once, the sections
// of its key groups checked against their manifest entries), under their timer services,
// which come back registered by name as the states do (RestoreStats.Timers counts them). The
// watermark and processing time start again at math.MinInt64, as in Flink.
//
// Errors: ErrInvalidOptions (opts, or dir "" — a Store in memory only cannot be restored
// into — or not empty); ErrMaxParallelismMismatch when a handle was written with another
// MaxParallelism (key groups would not line up; Flink refuses it too); ErrOverlappingHandles
// when two handles cover one key group of opts.KeyGroups; ErrIncompatibleState when their
// state registries or operator states disagree (one name, two kinds, codecs or TTL flags); ErrIncompleteOperatorState when the handles hold operator list state but are not
// one of each old subtask; ErrOperatorStateTooLarge when the Store's share exceeds
// MaxOperatorStateSize;
// ErrFenced when a handle names a checkpoint a fence of its lineage fences (a zombie's,
// never committed for a reader); checkpoint.ErrNotFound, ErrCorruption (a damaged manifest or
// object — table, changelog or timers —, named), the storage's errors and Open's. On error
// dir is left without a Store (what Restore wrote is removed).
//
// The restored Store is a new writer of its lineage (Options.Checkpoint.Owner): Restore picks
// its writer epoch, above every restored manifest's and every fence of the lineage, and keeps
// it in dir (a reopened Store is the same writer); its first checkpoint claims the epoch with
// a fence object, from which on every older writer of the lineage gets ErrFenced (checkpoint
// package doc, "Writer fencing"). Its checkpoint ids must exceed the restored ones of its
// lineage.
func Restore(dir string, opts Options, storage checkpoint.Storage, handles ...CheckpointHandle) (s *Store, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: Restore needs a directory (a Store in memory only cannot be restored into)", ErrInvalidOptions)
	}
	if storage == nil {
		return nil, fmt.Errorf("%w: Restore needs the storage of the checkpoints", ErrInvalidOptions)
	}
	if c := opts.Checkpoint; c.RestoreMode == Claim && c.Storage != nil && !sameStorage(c.Storage, storage) {
		// A claimed checkpoint's objects become the Store's own, referenced by its next
		// checkpoints by name: in another storage they would not be there.
		return nil, fmt.Errorf("%w: Restore in CLAIM mode needs Options.Checkpoint.Storage to be the storage restored from (or nil)", ErrInvalidOptions)
	}
	d := opts.withDefaults()
	fsys := d.fs
	if names, err := fsys.List(dir); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("%w: Restore into %q: the directory is not empty", ErrInvalidOptions, dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	ctx := context.Background()
	kg := *d.KeyGroups
	// Until the restored state is persisted whole (tables, then the replayed changelog), dir
	// carries a marker that makes Open refuse it: a crash in between must not leave a
	// directory that opens to a part of the checkpoint.
	if err := engine.MarkRestoring(fsys, dir); err != nil {
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	// Whatever fails from here on (a damaged manifest, an incompatible registry) leaves dir as
	// Restore found it.
	defer func() {
		if err != nil && s == nil {
			engine.RemoveRestored(fsys, dir)
		}
	}()
	var sources []*checkpoint.Manifest
	var used []CheckpointHandle
	merged := &engine.Registry{MaxParallelism: d.MaxParallelism, KeyGroups: kg, NextID: 1, States: map[string]engine.PersistedState{}}
	var regs []idSource
	var epoch, lastID uint64
	var opSrcs []engine.OpSource
	var noOps []string
	fencesOf := map[string][]checkpoint.Fence{} // per owner, read once
	for _, h := range handles {
		m, err := checkpoint.ReadManifest(ctx, storage, h.Owner, h.ID)
		if err != nil {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
		}
		if int(m.MaxParallelism) != d.MaxParallelism {
			return nil, fmt.Errorf("%w: checkpoint %d of %q has max parallelism %d, the Store %d",
				ErrMaxParallelismMismatch, h.ID, h.Owner, m.MaxParallelism, d.MaxParallelism)
		}
		fs, ok := fencesOf[h.Owner]
		if !ok {
			if fs, err = checkpoint.ReadFences(ctx, storage, h.Owner, 0); err != nil {
				return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
			}
			fencesOf[h.Owner] = fs
		}
		if i := slices.IndexFunc(fs, func(f checkpoint.Fence) bool { return f.Fences(m.Epoch, m.ID) }); i >= 0 {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w: written by writer epoch %d after the lineage was restored from checkpoint %d by writer epoch %d",
				h.ID, h.Owner, ErrFenced, m.Epoch, fs[i].Point, fs[i].Epoch)
		}
		epoch = max(epoch, m.Epoch)
		// Operator state comes from every checkpoint given, whatever its key groups.
		what := fmt.Sprintf("checkpoint %d of %q", h.ID, h.Owner)
		if len(m.OperatorState) == 0 {
			noOps = append(noOps, what)
		} else {
			o, err := engine.DecodeOps(checkpoint.ManifestName(h.Owner, h.ID)+" (operator state)", m.OperatorState, true)
			if err != nil {
				return nil, fmt.Errorf("strata: restore of %s: %w", what, err)
			}
			opSrcs = append(opSrcs, engine.OpSource{Snap: o, What: what})
		}
		lo, hi := max(int(m.KeyGroups.Start), kg.Start), min(int(m.KeyGroups.End), kg.End)
		if lo > hi {
			continue // nothing of ours
		}
		for i, o := range sources {
			if max(int(o.KeyGroups.Start), lo) <= min(int(o.KeyGroups.End), hi) {
				return nil, fmt.Errorf("%w: checkpoint %d of %q and checkpoint %d of %q both hold key groups of %v",
					ErrOverlappingHandles, h.ID, h.Owner, o.ID, used[i].Owner, kg)
			}
		}
		reg, _, err := decodeRegistry(m.Registry) // a manifest's registry carries no operator state
		if err != nil {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
		}
		regs = append(regs, idSource{lo: uint16(lo), hi: uint16(hi), reg: reg})
		sources = append(sources, m)
		used = append(used, h)
		lastID = max(lastID, h.ID)
	}
	if err := restoreIDs(merged, regs); err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	ops, err := engine.RedistributeOps(opSrcs, noOps, d.SubtaskIndex, d.Parallelism)
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	total := int64(0)
	for _, st := range ops.States {
		if p, ok := merged.States[st.Name]; ok {
			return nil, fmt.Errorf("%w: %q is a keyed %v state in one checkpoint, an %v state in another",
				ErrIncompatibleState, st.Name, p.Kind, st.Kind)
		}
		total += opCost(st)
	}
	if total > MaxOperatorStateSize {
		return nil, fmt.Errorf("%w: the restored operator state of subtask %d of %d counts %d bytes, the bound is %d",
			ErrOperatorStateTooLarge, d.SubtaskIndex, d.Parallelism, total, MaxOperatorStateSize)
	}
	// The Store's writer epoch: above every restored manifest's and every fence of its
	// lineage (a later claim of one of those is a newer writer's; checkpoint doc, "Writer
	// fencing").
	ckStorage := opts.Checkpoint.Storage
	if ckStorage == nil {
		ckStorage = storage
	}
	fences, err := checkpoint.ReadFences(ctx, ckStorage, ownerOf(&d), 0)
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: the fences of %q: %w", dir, ownerOf(&d), err)
	}
	if n := len(fences); n > 0 {
		epoch = max(epoch, fences[n-1].Epoch)
	}
	// The fence point: the lineage goes on from the newest checkpoint restored, or from
	// every checkpoint it holds now if one is newer (a scale-in from other lineages, whose
	// ids need not be this one's, must not fence this lineage's history).
	ownIDs, err := checkpoint.ListCheckpoints(ctx, ckStorage, ownerOf(&d))
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: the checkpoints of %q: %w", dir, ownerOf(&d), err)
	}
	point := slices.Max(append(ownIDs, 0))
	if opts.Checkpoint.RestoreMode == Claim {
		// Before any object is used: the claim markers tell the GC of every other Store that
		// claims these lineages (a scale out) what this one still needs (checkpoint/doc.go,
		// "Claims shared by several Stores").
		for _, h := range used {
			if h.Owner != ownerOf(&d) {
				if err := checkpoint.WriteClaim(ctx, storage, h.Owner, ownerOf(&d), h.ID); err != nil {
					return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
				}
			}
		}
	}
	t0 := time.Now()
	var res engine.RestoreResult
	var lazy *engine.LazyFS
	var adjust func(*engine.Options)
	if opts.Checkpoint.LazyRestore {
		res, lazy, err = engine.RestoreLazy(ctx, fsys, dir, d.MaxParallelism, kg, storage, sources, encodeRegistryOps(merged, ops))
		adjust = func(eo *engine.Options) { eo.FS = lazy }
	} else {
		res, err = engine.Restore(ctx, fsys, dir, d.MaxParallelism, kg, storage, sources, encodeRegistryOps(merged, ops))
	}
	if err != nil {
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	if opts.Checkpoint.Storage == nil {
		opts.Checkpoint.Storage = storage
	}
	s, err = openDir(dir, opts, adjust, true)
	if err != nil {
		engine.RemoveRestored(fsys, dir)
		return nil, err
	}
	// The Store is a new writer of its lineage: its first checkpoint fences the older ones
	// (fenceCheckpoint); the directory remembers it (reopened, it is the same writer).
	s.epoch, s.fenceDue, s.fencePoint, s.writerID = epoch+1, true, max(point, lastID), engine.NewWriterID()
	if err := engine.WriteWriterFile(fsys, dir, engine.WriterRecord{Epoch: s.epoch, Point: s.fencePoint, Writer: s.writerID}); err != nil {
		s.Discard()
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	s.restored = used
	// Only a restored checkpoint of the Store's own lineage is a completed checkpoint of it: the
	// ids of another owner's lineage say nothing of ours (GC would take one above ours for
	// the newest completed and collect ours).
	for _, h := range used {
		if h.Owner == s.owner() {
			s.restoredOwn = max(s.restoredOwn, h.ID)
		}
	}
	if opts.Checkpoint.RestoreMode == Claim {
		s.e.SetCheckpointBase(lastID, s.restoredOwn, res.Tables)
	} else {
		s.e.SetCheckpointBase(lastID, s.restoredOwn, nil) // the first checkpoint is full (NO_CLAIM)
	}
	s.restoreStats = RestoreStats{Bytes: res.Bytes, Tables: len(res.Tables), Linked: res.Linked, Copied: res.Copied, Skipped: res.Skipped}
	t1 := time.Now()
	s.restoreStats.TablesTime = t1.Sub(t0)
	n, skipped, err := s.replayChangelog(ctx, storage, sources)
	t2 := time.Now()
	s.restoreStats.ReplayTime = t2.Sub(t1)
	if err != nil {
		s.Discard()
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	s.restoreStats.ChangelogRecords, s.restoreStats.ChangelogSkipped = n, skipped
	nt, err := s.e.RestoreTimers(ctx, storage, sources)
	if err != nil {
		s.Discard()
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	nc, nct, err := s.restoreCanonical(ctx, storage, sources)
	if err != nil {
		s.Discard()
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	nt += nct
	s.restoreStats.Timers, s.restoreStats.CanonicalEntries = nt, nc
	if n > 0 || nt > 0 || nc > 0 {
		// The replayed records and the timers are in memory only; the directory's persist
		// point (engine.Restore's) holds the tables alone. Persist, as Close would, so that a
		// crash after Restore returns reopens dir to the checkpoint's state, not to its
		// materialization's (TestModel/changelog, crash after a restore).
		if err := s.persistAll(); err != nil {
			s.Discard()
			engine.RemoveRestored(fsys, dir)
			return nil, fmt.Errorf("strata: restore into %q: persisting the replayed changelog and the timers: %w", dir, err)
		}
		s.restoreStats.PersistTime = time.Since(t2)
	}
	if lazy != nil {
		// The directory is complete once the prefetch made every table local (engine doc,
		// invariant 22): the marker goes then.
		err = s.e.StartPrefetch(lazy, func() error { return engine.FinishRestoring(fsys, dir) })
	} else {
		err = engine.FinishRestoring(fsys, dir)
	}
	if err != nil {
		s.Discard()
		engine.RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	return s, nil
}

// RestoreStats describes what Restore did.
type RestoreStats struct {
	// Bytes is the size of the table objects restored; Tables their number, Linked of them
	// hard links and Copied copies; Skipped counts the objects outside the Store's key groups.
	Bytes                           int64
	Tables, Linked, Copied, Skipped int
	// ChangelogRecords is the number of changelog records replayed (checkpoints taken with
	// the changelog on); ChangelogSkipped the records not replayed because a later record
	// of the same key overwrites them (a Put after a Put, a map entry written again, a
	// clear after appends).
	ChangelogRecords, ChangelogSkipped int64
	// Timers is the number of timers restored (of the Store's key groups, every service and
	// time domain).
	Timers int
	// CanonicalEntries is the number of logical entries written from canonical savepoints
	// (SavepointCanonical): values, lists and map entries of the Store's key groups.
	CanonicalEntries int64
	// The phases' wall times: TablesTime fetches and imports the table objects (links or
	// copies, CRC checks), ReplayTime applies the changelog records, PersistTime makes the
	// replayed records and the timers durable in the directory (zero without either).
	TablesTime, ReplayTime, PersistTime time.Duration
}

// LazyRestoreStats follow the prefetch of a lazy restore (CheckpointOptions.LazyRestore; all
// zero for a Store that was not restored lazily). Counts since Restore.
type LazyRestoreStats struct {
	// Files is the number of table files restored lazily; Local of them are complete and
	// verified; Corrupt were found damaged on arrival (their reads fail with ErrCorruption,
	// and the directory stays incomplete).
	Files, Local, Corrupt int
	// RemoteReads and RemoteBytes count the reads served by ranged reads of the checkpoint
	// storage while their file was not local.
	RemoteReads, RemoteBytes int64
	// FetchedBytes is what the prefetch copied from the storage; VerifiedBytes what it
	// checked in place (files hard-linked from a DirStorage).
	FetchedBytes, VerifiedBytes int64
	// Retries counts the prefetch's retries after transient storage errors; LastError is the
	// last error the prefetch met ("" for none).
	Retries   int64
	LastError string
	// Promoted counts the files a read moved to the head of the prefetch queue: a read that
	// found its file not yet local went to the storage, and the prefetch fetches that file
	// next, whole (after the files promoted before it).
	Promoted int64
	// Done is true once every file is local and the directory complete.
	Done bool
}

// RestoreStats returns what Restore did to create the Store (zero for a Store from Open).
func (s *Store) RestoreStats() RestoreStats { return s.restoreStats }

// idSource is the state registry of one checkpoint given to Restore, with the key groups
// lo..hi of the new Store it holds.
type idSource struct {
	lo, hi uint16
	reg    *engine.Registry
}

// restoreIDs fills merged (the restored Store's registry) with the states of the sources, matched
// by name, as Flink identifies state: their kinds, codecs and TTL flags must agree
// (ErrIncompatibleState), their ids need not — Stores register lazily, in the order their records
// need the states, and a state may be missing from some (internal/engine/registry.go, "State id
// aliases"). Each state gets an own id, and an alias in the key groups where its data (or another
// state's data under its own id) says otherwise:
//
//   - the key groups are cut into ranges over which one source, and one alias of it, applies;
//     in each, a state the source holds keeps the source's id there;
//   - a state's own id is its id in the first range (in key-group order) that holds it,
//     unless an earlier state (by name) took that id as its own: then a fresh one;
//   - in a range whose source lacks the state, the state keeps its own id unless the source
//     uses that id for another state: then it gets its fresh id (one per state, reused);
//   - key groups no source holds use the own ids, which are distinct.
//
// So in every key group distinct states have distinct ids (invariant 1), and no entry is
// read or rewritten: the cost is O(sources + aliases) in time and registry bytes. nextID
// becomes larger than every id of every source and every fresh id.
func restoreIDs(merged *engine.Registry, srcs []idSource) error {
	type rng struct {
		lo, hi uint16
		ids    map[string]uint16 // name → id in this range
		used   map[uint16]bool
	}
	var ranges []rng
	for _, src := range srcs {
		merged.NextID = max(merged.NextID, src.reg.NextID)
		for name, st := range src.reg.States {
			if p, ok := merged.States[name]; ok && (p.Kind != st.Kind || p.Codecs != st.Codecs || p.TTL != st.TTL) {
				return fmt.Errorf("%w: state %q is %v state with codecs %v (%s) in one checkpoint, %v state with %v (%s) in another",
					ErrIncompatibleState, name, p.Kind, p.Codecs, withTTL(p.TTL), st.Kind, st.Codecs, withTTL(st.TTL))
			}
			merged.States[name] = st // its id is set below
		}
		// Cut src's key groups where one of its aliases starts or ends.
		cuts := []int{int(src.lo), int(src.hi) + 1}
		for _, as := range src.reg.Aliases {
			for _, a := range as {
				for _, c := range []int{int(a.Lo), int(a.Hi) + 1} {
					if c > int(src.lo) && c <= int(src.hi) {
						cuts = append(cuts, c)
					}
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for i := 0; i+1 < len(cuts); i++ {
			g := rng{lo: uint16(cuts[i]), hi: uint16(cuts[i+1] - 1), ids: map[string]uint16{}, used: map[uint16]bool{}}
			for name, st := range src.reg.States {
				id := st.ID
				for _, a := range src.reg.Aliases[name] {
					if a.Lo <= g.lo && g.hi <= a.Hi {
						id = a.ID
					}
				}
				g.ids[name], g.used[id] = id, true
			}
			ranges = append(ranges, g)
		}
	}
	slices.SortFunc(ranges, func(a, b rng) int { return int(a.lo) - int(b.lo) })
	names := slices.Sorted(maps.Keys(merged.States))
	next := merged.NextID
	fresh := func() (uint16, error) {
		if next > maxStates {
			return 0, fmt.Errorf("%w: the restored states need more than %d state ids", ErrIncompatibleState, maxStates)
		}
		next++
		return uint16(next - 1), nil
	}
	own := map[uint16]bool{}
	aliases := map[string][]engine.IDAlias{}
	for _, name := range names {
		id := uint16(0)
		for _, g := range ranges {
			if x, ok := g.ids[name]; ok {
				id = x
				break
			}
		}
		if id == 0 || own[id] {
			var err error
			if id, err = fresh(); err != nil {
				return err
			}
		}
		own[id] = true
		st := merged.States[name]
		st.ID = id
		merged.States[name] = st
	}
	for _, name := range names {
		id := merged.States[name].ID
		var alt uint16 // the state's fresh id for ranges whose source uses its own id otherwise
		for _, g := range ranges {
			eff, ok := g.ids[name]
			if !ok {
				eff = id
				if g.used[id] {
					if alt == 0 {
						var err error
						if alt, err = fresh(); err != nil {
							return err
						}
					}
					eff = alt
				}
			}
			if eff == id {
				continue
			}
			as := aliases[name]
			if n := len(as); n > 0 && as[n-1].ID == eff && as[n-1].Hi+1 == g.lo {
				as[n-1].Hi = g.hi
			} else {
				as = append(as, engine.IDAlias{Lo: g.lo, Hi: g.hi, ID: eff})
			}
			aliases[name] = as
		}
	}
	merged.NextID = next
	if len(aliases) > 0 {
		merged.Aliases = aliases
	}
	return nil
}

// sameStorage reports whether a and b are the same storage (equal interface values; values of
// a type that cannot be compared count as different).
func sameStorage(a, b checkpoint.Storage) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}
