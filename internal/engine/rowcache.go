package engine

import (
	"bytes"
	"encoding/binary"
	"math/bits"

	"github.com/strata-db/strata/memory"
)

// The row cache keeps the values of value-state keys that point reads found in the lower tier
// (the LsmStore), so that a skewed read load over state many times the memory budget is served
// from memory for its hot keys. A block cache cannot do that cheaply: a 16 KiB block holds about
// a hundred small entries, of which a Zipf-distributed load needs one, so per byte the row
// cache holds about a hundred times more hot keys (the same reason RocksDB has a row cache).
//
// Layout: an off-heap region mapped through the memory budget (counted with the block cache,
// memory.PurposeBlockCache), cut into sets of rowWays slots of rowSlot bytes. A slot is
//
//	[tag u32][klen u8][vlen u8][ref u8][used u8] key value
//
// with key and value together at most rowSlot-8 bytes (longer entries are not cached). The set
// comes from the order hash (mixed); tag is the order hash's low 32 bits, 0 only in an empty
// slot (a zero tag is stored as 1). Replacement is CLOCK within a set (ref set on a hit;
// insertion takes an empty slot, else the first slot without ref, clearing the refs it passes).
//
// Invariants (what keeps it correct):
//  1. It holds only KindValue entries that a read of the lower tier returned as the key's newest
//     version when neither the FreshTable nor the SliceTable had a record of the key.
//  2. Every write that can change a cached key's value goes through tiers.Put or tiers.Delete
//     (value state, reducing and aggregating state, their merges and clears): Put refreshes a
//     cached copy with the value it wrote once the FreshTable took it (write-through; it never
//     adds a key, and a failed Put changes nothing), Delete drops the copy first (a failed
//     Delete only costs a miss). A composite key belongs to one state, so list and map writes
//     never touch a cached key. Data reaches the lower tier only by flushes and evictions of
//     records that such writes created, after they refreshed or dropped the key, and LSM
//     compactions do not change what a read sees; so a cached value is always the key's
//     newest (the write-through copy equals the record that shadows the lower tier until it
//     moves down).
//  3. Hits are copied into the lower reader's arena: a value handed out stays valid until the
//     next write even if its slot is replaced by a later read (a read may insert).
//  4. TTL: a value of a state with a TTL is cached with its timestamp, and TTL cleanup in
//     compactions may drop it or turn it into a tombstone (ttl.go) without a write — the
//     one change to a key's newest version that bypasses invariant 2. It only ever removes
//     what has expired, and a cached value that has expired by the clock is never returned:
//     Get drops it and reads the lower tier, which says whether it is still there (Flink's
//     ReturnExpiredIfNotCleanedUp depends on that). So the cache may hold an expired copy of
//     a key that cleanup removed (until the key's next write, read or eviction of its slot),
//     never return one, and never hold a live value that is not the key's newest.
//
// Owner goroutine only (reads and writes of the Store); nothing in the background touches it.
type rowCache struct {
	region *memory.Region
	mem    []byte
	sets   uint64 // set index = (mixed order hash × sets) >> 64
	n      int    // slots in use
}

const (
	rowSlot    = 128 // bytes per slot
	rowWays    = 4   // slots per set
	rowHdr     = 8
	rowMaxData = rowSlot - rowHdr // key + value bytes a slot holds
)

// newRowCache maps a row cache of size bytes (rounded down to whole sets, at least one)
// through budget. Errors: the budget's (memory.ErrMemoryBudget).
func newRowCache(budget *memory.Budget, size int64) (*rowCache, error) {
	sets := max(uint64(size)/(rowWays*rowSlot), 1)
	r, err := budget.Map(int(sets*rowWays*rowSlot), memory.PurposeBlockCache)
	if err != nil {
		return nil, err
	}
	return &rowCache{region: r, mem: r.Bytes(), sets: sets}, nil
}

// set returns the slots of the set of order.
func (c *rowCache) set(order uint64) []byte {
	i, _ := bits.Mul64(order*0x9e3779b97f4a7c15, c.sets)
	const setBytes = rowWays * rowSlot
	return c.mem[i*setBytes : (i+1)*setBytes : (i+1)*setBytes]
}

func rowTag(order uint64) uint32 {
	if t := uint32(order); t != 0 {
		return t
	}
	return 1
}

// find returns the slot of (order, key) in set s, or nil.
func rowFind(s []byte, tag uint32, key []byte) []byte {
	for w := 0; w < rowWays; w++ {
		sl := s[w*rowSlot : (w+1)*rowSlot]
		if binary.LittleEndian.Uint32(sl) != tag || int(sl[4]) != len(key) {
			continue
		}
		if bytes.Equal(sl[rowHdr:rowHdr+len(key)], key) {
			return sl
		}
	}
	return nil
}

// get returns the cached value of (order, key), aliasing the cache (copy it before the next
// insert), and marks the slot referenced.
func (c *rowCache) get(order uint64, key []byte) ([]byte, bool) {
	if c.n == 0 {
		return nil, false
	}
	sl := rowFind(c.set(order), rowTag(order), key)
	if sl == nil {
		return nil, false
	}
	sl[6] = 1
	k, v := rowHdr+int(sl[4]), int(sl[5])
	return sl[k : k+v : k+v], true
}

// put caches value for (order, key), replacing an older copy; entries longer than a slot are
// not cached.
func (c *rowCache) put(order uint64, key, value []byte) {
	if len(key)+len(value) > rowMaxData {
		return
	}
	s, tag := c.set(order), rowTag(order)
	sl := rowFind(s, tag, key)
	if sl == nil {
		sl = c.victim(s)
	}
	if binary.LittleEndian.Uint32(sl) == 0 {
		c.n++
	}
	binary.LittleEndian.PutUint32(sl, tag)
	sl[4], sl[5], sl[6], sl[7] = byte(len(key)), byte(len(value)), 0, 1
	copy(sl[rowHdr:], key)
	copy(sl[rowHdr+len(key):], value)
}

// victim returns the slot an insertion into set s takes (CLOCK, see the type's doc).
func (c *rowCache) victim(s []byte) []byte {
	for w := 0; w < rowWays; w++ {
		if sl := s[w*rowSlot : (w+1)*rowSlot]; binary.LittleEndian.Uint32(sl) == 0 {
			return sl
		}
	}
	for w := 0; w < rowWays; w++ {
		sl := s[w*rowSlot : (w+1)*rowSlot]
		if sl[6] == 0 {
			return sl
		}
		sl[6] = 0
	}
	return s[:rowSlot]
}

// refresh replaces the cached value of (order, key), if cached, by value (write-through: a
// key read from the lower tier and then rewritten is still served from the cache once the
// write has moved down to the lower tier); a value too long for the slot drops the entry.
func (c *rowCache) refresh(order uint64, key, value []byte) {
	if c.n == 0 {
		return
	}
	sl := rowFind(c.set(order), rowTag(order), key)
	if sl == nil {
		return
	}
	if len(key)+len(value) > rowMaxData {
		clear(sl[:rowHdr])
		c.n--
		return
	}
	sl[5] = byte(len(value))
	copy(sl[rowHdr+len(key):], value)
}

// drop forgets (order, key) if cached (invariant 2: every value write calls it or refresh first).
func (c *rowCache) drop(order uint64, key []byte) {
	if c.n == 0 {
		return
	}
	if sl := rowFind(c.set(order), rowTag(order), key); sl != nil {
		clear(sl[:rowHdr])
		c.n--
	}
}

// close releases the memory.
func (c *rowCache) close() error { return c.region.Release() }

// MinRowCacheSize is the smallest row cache in bytes: one set of rowWays slots of rowSlot bytes
// (strata.Options.RowCacheSize).
const MinRowCacheSize = rowWays * rowSlot

// RowCacheMaxData is the most key + value bytes one row-cache slot holds; longer rows are not
// cached (tests size their rows by it).
const RowCacheMaxData = rowMaxData
