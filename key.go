package strata

import (
	"github.com/zeebo/xxh3"
)

// Key is the current key of a state operation: serialized key bytes, a namespace (a window,
// or empty for Flink's VoidNamespace), the key group and the hashes, computed once and reused
// for every state the record touches, as Flink's setCurrentKey / setCurrentNamespace.
//
// A Key is a small value (pass and copy it freely). It aliases the byte slices it was made
// from: do not modify them while the Key is in use. Make Keys with Store.Key or
// Store.KeyWithHash; the zero Key, or a Key made by a Store with another MaxParallelism, fails
// every state operation with ErrKeyGroupOutOfRange, as does a Key whose key group lies outside
// the Store's key-group range.
type Key struct {
	b    []byte // serialized key
	ns   []byte // namespace, empty for the void namespace
	kh   uint64 // xxh3 of b
	nh   uint64 // xxh3 of ns, 0 when ns is empty
	kg   uint32 // key group in [0, maxP)
	maxP uint32 // MaxParallelism of the Store that made the Key; 0 for the zero Key
	hash int32  // the 32-bit key hash the key group came from
}

// Key returns the Key of the serialized key b in the void (empty) namespace. The key hash is
// xxh3 of b; its low 32 bits stand in for Java's hashCode() when assigning the key group
// (AssignToKeyGroup). Use KeyWithHash to reproduce Flink's partitioning with Flink's hash.
// Key does not allocate; the Key aliases b.
func (s *Store) Key(b []byte) Key {
	kh := xxh3.Hash(b)
	return s.makeKey(b, kh, int32(uint32(kh)))
}

// KeyWithHash returns the Key of the serialized key b whose key group is assigned from hash,
// the 32-bit key hash of the host (Flink's key.hashCode()), as
// KeyGroupRangeAssignment.assignToKeyGroup. Storage still hashes b with xxh3. Equal bytes must
// always come with equal hashes. KeyWithHash does not allocate; the Key aliases b.
func (s *Store) KeyWithHash(b []byte, hash int32) Key {
	return s.makeKey(b, xxh3.Hash(b), hash)
}

func (s *Store) makeKey(b []byte, kh uint64, hash int32) Key {
	return Key{
		b:    b,
		kh:   kh,
		kg:   uint32(murmurHash(hash)) % s.maxP,
		maxP: s.maxP,
		hash: hash,
	}
}

// In returns k in namespace ns (a window, serialized by the caller). Only the namespace hash
// is computed; the key hash and key group are reused. An empty ns is the void namespace. In
// does not allocate; the Key aliases ns.
func (k Key) In(ns []byte) Key {
	k.ns = ns
	if len(ns) == 0 {
		k.nh = 0
	} else {
		k.nh = xxh3.Hash(ns)
	}
	return k
}

// KeyGroup returns the key group of k, in [0, MaxParallelism).
func (k Key) KeyGroup() int { return int(k.kg) }

// Hash returns the 32-bit key hash the key group was assigned from (low 32 bits of xxh3 of
// the key bytes, or the hash given to KeyWithHash).
func (k Key) Hash() int32 { return k.hash }

// Bytes returns the serialized key, aliased, not copied: the slice given to Store.Key or
// KeyWithHash (for a Timer's Key, the service's buffer, valid during the callback only).
func (k Key) Bytes() []byte { return k.b }

// Namespace returns the namespace, aliased, not copied (the slice given to In); empty for the
// void namespace.
func (k Key) Namespace() []byte { return k.ns }
