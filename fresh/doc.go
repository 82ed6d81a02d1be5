// Package fresh is the FreshTable, the newest tier of Strata: the keyed
// state just written (Flink value, list, map, reducing and aggregating
// state), kept in fixed-size segments outside the Go heap and found through
// a swiss-table style hash index per segment, after Huawei OmniStateStore's
// FreshTable.
//
// # Terms
//
//   - Key: composite key bytes, opaque here (the root package encodes key
//     group, state id, key and namespace); the caller supplies its 64-bit
//     hash h. For map state the composite key is the map key (hash hm) and
//     each entry has a user key (hash hu).
//   - Segment: one memory.Pool Region (PurposeFreshData): a 16-byte header,
//     then records appended by a bump pointer. One segment is active
//     (writable); full or Seal()ed segments are sealed: read-only, still
//     searched until the transform has moved them to the lower tier and
//     DropSealed removes them, oldest first. segs holds them oldest first;
//     reads go newest first.
//   - Index: each segment's own open-addressing hash table in a separate
//     Region (PurposeFreshIndex), groups of 8 slots, one cache line each.
//   - Record: addressed by a uint32 offset in its segment (0 = none).
//     Every record header carries the write's sequence number (Table.Seq;
//     each write, in place or appended, increments it). Numbering starts
//     after Options.StartSeq (the first write gets StartSeq+1), so a store
//     reopened over an LsmStore with LastSeq L passes L and writes newer
//     sequence numbers than every entry below. StartSeq < MaxStartSeq =
//     2^56 − 2^40 (ErrStartSeq): the record keeps the low 56 bits, and
//     sequence numbers stay below 2^56 for 2^40 writes after StartSeq.
//   - Garbage: a record superseded inside its segment (FlagDead); counted
//     in Stats, reclaimed when the segment is transformed or dropped.
//
// # Segment
//
//	0       4       6       8              12              16
//	+-------+-------+-------+---------------+---------------+----------- ...
//	| magic | ver=1 | 0     | data limit    | 0             | records
//	| u32   | u16   | u16   | u32 (bytes)   | u32           |
//	+-------+-------+-------+---------------+---------------+----------- ...
//	magic = 0x53524653 ("SFRS"); all integers little endian.
//
// # Index group (64 bytes, one cache line)
//
//	0               8                               40                      64
//	+---------------+-------------------------------+-----------------------+
//	| ctrl[8]       | off[8] u32 record offsets     | h24[8] 3-byte hashes  |
//	+---------------+-------------------------------+-----------------------+
//	ctrl byte: 0b0000_0000 empty, 0b1ttt_tttt full with tag t = h>>57.
//	h24 = bits 32..55 of h; the home group is h24 & (groups-1); probing is
//	triangular over groups (g, g+1, g+3, ...), visiting every group.
//
// A lookup broadcasts 0x80|tag over 8 bytes and matches the 8 control
// bytes at once with SWAR arithmetic (matchTag, pure Go, inlined), checks
// the slot's h24, and only then touches the record to compare kind and
// key bytes. Zeroed memory is an empty index. The index never deletes a
// slot (a delete is a tombstone record), so probing stops at the first
// group with an empty slot. At 7/8 load the index doubles into a new
// Region, slots are re-placed from ctrl and h24 alone (no record is read),
// and the old Region is released; except near the end of the segment,
// where the slots its remaining data room can bring (at the slots per byte
// of its records so far) fit below 15/16 load: there it fills up to 15/16
// instead (segment.tailFits), so that a segment's last few records do not
// double an index that would then stay half empty until the segment is
// transformed (4 MiB of 145-byte value records: 28,926 slots, a 256 KiB
// index at 88% load instead of a 512 KiB one at 44%). Load never exceeds
// 15/16, so every probe still ends at a group with an empty slot.
//
// Index size: a new active segment maps its index at the size of the
// largest index a sealed segment of the Table has had (Table.idxHint), or
// at minIndexBytes (4 KiB) before the first seal or when the budget refuses
// the larger map. A steady workload's segments then never double their
// index: from 4 KiB to 512 KiB a segment doubled seven times, re-placing
// every slot at each step and mapping and unmapping a Region each time
// (3.3 % of the flight demo's CPU, 2026-12-05). The largest, not the last:
// checkpoints and the TTL sweep seal segments before they are full, and
// those small indices must not send the next segment back to doubling. The
// cost is an index mapped at its full size for a segment that a seal cuts
// short (at most the largest index, freed with the segment). A segment of
// larger records than before still grows as above; the hint only chooses
// where it starts.
//
// # Records
//
// Byte 7 of every record is kind (low 4 bits) | flags (high 4 bits);
// bytes 0..6 are the low 56 bits of the sequence number; once a record is
// FlagDead, of the write that superseded it (MapIter relies on it).
//
//	value (1), tombstone (2):
//	 0             7      8      10      12     16       16+klen
//	 +-------------+------+------+-------+------+--------+-------+-------+
//	 | seq (56)    | k|f  | klen | slack | vlen | key    | value | slack |
//	 +-------------+------+------+-------+------+--------+-------+-------+
//	 u16 klen, u16 slack (spare capacity), u32 vlen; tombstone: vlen 0.
//
//	list chunk (3):
//	 +-------------+------+------+-------+------+-----+------+-------+-------+
//	 | seq (56)    | k|f  | klen | slack | vlen | key | prev | batch | slack |
//	 +-------------+------+------+-------+------+-----+------+-------+-------+
//	 prev: u32 offset of the previous chunk of this key in this segment.
//
//	map header (4):
//	 +-------------+------+------+-------+------+---------+
//	 | seq (56)    | k|f  | klen | 0     | head | map key |
//	 +-------------+------+------+-------+------+---------+
//	 head: u32 offset of the newest entry of this header (0 = none).
//
//	map entry (5):
//	 0        7     8      10      12     16    20     24     28
//	 +--------+-----+------+-------+------+-----+------+------+----------+-------+-------+
//	 | seq    | k|f | uklen| slack | vlen | hdr | next | hu32 | user key | value | slack |
//	 +--------+-----+------+-------+------+-----+------+------+----------+-------+-------+
//	 hdr: u32 offset of its map header; next: the next older entry of the
//	 header's chain; hu32: hu>>32. The map key is not repeated.
//
//	flags: FlagBase (chunk: nothing older counts; header: map cleared),
//	       FlagTomb (entry removed), FlagDead (superseded garbage).
//
// Key-level records (value, tombstone, chunk, header) are indexed by the
// caller's h; entries by entryHash(hdr, hu32) = (hu32 ^ fmix32(hdr)) << 32,
// so each map is a nested index inside the segment index and a cleared map
// (a new header at a new offset) orphans all its old entries at once.
//
// # Invariants
//
//  1. Records tile a segment: from offset 16 to the bump pointer each
//     record's size (derived from its header alone) leads to the next.
//  2. Every full index slot points at the start of a record of its own
//     segment whose hash has that tag and h24; it is live (not FlagDead),
//     except entries of a dead map header, which no lookup reaches.
//  3. A key has at most one key-level slot per segment, pointing at its
//     newest key-level record there; a (header, user key) pair has at most
//     one entry slot. Superseding a record repoints the slot and marks the
//     old record (and what only it reaches) FlagDead.
//  4. Only the active segment is written: no record is appended to, written
//     in place in, or marked FlagDead in a sealed segment, and its index is
//     never changed (superseding a record of a sealed segment appends to
//     the active one; kill and markDead only reach records of the segment
//     being written). alloc, setSlot and markDead panic on a sealed
//     segment. So a sealed segment's bytes never change until it is
//     dropped: values returned from it stay valid until DropSealed (while
//     pinned, the last UnpinSealed; invariant 11) or Close, and a background goroutine may read it (SealedSegment) while
//     the owner writes; values from the active segment are valid until the
//     next write.
//  5. Writes go in place only when the newest record of the key is in the
//     active segment, has the kind being written, and its capacity
//     (vlen+slack) holds the new value with at most 65535 bytes of slack;
//     otherwise a record is appended. In-place writes keep every link,
//     except that a list chunk rewritten in place by ListReplace becomes
//     the base: its prev is cleared and the older chunks it reached are
//     marked FlagDead. ListAppend in place appends after the chunk's bytes
//     (vlen grows, slack shrinks, flags kept). A map entry tombstone is
//     never overwritten by a value in place (a MapIter started while it
//     was removed must not see it again).
//  6. Links point backwards inside one segment: chunk prev < chunk, entry
//     next < entry, entry hdr < entry; header head > header.
//  7. Lookups visit segments newest first and stop at the first segment
//     holding the key: a tombstone, base chunk or base header there hides
//     everything older (Status Deleted when nothing newer remains).
//  8. A failed write (ErrKeyTooLarge, ErrValueTooLarge, a wrapped
//     memory.ErrMemoryBudget) writes nothing and does not advance Seq;
//     segments and index are grown or rolled before any byte is written.
//  9. Segments are dropped oldest first only (DropSealed), so the
//     segments left are always the newest ones and a read that runs out of
//     them continues in the lower tiers without a gap. Seq never goes
//     back: drops do not reset it.
//  10. Get, Put, Delete, MapGet, MapPut, MapRemove, ListGet (with room in
//     dst) and MapIter allocate nothing and take no lock.
//  11. While the sealed segments are pinned (PinSealed count above 0),
//     DropSealed takes a segment off the read path (invariant 9 holds as
//     before) but neither gives its data segment to the Pool nor releases
//     its index, and does not mark its handle dropped: the segment's bytes
//     stay mapped, unchanged (invariant 4) and counted by the Budget
//     (Stats.PinnedBytes), so a SealedSegment taken before — Entries,
//     EntryAt, the values they return — stays readable from any goroutine.
//     The last UnpinSealed (or Close) releases them and marks their handles
//     dropped. No read or write path checks the pin.
//  12. A probe of the active segment for a key-level record (findKey) ends
//     either at the key's slot or, for an absent key, in the first group of
//     its probe sequence with an empty slot — the group insertSlot would
//     fill — and returns that empty slot's position. Until the index
//     changes (an insert, a growth, a seal or a roll) the key is still
//     absent and that slot is still where it goes, so a write that probed
//     and then finds the segment and index unchanged (prepare reported no
//     change) inserts there without probing again.
//  13. The remembered probe (Table.memo): Get and ListGet leave the result
//     of their probe of the active segment — its position and offset, or
//     the empty slot of invariant 12 — with the hash, the segment, the
//     index's mask and Seq. The next Put, Delete, ListAppend or ListReplace
//     uses it instead of probing only when the hash, the segment (still
//     active), the mask and Seq are all unchanged — no write, failed write
//     that grew or rolled, or seal since (every successful write advances
//     Seq; a failed one writes nothing but may grow the index or roll,
//     which the mask and segment catch; Seal clears the active segment) —
//     and the key is the same: for a found record its key bytes are those
//     of the record; for an absent key they equal the copy the memo keeps
//     (keys up to memoKeyMax bytes; a longer key is not remembered). Any
//     other case probes as before, so the memo changes no result.
//
// # Lists (KLIST)
//
// A list is a chain of chunks per segment, newest first, each a batch of
// caller-framed elements. Batches are concatenable (the root frames every
// element), so a chunk may hold several appended batches and ListGet may
// return them as one.
//
// ListAppend is O(1) and never reads the list: when the key's newest chunk
// in the active segment has slack for the batch, the batch is copied after
// its bytes (in place); otherwise a new chunk is appended, linked to the
// previous chunk of the key in the segment as a merge operand (after a
// tombstone it is a base chunk). ListReplace writes the batch in place
// into the key's newest chunk in the active segment when its capacity
// holds it: the chunk becomes the base and the older chunks of the key in
// the segment become garbage. Otherwise it appends a base chunk.
//
// A key's first chunk in the active segment has no slack (most lists are
// written once per segment: slack there would double the segment's list
// bytes, and the memory a sealed segment holds until its transform). Later
// chunks get slack: capacity = max(2·batch, 2·capacity of the key's
// newest chunk in the active segment), capped at 4 KiB (maxChunkCap) and
// at the largest value, never below the batch. Doubling makes a run of
// appends take O(log n) chunks (one more than doubling from the first)
// and copies nothing, with at most half of the newest chunk unused; the cap bounds a key's unused bytes to 4 KiB
// once its list is long enough that the ~20 bytes of chunk header are
// under 1%. Slack is shrunk to the rest of the active segment when the
// bare batch would still fit there, so slack never rolls a segment early.
// The flight demo's pattern (Add, then Update to the last 10 above 10
// elements) thus settles into one chunk per key rewritten in place: 500K
// events on 3.6K keys use 0.8 MB of one segment instead of 46 MB of three
// (TestDemoListPattern).
//
// ListGet walks newest to oldest (chain, then older segments) until a base
// chunk or tombstone, then reverses what it added, so batches come oldest
// first. It reports whether it reached one (complete); when it ran out of
// segments with append chunks only, the lower tiers' list goes first.
//
// # Staged lookups (prefetch.go)
//
// Prefetch(h) loads h's index group in every segment, PrefetchRecord(h) the record the group's
// first matching slot points at: a batched read calls each for every key before the Gets, so
// the keys' misses overlap. Both read what Get reads and write only Table.sink.
//
// # Transform
//
// The owner goroutine takes handles of the sealed segments (Sealed, oldest
// first) and hands one to a background job, which reads it with
// SealedSegment.Entries: a scan of the records in segment order, skipping
// FlagDead ones, each live record one base.Entry (value, tombstone, list
// base or append chunk, map entry or entry tombstone; a base map header
// is a tombstone of the map key at the header's sequence number, older
// than its entries'). The iterator (SealedIter) also reports each record's
// offset, and SealedSegment.EntryAt decodes the entry at that offset again,
// so a transform can sort 4-byte offsets instead of keeping every entry on
// the Go heap. The scan reads only the immutable bytes of the
// segment (invariant 4) and fields of the handle fixed when it was made,
// never the Table, so it needs no lock. When the job's slices are
// installed, the owner calls DropSealed on the oldest sealed segment: it
// leaves the read path, its data segment goes back to the Pool and its
// index to the Budget. A MapIter that still needed a dropped segment ends
// with ErrSegmentDropped.
//
// # Pinning for checkpoints
//
// A checkpoint seals the active segment, takes the sealed segments'
// handles and writes their entries on a scheduler task, while the owner
// goes on transforming and dropping them (invariant 11):
//
//	t.Seal(); t.PinSealed()          // owner
//	ss := t.Sealed()                 // owner: handles, oldest first
//	for it := ss[i].Entries(); ...   // background: unchanged bytes
//	t.DropSealed(ss[0])              // owner, meanwhile: off the read path only
//	t.UnpinSealed()                  // owner, after the task: memory back
//
// Pins are counted (two checkpoints may overlap). The cost is memory: a
// segment dropped while pinned is not reusable until the last unpin, so
// writes roll into new Pool segments meanwhile. Close releases everything
// whatever the count; the engine unpins first, once its readers are done.
//
// Note: Go's race detector does not see accesses to segment memory (it is
// mapped outside the Go heap), so the immutability of sealed segments is
// tested directly: checksums of every sealed segment, taken when it is
// sealed, are compared after random writes (TestSealedEntriesModel).
//
// # Scans
//
// The engine's key scan (Flink's getKeys, applyToAllKeys) walks every
// segment in entry order through an index of record offsets that it sorts
// itself and keeps across steps, with writes in between (ScanSegments,
// scan.go). A sealed segment's handle never changes. The active segment
// is read through a view that ScanSegments refreshes at each step: the
// scan indexes only the records appended since the last view
// (EntriesFrom its old length) and decodes every indexed record again when
// it reads it (LiveEntryAt), so a value rewritten in place shows its new
// bytes and a record marked FlagDead since is skipped. That is sound
// because an offset in a segment on the read path always starts the same
// record with the same key (invariants 1 and 5: records are only appended;
// an in-place write keeps a record's key and size, and its class: a value
// or tombstone stays a value or tombstone, a map entry an entry or entry
// tombstone, a chunk a chunk), and flags change in place only in ways that
// keep a record an entry or make it dead: FlagDead, FlagTomb on a map
// entry removed in place, FlagBase on a chunk ListReplace rewrote; a map
// header's FlagBase, the one flag that decides whether a record is an
// entry at all, is set only when the header is appended. Views are
// owner-only and die with the next write.
//
// # Maps (KMAP)
//
// MapIter walks segments newest first and, inside one, the header's chain
// newest first, skipping tombstoned entries and entries dead before it
// started; an entry of an older segment is yielded only if no newer
// segment's header had an entry record for its user key when it started
// (looked up with the stored hu32). It stops at a base header or key
// tombstone found when it was created; Complete reports whether it did
// (else the lower tiers may hold more entries). It iterates the map as it was when
// created, so writes during an iteration do not disturb it: it remembers
// the Table's Seq, the newest segment's bump pointer and that segment's
// header and chain head, never examines records appended since (they land
// past that bump pointer or in newer segments), and still yields an entry
// superseded since (its record keeps its bytes and carries a sequence
// number newer than the iteration's). In-place writes show through.
package fresh
