package engine

import "time"

// The changelog's space-amplification cap against the live state (doc.go, "Changelog";
// issue 24, item 4).

// liveRefresh is how often materializationDue recomputes the live state's size: the owner
// asks every 64 logged writes, and the tiers' figures walk their segments, buckets and levels.
const liveRefresh = 10 * time.Millisecond

// liveFloor is the least live size the cap compares with, so that a nearly empty Store does
// not materialize after every few writes (1 MiB of log at most is then allowed before one).
const liveFloor = 1 << 20

// liveStateBytes is the live state's size as the tiers count it (owner): the FreshTable's
// data bytes, the SliceTable's memory and the LsmStore's table bytes. It is the resident size
// of the state rather than its logical bytes: overwritten versions not yet compacted count,
// within the tiers' own bounds (the LsmStore's MaxSpaceAmplification, the SliceTable's runs
// per bucket); a materialization stores the same tiers.
func (t *Engine) liveStateBytes() int64 {
	n := int64(t.f.Stats().DataBytes) + t.sl.Stats().MemBytes
	if t.db != nil {
		for _, l := range t.db.Metrics().Levels {
			n += l.Bytes
		}
	}
	return n
}

// spaceCapDue reports whether the space-amplification cap cp calls for a materialization
// (owner; c.logBytes > 0): the log since the last cut exceeds (cp − 1) × the live state
// (the growth rule), or the state shrank since the last cut (deletes, TTL cleanup) and the
// last durable materialization and the log together exceed cp × the live state (the shrink
// rule). The shrink rule holds back when that materialization was itself over cp × the live
// state at the last cut (the checkpoint format larger than the tiers): another one would be
// as large, and it would start again at every check. Live is liveStateBytes, at least
// liveFloor, refreshed every liveRefresh.
func (t *Engine) spaceCapDue(now time.Time, cp float64) bool {
	c := t.cl
	if c.liveAt.IsZero() || now.Sub(c.liveAt) >= liveRefresh || now.Before(c.liveAt) {
		c.live, c.liveAt = t.liveStateBytes(), now
	}
	live := float64(max(c.live, liveFloor))
	if float64(c.logBytes) > (cp-1)*live {
		return true
	}
	if len(c.mats) == 0 || c.live >= c.liveAtCut {
		return false
	}
	m := c.mats[len(c.mats)-1]
	return float64(m.size) <= cp*float64(max(c.liveAtCut, liveFloor)) && float64(m.size+c.logBytes) > cp*live
}
