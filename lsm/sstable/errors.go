package sstable

import (
	"errors"
	"fmt"
	"io"

	"github.com/strata-db/strata/internal/base"
)

// Sentinel errors of package sstable. Every error about the contents of a
// file is a *base.CorruptionError naming the file (the name given to Open)
// and the byte offset of the damaged structure; errors.Is matches
// base.ErrCorruption and, when a check identifies it, the cause
// (base.ErrTruncated, base.ErrBadMagic, base.ErrFormatVersion,
// base.ErrChecksumType, base.ErrChecksum); structural damage found after a
// checksum matched (which only a buggy writer or a crafted file can produce)
// has no cause. The root package passes these errors through unchanged. I/O
// errors from the vfs.File are wrapped with the file name and offset and
// keep their identity (errors.Is(err, syscall.EIO)); they do not match
// base.ErrCorruption.
var (
	// ErrOutOfOrder is returned by Writer.Add for an entry that does not sort
	// strictly after the previous one in entry order (Order asc, Key asc,
	// UserKey asc, Seq desc), or whose Kind is not valid.
	ErrOutOfOrder = errors.New("sstable: entry out of order")

	// ErrEntryTooLarge is returned by Writer.Add for an entry whose encoding
	// exceeds 1 GiB (a block must stay below 2 GiB).
	ErrEntryTooLarge = errors.New("sstable: entry too large")

	// ErrFinished is returned by Writer.Add and Writer.Finish after Finish.
	ErrFinished = errors.New("sstable: writer finished")

	// ErrInvalidOptions is returned by NewCache for a capacity below one
	// frame or a frame size out of range.
	ErrInvalidOptions = errors.New("sstable: invalid options")
)

// corrupt builds a *base.CorruptionError with an offset relative to the
// structure being decoded; the Reader fills in the file name and rebases the
// offset (locate). cause is nil for structural damage without a named cause.
func corrupt(cause error, off int64, format string, args ...any) *base.CorruptionError {
	return base.Corrupt("", off, cause, format, args...).(*base.CorruptionError)
}

// locate names the file and rebases the offset of a CorruptionError produced
// by a decoder working on bytes that start at offset at in the file. Other errors
// are returned unchanged.
func locate(err error, name string, at int64) error {
	var ce *base.CorruptionError
	if errors.As(err, &ce) {
		ce.File = name
		ce.Offset += at
		return ce
	}
	return err
}

// readAt reads exactly len(p) bytes at off, turning a short read into
// base.ErrTruncated and wrapping other errors with the file name and offset.
func readAt(f interface {
	ReadAt([]byte, int64) (int, error)
}, name string, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return base.Corrupt(name, off+int64(n), base.ErrTruncated, "read %d of %d bytes", n, len(p))
	}
	return fmt.Errorf("read %s: %d bytes at offset %d: %w", name, len(p), off, err)
}
