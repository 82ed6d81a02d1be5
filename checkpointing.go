package strata

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/engine"
)

// Checkpoints, completion, retention and restore with rescaling — Flink's checkpointing of a
// keyed state backend (CheckpointedFunction.snapshotState, CheckpointListener, RestoreMode),
// over the storage protocol of package checkpoint. The mechanism is internal/engine's
// (internal/engine/checkpoint.go; Restore is one call of internal/engine/restoreseq.go): a cut
// that pins the immutable tiers in O(slices + files), an upload in the background, a manifest
// committed last with create-if-absent.

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
	// of the checkpoint storage while a background prefetch (at most 4 files in flight when
	// every file is hard-linked, 16 when any is remote; on workers of its own beside
	// BackgroundWorkers)
	// copies them in and checks each one's CRC32C as it arrives; from a DirStorage on the same
	// file system they are hard links at once and only the check runs in the background.
	// Stats.LazyRestore follows the prefetch. A file found damaged fails the reads that need
	// it with ErrCorruption; a transient storage error is retried. Until the prefetch
	// finished the directory is incomplete: a crash or a Close before then leaves it refused
	// by Open (ErrRestoreIncomplete) — remove it and restore again. Default false: Restore
	// fetches and checks every table first. Timers and canonical savepoints are restored
	// before Restore returns either way; the changelog tail is read and checked (a damaged
	// log fails Restore), but with LazyRestore it is sorted and written in the background.
	// Meanwhile the Get of a value, reducing or aggregating state is answered from the
	// collected tail itself, through an index of its newest value record per key built
	// before Restore returns (11 to 21 bytes a collected record, beside the tail's own 16
	// bytes a record and its bytes: off the Go heap, outside the budget, freed with the
	// tail); every other read, a checkpoint, an eviction, a write that fills a segment (its
	// flush), WaitBackground, CompactAll or Close waits for the tail (the engine's doc.go,
	// "Lazy tail", invariants 33, 34 and 39), and the first read or write after it is written
	// installs it. Until then the directory is incomplete as above, and a failure writing it
	// fails every later read, write and Close: restore again.
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
	if err := s.hotErrCheck(); err != nil {
		return nil, fmt.Errorf("strata: checkpoint %d: %w", id, err)
	}
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
func Restore(dir string, opts Options, storage checkpoint.Storage, handles ...CheckpointHandle) (*Store, error) {
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
	if opts.Checkpoint.Storage == nil {
		opts.Checkpoint.Storage = storage
	}
	opts = opts.withDefaults()
	if names, err := opts.fs.List(dir); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("%w: Restore into %q: the directory is not empty", ErrInvalidOptions, dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	eo, err := engineOptions(dir, &opts)
	if err != nil {
		return nil, err
	}
	spec := engine.RestoreSpec{Storage: storage, Owner: ownerOf(&opts), CheckpointStorage: opts.Checkpoint.Storage,
		Claim: opts.Checkpoint.RestoreMode == Claim, Lazy: opts.Checkpoint.LazyRestore,
		Subtask: opts.SubtaskIndex, Parallelism: opts.Parallelism}
	for _, h := range handles {
		spec.Handles = append(spec.Handles, engine.RestoreHandle{Owner: h.Owner, ID: h.ID})
	}
	if c := opts.Checkpoint.ChangelogCache; c != nil {
		spec.ChangelogCache = c.c
	}
	r, err := engine.Restore(context.Background(), eo, spec)
	if err != nil {
		return nil, err
	}
	s := newStore(dir, opts, eo.Budget, r.Engine)
	// The Store is a new writer of its lineage: its first checkpoint fences the older ones
	// (fenceCheckpoint) with the epoch the directory's WRITER file keeps.
	s.epoch, s.fenceDue, s.fencePoint, s.writerID = r.Writer.Epoch, true, r.Writer.Point, r.Writer.Writer
	for _, i := range r.Used {
		s.restored = append(s.restored, handles[i])
	}
	s.restoredOwn = r.RestoredOwn
	s.restoreStats = restoreStatsOf(r.Stats)
	ops := r.Ops
	if len(ops.States) == 0 {
		ops = nil
	}
	if err := s.load(r.Registry, ops); err != nil {
		return nil, errors.Join(fmt.Errorf("strata: restore into %q: %w", dir, err), r.Discard())
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
	// clear after appends). With LazyRestore, ChangelogRecords counts the records read and
	// ChangelogSkipped is 0: the tail is written after Restore returns.
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
	// BulkFiles is the number of L0 files the changelog replay and the canonical entries
	// were written into directly, sorted by key (internal/engine doc.go, "Bulk changelog
	// replay"), rather than applied through the write path one record at a time
	// (ChangelogRecords counts the records either way). BulkParallelBatches counts the
	// replay's batches large enough to be split by key-group range and written by several
	// background workers at once. With LazyRestore both grow as the tail is written after
	// Restore returns; read them again after the first read or write to see the tail's.
	BulkFiles, BulkParallelBatches int64
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

// restoreStatsOf returns the RestoreStats of the engine's st: every field of the same name
// (TestRestoreStatsOf checks that none is left out); BulkFiles and BulkParallelBatches are
// read live by Store.RestoreStats.
func restoreStatsOf(st engine.RestoreStats) RestoreStats {
	return RestoreStats{Bytes: st.Bytes, Tables: st.Tables, Linked: st.Linked, Copied: st.Copied, Skipped: st.Skipped,
		ChangelogRecords: st.ChangelogRecords, ChangelogSkipped: st.ChangelogSkipped, Timers: st.Timers,
		CanonicalEntries: st.CanonicalEntries, TablesTime: st.TablesTime, ReplayTime: st.ReplayTime, PersistTime: st.PersistTime}
}

// RestoreStats returns what Restore did to create the Store (zero for a Store from Open),
// BulkFiles and BulkParallelBatches as of now (a lazy tail's count once it is written). Owner
// goroutine only; also on a closed Store.
func (s *Store) RestoreStats() RestoreStats {
	rs := s.restoreStats
	rs.BulkFiles, rs.BulkParallelBatches = s.e.BulkReplayed()
	return rs
}

// sameStorage reports whether a and b are the same storage (equal interface values; values of
// a type that cannot be compared count as different).
func sameStorage(a, b checkpoint.Storage) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}
