package lsm

import (
	"bytes"

	"github.com/strata-db/strata/internal/base"
)

// mapRangeScratch is MapRange's reusable buffer for a map held by several
// files: one chunk of each source's entries (copies, back to back), where
// each source's chunk starts, and the resume point.
type mapRangeScratch struct {
	arena []byte
	ents  []base.Entry
	runs  []int // runs[i] is the first index in ents of source i; one extra at the end
	heads []int
	done  []bool // source i has no entries past its chunk
	srcs  []*tableFile
	from  []byte
	last  []byte
}

// mapChunk is the number of entries MapRange copies from each source per
// round when several files hold the map: it holds at most about
// sources × mapChunk entries, whatever the map's size.
const mapChunk = 512

// MapRange visits every entry held in the DB of the map (order, mapKey)
// whose user key is >= from — map tombstones (KindTombstone with an empty
// UserKey) and every user key's versions, of any kind; from nil or empty
// starts at the map's beginning — merged across all levels in entry order:
// UserKey ascending, and for one user key Seq descending (newest first),
// until visit returns false. Nothing is resolved: the caller applies the
// merge rules (base.Resolver), merging with the tiers above. The entry and
// its slices are valid only during the call of visit. Owner only.
//
// A caller walks a large map in chunks: stop (visit returns false) at the
// first entry of a user key past the chunk and call again from that user
// key; each call finds its start in each file by binary search.
//
// When one file holds the map the entries stream from it; when several do,
// MapRange merges them in rounds: it copies at most mapChunk entries of
// each file (finishing the user key it is in), merges and visits the
// entries up to the smallest last user key among the files not exhausted,
// and resumes every file after it — so it holds O(files × mapChunk)
// entries, never the whole map.
//
// Errors: base.ErrClosed; base.ErrCorruption (*base.CorruptionError) for a damaged block;
// I/O errors from the table file.
func (d *DB) MapRange(order uint64, mapKey, from []byte, visit func(*base.Entry) bool) error {
	if d.closed {
		return base.ErrClosed
	}
	s := &d.mr
	s.srcs = s.srcs[:0]
	v := d.current
	for _, t := range v.levels[0] {
		// The table's manifest range, not only its file's: an imported
		// table may be clipped (doc.go, "Clipping").
		if order >= t.meta.MinOrder && order <= t.meta.MaxOrder && t.r.MayContain(order) {
			s.srcs = append(s.srcs, t)
		}
	}
	for l := 1; l < len(v.levels); l++ {
		if t := findFile(v.levels[l], order); t != nil && t.r.MayContain(order) {
			s.srcs = append(s.srcs, t)
		}
	}
	switch len(s.srcs) {
	case 0:
		return nil
	case 1:
		return s.srcs[0].r.MapRangeFrom(order, mapKey, from, visit)
	}
	s.from = append(s.from[:0], from...)
	for {
		s.arena, s.ents, s.runs, s.done = s.arena[:0], s.ents[:0], s.runs[:0], s.done[:0]
		for _, t := range s.srcs {
			start := len(s.ents)
			s.runs = append(s.runs, start)
			full := false
			collect := func(e *base.Entry) bool {
				if len(s.ents)-start >= mapChunk && !bytes.Equal(e.UserKey, s.ents[len(s.ents)-1].UserKey) {
					full = true // the chunk ends at a user key boundary
					return false
				}
				c := *e
				c.Key = nil // all entries share mapKey
				c.UserKey = s.copy(e.UserKey)
				c.Value = s.copy(e.Value)
				s.ents = append(s.ents, c)
				return true
			}
			if err := t.r.MapRangeFrom(order, mapKey, s.from, collect); err != nil {
				return err
			}
			s.done = append(s.done, !full)
		}
		s.runs = append(s.runs, len(s.ents))
		// Entries up to the smallest last user key of a source with more
		// are complete in every source: merge those.
		var limit []byte
		more := false
		for i, done := range s.done {
			if done {
				continue
			}
			lk := s.ents[s.runs[i+1]-1].UserKey
			if !more || bytes.Compare(lk, limit) < 0 {
				limit = lk
			}
			more = true
		}
		if more {
			s.last = append(s.last[:0], limit...)
			limit = s.last
		}
		if !s.merge(mapKey, limit, more, visit) {
			return nil
		}
		if !more {
			return nil
		}
		// Resume just after limit: the smallest user key above it.
		s.from = append(append(s.from[:0], limit...), 0)
	}
}

// merge visits the chunk's entries with a user key <= limit (all of them
// when !bounded) in entry order, skipping the older copy of a version two
// sources hold. It reports whether visit wants more.
func (s *mapRangeScratch) merge(mapKey, limit []byte, bounded bool, visit func(*base.Entry) bool) bool {
	s.heads = append(s.heads[:0], s.runs[:len(s.runs)-1]...)
	var prev *base.Entry
	for {
		best := -1
		for i, h := range s.heads {
			if h == s.runs[i+1] {
				continue
			}
			if best < 0 || base.Compare(&s.ents[h], &s.ents[s.heads[best]]) < 0 {
				best = i // ties go to the earlier (newer) source
			}
		}
		if best < 0 {
			return true
		}
		e := &s.ents[s.heads[best]]
		if bounded && bytes.Compare(e.UserKey, limit) > 0 {
			return true // the next round has it, with every source's versions
		}
		s.heads[best]++
		if prev != nil && prev.Seq == e.Seq && bytes.Equal(prev.UserKey, e.UserKey) {
			continue // the same version in an older file
		}
		prev = e
		e.Key = mapKey
		if !visit(e) {
			return false
		}
	}
}

func (s *mapRangeScratch) copy(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	n := len(s.arena)
	s.arena = append(s.arena, b...)
	return s.arena[n:len(s.arena):len(s.arena)]
}

// LevelMetrics describes one level.
type LevelMetrics struct {
	Files int     // number of table files
	Bytes int64   // bytes of table files
	Score float64 // compaction score (>= 1: due); L0 by file count, L1+ by bytes
}

// Metrics is a snapshot of the DB's shape and counters since Open.
type Metrics struct {
	Levels []LevelMetrics // one per level, L0 first

	Flushes     int64 // InstallL0 calls that installed a batch
	Compactions int64 // compactions installed
	JobsRunning int   // jobs picked and not yet installed

	BytesIngested    int64 // bytes of keys, user keys and values given to installed WriteL0 batches
	BytesFlushed     int64 // bytes of table files installed by InstallL0
	BytesCompacted   int64 // bytes of table files installed by compactions
	BytesCompactRead int64 // bytes of input files of installed compactions
	ManifestBytes    int64 // bytes written to manifests
	// ClippedEntries counts the entries installed compactions dropped
	// because they lay outside their table's clip range (an imported table,
	// doc.go "Clipping").
	ClippedEntries int64

	// WriteAmplification is (BytesFlushed + BytesCompacted) / BytesIngested:
	// table bytes written per byte of state ingested; 0 before any ingest.
	WriteAmplification float64

	Persists int64 // successful Persist calls
	// PersistPinnedFiles and PersistPinnedBytes count the files only the
	// last persisted version holds (compaction inputs since the last
	// Persist): on disk until the next Persist (doc.go, invariant 10).
	PersistPinnedFiles int
	PersistPinnedBytes int64

	ManifestRotations int64  // new manifests written (Open, size, recovery from a failed write)
	ManifestErrors    int64  // failed manifest writes
	DeleteErrors      int64  // failed removals of obsolete files (retried by the next Open)
	LastSeq           uint64 // largest sequence number installed
	NextFileNumber    uint64 // next file number to be handed out

	// The table cache (doc.go, "Table cache"): OpenTables is the number of
	// table files open now (at most Options.MaxOpenFiles, plus those reads
	// hold beyond it); TableCacheHits counts table reads (block-cache misses,
	// compaction reads) that found their file open, TableCacheMisses those
	// that opened it (table opens at install and recovery included).
	OpenTables       int
	TableCacheHits   int64
	TableCacheMisses int64
	// OutOfFiles counts the opens and creates of the DB's files refused for want of file
	// descriptors (EMFILE, ENFILE), after each of which the table cache closed its idle
	// files and the open was tried once more.
	OutOfFiles int64
}

// Metrics returns the DB's metrics. Owner only.
func (d *DB) Metrics() Metrics {
	m := Metrics{
		Flushes:           d.m.flushes,
		Compactions:       d.m.compactions,
		JobsRunning:       d.jobs,
		BytesIngested:     d.m.bytesIngested,
		BytesFlushed:      d.m.bytesFlushed,
		BytesCompacted:    d.m.bytesCompact,
		BytesCompactRead:  d.m.bytesCompactRead,
		ClippedEntries:    d.m.clipped,
		ManifestBytes:     d.m.manifestBytes,
		Persists:          d.m.persists,
		ManifestRotations: d.m.rotations,
		ManifestErrors:    d.m.manifestErrors,
		DeleteErrors:      d.m.deleteErrors.Load(),
		LastSeq:           d.lastSeq,
		NextFileNumber:    d.nextFile.Load(),
	}
	m.OpenTables, m.TableCacheHits, m.TableCacheMisses = d.tc.stats()
	m.OutOfFiles = d.tc.shedCount()
	if m.BytesIngested > 0 {
		m.WriteAmplification = float64(m.BytesFlushed+m.BytesCompacted) / float64(m.BytesIngested)
	}
	if d.current == nil {
		return m
	}
	v := d.current
	if p := d.persisted; p != nil && p != v {
		live := map[*tableFile]bool{}
		for _, files := range v.levels {
			for _, t := range files {
				live[t] = true
			}
		}
		for _, files := range p.levels {
			for _, t := range files {
				if !live[t] {
					m.PersistPinnedFiles++
					m.PersistPinnedBytes += t.meta.Size
				}
			}
		}
	}
	m.Levels = make([]LevelMetrics, len(v.levels))
	for l := range v.levels {
		lm := &m.Levels[l]
		lm.Files = len(v.levels[l])
		lm.Bytes = v.levelBytes(l)
		if l == 0 {
			lm.Score = float64(lm.Files) / float64(d.opts.L0CompactionTrigger)
		} else if l < len(v.levels)-1 {
			lm.Score = float64(lm.Bytes) / d.opts.maxLevelBytes(l)
		}
	}
	return m
}
