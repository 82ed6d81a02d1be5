package strata

import (
	"errors"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/memory"
)

// Sentinel errors. Operations wrap them with %w and context (state name, sizes, key group);
// test with errors.Is. Errors of the tiers below are the same values re-exported (most from
// internal/base, which every tier reports with), so errors.Is(err, strata.ErrMemoryBudget)
// holds for an error that came from memory/ and errors.Is(err, strata.ErrCorruption) for
// damage any tier found, with no translation in between.
var (
	// ErrClosed is returned by every operation on a closed Store or on a state of one, and by
	// a second Close; its text is "store closed". It is base.ErrClosed, which every tier
	// returns after its Close.
	ErrClosed = base.ErrClosed
	// ErrKeyGroupOutOfRange is returned by a state operation on a Key whose key group is not
	// in the Store's key-group range (Flink: "Key group is not in KeyGroupRange"), on a Key
	// made by a Store with another MaxParallelism, and on the zero Key.
	ErrKeyGroupOutOfRange = errors.New("strata: key group out of range")
	// ErrMemoryBudget is returned when a write needs memory beyond the memory budget
	// (Options.MemoryBudget or the shared Budget). It is memory.ErrMemoryBudget. The refused
	// write leaves nothing behind and the Store stays usable, with every earlier acknowledged
	// write readable; the exceptions are operations made of several writes, which document
	// what may remain (ListState.Update and AddAll beyond an eighth of a segment,
	// MergeNamespaces, MapState.PutAll).
	ErrMemoryBudget = memory.ErrMemoryBudget
	// ErrKeyTooLarge is returned by writes when a composite key (key group, state id, key,
	// namespace: 4 bytes, a length varint, the key and the namespace) or an encoded map user
	// key is longer than 65535 bytes; nothing is written. Reads of such a key find nothing
	// rather than fail.
	ErrKeyTooLarge = engine.ErrKeyTooLarge
	// ErrValueTooLarge is returned when an encoded value, map value or list element (with its
	// length varint) is longer than a quarter of Options.SegmentSize (4 MiB at 16 MiB
	// segments); nothing is written.
	ErrValueTooLarge = engine.ErrValueTooLarge
	// ErrIncompatibleState is returned when a state name is registered again with another
	// kind, codec or type, or a descriptor lacks a codec or function; the error names the
	// state. It is engine.ErrIncompatibleState (the engine's restore of operator state
	// returns it too).
	ErrIncompatibleState = engine.ErrIncompatibleState
	// ErrCorruption is returned when stored bytes cannot be decoded: a damaged file of the
	// Store's directory (a *CorruptionError naming the file relative to the directory, the
	// byte offset and the cause below, "strata: corruption: lsm/000012.sst at offset 4096:
	// checksum mismatch: …"), a codec's Decode, list element framing. It is base.ErrCorruption.
	ErrCorruption = base.ErrCorruption
	// ErrNoEntry is returned by MapIterator.Remove without a current entry (Flink's iterator
	// throws IllegalStateException there).
	ErrNoEntry = errors.New("strata: iterator has no current entry")
	// ErrIteratorInvalidated is reported by a MapIterator's Err when the Store had to move or
	// free the memory the iteration walks before it ended: an iteration defers that background
	// work, but only for 65536 writes, or until a writer needs the memory. The entries yielded
	// before were correct; start a new iteration for the rest. A ListIterator of a long list
	// streamed from the LsmStore (ListState.Get) reports it too when it is advanced after a
	// write or WaitBackground.
	ErrIteratorInvalidated = engine.ErrIteratorInvalidated
	// ErrInvalidOptions is returned by Options.Validate and Open; the error names the field.
	ErrInvalidOptions = errors.New("strata: invalid options")
	// ErrNoSpace is returned when the disk under the Store's directory is full (ENOSPC): by
	// Close when it cannot persist, and by writes after background work (an eviction or an
	// LSM compaction) failed for it; also by a checkpoint whose storage (or the Store's disk,
	// for its memory table) is full — the Store goes on, the next checkpoint tries again. The error also matches syscall.ENOSPC. Every
	// acknowledged write stays readable, nothing on disk is damaged, and the failed work is
	// retried after a second, so writes succeed again once space was freed. It is
	// base.ErrNoSpace.
	ErrNoSpace = base.ErrNoSpace
	// ErrLocked is returned by Open when another open Store — in this process or another
	// one — has the directory (its LsmStore's LOCK file is locked, flock(2)); nothing in the
	// directory was read or changed. Close releases the lock. It also
	// matches syscall.EWOULDBLOCK.
	ErrLocked = engine.ErrLocked
	// ErrIncompatibleStore is returned by Open when the directory holds a store persisted with
	// another MaxParallelism or another key-group range than Options asks for (rescaling is a
	// restore, not an Open), or when its state registry cannot be read (with ErrCorruption).
	ErrIncompatibleStore = errors.New("strata: stored state incompatible with options")

	// ErrNoCheckpointStorage is returned by StartCheckpoint and the checkpoint notifications of
	// a Store without Options.Checkpoint.Storage.
	ErrNoCheckpointStorage = errors.New("strata: no checkpoint storage configured (Options.Checkpoint.Storage)")
	// ErrChangelogOff is returned by Store.Materialize on a Store without the changelog
	// (Options.Checkpoint.Changelog nil): there is nothing to materialize.
	ErrChangelogOff = errors.New("strata: the changelog is off (Options.Checkpoint.Changelog)")
	// ErrCheckpointInProgress is returned by StartCheckpoint while the previous checkpoint is
	// still uploading: one checkpoint at a time, as Flink's default
	// execution.checkpointing.max-concurrent-checkpoints = 1. Wait for it, or abort it.
	ErrCheckpointInProgress = engine.ErrCheckpointInProgress
	// ErrCheckpointExists is returned (wrapped) by a checkpoint whose manifest another writer
	// committed first under the same owner and id: this Store is a zombie of its lineage (or
	// an id was reused) and must stop. It is checkpoint.ErrExists.
	ErrCheckpointExists = checkpoint.ErrExists
	// ErrFenced is returned (wrapped) by a checkpoint of a Store whose lineage (its Owner) was
	// restored by another Store since this one started writing it — this Store is a zombie (a
	// partitioned process still running) and must stop; by Restore of a checkpoint so
	// fenced, which never committed for a reader. Each Restore fences every older writer of
	// the Store's lineage (checkpoint package doc, "Writer fencing"; SlateDB's writer epoch).
	// It is checkpoint.ErrFenced.
	ErrFenced = checkpoint.ErrFenced
	// ErrMaxParallelismMismatch is returned by Restore when a checkpoint was written with
	// another MaxParallelism than the Store's: key groups would not line up (Flink refuses
	// such a restore as well).
	ErrMaxParallelismMismatch = engine.ErrMaxParallelismMismatch
	// ErrOverlappingHandles is returned by Restore when two checkpoints given to it hold one
	// key group of the Store's range: which one is newer is unknown.
	ErrOverlappingHandles = engine.ErrOverlappingHandles
	// ErrNoCheckpoint is returned by LatestCheckpoint when no checkpoint is committed under
	// the owner.
	ErrNoCheckpoint = errors.New("strata: no checkpoint")
	// ErrIncompleteOperatorState is returned by Restore when the checkpoints it was given hold
	// operator list state (even-split or union) but are not one checkpoint of each subtask of
	// the old job — subtask indices 0..P-1 once each, of one parallelism P, all of manifest
	// format version 3 —: the lists cannot be redistributed without every old subtask's
	// (Flink hands every new subtask the handles of all old ones). Pass every old subtask's
	// handle, and set Options.SubtaskIndex and Options.Parallelism on the Stores that write
	// them. It is engine.ErrIncompleteOperatorState.
	ErrIncompleteOperatorState = engine.ErrIncompleteOperatorState
	// ErrOperatorStateTooLarge is returned by operator state writes, and by Restore, that
	// would take a Store's operator state beyond MaxOperatorStateSize; nothing changes.
	ErrOperatorStateTooLarge = engine.ErrOperatorStateTooLarge
	// ErrTimerServiceBusy is returned by a TimerService's Register and Delete inside its own
	// ForEach callback, and by its advances inside its ForEach callback or inside a callback of
	// an advance of the same time domain (Flink's timer service leaves these undefined).
	ErrTimerServiceBusy = errors.New("strata: timer service busy")
	// ErrRestoreIncomplete is returned by Open when the directory holds a Restore that did not
	// finish (the process died during it): its state may lack part of the checkpoint, such as
	// the changelog replayed on top of the tables, or, after a lazy restore
	// (CheckpointOptions.LazyRestore), table files the prefetch had not made local before a
	// crash or Close. Empty the directory and restore again.
	ErrRestoreIncomplete = errors.New("strata: the directory holds an incomplete restore")
	// ErrBatchLength is returned (wrapped, with the lengths) by a batched operation whose
	// result or value slices are shorter than its keys (ValueState.GetBatch, PutBatch);
	// nothing was read or written.
	ErrBatchLength = errors.New("strata: batch slices shorter than the keys")

	// The specific causes of an ErrCorruption from the files of a Store's directory: every such
	// error matches ErrCorruption and, when the damage was identified, one of these; the
	// message names the file and the byte offset. A damaged file is never read as data. They
	// are base's causes, so the error a tier built is the error the caller sees.

	// ErrTruncated: a file is shorter than its format says (cut short, or torn by a crash
	// outside the store's write protocol). It is base.ErrTruncated.
	ErrTruncated = base.ErrTruncated
	// ErrChecksum: a CRC32C does not match the bytes it covers (a flipped bit). It is
	// base.ErrChecksum.
	ErrChecksum = base.ErrChecksum
	// ErrFormatVersion: a file or record carries a format version this code does not read
	// (written by a newer Strata). It is base.ErrFormatVersion.
	ErrFormatVersion = base.ErrFormatVersion
	// ErrBadMagic: a file does not start with its magic number (not a file of ours). It is
	// base.ErrBadMagic.
	ErrBadMagic = base.ErrBadMagic
)
