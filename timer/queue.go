package timer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"unsafe"

	"github.com/strata-db/strata/memory"
)

// Domain is a timer's time domain. The values are written in the section format: part of the
// format; do not change.
type Domain uint8

const (
	// EventTime timers fire when the watermark reaches them (Flink's event-time timers).
	EventTime Domain = 0
	// ProcessingTime timers fire when processing time reaches them.
	ProcessingTime Domain = 1
)

// String returns "event-time" or "processing-time".
func (d Domain) String() string {
	switch d {
	case EventTime:
		return "event-time"
	case ProcessingTime:
		return "processing-time"
	}
	return fmt.Sprintf("domain(%d)", uint8(d))
}

// Limits of a timer's bytes: a record's lengths are 16 and 15 bits.
const (
	// MaxKeyLen is the longest key of a timer, in bytes.
	MaxKeyLen = 1<<16 - 1
	// MaxNamespaceLen is the longest namespace of a timer, in bytes.
	MaxNamespaceLen = 1<<15 - 1
	// maxArena bounds a group's arena: refs are uint32.
	maxArena = 1<<32 - 1
)

var (
	// ErrTooLarge: a key longer than MaxKeyLen or a namespace longer than MaxNamespaceLen.
	ErrTooLarge = errors.New("timer key or namespace too large")
	// ErrGroupFull: a key group's records would pass 4 GiB.
	ErrGroupFull = errors.New("a key group's timers reach 4 GiB")
)

// Timer is one timer as the queue gives it out. Key and Namespace alias memory the call that
// returned it names (a caller's buffer, or the queue's arena).
type Timer struct {
	KeyGroup  int
	KeyHash   int32 // the 32-bit hash the key group was assigned from
	Key       []byte
	Namespace []byte
	Timestamp int64
}

// Hash returns the 32-bit hash h of a timer from the 64-bit hashes of its key and namespace
// (kh, nh: xxh3, as the Store's Key carries them) and its timestamp. It indexes a group's set
// and breaks ties of equal timestamps in a key group. Part of the documented order (doc.go):
// do not change.
func Hash(kh, nh uint64, ts int64) uint32 {
	h := kh ^ (nh+0x632be59bd9b4e019)*0x9e3779b97f4a7c15 ^ uint64(ts)*0xc2b2ae3d27d4eb4f
	h ^= h >> 32
	h *= 0xd6e8feb86659fd93
	h ^= h >> 32
	return uint32(h)
}

// slot is a set slot, entry a heap entry (doc.go, "Group region").
type slot struct{ h, ref uint32 }

type entry struct {
	ts     int64
	h, ref uint32
}

const (
	slotSize  = int(unsafe.Sizeof(slot{}))
	entrySize = int(unsafe.Sizeof(entry{}))
	recHeader = 16
	arenaBase = 8 // ref 0 means none
	deadBit   = 1 << 15
	minSet    = 64
	minHeap   = 32
	arity     = 4
	// heapPad puts the heap 48 bytes past a cache line, so that the four children of a node
	// (entries 4i+1..4i+4) share one 64-byte line.
	heapPad    = 48
	numClasses = 40 // slot size classes (slotClass)
)

// slotClass returns the size class of a record of sz bytes and the arena bytes of its slot:
// multiples of 8 up to 256 bytes (classes 0..30), powers of two above (31..39).
func slotClass(sz int) (int, int) {
	if sz <= 256 {
		c := (sz + 7) >> 3 // 2..32: a record has at least its 16-byte header
		return c - 2, c << 3
	}
	p := bits.Len(uint(sz - 1)) // 9..17
	return 31 + p - 9, 1 << p
}

// pageSize is the OS page size: a group's smallest region.
var pageSize = os.Getpagesize()

var _ [1]struct{} = [entrySize - 15]struct{}{} // entry is 16 bytes
var _ [1]struct{} = [slotSize - 7]struct{}{}   // slot is 8 bytes

// group is one key group's timers of a queue (doc.go).
type group struct {
	kg    int
	r     *memory.Region // nil: no region (no timers)
	set   []slot
	heap  []entry
	arena []byte
	n     int // near entries (the heap at the front of heap[]), ghosts included
	f     int // far entries (unordered, at the back of heap[]), ghosts included
	// boundary splits the timers: near holds those with ts <= boundary, far the others.
	boundary int64
	live     int // timers (set entries)
	ghosts   int // near and far entries whose record was deleted
	// Arena: slots are taken from the free list of their size class, else at alen (the
	// high-water mark; the first arenaBase bytes are reserved); a popped timer's slot, or a
	// ghost's once it leaves the heap, goes back to its list (its first 4 bytes link the next).
	alen      int
	free      [numClasses]uint32
	recBytes  int // record bytes of the live timers (a section holds exactly these)
	slotBytes int // arena bytes of the slots of live timers and ghosts
	frozen    *Snapshot
	touch     int64 // keeps siftDown's early loads from being optimized away
}

// Queue is the timers of one time domain of one timer service over key groups
// [kgStart, kgStart+kgCount), outside the Go heap (doc.go). Not safe for concurrent use: one
// goroutine at a time (doc.go, invariant 1).
type Queue struct {
	budget  *memory.Budget
	kgStart int
	groups  []*group // by key group − kgStart; nil until its first timer
	heads   []head   // binary heap of the non-empty groups
	pos     []int32  // by key group − kgStart: the group's index in heads; -1: absent
	live    int
	mapped  int64 // bytes of the groups' regions (frozen ones handed to a snapshot excluded)
	closed  bool
	// spare holds regions a released snapshot gave back (doc.go, "Spare regions"), for the
	// rebuilds of the next snapshot's frozen groups; spareBytes is their size.
	spare      []*memory.Region
	spareBytes int64
}

// NewQueue returns an empty queue over key groups [kgStart, kgStart+kgCount) mapping its
// memory through b. It maps nothing until a timer is added.
func NewQueue(b *memory.Budget, kgStart, kgCount int) *Queue {
	if b == nil || kgStart < 0 || kgCount < 1 {
		panic(fmt.Sprintf("strata: invariant: timer.NewQueue(%v, %d, %d)", b, kgStart, kgCount))
	}
	q := &Queue{budget: b, kgStart: kgStart, groups: make([]*group, kgCount), pos: make([]int32, kgCount)}
	for i := range q.pos {
		q.pos[i] = -1
	}
	return q
}

// Len returns the number of timers.
func (q *Queue) Len() int { return q.live }

// MappedBytes returns the bytes of the regions the queue holds now: its groups' and its spare
// regions (page-rounded; the budget's PurposeTimers counts them, with regions a pending
// snapshot still holds).
func (q *Queue) MappedBytes() int64 { return q.mapped + q.spareBytes }

// KeyGroupLen returns the number of timers of key group kg (0 outside the queue's range).
func (q *Queue) KeyGroupLen(kg int) int {
	if g := q.groupOf(kg); g != nil {
		return g.live
	}
	return 0
}

func (q *Queue) groupOf(kg int) *group {
	i := kg - q.kgStart
	if i < 0 || i >= len(q.groups) {
		return nil
	}
	return q.groups[i]
}

// record reads the header of the record at ref.
func (g *group) record(ref uint32) (ts int64, keyHash int32, klen, nslen int, dead bool) {
	b := g.arena[ref : ref+recHeader]
	le := binary.LittleEndian
	ns := le.Uint16(b[14:])
	return int64(le.Uint64(b)), int32(le.Uint32(b[8:])), int(le.Uint16(b[12:])), int(ns &^ deadBit), ns&deadBit != 0
}

func recSize(klen, nslen int) int { return recHeader + klen + nslen }

// matches reports whether the record at ref is the timer (key, ns, ts).
func (g *group) matches(ref uint32, key, ns []byte, ts int64) bool {
	rts, _, kl, nl, _ := g.record(ref)
	if rts != ts || kl != len(key) || nl != len(ns) {
		return false
	}
	p := int(ref) + recHeader
	return bytes.Equal(g.arena[p:p+kl], key) && bytes.Equal(g.arena[p+kl:p+kl+nl], ns)
}

// find returns the set index and ref of timer (key, ns, ts) with hash h, or -1.
func (g *group) find(h uint32, key, ns []byte, ts int64) (int, uint32) {
	if g.r == nil {
		return -1, 0
	}
	mask := len(g.set) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := g.set[i]
		if s.ref == 0 {
			return -1, 0
		}
		if s.h == h && g.matches(s.ref, key, ns, ts) {
			return i, s.ref
		}
	}
}

// findRef returns the set index of the slot (h, ref); it must be there.
func (g *group) findRef(h, ref uint32) int {
	mask := len(g.set) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := g.set[i]
		if s.ref == ref {
			return i
		}
		if s.ref == 0 {
			panic(fmt.Sprintf("strata: invariant: timer of key group %d at %d missing from its set", g.kg, ref))
		}
	}
}

// insertSlot puts (h, ref) in the set (not present, room left).
func (g *group) insertSlot(h, ref uint32) {
	mask := len(g.set) - 1
	i := int(h) & mask
	for g.set[i].ref != 0 {
		i = (i + 1) & mask
	}
	g.set[i] = slot{h, ref}
}

// removeSlot empties set index i with backward-shift deletion (linear probing, no tombstones).
func (g *group) removeSlot(i int) {
	mask := len(g.set) - 1
	j := i
	for {
		j = (j + 1) & mask
		s := g.set[j]
		if s.ref == 0 {
			break
		}
		home := int(s.h) & mask
		// s may move back to i unless its home lies cyclically in (i, j].
		if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
			g.set[i] = s
			i = j
		}
	}
	g.set[i] = slot{}
}

// less is the queue's order within a group: (ts, h, key, namespace). The first two compares
// inline; equal (ts, h) — a rare hash tie — goes to the records.
func (g *group) less(a, b *entry) bool {
	c := cmpTSH(a, b)
	return c < 0 || c == 0 && g.tieLess(a.ref, b.ref)
}

// cmpTSH compares two entries by (ts, h): the order but for ties, which the hot loops break
// with tieLess (cmpTSH inlines; less does not).
func cmpTSH(a, b *entry) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	case a.h < b.h:
		return -1
	case a.h > b.h:
		return 1
	}
	return 0
}

//go:noinline
func (g *group) tieLess(a, b uint32) bool { return g.cmpBytes(a, b) < 0 }

// cmpBytes compares the keys, then the namespaces, of two records.
func (g *group) cmpBytes(a, b uint32) int {
	_, _, ak, an, _ := g.record(a)
	_, _, bk, bn, _ := g.record(b)
	pa, pb := int(a)+recHeader, int(b)+recHeader
	if c := bytes.Compare(g.arena[pa:pa+ak], g.arena[pb:pb+bk]); c != 0 {
		return c
	}
	return bytes.Compare(g.arena[pa+ak:pa+ak+an], g.arena[pb+bk:pb+bk+bn])
}

func (g *group) siftUp(i int) {
	h := g.heap
	e := h[i]
	for i > 0 {
		p := (i - 1) / arity
		if c := cmpTSH(&e, &h[p]); c > 0 || c == 0 && !g.tieLess(e.ref, h[p].ref) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

func (g *group) siftDown(i int) {
	h := g.heap[:g.n]
	n := len(h)
	e := h[i]
	var touch int64
	for {
		c := arity*i + 1
		if c >= n {
			break
		}
		m := c
		if c+arity <= n {
			// Load the grandchildren's cache lines now: the next level's line is one of them,
			// and the four loads overlap with this level's compares instead of following them.
			if gc := arity*c + 1; gc+3*arity < n {
				touch += h[gc].ts + h[gc+arity].ts + h[gc+2*arity].ts + h[gc+3*arity].ts
			}
			c4 := h[c : c+arity : c+arity]
			m01, m23 := 0, 2
			if x := cmpTSH(&c4[1], &c4[0]); x < 0 || x == 0 && g.tieLess(c4[1].ref, c4[0].ref) {
				m01 = 1
			}
			if x := cmpTSH(&c4[3], &c4[2]); x < 0 || x == 0 && g.tieLess(c4[3].ref, c4[2].ref) {
				m23 = 3
			}
			if x := cmpTSH(&c4[m23], &c4[m01]); x < 0 || x == 0 && g.tieLess(c4[m23].ref, c4[m01].ref) {
				m01 = m23
			}
			m += m01
		} else {
			for k := c + 1; k < n; k++ {
				if x := cmpTSH(&h[k], &h[m]); x < 0 || x == 0 && g.tieLess(h[k].ref, h[m].ref) {
					m = k
				}
			}
		}
		if x := cmpTSH(&h[m], &e); x > 0 || x == 0 && !g.tieLess(h[m].ref, e.ref) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
	g.touch += touch
}

// removeTop drops heap[0].
func (g *group) removeTop() {
	g.n--
	if g.n > 0 {
		g.heap[0] = g.heap[g.n]
		g.siftDown(0)
	}
}

// cleanTop pops ghosts off the top (invariant 3), freeing their slots.
func (g *group) cleanTop() {
	for g.ghosts > 0 && g.n > 0 {
		ref := g.heap[0].ref
		_, _, kl, nl, dead := g.record(ref)
		if !dead {
			return
		}
		g.removeTop()
		g.ghosts--
		g.freeSlot(ref, recSize(kl, nl))
	}
}

// alloc takes a slot for a record of sz bytes (the caller made sure there is one: canAlloc).
func (g *group) alloc(sz int) uint32 {
	c, ss := slotClass(sz)
	g.slotBytes += ss
	if r := g.free[c]; r != 0 {
		g.free[c] = binary.LittleEndian.Uint32(g.arena[r:])
		return r
	}
	r := uint32(g.alen)
	g.alen += ss
	return r
}

// canAlloc reports whether a record of sz bytes has a slot without a rebuild.
func (g *group) canAlloc(sz int) bool {
	c, ss := slotClass(sz)
	return g.free[c] != 0 || g.alen+ss <= len(g.arena)
}

// freeSlot puts the slot at ref of a record of sz bytes on its free list.
func (g *group) freeSlot(ref uint32, sz int) {
	c, ss := slotClass(sz)
	binary.LittleEndian.PutUint32(g.arena[ref:], g.free[c])
	g.free[c] = ref
	g.slotBytes -= ss
}

// heapify restores the heap order over heap[0:n].
func (g *group) heapify() {
	for i := (g.n - 2) / arity; i >= 0; i-- {
		g.siftDown(i)
	}
}

// rebuild replaces g's region with one sized for its live timers plus extraLive timers of
// extraBytes record bytes (doc.go, "Rebuild"); with no timers and no extra, g gives its region
// up. Near entries stay near, far ones far, ghosts are dropped. Errors: ErrMemoryBudget,
// ErrGroupFull; nothing changes then.
func (q *Queue) rebuild(g *group, extraLive, extraBytes int) error {
	L := g.live + extraLive
	if L == 0 {
		q.dropRegion(g)
		g.set, g.heap, g.arena, g.n, g.f, g.ghosts, g.alen, g.slotBytes, g.free = nil, nil, nil, 0, 0, 0, 0, 0, [numClasses]uint32{}
		return nil
	}
	near, far := g.near(), g.far()
	// The live slots' bytes (ghosts are dropped) and the extra timer's.
	B := g.slotBytes
	if g.ghosts > 0 {
		B = 0
		for _, part := range [2][]entry{near, far} {
			for _, e := range part {
				if _, _, kl, nl, dead := g.record(e.ref); !dead {
					_, ss := slotClass(recSize(kl, nl))
					B += ss
				}
			}
		}
	}
	if extraLive > 0 {
		_, ss := slotClass(extraBytes)
		B += ss
	}
	setCap := minSet
	for setCap*3/4 < L+L/4+1 {
		setCap *= 2
	}
	heapCap := max(minHeap, L+L/2)
	arenaCap := arenaBase + B + B/2
	if int64(arenaCap) > maxArena {
		if int64(arenaBase+B) > maxArena {
			return fmt.Errorf("%w: key group %d", ErrGroupFull, g.kg)
		}
		arenaCap = maxArena
	}
	heapOff := setCap*slotSize + heapPad
	r := q.takeSpare(heapOff + heapCap*entrySize + arenaCap)
	if r == nil {
		var err error
		if r, err = q.budget.Map(heapOff+heapCap*entrySize+arenaCap, memory.PurposeTimers); err != nil {
			return err
		}
	}
	mem := r.Bytes()
	set := unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(mem))), setCap)
	heap := unsafe.Slice((*entry)(unsafe.Pointer(&mem[heapOff])), heapCap)
	arena := mem[heapOff+heapCap*entrySize:]
	if len(arena) > maxArena {
		arena = arena[:maxArena]
	}
	alen, slots, live := arenaBase, 0, 0
	mask := setCap - 1
	// copyLive copies the live entries of part, with their records, to heap[at], heap[at+step], …
	copyLive := func(part []entry, at, step int) int {
		k := 0
		for _, e := range part {
			_, _, kl, nl, dead := g.record(e.ref)
			if dead {
				continue
			}
			sz := recSize(kl, nl)
			_, ss := slotClass(sz)
			copy(arena[alen:alen+sz], g.arena[e.ref:int(e.ref)+sz])
			e.ref = uint32(alen)
			alen += ss
			slots += ss
			heap[at+k*step] = e
			k++
			i := int(e.h) & mask
			for set[i].ref != 0 {
				i = (i + 1) & mask
			}
			set[i] = slot{e.h, e.ref}
		}
		return k
	}
	n := copyLive(near, 0, 1)
	f := copyLive(far, heapCap-1, -1)
	live = n + f
	if live != g.live || (n == 0 && f > 0) {
		panic(fmt.Sprintf("strata: invariant: key group %d holds %d+%d live timers, counted %d", g.kg, n, f, g.live))
	}
	nearGhosts := n < len(near)
	q.mapped += int64(len(mem)) // first: dropRegion weighs the spares against it
	q.dropRegion(g)
	g.r, g.set, g.heap, g.arena, g.n, g.f, g.ghosts, g.alen, g.slotBytes = r, set, heap, arena, n, f, 0, alen, slots
	g.free = [numClasses]uint32{}
	if nearGhosts {
		g.heapify()
	}
	return nil
}

// compact drops g's ghosts in place (doc.go, "Compaction"): their entries leave the near and
// far parts, their slots go on the free lists, the near heap is re-heapified. Records do not
// move, so the set is unchanged, and heap[0] stays (it is live: invariant 3). g must be
// writable (not frozen). O(entries), no region mapped.
func (g *group) compact() {
	if g.ghosts == 0 {
		return
	}
	keep := func(e entry) bool {
		_, _, kl, nl, dead := g.record(e.ref)
		if dead {
			g.freeSlot(e.ref, recSize(kl, nl))
			g.ghosts--
		}
		return !dead
	}
	n := 0
	for _, e := range g.heap[:g.n] {
		if keep(e) {
			g.heap[n] = e
			n++
		}
	}
	// The far part is kept from the back, in its order.
	top, f := len(g.heap)-1, 0
	for i := top; i >= len(g.heap)-g.f; i-- {
		if e := g.heap[i]; keep(e) {
			g.heap[top-f] = e
			f++
		}
	}
	if g.ghosts != 0 || n+f != g.live || (n == 0 && f > 0) {
		panic(fmt.Sprintf("strata: invariant: key group %d compacted to %d+%d entries, %d ghosts left, %d live", g.kg, n, f, g.ghosts, g.live))
	}
	nearGhosts := n < g.n
	g.n, g.f = n, f
	if nearGhosts {
		g.heapify()
	}
}

// compactable reports whether compacting g in place would free at least a quarter of its
// entries: less would make a group that keeps adding compact again soon, so it grows instead.
func (g *group) compactable() bool {
	return g.frozen == nil && g.r != nil && g.ghosts > 0 && 4*g.ghosts >= g.n+g.f
}

// near returns the near entries: the heap.
func (g *group) near() []entry { return g.heap[:g.n] }

// far returns the far entries, unordered.
func (g *group) far() []entry { return g.heap[len(g.heap)-g.f:] }

// Refill sizes: a far part of at most refillAll entries moves near whole; a larger one gives
// the near heap about refillTarget entries, the timers below a timestamp sampled from it.
const (
	refillAll    = 512
	refillTarget = 1024
	refillSample = 64
)

// settle restores invariant 3 after a removal from the near heap: ghosts leave its top, and
// an empty near heap takes the first part of the far entries (refill) while there are any.
func (g *group) settle() {
	for {
		g.cleanTop()
		if g.n > 0 || g.f == 0 {
			return
		}
		g.refill()
	}
}

// refill moves the far entries with timestamps up to a new boundary into the (empty) near
// heap: all of them when there are few, else those below a sampled timestamp that leaves
// about refillTarget near. One streaming pass over the far entries, no record read.
func (g *group) refill() {
	far := g.far()
	b := int64(math.MinInt64)
	if len(far) <= refillAll {
		for _, e := range far {
			b = max(b, e.ts)
		}
	} else {
		var sample [refillSample]int64
		step := len(far) / refillSample
		for i := range sample {
			sample[i] = far[i*step].ts
		}
		slices.Sort(sample[:])
		k := min(refillSample-1, refillSample*refillTarget/len(far))
		b = sample[k]
	}
	// Partition the far entries in place, those up to b first, and move them to the front
	// (copy handles the overlap when the far part fills more than half the array).
	n := 0
	for j := range far {
		if far[j].ts <= b {
			far[n], far[j] = far[j], far[n]
			n++
		}
	}
	copy(g.heap[:n], far[:n])
	g.n, g.f, g.boundary = n, len(far)-n, b
	g.heapify()
}

// dropRegion lets g's region go: to the snapshot that froze it, or back to the budget.
func (q *Queue) dropRegion(g *group) {
	if g.r == nil {
		return
	}
	q.mapped -= int64(len(g.r.Bytes()))
	if s := g.frozen; s != nil {
		s.owned = append(s.owned, ownedRegion{q: q, r: g.r})
		g.frozen = nil
	} else if err := g.r.Release(); err != nil {
		panic("strata: invariant: releasing a timer region: " + err.Error())
	}
	g.r = nil
	for q.spareBytes > q.mapped { // spares never outweigh the groups' regions
		last := len(q.spare) - 1
		r := q.spare[last]
		q.spare[last] = nil
		q.spare = q.spare[:last]
		q.spareBytes -= int64(len(r.Bytes()))
		if err := r.Release(); err != nil {
			panic("strata: invariant: releasing a timer region: " + err.Error())
		}
	}
}

// putSpare keeps r, a region of q's that a released snapshot gives back, for a rebuild of
// the next snapshot's frozen groups, or releases it: when q is closed, holds one spare per
// key group already, or its spares would exceed the bytes its groups map (doc.go, "Spare
// regions").
func (q *Queue) putSpare(r *memory.Region) {
	n := int64(len(r.Bytes()))
	if q.closed || len(q.spare) >= len(q.groups) || q.spareBytes+n > q.mapped {
		if err := r.Release(); err != nil {
			panic("strata: invariant: releasing a timer region: " + err.Error())
		}
		return
	}
	q.spare = append(q.spare, r)
	q.spareBytes += n
}

// takeSpare returns a spare region of at least size bytes and at most the larger of a quarter
// more and size rounded up to the page (a mapping's size), zeroed (a fresh mapping is zero,
// and rebuild relies on an empty set), or nil.
func (q *Queue) takeSpare(size int) *memory.Region {
	most := max(size+size/4, (size+pageSize-1)/pageSize*pageSize)
	for i, r := range q.spare {
		if n := len(r.Bytes()); n >= size && n <= most {
			last := len(q.spare) - 1
			q.spare[i], q.spare[last] = q.spare[last], nil
			q.spare = q.spare[:last]
			q.spareBytes -= int64(n)
			clear(r.Bytes())
			return r
		}
	}
	return nil
}

// writable makes g's region the owner's to write, with room for one more timer of sz record
// bytes when sz > 0 (a rebuild if g is frozen or full).
func (q *Queue) writable(g *group, sz int) error {
	if g.frozen == nil && g.r != nil {
		if sz == 0 || (g.live+1 <= len(g.set)*3/4 && g.n+g.f < len(g.heap) && g.canAlloc(sz)) {
			return nil
		}
		// Entries or arena full of ghosts: a timer deleted and another added (a session window
		// extended) leave the live count steady, and compacting in place keeps the region.
		if g.live+1 <= len(g.set)*3/4 && g.compactable() {
			g.compact()
			if g.n+g.f < len(g.heap) && g.canAlloc(sz) {
				return nil
			}
		}
	}
	if sz > 0 {
		return q.rebuild(g, 1, sz)
	}
	return q.rebuild(g, 0, 0)
}

// Add adds the timer (key group kg, key with 32-bit hash keyHash, namespace ns, timestamp ts)
// whose Hash is h, and reports whether it was new; adding a timer that is there already does
// nothing (Flink's HeapPriorityQueueSet.add). Key and ns are copied. Errors: ErrTooLarge,
// ErrMemoryBudget (the queue's key group needs a larger region and the budget refuses it, or
// it is frozen by a snapshot and must be copied), ErrGroupFull; nothing changes then. Panics
// for kg outside the queue's range (the caller checks key groups).
func (q *Queue) Add(kg int, h uint32, keyHash int32, key, ns []byte, ts int64) (bool, error) {
	if len(key) > MaxKeyLen || len(ns) > MaxNamespaceLen {
		return false, fmt.Errorf("%w: key of %d bytes, namespace of %d", ErrTooLarge, len(key), len(ns))
	}
	g := q.group(kg)
	sz := recSize(len(key), len(ns))
	if g.r != nil {
		// Start the loads of the set's home slot and of the slot the record will take, so
		// that their cache misses overlap.
		t := int64(g.set[int(h)&(len(g.set)-1)].ref)
		if c, _ := slotClass(sz); g.free[c] != 0 {
			t += int64(g.arena[g.free[c]])
		}
		g.touch += t
	}
	if i, _ := g.find(h, key, ns, ts); i >= 0 {
		return false, nil
	}
	if err := q.writable(g, sz); err != nil {
		return false, err
	}
	ref := g.alloc(sz)
	b := g.arena[ref : int(ref)+sz]
	le := binary.LittleEndian
	le.PutUint64(b, uint64(ts))
	le.PutUint32(b[8:], uint32(keyHash))
	le.PutUint16(b[12:], uint16(len(key)))
	le.PutUint16(b[14:], uint16(len(ns)))
	copy(b[recHeader:], key)
	copy(b[recHeader+len(key):], ns)
	g.recBytes += sz
	g.insertSlot(h, ref)
	g.live++
	q.live++
	if g.n == 0 { // then no far entry either (invariant 3)
		g.boundary = ts
	}
	if ts > g.boundary {
		g.f++
		g.heap[len(g.heap)-g.f] = entry{ts, h, ref}
		return true, nil
	}
	g.heap[g.n] = entry{ts, h, ref}
	g.n++
	g.siftUp(g.n - 1)
	if g.heap[0].ref == ref {
		q.fix(g)
	}
	return true, nil
}

// group returns the group of kg, creating it.
func (q *Queue) group(kg int) *group {
	if q.closed {
		panic("strata: invariant: timer queue used after Close")
	}
	i := kg - q.kgStart
	if i < 0 || i >= len(q.groups) {
		panic(fmt.Sprintf("strata: invariant: key group %d outside the timer queue's [%d, %d)", kg, q.kgStart, q.kgStart+len(q.groups)))
	}
	g := q.groups[i]
	if g == nil {
		g = &group{kg: kg}
		q.groups[i] = g
	}
	return g
}

// Contains reports whether the timer (kg, key, ns, ts) with hash h is in the queue.
func (q *Queue) Contains(kg int, h uint32, key, ns []byte, ts int64) bool {
	g := q.groupOf(kg)
	if g == nil {
		return false
	}
	i, _ := g.find(h, key, ns, ts)
	return i >= 0
}

// Delete removes the timer (kg, key, ns, ts) with hash h and reports whether it was there;
// deleting an absent timer does nothing. Errors: ErrMemoryBudget when its key group is frozen
// by a snapshot and the copy is refused; nothing changes then.
func (q *Queue) Delete(kg int, h uint32, key, ns []byte, ts int64) (bool, error) {
	g := q.groupOf(kg)
	if g == nil {
		return false, nil
	}
	i, ref := g.find(h, key, ns, ts)
	if i < 0 {
		return false, nil
	}
	if g.frozen != nil {
		if err := q.writable(g, 0); err != nil {
			return false, err
		}
		i, ref = g.find(h, key, ns, ts)
	}
	g.removeSlot(i)
	_, _, kl, nl, _ := g.record(ref)
	p := g.arena[ref+14 : ref+16]
	binary.LittleEndian.PutUint16(p, binary.LittleEndian.Uint16(p)|deadBit)
	g.recBytes -= recSize(kl, nl)
	g.ghosts++
	g.live--
	q.live--
	if g.heap[0].ref == ref {
		g.settle()
		q.fix(g)
	}
	q.maybeShrink(g)
	return true, nil
}

// maybeShrink rebuilds g, when its region is larger than a page, once the slots in use are
// less than a quarter of its arena's high-water mark, and gives the region up when no timer is
// left (invariant 5); it compacts g in place once the ghosts outnumber the live timers. A
// refused rebuild is tried again at the next removal.
func (q *Queue) maybeShrink(g *group) {
	if g.r == nil || len(g.r.Bytes()) <= pageSize {
		return
	}
	if g.live == 0 || 4*g.slotBytes < g.alen-arenaBase {
		q.rebuild(g, 0, 0) // best effort: on ErrMemoryBudget the group stays as it is
	} else if g.ghosts > g.live && g.frozen == nil {
		g.compact()
	}
}

// Peek returns the timestamp of the first timer in the queue's order, or false when it is
// empty.
func (q *Queue) Peek() (int64, bool) {
	if len(q.heads) == 0 {
		return 0, false
	}
	return q.heads[0].ts, true
}

// Pop removes the first timer if its timestamp is at most limit, copies its key and namespace
// into buf (appended to buf[:0], grown as needed) and returns it with the buffer; false when
// the queue is empty or its first timer is later than limit. Errors: ErrMemoryBudget when the
// timer's key group is frozen by a snapshot and the copy is refused; nothing changes then.
func (q *Queue) Pop(limit int64, buf []byte) (Timer, []byte, bool, error) {
	if len(q.heads) == 0 {
		return Timer{}, buf, false, nil
	}
	if q.heads[0].ts > limit {
		return Timer{}, buf, false, nil
	}
	g := q.groups[q.heads[0].kg]
	if g.frozen != nil {
		if err := q.writable(g, 0); err != nil {
			return Timer{}, buf, false, err
		}
	}
	e := g.heap[0]
	// Start the loads of the timer's set slot and of the heap's second and third levels
	// before its record's: their cache misses overlap.
	touch := int64(g.set[int(e.h)&(len(g.set)-1)].ref)
	for c := arity + 1; c < g.n && c <= arity*arity+1; c += arity {
		touch += g.heap[c].ts
	}
	g.touch += touch
	ts, keyHash, kl, nl, _ := g.record(e.ref)
	p := int(e.ref) + recHeader
	buf = append(buf[:0], g.arena[p:p+kl+nl]...)
	t := Timer{KeyGroup: g.kg, KeyHash: keyHash, Key: buf[:kl:kl], Namespace: buf[kl : kl+nl : kl+nl], Timestamp: ts}
	g.removeSlot(g.findRef(e.h, e.ref))
	g.removeTop()
	g.freeSlot(e.ref, recSize(kl, nl))
	g.recBytes -= recSize(kl, nl)
	g.live--
	q.live--
	g.settle()
	q.fix(g)
	q.maybeShrink(g)
	return t, buf, true, nil
}

// Cursor is a position in a queue's iteration (Next); the zero Cursor is its start.
type Cursor struct {
	kg, i int
}

// Next returns the timer at c, copied into buf as Pop does, and advances c; false at the end.
// The iteration goes key group by key group, each in the order of its heap array (not the
// queue's order). The queue must not change during an iteration.
func (q *Queue) Next(c *Cursor, buf []byte) (Timer, []byte, bool) {
	for ; c.kg < len(q.groups); c.kg, c.i = c.kg+1, 0 {
		g := q.groups[c.kg]
		if g == nil {
			continue
		}
		for c.i < g.n+g.f {
			e := g.heap[c.i]
			if c.i >= g.n {
				e = g.heap[len(g.heap)-1-(c.i-g.n)]
			}
			c.i++
			ts, keyHash, kl, nl, dead := g.record(e.ref)
			if dead {
				continue
			}
			p := int(e.ref) + recHeader
			buf = append(buf[:0], g.arena[p:p+kl+nl]...)
			return Timer{KeyGroup: g.kg, KeyHash: keyHash, Key: buf[:kl:kl], Namespace: buf[kl : kl+nl : kl+nl], Timestamp: ts}, buf, true
		}
	}
	return Timer{}, buf, false
}

// Close releases the queue's memory (a region frozen by a snapshot is left to the snapshot's
// Release). The queue must not be used afterwards.
func (q *Queue) Close() {
	if q.closed {
		return
	}
	for _, g := range q.groups {
		if g != nil {
			q.dropRegion(g)
			g.set, g.heap, g.arena, g.n, g.f, g.live, g.ghosts = nil, nil, nil, 0, 0, 0, 0
		}
	}
	for _, r := range q.spare {
		if err := r.Release(); err != nil {
			panic("strata: invariant: releasing a timer region: " + err.Error())
		}
	}
	q.spare, q.spareBytes = nil, 0
	q.heads, q.live, q.closed = nil, 0, true
}

// head is a non-empty group in the queue's group heap: its first timer's timestamp and its
// key group − kgStart, so that the heap's compares and moves stay in two small arrays.
type head struct {
	ts int64
	kg int32
}

// headLess orders groups by their first timer's timestamp, then key group.
func headLess(a, b *head) bool {
	return a.ts < b.ts || a.ts == b.ts && a.kg < b.kg
}

// fix restores invariant 4 for g after its first timer changed.
func (q *Queue) fix(g *group) {
	h := q.heads
	k := int32(g.kg - q.kgStart)
	i := int(q.pos[k])
	if g.n == 0 {
		if i < 0 {
			return
		}
		last := len(h) - 1
		h[i] = h[last]
		q.pos[h[i].kg] = int32(i)
		q.heads = h[:last]
		q.pos[k] = -1
		if i < last {
			q.headDown(i)
			q.headUp(i)
		}
		return
	}
	ts := g.heap[0].ts
	if i < 0 {
		q.pos[k] = int32(len(h))
		q.heads = append(h, head{ts: ts, kg: k})
		q.headUp(len(h))
		return
	}
	old := h[i].ts
	h[i].ts = ts
	if ts > old {
		q.headDown(i)
	} else if ts < old {
		q.headUp(i)
	}
}

func (q *Queue) headUp(i int) {
	h := q.heads
	x := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !headLess(&x, &h[p]) {
			break
		}
		h[i] = h[p]
		q.pos[h[i].kg] = int32(i)
		i = p
	}
	h[i] = x
	q.pos[x.kg] = int32(i)
}

func (q *Queue) headDown(i int) {
	h := q.heads
	n := len(h)
	x := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && headLess(&h[c+1], &h[c]) {
			c++
		}
		if !headLess(&h[c], &x) {
			break
		}
		h[i] = h[c]
		q.pos[h[i].kg] = int32(i)
		i = c
	}
	h[i] = x
	q.pos[x.kg] = int32(i)
}
