package base

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// Errors every tier reports the same way. The tiers wrap them with %w and
// context; the root package re-exports them (strata.ErrCorruption is
// ErrCorruption, and so on), so errors.Is works across the tiers without any
// translation. Their texts are for the Store's users: they name what is
// wrong, never the tier that found it.
var (
	// ErrCorruption matches every error about bytes that break their format,
	// in a file or in memory: every *CorruptionError, and the root package's
	// codec and framing errors. The specific cause, when known, is one of
	// ErrTruncated, ErrChecksum, ErrFormatVersion, ErrChecksumType or
	// ErrBadMagic, reachable with errors.Is as well.
	ErrCorruption = errors.New("strata: corruption")

	// ErrTruncated: a file or block is shorter than its format says (cut
	// short, or torn by a crash outside the write protocol). A cause inside a
	// *CorruptionError.
	ErrTruncated = errors.New("truncated file")

	// ErrChecksum: a stored CRC32C does not match the bytes it covers. A
	// cause inside a *CorruptionError.
	ErrChecksum = errors.New("checksum mismatch")

	// ErrFormatVersion: a file or block carries a format version this code
	// does not read (written by a newer Strata, or damage in that field). A
	// cause inside a *CorruptionError.
	ErrFormatVersion = errors.New("unsupported format version")

	// ErrChecksumType: a file or block names a checksum type other than
	// CRC32C. A cause inside a *CorruptionError; the formats check it after
	// the magic and the version, so each failure has its own cause.
	ErrChecksumType = errors.New("unsupported checksum type")

	// ErrBadMagic: a file or block does not start with its magic number (it
	// is not one of ours). A cause inside a *CorruptionError.
	ErrBadMagic = errors.New("bad magic number")

	// ErrClosed is returned by every tier after its Close (the FreshTable,
	// the SliceTable, the LsmStore), so a closed Store reports "store closed"
	// whichever tier noticed it.
	ErrClosed = errors.New("store closed")

	// ErrNoSpace: a write failed because the disk is full (ENOSPC). The tiers
	// that write files wrap it together with the syscall error, so the error
	// also matches syscall.ENOSPC.
	ErrNoSpace = errors.New("no space left on device")
)

// CorruptionError reports damaged bytes: which file, at which byte offset,
// and what was wrong. errors.Is(err, ErrCorruption) holds for every
// CorruptionError, and errors.Is(err, cause) for the cause inside Err
// (ErrChecksum and the others above).
//
// Its text is
//
//	strata: corruption: <File> at offset <Offset>: <Err>
//
// with ": <File>" left out when File is empty (bytes in memory) and
// " at offset <Offset>" left out when Offset < 0 (the damage has no place,
// e.g. a missing file).
type CorruptionError struct {
	// File names the damaged file: relative to the Store's directory when
	// the tier knows it ("lsm/000012.sst"), else the path given to the file
	// system; empty for bytes in memory (a segment or a slice).
	File string
	// Offset is the byte offset of the damaged record, header or block in
	// the file (or in the in-memory block); negative when unknown.
	Offset int64
	// Err is the cause and what was expected and found, e.g.
	// fmt.Errorf("%w: block 3 crc32c %#x, stored %#x", ErrChecksum, …);
	// it may be nil.
	Err error
}

// Error formats the file, offset and cause as documented on the type.
func (e *CorruptionError) Error() string {
	b := make([]byte, 0, 64)
	b = append(b, "strata: corruption"...)
	switch {
	case e.File != "" && e.Offset >= 0:
		b = append(b, ": "...)
		b = append(b, e.File...)
		b = append(b, " at offset "...)
		b = strconv.AppendInt(b, e.Offset, 10)
	case e.File != "":
		b = append(b, ": "...)
		b = append(b, e.File...)
	case e.Offset >= 0:
		b = append(b, " at offset "...)
		b = strconv.AppendInt(b, e.Offset, 10)
	}
	if e.Err != nil {
		b = append(b, ": "...)
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

// Is reports whether target is ErrCorruption, so errors.Is(err,
// ErrCorruption) holds for every CorruptionError.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// Unwrap returns Err, so errors.Is finds the cause (ErrChecksum, …) and an
// error from the file system (fs.ErrNotExist) inside it.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Corrupt returns a *CorruptionError for file at byte offset off (negative:
// unknown). cause (ErrTruncated, ErrChecksum, ErrFormatVersion,
// ErrChecksumType, ErrBadMagic, or any error such as fs.ErrNotExist) may be
// nil; format and args, when format is not empty, say what was expected and
// found and follow the cause in the text: "checksum mismatch: block 3 …".
func Corrupt(file string, off int64, cause error, format string, args ...any) error {
	var err error
	switch {
	case format == "":
		err = cause
	case cause == nil:
		err = errors.New(fmt.Sprintf(format, args...))
	default:
		err = fmt.Errorf("%w: %s", cause, fmt.Sprintf(format, args...))
	}
	return &CorruptionError{File: file, Offset: off, Err: err}
}

// CRC32C is the Castagnoli table every checksum of every format uses
// (hardware-accelerated on amd64 and arm64): crc32.Checksum(b, CRC32C).
var CRC32C = crc32.MakeTable(crc32.Castagnoli)
