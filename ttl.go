package strata

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// TTLConfig gives a state a time to live, as Flink's StateTtlConfig: set it on a descriptor
// (ValueDescriptor.TTL, ListDescriptor.TTL, …; nil: the state never expires). Each value —
// each list element, each map entry — carries the processing time (Options.Clock, in
// milliseconds) at which it was last written, or read with TTLOnReadAndWrite, as Flink's
// TtlValue; it expires once TTL has passed since then:
//
//	expired  ⇔  ts + min(TTL, MaxInt64 − ts) <= now          (Flink's TtlUtils.expired)
//
// Expiry is inclusive (a value stamped ts with a TTL of 10 ms is expired at ts+10) and
// saturating (a timestamp near MaxInt64 never overflows into the past). What each state does:
//
//   - ValueState, ReducingState, AggregatingState: one timestamp per value. Get of an expired
//     value removes it and reports it absent (or, with TTLReturnExpiredIfNotCleanedUp, returns
//     it this once); Add to an expired reducing or aggregating value starts afresh (Reduce is
//     not called; a new accumulator is created), as Flink's TtlReduceFunction and
//     TtlAggregateFunction — except with TTLReturnExpiredIfNotCleanedUp, where, as in Flink,
//     the expired value still present is folded into.
//   - ListState: one timestamp per element (Add, AddAll and Update stamp each). Get skips
//     expired elements (TTLReturnExpiredIfNotCleanedUp: yields them); a list whose elements
//     have all expired is removed by the Get that finds it so — it is absent, not an empty
//     list (FLINK-21413) — as Flink's TtlListState. MergeNamespaces moves elements with their
//     timestamps.
//   - MapState: one timestamp per entry. Get, Contains, IsEmpty, Iterator, Entries, Keys and
//     Values skip expired entries and remove each they meet, as Flink's TtlMapState (with
//     TTLReturnExpiredIfNotCleanedUp they return it once while removing it).
//
// Reads that write: a read that removes expired data, or refreshes a timestamp
// (TTLOnReadAndWrite), or runs incremental cleanup (TTLCleanup.IncrementalSize) writes to the
// Store, as Flink's TTL states do: like any write it ends the validity of values and list
// iterators read before it (doc.go, invariant 2) and may fail as a write fails
// (ErrMemoryBudget). The value such a read returns is its own copy or is decoded from what it
// wrote, and stays valid until the next write.
//
// Cleanup of data nobody reads (TTLCleanup): compactions of slices and of the LsmStore drop
// expired data (on by default, as Flink's RocksDB compaction filter); a background sweep
// reclaims the expired data of keys that are never read or compacted again within a bound
// (ReclaimWithin, by default 2 × TTL; on by default); checkpoints can leave it out
// (FullSnapshot); each access can check a few more keys (IncrementalSize), and so can each
// record the task processes (EveryRecord, Store.RecordProcessed). Keys,
// KeysAndNamespaces and NumEntries count expired data not yet removed, as Flink's getKeys.
//
// Restore: each state's TTL flag is stored with the state (registry, checkpoints). A state
// stored with a TTL may be registered without one, and one stored without with one: the
// registration migrates every stored value (ttl_migrate.go), as Flink 2.x's state migration
// (TtlAwareSerializer) — turned on, each value, list element and map entry is stamped with the
// registration's time; turned off, every timestamp is dropped and values that had expired but
// were not cleaned up yet are visible again. Within one run a name keeps its first
// registration's TTL flag (ErrIncompatibleState otherwise).
// TTL, UpdateType, Visibility and Cleanup may change from one run to the next; stored
// timestamps are kept, so the time a Store was closed or a checkpoint waited counts toward
// expiry. Re-registering a name in one run keeps the first registration's TTLConfig.
//
// The clock should not go back: what compactions and checkpoints removed was expired by the
// clock when they ran, and a clock set back could make such a value live again for a read
// that did not see the removal (the default clock, Options.Clock, never goes back while the
// Store is open).
type TTLConfig struct {
	// TTL is the time to live: at least 1 ms (ErrInvalidOptions otherwise), counted in whole
	// milliseconds (rounded down), as Flink's StateTtlConfig.newBuilder(ttl); TTLNever for
	// Flink's Long.MAX_VALUE ms (stamped, never expires).
	TTL time.Duration
	// UpdateType says which accesses renew a value's timestamp: TTLOnCreateAndWrite (the
	// default), TTLOnReadAndWrite, or TTLUpdateDisabled (the state has no TTL at all).
	UpdateType TTLUpdateType
	// Visibility says whether an expired value not yet removed is returned:
	// TTLNeverReturnExpired (the default) or TTLReturnExpiredIfNotCleanedUp.
	Visibility TTLVisibility
	// Cleanup selects how expired data that is not read is removed (see TTLCleanup).
	Cleanup TTLCleanup
}

// TTLNever, as TTLConfig.TTL, is a time to live of math.MaxInt64 milliseconds — Flink's
// StateTtlConfig with a TTL of Long.MAX_VALUE ms, which tests and jobs use for "stamped but
// never expires" — far beyond time.Duration's range (the largest Duration is about 292 years
// and is taken as such). It is a sentinel outside the TTLs accepted otherwise (as
// checkpoint.NoGrace). Values are stamped as with any TTL, and expiry saturates (TTLConfig): a
// value stamped ts expires at min(ts + MaxInt64, MaxInt64), i.e. only at the clock's largest
// value, whatever ts is, with no overflow. Such a state is never swept
// (TTLCleanup.ReclaimWithin is ignored): nothing of it expires.
const TTLNever time.Duration = -1

// TTLUpdateType says which accesses renew a value's timestamp, as Flink's
// StateTtlConfig.UpdateType.
type TTLUpdateType uint8

const (
	// TTLOnCreateAndWrite renews the timestamp on writes only (Put, Add, AddAll, Update,
	// MergeNamespaces): Flink's OnCreateAndWrite. The default.
	TTLOnCreateAndWrite TTLUpdateType = iota
	// TTLOnReadAndWrite renews it on successful reads too (a read of an unexpired value, list
	// or map entry rewrites it with the current time): Flink's OnReadAndWrite.
	TTLOnReadAndWrite
	// TTLUpdateDisabled turns the TTL off: the state stores no timestamps and never expires,
	// as Flink's UpdateType.Disabled (StateTtlConfig.isEnabled false). Registering a state so
	// is registering it without a TTL.
	TTLUpdateDisabled
)

// TTLVisibility says whether an expired value that is still stored is returned, as Flink's
// StateTtlConfig.StateVisibility.
type TTLVisibility uint8

const (
	// TTLNeverReturnExpired: an expired value is never returned (it reads as absent and the
	// read removes it): Flink's NeverReturnExpired. The default.
	TTLNeverReturnExpired TTLVisibility = iota
	// TTLReturnExpiredIfNotCleanedUp: an expired value that no cleanup has removed yet is
	// returned by the read that finds it, which removes it: Flink's
	// ReturnExpiredIfNotCleanedUp.
	TTLReturnExpiredIfNotCleanedUp
)

// TTLCleanup selects the cleanup of expired data besides reads, as the cleanup strategies of
// Flink's StateTtlConfig. The zero value cleans up in compactions and in the background
// sweep (ReclaimWithin 2 × TTL).
type TTLCleanup struct {
	// FullSnapshot leaves expired data out of checkpoints: the part of a native checkpoint
	// that the Store writes from memory (its slices and FreshTable segments, "the memory
	// table") carries an expired value or map entry as a tombstone and a list without its
	// expired elements, judged by the clock when the checkpoint's upload writes it, as
	// Flink's cleanupFullSnapshot. Table files of the LsmStore go into a checkpoint as they
	// are (incremental checkpoints share them; compactions clean them), and changelog
	// checkpoints carry the log as written. The running Store is not changed.
	FullSnapshot bool
	// IncrementalSize is the number of the state's keys (key and namespace) that each access
	// to the state — any of its reads or writes — checks first, removing their expired
	// values, list elements and map entries, as Flink's cleanupIncrementally(cleanupSize,
	// false). The keys come from a key scan of the state (Store.Keys' walk, a batch of 1024
	// keys at a time) that starts over at its end, so every key is checked once per about
	// (keys / IncrementalSize) accesses. 0: off (the default). Must not be negative. An
	// access with it on is a write (see TTLConfig) and allocates once per batch.
	IncrementalSize int
	// EveryRecord also runs the incremental cleanup (IncrementalSize keys) once for every
	// record the task processes, not only on accesses to the state, as Flink's
	// cleanupIncrementally(cleanupSize, true) (runCleanupForEveryRecord). Flink runs it from
	// the key context (a listener of setCurrentKey); a Strata Key is a pure value, so the task
	// marks each record with Store.RecordProcessed. Needs IncrementalSize > 0
	// (ErrInvalidOptions otherwise).
	EveryRecord bool
	// NoCompaction keeps compactions from removing the state's expired data, which they do by
	// default, as Flink's cleanupInRocksdbCompactFilter (on by default since Flink 1.14):
	// memory compactions of slices and LSM compactions drop expired values and map entries
	// (or turn them into tombstones where older data lies below) and rewrite list batches
	// without their expired elements (Stats.TTL: CompactionEntries, CompactionBytes).
	NoCompaction bool
	// QueryTimeAfterNumEntries is the number of the state's entries a compaction judges
	// before it reads the clock again, as Flink's queryTimeAfterNumEntries. 0: 1000 (the
	// default). Must not be negative.
	QueryTimeAfterNumEntries int
	// ReclaimWithin bounds the time the state's expired data stays stored when nobody reads
	// it and no compaction reaches it: a background sweep (internal/engine doc.go, "TTL
	// sweep"; RocksDB's periodic TTL compaction plays this part for Flink) seals a FreshTable
	// segment that stayed active too long and rewrites, through the compaction filter, each
	// slice run and LsmStore table file whose oldest expiry instant has passed — the memory
	// and disk of expired values, map entries and list elements are reclaimed (a tombstone
	// keeping the key stays where older data may lie below, until a compaction reaches the
	// bottom), at a cost that follows the runs and files holding expired data, not the
	// state's size (Stats.TTL: Sweep*, ExpiredPendingBytes). The bound holds from the
	// instant a value expires, or it was written if later, provided the Store is written to
	// (or WaitBackground is called) at least every ReclaimWithin/5 — the sweep runs on the
	// task's own calls, as every install does (a Store nobody calls does nothing) — and the
	// background jobs keep up. Table files found at Open (their summaries are in memory only)
	// are rewritten once, the largest swept TTL after Open. 0: 2 × TTL (the default); else
	// at least 1 ms (ErrInvalidOptions otherwise). The Store sweeps at the period of its
	// smallest ReclaimWithin. Off with NoSweep or NoCompaction (the sweep is a compaction).
	ReclaimWithin time.Duration
	// NoSweep turns the background sweep (ReclaimWithin) off for the state: its expired data
	// is then reclaimed only by reads, incremental cleanup and the compactions that reach it.
	NoSweep bool
}

// validate checks c for state name: ErrInvalidOptions naming the bad field.
func (c *TTLConfig) validate(name string) error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: state %q: TTLConfig.%s = %v: %s", ErrInvalidOptions, name, field, v, want)
	}
	switch {
	case c.TTL < time.Millisecond && c.TTL != TTLNever:
		return bad("TTL", c.TTL, "must be at least 1ms (or TTLNever)")
	case c.UpdateType > TTLUpdateDisabled:
		return bad("UpdateType", c.UpdateType, "must be TTLOnCreateAndWrite, TTLOnReadAndWrite or TTLUpdateDisabled")
	case c.Visibility > TTLReturnExpiredIfNotCleanedUp:
		return bad("Visibility", c.Visibility, "must be TTLNeverReturnExpired or TTLReturnExpiredIfNotCleanedUp")
	case c.Cleanup.IncrementalSize < 0:
		return bad("Cleanup.IncrementalSize", c.Cleanup.IncrementalSize, "must not be negative")
	case c.Cleanup.EveryRecord && c.Cleanup.IncrementalSize == 0:
		return bad("Cleanup.EveryRecord", true, "needs Cleanup.IncrementalSize > 0")
	case c.Cleanup.ReclaimWithin != 0 && c.Cleanup.ReclaimWithin < time.Millisecond:
		return bad("Cleanup.ReclaimWithin", c.Cleanup.ReclaimWithin, "must be 0 (2 × TTL) or at least 1ms")
	case c.Cleanup.QueryTimeAfterNumEntries < 0:
		return bad("Cleanup.QueryTimeAfterNumEntries", c.Cleanup.QueryTimeAfterNumEntries, "must not be negative")
	}
	return nil
}

// enabled reports whether c gives a state timestamps (nil or TTLUpdateDisabled: no).
func (c *TTLConfig) enabled() bool { return c != nil && c.UpdateType != TTLUpdateDisabled }

// ttlState is the TTL of one registered state at run time (stateBase.ttl; nil: no TTL).
type ttlState struct {
	ms            int64 // TTL in milliseconds
	onRead        bool  // TTLOnReadAndWrite
	returnExpired bool  // TTLReturnExpiredIfNotCleanedUp
	layout        base.TTLLayout
	cfg           TTLConfig

	// Incremental cleanup (TTLCleanup.IncrementalSize).
	incr int
	sc   *stateScan // the cursor; nil: start a new scan at the next access
	keys [][]byte   // the cursor's current batch of composite keys
	pos  int        // next key of keys to check
	lb   [][]byte   // list batches of a checked key
	buf  []byte     // rewritten list of a checked key; expired user keys of a map
	offs []int      // ends of the user keys in buf
}

func layoutOf(k stateKind) base.TTLLayout {
	switch k {
	case kindList:
		return base.TTLList
	case kindMap:
		return base.TTLMap
	}
	return base.TTLValue
}

func newTTLState(c *TTLConfig, kind stateKind) *ttlState {
	ms := c.TTL.Milliseconds()
	if c.TTL == TTLNever {
		ms = math.MaxInt64 // Long.MAX_VALUE ms: base.Expired saturates
	}
	return &ttlState{ms: ms, onRead: c.UpdateType == TTLOnReadAndWrite,
		returnExpired: c.Visibility == TTLReturnExpiredIfNotCleanedUp, layout: layoutOf(kind), cfg: *c,
		incr: c.Cleanup.IncrementalSize}
}

// wallClock is the default Options.Clock: milliseconds since the epoch, read as the wall
// clock at Open plus the monotonic time since — time.Now().UnixMilli() that never goes back
// while the Store is open (a wall clock set back by NTP would revive values cleanup already
// judged expired) and costs one monotonic clock read instead of two clock reads.
func wallClock() func() int64 {
	start := time.Now()
	ns := start.UnixNano()
	return func() int64 { return (ns + int64(time.Since(start))) / int64(time.Millisecond) }
}

// useCoarseClock switches a Store on the default clock to the coarse clock (the engine's
// AcquireCoarseClock, scheduler's clock: one atomic load per read instead of a monotonic clock read, ~1.5 vs ~44 ns on
// the development VM) when its first TTL state registers: TTL states are the only readers of
// the clock on hot paths, and a Store without one holds no ticker. Both clocks are the wall
// clock at a start advanced by the monotonic clock; no TTL decision precedes the switch, so
// nothing was judged by the clock switched from.
func (s *Store) useCoarseClock() {
	if s.coarse && s.unclock == nil {
		s.clock, s.unclock = engine.AcquireCoarseClock()
	}
}

// releaseClock releases the coarse clock's hold (Close, Discard).
func (s *Store) releaseClock() {
	if s.unclock != nil {
		s.unclock()
		s.unclock = nil
	}
}

// setTTLTable gives the engine the TTL of every registered state with one (its compactions
// and checkpoints clean up by it).
func (s *Store) setTTLTable() {
	m := map[uint16]base.TTLState{}
	var ttls []*registration
	for _, r := range s.states {
		if r.ttl == nil {
			continue
		}
		t := r.ttl
		s.useCoarseClock()
		m[r.id] = base.TTLState{TTL: t.ms, Layout: t.layout, Compaction: !t.cfg.Cleanup.NoCompaction,
			Snapshot: t.cfg.Cleanup.FullSnapshot, QueryEvery: t.cfg.Cleanup.QueryTimeAfterNumEntries,
			ReclaimWithin: t.reclaimMs()}
		ttls = append(ttls, r)
	}
	s.e.SetTTL(base.NewTTLTableSegments(s.clock, m, s.ttlSegments(m, ttls)))
}

// ttlSegments returns the key-group ranges of the Store whose ids are their own (those some state
// id alias covers, internal/engine/registry.go "State id aliases"), each with the TTL states (m, by
// their own ids) under their ids there; nil without aliases.
func (s *Store) ttlSegments(m map[uint16]base.TTLState, ttls []*registration) []base.TTLSegment {
	if len(s.aliases) == 0 {
		return nil
	}
	span := int(s.kgSpan) + 1
	aliased := make([]bool, span)
	for _, as := range s.aliases {
		for _, a := range as {
			for kg := int(a.Lo); kg <= int(a.Hi); kg++ {
				aliased[kg-int(s.kgStart)] = true
			}
		}
	}
	at := func(i int) []uint16 { // the ids of the TTL states in key group kgStart+i
		ids := make([]uint16, len(ttls))
		for j, r := range ttls {
			ids[j] = r.id
			if r.ids != nil {
				ids[j] = r.ids[i]
			}
		}
		return ids
	}
	var segs []base.TTLSegment
	var prev []uint16
	for i := range span {
		if !aliased[i] {
			prev = nil
			continue
		}
		ids := at(i)
		kg := uint16(int(s.kgStart) + i)
		if prev != nil && slices.Equal(ids, prev) && segs[len(segs)-1].Hi == kg-1 {
			segs[len(segs)-1].Hi = kg
			continue
		}
		g := base.TTLSegment{Lo: kg, Hi: kg, States: make(map[uint16]base.TTLState, len(ttls))}
		for j, r := range ttls {
			g.States[ids[j]] = m[r.id]
		}
		segs, prev = append(segs, g), ids
	}
	return segs
}

// reclaimMs is the state's sweep bound in milliseconds (TTLCleanup.ReclaimWithin; 0: 2 × TTL,
// saturated), or 0 when it does not sweep.
func (t *ttlState) reclaimMs() int64 {
	c := t.cfg.Cleanup
	switch {
	case c.NoSweep || c.NoCompaction || t.ms == math.MaxInt64: // TTLNever: nothing expires
		return 0
	case c.ReclaimWithin > 0:
		return c.ReclaimWithin.Milliseconds()
	case t.ms > math.MaxInt64/2:
		return math.MaxInt64
	}
	return 2 * t.ms
}

// ttlBatch is the number of keys a step of incremental cleanup's cursor reads.
const ttlBatch = 1024

// ttlAccess runs a state's incremental cleanup, as Flink's TtlIncrementalCleanup on every
// state access: it checks the next IncrementalSize keys of the cursor, removing what has
// expired. Inside the guard (after begin); it leaves the Store's key scratch (kbuf) alone.
func (b *stateBase) ttlAccess() error {
	if b.ttl.incr == 0 {
		return nil
	}
	return b.ttlCleanup()
}

// ttlCleanup is ttlAccess's work when incremental cleanup is on.
func (b *stateBase) ttlCleanup() error {
	t, s := b.ttl, b.s
	restarted := false
	for range t.incr {
		for t.pos == len(t.keys) {
			if t.sc == nil {
				if restarted {
					return nil // fewer keys than IncrementalSize: each checked once
				}
				restarted = true
				sc := s.newScan(b, nil, true)
				t.sc = &sc
			}
			keys, _, err := t.sc.next(ttlBatch)
			if err != nil {
				t.sc.close()
				t.sc, t.keys, t.pos = nil, nil, 0
				return err
			}
			t.keys, t.pos = keys, 0
			if len(keys) == 0 { // the end: start over (at most once per access)
				t.sc.close()
				t.sc = nil
			}
		}
		ck := t.keys[t.pos]
		t.pos++
		if err := b.cleanKey(ck); err != nil {
			return err
		}
	}
	return nil
}

// RecordProcessed tells the Store that the task has processed one record: every state whose
// TTLCleanup has EveryRecord checks its next IncrementalSize keys and removes their expired
// data, as Flink's TtlIncrementalCleanup does for every record with
// runCleanupForEveryRecord. Call it once per record, from the Store's goroutine, e.g. before
// or after the record's state accesses. With no such state it does nothing (and allocates
// nothing); with one it is a write, as any access with incremental cleanup (TTLConfig):
// values and list iterators read before it are no longer valid. Errors: ErrClosed; as a
// state write (ErrMemoryBudget, a background failure), wrapped with the state's name.
func (s *Store) RecordProcessed() error {
	if len(s.perRecord) == 0 {
		if s.closed {
			return ErrClosed
		}
		return nil
	}
	s.enter(opHot) // TTL states only, which have no hot table (hot.go, H6): the tier stays
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	for i := range s.perRecord {
		if err := s.perRecord[i].ttlCleanup(); err != nil {
			return s.perRecord[i].wrap("per-record TTL cleanup", err)
		}
	}
	return nil
}

// cleanKey removes the expired data of the state's composite key ck, as Flink's
// TtlStateSnapshotTransformer/getUnexpiredOrNull does for incremental cleanup: an expired
// value, the expired elements of a list (the list when none is left), the expired entries of
// a map.
func (b *stateBase) cleanKey(ck []byte) error {
	s, t := b.s, b.ttl
	h, _, ok := base.HashCompositeKey(ck)
	if !ok {
		return fmt.Errorf("%w: malformed composite key %x", ErrCorruption, ck)
	}
	now := s.clock()
	switch t.layout {
	case base.TTLValue:
		raw, st := s.e.Get(h, ck)
		if st == failed {
			return s.e.TakeErr()
		}
		if ts, ok := base.TS(raw); st == found && ok && base.Expired(ts, t.ms, now) {
			return s.apply(engine.OpDelete, ck, h, nil, nil)
		}
	case base.TTLList:
		var st status
		t.lb, st, _ = s.e.ListGet(h, ck, t.lb[:0], nil)
		if st == failed {
			return s.e.TakeErr()
		}
		if st != found {
			return nil
		}
		n := 0
		for _, bt := range t.lb {
			e, ok := base.CountExpired(bt, t.ms, now)
			if !ok {
				return fmt.Errorf("%w: list state %q: bad element framing", ErrCorruption, b.name)
			}
			n += e
		}
		if n == 0 {
			return nil
		}
		t.buf = t.buf[:0]
		for _, bt := range t.lb {
			t.buf = base.AppendUnexpired(t.buf, bt, t.ms, now)
		}
		clear(t.lb)
		if len(t.buf) == 0 {
			return s.apply(engine.OpListDelete, ck, h, nil, nil)
		}
		return s.writeList(h, ck, t.buf, true)
	case base.TTLMap:
		t.buf, t.offs = t.buf[:0], t.offs[:0]
		it := s.e.MapIter(h, ck)
		for it.Next() {
			if ts, ok := base.TS(it.Value()); ok && base.Expired(ts, t.ms, now) {
				t.buf = append(t.buf, it.UserKey()...)
				t.offs = append(t.offs, len(t.buf))
			}
		}
		it.Close()
		if err := it.Err(); err != nil {
			return err
		}
		start := 0
		for _, end := range t.offs {
			if err := s.apply(engine.OpMapRemove, ck, h, t.buf[start:end], nil); err != nil {
				return err
			}
			start = end
		}
	}
	return nil
}

// ttlGet reads the value of a TTL value-like state at key (hash h), as Flink's
// AbstractTtlDecorator.getWithTtlCheckAndUpdate: an expired value is removed (and returned,
// copied, only with TTLReturnExpiredIfNotCleanedUp); an unexpired one is returned, rewritten
// with the current time first with TTLOnReadAndWrite. It returns the codec bytes (without the
// timestamp), valid until the next write. Inside the guard.
func (b *stateBase) ttlGet(key []byte, h uint64) ([]byte, status, error) {
	s, t := b.s, b.ttl
	if err := b.ttlAccess(); err != nil {
		return nil, failed, err
	}
	raw, st, _ := b.kvGet(h, key) // through the state's hot table, if it has one (H6)
	if st != found {
		if st == failed {
			return nil, failed, s.e.TakeErr()
		}
		return nil, st, nil
	}
	ts, ok := base.TS(raw)
	if !ok {
		return nil, failed, b.shortTTL(len(raw))
	}
	now := s.clock()
	if base.Expired(ts, t.ms, now) {
		return b.expiredValue(key, h, raw)
	}
	if t.onRead {
		s.vbuf = append(base.AppendTS(s.vbuf[:0], now), raw[base.TSLen:]...)
		if err := s.apply(engine.OpPut, key, h, nil, s.vbuf); err != nil {
			return nil, failed, err
		}
		return s.vbuf[base.TSLen:], found, nil
	}
	return raw[base.TSLen:], found, nil
}

// expiredValue removes the expired value raw of key and returns a copy of its codec bytes
// with TTLReturnExpiredIfNotCleanedUp, or absent (the rare path: it allocates).
//
//go:noinline
func (b *stateBase) expiredValue(key []byte, h uint64, raw []byte) ([]byte, status, error) {
	var keep []byte
	if b.ttl.returnExpired {
		keep = append([]byte{}, raw[base.TSLen:]...)
	}
	// A read's removal goes to the engine, dropping the key's hot entry (Store.apply), as
	// without the tier: a point read never leaves the tier dirty (hot.go, H6, H7).
	if err := b.s.apply(engine.OpDelete, key, h, nil, nil); err != nil {
		return nil, failed, err
	}
	if keep == nil {
		return nil, absent, nil
	}
	return keep, found, nil
}

// shortTTL is the error of a TTL value shorter than its timestamp.
//
//go:noinline
func (b *stateBase) shortTTL(n int) error {
	return fmt.Errorf("%w: %s state %q: a value of %d bytes has no TTL timestamp", ErrCorruption, "TTL", b.name, n)
}
