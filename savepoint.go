package strata

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/checkpoint"
)

// SavepointKind is the format of a savepoint (Flink's SavepointFormatType). Part of no format:
// the kind of a stored savepoint is evident from its objects.
type SavepointKind uint8

const (
	// SavepointNative is a self-contained copy of a checkpoint (Flink's NATIVE format): the
	// engine's own files, none shared with the Store's lineage, so no garbage collection of the
	// Store ever deletes any of it; restored by Restore as any checkpoint, into any key-group
	// range, in either RestoreMode. It depends on the engine's file formats, as a checkpoint
	// does.
	SavepointNative SavepointKind = 1
)

// String returns "NATIVE" or "CANONICAL", Flink's names.
func (k SavepointKind) String() string {
	switch k {
	case SavepointNative:
		return "NATIVE"
	case SavepointCanonical:
		return "CANONICAL"
	}
	return fmt.Sprintf("SavepointKind(%d)", k)
}

// SavepointOwner returns the lineage under which the savepoints of a Store whose checkpoints
// go under owner are written: owner + "-savepoint". Being another owner, it is out of reach
// of the garbage collection of owner's lineage (checkpoint package doc, "Object layout") even
// when the savepoint storage is the checkpoint storage.
func SavepointOwner(owner string) string { return owner + "-savepoint" }

// Savepoint writes a savepoint of the Store's state now to storage, as checkpoint id of the
// lineage SavepointOwner(Owner), and returns its handle for Restore (with storage) or
// LoadCheckpoint. As Flink's savepoint it takes a checkpoint id of the job's sequence (id must
// be above every checkpoint id the Store has taken) and carries the job's inputPosition, the
// state registry, operator and broadcast state and timers.
//
// A native savepoint (SavepointNative) is made by Checkpoint(ctx, id, inputPosition) on the
// Store's own checkpoint storage, copied object by object to storage with
// checkpoint.CopyNative (every copy checked against the manifest's sizes and CRC32Cs), after
// which the Store's checkpoint id is aborted (NotifyCheckpointAborted): it never becomes the
// base of an incremental checkpoint and its garbage collection deletes it, while the
// savepoint, under another owner, is never reached. A crash or error before the savepoint's
// manifest is committed leaves no savepoint that restores (its copied objects are
// unreferenced; a GC of the savepoint lineage collects them) and does not touch the Store's
// checkpoints.
//
// A canonical savepoint (SavepointCanonical, savepoint_canonical.go) is written from the
// Store's state at the call as one object in checkpoint's canonical format plus its manifest
// (object kind checkpoint.KindCanonical), committed last; it takes no checkpoint of the
// Store's lineage, needs no Options.Checkpoint.Storage, and its id must only be new in the
// savepoint lineage (checkpoint.ErrExists otherwise). The stream is built in memory before it
// is stored (O(state size) of Go heap, outside the memory budget).
//
// Like Checkpoint, it runs on the Store's goroutine and returns once the savepoint is durable.
// Errors: ErrInvalidOptions for an unknown kind or a nil storage; Checkpoint's
// (ErrNoCheckpointStorage for a Store without Options.Checkpoint.Storage, ErrClosed, …);
// checkpoint.ErrExists when the savepoint lineage already has id; ErrCorruption when a
// checkpoint object changed under the copy; ctx's and the storages' errors.
func (s *Store) Savepoint(ctx context.Context, storage checkpoint.Storage, kind SavepointKind, id uint64, inputPosition []byte) (CheckpointHandle, error) {
	if kind != SavepointNative && kind != SavepointCanonical {
		return CheckpointHandle{}, fmt.Errorf("%w: savepoint kind %v", ErrInvalidOptions, kind)
	}
	if storage == nil {
		return CheckpointHandle{}, fmt.Errorf("%w: Savepoint needs a storage", ErrInvalidOptions)
	}
	if kind == SavepointCanonical {
		return s.canonicalSavepoint(ctx, storage, id, inputPosition)
	}
	h, err := s.Checkpoint(ctx, id, inputPosition)
	if err != nil {
		return CheckpointHandle{}, err
	}
	owner := SavepointOwner(h.Owner)
	_, err = checkpoint.CopyNative(ctx, s.opts.Checkpoint.Storage, h.Owner, id, storage, owner)
	if aerr := s.NotifyCheckpointAborted(id); err == nil {
		err = aerr
	}
	if err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	h.Owner = owner
	return h, nil
}
