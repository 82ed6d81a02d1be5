// Package enginetest holds test doubles of the engine's interfaces, shared by the tests of the
// engine and of the root package. Not for production use.
package enginetest

import (
	"bytes"
	"cmp"
	"slices"
	"sync"

	"github.com/strata-db/strata/internal/base"
)

// MemLower is an in-memory engine.LowerTier for tests: every version of every (key, user key) it was
// given, newest first. Evict copies the run (on the eviction task's goroutine) and Install
// makes it visible; a mutex keeps the race detector honest about the hand-off.
type MemLower struct {
	mu       sync.Mutex
	versions map[[2]string][]base.Entry // (key, user key) → versions, Seq descending
	maps     map[string][]string        // map key → user keys with versions (sorted, "" first)
	Evicted  int                        // runs installed
	Entries  int                        // entries installed
	closed   bool
}

// NewMemLower returns an empty MemLower: no runs installed, every Get absent. Safe for the
// engine's use from its owner and its eviction task (a mutex guards the versions).
func NewMemLower() *MemLower {
	return &MemLower{versions: map[[2]string][]base.Entry{}, maps: map[string][]string{}}
}

type memRun struct{ ents []base.Entry }

// Evict copies the run (engine.LowerTier).
func (m *MemLower) Evict(it base.Iterator) (any, error) {
	r := &memRun{}
	var prev *base.Entry
	for it.Next() {
		e := *it.Entry()
		if prev != nil && base.Compare(prev, &e) >= 0 {
			panic("MemLower: eviction run out of entry order")
		}
		e.Key = bytes.Clone(e.Key)
		e.UserKey = bytes.Clone(e.UserKey)
		e.Value = bytes.Clone(e.Value)
		r.ents = append(r.ents, e)
		prev = &r.ents[len(r.ents)-1]
	}
	return r, it.Err()
}

// Install makes a run visible (engine.LowerTier).
func (m *MemLower) Install(p any, lastSeq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := p.(*memRun)
	for _, e := range r.ents {
		k := [2]string{string(e.Key), string(e.UserKey)}
		vs := m.versions[k]
		if len(vs) == 0 {
			uks := m.maps[k[0]]
			i, _ := slices.BinarySearch(uks, k[1])
			m.maps[k[0]] = slices.Insert(uks, i, k[1])
		}
		vs = append(vs, e)
		slices.SortFunc(vs, func(a, b base.Entry) int { return cmp.Compare(b.Seq, a.Seq) })
		m.versions[k] = vs
	}
	m.Evicted++
	m.Entries += len(r.ents)
	r.ents = nil
	return nil
}

// Discard drops a run (engine.LowerTier).
func (m *MemLower) Discard(p any) { p.(*memRun).ents = nil }

// Get visits the versions of (key, userKey), newest first (engine.LowerTier).
func (m *MemLower) Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.versions[[2]string{string(key), string(userKey)}] {
		e := m.versions[[2]string{string(key), string(userKey)}][i]
		if e.Order != order {
			panic("MemLower: Get with another order hash than the entries were evicted with")
		}
		if !visit(&e) {
			return nil
		}
	}
	return nil
}

// GetLoc visits the versions of (key, userKey), newest first, with their places: the index
// among the key's versions, valid until the next Install (engine.LowerTier).
func (m *MemLower) GetLoc(order uint64, key, userKey []byte, visit func(*base.Entry, base.Loc) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[[2]string{string(key), string(userKey)}]
	for i := range vs {
		e := vs[i]
		if e.Order != order {
			panic("MemLower: GetLoc with another order hash than the entries were evicted with")
		}
		if !visit(&e, base.Loc{File: uint64(m.Evicted), Block: uint32(i)}) {
			return nil
		}
	}
	return nil
}

// ReadAt visits the key-level version at a place GetLoc reported (engine.LowerTier); a place
// from before the last Install panics (the engine must not use it).
func (m *MemLower) ReadAt(order uint64, key []byte, loc base.Loc, visit func(*base.Entry)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[[2]string{string(key), ""}]
	if loc.File != uint64(m.Evicted) || int(loc.Block) >= len(vs) {
		panic("MemLower: ReadAt of a stale place")
	}
	e := vs[loc.Block]
	visit(&e)
	return nil
}

// MapRange visits a map's entries with a user key >= from (engine.LowerTier).
func (m *MemLower) MapRange(order uint64, mapKey, from []byte, visit func(*base.Entry) bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, uk := range m.maps[string(mapKey)] {
		if uk < string(from) {
			continue
		}
		for _, e := range m.versions[[2]string{string(mapKey), uk}] {
			if !visit(&e) {
				return nil
			}
		}
	}
	return nil
}

// Scan walks every version with an order hash in [lo, hi] in entry order (engine.LowerTier):
// a sorted copy, taken now.
func (m *MemLower) Scan(it base.ScanIter, lo, hi uint64) (base.ScanIter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _ := it.(*memScan)
	if s == nil {
		s = &memScan{}
	}
	s.ents, s.i = s.ents[:0], -1
	for _, vs := range m.versions {
		for _, e := range vs {
			if e.Order >= lo && e.Order <= hi {
				s.ents = append(s.ents, e)
			}
		}
	}
	slices.SortFunc(s.ents, func(a, b base.Entry) int { return base.Compare(&a, &b) })
	return s, nil
}

// memScan is MemLower's engine.LowerScan.
type memScan struct {
	ents []base.Entry
	i    int
}

func (s *memScan) Next() bool {
	s.i++
	return s.i < len(s.ents)
}
func (s *memScan) Entry() *base.Entry { return &s.ents[s.i] }
func (s *memScan) Err() error         { return nil }
func (s *memScan) Release()           { s.ents = s.ents[:0]; s.i = -1 }
func (s *memScan) Close() error       { s.Release(); return nil }

// Close marks the tier closed (engine.LowerTier).
func (m *MemLower) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
