package sstable

import (
	"errors"
	"fmt"
	"io"
)

// Sentinel errors of package sstable. Every error about the contents of a
// file is a *CorruptionError naming the file and the byte offset of the
// damaged structure; errors.Is matches both its specific sentinel (ErrTruncated,
// ErrBadMagic, ErrVersion, ErrChecksumType, ErrChecksum) and ErrCorruption, so
// a caller that only cares whether a file is unusable tests ErrCorruption (the
// root package maps it to strata.ErrCorruption) and one that wants the cause
// tests the specific sentinel. I/O errors from the vfs.File are wrapped with
// the file name and offset and keep their identity (errors.Is(err,
// syscall.EIO)); they do not match ErrCorruption.
var (
	// ErrCorruption matches every error about a file's contents: the specific
	// sentinels below and structural damage found after a checksum matched
	// (which only a buggy writer or a crafted file can produce).
	ErrCorruption = errors.New("sstable: corruption")

	// ErrTruncated: the file is shorter than its header and footer, a read
	// ended before the bytes the index promised, or the file does not end with
	// a footer (a torn or truncated write: the header is intact but the last
	// bytes are not the footer's magic).
	ErrTruncated = errors.New("sstable: truncated file")

	// ErrBadMagic: the file does not start with Magic (not an sstable).
	ErrBadMagic = errors.New("sstable: bad magic")

	// ErrVersion: the header or footer names a format version other than
	// FormatVersion (a file from a newer Strata, or damage in that field).
	ErrVersion = errors.New("sstable: unsupported format version")

	// ErrChecksumType: the header or footer names a checksum type other than
	// ChecksumCRC32C.
	ErrChecksumType = errors.New("sstable: unsupported checksum type")

	// ErrChecksum: a stored CRC32C does not match the bytes it covers (footer,
	// index, filter or data block).
	ErrChecksum = errors.New("sstable: checksum mismatch")

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

// CorruptionError describes damage in a file: which file, where, and which
// check failed. errors.Is(err, ErrCorruption) holds for every
// CorruptionError, and errors.Is(err, e.Err) for its specific sentinel.
type CorruptionError struct {
	File   string // the name given to Open ("" for Dump and fuzzing)
	Offset int64  // byte offset in the file of the damaged structure
	Err    error  // ErrTruncated, ErrBadMagic, ErrVersion, ErrChecksumType, ErrChecksum or ErrCorruption
	Detail string // what was expected and found
}

// Error formats the error as "sstable: <file>: offset <n>: <sentinel>: <detail>".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("sstable: %s: offset %d: %v: %s", e.File, e.Offset, e.Err, e.Detail)
}

// Unwrap returns the specific sentinel and ErrCorruption, so errors.Is matches
// both.
func (e *CorruptionError) Unwrap() []error {
	if e.Err == ErrCorruption || e.Err == nil {
		return []error{ErrCorruption}
	}
	return []error{e.Err, ErrCorruption}
}

// corrupt builds a CorruptionError with an offset relative to the structure
// being decoded; the Reader fills in the file name and rebases the offset.
func corrupt(sentinel error, off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: off, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// locate names the file and rebases the offset of a CorruptionError produced
// by a decoder working on bytes that start at base in the file. Other errors
// are returned unchanged.
func locate(err error, name string, base int64) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		ce.File = name
		ce.Offset += base
		return ce
	}
	return err
}

// readAt reads exactly len(p) bytes at off, turning a short read into
// ErrTruncated and wrapping other errors with the file name and offset.
func readAt(f interface {
	ReadAt([]byte, int64) (int, error)
}, name string, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &CorruptionError{File: name, Offset: off + int64(n), Err: ErrTruncated,
			Detail: fmt.Sprintf("read %d of %d bytes", n, len(p))}
	}
	return fmt.Errorf("sstable: %s: read %d bytes at offset %d: %w", name, len(p), off, err)
}
