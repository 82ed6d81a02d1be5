package lsm

// PickExpired returns a TTL-sweep compaction (doc.go, "TTL sweep"), or nil
// when no table file is due or the due ones' levels are busy. A file is due
// when its TTL summary (Options.Expiry, noted as the file was written) says
// some datum has expired at now — or, for a file whose summary is not known
// (found at Open, imported by a restore), once now reaches unknownAt (the
// caller's bound on when its data can expire). The job for a due file at
// L0 is the L0 compaction (every L0 file into L1, as PickCompaction's); for
// a file at Li, i >= 1, it rewrites that file alone into Li — in place: its
// outputs replace it, within its Order range, so Li stays sorted and
// disjoint — through Options.NewFilter(true), at the bottom when no deeper
// level overlaps it. Its cost is the file's, not the level's. Owner only;
// the job is run and installed like PickCompaction's (InstallCompaction
// exactly once). O(files) per call.
func (d *DB) PickExpired(now, unknownAt int64) *CompactionJob {
	if d.closed || d.opts.Expiry == nil {
		return nil
	}
	v := d.current
	for l, files := range v.levels {
		if d.busy[l] {
			continue
		}
		for _, t := range files {
			if !t.due(now, unknownAt) {
				continue
			}
			if l == 0 {
				if len(v.levels) < 2 || d.busy[1] {
					break
				}
				j := d.newJob(0)
				j.sweep = true
				return j
			}
			j := &CompactionJob{d: d, v: v, level: l, outLevel: l, sweep: true,
				lo: t.meta.MinOrder, hi: t.meta.MaxOrder}
			j.inputs[0] = []*tableFile{t}
			j.bottom = true
			for dl := l + 1; dl < len(v.levels); dl++ {
				if len(overlapping(v.levels[dl], j.lo, j.hi)) > 0 {
					j.bottom = false
					break
				}
			}
			v.refs++
			d.busy[l] = true
			d.jobs++
			j.forgets = d.forgets
			return j
		}
	}
	return nil
}

// due reports whether the sweep should rewrite t at now (PickExpired).
func (t *tableFile) due(now, unknownAt int64) bool {
	if t.expKnown {
		return t.exp.Due(now)
	}
	return unknownAt <= now
}

// ForgetExpiry marks every file of the current version as without a known
// TTL summary (due at the caller's bound, as a file found at Open): the
// caller's TTL table now sweeps a state the summaries were not noted for.
// A compaction in flight gives outputs without a summary too
// (InstallCompaction), and so does a WriteL0 file installed after (InstallL0
// checks nothing: its data was written by the caller under its current
// table). Owner only; O(files).
func (d *DB) ForgetExpiry() {
	if d.closed {
		return
	}
	d.forgets++
	for _, files := range d.current.levels {
		for _, t := range files {
			t.expKnown = false
		}
	}
}

// Sweep reports whether the job was picked by PickExpired.
func (j *CompactionJob) Sweep() bool { return j.sweep }

// Overlaps reports whether a table file of the current version holds data
// with Order in [lo, hi] (by the files' ranges: a file may have none inside
// its range). Owner only.
func (d *DB) Overlaps(lo, hi uint64) bool {
	if d.closed {
		return true
	}
	for _, files := range d.current.levels {
		for _, t := range files {
			if t.overlaps(lo, hi) {
				return true
			}
		}
	}
	return false
}

// ExpiryStats sums the TTL summaries of the current version's files at now
// (unknownAt as for PickExpired): due is the number of files PickExpired
// would rewrite, dueBytes their size, expiredBytes an estimate of the TTL
// bytes in them that have expired (base.Expiry.Estimate; a file whose
// summary is not known counts its whole size once due). Owner only;
// O(files).
func (d *DB) ExpiryStats(now, unknownAt int64) (due int, dueBytes, expiredBytes int64) {
	if d.closed || d.opts.Expiry == nil {
		return 0, 0, 0
	}
	for _, files := range d.current.levels {
		for _, t := range files {
			if !t.due(now, unknownAt) {
				continue
			}
			due++
			dueBytes += t.meta.Size
			if t.expKnown {
				expiredBytes += t.exp.Estimate(now)
			} else {
				expiredBytes += t.meta.Size
			}
		}
	}
	return due, dueBytes, expiredBytes
}
