package base

import "math/bits"

// Kind is the kind of an entry. Part of the slice and file formats; do not
// change the values.
type Kind uint8

const (
	// KindValue is a full value (value, reducing and aggregating state).
	KindValue Kind = 1
	// KindTombstone deletes a key (value, list, or a whole map) as of Seq.
	KindTombstone Kind = 2
	// KindListBase is a list batch that replaces everything older
	// (Flink's ListState.update, or the first add after a clear).
	KindListBase Kind = 3
	// KindListAppend is a list batch appended to what is older: a merge
	// operand resolved on read and on compaction.
	KindListAppend Kind = 4
	// KindMapEntry is the value of one map entry (Key = map key, UserKey).
	KindMapEntry Kind = 5
	// KindMapEntryTombstone removes one map entry as of Seq.
	KindMapEntryTombstone Kind = 6
)

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool { return k >= KindValue && k <= KindMapEntryTombstone }

// String returns the kind's name, for errors and dumps.
func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindTombstone:
		return "tombstone"
	case KindListBase:
		return "list-base"
	case KindListAppend:
		return "list-append"
	case KindMapEntry:
		return "map-entry"
	case KindMapEntryTombstone:
		return "map-entry-tombstone"
	}
	return "kind(?)"
}

// Entry is one version of a key. Byte slices alias the producer's memory and
// are valid until the producer's next call (Iterator.Next); copy to keep.
type Entry struct {
	Order    uint64 // order hash (OrderHash), map entries: the map key's
	Hash     uint64 // the store's 64-bit hash of Key
	UserHash uint64 // map entries: the 64-bit hash of UserKey; else 0
	Seq      uint64 // sequence number of the write
	Kind     Kind
	Key      []byte // composite key; the map key for map entries
	UserKey  []byte // map entries only
	Value    []byte // value, list batch or map entry value; empty for tombstones
}

// Loc is where a tier keeps one version of a key, for reading that version
// again without a search: a list read records the places of its pieces in a
// first pass and loads one piece at a time in a second (engine.LowerList).
// The LsmStore's places are a table's file number, a data block and an
// offset in it (lsm.DB.GetLoc, ReadAt). A Loc is valid only while the tier
// holds what it had when the Loc was made (until its next install).
type Loc struct {
	File  uint64 // the table's file number (a test tier's own index)
	Block uint32 // data block in the file
	Off   uint32 // offset of the entry in the block's data
}

// Iterator yields entries. Next advances and reports whether an entry is
// available; Entry returns it (valid until the next Next); Err reports the
// error that stopped the iteration, nil at a clean end. Not safe for
// concurrent use.
type Iterator interface {
	Next() bool
	Entry() *Entry
	Err() error
}

// ScanIter is an Iterator over a tier's entries in an order range that a
// key scan (Flink's getKeys) positions once per step and uses between two
// changes of the tier: Release ends a step — what the walk pinned is let
// go, its buffers are kept for the next positioning — and Close drops it.
// Entries are valid until the next Next, Release or Close.
type ScanIter interface {
	Iterator
	Release()
	Close() error
}

// KeyGroupOf returns the key group a composite key begins with (big-endian
// uint16). It reports false when key is shorter than 2 bytes.
func KeyGroupOf(key []byte) (uint16, bool) {
	if len(key) < 2 {
		return 0, false
	}
	return uint16(key[0])<<8 | uint16(key[1]), true
}

// Stride returns the width of one key group's range of order hashes,
// ⌊2^64 / maxParallelism⌋, for maxParallelism in 1..32768.
func Stride(maxParallelism int) uint64 {
	if maxParallelism <= 1 {
		return ^uint64(0)
	}
	q, _ := bits.Div64(1, 0, uint64(maxParallelism))
	return q
}

// OrderHash returns the order hash of a key of key group kg with 64-bit hash
// h, given the stride of the store's maxParallelism (Stride): kg·stride plus
// the high part of h·stride, so it stays inside kg's range.
func OrderHash(kg uint16, stride, h uint64) uint64 {
	hi, _ := bits.Mul64(h, stride)
	return uint64(kg)*stride + hi
}

// KeyGroupOfOrder returns the key group an order hash belongs to.
func KeyGroupOfOrder(order, stride uint64) uint16 { return uint16(order / stride) }

// Sink receives entries that leave a tier: the SliceTable's eviction hands
// its coldest slices to the LsmStore through it, as one run in (Order, Key,
// UserKey, Seq descending) order with every version kept. Evict consumes it
// before returning; entries are valid only until it returns. A nil error
// means the sink holds the data durably enough to be the tier below (the
// evicting tier frees its copy next); on error the caller keeps its copy.
// Evict may run on a background goroutine.
type Sink interface {
	Evict(it Iterator) error
}
