package fresh

import "errors"

// Sentinel errors of the FreshTable. Callers test them with errors.Is; the
// table wraps them with %w and context (sizes, offsets). Corruption
// (base.ErrCorruption, as a *base.CorruptionError with the offset) and a
// closed table (base.ErrClosed) are reported with the errors every tier
// shares, from internal/base. Texts that can reach a Store's user say what is
// wrong in the user's terms, without the tier's name.
var (
	// ErrKeyTooLarge: a key, map key or user key is longer than MaxKeySize
	// bytes. Nothing is written.
	ErrKeyTooLarge = errors.New("key too large")
	// ErrValueTooLarge: a value or list batch is longer than a quarter of
	// the segment size (or a record would not fit an empty segment).
	// Nothing is written.
	ErrValueTooLarge = errors.New("value too large")
	// ErrNotOldestSealed: DropSealed was given a segment other than the
	// oldest sealed one (a newer one, one dropped already, or another
	// Table's). Nothing is dropped.
	ErrNotOldestSealed = errors.New("fresh: not the oldest sealed segment")
	// ErrSegmentDropped: a SealedSegment's Entries was called after the
	// segment was dropped (or the Table closed), or a MapIter still needed
	// a segment that DropSealed removed.
	ErrSegmentDropped = errors.New("segment dropped")
	// ErrStartSeq: Options.StartSeq is MaxStartSeq or more, too close to
	// the 56-bit sequence field's limit. New creates no Table.
	ErrStartSeq = errors.New("fresh: start sequence number out of range")
)
