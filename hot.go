package strata

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/memory"
)

// The hot tier (doc.go, "Hot tier"; Options.HotTierSize): a write-back cache in front of the
// engine, one table per registered state (but those of H6), on the Go heap. It holds engine-level
// bytes — the encoded value of a value, reducing or aggregating state; the framed elements of a
// list; the encoded value of one map entry — keyed by the composite key (and, for a map entry,
// the user key after it), so every state kind shares one mechanism and every codec keeps its
// byte semantics (a value is encoded at the write and decoded at the read, as without the
// tier).
//
// Invariants (the numbers of doc.go's "Hot tier"):
//
//   H1 (one answer). A key's newest write is in its entry when the entry is dirty, else in the
//      engine; a clean entry equals what the engine holds for the key. Point operations of a
//      state with a table (beginHot) read and write the entry; every other API call that
//      enters as opCall (iterators, scans, batches, merges of lists, Clear of a map, every
//      cut, Close) first writes every dirty entry back (syncHot), and every engine write
//      outside the tier goes through Store.apply, which drops the key's entry first — so no
//      clean entry ever goes stale and no other read misses a dirty one. A map iterator's
//      Value looks its user key up in the tier (a put since Next is there).
//   H2 (write-back before every cut). StartCheckpoint, Savepoint, Materialize, WaitBackground,
//      CompactAll and Close enter as opCall, so the engine holds every acknowledged write
//      before their cut; a failed write-back fails the call (hotErr) and keeps the entries
//      dirty. Discard drops the tier.
//   H3 (order within a key). An entry's write-back is the net effect of the calls since the
//      last: a value's last put or delete; a list's replace (OpListDelete or OpListReplace)
//      before the elements appended since, in order; a map entry's last put or remove. A
//      list written back in several pieces advances base after each piece, so a retry after
//      a failure part-way never appends a piece twice.
//   H4 (errors where the call is). A write checks its sizes as the FreshTable would
//      (engine.CheckSizes) and the engine's sticky state (engine.WriteCheck: damage, a full
//      disk's retry window, a failed lazy tail) before it changes the entry; ErrMemoryBudget
//      and I/O failures of a write-back fail the cut or cross-key call that asked for it,
//      with every entry not written still dirty. A point operation never fails for a
//      write-back: with no room it goes to the engine directly.
//   H5 (inside the budget). The tier is charged to the budget (memory.PurposeHotTier) in
//      quanta, for its tables' arrays (hotSlotBytes a slot: a table grows only when the
//      charge for its larger arrays is granted) and for what its entries hold on the heap
//      outside them (a long key, a value's capacity). At HotTierSize (or when the
//      budget refuses the quantum) the tier drops its clean entries when they hold at least
//      a quarter of its bytes (a clean entry is a copy of what the engine holds: dropping it
//      costs no write, and the dirty entries stay for the next cut, their changes still
//      coalescing); else it writes everything back and drops every entry. A key that still
//      finds no room is read or written in the engine directly.
//   H6 (TTL). A value, reducing or aggregating state with a TTL has a table when it has the
//      defaults TTLOnCreateAndWrite and TTLNeverReturnExpired and no incremental cleanup: its
//      entries hold the engine's bytes, timestamp first, and every read decides expiry on
//      them at the clock's now, as it would on the engine's. A read that finds its value
//      expired removes it in the engine (Store.apply, which drops the entry), as without the
//      tier, so reads never leave the tier dirty (H7). Cleanup below (compaction filters, the
//      sweep) only removes values that have expired by the clock, which never goes back, so
//      a clean entry whose value cleanup removed below has expired too (the one relaxation of
//      H1 for these tables); a read that finds a clean entry expired drops it and reads the
//      engine, so reads (and MergeNamespaces, which folds what it reads) answer as without
//      the tier, expired-but-not-cleaned-up values included. With
//      TTLReturnExpiredIfNotCleanedUp such an entry would return a value the engine no longer has; TTLOnReadAndWrite makes
//      every read a write; incremental cleanup reads the engine beside the tier: those
//      states, and list and map states with a TTL (a timestamp per element or entry), have
//      no table.
//   H7 (aliasing). A value read from an entry (Bytes codec) aliases the entry's bytes: valid
//      until the next write to the Store, as any value read. A point read never writes to the
//      engine (a full tier serves it uncached; a list's appended elements are read after the
//      engine's list), so values read before it stay valid — but a TTL read that removes an
//      expired value, which is a write with or without the tier (TTLConfig, H6). A call that
//      reads across keys does write the tier back first: for the values read before it, it
//      is a write.
//   H8 (net no-ops). An entry marked none knows the tiers below hold no value for its key (its
//      miss read absent, or its last write-back was a delete; nothing else writes the key
//      below without dropping the entry first, H1). A delete of such a key is no change: the
//      entry leaves the tier, clean, and a key made and cleared between two cuts (a window,
//      a day's aggregate) never reaches the engine or the changelog (HotTierStats.Elided). A
//      write-back leaves entries that hold nothing (an absent value or map entry, an empty
//      list) out of the tier: they would answer what the engine answers, at the cost of room.
//   H9 (a table earns its place). A table counts the entries it made (made: hotInsert) and
//      the lookups that found an entry made by an earlier call (found: table lookups, not the
//      last-entry shortcut a read-modify-write's write takes). Without the tier a point
//      operation costs an engine read or write; with it a hit costs neither, a write-back
//      costs the one write, and a made entry costs an insert on top of the engine's read or
//      write — so a table pays when its entries are found again. A table that made
//      hotJudgeEvery (hotTier.judgeEvery) entries since its last judgement is judged at the
//      enter of a call that writes the tier back (enterSync: a cut, or a call that reads
//      across keys), once the write-back left the tier clean — never inside a point
//      operation, whose entry must stay where it is. found >= made: it stays, both counts
//      restart; else most entries were never found again (keys written once between cuts,
//      keys read once, or a state read across keys after each write, as a ranking's map
//      iterated after each put: the iteration writes the entry back and the next put makes
//      another), so the table is turned off for the Store's life: its entries, all clean,
//      are dropped, and its state's point operations go to the engine, as a state without a
//      table (stateBase.hotTab; HotTierStats.TablesOff). Answers do not change (H1 holds for
//      an empty table), only where the work happens; values read from its entries before
//      the call end there, as H7 says of every call that writes the tier back.
//   Tables by id. After a scale-in restore one state id may name different states in
//   different key groups (internal/engine/registry.go), so byID lists every table an id may
//   name, and an invalidation looks in each.

// hotKind is what a hot table's entries hold.
type hotKind uint8

const (
	hotKV   hotKind = iota // value, reducing, aggregating: the encoded value
	hotList                // the framed elements (the whole list when known, else the appended ones)
	hotMap                 // one map entry: key is composite key + user key
)

// hotSlotBytes is what one slot of a table's arrays takes: its 128-byte entry and its tag.
// The tier charges its tables' arrays whole (arrayBytes), and an entry only for
// what it holds on the heap outside them (hotEntry.bytes).
const hotSlotBytes = int64(unsafe.Sizeof(hotEntry{})) + 1

// hotInline is the bytes of an entry's first cache line that hold its key and then its value
// inline; hotInlineKey the longest key held there. A key or value that fits takes no
// allocation of its own, and a hit on an entry whose key and value both fit reads that one
// line (hotEntry).
const (
	hotInline    = 52
	hotInlineKey = 40
)

// hotQuantum is the step in which the tier charges and refunds the budget (hotTier.step: the
// bound itself when it is smaller, so that a small tier can hold entries).
const hotQuantum = 256 << 10

// hotListMax is the largest list (framed bytes) a Get makes known in its entry; a longer list
// is read from the engine at each Get, as without the tier.
const hotListMax = 64 << 10

// hotEntry is one cached key. Its key and value are inline in buf when they fit (kl, vo, vl),
// else on the heap (hkey, hval): key() and value() give them either way.
type hotEntry struct {
	// Cache line 0: all a hit reads when key and value are inline — the key it compares, the
	// flags it tests, the value it returns or changes in place.
	kl      uint8 // bytes of the key in buf[0:]; hotOut: the key is hkey
	vo, vl  uint8 // the value is buf[vo:vo+vl]; vl hotOut: the value is hval
	present bool  // KV, map: a value is present (false: absent or deleted)
	dirty   bool
	listed  bool   // in its table's dirty list (it may be clean again: written back alone)
	known   bool   // list: the value is the whole list
	replace bool   // list: the write-back replaces the list with the value (OpListDelete when empty)
	none    bool   // KV, map: the tiers below hold no value for the key (H8)
	klen    uint16 // length of the composite key within the key (a map entry's user key follows)
	buf     [hotInline]byte
	// Cache line 1: what write-backs, deletes and accounting use.
	h    uint64 // composite key hash (the table hash: hotTable.hashOf)
	hkey string // the key when it does not fit inline: composite key, then a map entry's user key
	hval []byte // the value when it does not fit in the rest of buf (its capacity charged: vcharged)
	// base is, for a list, the bytes of the value the engine holds (the rest is to append).
	base int32
	// vcharged is the bytes of hval's heap capacity charged (0 while the value is inline).
	vcharged int32
	tab      *hotTable // the table that holds it; nil: none (a deleted slot, or a copy a rehash left)
}

// hotOut in hotEntry.kl or vl: the key or value is on the heap (hkey, hval).
const hotOut = 0xFF

// The entry's layout keeps a hit on inline bytes within its first cache line, and the entry
// two lines, when the entry starts on a line: a table's entry array of 256 slots or more
// (above 32 KiB) is a large object, which Go's allocator starts on a page. A smaller one (64,
// 128 or 192 slots) holds pointers and gets Go's 8-byte malloc header in front (Go 1.22 on):
// its entries start at 8 mod 64 and span three lines (a small table, mostly in cache).
var (
	_ = [1]struct{}{}[unsafe.Offsetof(hotEntry{}.h)-64]
	_ = [1]struct{}{}[unsafe.Sizeof(hotEntry{})-128]
)

// is reports whether the entry is key's: composite key of length klen, then a map entry's
// user key. The length matters: a namespace is the composite key's unframed tail, so
// (namespace "a", user key "b") and (namespace "ab", user key "") have the same bytes.
func (e *hotEntry) is(key []byte, klen int) bool {
	return int(e.klen) == klen && e.key() == string(key)
}

// key returns the entry's key: composite key, then a map entry's user key.
func (e *hotEntry) key() string {
	if e.kl != hotOut {
		return unsafe.String(&e.buf[0], int(e.kl))
	}
	return e.hkey
}

// value returns the entry's value; its capacity is the room it has without growing (the rest
// of buf when inline). It aliases the entry: valid until the entry's next change.
func (e *hotEntry) value() []byte {
	if e.vl != hotOut {
		return e.buf[e.vo : e.vo+e.vl : hotInline]
	}
	return e.hval
}

// setKey makes key the key of e, new (no value yet): inline when it fits.
func (e *hotEntry) setKey(key []byte) {
	if len(key) <= hotInlineKey {
		copy(e.buf[:], key)
		e.kl, e.vo = uint8(len(key)), uint8(len(key))
	} else {
		e.kl, e.hkey = hotOut, string(key)
	}
}

// bytes returns the bytes the entry is charged beyond its slot (H5): a key on the heap, the
// capacity of a value on the heap.
func (e *hotEntry) bytes() int64 {
	return hotCharge(len(e.key())) + int64(e.vcharged)
}

// hotCharge is what an entry with a key of n bytes is charged before its value (H5): the key
// when it is too long for the entry's inline room (setKey), else nothing.
func hotCharge(n int) int64 {
	if n > hotInlineKey {
		return int64(n)
	}
	return 0
}

// setLen sets the length of the entry's value to n, within its capacity (value).
func (e *hotEntry) setLen(n int) {
	if e.vl != hotOut {
		e.vl = uint8(n)
	} else {
		e.hval = e.hval[:n]
	}
}

// setHeap makes v, whose capacity c bytes are charged, the entry's value.
func (e *hotEntry) setHeap(v []byte, c int32) {
	e.hval, e.vl, e.vcharged = v, hotOut, c
}

// hotTable is the hot tier of one state: an open-addressing table of its entries, probed
// linearly by the hash the tiers index the key by (the composite key's; for a map entry mixed
// with the user key's). The entries sit in the table's own array, one 128-byte slot each, so
// a lookup costs a 1-byte tag and the entry (key and small value inline): one dependent load
// from memory, the tags of a table being few and dense enough to stay in cache. (A slot
// pointing to an entry on the heap cost two, about twice the time once the entries are out
// of cache: BenchmarkHotReduce keys=256k.)
//
// A slot's tag says it is empty (0), deleted (hotTomb) or full (hotTag of its table hash:
// 0x80 and the hash's top 7 bits), so a probe compares keys only when the tags match. The
// table is at most ⅞ full, deleted slots included (add rehashes). An entry knows the table
// that holds it (tab); a deleted slot's entry is zero (tab nil).
//
// Entries move when the table rehashes (add, past the ⅞ bound; hotShrink, when a full tier
// wants room: hotRoom, and a read's hotInsert): a pointer to an entry is good until the next
// insert into any table or the next drop. The tier's own pointers follow (the dirty list is
// rebuilt by rehash, hotInsert sets last), and the callers hold an entry only within one
// point operation, across no insert (a drop leaves the entry they hold zero, or a copy with
// no table, neither dirty: they go to the engine, H5). A deleted slot may be taken by
// another key before the next write-back: its place in the dirty list then names
// the new entry, which the write-back passes once as dirty (written) and once as clean
// (skipped).
type hotTable struct {
	kind  hotKind
	tags  []uint8    // per slot: 0 empty, hotTomb deleted, else hotTag(table hash)
	ents  []hotEntry // per slot: the entry of a full slot; zero otherwise
	n     int        // live entries
	used  int        // slots not empty (live and deleted)
	dirty []*hotEntry
	ttl   *ttlState // the state's TTL (H6); nil: none
	found int64     // lookups (hotFind) that found an entry since the last judgement (H9)
	made  int64     // entries made (hotInsert) since the last judgement (H9)
	off   bool      // turned off (H9): empty for good, its state goes to the engine
}

// hotJudgeEvery is the entries a table makes between two judgements of its worth (H9).
const hotJudgeEvery = 1 << 16

// hotTomb is the tag of a deleted slot.
const hotTomb = 1

// hotTag is the tag of a full slot whose entry has table hash hx.
func hotTag(hx uint64) uint8 { return uint8(hx>>57) | 0x80 }

// find returns the entry of key (composite key of length klen, then a map entry's user key)
// with table hash hx, or nil.
func (t *hotTable) find(key []byte, klen int, hx uint64) *hotEntry {
	if t.n == 0 {
		return nil
	}
	size := len(t.tags)
	tg := hotTag(hx)
	for i := hotHome(hx, size); ; i = hotNext(i, size) {
		switch t.tags[i] {
		case 0:
			return nil
		case tg:
			if e := &t.ents[i]; e.is(key, klen) {
				return e
			}
		}
	}
}

// live returns the entry in slot i, or nil when the slot is not full.
func (t *hotTable) live(i int) *hotEntry {
	if t.tags[i] < 0x80 {
		return nil
	}
	return &t.ents[i]
}

// slot returns the slot of e, an entry of t's array.
func (t *hotTable) slot(e *hotEntry) int { return slotIn(t.ents, e) }

// slotIn returns the index of e, an element of ents.
func slotIn(ents []hotEntry, e *hotEntry) int {
	return int((uintptr(unsafe.Pointer(e)) - uintptr(unsafe.Pointer(unsafe.SliceData(ents)))) / unsafe.Sizeof(hotEntry{}))
}

// hashOf returns the table hash of entry e of t: its composite key's, mixed with its user
// key's for a map entry (mapHash).
func (t *hotTable) hashOf(e *hotEntry) uint64 {
	if t.kind == hotMap {
		return mapHash(e.h, bytesOf(e.key())[e.klen:])
	}
	return e.h
}

// nextSize returns the slots t has after its next add: its size, or the size add rehashes
// to when the add would pass the ⅞ bound (deleted slots included). When its live entries
// fill it, it grows to hotSizeFor them (about 1.3×); when deleted slots do (keys made and
// deleted, as a window's; entries dropped), it is rebuilt at its size or at least half
// empty, whichever is larger. It never shrinks here: a table that shrank would grow again
// through every step, allocating and copying its arrays each time (hotShrink shrinks, when
// the room is wanted).
func (t *hotTable) nextSize() int {
	if (t.used+1)*8 <= len(t.tags)*7 {
		return len(t.tags)
	}
	if size := hotSizeFor(t.n); size > len(t.tags) {
		return size
	}
	return max(len(t.tags), ((t.n+1)*2+63)&^63)
}

// hotSizeFor returns the slots of a table rebuilt for n live entries and one more: 1.5(n+1)
// rounded up to a multiple of 64 (at least 64), so at most ⅔ full after it. A table grows by
// about 1.3× at the ⅞ bound, not 2× as a power of two would: its arrays hold 147–194 bytes a
// live entry, and one table can take most of the tier's bound, not less than half of it.
func hotSizeFor(n int) int {
	return ((n+1)*3/2 + 63) &^ 63
}

// hotHome returns the first slot a key with table hash hx probes in a table of size slots:
// the low 32 bits scaled to the size (the tag takes the top bits).
func hotHome(hx uint64, size int) int {
	return int(uint64(uint32(hx)) * uint64(size) >> 32)
}

// hotNext returns the slot after i in a table of size slots, wrapping.
func hotNext(i, size int) int {
	if i++; i == size {
		return 0
	}
	return i
}

// arrayBytes returns the bytes of a table's arrays at size slots.
func arrayBytes(size int) int64 { return int64(size) * hotSlotBytes }

// add takes a slot for a new entry with table hash hx (no entry of t has its key) and returns
// the entry, zero but for tab; when the table rehashes first (nextSize), pointers to its
// other entries end here. The caller charged the arrays' change (hotInsert).
func (t *hotTable) add(hx uint64) *hotEntry {
	if size := t.nextSize(); size != len(t.tags) || (t.used+1)*8 > len(t.tags)*7 {
		t.rehash(size) // also at the same size, to clear deleted slots
	}
	size := len(t.tags)
	for i := hotHome(hx, size); ; i = hotNext(i, size) {
		if tg := t.tags[i]; tg < 0x80 {
			if tg == 0 {
				t.used++
			}
			t.tags[i] = hotTag(hx)
			t.n++
			e := &t.ents[i]
			e.tab = t
			return e
		}
	}
}

// del removes e (present), leaving its slot deleted and its entry zero.
func (t *hotTable) del(e *hotEntry) {
	t.tags[t.slot(e)] = hotTomb
	*e = hotEntry{}
	t.n--
}

// rehash rebuilds the table at size slots (more than the live entries: the caller's
// nextSize). The dirty list is rebuilt in its order, naming the moved entries (each
// once).
func (t *hotTable) rehash(size int) {
	oldTags, oldEnts := t.tags, t.ents
	t.tags, t.ents = make([]uint8, size), make([]hotEntry, size)
	t.used, t.n = 0, 0
	var to []int32 // old slot -> new slot + 1, for the dirty list
	if len(t.dirty) > 0 {
		to = make([]int32, len(oldTags))
	}
	for j, tg := range oldTags {
		if tg < 0x80 {
			continue
		}
		e := &oldEnts[j]
		for i := hotHome(t.hashOf(e), size); ; i = hotNext(i, size) {
			if t.tags[i] == 0 {
				t.tags[i] = tg
				t.ents[i] = *e
				t.ents[i].tab = t
				e.tab = nil // a stale pointer to the old copy finds no table (hotFind, hotDelete)
				t.used++
				t.n++
				if to != nil {
					to[j] = int32(i) + 1
				}
				break
			}
		}
	}
	if to == nil {
		return
	}
	dirty := t.dirty[:0]
	for _, e := range t.dirty {
		j := slotIn(oldEnts, e)
		if i := to[j]; i > 0 && t.ents[i-1].listed {
			dirty = append(dirty, &t.ents[i-1])
			to[j] = 0 // a slot named twice (taken again after a delete): once
		}
	}
	clear(t.dirty[len(dirty):])
	t.dirty = dirty
}

// reset drops every entry and the arrays with them (the next add makes the smallest): the
// caller takes arrayBytes(len(t.tags)) off the tier's bytes first.
func (t *hotTable) reset() {
	clear(t.ents) // stale pointers to its entries find no table
	t.tags, t.ents, t.dirty = nil, nil, nil
	t.n, t.used = 0, 0
}

// mapHash is the table hash of map entry uk of a map with composite hash hm.
func mapHash(hm uint64, uk []byte) uint64 {
	return hm ^ base.HashUserKey(uk)*0x9E3779B97F4A7C15
}

// hotTier is the Store's hot tier (owner goroutine only).
type hotTier struct {
	limit   int64 // Options.HotTierSize; 0: off
	tabs    []*hotTable
	byID    [][]*hotTable // by state id, aliases included: after a scale-in restore one id may name different states in different key groups
	dirty   int           // dirty entries in all tables
	bytes   int64         // its tables' arrays and what the entries hold outside them (H5)
	charged int64         // charged to the budget (a multiple of step())
	err     error         // a write-back that failed at enter: the current call fails with it
	kbuf    []byte        // map entry key scratch
	last    *hotEntry     // the entry the last point operation found or made: a read-modify-write finds it again without a lookup
	// judgeEvery is the entries a table makes between two judgements (H9): hotJudgeEvery;
	// tests set less.
	judgeEvery int64
	stats      HotTierStats
}

// newHotTable returns the table of a state of kind k registered under ids, or nil when the
// tier is off, the state's TTL ts rules a table out (H6) or kind has no table.
func (s *Store) newHotTable(k stateKind, ts *ttlState, ids ...uint16) *hotTable {
	if s.hot.limit <= 0 || ts != nil && (ts.layout != base.TTLValue || ts.onRead || ts.returnExpired || ts.incr > 0) {
		return nil
	}
	t := &hotTable{ttl: ts} // no arrays until its first entry (add)
	switch k {
	case kindValue, kindReducing, kindAggregating:
		t.kind = hotKV
	case kindList:
		t.kind = hotList
	case kindMap:
		t.kind = hotMap
	default:
		return nil
	}
	s.hot.tabs = append(s.hot.tabs, t)
	for _, id := range ids {
		for int(id) >= len(s.hot.byID) {
			s.hot.byID = append(s.hot.byID, nil)
		}
		if !slices.Contains(s.hot.byID[id], t) {
			s.hot.byID[id] = append(s.hot.byID[id], t)
		}
	}
	return t
}

// bytesOf returns the bytes of string k without copying (read-only).
func bytesOf(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }

// step returns the step in which the tier charges and refunds the budget: hotQuantum, or
// the bound when it is smaller (at least 1).
func (h *hotTier) step() int64 {
	return max(1, min(hotQuantum, h.limit))
}

// hotGrow adds n estimated bytes, charging the budget a quantum at a time; false when the
// tier's bound or the budget refuses (nothing added).
func (s *Store) hotGrow(n int64) bool {
	h := &s.hot
	if h.bytes+n <= h.charged {
		h.bytes += n
		return true
	}
	q := h.step()
	need := (h.bytes + n - h.charged + q - 1) / q * q
	if h.charged+need > h.limit {
		return false
	}
	if s.budget.Charge(need, memory.PurposeHotTier) != nil {
		return false
	}
	h.charged += need
	h.bytes += n
	return true
}

// hotRoom makes room for need() more bytes (asked again after each drop, which changes it):
// when the tier is full it drops its clean entries, or when they are too few it writes
// everything back and drops every entry (H5). false with a nil error: no room even then.
// Entries the caller holds may be dropped, and the others moved (hotShrink).
func (s *Store) hotRoom(need func() int64) (bool, error) {
	if s.hotGrow(need()) {
		return true, nil
	}
	if s.hot.bytes == 0 { // nothing to drop (a tier too small for a table's first arrays)
		return false, nil
	}
	if s.hotShrinkIdle() && s.hotGrow(need()) {
		return true, nil
	}
	if s.hotDropClean() { // the asking table's deleted slots may be room enough; else shrink
		if s.hotGrow(need()) {
			return true, nil
		}
		for _, t := range s.hot.tabs {
			s.hotShrink(t)
		}
		if s.hotGrow(need()) {
			return true, nil
		}
	}
	if err := s.hotDropAll(); err != nil {
		return false, err
	}
	return s.hotGrow(need()), nil
}

// hotShrinkIdle shrinks every table under a quarter full (hotShrink: a table whose keys were
// deleted keeps its arrays until then) and reports whether one shrank: room made without
// dropping an entry or writing anything, so reads may make it too (H7). Entries move.
func (s *Store) hotShrinkIdle() bool {
	shrank := false
	for _, t := range s.hot.tabs {
		if n := len(t.tags); t.n*4 < n {
			s.hotShrink(t)
			shrank = shrank || len(t.tags) < n
		}
	}
	return shrank
}

// hotDropAll writes every dirty entry back, then drops every entry and refunds the budget.
func (s *Store) hotDropAll() error {
	if err := s.syncHot(); err != nil {
		return err
	}
	s.hotDiscard()
	s.hot.stats.Drops++
	return nil
}

// hotDropClean drops every clean entry of the tier when they hold at least a quarter of its
// entries' bytes (each its slot and what it holds on the heap), and reports whether it did
// (H5): a full tier's cheap way out, with no write-back. The arrays keep their size (hotRoom
// shrinks them when the room is wanted elsewhere). Entries the caller holds may be dropped.
func (s *Store) hotDropClean() bool {
	h := &s.hot
	var clean, all int64
	for _, t := range h.tabs {
		for i := range t.tags {
			if e := t.live(i); e != nil {
				b := hotSlotBytes + e.bytes()
				all += b
				if !e.dirty {
					clean += b
				}
			}
		}
	}
	if clean == 0 || clean*4 < all {
		return false
	}
	for _, t := range h.tabs {
		for i := range t.tags {
			if e := t.live(i); e != nil && !e.dirty {
				s.hotDelete(t, e) // leaves a deleted slot here: the loop goes on
			}
		}
	}
	h.stats.CleanDrops++
	s.hotTrim()
	return true
}

// hotShrink rebuilds t at twice the size its live entries need when that is smaller (a third
// full: room to grow again before its next rebuild), or gives its arrays back when it holds
// none, taking the difference off the tier's bytes (H5). Its entries move.
func (s *Store) hotShrink(t *hotTable) {
	if t.n == 0 {
		s.hot.bytes -= arrayBytes(len(t.tags))
		t.reset()
		return
	}
	if size := hotSizeFor(2 * t.n); size < len(t.tags) {
		s.hot.bytes -= arrayBytes(len(t.tags)) - arrayBytes(size)
		t.rehash(size)
	}
}

// hotDiscard drops every entry without writing it back (Discard; hotDropAll after its
// write-back) and refunds the budget.
func (s *Store) hotDiscard() {
	h := &s.hot
	for _, t := range h.tabs {
		t.reset()
	}
	h.dirty, h.last = 0, nil
	if h.charged > 0 {
		s.budget.Refund(h.charged, memory.PurposeHotTier)
	}
	h.bytes, h.charged = 0, 0
}

// hotInsert adds an entry for key (composite key of length klen, hash h, table hash hx) to t,
// or returns nil when the tier has no room for it (H5): the caller then reads or writes the
// key in the engine directly, which is right since the key has no entry — also when making
// room failed because a write-back failed (the other entries stay dirty, the next cut retries
// them). For a write it may drop the clean entries, or write back and drop every entry,
// first (engine bytes read before it are then no longer valid); for a read (write false) it
// never writes: it may shrink the tables under a quarter full (hotShrinkIdle), else a full
// tier gives nil. Entries of every table may move.
func (s *Store) hotInsert(t *hotTable, key []byte, h, hx uint64, klen int, write bool) *hotEntry {
	if klen > math.MaxUint16 { // a read of a key no write accepts (engine.CheckSizes): not cached
		return nil
	}
	// The key's heap bytes, and the arrays' change when the add rehashes t (H5).
	need := func() int64 { return hotCharge(len(key)) + arrayBytes(t.nextSize()) - arrayBytes(len(t.tags)) }
	if !write { // a read never writes (H7): it may shrink idle tables, else no room, no entry
		if !s.hotGrow(need()) && !(s.hotShrinkIdle() && s.hotGrow(need())) {
			return nil
		}
	} else {
		ok, err := s.hotRoom(need)
		if err != nil {
			s.hot.stats.SyncFailures++
		}
		if !ok || err != nil {
			return nil
		}
	}
	e := t.add(hx)
	e.h, e.klen = h, uint16(klen)
	e.setKey(key)
	t.made++
	s.hot.last = e
	return e
}

// hotFind returns t's entry for key (composite key of length klen, then a map entry's user
// key), or nil: the last entry found or made when it is key's in t (a read-modify-write: Get
// then Put, Add's read then write; an alias table of the same id may hold the same key), else
// a lookup.
func (s *Store) hotFind(t *hotTable, key []byte, klen int, hx uint64) *hotEntry {
	if e := s.hot.last; e != nil && e.tab == t && e.is(key, klen) {
		return e // the same call's, or the last call's, key: not counted as found (H9)
	}
	e := t.find(key, klen, hx)
	if e != nil {
		s.hot.last = e
		t.found++
	}
	return e
}

// hotSet makes e's value v (copied; appended to its value with appendTo), charging the
// growth of its capacity. false when the tier has no room: for a write it then dropped the
// clean entries, e with them, or wrote everything back and dropped every entry, e too (or,
// when that write-back failed, dropped e alone) (H5), for a read it dropped e alone (clean); a dirty e stays, for the caller; the caller
// goes to the engine directly (H5).
func (s *Store) hotSet(t *hotTable, e *hotEntry, v []byte, appendTo, write bool) bool {
	cur := e.value()
	n := len(v)
	if appendTo {
		n += len(cur)
	}
	if n > cap(cur) {
		c := n
		if appendTo {
			c = max(n, 2*cap(cur))
		}
		if !s.hotGrow(int64(c) - int64(e.vcharged)) {
			if e.dirty {
				return false // the caller writes e back first (hotListWrite) or reads around it
			}
			if !write { // a read never writes (H7): the clean entry goes
				s.hotDelete(t, e)
				return false
			}
			if s.hotDropClean() { // e, clean, with them
				return false
			}
			if err := s.hotDropAll(); err != nil {
				s.hot.stats.SyncFailures++
				s.hotDelete(t, e)
			}
			return false
		}
		nv := make([]byte, 0, c)
		if appendTo {
			nv = append(nv, cur...)
		}
		e.setHeap(append(nv, v...), int32(c))
		return true
	}
	if !appendTo {
		cur = cur[:0]
	}
	e.setLen(len(append(cur, v...))) // within cur's capacity: in place
	return true
}

// hotDelete drops clean entry e from t.
func (s *Store) hotDelete(t *hotTable, e *hotEntry) {
	if e.tab != t {
		return
	}
	s.hot.bytes -= e.bytes()
	if s.hot.last == e {
		s.hot.last = nil
	}
	t.del(e) // a dirty list may still name its slot (H2 passes it: not dirty)
}

// hotExpired reports whether the value of entry e of TTL table t has expired at the clock's
// now (a value too short for its timestamp counts as expired: the engine's read reports it).
func (s *Store) hotExpired(t *hotTable, e *hotEntry) bool {
	ts, ok := base.TS(e.value())
	return !ok || base.Expired(ts, t.ttl.ms, s.clock())
}

// markDirty records that e differs from the engine.
func (s *Store) markDirty(t *hotTable, e *hotEntry) {
	if !e.dirty {
		e.dirty = true
		s.hot.dirty++
	}
	if !e.listed {
		e.listed = true
		t.dirty = append(t.dirty, e)
	}
}

// writeOne writes dirty entry e of t back alone; it stays in the dirty list, clean, until the
// next syncHot passes it.
func (s *Store) writeOne(t *hotTable, e *hotEntry) error {
	if err := s.writeBack(t, e); err != nil {
		return err
	}
	e.dirty = false
	s.hot.dirty--
	s.hot.stats.WrittenBack++
	return nil
}

// syncHot writes every dirty entry back to the engine, table by table in the order the
// entries became dirty (H2, H3). On error the entries not written stay dirty.
func (s *Store) syncHot() error {
	h := &s.hot
	if h.dirty == 0 {
		return nil
	}
	h.stats.Syncs++
	for _, t := range h.tabs {
		for i, e := range t.dirty {
			if !e.dirty {
				e.listed = false
				continue
			}
			if err := s.writeOne(t, e); err != nil {
				n := copy(t.dirty, t.dirty[i:])
				clear(t.dirty[n:])
				t.dirty = t.dirty[:n]
				return err
			}
			e.listed = false
			if holdsNothing(t, e) { // H8
				s.hotDelete(t, e)
			}
		}
		clear(t.dirty)
		t.dirty = t.dirty[:0]
	}
	s.hotTrim()
	return nil
}

// hotJudgeAll judges every table that made at least judgeEvery entries since its last
// judgement (H9). Only at the enter of a call, after a write-back that left the tier clean.
func (s *Store) hotJudgeAll() {
	for _, t := range s.hot.tabs {
		if t.made >= s.hot.judgeEvery {
			s.hotJudge(t)
		}
	}
}

// hotJudge judges table t, clean (H9): it stays when its lookups found at least as many
// entries as it made since the last judgement, else it is turned off, its entries dropped and
// its arrays given back.
func (s *Store) hotJudge(t *hotTable) {
	if t.found >= t.made {
		t.found, t.made = 0, 0
		return
	}
	for i := range t.tags {
		if e := t.live(i); e != nil { // clean: the write-back just ended
			s.hotDelete(t, e) // leaves a deleted slot here: the loop goes on
		}
	}
	s.hot.bytes -= arrayBytes(len(t.tags))
	t.reset() // no arrays
	t.off, t.found, t.made = true, 0, 0
	s.hot.stats.TablesOff++
	s.hotTrim()
}

// hotTrim refunds what the tier holds of the budget beyond what it still takes on the heap —
// its bytes (arrays and what entries hold outside them) and its dirty lists — and one spare
// quantum: entries leave at write-backs (H8) and deletes, and the budget should not keep
// counting their room (H5).
func (s *Store) hotTrim() {
	h := &s.hot
	held := h.bytes
	for _, t := range h.tabs {
		held += int64(cap(t.dirty)) * 8
	}
	q := h.step()
	keep := (held + 2*q - 1) / q * q
	if h.charged > keep {
		s.budget.Refund(h.charged-keep, memory.PurposeHotTier)
		h.charged = keep
	}
}

// holdsNothing reports whether clean entry e of t answers only what the engine would without
// it: an absent value or map entry, an empty list (H8).
func holdsNothing(t *hotTable, e *hotEntry) bool {
	if t.kind == hotList {
		return e.vl == 0 || e.vl == hotOut && len(e.hval) == 0
	}
	return !e.present
}

// writeBack applies dirty entry e of t to the engine as its net change (H3).
func (s *Store) writeBack(t *hotTable, e *hotEntry) error {
	ek := bytesOf(e.key())
	key, val := ek[:e.klen], e.value()
	switch t.kind {
	case hotKV, hotMap:
		var err error
		switch {
		case t.kind == hotKV && e.present:
			err = s.applyRaw(engine.OpPut, key, e.h, nil, val)
		case t.kind == hotKV:
			err = s.applyRaw(engine.OpDelete, key, e.h, nil, nil)
		case e.present:
			err = s.applyRaw(engine.OpMapPut, key, e.h, ek[e.klen:], val)
		default:
			err = s.applyRaw(engine.OpMapRemove, key, e.h, ek[e.klen:], nil)
		}
		if err == nil {
			e.none = !e.present
		}
		return err
	}
	max := s.maxBatch()
	if e.replace {
		if len(val) == 0 {
			if err := s.applyRaw(engine.OpListDelete, key, e.h, nil, nil); err != nil {
				return err
			}
		} else {
			n := engine.ListPiece(val, max)
			if err := s.applyRaw(engine.OpListReplace, key, e.h, nil, val[:n]); err != nil {
				return err
			}
			e.base = int32(n)
		}
		e.replace = false
	}
	for int(e.base) < len(val) {
		rest := val[e.base:]
		n := engine.ListPiece(rest, max)
		if err := s.applyRaw(engine.OpListAppend, key, e.h, nil, rest[:n]); err != nil {
			return err
		}
		e.base += int32(n)
	}
	if !e.known {
		e.setLen(0)
		e.base = 0
	}
	return nil
}

// hotInvalidate drops the entry an engine write outside the tier is about to change (H1):
// the key's, the map entry's, or for OpMapClear every entry of the map. A dirty entry (none
// should be: the call synced at enter) is written back first, keeping its order before op.
func (s *Store) hotInvalidate(kind engine.OpKind, key []byte, h uint64, uk []byte) error {
	if len(key) < 4 {
		return nil
	}
	id := int(key[2])<<8 | int(key[3])
	if id >= len(s.hot.byID) {
		return nil
	}
	for _, t := range s.hot.byID[id] {
		if err := s.hotInvalidateIn(t, kind, key, h, uk); err != nil {
			return err
		}
	}
	return nil
}

// hotInvalidateIn is hotInvalidate in table t (a table the key's state id may name).
func (s *Store) hotInvalidateIn(t *hotTable, kind engine.OpKind, key []byte, h uint64, uk []byte) error {
	if t.n == 0 {
		return nil
	}
	if kind == engine.OpMapClear {
		for i := range t.tags {
			e := t.live(i) // a delete below leaves a deleted slot here: the loop goes on
			if e != nil && int(e.klen) == len(key) && bytes.Equal(bytesOf(e.key())[:e.klen], key) {
				if e.dirty {
					if err := s.writeOne(t, e); err != nil {
						return err
					}
				}
				s.hotDelete(t, e)
			}
		}
		return nil
	}
	ek, hx := key, h
	if kind == engine.OpMapPut || kind == engine.OpMapRemove {
		s.hot.kbuf = append(append(s.hot.kbuf[:0], key...), uk...)
		ek, hx = s.hot.kbuf, mapHash(h, uk)
	}
	e := s.hotFind(t, ek, len(key), hx)
	if e == nil {
		return nil
	}
	if e.dirty {
		if err := s.writeOne(t, e); err != nil {
			return err
		}
	}
	s.hotDelete(t, e)
	return nil
}

// hotGet is a value, reducing or aggregating state's point read through its table t (H1): the
// entry's value, or the engine's, cached clean. Inside beginHot; the bytes are valid until
// the next write.
func (s *Store) hotGet(t *hotTable, h uint64, key []byte) ([]byte, status) {
	if e := s.hotFind(t, key, len(key), h); e != nil {
		if !e.present {
			s.hot.stats.Hits++
			return nil, absent
		}
		if t.ttl == nil || e.dirty || !s.hotExpired(t, e) {
			s.hot.stats.Hits++
			return e.value(), found
		}
		// H6: a clean entry whose value has expired may hold what cleanup already removed
		// below; the engine answers (what it still holds, or absent), as without the tier.
		s.hotDelete(t, e)
	}
	s.hot.stats.Misses++
	e := s.hotInsert(t, key, h, h, len(key), false)
	v, st := s.e.Get(h, key)
	if e == nil {
		return v, st
	}
	switch st {
	case found:
		if !s.hotSet(t, e, v, false, false) {
			return v, st // no room: uncached (nothing was written, v is valid)
		}
		e.present = true
		return e.value(), found
	case failed:
		s.hotDelete(t, e)
	default:
		e.none = true
	}
	return v, st
}

// hotWrite is a point write of kind (OpPut, OpDelete; OpMapPut, OpMapRemove with uk) through
// table t: checked as the engine would check it (H4), then kept dirty in the entry, or written
// through when the tier has no room.
func (s *Store) hotWrite(t *hotTable, kind engine.OpKind, key []byte, h uint64, uk, v []byte) error {
	if err := s.e.CheckSizes(key, uk, v); err != nil {
		return err
	}
	if err := s.e.WriteCheck(); err != nil {
		return err
	}
	ek, hx := key, h
	if t.kind == hotMap {
		s.hot.kbuf = append(append(s.hot.kbuf[:0], key...), uk...)
		ek, hx = s.hot.kbuf, mapHash(h, uk)
	}
	e := s.hotFind(t, ek, len(key), hx)
	if e == nil {
		if e = s.hotInsert(t, ek, h, hx, len(key), true); e == nil {
			return s.applyRaw(kind, key, h, uk, v)
		}
	}
	if kind == engine.OpPut || kind == engine.OpMapPut {
		if !s.hotSet(t, e, v, false, true) {
			if e.dirty { // no room for the new value: the entry's older value goes first
				if err := s.writeOne(t, e); err != nil {
					return err
				}
				s.hotDelete(t, e)
			}
			return s.applyRaw(kind, key, h, uk, v)
		}
		e.present = true
	} else {
		if e.none { // H8: nothing below to delete
			if e.dirty {
				e.dirty = false
				s.hot.dirty--
			}
			s.hot.stats.Elided++
			s.hotDelete(t, e)
			return nil
		}
		e.present = false
		e.setLen(0)
	}
	s.markDirty(t, e)
	return nil
}

// hotMapGet is a map state's point read of user key uk of map mk (hash hm) through t.
func (s *Store) hotMapGet(t *hotTable, hm uint64, mk, uk []byte) ([]byte, status) {
	s.hot.kbuf = append(append(s.hot.kbuf[:0], mk...), uk...)
	hx := mapHash(hm, uk)
	if e := s.hotFind(t, s.hot.kbuf, len(mk), hx); e != nil {
		s.hot.stats.Hits++
		if e.present {
			return e.value(), found
		}
		return nil, absent
	}
	s.hot.stats.Misses++
	e := s.hotInsert(t, s.hot.kbuf, hm, hx, len(mk), false)
	v, st := s.e.MapGet(hm, mk, base.HashUserKey(uk), uk)
	if e == nil {
		return v, st
	}
	switch st {
	case found:
		if !s.hotSet(t, e, v, false, false) {
			return v, st
		}
		e.present = true
		return e.value(), found
	case failed:
		s.hotDelete(t, e)
	default:
		e.none = true
	}
	return v, st
}

// hotListWrite is a list write through t: replace false appends the framed batch b; replace
// true replaces the list with b (empty: deletes it). Checked as writeList would (H4).
func (s *Store) hotListWrite(t *hotTable, key []byte, h uint64, b []byte, replace bool) error {
	if len(b) > s.maxBatch() {
		if err := s.checkElems(b); err != nil {
			return err
		}
		if err := s.e.CheckSizes(key, nil, nil); err != nil {
			return err
		}
	} else if err := s.e.CheckSizes(key, nil, b); err != nil {
		return err
	}
	if err := s.e.WriteCheck(); err != nil {
		return err
	}
	e := s.hotFind(t, key, len(key), h)
	if e == nil {
		if e = s.hotInsert(t, key, h, h, len(key), true); e == nil {
			return s.writeThroughList(key, h, b, replace)
		}
	}
	if !s.hotSet(t, e, b, !replace, true) {
		if e.dirty { // no room: what the entry holds goes first, in order
			if err := s.writeOne(t, e); err != nil {
				return err
			}
			s.hotDelete(t, e)
		}
		return s.writeThroughList(key, h, b, replace)
	}
	if replace {
		e.known, e.replace, e.base = true, true, 0
	}
	s.markDirty(t, e)
	return nil
}

// writeThroughList is a list write with no room in the tier: straight to the engine.
func (s *Store) writeThroughList(key []byte, h uint64, b []byte, replace bool) error {
	if replace && len(b) == 0 {
		return s.applyRaw(engine.OpListDelete, key, h, nil, nil)
	}
	return s.writeList(h, key, b, replace)
}

// hotListGet reads the list of key through t: the entry's list when known; else the engine's
// (streamed pieces, then batches) followed by the elements the entry holds appended (not yet
// written back), made known in the entry when it is at most hotListMax bytes and whole in
// memory. It never writes (H7); the error is always nil (kept for the callers' shape). It
// returns batches appended to lbuf.
func (s *Store) hotListGet(t *hotTable, key []byte, h uint64, lbuf [][]byte, low *engine.LowerList) ([][]byte, status, error) {
	e := s.hotFind(t, key, len(key), h)
	if e != nil && e.known {
		s.hot.stats.Hits++
		if low != nil {
			low.Reset()
		}
		v := e.value()
		if len(v) == 0 {
			return lbuf, absent, nil
		}
		return append(lbuf, v), found, nil
	}
	s.hot.stats.Misses++
	if e == nil {
		e = s.hotInsert(t, key, h, h, len(key), false)
	}
	lbuf, st, _ := s.e.ListGet(h, key, lbuf, low)
	if st == failed {
		if e != nil && !e.dirty {
			s.hotDelete(t, e)
		}
		return lbuf, st, nil
	}
	if e == nil {
		return lbuf, st, nil
	}
	pending := e.value() // an unknown entry holds only the appended elements (base 0)
	uncached := func() ([][]byte, status, error) {
		if len(pending) > 0 { // after the engine's list: its streamed pieces come first, then its batches
			return append(lbuf, pending), found, nil
		}
		return lbuf, st, nil
	}
	if low != nil && low.Pending() { // streamed from the LsmStore: not cached
		if !e.dirty {
			s.hotDelete(t, e)
		}
		return uncached()
	}
	n := len(pending)
	for _, b := range lbuf {
		n += len(b)
	}
	if n > hotListMax || int64(n) > int64(e.vcharged) && !s.hotGrow(int64(n)-int64(e.vcharged)) {
		if !e.dirty {
			s.hotDelete(t, e)
		}
		return uncached()
	}
	nv := make([]byte, 0, n)
	for _, b := range lbuf {
		nv = append(nv, b...)
	}
	engineBytes := len(nv)
	nv = append(nv, pending...)
	e.setHeap(nv, int32(max(int64(n), int64(e.vcharged))))
	e.known, e.base, e.replace = true, int32(engineBytes), false
	if len(nv) == 0 {
		return lbuf[:0], absent, nil
	}
	return append(lbuf[:0], nv), found, nil
}

// hotMapLookup returns the value of user key uk of map mk as the tier holds it: ok false when
// the tier has no entry for it (map iterators: a put since Next is in the tier, H1).
func (s *Store) hotMapLookup(t *hotTable, hm uint64, mk, uk []byte) (v []byte, present, ok bool) {
	s.hot.kbuf = append(append(s.hot.kbuf[:0], mk...), uk...)
	e := t.find(s.hot.kbuf, len(mk), mapHash(hm, uk))
	if e == nil {
		return nil, false, false
	}
	return e.value(), e.present, true
}

// HotTierStats are the hot tier's figures (Options.HotTierSize; Stats.HotTier).
type HotTierStats struct {
	// Entries is the number of cached keys (map entries count one each); Dirty of them differ
	// from the tiers below (written back at the next cut).
	Entries, Dirty int
	// Bytes is the tier's estimated memory, Charged what it holds of the budget
	// (memory.PurposeHotTier); Limit is Options.HotTierSize (0: the tier is off).
	Bytes, Charged, Limit int64
	// Hits and Misses count the point reads the tier served and those it read below.
	Hits, Misses int64
	// Syncs counts write-backs of the whole tier (every cut, and every call that reads
	// across keys); WrittenBack the entries written back; Drops the times the tier was full
	// and dropped every entry; SyncFailures the times a full tier could not write back (the
	// key went to the tiers directly; the entries stay dirty for the next cut).
	Syncs, WrittenBack, Drops, SyncFailures int64
	// CleanDrops counts the times the tier was full and dropped only its clean entries (they
	// held at least a quarter of its bytes), keeping the dirty ones for the next cut (H5).
	CleanDrops int64
	// TablesOff counts the states whose tables the tier turned off because their lookups found
	// fewer entries than they made (H9): keys written or read once between cuts, or read back
	// across keys after each write. Their point operations go to the engine since.
	TablesOff int
	// Elided counts deletes that were no change (H8): the key's value, made since the last
	// cut or never there, had not reached the tiers below, so neither the value nor its
	// delete was written to the engine or the changelog.
	Elided int64
}

// hotStats returns the tier's figures.
func (s *Store) hotStats() HotTierStats {
	h := &s.hot
	st := h.stats
	for _, t := range h.tabs {
		st.Entries += t.n
	}
	st.Dirty, st.Bytes, st.Charged, st.Limit = h.dirty, h.bytes, h.charged, h.limit
	return st
}

// hotErrCheck returns the write-back failure of the current call's enter (H2), wrapped.
func (s *Store) hotErrCheck() error {
	if s.hot.err != nil {
		return fmt.Errorf("strata: writing the hot tier back: %w", s.hot.err)
	}
	return nil
}

// kvGet reads key (hash h) of a value, reducing or aggregating state through its hot table,
// or from the engine when it has none. Inside beginHot.
func (b *stateBase) kvGet(h uint64, key []byte) ([]byte, status, error) {
	if t := b.hotTab(); t != nil {
		v, st := b.s.hotGet(t, h, key)
		return v, st, nil
	}
	v, st := b.s.e.Get(h, key)
	return v, st, nil
}

// kvWrite writes kind (OpPut with v, OpDelete) of key through the state's hot table, or to
// the engine when it has none. Inside beginHot.
func (b *stateBase) kvWrite(kind engine.OpKind, key []byte, h uint64, v []byte) error {
	if t := b.hotTab(); t != nil {
		return b.s.hotWrite(t, kind, key, h, nil, v)
	}
	return b.s.apply(kind, key, h, nil, v)
}

// hotTab returns the state's hot table, or nil when it has none (the tier is off, or its TTL
// rules one out: H6) or the tier turned it off (H9).
func (b *stateBase) hotTab() *hotTable {
	if t := b.hot; t != nil && !t.off {
		return t
	}
	return nil
}
