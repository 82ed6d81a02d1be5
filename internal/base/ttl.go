package base

import (
	"encoding/binary"
	"math"
	"slices"
	"sync/atomic"
)

// TTL (time to live): the expiry encoding every tier's cleanup shares, as Flink's TtlValue.
//
// A state registered with a TTL stores, with each value, the processing time in milliseconds
// since the epoch at which it was last written (or read, with Flink's OnReadAndWrite): an
// 8-byte big-endian prefix (TSLen) before the codec bytes, where the value's layout puts it:
//
//	TTLValue (value, reducing, aggregating state): the KindValue's value
//	+-------------------+--------------------+
//	| ts int64 BE (8 B) | codec bytes        |
//	+-------------------+--------------------+
//
//	TTLList (list state): every element of a list batch (KindListBase, KindListAppend)
//	+---------------------+-------------------+-------------+---------------------+-----
//	| uvarint 8+len(e0)   | ts0 int64 BE      | e0 bytes    | uvarint 8+len(e1)   | ...
//	+---------------------+-------------------+-------------+---------------------+-----
//
//	TTLMap (map state): every KindMapEntry's value, as TTLValue
//
// States without a TTL store their values as they are: no prefix, no cost. Part of the slice,
// file and checkpoint formats; do not change.
//
// Expiry is Flink's TtlUtils.expired with its overflow guard: a value stamped ts expires at
// ts + ttl, saturated at math.MaxInt64, and is expired at every now at or after that instant
// (Expired). The tiers and the engine know nothing else of TTL: a compaction, a checkpoint's
// memory table and the root's incremental cleanup drop what TTLFilter says has expired.

// TSLen is the length of the timestamp prefix of a TTL value or list element.
const TSLen = 8

// TTLLayout says where a state's values carry their timestamps. The values are in-memory
// only (the registry stores a TTL flag; the layout follows from the state's kind).
type TTLLayout uint8

const (
	// TTLNone: the state has no TTL.
	TTLNone TTLLayout = iota
	// TTLValue: a KindValue's value starts with the timestamp (value, reducing, aggregating).
	TTLValue
	// TTLList: every element of a list batch starts with its timestamp.
	TTLList
	// TTLMap: every KindMapEntry's value starts with the timestamp.
	TTLMap
)

// Expired reports whether a value stamped ts (milliseconds) with a time to live of ttl
// milliseconds (> 0) is expired at now: ts + ttl <= now, where ts + ttl saturates at
// math.MaxInt64 — exactly Flink's TtlUtils.expired(ts, ttl, now), whose
// getExpirationTimestamp adds min(ttl, MaxInt64 − ts) to a positive ts (a negative ts cannot
// overflow). Expiry is inclusive: at now == ts + ttl the value is expired.
func Expired(ts, ttl, now int64) bool {
	if ts > 0 && ttl > math.MaxInt64-ts {
		return math.MaxInt64 <= now
	}
	return ts+ttl <= now
}

// TS returns the timestamp of a TTL value or element (its first TSLen bytes, big endian);
// ok is false when b is shorter.
func TS(b []byte) (ts int64, ok bool) {
	if len(b) < TSLen {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}

// AppendTS appends the TSLen-byte big-endian timestamp ts to dst.
func AppendTS(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(ts))
}

// TTLState is what the cleanup needs of one state with a TTL.
type TTLState struct {
	TTL    int64     // time to live in milliseconds, > 0
	Layout TTLLayout // where the timestamps are
	// Compaction: slice and LSM compactions drop the state's expired data.
	Compaction bool
	// Snapshot: a checkpoint's memory table leaves the state's expired data out.
	Snapshot bool
	// QueryEvery: a compaction reads the clock again after this many entries of the state
	// (Flink's queryTimeAfterNumEntries); > 0.
	QueryEvery int
	// ReclaimWithin is the bound, in milliseconds, within which the background sweep
	// reclaims the state's expired data (internal/engine/doc.go, "TTL sweep"); 0: no sweep. Only with
	// Compaction: the sweep is a compaction.
	ReclaimWithin int64
}

// TTLTable is the TTL of every state of a Store by state id, and the clock: immutable once
// made (NewTTLTable), so background jobs read it without locks; the owner replaces the
// whole table when a state with a TTL is registered. A Store restored from checkpoints whose
// Stores gave one state different ids keeps each one's ids in its key groups (the root's
// state id aliases): one id may then name different states in different key groups, so the
// table may hold, for ranges of key groups, a table of ids of their own (TTLSegment), and
// every lookup goes by the composite key (StateOf: its key group, then its id).
type TTLTable struct {
	now    func() int64
	states []TTLState // by state id; TTL 0: no TTL
	segs   []ttlSeg   // key-group ranges with ids of their own, in key-group order; nil: none
	any    [2]bool    // some state cleans up in compactions, in snapshots
	sweep  int64      // the smallest ReclaimWithin of a state that sweeps (ms); 0: none
	maxTTL int64      // the largest TTL of a state that sweeps (ms)
	minTTL int64      // the smallest TTL of a state that sweeps (ms)
}

// TTLSegment gives the key groups Lo..Hi (inclusive) a table of ids of their own: there,
// States (by state id) replaces the table's states whole.
type TTLSegment struct {
	Lo, Hi uint16
	States map[uint16]TTLState
}

type ttlSeg struct {
	lo, hi uint16
	states []TTLState
}

// NewTTLTable returns the table of states (by state id) with the clock now, which returns
// milliseconds since the epoch and is called from background goroutines (it must be safe for
// concurrent use). States with a zero TTL or TTLNone are left out.
func NewTTLTable(now func() int64, states map[uint16]TTLState) *TTLTable {
	return NewTTLTableSegments(now, states, nil)
}

// NewTTLTableSegments is NewTTLTable with key-group ranges whose ids are their own (segs,
// disjoint; see TTLTable).
func NewTTLTableSegments(now func() int64, states map[uint16]TTLState, segs []TTLSegment) *TTLTable {
	t := &TTLTable{now: now}
	t.states = t.build(states)
	for _, g := range segs {
		t.segs = append(t.segs, ttlSeg{lo: g.Lo, hi: g.Hi, states: t.build(g.States)})
	}
	slices.SortFunc(t.segs, func(a, b ttlSeg) int { return int(a.lo) - int(b.lo) })
	return t
}

// build returns the states of one id space by id, noting their sweeps and cleanups in t.
func (t *TTLTable) build(states map[uint16]TTLState) []TTLState {
	var out []TTLState
	for id, st := range states {
		if st.TTL <= 0 || st.Layout == TTLNone {
			continue
		}
		if int(id) >= len(out) {
			out = append(out, make([]TTLState, int(id)+1-len(out))...)
		}
		if st.QueryEvery <= 0 {
			st.QueryEvery = 1000
		}
		if !st.Compaction || st.ReclaimWithin < 0 {
			st.ReclaimWithin = 0
		}
		out[id] = st
		if r := st.ReclaimWithin; r > 0 {
			if t.sweep == 0 || r < t.sweep {
				t.sweep = r
			}
			t.maxTTL = max(t.maxTTL, st.TTL)
			if t.minTTL == 0 || st.TTL < t.minTTL {
				t.minTTL = st.TTL
			}
		}
		t.any[0] = t.any[0] || st.Compaction
		t.any[1] = t.any[1] || st.Snapshot
	}
	return out
}

// State returns the TTL of state id, if it has one, in the key groups without ids of their
// own (all of them without segments).
func (t *TTLTable) State(id uint16) (TTLState, bool) {
	if t == nil || int(id) >= len(t.states) || t.states[id].TTL == 0 {
		return TTLState{}, false
	}
	return t.states[id], true
}

// StateOf returns the TTL of the state of composite key key (its key group and state id), if
// it has one. Allocates nothing.
func (t *TTLTable) StateOf(key []byte) (TTLState, bool) {
	if t == nil || len(key) < 5 {
		return TTLState{}, false
	}
	id := binary.BigEndian.Uint16(key[2:])
	states := t.states
	if len(t.segs) > 0 {
		kg := binary.BigEndian.Uint16(key)
		for i := range t.segs {
			if g := &t.segs[i]; kg >= g.lo && kg <= g.hi {
				states = g.states
				break
			}
		}
	}
	if int(id) >= len(states) || states[id].TTL == 0 {
		return TTLState{}, false
	}
	return states[id], true
}

// Cleans reports whether some state of the table cleans up in snapshots (snapshot) or in
// compactions.
func (t *TTLTable) Cleans(snapshot bool) bool {
	if snapshot {
		return t.any[1]
	}
	return t.any[0]
}

// Now reads the table's clock.
func (t *TTLTable) Now() int64 { return t.now() }

// Sweep returns the smallest ReclaimWithin of the states that sweep, in milliseconds, and
// the largest TTL among them; 0, 0 when none does (or t is nil).
func (t *TTLTable) Sweep() (within, maxTTL int64) {
	if t == nil {
		return 0, 0
	}
	return t.sweep, t.maxTTL
}

// MinSweepTTL returns the smallest TTL of the states that sweep, in milliseconds; 0 when none
// does (or t is nil). No value of a state that sweeps, stamped at ts, expires before
// ts + MinSweepTTL: the sweep seals an active segment only once its oldest data can have
// expired (engine, sweep.go).
func (t *TTLTable) MinSweepTTL() int64 {
	if t == nil {
		return 0
	}
	return t.minTTL
}

// SweepsMore reports whether t sweeps a state (by id) that old does not (old nil: any):
// summaries noted under old do not cover that state's data.
func (t *TTLTable) SweepsMore(old *TTLTable) bool {
	if t == nil {
		return false
	}
	for id := range t.states {
		if t.states[id].ReclaimWithin > 0 && (old == nil || id >= len(old.states) || old.states[id].ReclaimWithin == 0) {
			return true
		}
	}
	// Key groups with ids of their own: conservatively, any sweep there is new unless old had
	// the same segments (the owner replaces the table only when states are registered).
	for i, g := range t.segs {
		for id := range g.states {
			if g.states[id].ReclaimWithin > 0 && (old == nil || i >= len(old.segs) || id >= len(old.segs[i].states) ||
				old.segs[i].states[id].ReclaimWithin == 0) {
				return true
			}
		}
	}
	return false
}

// Expiry summarizes when the TTL data of a unit of storage (a slice, a table file) expires,
// for the background sweep: the earliest and the latest instant (milliseconds, as Expired's
// ts + ttl, saturated) at which one of its values, map entries or list elements of a state
// that sweeps expires, and the bytes of those values and elements. The zero value holds
// nothing (Bytes == 0: every TTL value has at least TSLen bytes). In memory only: not part
// of any format.
type Expiry struct {
	Min, Max int64
	Bytes    int64
}

// Due reports whether some datum of x has expired at now.
func (x *Expiry) Due(now int64) bool { return x.Bytes > 0 && x.Min <= now }

// Merge adds y's data to x.
func (x *Expiry) Merge(y Expiry) {
	if y.Bytes == 0 {
		return
	}
	if x.Bytes == 0 {
		*x = y
		return
	}
	x.Min, x.Max, x.Bytes = min(x.Min, y.Min), max(x.Max, y.Max), x.Bytes+y.Bytes
}

// Estimate returns an estimate of the bytes of x that have expired at now: all of them at or
// after Max, none before Min, and in between the share of the interval that has passed
// (expiry instants taken as spread evenly over [Min, Max]).
func (x *Expiry) Estimate(now int64) int64 {
	switch {
	case x.Bytes == 0 || now < x.Min:
		return 0
	case now >= x.Max:
		return x.Bytes
	}
	return int64(float64(x.Bytes) * float64(now-x.Min) / float64(x.Max-x.Min))
}

// expiresAt is the instant a value stamped ts with a TTL of ttl expires (ts + ttl, saturated
// as Expired: Expired(ts, ttl, now) ⇔ expiresAt(ts, ttl) <= now).
func expiresAt(ts, ttl int64) int64 {
	if ts > 0 && ttl > math.MaxInt64-ts {
		return math.MaxInt64
	}
	return ts + ttl
}

// Note adds the TTL data of entry e to x: for a state that sweeps (ReclaimWithin > 0), its
// value's (TTLValue, TTLMap) or its list elements' (TTLList) expiry instants and bytes.
// Entries of other states, tombstones, and data whose bytes do not parse (which TTLFilter
// keeps) add nothing. Safe for concurrent use (t is immutable); allocates nothing.
func (t *TTLTable) Note(x *Expiry, e *Entry) {
	if t == nil || t.sweep == 0 {
		return
	}
	st, ok := t.StateOf(e.Key)
	if !ok || st.ReclaimWithin == 0 {
		return
	}
	switch {
	case e.Kind == KindValue && st.Layout == TTLValue, e.Kind == KindMapEntry && st.Layout == TTLMap:
		if ts, ok := TS(e.Value); ok {
			at := expiresAt(ts, st.TTL)
			x.Merge(Expiry{Min: at, Max: at, Bytes: int64(len(e.Value))})
		}
	case (e.Kind == KindListBase || e.Kind == KindListAppend) && st.Layout == TTLList:
		var y Expiry
		for b := e.Value; len(b) > 0; {
			n, m := binary.Uvarint(b)
			if m <= 0 || n > uint64(len(b)-m) || n < TSLen {
				return // broken framing: the filter keeps the batch, so the sweep ignores it
			}
			at := expiresAt(int64(binary.BigEndian.Uint64(b[m:])), st.TTL)
			y.Merge(Expiry{Min: at, Max: at, Bytes: int64(m) + int64(n)})
			b = b[m+int(n):]
		}
		x.Merge(y)
	}
}

// StateID returns the state id of a composite key (AppendCompositeKey); ok is false when key
// is too short to be one.
func StateID(key []byte) (uint16, bool) {
	if len(key) < 5 {
		return 0, false
	}
	return binary.BigEndian.Uint16(key[2:]), true
}

// TTLCounters count what TTL cleanup removed; shared by the jobs of one Store (atomic).
type TTLCounters struct {
	// Entries counts values, map entries and list elements that were dropped or turned into
	// tombstones because they had expired.
	Entries atomic.Int64
	// Bytes counts the bytes of values and elements removed (value bytes; the keys of the
	// tombstones that replace them stay).
	Bytes atomic.Int64
}

// TTLFilter is the Filter (Resolver.Filter) that removes expired data, for one compaction or
// one checkpoint's memory table — one job, one goroutine; make one per job. For each entry of
// a state with a TTL (by the state id in its key) whose cleanup the use selects (Compaction or
// Snapshot), it reads the timestamps against the clock (read once at the first such entry and
// again after QueryEvery entries of a state, Flink's queryTimeAfterNumEntries) and:
//
//	KindValue (TTLValue) expired        → dropped at the bottom, else a KindTombstone
//	KindMapEntry (TTLMap) expired       → dropped at the bottom, else a KindMapEntryTombstone
//	list batch (TTLList), some expired  → rewritten without them; with none left, a
//	                                      KindListAppend is dropped and a KindListBase
//	                                      dropped at the bottom, else a KindTombstone
//
// Above the bottom an expired version becomes a tombstone rather than vanish, as RocksDB turns
// what a compaction filter removes into a deletion: it goes on hiding the older versions below
// it, so a read never sees an older version come back (whatever its timestamp). Data whose
// bytes do not parse (too short, bad framing) is kept as it is: a read reports it.
//
// With a clock that never goes back, what the filter removes was expired for every later
// read, so no read can tell whether the filter ran: it only saves space.
type TTLFilter struct {
	Table    *TTLTable
	Bottom   bool         // nothing older lies below the output: drop rather than tombstone
	Snapshot bool         // the checkpoint use (TTLState.Snapshot), not compaction
	Counters *TTLCounters // where the removals are counted; nil: not counted

	now   int64
	since int  // entries of TTL states judged since the clock was read
	read  bool // the clock was read
	out   Entry
	buf   []byte
}

// Filter is the Resolver's Filter (and, with Bottom set per job, an LSM compaction's): it
// keeps, drops or rewrites e as the type's doc says. The rewritten entry and its bytes are
// valid until the next call.
func (f *TTLFilter) Filter(e *Entry) (Decision, *Entry) {
	st, ok := f.Table.StateOf(e.Key)
	if !ok || (f.Snapshot && !st.Snapshot) || (!f.Snapshot && !st.Compaction) {
		return FilterKeep, nil
	}
	switch {
	case e.Kind == KindValue && st.Layout == TTLValue, e.Kind == KindMapEntry && st.Layout == TTLMap:
		ts, ok := TS(e.Value)
		if !ok || !Expired(ts, st.TTL, f.clock(&st)) {
			return FilterKeep, nil
		}
		f.count(1, len(e.Value))
		if f.Bottom {
			return FilterDrop, nil
		}
		f.out = *e
		f.out.Value = nil
		f.out.Kind = KindTombstone
		if e.Kind == KindMapEntry {
			f.out.Kind = KindMapEntryTombstone
		}
		return FilterRewrite, &f.out
	case (e.Kind == KindListBase || e.Kind == KindListAppend) && st.Layout == TTLList:
		return f.list(e, &st)
	}
	return FilterKeep, nil
}

// clock returns the time to judge an entry of st by, reading the clock at the first entry
// and after st.QueryEvery entries.
func (f *TTLFilter) clock(st *TTLState) int64 {
	if !f.read || f.since >= st.QueryEvery {
		f.now, f.since, f.read = f.Table.Now(), 0, true
	}
	f.since++
	return f.now
}

func (f *TTLFilter) count(entries, bytes int) {
	if c := f.Counters; c != nil {
		c.Entries.Add(int64(entries))
		c.Bytes.Add(int64(bytes))
	}
}

// list filters the elements of a list batch.
func (f *TTLFilter) list(e *Entry, st *TTLState) (Decision, *Entry) {
	now := f.clock(st)
	expired, ok := CountExpired(e.Value, st.TTL, now)
	if !ok || expired == 0 {
		return FilterKeep, nil
	}
	f.buf = AppendUnexpired(f.buf[:0], e.Value, st.TTL, now)
	f.count(expired, len(e.Value)-len(f.buf))
	if len(f.buf) == 0 {
		if e.Kind == KindListAppend || f.Bottom {
			return FilterDrop, nil
		}
		f.out = *e
		f.out.Kind, f.out.Value = KindTombstone, nil
		return FilterRewrite, &f.out
	}
	f.out = *e
	f.out.Value = f.buf
	return FilterRewrite, &f.out
}

// CountExpired returns the number of expired elements of a TTL list batch (TTLList) at now;
// ok is false when the framing is broken or an element is shorter than its timestamp.
func CountExpired(batch []byte, ttl, now int64) (expired int, ok bool) {
	for len(batch) > 0 {
		n, m := binary.Uvarint(batch)
		if m <= 0 || n > uint64(len(batch)-m) || n < TSLen {
			return 0, false
		}
		ts := int64(binary.BigEndian.Uint64(batch[m:]))
		if Expired(ts, ttl, now) {
			expired++
		}
		batch = batch[m+int(n):]
	}
	return expired, true
}

// AppendUnexpired appends the framed elements of a well-formed TTL list batch (CountExpired
// said ok) that are not expired at now to dst, unchanged, in order.
func AppendUnexpired(dst, batch []byte, ttl, now int64) []byte {
	for len(batch) > 0 {
		n, m := binary.Uvarint(batch)
		end := m + int(n)
		if !Expired(int64(binary.BigEndian.Uint64(batch[m:])), ttl, now) {
			dst = append(dst, batch[:end]...)
		}
		batch = batch[end:]
	}
	return dst
}
