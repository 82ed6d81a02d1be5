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
	// cacheWant is the size of the block cache to map once the LsmStore holds data (0: none
	// or mapped); Engine.mapCaches maps it.
	cacheWant int64
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

// InstallAll is Install of every run of ps in one lsm manifest record (lowerInstallAll).
func (l *lsmTier) InstallAll(ps []any, lastSeq uint64) error {
	fs := make([]*lsm.PendingFile, len(ps))
	for i, p := range ps {
		fs[i] = p.(*lsm.PendingFile)
	}
	return lowerError(l.db.InstallL0s(fs, lastSeq))
}

func (l *lsmTier) Discard(p any) { l.db.Discard(p.(*lsm.PendingFile)) }

func (l *lsmTier) Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error {
	return lowerError(l.db.Get(order, key, userKey, visit))
}

func (l *lsmTier) GetLoc(order uint64, key, userKey []byte, visit func(*base.Entry, base.Loc) bool) error {
	return lowerError(l.db.GetLoc(order, key, userKey, visit))
}

func (l *lsmTier) ReadAt(order uint64, key []byte, loc base.Loc, visit func(*base.Entry)) error {
	err := l.db.ReadAt(order, key, loc, visit)
	if errors.Is(err, lsm.ErrLocGone) {
		return fmt.Errorf("%w: %w", ErrIteratorInvalidated, err)
	}
	return lowerError(err)
}

func (l *lsmTier) MapRange(order uint64, mapKey, from []byte, visit func(*base.Entry) bool) error {
	return lowerError(l.db.MapRange(order, mapKey, from, visit))
}

func (l *lsmTier) Scan(it LowerScan, lo, hi uint64) (LowerScan, error) {
	s, _ := it.(*lsmScan)
	if s == nil {
		s = &lsmScan{it: l.db.NewIter()}
	}
	return s, lowerError(s.it.Reset(lo, hi))
}

// lsmScan is the LowerScan of lsmTier: an lsm.Iter with the Store's errors.
type lsmScan struct{ it *lsm.Iter }

func (s *lsmScan) Next() bool         { return s.it.Next() }
func (s *lsmScan) Entry() *base.Entry { return s.it.Entry() }
func (s *lsmScan) Err() error         { return lowerError(s.it.Err()) }
func (s *lsmScan) Release()           { s.it.Release() }
func (s *lsmScan) Close() error       { return s.it.Close() }

// Close closes the DB, then the cache its readers used.
func (l *lsmTier) Close() error {
	err := lowerError(l.db.Close())
	if l.cache != nil {
		err = errors.Join(err, l.cache.Close())
	}
	return err
}

// lowerError maps an error of the LSM tier (or of the files under it) to the Store's
// sentinels. Corruption and a closed DB need nothing: the tiers report them with base's
// errors, which are the Store's (a *base.CorruptionError already names the file, the offset
// and the cause). What is left:
//
//	ENOSPC (without ErrNoSpace)   → ErrNoSpace (and syscall.ENOSPC)
//	anything else                 → unchanged (I/O errors keep their errno)
func lowerError(err error) error {
	if err != nil && errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// lsmJob is one LSM compaction: picked by the owner (lsm.DB.PickCompaction), run on a
// scheduler.Compaction task, installed by the owner (lsm.DB.InstallCompaction, which also
// reports the run's error).
type lsmJob struct {
	j    *lsm.CompactionJob
	err  error // the task's outcome (InstallCompaction reports Run's error again; a panic only here)
	done atomic.Bool
}
