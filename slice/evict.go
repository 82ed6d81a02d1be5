package slice

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/strata-db/strata/internal/base"
)

// heatOf folds s's hits since the last fold into its decayed heat and
// returns it: heat halves every HeatHalfLife, each hit adds one.
func (t *Table) heatOf(s *Slice, now int64) float64 {
	if dt := now - s.fold; dt > 0 {
		s.heat *= math.Exp2(-float64(dt) / float64(t.opts.HeatHalfLife))
		s.fold = now
	}
	s.heat += float64(s.hits)
	s.hits = 0
	return s.heat
}

// score is a slice's hot/cold score in hits per second: its decayed hits
// plus one (a prior, so a slice nobody has read yet is not the coldest
// merely for being new) over its age plus one half-life. Lower is colder.
func (t *Table) score(s *Slice, now int64) float64 {
	age := float64(max(now-s.born, 0) + int64(t.opts.HeatHalfLife))
	return (t.heatOf(s, now) + 1) / age * 1e9
}

// Eviction is one eviction job: cold slices (from the ends of their
// chains) that Run hands to a sink as one sorted run; InstallEviction then
// removes them. PickEviction creates it and marks its slices busy.
type Eviction struct {
	t      *Table
	slices []*Slice // sorted by minOrder
	bytes  int64
	ran    bool
	ok     bool
	done   bool
}

// Slices returns the number of slices in the job.
func (e *Eviction) Slices() int { return len(e.slices) }

// Bytes returns the memory of the job's slices, in bytes.
func (e *Eviction) Bytes() int64 { return e.bytes }

// PickEviction proposes an eviction when the memory held by the table's
// slices exceeds Options.HighWatermark (0: never), or reports false. It
// scores every slice that may leave — those of the oldest run of each
// chain that are not busy, since a newer run must never move below an
// older one (invariant 8) — groups slices that share an order hash at
// their boundary into units that leave together, and takes the coldest
// units (mean score) until the batch holds Options.EvictionBatch bytes. From then on compaction keeps tombstones
// (something lies below). Owner goroutine only; O(slices considered).
func (t *Table) PickEviction() (*Eviction, bool) {
	if t.closed || t.opts.HighWatermark == 0 || t.memBytes <= t.opts.HighWatermark {
		return nil, false
	}
	now := int64(t.opts.Now())
	// A unit is a maximal group of adjacent slices of a run that share an
	// order hash at their boundary: one key's versions, or one map, may
	// span them, and must leave together (invariant 8).
	type unit struct {
		slices []*Slice
		score  float64
	}
	var units []unit
	for b := range t.buckets {
		c := &t.buckets[b]
		if len(c.runs) == 0 {
			continue
		}
		ss := c.runs[len(c.runs)-1].slices
		for i := 0; i < len(ss); {
			j := i + 1
			for j < len(ss) && ss[j].minOrder == ss[j-1].maxOrder {
				j++
			}
			u := unit{slices: ss[i:j:j]}
			busy := false
			for _, s := range u.slices {
				busy = busy || s.busy
				u.score += t.score(s, now)
			}
			if !busy {
				u.score /= float64(j - i)
				units = append(units, u)
			}
			i = j
		}
	}
	if len(units) == 0 {
		return nil, false
	}
	slices.SortFunc(units, func(a, b unit) int { return cmp.Compare(a.score, b.score) })
	job := &Eviction{t: t}
	for _, u := range units {
		if job.bytes >= t.opts.EvictionBatch {
			break
		}
		for _, s := range u.slices {
			s.busy = true
			job.slices = append(job.slices, s)
			job.bytes += int64(s.mem)
		}
	}
	slices.SortFunc(job.slices, func(a, b *Slice) int { return cmp.Compare(a.minOrder, b.minOrder) })
	t.evicted = true
	return job, true
}

// Run merges the job's slices into one sorted run (base.Iterator, in
// (Order, Key, UserKey, Seq descending) order, every version kept) and
// hands it to sink.Evict, returning its error. The entries' bytes stay
// valid until InstallEviction or CancelEviction. It reads only immutable
// slices, so a background job runs it. Errors: the sink's, ctx.Err()
// (checked before the hand-off), ErrJob if run twice.
func (e *Eviction) Run(ctx context.Context, sink base.Sink) error {
	if e.ran {
		return fmt.Errorf("%w: eviction already ran", ErrJob)
	}
	e.ran = true
	if err := ctx.Err(); err != nil {
		return err
	}
	in := make([][]*Slice, len(e.slices))
	for i := range e.slices {
		in[i] = e.slices[i : i+1 : i+1]
	}
	if err := sink.Evict(newMergeIter(in, false)); err != nil {
		return fmt.Errorf("eviction of %d slices (%d bytes): %w", len(e.slices), e.bytes, err)
	}
	e.ok = true
	return nil
}

// InstallEviction removes the job's slices from their chains and frees
// them; the sink holds their data now. Errors: ErrJob if the job is not
// pending on t or Run did not succeed (the job stays pending; cancel it);
// base.ErrClosed after Close. Owner goroutine only.
func (t *Table) InstallEviction(e *Eviction) error {
	if e.t != t || e.done || !e.ok {
		return fmt.Errorf("%w: eviction of %d slices", ErrJob, len(e.slices))
	}
	e.done = true
	if t.closed {
		t.freeBusy(e.slices)
		return base.ErrClosed
	}
	for _, s := range e.slices {
		c := &t.buckets[s.bucket]
		r := &c.runs[len(c.runs)-1]
		i := slices.Index(r.slices, s)
		if i < 0 {
			panic("strata: invariant: an evicted slice left the end of its chain")
		}
		r.slices = slices.Delete(r.slices, i, i+1)
		r.index()
		if len(r.slices) == 0 {
			t.dropFilter(r)
			c.runs = c.runs[:len(c.runs)-1]
			t.runs--
		}
		s.busy = false
		t.free(s)
	}
	t.gen++
	t.evictions++
	t.evictedSlices += int64(len(e.slices))
	t.evictedBytes += e.bytes
	return nil
}

// CancelEviction ends a job without removing its slices (the sink failed
// or the job was cancelled); they stay and are no longer busy. Call it
// only when Run has returned or will never be called (after
// scheduler.Handle.Wait, not merely Cancel): a Run still in flight would
// read slices the owner may free from then on. Errors: ErrJob if the job
// is not pending on t. Owner goroutine only.
func (t *Table) CancelEviction(e *Eviction) error {
	if e.t != t || e.done {
		return fmt.Errorf("%w: eviction of %d slices", ErrJob, len(e.slices))
	}
	e.done = true
	if t.closed {
		t.freeBusy(e.slices)
		return nil
	}
	for _, s := range e.slices {
		s.busy = false
	}
	return nil
}
