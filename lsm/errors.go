package lsm

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Sentinel errors of package lsm. Callers test them with errors.Is; the DB
// wraps them with %w and context (file names, offsets, levels). The root
// package maps ErrCorruption (and sstable's corruption errors, which the DB
// wraps with ErrCorruption as well) to strata.ErrCorruption.
var (
	// ErrCorruption: a manifest, CURRENT or table file breaks its format, or
	// the manifest names a table that is missing or has the wrong size. It
	// always comes inside a *CorruptionError naming the file and the byte
	// offset of the damage (errors.As).
	ErrCorruption = errors.New("lsm: corruption")

	// ErrBadMagic: a manifest or CURRENT file does not start with its magic
	// number. Comes inside a *CorruptionError, so errors.Is(err,
	// ErrCorruption) holds too.
	ErrBadMagic = errors.New("lsm: bad magic number")

	// ErrVersion: a manifest or CURRENT file has a format version this code
	// does not read (written by a newer Strata). Comes inside a
	// *CorruptionError; errors.Is(err, ErrCorruption) holds too, because the
	// store cannot be opened either way.
	ErrVersion = errors.New("lsm: unsupported format version")

	// ErrChecksumType: a manifest or CURRENT file names a checksum type other
	// than CRC32C. Comes inside a *CorruptionError.
	ErrChecksumType = errors.New("lsm: unknown checksum type")

	// ErrNoSpace: a write failed because the disk is full (ENOSPC). The
	// error also matches syscall.ENOSPC. Partial files are removed; the DB
	// keeps serving reads and later writes succeed once space is freed.
	ErrNoSpace = errors.New("lsm: no space left on device")

	// ErrLocked: Open found the directory's LOCK file locked: another DB —
	// in this process or another one — has the directory open. Nothing was
	// read or changed. The error also matches syscall.EWOULDBLOCK.
	ErrLocked = errors.New("lsm: directory in use by another open DB")

	// ErrClosed: the DB was closed.
	ErrClosed = errors.New("lsm: closed")

	// ErrInvalidOptions: Options.Validate found a bad field (named in the
	// wrapped message), or the manifest holds files at a level >= NumLevels.
	ErrInvalidOptions = errors.New("lsm: invalid options")

	// ErrMetaTooLarge: Persist was given metadata longer than
	// MaxPersistMeta. Nothing was written.
	ErrMetaTooLarge = errors.New("lsm: persist-point metadata too large")

	// ErrJobNotRun: InstallCompaction was given a job whose Run never
	// returned (the scheduler cancelled it before it started). The job's
	// references are released; nothing changes on disk.
	ErrJobNotRun = errors.New("lsm: compaction job did not run")
)

// CorruptionError reports damage in a file the DB reads: which file, at which
// byte offset, and what was wrong. errors.Is(err, ErrCorruption) holds for
// every CorruptionError; Err, when set, is the more specific cause
// (ErrBadMagic, ErrVersion, ErrChecksumType, or an sstable error).
type CorruptionError struct {
	File   string // path of the damaged file, as passed to the FS
	Offset int64  // byte offset of the damaged record, header or block
	Reason string // what was wrong, for people
	Err    error  // specific cause, or nil
}

// Error formats the file, offset and reason.
func (e *CorruptionError) Error() string {
	s := fmt.Sprintf("lsm: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrCorruption.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// Unwrap returns the specific cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

func corruptf(file string, off int64, cause error, format string, args ...any) error {
	return &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...), Err: cause}
}

// ioError wraps an error from the FS with what the DB was doing, adding
// ErrNoSpace when the cause is ENOSPC so callers need not know errnos.
func ioError(what, name string, err error) error {
	ctx := what + " " + name
	if strings.Contains(err.Error(), name) {
		ctx = what // the *fs.PathError names the file already
	}
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("lsm: %s: %w: %w", ctx, ErrNoSpace, err)
	}
	return fmt.Errorf("lsm: %s: %w", ctx, err)
}
