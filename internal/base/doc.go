// Package base is the shape in which state flows down Strata's tiers
// (FreshTable → SliceTable → LsmStore): one logical entry per version of a
// key, with its kind, sequence number and order hash. The tiers do not import
// one another; they meet here.
//
// # Keys and order
//
// A composite key is opaque bytes that begin with the key group as a
// big-endian uint16 (KeyGroupOf); the root package encodes the rest (state
// id, key, namespace). Map entries carry the map's composite key in Key and
// the map's user key in UserKey.
//
// Below the FreshTable, entries are ordered by (Order, Key, UserKey, Seq
// descending). Order is the order hash: key group kg of maxParallelism
// key groups owns the contiguous range [kg·stride, (kg+1)·stride) with
// stride = ⌊2^64 / maxParallelism⌋, and a key's place inside its range comes
// from its 64-bit hash (OrderHash). So a key-group range is a contiguous
// range of order hashes (rescaling, savepoints and key-group deletion are
// range operations), while keys spread uniformly over [0, 2^64) for
// power-of-two bucketing by the top bits. All entries of one map share its
// map key's Order, so a map is one contiguous run.
//
// # Invariants
//
//  1. Kind values are part of the slice and file formats: do not change them.
//  2. Order is a pure function of (key group, maxParallelism, Hash); Hash is
//     a pure function of Key (the root package computes both).
//  3. For one (Key, UserKey), a larger Seq is a newer version. Sequence
//     numbers are unique per write, so two versions of one key never share
//     one (a map clear and the first entry after it included: fresh gives
//     a new base map header its own Seq, below its entry's).
//  4. What the versions of a key mean is decided by the merge rules below,
//     written once, here, and applied by one Resolver in every
//     compaction (slice, lsm) and available to every point read.
//
// # Merge rules
//
// A group is the versions of one (Order, Key, UserKey), newest first (entry
// order). Its versions fall into two classes: key-level (KindValue,
// KindTombstone, KindListBase, KindListAppend; empty UserKey) and map-entry
// (KindMapEntry, KindMapEntryTombstone). A run is the groups of one (Order,
// Key); a map is one run: first its own group (Key, "") holding the map's
// key-level tombstones (clears and deletes) and the versions of the user
// key "" if the map has one, then one group per user key, ascending.
//
//  1. Newest wins: in each class of a group, the newest version that is not
//     a list append operand decides; the older versions of the class are
//     hidden. A KindMapEntryTombstone decides its map entry as deleted and
//     touches no other user key.
//  2. Operands stack on the newest base below them: the KindListAppend
//     versions newer than the deciding key-level version join it, oldest at
//     the bottom. Over a KindListBase or a KindValue: one KindListBase of
//     its bytes followed by the operands' bytes, oldest to newest. Over a
//     KindTombstone: a KindListBase of the operands alone (the tombstone is
//     consumed). The result carries the newest operand's Seq and hashes.
//     List batches are framed by the root package, so bytes concatenate.
//  3. Operands over nothing (no deciding key-level version in the group)
//     are not the whole list: they join into one KindListAppend, which still
//     stacks on what lies below — unless nothing older can lie below
//     (Resolver.Bottom), then they are a KindListBase. A point read that
//     saw only operands is not complete: the tier below goes first.
//  4. A compaction joins a list in pieces of at most Resolver.MaxList
//     bytes (MaxListPiece, 1 MiB, in every tier: slice.Options.MaxListMerge,
//     lsm.Options.MaxListPiece), so no value outgrows what a tier can store
//     and a read can hold one piece at a time. Operands join newest first:
//     when the next older operand would take the piece past MaxList, the
//     piece is emitted as a KindListAppend carrying the Seq and hashes of
//     its newest operand, and a new piece starts (an operand longer than
//     MaxList is a piece alone). The oldest piece then goes as rules 2 and
//     3 say — it joins a base or value below only if both fit in MaxList,
//     else it stays a KindListAppend and the base is kept as it is below
//     it; over a tombstone or at the bottom it is the KindListBase. So a
//     long list is a chain: the oldest piece (or the base) at the bottom,
//     newer pieces as append operands, each with a distinct Seq (its
//     newest operand's), in entry order.
//  5. Map clear: the newest KindTombstone of a run's (Key, "") group hides
//     every map-entry version of the run (any user key, "" included) with a
//     smaller Seq — also when a newer key-level version hides the tombstone
//     itself. An equal Seq is not hidden (invariant 3: none occurs). Where
//     the clear decides its class (rule 1) it is kept, also below newer
//     entries of the user key "", so it goes on hiding older runs.
//  6. A deciding tombstone (KindTombstone, KindMapEntryTombstone) stays in
//     a compaction's output so that it goes on hiding older versions below;
//     it leaves the output only where nothing older can lie below
//     (Resolver.DropTombstones, set only at the bottom; the LSM instead lets
//     its CompactionFilter drop tombstones at the bottom). A dropped
//     tombstone still hides what rules 1 and 5 say among the inputs.
//  7. Each resolved entry of a compaction then passes the Filter once, in
//     entry order: kept, dropped or rewritten (same Order, Key, UserKey and
//     Seq). TTL rewrites list batches and drops expired values with it;
//     rescaling clips key groups with it.
//  8. A version with the Seq of the previous version of its group (the
//     same version from two sources of a merge; sources are listed newest
//     first) is skipped.
//
// Point reads feed one key's versions newest first, tier by tier
// (Resolver.ReadKey, ReadMapEntry, ReadClear) and stop at the first Step
// that completes the answer; Resolver.Answer applies rules 1-5: Found for
// a value, a base or operands, Deleted for a tombstone without operands
// above it or for a map entry that is absent or hidden under a clear,
// Absent for nothing.
//
// # Errors and checksums
//
// The tiers report damage, a closed tier and a full disk with the errors of
// errors.go, which the root package re-exports, so no layer translates
// another's errors. Damage is always a *CorruptionError: the file (relative
// to the Store's directory when the tier knows it, empty for bytes in
// memory), the byte offset, and the cause, one of ErrTruncated,
// ErrChecksum, ErrFormatVersion, ErrChecksumType or ErrBadMagic when the
// check that failed identifies one:
//
//	strata: corruption: lsm/000012.sst at offset 4096: checksum mismatch: block 3 …
//	└─ ErrCorruption ─┘ └─── File ───┘           └Offset┘ └─ cause ──────┘ └ detail
//
// Error texts that can reach a Store's user say what is wrong in the user's
// terms and never name a tier ("fresh:", "lsm:"); invariant panics may.
// Every format's checksum is CRC32C over the CRC32C table.
package base
