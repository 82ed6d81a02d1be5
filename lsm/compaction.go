package lsm

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm/sstable"
)

// CompactionJob is one picked compaction: input files of Level and
// OutputLevel, merged into new files of OutputLevel by Run (background) and
// installed by DB.InstallCompaction (owner). The job pins the version it was
// picked from, so its inputs stay open and on disk until it is installed.
type CompactionJob struct {
	d        *DB
	v        *version
	level    int
	outLevel int
	inputs   [2][]*tableFile // [0]: Level (L0: newest first), [1]: OutputLevel, sorted
	lo, hi   uint64          // Order range of the inputs
	bottom   bool            // no level below OutputLevel holds data in [lo, hi]
	sweep    bool            // picked by PickExpired (sweep.go)
	forgets  uint64          // DB.forgets when picked (ForgetExpiry)

	state atomic.Int32 // jobPicked → jobRunning → jobDone
	// Written by Run, read by InstallCompaction after Run returned.
	err       error
	outputs   []*tableFile
	bytesRead int64
	stats     JobStats
}

const (
	jobPicked  = 0
	jobRunning = 1
	jobDone    = 2
)

// JobStats counts what one compaction did.
type JobStats struct {
	EntriesIn   int64 // entries read from the inputs
	EntriesOut  int64 // entries written
	Dropped     int64 // entries the compaction filter dropped
	Rewritten   int64 // entries the compaction filter rewrote (TTL: expired data)
	Clipped     int64 // entries of the inputs outside their table's clip range, dropped unread (doc.go, "Clipping")
	BytesRead   int64 // bytes of input files
	BytesOut    int64 // bytes of output files
	OutputFiles int   // number of output files
}

// Level returns the input level (the level whose data moves down).
func (j *CompactionJob) Level() int { return j.level }

// OutputLevel returns the level the outputs are installed at.
func (j *CompactionJob) OutputLevel() int { return j.outLevel }

// Bottom reports whether no deeper level held data in the job's Order range
// when it was picked (tombstones are dropped and list operands resolved).
func (j *CompactionJob) Bottom() bool { return j.bottom }

// Stats returns the job's counters; valid after Run returned.
func (j *CompactionJob) Stats() JobStats { return j.stats }

// String names the job for scheduler task names and logs.
func (j *CompactionJob) String() string {
	return fmt.Sprintf("L%d→L%d (%d+%d files)", j.level, j.outLevel, len(j.inputs[0]), len(j.inputs[1]))
}

// PickCompaction returns the most urgent compaction, or nil if none is due
// (doc.go, "Compaction"): L0 scores len(L0)/L0CompactionTrigger, L1+ score
// their bytes / (BaseLevelBytes · LevelSizeRatio^(l-1)), and the deepest
// level above the bottom at least its space-amplification score
// (Options.MaxSpaceAmplification); the highest score
// >= 1 whose input and output levels are not busy with another job wins. An
// L0 job takes every L0 file; an Li job takes one file (round robin by Order)
// and the overlapping files of Li+1. Owner only; the job must be handed to
// InstallCompaction exactly once, after Run returned or if it never runs.
func (d *DB) PickCompaction() *CompactionJob {
	if d.closed {
		return nil
	}
	v := d.current
	// Space amplification: the deepest non-empty level above the bottom is due
	// when the levels above the bottom outgrow (MaxSpaceAmplification − 1) × it.
	ampLevel, ampScore := -1, 0.0
	if amp := d.opts.MaxSpaceAmplification; amp > 1 {
		bottom := len(v.levels) - 1
		for bottom > 0 && len(v.levels[bottom]) == 0 {
			bottom--
		}
		var above int64
		for l := 0; l < bottom; l++ {
			if b := v.levelBytes(l); b > 0 {
				above += b
				ampLevel = l
			}
		}
		if bb := v.levelBytes(bottom); ampLevel >= 0 && bb > 0 {
			ampScore = float64(above) / float64(bb) / (amp - 1)
		}
	}
	best, bestScore := -1, 1.0
	for l := 0; l < len(v.levels)-1; l++ {
		if d.busy[l] || d.busy[l+1] || len(v.levels[l]) == 0 {
			continue
		}
		var score float64
		if l == 0 {
			score = float64(len(v.levels[0])) / float64(d.opts.L0CompactionTrigger)
		} else {
			score = float64(v.levelBytes(l)) / d.opts.maxLevelBytes(l)
		}
		if l == ampLevel {
			score = max(score, ampScore)
		}
		if score >= bestScore {
			best, bestScore = l, score
		}
	}
	if best < 0 {
		return nil
	}
	return d.newJob(best)
}

// CompactLevel returns a job compacting level l into l+1 whether or not it is
// due, or nil if l is empty, the last level, or busy. Owner only. Tests and
// manual compaction use it.
func (d *DB) CompactLevel(l int) *CompactionJob {
	if d.closed || l < 0 || l >= len(d.current.levels)-1 || d.busy[l] || d.busy[l+1] || len(d.current.levels[l]) == 0 {
		return nil
	}
	return d.newJob(l)
}

func (d *DB) newJob(l int) *CompactionJob {
	v := d.current
	j := &CompactionJob{d: d, v: v, level: l, outLevel: l + 1}
	if l == 0 {
		j.inputs[0] = append([]*tableFile(nil), v.levels[0]...)
	} else {
		files := v.levels[l]
		i := 0
		for i < len(files) && files[i].meta.MinOrder < d.compactPtr[l] {
			i++
		}
		if i == len(files) {
			i = 0
		}
		j.inputs[0] = []*tableFile{files[i]}
	}
	j.lo, j.hi = ^uint64(0), 0
	for _, t := range j.inputs[0] {
		j.lo, j.hi = min(j.lo, t.meta.MinOrder), max(j.hi, t.meta.MaxOrder)
	}
	j.inputs[1] = overlapping(v.levels[l+1], j.lo, j.hi)
	for _, t := range j.inputs[1] {
		j.lo, j.hi = min(j.lo, t.meta.MinOrder), max(j.hi, t.meta.MaxOrder)
	}
	j.bottom = true
	for dl := l + 2; dl < len(v.levels); dl++ {
		if len(overlapping(v.levels[dl], j.lo, j.hi)) > 0 {
			j.bottom = false
			break
		}
	}
	v.refs++
	d.busy[l], d.busy[l+1] = true, true
	d.jobs++
	j.forgets = d.forgets
	return j
}

// Run merges the job's inputs into new files of the output level (doc.go,
// "Merge rules"), cutting a new file after TargetFileSize bytes but never
// inside one Order, syncs them and the directory and opens them for reading.
// It reads only the pinned input files and writes only new files, so it runs
// on a background goroutine (the root submits it to the scheduler as a
// compaction task) concurrently with the owner. It checks ctx between
// entries. On error it removes its outputs; the error is returned and
// InstallCompaction reports it too. Run may be called once.
func (j *CompactionJob) Run(ctx context.Context) error {
	if !j.state.CompareAndSwap(jobPicked, jobRunning) {
		return errors.New("lsm: CompactionJob.Run called twice")
	}
	defer j.state.Store(jobDone)
	j.err = j.run(ctx)
	if j.err != nil {
		for _, t := range j.outputs {
			j.d.releaseTable(t, true)
		}
		j.outputs = nil
	}
	return j.err
}

func (j *CompactionJob) run(ctx context.Context) error {
	d := j.d
	// Sources newest first (L0 files in install order, then the next
	// level), so the merge puts the newer copy of a duplicate first and the
	// resolver skips the other.
	var srcs []base.Iterator
	var closers []interface{ Close() error }
	for _, t := range j.inputs[0] {
		j.stats.BytesRead += t.meta.Size
		it := newClipIter(t, &j.stats.Clipped)
		srcs, closers = append(srcs, it), append(closers, it)
	}
	for _, t := range j.inputs[1] {
		j.stats.BytesRead += t.meta.Size
	}
	if len(j.inputs[1]) > 0 {
		it := &levelIter{files: j.inputs[1], clipped: &j.stats.Clipped}
		srcs, closers = append(srcs, it), append(closers, it)
	}
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	m := base.NewMergingIter(srcs...)

	// The merge rules are base.Resolver's (doc.go, "Merge rules"); the
	// compaction filter decides which tombstones go (DefaultFilter: at the
	// bottom), so the resolver itself drops none.
	filter, bottom := d.opts.NewFilter(j.sweep), j.bottom
	r := base.Resolver{Bottom: bottom, MaxList: d.opts.MaxListPiece}
	r.Filter = func(e *base.Entry) (base.Decision, *base.Entry) { return filter(e, bottom) }
	out := d.newOutput()
	r.Emit = func(e *base.Entry) error {
		if out.open && out.w.EstimatedSize() >= d.opts.TargetFileSize {
			if last, ok := out.w.LastOrder(); ok && last != e.Order {
				t, err := out.finish()
				if err != nil {
					return err
				}
				j.outputs = append(j.outputs, t)
			}
		}
		j.stats.EntriesOut++
		return out.add(e)
	}
	n := 0
	for m.Next() {
		if n++; n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				out.abandon()
				return fmt.Errorf("compaction %v: %w", j, err)
			}
		}
		j.stats.EntriesIn++
		if err := r.Add(m.Entry()); err != nil {
			out.abandon()
			return err
		}
	}
	if err := m.Err(); err != nil {
		out.abandon()
		return err
	}
	if err := r.Finish(); err != nil {
		out.abandon()
		return err
	}
	if out.open {
		t, err := out.finish()
		if err != nil {
			return err
		}
		j.outputs = append(j.outputs, t)
	}
	j.stats.Dropped, j.stats.Rewritten = r.Stats().Dropped, r.Stats().Rewritten
	if len(j.outputs) > 0 {
		if err := syncDir(d.fs, d.dir); err != nil {
			return err
		}
	}
	for _, t := range j.outputs {
		if err := d.openTable(t, "compaction"); err != nil {
			return err
		}
		j.stats.BytesOut += t.meta.Size
	}
	j.stats.OutputFiles = len(j.outputs)
	return nil
}

// InstallCompaction installs a job's outputs: one manifest record deleting
// the inputs and adding the outputs, synced, then the new version is current
// and the inputs are removed from disk once no version holds them — an input
// the last persisted version holds stays until the next Persist (doc.go,
// invariant 10); one installed after the last Persist goes at once. It always
// releases the job (busy levels, pinned version), also when the job failed or
// never ran. Owner only; call it after Run returned (the scheduler task
// completed), or instead of Run for a job that will not run.
//
// Errors: the job's Run error; ErrJobNotRun for a job that never ran;
// an error if Run is still running; manifest I/O errors (then the outputs are
// discarded and the inputs stay current); base.ErrClosed.
func (d *DB) InstallCompaction(j *CompactionJob) error {
	if j.d != d {
		return errors.New("lsm: InstallCompaction of another DB's job")
	}
	switch j.state.Load() {
	case jobRunning:
		return errors.New("lsm: InstallCompaction while the job is running")
	case jobPicked:
		if !j.state.CompareAndSwap(jobPicked, jobDone) {
			return errors.New("lsm: InstallCompaction while the job is running")
		}
		d.releaseJob(j)
		return fmt.Errorf("%w: %v", ErrJobNotRun, j)
	}
	if j.v == nil {
		return errors.New("lsm: InstallCompaction of a job already installed")
	}
	defer d.releaseJob(j)
	if j.err != nil {
		return j.err
	}
	if d.closed {
		for _, t := range j.outputs {
			d.releaseTable(t, false) // the next Open removes them
		}
		return base.ErrClosed
	}
	e := &edit{}
	for i, files := range j.inputs {
		for _, t := range files {
			e.Deleted = append(e.Deleted, deletedFile{Level: j.level + i, Num: t.meta.Num})
		}
	}
	if j.forgets != d.forgets {
		// ForgetExpiry since the job was picked: its outputs were noted (partly) under a
		// table that did not sweep every state (sweep.go).
		for _, t := range j.outputs {
			t.expKnown = false
		}
	}
	for _, t := range j.outputs {
		e.Added = append(e.Added, newFile{Level: j.outLevel, Meta: t.meta})
	}
	if err := d.logAndApply(e, j.outputs); err != nil {
		for _, t := range j.outputs {
			d.discardTable(t)
		}
		return err
	}
	d.m.compactions++
	d.m.bytesCompact += j.stats.BytesOut
	d.m.bytesCompactRead += j.stats.BytesRead
	d.m.clipped += j.stats.Clipped
	if j.level > 0 {
		d.compactPtr[j.level] = j.inputs[0][0].meta.MaxOrder + 1
		if j.inputs[0][0].meta.MaxOrder == ^uint64(0) {
			d.compactPtr[j.level] = 0
		}
	}
	return nil
}

func (d *DB) releaseJob(j *CompactionJob) {
	d.busy[j.level], d.busy[j.outLevel] = false, false
	d.jobs--
	if d.current != nil { // nil after Close
		d.unrefVersion(j.v)
	}
	j.v = nil
}

// levelIter iterates sorted, disjoint files of one level in order, each
// clipped to its manifest range (clipIter).
type levelIter struct {
	files   []*tableFile
	clipped *int64
	i       int
	it      *clipIter
	err     error
}

func (l *levelIter) Next() bool {
	for {
		if l.it == nil {
			if l.i == len(l.files) || l.err != nil {
				return false
			}
			l.it = newClipIter(l.files[l.i], l.clipped)
			l.i++
		}
		if l.it.Next() {
			return true
		}
		if err := l.it.Err(); err != nil {
			l.err = err
			return false
		}
		l.it.Close()
		l.it = nil
	}
}

func (l *levelIter) Entry() *base.Entry { return l.it.Entry() }
func (l *levelIter) Err() error         { return l.err }
func (l *levelIter) Close() error {
	if l.it != nil {
		l.it.Close()
		l.it = nil
	}
	return nil
}

// clipIter iterates the entries of one table whose Order lies in the table's
// manifest range [meta.MinOrder, meta.MaxOrder], which an imported table may
// hold narrower than its file's (doc.go, "Clipping"): it seeks to MinOrder
// and stops at the first entry past MaxOrder, so a compaction drops the
// entries outside the range without reading them. At a clean end it adds
// the file's entries it did not yield to *clipped (0 for an unclipped
// table). Not safe for concurrent use; the table's Reader must stay open.
type clipIter struct {
	it          *sstable.Iter
	lo, hi      uint64
	seek        bool // lo is above the file's first Order: SeekGE before the first Next
	done        bool
	fileEntries int64
	yielded     int64
	clipped     *int64
}

func newClipIter(t *tableFile, clipped *int64) *clipIter {
	fm := t.r.Meta()
	return &clipIter{it: t.r.NewIter(), lo: t.meta.MinOrder, hi: t.meta.MaxOrder,
		seek: t.meta.MinOrder > fm.MinOrder, fileEntries: fm.Entries, clipped: clipped}
}

func (c *clipIter) Next() bool {
	if c.done {
		return false
	}
	if c.seek {
		c.it.SeekGE(c.lo)
		c.seek = false
	}
	if !c.it.Next() || c.it.Entry().Order > c.hi {
		c.done = true
		if c.it.Err() == nil {
			*c.clipped += c.fileEntries - c.yielded
		}
		return false
	}
	c.yielded++
	return true
}

func (c *clipIter) Entry() *base.Entry { return c.it.Entry() }
func (c *clipIter) Err() error         { return c.it.Err() }
func (c *clipIter) Close() error       { return c.it.Close() }
