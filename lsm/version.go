package lsm

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
)

// tableFile is one table file the DB has opened: its manifest record and its
// reader. refs counts the versions that hold it (owner goroutine only).
type tableFile struct {
	meta     FileMeta
	name     string
	f        vfs.File
	r        *sstable.Reader
	cacheID  uint64
	refs     int
	obsolete bool // an installed edit deleted it: remove from disk when refs reaches 0
	// exp summarizes its TTL data (Options.Expiry) when expKnown: noted as this DB wrote
	// it; in memory only, so a file found at Open or imported is not known (sweep.go).
	exp      base.Expiry
	expKnown bool
}

// cacheIDs hands out block-cache file IDs that are unique in the process, so
// DBs sharing one sstable.Cache (and a file number reused after a crash) can
// never see each other's blocks.
var cacheIDs atomic.Uint64

func (t *tableFile) overlaps(lo, hi uint64) bool {
	return t.meta.MinOrder <= hi && lo <= t.meta.MaxOrder
}

// version is an immutable set of table files by level (doc.go, "Versions").
// levels[0] is newest first; levels[1:] are sorted by MinOrder with disjoint
// inclusive [MinOrder, MaxOrder] ranges. refs counts the DB's current pointer,
// its persisted pointer and every compaction job that pinned it.
type version struct {
	levels [][]*tableFile
	refs   int
}

func (v *version) levelBytes(l int) int64 {
	var n int64
	for _, t := range v.levels[l] {
		n += t.meta.Size
	}
	return n
}

// find returns the file of sorted level files whose range holds order.
func findFile(files []*tableFile, order uint64) *tableFile {
	i, _ := slices.BinarySearchFunc(files, order, func(t *tableFile, o uint64) int {
		if t.meta.MaxOrder < o {
			return -1
		}
		return 1
	})
	if i < len(files) && files[i].meta.MinOrder <= order {
		return files[i]
	}
	return nil
}

// overlapping returns the files of sorted level files whose ranges meet
// [lo, hi].
func overlapping(files []*tableFile, lo, hi uint64) []*tableFile {
	var out []*tableFile
	for _, t := range files {
		if t.overlaps(lo, hi) {
			out = append(out, t)
		}
	}
	return out
}

// checkLevels verifies the level shape invariant (doc.go, invariant 3): L1+
// sorted and disjoint. It returns a description of the first violation, or
// "". Invariant 4 (no file twice) is checked by the recovery builder.
func (v *version) checkLevels() string {
	for l := 1; l < len(v.levels); l++ {
		files := v.levels[l]
		for i := 1; i < len(files); i++ {
			if p, t := files[i-1], files[i]; p.meta.MaxOrder >= t.meta.MinOrder {
				return fmt.Sprintf("L%d files %d [%#x,%#x] and %d [%#x,%#x] overlap", l,
					p.meta.Num, p.meta.MinOrder, p.meta.MaxOrder, t.meta.Num, t.meta.MinOrder, t.meta.MaxOrder)
			}
		}
	}
	return ""
}

// checkFilesOnce verifies invariant 4 of doc.go on a whole version: no table file number is in
// two places. It returns a description of the first violation, or "". O(files); run after
// every manifest edit in builds with the invariants tag (the recovery builder checks it
// always, edit by edit).
func (v *version) checkFilesOnce() string {
	seen := make(map[uint64]int)
	for l, files := range v.levels {
		for _, f := range files {
			if pl, dup := seen[f.meta.Num]; dup {
				return fmt.Sprintf("file %d is in L%d and L%d", f.meta.Num, pl, l)
			}
			seen[f.meta.Num] = l
		}
	}
	return ""
}

// versionBuilder applies edits to a copy of a version: every edit of a
// manifest during recovery (with where, to reject a file added twice), and
// each install on the owner (without: the DB's own edits add new numbers).
type versionBuilder struct {
	levels [][]*tableFile
	where  map[uint64]int // file number → level; recovery only
}

// newBuilder copies base (nil: empty) for numLevels levels.
func newBuilder(base *version, numLevels int, recovery bool) *versionBuilder {
	b := &versionBuilder{levels: make([][]*tableFile, numLevels)}
	if recovery {
		b.where = map[uint64]int{}
	}
	if base != nil {
		for l, files := range base.levels {
			b.levels[l] = slices.Clone(files)
		}
	}
	return b
}

// apply applies one edit. added supplies the tableFile for each e.Added
// (same order); nil during recovery, when placeholders are made. The error is
// a plain description of the inconsistency.
func (b *versionBuilder) apply(e *edit, added []*tableFile) error {
	for _, d := range e.Deleted {
		i := -1
		if d.Level < len(b.levels) {
			i = slices.IndexFunc(b.levels[d.Level], func(t *tableFile) bool { return t.meta.Num == d.Num })
		}
		if i < 0 {
			return fmt.Errorf("delete of file %d at L%d, which the version does not hold there", d.Num, d.Level)
		}
		b.levels[d.Level] = slices.Delete(b.levels[d.Level], i, i+1)
		if b.where != nil {
			delete(b.where, d.Num)
		}
	}
	for i, a := range e.Added {
		if a.Level >= len(b.levels) {
			return fmt.Errorf("%w: file %d at L%d but NumLevels is %d", ErrInvalidOptions, a.Meta.Num, a.Level, len(b.levels))
		}
		if b.where != nil {
			if l, ok := b.where[a.Meta.Num]; ok {
				return fmt.Errorf("add of file %d at L%d, which the version holds at L%d", a.Meta.Num, a.Level, l)
			}
			b.where[a.Meta.Num] = a.Level
		}
		t := &tableFile{meta: a.Meta}
		if added != nil {
			t = added[i]
		}
		if a.Level == 0 {
			b.levels[0] = slices.Insert(b.levels[0], 0, t) // newest first
			continue
		}
		files := b.levels[a.Level]
		j, _ := slices.BinarySearchFunc(files, a.Meta.MinOrder, func(t *tableFile, o uint64) int {
			if t.meta.MinOrder < o {
				return -1
			}
			return 1
		})
		b.levels[a.Level] = slices.Insert(files, j, t)
	}
	return nil
}

func (b *versionBuilder) version() *version {
	return &version{levels: b.levels}
}

// snapshot returns a version holding the builder's files now; later edits
// to the builder do not change it.
func (b *versionBuilder) snapshot() *version {
	levels := make([][]*tableFile, len(b.levels))
	for l, files := range b.levels {
		levels[l] = slices.Clone(files)
	}
	return &version{levels: levels}
}

// diffEdits returns the edits that turn from into to when replayed after it:
// first every deletion, then the additions, L0 oldest first, split so no
// record passes snapshotChunk bytes. It relies on the shape installs give
// L0: the files of from still in to's L0 are its oldest (a suffix), because
// L0 only ever gains files at the front.
func diffEdits(from, to *version) []edit {
	type key struct {
		l int
		t *tableFile
	}
	inFrom, inTo := map[key]bool{}, map[key]bool{}
	for l := range from.levels {
		for _, t := range from.levels[l] {
			inFrom[key{l, t}] = true
		}
		for _, t := range to.levels[l] {
			inTo[key{l, t}] = true
		}
	}
	var out []edit
	cur := edit{}
	size := 0
	flush := func() {
		if len(cur.Added) > 0 || len(cur.Deleted) > 0 {
			out = append(out, cur)
		}
		cur, size = edit{}, 0
	}
	for l, files := range from.levels {
		for _, t := range files {
			if !inTo[key{l, t}] {
				cur.Deleted = append(cur.Deleted, deletedFile{Level: l, Num: t.meta.Num})
				if size += 20; size >= snapshotChunk {
					flush()
				}
			}
		}
	}
	add := func(l int, t *tableFile) {
		if inFrom[key{l, t}] {
			return
		}
		cur.Added = append(cur.Added, newFile{Level: l, Meta: t.meta})
		if size += 80; size >= snapshotChunk {
			flush()
		}
	}
	for i := len(to.levels[0]) - 1; i >= 0; i-- {
		add(0, to.levels[0][i])
	}
	for l := 1; l < len(to.levels); l++ {
		for _, t := range to.levels[l] {
			add(l, t)
		}
	}
	flush()
	return out
}

// sameFiles reports whether a and b hold the same files in the same order.
func sameFiles(a, b *version) bool {
	for l := range a.levels {
		if !slices.EqualFunc(a.levels[l], b.levels[l], func(x, y *tableFile) bool { return x.meta.Num == y.meta.Num }) {
			return false
		}
	}
	return true
}

// snapshotEdits returns the edits that rebuild v from nothing: the counters,
// then the files, L0 oldest first (so replay, which inserts L0 files at the
// front, restores newest-first order), split so no record passes
// snapshotChunk bytes.
func snapshotEdits(v *version, nextFile, lastSeq uint64) []edit {
	out := []edit{{HasNextFile: true, NextFile: nextFile, HasLastSeq: true, LastSeq: lastSeq}}
	cur := edit{}
	size := 0
	add := func(l int, t *tableFile) {
		cur.Added = append(cur.Added, newFile{Level: l, Meta: t.meta})
		size += 80
		if size >= snapshotChunk {
			out = append(out, cur)
			cur, size = edit{}, 0
		}
	}
	if v != nil {
		for i := len(v.levels[0]) - 1; i >= 0; i-- {
			add(0, v.levels[0][i])
		}
		for l := 1; l < len(v.levels); l++ {
			for _, t := range v.levels[l] {
				add(l, t)
			}
		}
	}
	if len(cur.Added) > 0 {
		out = append(out, cur)
	}
	return out
}
