package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
)

// lsmTier is the production LowerTier: the Store's LsmStore (lsm.DB) under Dir/lsm, with its
// block cache. Every method maps the DB's errors to the Store's sentinels (lowerError), so the
// state operations report ErrCorruption (with the specific cause and the file and offset in
// the message), ErrNoSpace, ErrClosed or the I/O error as it is.
//
// Concurrency as LowerTier: Evict (lsm.DB.WriteL0) runs on an eviction task; everything else
// on the owner goroutine.
type lsmTier struct {
	db    *lsm.DB
	cache *sstable.Cache // nil: no block cache
}

func (l *lsmTier) Evict(it base.Iterator) (any, error) {
	p, err := l.db.WriteL0(it)
	if err != nil {
		return nil, lowerError(err)
	}
	return p, nil
}

func (l *lsmTier) Install(p any, lastSeq uint64) error {
	return lowerError(l.db.InstallL0(p.(*lsm.PendingFile), lastSeq))
}

func (l *lsmTier) Discard(p any) { l.db.Discard(p.(*lsm.PendingFile)) }

func (l *lsmTier) Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error {
	return lowerError(l.db.Get(order, key, userKey, visit))
}

func (l *lsmTier) MapRange(order uint64, mapKey []byte, visit func(*base.Entry) bool) error {
	return lowerError(l.db.MapRange(order, mapKey, visit))
}

// Close closes the DB, then the cache its readers used.
func (l *lsmTier) Close() error {
	err := lowerError(l.db.Close())
	if l.cache != nil {
		err = errors.Join(err, l.cache.Close())
	}
	return err
}

// lowerError maps an error of the LSM tier (or of the files under it) to the Store's
// sentinels, keeping the original in the chain (errors.Is sees both, the message keeps its
// file and offset):
//
//	lsm/sstable corruption   → ErrCorruption, plus ErrTruncated, ErrChecksum,
//	                           ErrFormatVersion or ErrBadMagic when the cause is one of them
//	ENOSPC                   → ErrNoSpace (and syscall.ENOSPC)
//	lsm.ErrClosed            → ErrClosed
//	anything else            → unchanged (I/O errors keep their errno)
func lowerError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lsm.ErrCorruption) || errors.Is(err, sstable.ErrCorruption):
		var cause error
		switch {
		case errors.Is(err, sstable.ErrTruncated):
			cause = ErrTruncated
		case errors.Is(err, sstable.ErrChecksum):
			cause = ErrChecksum
		case errors.Is(err, sstable.ErrVersion), errors.Is(err, lsm.ErrVersion):
			cause = ErrFormatVersion
		case errors.Is(err, sstable.ErrBadMagic), errors.Is(err, lsm.ErrBadMagic):
			cause = ErrBadMagic
		case shortTable(err):
			cause = ErrTruncated
		}
		if cause != nil {
			return fmt.Errorf("%w: %w: %w", ErrCorruption, cause, err)
		}
		return fmt.Errorf("%w: %w", ErrCorruption, err)
	case errors.Is(err, syscall.ENOSPC):
		if errors.Is(err, ErrNoSpace) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	case errors.Is(err, lsm.ErrClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// shortTable reports whether err is lsm's report of a table file shorter than its manifest
// record says (lsm checks sizes at Open without naming a cause; the size check is the only
// place a truncated table is caught before sstable's own checks).
func shortTable(err error) bool {
	var ce *lsm.CorruptionError
	if !errors.As(err, &ce) || ce.Err != nil {
		return false
	}
	var have, want int64
	var manifest string
	n, _ := fmt.Sscanf(ce.Reason, "table file is %d bytes, %s records %d", &have, &manifest, &want)
	return n == 3 && have < want
}

// lsmJob is one LSM compaction: picked by the owner (lsm.DB.PickCompaction), run on a
// scheduler.Compaction task, installed by the owner (lsm.DB.InstallCompaction, which also
// reports the run's error).
type lsmJob struct {
	j    *lsm.CompactionJob
	done atomic.Bool
}
