package engine

import (
	"errors"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm"
)

// Sentinel errors the engine returns; the root package re-exports them (strata.ErrNoSpace, …)
// with the same values, so errors.Is holds through either name. Corruption, its causes, a
// closed store and a full disk are internal/base's, which every tier reports with.
var (
	// ErrNoSpace: the disk under the Store's directory is full (ENOSPC). Returned by Persist
	// when it cannot write, and by writes after background work failed for it; also matches
	// syscall.ENOSPC. The failed work is retried (NoSpaceRetry), so it passes once space is back.
	ErrNoSpace = base.ErrNoSpace
	// ErrIteratorInvalidated: an install moved or freed the memory an open map iteration walks
	// (doc.go, protocol item 4). The entries yielded before were correct.
	ErrIteratorInvalidated = errors.New("strata: map iteration invalidated by background work")
	// ErrIncompatibleState: a state name is registered again with another kind, codec or
	// type, or the sources of a restore disagree on a state's (RedistributeOps). The root
	// re-exports it as strata.ErrIncompatibleState.
	ErrIncompatibleState = errors.New("strata: incompatible state")
	// ErrIncompleteOperatorState: the checkpoints of a restore hold operator list state but
	// are not one of each old subtask (RedistributeOps). The root re-exports it as
	// strata.ErrIncompleteOperatorState, which says what to pass.
	ErrIncompleteOperatorState = errors.New("strata: operator state needs the checkpoints of every old subtask")

	// Errors of the tiers, under the names the root package re-exports.
	ErrCorruption    = base.ErrCorruption
	ErrClosed        = base.ErrClosed
	ErrKeyTooLarge   = fresh.ErrKeyTooLarge
	ErrValueTooLarge = fresh.ErrValueTooLarge
	ErrLocked        = lsm.ErrLocked
)
