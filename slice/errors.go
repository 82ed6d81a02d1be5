package slice

import "errors"

// Sentinel errors of the SliceTable. Callers test them with errors.Is; the
// package wraps them with %w and context (slice offsets, sizes, buckets).
// Damage found by Decode is a *base.CorruptionError (base.ErrCorruption, with
// base.ErrTruncated, base.ErrBadMagic, base.ErrFormatVersion,
// base.ErrChecksumType or base.ErrChecksum as the cause), and a closed table
// returns base.ErrClosed: the errors every tier shares.
var (
	// ErrAlignment: Decode was given a buffer that does not start on an
	// 8-byte boundary (the fingerprint array is read as []uint64 in place).
	ErrAlignment = errors.New("slice: buffer not 8-byte aligned")
	// ErrUnsorted: Build (or a merge) was given entries out of
	// (Order, Key, UserKey, Seq descending) order, or two entries with the
	// same key and sequence number. Nothing is built.
	ErrUnsorted = errors.New("slice: entries out of order")
	// ErrEntry: Build was given an entry it cannot store: an invalid kind,
	// a key or user key over MaxKeySize bytes, or a value over MaxValueSize.
	ErrEntry = errors.New("slice: invalid entry")
	// ErrSeqOrder: Install was given slices whose sequence numbers are not
	// all newer than the chain they would be prepended to (the owner must
	// install transforms in the order their segments were sealed).
	ErrSeqOrder = errors.New("slice: slices older than the chain they join")
	// ErrJob: a compaction or eviction job was installed or cancelled twice,
	// or handed to a Table that did not create it.
	ErrJob = errors.New("slice: job not pending on this table")
	// ErrInvalidated: a MapIter was used after the Table freed slices
	// (InstallCompaction, InstallEviction, Close); it stops without reading
	// freed memory.
	ErrInvalidated = errors.New("slice: iterator invalidated by an install")
	// ErrSnapshotReleased: a Snapshot was iterated after ReleaseSnapshot or
	// the table's Close; nothing is read.
	ErrSnapshotReleased = errors.New("slice: snapshot released")
	// ErrOptions: an Options or NewAllocator argument is out of range; the
	// message names the field.
	ErrOptions = errors.New("slice: invalid options")
)
