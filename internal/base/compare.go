package base

import "bytes"

// Compare orders two entries in entry order — Order, Key, UserKey
// ascending, then Seq descending (newest first) — and returns -1, 0 or +1.
// It is the order of every sorted run below the FreshTable: slices
// (package slice), sstable blocks and files, and every merge of them. Two
// entries compare equal only when they are the same version (a correct
// writer never writes both). Pure.
//
// Compare is one call (it does not call CompareKey) but not inlinable: two
// inlined bytes.Compare exceed the compiler's budget (go build
// -gcflags=-m=2: cost 190 of 80), as every copy it replaces did. Merges
// call it once per heap step; point searches over one order hash compare
// (Key, UserKey) inline instead (slice.seekIn, sstable.Reader.Get).
func Compare(a, b *Entry) int {
	if a.Order != b.Order {
		if a.Order < b.Order {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	if a.Seq != b.Seq {
		if a.Seq > b.Seq {
			return -1
		}
		return 1
	}
	return 0
}

// CompareKey orders the (Key, UserKey) pairs of two entries of one Order
// as Compare does, ignoring sequence numbers: 0 means versions of the same
// key (and, for map entries, the same user key). The sstable reader's
// search over the first entries of blocks uses it. Pure; not inlinable
// (cost 143 of 80), so hot loops spell the two comparisons out.
func CompareKey(ak, au, bk, bu []byte) int {
	if c := bytes.Compare(ak, bk); c != 0 {
		return c
	}
	return bytes.Compare(au, bu)
}

// SameKey reports whether a and b are versions of one key: equal Order,
// Key and UserKey (one group of the Resolver). Pure; inlinable.
func SameKey(a, b *Entry) bool {
	return a.Order == b.Order && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.UserKey, b.UserKey)
}
