package lsm

import (
	"bytes"

	"github.com/strata-db/strata/internal/base"
)

// mapRangeScratch is MapRange's reusable buffer: copies of the entries of
// each source file, back to back, and where each source's run starts.
type mapRangeScratch struct {
	arena []byte
	ents  []base.Entry
	runs  []int // runs[i] is the first index in ents of source i; one extra at the end
	heads []int
	srcs  []*tableFile
}

// MapRange visits every entry held in the DB of the map (order, mapKey) —
// map tombstones (KindTombstone with an empty UserKey) and every user key's
// versions, of any kind — merged across all levels in entry order: UserKey
// ascending, and for one user key Seq descending (newest first), until visit
// returns false. Nothing is resolved: the caller applies newest-wins and the
// map tombstone (hides entries of smaller Seq), merging with the tiers above.
// The entry and its slices are valid only during the call of visit. Owner
// only.
//
// When one file holds the map the entries stream from it; when several do,
// MapRange copies the map's entries of each file into a reusable buffer and
// merges them, so it holds the map's LSM bytes in memory for the call.
//
// Errors: base.ErrClosed; base.ErrCorruption (*base.CorruptionError) for a damaged block;
// I/O errors from the table file.
func (d *DB) MapRange(order uint64, mapKey []byte, visit func(*base.Entry) bool) error {
	if d.closed {
		return base.ErrClosed
	}
	s := &d.mr
	s.srcs = s.srcs[:0]
	v := d.current
	for _, t := range v.levels[0] {
		if t.r.MayContain(order) {
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
		return s.srcs[0].r.MapRange(order, mapKey, visit)
	}
	s.arena, s.ents, s.runs = s.arena[:0], s.ents[:0], s.runs[:0]
	collect := func(e *base.Entry) bool {
		c := *e
		c.Key = nil // all entries share mapKey
		c.UserKey = s.copy(e.UserKey)
		c.Value = s.copy(e.Value)
		s.ents = append(s.ents, c)
		return true
	}
	for _, t := range s.srcs {
		s.runs = append(s.runs, len(s.ents))
		if err := t.r.MapRange(order, mapKey, collect); err != nil {
			return err
		}
	}
	s.runs = append(s.runs, len(s.ents))
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
			return nil
		}
		e := &s.ents[s.heads[best]]
		s.heads[best]++
		if prev != nil && prev.Seq == e.Seq && bytes.Equal(prev.UserKey, e.UserKey) {
			continue // the same version in an older file
		}
		prev = e
		e.Key = mapKey
		if !visit(e) {
			return nil
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
