package lsm

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/strata-db/strata/internal/base"
)

// Sentinel errors of package lsm. Callers test them with errors.Is; the DB
// wraps them with %w and context (file names, offsets, levels). Damage is
// reported with the errors every tier shares (internal/base), which the root
// package re-exports unchanged: a *base.CorruptionError naming the file (as
// Options.Name/<file>) and the byte offset, matching base.ErrCorruption and,
// when a check identifies it, its cause — base.ErrBadMagic,
// base.ErrFormatVersion, base.ErrChecksumType, base.ErrChecksum or
// base.ErrTruncated for manifests and CURRENT, the same causes from package
// sstable for tables, fs.ErrNotExist for a missing file. A full disk is
// base.ErrNoSpace (with syscall.ENOSPC), a closed DB base.ErrClosed.
var (
	// ErrLocked: Open found the directory's LOCK file locked: another DB —
	// in this process or another one — has the directory open. Nothing was
	// read or changed. The error also matches syscall.EWOULDBLOCK.
	ErrLocked = errors.New("directory in use by another open store")

	// ErrInvalidOptions: Options.Validate found a bad field (named in the
	// wrapped message), or the manifest holds files at a level >= NumLevels.
	ErrInvalidOptions = errors.New("lsm: invalid options")

	// ErrMetaTooLarge: Persist was given metadata longer than
	// MaxPersistMeta. Nothing was written.
	ErrMetaTooLarge = errors.New("persisted metadata too large")

	// ErrJobNotRun: InstallCompaction was given a job whose Run never
	// returned (the scheduler cancelled it before it started). The job's
	// references are released; nothing changes on disk.
	ErrJobNotRun = errors.New("lsm: compaction job did not run")

	// ErrLocGone: ReadAt was given a place (base.Loc) in a table the current
	// version no longer holds — a compaction or install happened since
	// GetLoc reported it. Nothing was read.
	ErrLocGone = errors.New("lsm: the table of a read's place was replaced")

	// ErrExists: Import found a DB (CURRENT) in its directory. Nothing was
	// changed.
	ErrExists = errors.New("lsm: directory already holds a store")

	// ErrInvalidImport: Import was given a bad table list (file number 0
	// or given twice, a level >= NumLevels, an inverted range; the wrapped
	// message names the table). Nothing was changed.
	ErrInvalidImport = errors.New("lsm: invalid import")

	// ErrImportOverlap: two tables Import was to install at one level >= 1
	// overlap in Order after clipping (doc.go, invariant 3). Nothing was
	// installed, written or removed.
	ErrImportOverlap = errors.New("lsm: imported tables of one level overlap")
)

// ioError wraps an error from the FS with what the DB was doing, adding
// base.ErrNoSpace when the cause is ENOSPC so callers need not know errnos.
// The text names the file, not the tier: it reaches the Store's user.
func ioError(what, name string, err error) error {
	ctx := what + " " + name
	if strings.Contains(err.Error(), name) {
		ctx = what // the *fs.PathError names the file already
	}
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%s: %w: %w", ctx, base.ErrNoSpace, err)
	}
	return fmt.Errorf("%s: %w", ctx, err)
}
