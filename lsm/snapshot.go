package lsm

// Snapshot pins one version of the DB (doc.go, "Snapshots"): until
// DB.ReleaseSnapshot, none of its table files is removed from disk, even
// when a compaction installed since makes them obsolete. A checkpoint takes
// one, hard-links or uploads Tables() on another goroutine, then releases it.
type Snapshot struct {
	d      *DB
	v      *version // nil once released
	tables []SnapshotTable
}

// SnapshotTable is one table file of a Snapshot: its level, its manifest
// record (Meta's [MinOrder, MaxOrder] is the table's clip range, possibly
// narrower than the file's entries) and its path on the DB's FS
// (Options.FS), TablePath(Options.Dir, Meta.Num).
type SnapshotTable struct {
	Level int
	Meta  FileMeta
	Path  string
}

// TablePath returns the path of table file num in the DB directory dir:
// "<dir>/<num, at least 6 digits>.sst". Import expects its tables there.
func TablePath(dir string, num uint64) string { return tableName(dir, num) }

// Snapshot pins the current version and returns it. Its files stay on disk
// until ReleaseSnapshot; the files themselves are immutable, so another
// goroutine may read or hard-link them meanwhile (not through the DB). It
// does not persist anything: a snapshot names what reads see now, including
// installs after the last persist point. Owner only; nil after Close.
func (d *DB) Snapshot() *Snapshot {
	if d.closed {
		return nil
	}
	v := d.current
	v.refs++ // as a compaction job pins its version (invariant 7)
	s := &Snapshot{d: d, v: v}
	// Oldest first: the deepest level first, each level ≥ 1 by MinOrder,
	// then L0 oldest first (levels[0] is newest first).
	for l := len(v.levels) - 1; l >= 1; l-- {
		for _, t := range v.levels[l] {
			s.tables = append(s.tables, SnapshotTable{Level: l, Meta: t.meta, Path: t.name})
		}
	}
	for i := len(v.levels[0]) - 1; i >= 0; i-- {
		t := v.levels[0][i]
		s.tables = append(s.tables, SnapshotTable{Level: 0, Meta: t.meta, Path: t.name})
	}
	d.snaps = append(d.snaps, s)
	return s
}

// Tables returns the snapshot's table files OLDEST FIRST: the deepest level
// first, then each shallower level up to L1 (a level's files by MinOrder),
// then the L0 files oldest first — the order Import takes them in (a file
// later in the slice holds newer entries of any (Order, Key) it shares with
// an earlier one). The slice is the snapshot's own; do not modify it. Safe
// from any goroutine: it reads only what Snapshot built.
func (s *Snapshot) Tables() []SnapshotTable { return s.tables }

// ReleaseSnapshot drops s's pin: its files that no other version holds are
// closed, and removed from disk if a compaction made them obsolete
// meanwhile. A second release, or a release after Close, does nothing.
// Owner only; nobody may read s's files through their paths afterwards.
func (d *DB) ReleaseSnapshot(s *Snapshot) {
	if s == nil || s.d != d || s.v == nil {
		return
	}
	v := s.v
	s.v = nil
	for i, o := range d.snaps {
		if o == s {
			d.snaps = append(d.snaps[:i], d.snaps[i+1:]...)
			break
		}
	}
	if d.current != nil { // nil after Close, which closed the files
		d.unrefVersion(v)
	}
}
