package fresh

import "errors"

// Sentinel errors of the FreshTable. Callers test them with errors.Is; the
// table wraps them with %w and context (sizes, offsets).
var (
	// ErrKeyTooLarge: a key, map key or user key is longer than MaxKeySize
	// bytes. Nothing is written.
	ErrKeyTooLarge = errors.New("fresh: key too large")
	// ErrValueTooLarge: a value or list batch is longer than a quarter of
	// the segment size (or a record would not fit an empty segment).
	// Nothing is written.
	ErrValueTooLarge = errors.New("fresh: value too large")
	// ErrCorruption: DecodeRecord, DecodeSegmentHeader or Table.Verify
	// found bytes that break the segment format.
	ErrCorruption = errors.New("fresh: corruption")
	// ErrClosed: the Table was closed.
	ErrClosed = errors.New("fresh: table closed")
	// ErrNotOldestSealed: DropSealed was given a segment other than the
	// oldest sealed one (a newer one, one dropped already, or another
	// Table's). Nothing is dropped.
	ErrNotOldestSealed = errors.New("fresh: not the oldest sealed segment")
	// ErrSegmentDropped: a SealedSegment's Entries was called after the
	// segment was dropped (or the Table closed), or a MapIter still needed
	// a segment that DropSealed removed.
	ErrSegmentDropped = errors.New("fresh: segment dropped")
	// ErrStartSeq: Options.StartSeq is MaxStartSeq or more, too close to
	// the 56-bit sequence field's limit. New creates no Table.
	ErrStartSeq = errors.New("fresh: start sequence number out of range")
)
