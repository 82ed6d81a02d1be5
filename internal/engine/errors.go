package engine

import (
	"errors"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/lsm"
)

// Sentinel errors the engine returns; the root package re-exports them (strata.ErrNoSpace, …)
// with the same values, so errors.Is holds through either name.
var (
	// ErrNoSpace: the disk under the Store's directory is full (ENOSPC). Returned by Persist
	// when it cannot write, and by writes after background work failed for it; also matches
	// syscall.ENOSPC. The failed work is retried (NoSpaceRetry), so it passes once space is back.
	ErrNoSpace = errors.New("strata: no space left on device")
	// ErrIteratorInvalidated: an install moved or freed the memory an open map iteration walks
	// (engine.go, protocol item 4). The entries yielded before were correct.
	ErrIteratorInvalidated = errors.New("strata: map iteration invalidated by background work")

	// The causes of a corruption of the directory's files (lowerError adds them beside
	// ErrCorruption).
	ErrTruncated     = errors.New("strata: truncated file")
	ErrChecksum      = errors.New("strata: checksum mismatch")
	ErrFormatVersion = errors.New("strata: unsupported format version")
	ErrBadMagic      = errors.New("strata: bad magic number")

	// Errors of the tiers, under the names the root package re-exports.
	ErrCorruption    = fresh.ErrCorruption
	ErrClosed        = fresh.ErrClosed
	ErrKeyTooLarge   = fresh.ErrKeyTooLarge
	ErrValueTooLarge = fresh.ErrValueTooLarge
	ErrLocked        = lsm.ErrLocked
)
