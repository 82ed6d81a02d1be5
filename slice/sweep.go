package slice

import "github.com/strata-db/strata/internal/base"

// PickExpired proposes TTL-sweep jobs (doc.go, "TTL sweep"): for each run,
// oldest chains' runs first in bucket order, whose slices' Expiry says some
// datum has expired at now (base.Expiry.Due) and none of whose slices is
// busy, one Compaction of that run alone, at most max of them. Each job's
// slices are busy until it ends, as for PickCompaction; Run and install
// are the same. A job drops expired data outright (Bottom) when its run
// ends the chain and nothing may lie below it (Options.LowerHolds for the
// bucket's order hashes; without it, the LowerTier rule), and otherwise
// leaves tombstones. Owner goroutine only; O(runs + slices) per call.
func (t *Table) PickExpired(now int64, max int) []*Compaction {
	if t.closed || t.opts.Expiry == nil || max <= 0 {
		return nil
	}
	var jobs []*Compaction
	for b := range t.buckets {
		c := &t.buckets[b]
		for i := range c.runs {
			r := &c.runs[i]
			if !runDue(r, now) || runBusy(r) {
				continue
			}
			job := &Compaction{t: t, bucket: b, maxList: t.opts.MaxListMerge, sweep: true,
				ids: []uint64{r.id}, inputs: [][]*Slice{r.slices}, inBytes: runBytes(r)}
			if i == len(c.runs)-1 {
				job.drop = t.nothingBelow(b)
			}
			for _, s := range r.slices {
				s.busy = true
			}
			jobs = append(jobs, job)
			if len(jobs) == max {
				return jobs
			}
		}
	}
	return jobs
}

// runDue reports whether some slice of r holds data expired at now.
func runDue(r *run, now int64) bool {
	for _, s := range r.slices {
		if s.exp.Due(now) {
			return true
		}
	}
	return false
}

// Sweep reports whether the job was picked by PickExpired.
func (c *Compaction) Sweep() bool { return c.sweep }

// ExpiryStats sums the Expiry of every installed slice at now: due is the
// number of slices holding data expired at now (PickExpired's candidates),
// dueBytes their memory, and expiredBytes an estimate of the TTL bytes
// expired and not yet removed (base.Expiry.Estimate, summed). Owner
// goroutine only; O(slices).
func (t *Table) ExpiryStats(now int64) (due int, dueBytes, expiredBytes int64) {
	for b := range t.buckets {
		for _, r := range t.buckets[b].runs {
			for _, s := range r.slices {
				if s.exp.Due(now) {
					due++
					dueBytes += int64(s.mem)
					expiredBytes += s.exp.Estimate(now)
				}
			}
		}
	}
	return due, dueBytes, expiredBytes
}

// Expiry returns the slice's TTL summary (Options.Expiry; zero if none).
func (s *Slice) Expiry() base.Expiry { return s.exp }
