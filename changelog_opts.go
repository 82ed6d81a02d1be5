package strata

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/engine"
)

// The changelog (DSTL, Flink's FLIP-158): with CheckpointOptions.Changelog set, every write is
// also appended to a changelog buffer, persisted in batches in the background; a checkpoint
// then stores only the log's tail and lists the last materialization (a native checkpoint
// taken in the background, periodically) with the log after it; a restore loads the
// materialization and replays the log for its key groups. Checkpoints become about as long as
// the tail's upload, whatever the state's size. The mechanism is internal/engine's
// (internal/engine/changelog.go) over package changelog.

// ChangelogWriter is the changelog buffer of a process (Flink's per-TaskManager batching
// writer): Stores given the same one through ChangelogOptions.Writer persist their records
// together, one object per persist. Safe for concurrent use.
type ChangelogWriter struct{ w *engine.ChangelogWriter }

// ChangelogWriterOptions configure a ChangelogWriter.
type ChangelogWriterOptions struct {
	// Storage receives the changelog objects; it must be the Stores' checkpoint storage.
	// Required.
	Storage checkpoint.Storage
	// Prefix is the first name segment of the objects (checkpoint.ValidateOwner), one per
	// process, e.g. "tm-<id>". Required. Objects under it are garbage-collected only by a
	// Store whose Owner is Prefix (see ChangelogOptions).
	Prefix string
	// Budget, if not nil, is charged for the bytes buffered (usually the Stores'
	// SharedBudget). nil: not charged.
	Budget *Budget
	// PersistDelay (default 10 ms), Threshold (bytes, default 10 MiB) and
	// PreemptiveThreshold (bytes, default 5 MiB) are changelog.WriterOptions' (Flink's
	// dstl.dfs.batch.persist-delay, persist-size-threshold, preemptive-persist-threshold).
	PersistDelay                   time.Duration
	Threshold, PreemptiveThreshold int64
}

// NewChangelogWriter returns a ChangelogWriter to share among Stores. Errors:
// ErrInvalidOptions naming the field.
func NewChangelogWriter(o ChangelogWriterOptions) (*ChangelogWriter, error) {
	w, err := engine.NewChangelogWriter(engine.ChangelogWriterOptions{Storage: o.Storage, Prefix: o.Prefix, Budget: o.Budget,
		PersistDelay: o.PersistDelay, Threshold: o.Threshold, PreemptiveThreshold: o.PreemptiveThreshold})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return &ChangelogWriter{w: w}, nil
}

// Close closes the writer: the unpersisted records of its Stores are dropped. Close the
// Stores first.
func (w *ChangelogWriter) Close() { w.w.Close() }

// ChangelogCache fetches each changelog object once for all the Stores of a process that
// restore from it (CheckpointOptions.ChangelogCache), whatever their number: the fix of
// FLINK-27155, where every operator of a TaskManager downloaded the same changelog file again.
// A rescaled restore reads one old Store's objects from several new Stores, and a shared
// ChangelogWriter puts many Stores' records in one object; with the cache each object is
// fetched whole, once, into a local directory, and read from there by every Store. Objects
// are kept while a restore reads them (reference counts) and for an idle timeout after.
// Create one per process, like a SharedBudget; safe for concurrent use by Stores restoring
// on different goroutines.
type ChangelogCache struct{ c *engine.ChangelogCache }

// ChangelogCacheStats are a ChangelogCache's figures since NewChangelogCache (counters) and
// now (Entries, Bytes). A copy: reading it takes no lock of the cache.
type ChangelogCacheStats struct {
	// Fetches counts the objects fetched from checkpoint storage; FetchedBytes their bytes.
	Fetches, FetchedBytes int64
	// Hits counts object reads served by an entry another restore fetched or was fetching:
	// the fetches the cache saved (FLINK-27155's duplicate downloads).
	Hits int64
	// Evictions counts the entries deleted, idle past the timeout or at Close.
	Evictions int64
	// Entries is the number of objects cached now, Bytes their bytes on local disk.
	Entries int
	Bytes   int64
}

// NewChangelogCache returns a ChangelogCache keeping its files in dir (created if missing;
// files an earlier process left there are removed). idle is how long an object no restore
// reads stays cached: 0 deletes it at once, negative means 10 minutes (Flink's default
// local-cache idle timeout). Errors: ErrInvalidOptions for an empty dir; the file system's.
func NewChangelogCache(dir string, idle time.Duration) (*ChangelogCache, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: NewChangelogCache: no directory", ErrInvalidOptions)
	}
	c, err := engine.NewChangelogCache(dir, idle)
	if err != nil {
		return nil, err
	}
	return &ChangelogCache{c: c}, nil
}

// Stats returns the cache's figures.
func (c *ChangelogCache) Stats() ChangelogCacheStats { return ChangelogCacheStats(c.c.Stats()) }

// Close deletes the cached files; those a restore still reads go when it ends. Restores
// started after Close fail to read the changelog. Errors: a failure to remove a file.
func (c *ChangelogCache) Close() error { return c.c.Close() }

// ChangelogOptions turn the changelog on (CheckpointOptions.Changelog; nil: off). A Store may
// switch it on or off across a restore: Restore replays a checkpoint's log either way.
type ChangelogOptions struct {
	// Writer is a ChangelogWriter shared with other Stores of the process. nil: the Store has
	// its own, with Prefix = the Store's Owner, charged to the Store's budget, so its objects
	// are garbage-collected with the Store's checkpoints; it buffers at most a sixteenth of the
	// budget's limit (between 1 MiB and the default 10 MiB; its PreemptiveThreshold half of
	// that), so that the buffer of a small budget does not take the state's room (a 64 MiB
	// budget: 4 MiB, persisted from 2 MiB). The objects of a shared writer
	// under another prefix are not collected by any Store (no cross-Store GC yet).
	Writer *ChangelogWriter
	// MaterializationInterval is the time between background materializations (Flink's
	// periodic-materialize.interval): default 10 minutes; negative: only
	// SpaceAmplificationCap starts them.
	MaterializationInterval time.Duration
	// MaxMaterializationFailures is how many consecutive materializations fail before
	// ChangelogStats.MaterializationFailing reports it (until one is durable again); default
	// 3. Unlike Flink's materialization.max-allowed-failures, which fails the job, nothing
	// stops: a failure of the checkpoint storage (EIO, ENOSPC, a timeout) may pass, so a
	// failed materialization is retried after a second (each attempt seals the active
	// segment), writes go on, checkpoints fail with the storage's error until it answers,
	// and Close persists the local state whatever the storage does. Damage (ErrCorruption)
	// still stops the Store, as for any background work.
	MaxMaterializationFailures int
	// SpaceAmplificationCap bounds the changelog's checkpoint storage (the last
	// materialization and the log after it) to cap × the live state (DESIGN §5): a
	// materialization starts early once the bytes logged since the last one exceed (cap − 1)
	// × the live state, or once the state shrank (TTL cleanup, compacted deletes) and the
	// last materialization with the log exceed cap × it. The live state is the tiers' resident
	// bytes (Stats: Fresh.DataBytes + Slices.Bytes + LSM.Bytes; ChangelogStats.LiveStateBytes),
	// checked every 64 logged writes and at each StartCheckpoint (internal/engine doc.go,
	// "Changelog"). 1.5 allows half the live state's size of log. 0: off; otherwise at least 1.
	SpaceAmplificationCap float64
}

// validate checks the options (Options.Validate).
func (c *ChangelogOptions) validate() error {
	if c.MaxMaterializationFailures < 0 {
		return fmt.Errorf("%w: Options.Checkpoint.Changelog.MaxMaterializationFailures = %d: must not be negative",
			ErrInvalidOptions, c.MaxMaterializationFailures)
	}
	if c.SpaceAmplificationCap != 0 && !(c.SpaceAmplificationCap >= 1) {
		return fmt.Errorf("%w: Options.Checkpoint.Changelog.SpaceAmplificationCap = %v: 0 or at least 1",
			ErrInvalidOptions, c.SpaceAmplificationCap)
	}
	return nil
}

// ChangelogStats describes a Store's changelog now (Store.ChangelogStats): its generations
// (as Flink's changelog backend, one per materialization cut: the log after it), its
// materializations and their failures, and the sizes the space-amplification cap compares.
// Counters run since Open or Restore; a Store with the changelog off has Enabled false and
// every other field zero. The per-class CPU and bytes of persists and materializations are in
// Stats.Background, the records and bytes logged in Stats.Changelog.
type ChangelogStats struct {
	// Enabled is false when the changelog is off (Options.Checkpoint.Changelog nil).
	Enabled bool
	// Generations is the number of generations not yet truncated: 1 at rest; 2 or more while
	// a materialization is newer than the last completed checkpoint's base (the older one
	// and the log after it stay listed until a completed checkpoint is based on the newer).
	// Handles is the number of log segments they hold that a persist has stored.
	Generations, Handles int
	// LogBytes estimates the record bytes appended since the last materialization cut: what a
	// restore would replay on top of the materialization (bytes).
	LogBytes int64
	// Materializations counts the durable materializations, MaterializationFailures the
	// failed ones (a failure of the checkpoint storage that may pass is retried).
	Materializations, MaterializationFailures int64
	// MaterializedSeq is the sequence number of the newest durable materialization's cut
	// (0: none yet).
	MaterializedSeq uint64
	// MaterializationRunning is true while a materialization uploads.
	MaterializationRunning bool
	// MaterializationFailing is true once ChangelogOptions.MaxMaterializationFailures
	// materializations in a row have failed, until one is durable again (Flink's
	// materialization.max-allowed-failures; here nothing stops: the local state does not need
	// the checkpoint storage).
	MaterializationFailing bool
	// Persists counts the background persists of the log submitted.
	Persists int64
	// LiveStateBytes is the live state's size the SpaceAmplificationCap compares with: the
	// FreshTable's data bytes, the SliceTable's memory and the LsmStore's table bytes, now
	// (bytes). MaterializedBytes is the newest durable materialization's table bytes (0:
	// none).
	LiveStateBytes, MaterializedBytes int64
	// LastError is the last failure of a persist or a materialization, nil if none.
	LastError error
}

// ChangelogStats returns the figures of the Store's changelog (Enabled false when off).
func (s *Store) ChangelogStats() ChangelogStats {
	if s.closed {
		return ChangelogStats{}
	}
	s.enter(opCall)
	defer s.exit()
	return ChangelogStats(s.e.ChangelogStats())
}

// Materialize takes a materialization of the changelog now and returns once it is durable or
// has failed, as Flink's tests drive the changelog backend's materialization
// (PeriodicMaterializationManager) by hand: the state at the call becomes the base of later
// changelog checkpoints, and the log before it is truncated when the next checkpoint after it
// completes. A background materialization already running (cut before the call) is waited
// for first. A failure counts in Stats.Changelog (MaterializationFailures,
// LastMaterializationError) and towards ChangelogOptions.MaxMaterializationFailures as a
// background one does.
// Errors: ErrChangelogOff, ErrClosed, the materialization's (the storage's, ErrMemoryBudget),
// a sticky background failure, ctx's (the materialization then goes on in the background).
// Use from the Store's goroutine only.
func (s *Store) Materialize(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	if s.opts.Checkpoint.Changelog == nil {
		return ErrChangelogOff
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.hotErrCheck(); err != nil {
		return fmt.Errorf("strata: materialize: %w", err)
	}
	if err := s.e.Materialize(ctx); err != nil {
		return fmt.Errorf("strata: materialize: %w", err)
	}
	return nil
}

// changelogEngineOptions returns the engine's changelog options for a Store of opts (defaults
// applied): the shared writer, or the options of the engine's own (Prefix = the Store's Owner,
// charged to the Store's budget).
func changelogEngineOptions(opts *Options, budget *Budget) (*engine.ChangelogOptions, error) {
	c := opts.Checkpoint.Changelog
	if c == nil {
		return nil, nil
	}
	if opts.Checkpoint.Storage == nil {
		return nil, fmt.Errorf("%w: Options.Checkpoint.Changelog needs Options.Checkpoint.Storage", ErrInvalidOptions)
	}
	owner := ownerOf(opts)
	kg := *opts.KeyGroups
	o := &engine.ChangelogOptions{
		NewWriter: engine.ChangelogWriterOptions{Storage: opts.Checkpoint.Storage, Prefix: owner, Budget: budget,
			Threshold: engine.OwnWriterThreshold(budget.Limit()), PreemptiveThreshold: engine.OwnWriterThreshold(budget.Limit()) / 2},
		Spec: engine.CheckpointSpec{Storage: opts.Checkpoint.Storage, Owner: owner, MaxParallelism: uint32(opts.MaxParallelism),
			KeyGroups: kg},
		MaterializationInterval: c.MaterializationInterval, MaxMaterializationFailures: c.MaxMaterializationFailures,
		SpaceAmplificationCap: c.SpaceAmplificationCap}
	if c.Writer != nil {
		o.Writer = c.Writer.w
	}
	return o, nil
}
