package memory

import "errors"

// Sentinel errors of package memory. Callers test them with errors.Is: every error returned by
// this package wraps one of them with %w and the context of the failed request (size in bytes,
// purpose, limit).
var (
	// ErrMemoryBudget is returned (wrapped with the request size in bytes, the purpose and the
	// budget's limit and usage) when a reservation would take Budget.Used above Budget.Limit.
	// Nothing is mapped and nothing stays reserved when it is returned. The root package
	// re-exports it as strata.ErrMemoryBudget.
	ErrMemoryBudget = errors.New("strata: memory budget exhausted")

	// ErrSegmentSize is returned by NewPool when the segment size is not one of
	// the SegmentSize constants (2 to 64 MiB).
	ErrSegmentSize = errors.New("memory: invalid segment size")

	// ErrInvalidSize is returned by Budget.Map when the requested size is not positive.
	ErrInvalidSize = errors.New("memory: invalid mapping size")

	// ErrInvalidPurpose is returned by Budget.Map and Pool.Get for a Purpose >= NumPurposes.
	ErrInvalidPurpose = errors.New("memory: invalid purpose")

	// ErrClosed is returned by Pool.Get after Pool.Close.
	ErrClosed = errors.New("memory: pool closed")
)
