package base

import (
	"encoding/binary"

	metro "github.com/dgryski/go-metro"
	"github.com/zeebo/xxh3"
)

// Composite key of a record (every tier treats it as opaque bytes except for its key-group
// prefix, KeyGroupOf):
//
//	+----------------+----------------+-----------------+-----------+-----------------+
//	| key group      | state id       | len(key)        | key bytes | namespace bytes |
//	| uint16 BE      | uint16 BE      | uvarint, 1..3 B | len(key)  | rest            |
//	+----------------+----------------+-----------------+-----------+-----------------+
//
// The key-group prefix keeps a key group a contiguous range once entries are sorted (slices,
// LSM files, key-group deletion); the length prefix keeps (key, namespace) unambiguous. Map
// user keys are not part of it: the tiers nest them under this key. Part of the slice and file
// formats; do not change.

// AppendCompositeKey appends the composite key of (key group kg, state id, key, namespace ns)
// to dst and returns the extended slice. It allocates only when dst lacks capacity.
func AppendCompositeKey(dst []byte, kg, id uint16, key, ns []byte) []byte {
	dst = append(dst, byte(kg>>8), byte(kg), byte(id>>8), byte(id))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	return append(dst, ns...)
}

// HashKey returns the 64-bit hash of serialized key or namespace bytes (xxh3); the hash of an
// empty namespace is 0 by convention (HashNamespace).
func HashKey(b []byte) uint64 { return xxh3.Hash(b) }

// HashNamespace returns the 64-bit hash of a namespace: 0 for the empty (void) namespace, xxh3
// otherwise.
func HashNamespace(ns []byte) uint64 {
	if len(ns) == 0 {
		return 0
	}
	return xxh3.Hash(ns)
}

// CompositeHash is the 64-bit hash the tiers index a composite key by: the key hash kh, the
// namespace hash nh and the state id combined with a multiply-xorshift (kh and nh are already
// xxh3, so one mixing round suffices). Part of the formats (slices and LSM files store order
// hashes derived from it); do not change.
func CompositeHash(kh, nh uint64, id uint16) uint64 {
	h := kh ^ (nh+uint64(id))*0x9e3779b97f4a7c15
	h ^= h >> 32
	h *= 0xd6e8feb86659fd93
	h ^= h >> 32
	return h
}

// HashCompositeKey recomputes the CompositeHash of a composite key from its bytes and returns
// it with the key's key group; ok is false when ck is not a well-formed composite key.
func HashCompositeKey(ck []byte) (h uint64, kg uint16, ok bool) {
	if len(ck) < 5 {
		return 0, 0, false
	}
	kg = uint16(ck[0])<<8 | uint16(ck[1])
	id := uint16(ck[2])<<8 | uint16(ck[3])
	n, m := binary.Uvarint(ck[4:])
	if m <= 0 || n > uint64(len(ck)-4-m) {
		return 0, 0, false
	}
	kb := ck[4+m : 4+m+int(n)]
	ns := ck[4+m+int(n):]
	return CompositeHash(xxh3.Hash(kb), HashNamespace(ns), id), kg, true
}

// userKeySeed seeds the go-metro hash of map user keys. Part of the formats; do not change.
const userKeySeed = 0x5354524154414d50 // "STRATAMP"

// HashUserKey returns the 64-bit hash of an encoded map user key: go-metro, independent of the
// xxh3 key hash (DESIGN §2: OmniStateStore's 31·h+b user-key hash is a weakness to avoid).
func HashUserKey(b []byte) uint64 { return metro.Hash64(b, userKeySeed) }
