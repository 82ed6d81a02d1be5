package changelog

import (
	"errors"
	"fmt"

	"github.com/strata-db/strata/memory"
)

// Errors of package changelog. Damaged bytes are never reported with these: they are a
// *base.CorruptionError (errors.Is(err, base.ErrCorruption)) naming the object and offset.
var (
	// ErrInvalidRecord: Append was given a record that breaks the format's rules: a kind
	// outside 1..8, a user key or value for a kind that has none (doc.go, "Record, version
	// 2"), a key shorter than 2 bytes, a key group that is not the key's
	// (base.KeyGroupOf; FLINK-26063 logged timers under the wrong key group), a key group
	// outside the Log's range, or a sequence number below the last one appended.
	ErrInvalidRecord = errors.New("changelog: invalid record")

	// ErrNotPersisted: Log.Handles was asked for records that are still buffered; call
	// Writer.Persist (or Log.Checkpoint) first.
	ErrNotPersisted = errors.New("changelog: records not persisted yet")

	// ErrClosed: the Log or its Writer is closed.
	ErrClosed = errors.New("changelog: closed")

	// ErrThreshold: Append or Reserve was refused because the Writer buffers
	// WriterOptions.Threshold bytes, in flight included (Flink's in-flight data limit). It
	// matches memory.ErrMemoryBudget, but unlike the budget's refusal it says nothing about
	// the state's memory: a persist frees it, evicting state does not.
	ErrThreshold = fmt.Errorf("changelog: buffered bytes at WriterOptions.Threshold, persist first: %w", memory.ErrMemoryBudget)
)

// Append's refusals, preallocated so that Append allocates nothing even when it refuses
// (backpressure is a loop of refused Appends). Each matches memory.ErrMemoryBudget.
var (
	errBudget = fmt.Errorf("changelog: buffer refused by the memory budget: %w", memory.ErrMemoryBudget)
	// errChunkMap: no idle chunk and mmap refused a new one (doc.go, "Record buffer"); a
	// persist gives chunks back, so it is backpressure like the others.
	errChunkMap = fmt.Errorf("changelog: mapping a record buffer chunk failed, persist first: %w", memory.ErrMemoryBudget)

	errKind       = fmt.Errorf("%w: op kind outside 1..8", ErrInvalidRecord)
	errField      = fmt.Errorf("%w: a user key or value for an op kind that has none", ErrInvalidRecord)
	errShortKey   = fmt.Errorf("%w: composite key shorter than 2 bytes", ErrInvalidRecord)
	errWrongGroup = fmt.Errorf("%w: key group is not the key's (base.KeyGroupOf)", ErrInvalidRecord)
	errOutOfRange = fmt.Errorf("%w: key group outside the Log's range", ErrInvalidRecord)
	errSeqOrder   = fmt.Errorf("%w: sequence number below the last one appended", ErrInvalidRecord)
	errTooLarge   = fmt.Errorf("%w: record larger than MaxRecord", ErrInvalidRecord)
	errLogClosed  = fmt.Errorf("%w: log", ErrClosed)
)
