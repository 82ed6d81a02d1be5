// Package timer keeps the timers of Strata's timer services outside the Go heap, one queue per
// time domain of a service, partitioned by key group, as Flink's InternalTimerServiceImpl keeps
// its event-time and processing-time queues (KeyGroupPartitionedPriorityQueue over one
// HeapPriorityQueueSet per key group). It imports memory/ and internal/base only. The engine
// owns the queues (internal/engine, timers.go: made per service, frozen at a checkpoint's cut,
// written to checkpoints and the directory's timer file, restored by key group); the root's
// typed TimerService reaches them through it.
//
// # Terms
//
//   - Timer: (key group, key, namespace, timestamp), plus the key's 32-bit hash (the hash its
//     key group was assigned from, so the key comes back with the host's partitioning). At
//     most one timer per (key, namespace, timestamp) in a queue: adding it again is a no-op.
//   - Queue: the timers of one time domain (event time or processing time) of one service,
//     over a fixed range of key groups. Its order is (timestamp, key group, h, key,
//     namespace), h being Hash of the key's and namespace's 64-bit hashes and the timestamp:
//     fixed by the timer's bytes, so the same on every run, after restores and rescales —
//     not registration order (Flink's heap queue leaves ties unspecified).
//   - Group: one key group's part of a queue: one memory.Region (PurposeTimers), mapped when
//     the key group gets its first timer, holding an open-addressing set, an entry array and
//     an arena of records. The entry array holds the near entries at its front, a 4-ary
//     min-heap of the timers with timestamps up to the group's boundary, and the far entries
//     at its back, unordered, the timers after it.
//   - Refill: when the near heap runs empty, one streaming pass over the far entries moves
//     those up to a new boundary to the front and heapifies them: all of them when there are
//     at most 512, else those below a timestamp sampled (64 samples) so that about 1024 move.
//     So a registration beyond the boundary is an append, and the heap a pop sifts through
//     stays small enough to be cached whatever the number of timers (a lazy calendar queue
//     in front of the heap; 10 M timers in 128 key groups keep about 1 000 near entries per
//     group, not 78 000).
//   - Record: a timer's bytes in the arena, addressed by its offset (a ref; 0 = none), in a
//     slot of its size class (multiples of 8 bytes up to 256, powers of two above). A record
//     is written once and never moves until a rebuild copies the live ones. The slot of a
//     popped timer, or of a ghost once it leaves the heap, goes on its class's free list and
//     is reused by the next record of that class, so firing and registering at a steady rate
//     neither grows the arena nor needs compaction.
//   - Ghost: an entry (near or far) whose record was deleted (Delete marks the record dead and
//     leaves the entry; deleting from the middle of a heap would need the entry's position,
//     which every swap would have to write back into the record). A refill moves far ghosts
//     near like any entry; the near heap drops them when they reach its top; a compaction
//     drops the others.
//   - Compaction: a group's ghosts dropped in place: the near entries without ghosts slide to
//     the front and are heapified again, the far ones to the back, the ghosts' slots go on
//     their free lists. Records do not move, so the set stays; the heap's root is live and
//     stays. An Add that finds the entries or the arena full compacts when ghosts are at
//     least a quarter of the entries (else it grows the group: a rebuild), and a removal that
//     leaves more ghosts than live timers compacts. So deleting a timer and adding another,
//     as a session window extended by an event does (Flink's MergingWindowSet deletes the
//     merged window's cleanup timer and registers the new one), costs amortised O(1) and maps
//     nothing while the group's live count stays steady.
//   - Rebuild: a group's region replaced by a new one sized for its live timers (headroom
//     ×1.5), live records copied in heap order, ghosts dropped, free lists emptied, the set
//     rebuilt. Growth, shrinking and thawing (below) are all rebuilds; growth needs the live
//     timers (not ghosts) to fill the set to 3/4, or the entries or arena with ghosts under a
//     quarter of the entries, and shrinking needs the slots in use to fall under a quarter of
//     the arena's high-water mark: a group whose live count is steady never rebuilds.
//   - Snapshot: the groups of some queues frozen at a cut (Freeze), written in the background
//     as one section per key group (WriteTo), released by the owner (Release).
//
// # Group region
//
//	0                   8·setCap    +48                   +16·cap                       len
//	+-------------------+-----------+---------------------+-----------------------------+
//	| set: setCap slots | (padding) | entries: near heap  | arena: 8 reserved bytes,    |
//	|                   |           | [0,n) … far [cap−f, | then record slots up to     |
//	|                   |           | cap)                | alen                        |
//	+-------------------+-----------+---------------------+-----------------------------+
//	the padding puts the four children of every heap node in one cache line
//
//	slot (8 bytes)             heap entry (16 bytes)
//	+--------+--------+        +-----------+--------+--------+
//	| h u32  | ref u32|        | ts i64    | h u32  | ref u32|
//	+--------+--------+        +-----------+--------+--------+
//	ref 0: empty               children of i: 4i+1..4i+4, 64 bytes, one cache line
//
//	record (16 bytes + key + namespace; also the section format's timer, byte for byte)
//	0           8          12       14         16       16+k
//	+-----------+----------+--------+----------+--------+-----------+
//	| ts i64    | keyHash  | keyLen | D|nsLen  | key    | namespace |
//	|           | i32      | u16    | 1|15 bits|        |           |
//	+-----------+----------+--------+----------+--------+-----------+
//	little endian; D: dead (deleted); a live record has D = 0.
//
// The set is linear probing from h & (setCap−1), with backward-shift deletion (no
// tombstones); a slot matches on h first and only then reads the record. It holds exactly the
// live timers, at most 3/4 full. The near and far entries hold the live timers and the
// ghosts.
//
// # Order across key groups
//
// A Queue keeps its non-empty groups in a binary heap (on the Go heap, O(key groups)) ordered
// by (timestamp of the group's first timer, key group), as Flink's
// KeyGroupPartitionedPriorityQueue keeps a heap of the key groups' heads. Peek and Pop read
// its top; a change of a group's first timer re-sifts the group.
//
// # Snapshots (copy on write)
//
// Freeze marks every group with timers as frozen by the snapshot and records a view of its
// region (heap entries [0, n), arena): O(key groups), nothing copied. While frozen, the owner
// never writes that region: the first change of a frozen group (Add, Delete, Pop) rebuilds
// it into a new region first and hands the old one to the snapshot, which releases it once
// released itself. So a background WriteTo reads immutable memory, and the cut costs nothing
// per timer. A group not changed before Release is simply unfrozen.
//
// # Spare regions
//
// A released snapshot gives the regions it held back to their queue as spares instead of
// unmapping them, and the rebuild of a frozen group at the next cut takes a spare of the size
// it needs (at least its size, at most a quarter or a page more), cleared, before it maps a
// new one. Under a steady load every cut rebuilds the groups the job touches into regions of
// about the sizes the last cut freed, so each cut cost a map and an unmap per changed group:
// in the flight demo (a checkpoint every 50,000 events, 128 key groups, two queues) the unmaps
// alone were 1-1.5 % of the process's CPU, on the task's goroutine (2026-12-05). Bounds: at most
// one spare per key group, and the spares' bytes never above the groups' regions' (a queue
// that shrinks or drains releases spares down to that); a closed queue releases them, and a
// snapshot released after its queue closed unmaps. Spares stay counted in the budget
// (PurposeTimers) and in Queue.MappedBytes: memory the queue held at the last cut anyway.
//
// # Section format (a checkpoint's timer object holds one per key group; the Store's directory
// file holds a sequence of them)
//
//	0          8         10   11   12         16     18   20      24
//	+----------+---------+----+----+----------+------+----+-------+-------------+--------+
//	| magic    | version | ck | 0  | length   | kg   | 0  | count | count blocks| crc32c |
//	| STRATATM | u16 = 1 | =1 |    | u32      | u16  | u16| u32   |             | u32    |
//	+----------+---------+----+----+----------+------+----+-------+-------------+--------+
//	little endian; ck 1 = CRC32C (Castagnoli); length counts the payload, from kg to the last
//	block's end; crc32c covers every byte before it.
//
//	block: the timers of one service in one time domain
//	0         2        2+n      3+n    4+n     8+n
//	+---------+--------+--------+------+-------+----------------------+
//	| nameLen | name   | domain | 0    | count | count timers          |
//	| u16     |        | u8     | u8   | u32   | (records, as above)   |
//	+---------+--------+--------+------+-------+----------------------+
//	domain: 0 event time, 1 processing time (part of the format; do not change)
//
// Rules: count >= 1 blocks, in strictly increasing (name, domain) order; names not empty;
// every block holds at least one timer; a timer's D bit is 0; no byte after the last block.
// Every field has one encoding, so a section that decodes re-encodes (AppendSection, timers in
// their stored order) to the same bytes (FuzzSectionDecode). Checked in the order magic
// (ErrBadMagic; fewer than 8 bytes: ErrTruncated), header size (ErrTruncated), version
// (ErrFormatVersion), checksum type (ErrChecksumType), reserved byte, length (ErrTruncated if
// the bytes end early), CRC32C (ErrChecksum), then the payload (a field running past it:
// ErrTruncated; a rule broken: ErrCorruption alone) — each a *base.CorruptionError naming the
// file and the byte offset. Whether the key group and the timers' key hashes fit the reader's
// key groups, and whether a timer occurs twice, the caller checks (the decoder knows no
// MaxParallelism). testdata/section-v1.bin is the golden file. A snapshot writes timers in
// heap order, not sorted: a restore re-heaps them anyway.
//
// # Invariants
//
//  1. A queue is used by one goroutine at a time (the owner); only a Snapshot's WriteTo runs
//     elsewhere, and it reads only frozen regions.
//  2. The set holds exactly the live timers of its group, one slot each, at most 3/4 of
//     setCap; every live timer has exactly one entry, near or far; a ghost's record is marked
//     dead and is in no slot. A record is never written after it was appended, but for its D
//     bit; every arena slot below alen is either referenced by one entry or on one free list.
//  3. Near entries have ts <= boundary < the far entries' ts. The near entries are a 4-ary
//     min-heap in the queue's order, and its root, when n > 0, is live (every removal pops
//     the ghosts that reach the root, then refills an empty near heap from the far entries).
//     So n == 0 iff live == 0 (and then f == 0), and the group's first timer is heap[0].
//  4. The queue's group heap holds exactly the groups with n > 0, ordered by (heap[0].ts, key
//     group); Queue.pos[key group − kgStart] is the group's index in it, −1 when absent.
//  5. Memory: every group region is mapped through the queue's Budget (PurposeTimers, a
//     writer's purpose: never the transform reserve). After a removal, a region larger than a
//     page has slots in use of at least a quarter of its arena's high-water mark, or it is
//     rebuilt (a refused rebuild is tried at the next removal), and no more ghosts than live
//     timers, or it is compacted; a group without timers gives its region up unless it is one
//     page. So a group
//     holds O(live timers) bytes: about 1.5 × (16 + slot + 16) + 8 to 16 bytes per timer
//     after a rebuild (BenchmarkQueue reports it), at least one page per group with timers.
//     On the Go heap: a *group (about 250 bytes) per key group that ever had a timer, and the
//     group heap.
//  6. A change that fails (ErrMemoryBudget from a growth or a thaw) changes nothing.
//  7. A frozen region is not written by the owner; it is released exactly once, by the
//     snapshot's Release or, if the group rebuilt meanwhile, by the snapshot (it owns it
//     then). One snapshot at a time may freeze a group (a second Freeze of a frozen group is
//     a broken invariant).
//
// # What is not promised
//
// Timers are not ordered by registration. The queue does not check that timestamps grow or
// that a watermark never goes back: the root does what Flink's InternalTimerServiceImpl does.
// A group's rebuild maps its new region before releasing the old one, so a key group holding
// most of the timers needs twice its size for a moment (MaxParallelism 1 with millions of
// timers).
package timer
