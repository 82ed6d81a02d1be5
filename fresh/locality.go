package fresh

// indexLocalityMask selects the hash bits that choose a key's home index group and that the
// index stores as its h24 check (bits 32..55, hashParts).
const indexLocalityMask = uint64(0xFFFFFF) << 32

// IndexHash returns the hash to index a composite key by (doc.go, "Index locality"): h (the
// key's own 64-bit hash) with its home-group and h24 bits (32..55) taken from loc, a hash
// shared by every state of one key and namespace (base.LocalityHash). The states of a key then
// probe the same index group first, and h's tag bits still tell them apart. A caller must pass
// the same value for a key in every call (reads, writes, prefetches); any deterministic choice
// of loc is correct, only the cache behaviour changes. Pure; inlined.
func IndexHash(h, loc uint64) uint64 { return h&^indexLocalityMask | loc&indexLocalityMask }
