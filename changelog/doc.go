// Package changelog is Strata's durable short-term log of state changes (Flink's DSTL,
// FLIP-158): every change the engine applies is also appended here as a small record; the
// records of all Stores of a process are persisted together, in batches, as one object per
// persist; a checkpoint references only its Store's segments of those objects; a restore
// replays them after loading the materialized snapshot. It imports only internal/base,
// checkpoint, memory, internal/vfs (the restore cache's files) and the standard library, and
// starts no goroutine: the engine's scheduler asks Writer.PersistDue and calls Writer.Persist.
//
// # Terms
//
//   - Record: one state change: the engine's op kind, its sequence number, the composite key
//     (which begins with its key group), the map user key, the value — the last two only for
//     the kinds that have them.
//   - Log: one Store's part of a Writer: its buffer, its persisted segments' handles.
//   - Writer: the buffer of one process (Flink's per-TaskManager
//     BatchingStateChangeUploadScheduler), shared by its Stores as a memory budget is.
//   - Segment: the records of one Log persisted by one Persist, a byte range of an object.
//   - Object: what one Persist stores: "<prefix>/changelog/<n:20>-<rand:16 hex>.log".
//   - Handle: a checkpoint.Object{Kind: KindChangelog, Packed: true} naming one segment.
//     For changelog handles MinOrder and MaxOrder hold the segment's smallest and largest
//     sequence numbers (they are order hashes for tables).
//
// # Object layout (format versions 1 and 2)
//
// All integers little endian. The composite key begins with its key group big endian
// (base.KeyGroupOf). Writers write version 2; decoders read both. The version is per object
// (header and trailer carry it, and must agree); the two differ only in the record encoding.
//
//	0          8         10   11   12
//	+----------+---------+----+----+-----------+-----------+-----+--------+---------+
//	| magic    | version | ck | 0  | segment 0 | segment 1 | ... | footer | trailer |
//	| STRATACL | u16 1|2 | =1 |    |           |           |     |        | 20 B    |
//	+----------+---------+----+----+-----------+-----------+-----+--------+---------+
//	ck 1 = CRC32C (Castagnoli)
//
//	segment (Length bytes at Offset; its CRC32C is in the footer and in its handle):
//	+---------+----------+----------+-----+
//	| count   | record 0 | record 1 | ... |     records of one Store, seq not decreasing
//	| u32     |          |          |     |
//	+---------+----------+----------+-----+
//
//	kind: the engine's OpKind, 1 put, 2 delete, 3 list-append, 4 list-replace,
//	      5 list-delete, 6 map-put, 7 map-remove, 8 map-clear (part of the format; do not
//	      change).
//
// Record, version 2 (written since issue 22: 3 to 5 bytes of framing a record, not 14):
//
//	0      1
//	+------+---------+--------+-----+ - - - - + - - - - - + - - - - + - - - - +
//	| kind | seq     | keyLen | key | ukLen   | userKey   | valLen  | value   |
//	| u8   | delta   | uvarint|     | uvarint |           | uvarint |         |
//	|      | uvarint |        |     |   only kinds 6, 7   | only kinds 1, 3, 4, 6
//	+------+---------+--------+-----+ - - - - + - - - - - + - - - - + - - - - +
//	seq delta: the record's seq minus the previous record's of the segment; the first
//	      record's is from the segment's MinSeq (its footer entry), so it is 0.
//	fields by kind (kindFields; part of the format; do not change):
//	      1 put, 3 list-append, 4 list-replace    key, value
//	      2 delete, 5 list-delete, 8 map-clear    key
//	      6 map-put                               key, user key, value
//	      7 map-remove                            key, user key
//	      A field a kind does not carry has no length either; Append refuses a record that
//	      gives one. The key group is not stored: it is base.KeyGroupOf(key), and must lie
//	      in the footer entry's range.
//
// Record, version 1 (read only; testdata/CHANGELOG-v1):
//
//	0      1      3        11
//	+------+------+--------+--------+-----+--------+---------+--------+-------+
//	| kind | kg   | seq    | keyLen | key | ukLen  | userKey | valLen | value |
//	| u8   | u16  | u64    | uvarint|     | uvarint|         | uvarint|       |
//	+------+------+--------+--------+-----+--------+---------+--------+-------+
//	every kind carries all three lengths (0 when unused). kg == base.KeyGroupOf(key),
//	always (FLINK-26063 logged timers under the wrong key group).
//
//	footer:
//	+-------+---------+---------+-----+
//	| count | entry 0 | entry 1 | ... |
//	| u32   |         |         |     |
//	+-------+---------+---------+-----+
//	entry (46 bytes + store id):
//	0        2       2+n     +2      +4      +12     +20     +28     +36     +40    +44
//	+--------+-------+-------+-------+-------+-------+-------+-------+-------+------+
//	| idLen  | store | kg    | kg    | min   | max   | offset| length| count | crc  |
//	| u16    | id    | start | end   | seq   | seq   | u64   | u64   | u32   | u32  |
//	|        |       | u16   | u16   | u64   | u64   |       |       |       |      |
//	+--------+-------+-------+-------+-------+-------+-------+-------+-------+------+
//	store id: the Store's checkpoint owner (checkpoint.ValidateOwner); kg start..end: the
//	smallest and largest key group of its records; crc: CRC32C of the segment's bytes.
//
//	trailer (the object's last 20 bytes):
//	0          4         6    7    8         12         20
//	+----------+---------+----+----+---------+----------+
//	| footer   | version | ck | 0  | crc32c  | magic    |
//	| length   | u16 1|2 | =1 |    | u32     | STRATACL |
//	| u32      |         |    |    |         |          |
//	+----------+---------+----+----+---------+----------+
//	crc32c covers the footer and the trailer's first 8 bytes.
//
// A restore of one Store reads the trailer and footer (the object's last 64 KiB in one ranged
// read, more only for a larger footer) and then only the byte ranges of its own segments,
// adjacent ones in one read — never the whole object (FLINK-27155), and each object's footer
// once per Replay however many segments point into it.
//
// Decoding checks, in order: magic (base.ErrBadMagic), version (base.ErrFormatVersion),
// checksum type (base.ErrChecksumType), the footer length against the object
// (base.ErrTruncated: needed to find the bytes the CRC covers), the CRC (base.ErrChecksum),
// then bounds (base.ErrTruncated) and rules (no specific cause): entries inside the data,
// valid store ids, ranges ordered, counts possible for the bytes (a record takes at least 14
// bytes in version 1, 5 in version 2); in a segment, its CRC, then each record's bounds, kind
// (version 2: first, since it says which fields follow), the key group of its key (version 1:
// equal to the stored one), key group and seq inside the entry's ranges (version 2: no seq
// past 2^64-1), seqs not decreasing, the count, no trailing bytes. DecodeObject also checks
// that header and trailer give the same version. Each failure is a *base.CorruptionError
// naming the object and the byte offset. Decoders never panic and allocate at most about their
// input (a footer's entry count is checked against its length before the entries are
// allocated; records alias the input). The golden files testdata/CHANGELOG-v1 (frozen:
// checkpoints written before version 2 hold it) and testdata/CHANGELOG-v2 pin the formats
// (TestGolden; -update rewrites v2 only); FuzzDecodeRecord, FuzzDecodeSegment and
// FuzzDecodeObject fuzz the decoders in both versions. A restore's Batch keeps each record's
// seq beside its offset, so a version 2 record is decoded again alone (Batch.Record).
//
// # Writer protocol
//
//  1. Log.Append runs on its Store's goroutine: checks the record, takes the Log's mutex
//     (contended only by the once-per-persist swap), encodes the record in place into the
//     Log's current chunk (see "Record buffer") — its seq as the delta from the batch's
//     previous record, its maxSeq, read under that mutex; 0 for the first record after a swap,
//     which begins its segment — and every 16 KiB charges the granule to the
//     Writer's buffered count and the memory.Budget (PurposeChangelog). A refusal — the
//     Budget's, or Threshold bytes buffered — is a preallocated error matching
//     memory.ErrMemoryBudget: the engine applies backpressure (wait for a persist, retry).
//     No allocation, also in a new Log: chunks come from the Writer's idle ones. Log.Reserve
//     charges the room for one record ahead (a granule at a time, into the Log's reserved
//     room, which a Persist's swap does not take) and is refused the same way: a Store
//     reserves before it changes its tables, so a full buffer refuses a write before it is
//     applied, and the Append after it draws on the reservation and is not refused for
//     memory. Unreserve returns unused room.
//     Owner batch (Log.OwnerBatch, what the engine uses; issue 22): Append takes no mutex.
//     It encodes into the Log's owner batch, which only the owner touches, with the same
//     rules (delta 0 for the owner batch's first record, the same charging and reservation
//     draw), and Log.Publish — called by the owner, once per persist, not per record — moves
//     the owner batch into the Log's current batch under the mutex (merged after records
//     published before and not yet swapped, noting the join as Persist's merge does). Until
//     published a record is invisible to Persist, Checkpoint, Handles, LastSeq and Stats; the
//     owner publishes before it asks for a persist, at a checkpoint cut and before a
//     generation ends. Append still marks the Writer dirty (one atomic load per record, a
//     store only when it was clear), so PersistDue's age counts unpublished records too.
//  2. Writer.PersistDue(now) is true when the buffered bytes reach PreemptiveThreshold or
//     records have waited PersistDelay (measured from the first PersistDue call that saw them).
//  3. Writer.Persist (one at a time) swaps every Log's chunk list out under the Log's mutex,
//     links it after the Log's records a failed persist left pending (noting the join: the
//     linked batch's first record was encoded with delta 0, and its copy gets its delta from
//     the pending records' last seq), copies the chunks' bytes into one object with one
//     segment per Log with records, and Puts it under a new
//     name (never reused, also after a failure). On success each Log gets a handle, its
//     PersistedUpTo rises to the last seq it had at the swap, the charge is refunded and the
//     chunks go back to the Writer's idle list; on failure everything stays pending, charged,
//     and goes out with the next Persist.
//  4. A checkpoint cut at seq S calls Log.Checkpoint(ctx, S) (Persist if a record <= S is
//     buffered, then Handles(S)): the handles of every persisted, not truncated segment with
//     records <= S. Segments may hold records above S; the restore skips them (ReplayRange).
//  5. After a materialization covering seqs < M completes, Log.Truncate(M) drops the handles
//     of segments entirely below M. Objects are deleted by checkpoint's GC, by reachability.
//  6. Log.Stats counts the records and bytes Append took (under the Log's mutex; with an owner
//     batch, at Publish) and those of the segments Persist stored for the Log (under the
//     handles' mutex): the engine's changelog figures. Counting costs Append two additions, no allocation.
//
// # Record buffer
//
// A Log buffers its records in chunks of 64 KiB (chunkSize) mapped outside the Go heap
// (memory.MapScratch): a record is encoded straight into the current chunk (putRecord, no
// append), and one that does not fit continues in the next chunk — records span chunks, a
// segment is the chunks' used bytes concatenated. A chunk is owned by one batch (a Log's
// current records or its pending ones) or idle in its Writer's list, from which Append takes
// the next one (a mutex per chunk, not per record) and to which Persist and Close give them
// back. The Go heap buffer this replaces grew by append in every new Log — one per
// materialization, a changelog generation — and after every larger batch: a third of the
// changelog's task CPU in the flight demo went to growslice.
//
//	Log.cur:  head ─► [rec rec re|c rec rec ... ] ─► [rec rec rec ....free....] ◄─ tail
//	                   chunk 64 KiB, n bytes used      Append writes at tail.n
//
// The chunks' memory is not charged to the Budget (their used bytes are, in granules, as
// records); the Writer keeps at most Threshold bytes of idle chunks (at least 16) and unmaps
// the rest, so a steady load maps nothing, and a Writer's chunks take at most about twice
// Threshold plus a chunk per Log outside the budget.
//
// # Invariants
//
//  1. A record's key group is its key's (Append refuses otherwise; decoding reports damage).
//  2. Within a Log, sequence numbers do not decrease: in the buffer, in each segment, and
//     across the segments of successive persists (failed persists' records go first).
//  3. Every record appended and not refused is, at any time, in exactly one of: the Log's
//     buffer, its pending batch, or a persisted segment whose handle the Log holds until
//     Truncate — a failed Put loses nothing.
//  4. A handle is returned only after Storage.Put returned nil: the object is durable and
//     whole (checkpoint.Storage's atomicity), so a handle is never half-readable after a
//     crash (TestCrashPersist).
//  5. Charged bytes = the Writer's buffered count = the Budget's UsedBy(PurposeChangelog)
//     from this Writer = every Log's owner batch, buffer, pending batch and reserved room;
//     Persist refunds exactly what it stored, Log.Unreserve the reserved room, Log.Close and
//     Writer.Close what they drop.
//  6. Replay never yields a record outside its key-group range, and yields records in seq
//     order (stable across segments for equal seqs).
//  7. A chunk is in exactly one place: a Log's owner batch, its current batch, its pending
//     batch, or its Writer's idle list (or unmapped); only the Log's owner writes into a
//     chunk — of the current batch only under the Log's mutex, of the owner batch (which
//     nothing else reads) without it — and Publish hands an owner batch's chunks over under
//     the mutex, after which the owner never writes to them; so Persist reads a swapped-out
//     chunk that no Append touches.
//  8. With an owner batch, every record appended and not refused is in the owner batch
//     until the owner's next Publish, then as in invariant 3; charged bytes (invariant 5)
//     include the owner batch's. Close and Writer.Close drop an owner batch too, so they must
//     not run concurrently with that Log's Append (the engine closes its Logs on its owner
//     goroutine).
//
// # What is not promised
//
// Replay holds every fetched segment of a call in memory until it ends (records are sorted
// across objects). Across calls an object is fetched once only when the caller replays
// through a Cache's Reader (cache.go); without one each call reads its own segments. A Store restored from a
// checkpoint gets a new Log: its old handles come from the manifest, not from the Log. The
// age part of PersistDue is as precise as the scheduler's polling. The Budget is charged in
// 16 KiB granules per Log, so a Writer may be refused up to one granule per Log early.
// An owner batch's records wait for the owner's next Publish: an owner that stops appending
// without publishing leaves them unpersisted (the engine publishes at every checkpoint cut,
// so no checkpoint misses them) and charged — with a Writer shared by several Stores, against
// the Threshold of all of them (the engine publishes at least every 64 writes while a persist
// is due, so an idle Store holds at most what it appended since).
package changelog
