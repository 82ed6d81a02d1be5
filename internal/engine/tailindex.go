package engine

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// The lazy tail's value index (doc.go, "Lazy tail", invariant 39): while the driver sorts and
// writes a collected tail, a Get of a value key is answered from the tail itself instead of
// waiting for the whole of it.

// tailSlot is one slot of a tailIndex: the high 32 bits of a key's composite-key hash (its
// tag) and the key's newest value record (index in the Batch, plus one; 0: empty).
type tailSlot struct {
	tag uint32
	rec uint32
}

// tailSlotSize is tailSlot's size; the array fails to compile if it changes.
const tailSlotSize = 8

var _ = [1]struct{}{}[unsafe.Sizeof(tailSlot{})-tailSlotSize]

// errTailTooLong: a tail of more records than a slot's 32-bit record number holds gets no
// index (queueTail: its reads wait for the driver).
var errTailTooLong = errors.New("strata: a changelog tail of 2^32-1 records or more: no value index")

// tailGroup is how many records newTailIndex hashes before it touches their slots: the
// slots' cache misses (a table of 8 bytes a slot, megabytes for a long tail) then overlap.
const tailGroup = 16

// tailIndex maps every key with a value record (OpPut, OpDelete) in one collected tail to its
// newest such record: open addressing on the composite-key hash (home slot from the low bits,
// tag the high 32), linear probing, at most 3/4 full, in memory mapped outside the Go heap
// (memory.MapScratch; 8 bytes a slot). Built once by the owner during Restore (newTailIndex),
// then read-only; released with its Batch.
//
// Keys are told apart by tag only while the index is built (no record is read twice), so two
// keys whose tags meet in one probe sequence share a slot, which holds the newer record of the
// two. That slot is still right for whichever key its record is of (no newer record of that
// key exists: it would have replaced it), and a lookup of the other key finds a record of
// another key where its tag matches and answers "unknown": the caller then waits for the tail
// (get's ok false with known false). So a collision costs a wait, never a wrong value.
type tailIndex struct {
	b     *changelog.Batch
	slots []tailSlot
	mask  uint64
	mem   []byte // the slots' mapping
}

// newTailIndex indexes the value records of b, a tail collected for a Restore (object names it
// in errors), reading b once in seq order: a later record of a key replaces the earlier one,
// so each key's slot ends at its newest. Records of other kinds (lists, maps) are not indexed:
// a key has one kind (its state's), so no value key has any. Errors: a *base.CorruptionError
// for a value record without a composite key (bulkWrite refuses it the same way); the
// mapping's; errTailTooLong.
func newTailIndex(b *changelog.Batch, object string) (*tailIndex, error) {
	n := b.Len()
	if n >= math.MaxUint32 {
		return nil, errTailTooLong
	}
	size := 1 << max(4, bits.Len(uint(n+n/3)))
	mem, err := memory.MapScratch(size * int(unsafe.Sizeof(tailSlot{})))
	if err != nil {
		return nil, err
	}
	x := &tailIndex{b: b, mem: mem, mask: uint64(size - 1),
		slots: unsafe.Slice((*tailSlot)(unsafe.Pointer(unsafe.SliceData(mem))), size)}
	var r changelog.Record
	var hs [tailGroup]uint64
	var recs [tailGroup]uint32
	var touched uint32
	for lo := 0; lo < n; lo += tailGroup {
		g := 0
		for i := lo; i < min(lo+tailGroup, n); i++ {
			if err := b.Record(i, &r); err != nil {
				x.release()
				return nil, err
			}
			if k := OpKind(r.Kind); k != OpPut && k != OpDelete {
				continue
			}
			h, _, ok := base.HashCompositeKey(r.Key)
			if !ok {
				x.release()
				return nil, base.Corrupt(object, -1, nil, "changelog record of seq %d has no composite key", r.Seq)
			}
			hs[g], recs[g] = h, uint32(i+1)
			touched ^= x.slots[h&x.mask].rec // the group's misses overlap before the inserts
			g++
		}
		for j := range g {
			x.insert(hs[j], recs[j])
		}
	}
	tailSink.Store(touched)
	return x, nil
}

// tailSink keeps newTailIndex's touching loads alive (its value is meaningless).
var tailSink atomic.Uint32

// insert makes rec the newest value record of the key with hash h (see tailIndex on tags).
func (x *tailIndex) insert(h uint64, rec uint32) {
	tag := uint32(h >> 32)
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		s := &x.slots[p]
		if s.rec == 0 || s.tag == tag {
			*s = tailSlot{tag: tag, rec: rec}
			return
		}
	}
}

// get returns the newest value record of key (hash h) in the tail: its value and found for a
// put, deleted for a delete (ok true). ok is false when the tail cannot say: known true when
// it has no value record of key (the tiers below hold the answer), known false when key's
// tag leads to another key's record (a collision: the caller waits for the tail). The value
// aliases the Batch (the caller copies it before the Batch may be released).
func (x *tailIndex) get(h uint64, key []byte) (v []byte, st status, ok, known bool) {
	tag := uint32(h >> 32)
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		s := &x.slots[p]
		if s.rec == 0 {
			return nil, absent, false, true
		}
		if s.tag != tag {
			continue
		}
		var r changelog.Record
		if err := x.b.Record(int(s.rec-1), &r); err != nil {
			panic(err.Error()) // checked by newTailIndex: memory damaged since
		}
		if !bytes.Equal(r.Key, key) {
			return nil, absent, false, false
		}
		if OpKind(r.Kind) == OpDelete {
			return nil, deleted, true, true
		}
		return r.Value, found, true, true
	}
}

// release unmaps the slots; the index must not be used afterwards. An unmap error leaves the
// mapping.
func (x *tailIndex) release() {
	if x.mem != nil {
		memory.UnmapScratch(x.mem)
	}
	x.mem, x.slots, x.b = nil, nil, nil
}
