package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/slice"
)

// The row cache keeps the values of value-state keys that point reads found in the lower tier
// (the LsmStore), so that a skewed read load over state many times the memory budget is served
// from memory for its hot keys. A block cache cannot do that cheaply: a 16 KiB block holds about
// a hundred small entries, of which a Zipf-distributed load needs one, so per byte the row
// cache holds about a hundred times more hot keys (the same reason RocksDB has a row cache).
//
// Layout: an off-heap region mapped through the memory budget (counted with the block cache,
// memory.PurposeBlockCache), cut into sets of rowSet (1024) bytes; the set of a key comes from
// its order hash (mixed). A set is a header of rowWays (16) little-endian u32 words, one per
// entry, followed by rowUnits (30) units of rowUnit (32) bytes that hold the entries, each in a
// run of consecutive units:
//
//	set:   0                              64                                         1024
//	       +------------------------------+------------------------------------------+
//	       | w0 w1 … w15  (u32 each)      | unit 0 | unit 1 | …              | unit 29 |
//	       +------------------------------+------------------------------------------+
//
//	word:  bit 0       16      21       26    28       32
//	       +-----------+-------+--------+-----+--------+
//	       | tag (16)  | start | units  | ref | 0 (4)  |      0 = no entry
//	       +-----------+-------+--------+-----+--------+
//
//	entry (at unit start, units = ⌈(4 + klen + vlen) / 32⌉, at most rowMaxUnits = 16):
//	       [klen u16][vlen u16] key value (padding to the unit)
//
// so key and value together may take rowMaxData = 16×32−4 = 508 bytes; longer rows are not
// cached (counted in tooLarge). A 29-byte composite key (16 B key, 8 B namespace) with a 100 B
// value takes 5 units: 6 such rows per set, 160 bytes each. The tag is the order hash's low 16
// bits (0 is stored as 1); a probe reads the set's header (one cache line), and for each word
// whose tag matches, the entry's key, which it compares in full: two keys with equal order
// hashes are never confused (a 128-bit fingerprint would spare the key bytes, but a collision
// would return another key's value; verifying the key is what keeps that impossible).
//
// Words are dense and in insertion order: entries occupy w0…w(cnt−1), oldest first, and the
// words after them are 0. Replacement is a generalized CLOCK over the entries of a set (a FIFO
// with second chances, ref a 2-bit count of them): a hit increments ref up to 3; an insertion
// that lacks a free word or enough free units takes the oldest entry and, if its ref is not 0,
// decrements it and moves the entry to the end, else removes it, and repeats until there is room
// (at most 4×16 steps: each step removes an entry or decrements a ref). Counting hits rather
// than flagging them keeps the hotter keys of a skewed load longer: over Zipf 0.99 reads of
// 6.1 M keys into 6 MiB, 58.4 % hits against 57.4 % with one ref bit (an LFU that knew the
// hottest keys would reach 66.7 %). The new
// entry then takes the lowest free run of its length; when the free units are enough but
// scattered, the set is compacted first (entries slid down in unit order, their words updated):
// a copy of at most 960 bytes, on the miss path only (after a read of the LsmStore).
//
// Invariants (what keeps it correct):
//  1. It holds only KindValue entries that a read of the lower tier returned as the key's newest
//     version when neither the FreshTable nor the SliceTable had a record of the key.
//  2. Every write that can change a cached key's value goes through tiers.Put or tiers.Delete
//     (value state, reducing and aggregating state, their merges and clears): Put refreshes a
//     cached copy with the value it wrote once the FreshTable took it (write-through; it never
//     adds a key that was not cached, and a failed Put changes nothing), Delete drops the copy
//     first (a failed Delete only costs a miss). A refresh that needs another number of units
//     removes the entry and inserts it anew (which may evict others of its set); one longer than
//     rowMaxData drops it. A composite key belongs to one state, so list and map writes
//     never touch a cached key. Data reaches the lower tier only by flushes and evictions of
//     records that such writes created, after they refreshed or dropped the key, and by a lazy
//     restore's tail install, whose value keys no read cached while it was pending (they were
//     answered by its index, doc.go invariant 39), and LSM
//     compactions do not change what a read sees; so a cached value is always the key's
//     newest (the write-through copy equals the record that shadows the lower tier until it
//     moves down).
//  3. Hits are copied into the lower reader's arena: a value handed out stays valid until the
//     next write even if its entry is replaced, rewritten or moved by compaction of its set
//     in a later read (a read may insert).
//  4. TTL: a value of a state with a TTL is cached with its timestamp, and TTL cleanup in
//     compactions may drop it or turn it into a tombstone (ttl.go) without a write — the
//     one change to a key's newest version that bypasses invariant 2. It only ever removes
//     what has expired, and a cached value that has expired by the clock is never returned:
//     Get drops it and reads the lower tier, which says whether it is still there (Flink's
//     ReturnExpiredIfNotCleanedUp depends on that). So the cache may hold an expired copy of
//     a key that cleanup removed (until the key's next write, read or eviction of its entry),
//     never return one, and never hold a live value that is not the key's newest.
//  5. Structure: in every set the words are dense, each entry's units lie inside the set's
//     data units and overlap no other entry's, its units are exactly what its key and value
//     need, and n is the number of words in use over all sets (CheckRowCache verifies all of
//     it, with invariant 6; the root's Store.Check runs it).
//
// Summary: beside the sets, on the Go heap, one u64 per set (8 bytes per 1 KiB set, 1/128 of
// the cache) whose bit tag mod 64 is set for the tag of every entry of the set (the OR of
// rowSumBit over its words, recomputed from the words whenever an entry is inserted or
// removed). A probe looks at the summary first and touches the set only when the key's bit is
// set: most writes of value state find their key not cached (the cache holds keys read from
// the LsmStore), and without it each paid a DRAM miss on a set header to learn that — the
// flight demo's row-cache refresh was a quarter of Apply. With 6 entries in a set about one
// probe in ten for an absent key still reads the set.
//
//  6. sum[i] is the OR of rowSumBit(tag) over the words in use of set i.
//
// Owner goroutine only (reads and writes of the Store); nothing in the background touches it.
type rowCache struct {
	region   *memory.Region
	mem      []byte
	sum      []uint64 // per set: the OR of rowSumBit of its entries' tags (invariant 6)
	sets     uint64   // set index = (mixed order hash × sets) >> 64
	n        int      // entries in use
	tooLarge int64    // rows not cached because key + value > rowMaxData
	sink     uint64   // bytes touched by prefetch (kept so the loads are not elided)
}

const (
	rowSet      = 1024                              // bytes per set
	rowWays     = 16                                // header words: entries per set at most
	rowHdr      = rowWays * 4                       // bytes of the set header
	rowUnit     = 32                                // bytes per unit
	rowUnits    = (rowSet - rowHdr) / rowUnit       // data units per set
	rowMaxUnits = 16                                // units of the longest entry
	rowEntryHdr = 4                                 // klen u16, vlen u16
	rowMaxData  = rowMaxUnits*rowUnit - rowEntryHdr // key + value bytes an entry holds

	rowStartShift = 16
	rowUnitsShift = 21
	rowField      = 1<<5 - 1 // mask of the start and units fields
	rowRef        = 1 << 26  // one in the ref count
	rowRefMask    = 3 << 26  // the ref count's bits
)

// The fields must fit their bits, and the unit mask of a set its uint32.
const (
	_ = uint(rowField - rowUnits)
	_ = uint(rowField - rowMaxUnits)
	_ = uint(32 - rowUnits)
	_ = uint(rowUnits - rowMaxUnits)
	_ = uint(rowSet - rowHdr - rowUnits*rowUnit)
	_ = uint(rowHdr - rowUnit) // the header is at least a unit: units stay aligned
)

// newRowCache maps a row cache of size bytes (rounded down to whole sets, at least one)
// through budget. Errors: the budget's (memory.ErrMemoryBudget).
func newRowCache(budget *memory.Budget, size int64) (*rowCache, error) {
	sets := max(uint64(size)/rowSet, 1)
	r, err := budget.Map(int(sets*rowSet), memory.PurposeBlockCache)
	if err != nil {
		return nil, err
	}
	return &rowCache{region: r, mem: r.Bytes(), sum: make([]uint64, sets), sets: sets}, nil
}

// index returns the index of the set of order.
func (c *rowCache) index(order uint64) uint64 {
	i, _ := bits.Mul64(order*0x9e3779b97f4a7c15, c.sets)
	return i
}

// set returns the bytes of the set of order.
func (c *rowCache) set(order uint64) []byte { return c.setAt(c.index(order)) }

// setAt returns the bytes of set i.
func (c *rowCache) setAt(i uint64) []byte { return c.mem[i*rowSet : (i+1)*rowSet : (i+1)*rowSet] }

// rowSumBit is the bit of a tag in a set's summary (invariant 6).
func rowSumBit(tag uint32) uint64 { return 1 << (tag & 63) }

// may reports whether set i may hold an entry of tag (its summary has the tag's bit): when
// not, the set need not be read.
func (c *rowCache) may(i uint64, tag uint32) bool { return c.sum[i]&rowSumBit(tag) != 0 }

// resum recomputes the summary of set i, whose bytes are s, from its words.
func (c *rowCache) resum(i uint64, s []byte) {
	var m uint64
	for j := range rowWays {
		w := rowWord(s, j)
		if w == 0 {
			break
		}
		m |= rowSumBit(w & 0xffff)
	}
	c.sum[i] = m
}

func rowTag(order uint64) uint32 {
	if t := uint32(uint16(order)); t != 0 {
		return t
	}
	return 1
}

// rowUnitsFor returns the units an entry of klen + vlen bytes takes (more than rowMaxUnits:
// not cached).
func rowUnitsFor(klen, vlen int) int { return (rowEntryHdr + klen + vlen + rowUnit - 1) / rowUnit }

func rowWord(s []byte, i int) uint32       { return binary.LittleEndian.Uint32(s[4*i:]) }
func rowSetWord(s []byte, i int, w uint32) { binary.LittleEndian.PutUint32(s[4*i:], w) }
func rowStart(w uint32) int                { return int(w >> rowStartShift & rowField) }
func rowLen(w uint32) int                  { return int(w >> rowUnitsShift & rowField) }

// rowEntry returns the bytes of the entry of word w in set s (its whole units).
func rowEntry(s []byte, w uint32) []byte {
	off := rowHdr + rowStart(w)*rowUnit
	end := off + rowLen(w)*rowUnit
	return s[off:end:end]
}

// rowFind returns the index of the word of (tag, key) in set s, or -1.
func rowFind(s []byte, tag uint32, key []byte) int {
	for i := range rowWays {
		w := rowWord(s, i)
		if w == 0 {
			return -1 // words are dense
		}
		if w&0xffff != tag {
			continue
		}
		e := rowEntry(s, w)
		if int(binary.LittleEndian.Uint16(e)) == len(key) && bytes.Equal(e[rowEntryHdr:rowEntryHdr+len(key)], key) {
			return i
		}
	}
	return -1
}

// rowScan returns the entries of set s, the units they take and the mask of those units.
func rowScan(s []byte) (cnt, used int, mask uint32) {
	for ; cnt < rowWays; cnt++ {
		w := rowWord(s, cnt)
		if w == 0 {
			break
		}
		used += rowLen(w)
		mask |= (1<<rowLen(w) - 1) << rowStart(w)
	}
	return cnt, used, mask
}

// get returns the cached value of (order, key), aliasing the cache (copy it before the next
// insert), and marks the entry referenced.
func (c *rowCache) get(order uint64, key []byte) ([]byte, bool) {
	if c.n == 0 {
		return nil, false
	}
	si, tag := c.index(order), rowTag(order)
	if !c.may(si, tag) {
		return nil, false
	}
	s := c.setAt(si)
	i := rowFind(s, tag, key)
	if i < 0 {
		return nil, false
	}
	w := rowWord(s, i)
	if w&rowRefMask != rowRefMask {
		rowSetWord(s, i, w+rowRef)
	}
	e := rowEntry(s, w)
	k := rowEntryHdr + len(key)
	v := k + int(binary.LittleEndian.Uint16(e[2:]))
	return e[k:v:v], true
}

// put caches value for (order, key), replacing an older copy; rows longer than rowMaxData
// are not cached (counted in tooLarge).
func (c *rowCache) put(order uint64, key, value []byte) {
	u := rowUnitsFor(len(key), len(value))
	if u > rowMaxUnits {
		c.tooLarge++
		return
	}
	si, tag := c.index(order), rowTag(order)
	s := c.setAt(si)
	if i := rowFind(s, tag, key); i >= 0 {
		if w := rowWord(s, i); rowLen(w) == u {
			rowWrite(rowEntry(s, w), key, value)
			return
		}
		c.remove(si, s, i)
	}
	c.insert(si, s, tag, key, value, u)
}

// rowWrite writes the entry of key and value into e.
func rowWrite(e, key, value []byte) {
	binary.LittleEndian.PutUint16(e, uint16(len(key)))
	binary.LittleEndian.PutUint16(e[2:], uint16(len(value)))
	copy(e[rowEntryHdr:], key)
	copy(e[rowEntryHdr+len(key):], value)
}

// remove forgets the entry of word i of set si, whose bytes are s.
func (c *rowCache) remove(si uint64, s []byte, i int) {
	cnt, _, _ := rowScan(s)
	copy(s[4*i:4*(cnt-1)], s[4*(i+1):4*cnt])
	rowSetWord(s, cnt-1, 0)
	c.n--
	c.resum(si, s)
}

// insert adds the entry (tag, key, value) of u units to set si, whose bytes are s and which
// does not hold key, replacing entries by CLOCK until there is room (see the type's doc).
func (c *rowCache) insert(si uint64, s []byte, tag uint32, key, value []byte, u int) {
	cnt, used, mask := rowScan(s)
	if cnt == rowWays || used+u > rowUnits {
		for cnt == rowWays || used+u > rowUnits {
			w := rowWord(s, 0)
			copy(s[:4*(cnt-1)], s[4:4*cnt])
			if w&rowRefMask != 0 {
				rowSetWord(s, cnt-1, w-rowRef) // second chance: to the end of the queue
				continue
			}
			rowSetWord(s, cnt-1, 0)
			cnt--
			used -= rowLen(w)
			c.n--
		}
		_, _, mask = rowScan(s)
	}
	start := rowFreeRun(mask, u)
	if start < 0 {
		rowCompact(s, cnt)
		start = used
	}
	rowSetWord(s, cnt, tag|uint32(start)<<rowStartShift|uint32(u)<<rowUnitsShift)
	rowWrite(s[rowHdr+start*rowUnit:], key, value)
	c.n++
	c.resum(si, s)
}

// rowFreeRun returns the first unit of the lowest run of u free units in a set whose units in
// use are mask, or -1.
func rowFreeRun(mask uint32, u int) int {
	free := ^mask & (1<<rowUnits - 1)
	r := free
	for i := 1; i < u && r != 0; i++ {
		r &= free >> i // bit p: units p … p+i free
	}
	if r == 0 {
		return -1
	}
	return bits.TrailingZeros32(r)
}

// rowCompact slides the cnt entries of set s down to the first units, in unit order, so that
// the free units follow them in one run.
func rowCompact(s []byte, cnt int) {
	var idx [rowWays]uint8
	for i := range cnt { // insertion sort of the words by start
		j := i
		for ; j > 0 && rowStart(rowWord(s, int(idx[j-1]))) > rowStart(rowWord(s, i)); j-- {
			idx[j] = idx[j-1]
		}
		idx[j] = uint8(i)
	}
	next := 0
	for _, i := range idx[:cnt] {
		w := rowWord(s, int(i))
		if st := rowStart(w); st != next {
			n := rowLen(w) * rowUnit
			copy(s[rowHdr+next*rowUnit:], s[rowHdr+st*rowUnit:rowHdr+st*rowUnit+n])
			rowSetWord(s, int(i), w&^(rowField<<rowStartShift)|uint32(next)<<rowStartShift)
		}
		next += rowLen(w)
	}
}

// refresh replaces the cached value of (order, key), if cached, by value (write-through: a
// key read from the lower tier and then rewritten is still served from the cache once the
// write has moved down to the lower tier); a value of other units moves the entry, one too
// long drops it (invariant 2).
func (c *rowCache) refresh(order uint64, key, value []byte) {
	if c.n == 0 {
		return
	}
	si, tag := c.index(order), rowTag(order)
	if !c.may(si, tag) {
		return
	}
	s := c.setAt(si)
	i := rowFind(s, tag, key)
	if i < 0 {
		return
	}
	w := rowWord(s, i)
	switch u := rowUnitsFor(len(key), len(value)); {
	case u == rowLen(w):
		rowWrite(rowEntry(s, w), key, value)
	case u > rowMaxUnits:
		c.remove(si, s, i)
	default:
		c.remove(si, s, i)
		c.insert(si, s, tag, key, value, u)
	}
}

// drop forgets (order, key) if cached (invariant 2: every value write calls it or refresh first).
func (c *rowCache) drop(order uint64, key []byte) {
	if c.n == 0 {
		return
	}
	si, tag := c.index(order), rowTag(order)
	if !c.may(si, tag) {
		return
	}
	s := c.setAt(si)
	if i := rowFind(s, tag, key); i >= 0 {
		c.remove(si, s, i)
	}
}

// close releases the memory.
func (c *rowCache) close() error { return c.region.Release() }

// MinRowCacheSize is the smallest row cache in bytes: one set of rowSet bytes
// (strata.Options.RowCacheSize).
const MinRowCacheSize = rowSet

// RowCacheMaxData is the most key + value bytes one row-cache entry holds; longer rows are not
// cached (tests size their rows by it).
const RowCacheMaxData = rowMaxData

// RowCacheWays is the most entries one set of the row cache holds (tests bound a one-set
// cache by it).
const RowCacheWays = rowWays

// prefetch loads the first line of the set of order (its words), so that a get of order soon
// after finds it in the cache (Engine.GetBatch). The load feeds c.sink so it stays.
func (c *rowCache) prefetch(order uint64) {
	if c.n != 0 {
		c.sink += uint64(c.set(order)[0])
	}
}

// CheckRowCache walks every entry of the row cache, checks its structure (invariant 5 above:
// dense words, units inside the set and disjoint, units exactly what key and value need, the
// tag and set of the key's order hash, the count of entries; invariant 6: each set's summary)
// and calls visit, if not nil, with each cached composite key (a copy) and value (valid during
// the call). It returns the first error found, by the walk or by visit; nil without a row
// cache. It changes nothing. O(cache size); owner goroutine only. The root's Store.Check runs
// it; tests pass a visit that compares each entry with their model.
func (t *Engine) CheckRowCache(visit func(key, value []byte) error) error {
	if t.rc == nil {
		return nil
	}
	return t.rc.check(func(s []byte, tag uint32, ck, cv []byte) error {
		h, _, ok := base.HashCompositeKey(ck)
		if !ok {
			return fmt.Errorf("strata: invariant: row cache: malformed key %x", ck)
		}
		order := t.orderOf(ck, h)
		if rowTag(order) != tag {
			return fmt.Errorf("strata: invariant: row cache: %x has tag %#x, want %#x", ck, tag, rowTag(order))
		}
		if set := t.rc.set(order); &set[0] != &s[0] {
			return fmt.Errorf("strata: invariant: row cache: %x not cached in its set", ck)
		}
		if visit == nil {
			return nil
		}
		return visit(bytes.Clone(ck), cv)
	})
}

// CheckRowCacheReads is CheckRowCache with a visit that reads each cached key through the
// tiers, the row cache bypassed (FreshTable, SliceTable, then the lower tier), and requires the
// newest version found there to be a value equal to the cached one (invariants 1 and 2), but
// for an expired copy of a value with a TTL, which cleanup may have removed below it and a read
// never returns (invariant 4). Broken invariants come back as errors beginning "strata:
// invariant: row cache"; a lower-tier read's error (ErrCorruption, I/O) as it is. Values read
// before stay valid (the reads copy into the lower reader's arena, as Get does); nothing
// changes. A lazy restore's tail is written first (invariant 33). O(entries × a point read);
// owner goroutine only.
func (t *Engine) CheckRowCacheReads() error {
	if t.rc == nil {
		return nil
	}
	if t.tail != nil {
		if err := t.awaitTail(); err != nil {
			return err
		}
	}
	return t.CheckRowCache(func(ck, cv []byte) error {
		h, _, _ := base.HashCompositeKey(ck) // CheckRowCache checked it
		v, st := t.f.Get(h, ck)
		if st == absent {
			order := t.orderOf(ck, h)
			sv, sst := t.sl.Get(order, ck)
			if v, st = sv, status(sst); sst == slice.Absent {
				var err error
				if v, st, err = t.lr.get(t.low, order, ck); err != nil {
					return err
				}
			}
		}
		if st == found && bytes.Equal(v, cv) || t.ttl.expired(ck, cv) {
			return nil
		}
		return fmt.Errorf("strata: invariant: row cache: key %x holds %x, the tiers %x (status %d)", ck, cv, v, st)
	})
}

// check walks every entry of c, checks the structure of its set (invariants 5 and 6)
// and calls visit with the entry's set, tag, key and value.
func (c *rowCache) check(visit func(set []byte, tag uint32, key, value []byte) error) error {
	used := 0
	for si := uint64(0); si < c.sets; si++ {
		s := c.mem[si*rowSet : (si+1)*rowSet]
		var mask uint32
		var sum uint64
		for i := range rowWays {
			w := rowWord(s, i)
			if w == 0 {
				for j := i + 1; j < rowWays; j++ {
					if rowWord(s, j) != 0 {
						return fmt.Errorf("strata: invariant: row cache set %d: word %d in use after the empty word %d", si, j, i)
					}
				}
				break
			}
			used++
			st, n := rowStart(w), rowLen(w)
			if w>>28 != 0 || w&0xffff == 0 || n == 0 || n > rowMaxUnits || st+n > rowUnits {
				return fmt.Errorf("strata: invariant: row cache set %d word %d: %#x (start %d, %d units)", si, i, w, st, n)
			}
			m := uint32(1<<n-1) << st
			if mask&m != 0 {
				return fmt.Errorf("strata: invariant: row cache set %d word %d: units %d+%d overlap another entry", si, i, st, n)
			}
			mask |= m
			sum |= rowSumBit(w & 0xffff)
			e := rowEntry(s, w)
			kl, vl := int(e[0])|int(e[1])<<8, int(e[2])|int(e[3])<<8
			if kl+vl > rowMaxData || rowUnitsFor(kl, vl) != n {
				return fmt.Errorf("strata: invariant: row cache set %d word %d: key %d + value %d bytes in %d units", si, i, kl, vl, n)
			}
			if err := visit(s, w&0xffff, e[rowEntryHdr:rowEntryHdr+kl], e[rowEntryHdr+kl:rowEntryHdr+kl+vl]); err != nil {
				return err
			}
		}
		if sum != c.sum[si] {
			return fmt.Errorf("strata: invariant: row cache set %d: summary %#x, its tags' %#x (invariant 6)", si, c.sum[si], sum)
		}
	}
	if used != c.n {
		return fmt.Errorf("strata: invariant: row cache: %d entries, n = %d", used, c.n)
	}
	return nil
}
