// Package slice is the SliceTable, Strata's second tier: sealed FreshTable
// segments are transformed into immutable, L1-sized sorted slices, held in
// a power-of-two number of buckets by order-hash range, each bucket a chain
// of runs of slices, newest first; long chains are compacted in memory and
// cold slices are evicted, in batches, to the LSM store — after Huawei
// OmniStateStore's SliceTable.
//
// # Terms
//
//   - Entry: one version of a key (internal/base): order hash, key hash,
//     user-key hash, sequence number, kind, key, user key, value. Slices
//     hold entries in (Order, Key, UserKey, Seq descending) order.
//   - Slice: one immutable sorted run of entries in one block of the slice
//     size (or, for an entry too large for a block, in a page-rounded
//     region of its own): header, fingerprint array, offsets, records.
//   - Fingerprint: an entry's order hash, a uint64; the array is sorted and
//     searched by lowerBound (the hook for asm_arm64's NEON/SVE kernel),
//     then keys are compared in full. Order hashes are uniform within a
//     slice, so a point lookup first interpolates the rank and walks from
//     there (lowerBoundFP: one cache line, usually), searching by halves
//     only when the walk goes further than a few lines. A run keeps its
//     slices' largest order hashes in one array (run.maxs) that finds the
//     slice without touching the other slices' headers.
//   - Block: a slice-size piece of a memory.Pool segment
//     (memory.PurposeSlice), handed out by an Allocator.
//   - Segment: a Pool segment the Allocator holds while any of its blocks
//     is in use (or a relocation drains it); held segments cost budget
//     whether their blocks are used or not.
//   - Relocation: a job that copies slices out of a sparsely used segment
//     into free blocks of fuller ones, so the segment goes back to the
//     Pool ("Memory compaction" below).
//   - Bucket: the order hashes with the same top BucketBits bits. A key
//     group is a contiguous range of order hashes, so a key-group range is
//     a range of buckets (rescaling and savepoints stay range operations).
//   - Run: the slices one Build (or one compaction) produced for one
//     bucket: sorted, ascending, non-overlapping except that neighbours
//     may share their boundary order hash.
//   - Chain: a bucket's runs, newest first. Its length is counted in runs.
//   - Owner: the goroutine of the store's task. It calls every Table method
//     except the background functions Build, Compaction.Run, Eviction.Run
//     and Relocation.Run.
//   - Unit: a maximal group of adjacent slices of a run that share a
//     boundary order hash; eviction moves units, never parts of them.
//   - Snapshot: an immutable view of every slice installed when the owner
//     took it (Table.Snapshot), for a checkpoint to read on a background
//     goroutine: private copies of the slices' read-only fields, over
//     blocks the table does not give back to the Allocator until the last
//     open snapshot is released (pinned; invariant 16).
//
// # Slice layout
//
// All integers little endian. n = count.
//
//	0       4       6      7      8        12       16          24          32        40        48      52          64
//	+-------+-------+------+------+--------+--------+-----------+-----------+---------+---------+-------+-----------+
//	| magic | ver=2 | csum | 0    | size   | count  | min order | max order | min seq | max seq | crc32c| 0 (12 B)  |
//	| u32   | u16   | u8=1 | u8   | u32    | u32    | u64       | u64       | u64     | u64     | u32   |           |
//	+-------+-------+------+------+--------+--------+-----------+-----------+---------+---------+-------+-----------+
//	64                        64+8n                    64+12n                                        size
//	+-------------------------+------------------------+---------------------- ... ------------------+
//	| fps[n] u64 order hashes | offs[n] u32 record     | records, in entry order, tiling to size    |
//	| sorted ascending        | offsets from byte 0    |                                            |
//	+-------------------------+------------------------+---------------------- ... ------------------+
//	magic = 0x43494c53 ("SLIC"); csum 1 = CRC32C (Castagnoli) over bytes
//	[0, 48) and [52, size), i.e. everything but the CRC field itself.
//
//	record, key-level kinds (value 1, tombstone 2, list base 3, list append 4):
//	 +------+--------------------+-------------+-------------------------------+
//	 | kind | key part           | seq uvarint | value, to the record's end    |
//	 | u8   |                    |             | (the next record's offset, or |
//	 |      |                    |             | size for the last record)     |
//	 +------+--------------------+-------------+-------------------------------+
//
//	record, map kinds (map entry 5, map entry tombstone 6):
//	 +------+----------+---------------+----------+-------------+-------+
//	 | kind | key part | uklen uvarint | user key | seq uvarint | value |
//	 +------+----------+---------------+----------+-------------+-------+
//
//	key part: klen uvarint and the key (inline), or, when bit 7 of the kind
//	byte (0x80) is set, a uvarint d > 0: the key is that of the record d
//	bytes before this one, the slice's last record with an inline key. A
//	record's key is a reference exactly when the slice's last inline key is
//	the same (the older versions of a key, every entry of a map after the
//	first in the slice): a map's key is stored once per slice, not once per
//	entry.
//
//	Every uvarint is minimal, and a key equal to the last inline one is
//	always a reference (Decode refuses both other forms, so a decoded slice
//	re-encodes to the same bytes). An entry's Hash and UserHash are not
//	stored: they are pure functions of Key and UserKey (base invariant 2),
//	and Entry recomputes them (base.HashCompositeKey, base.HashUserKey);
//	only entries that leave the tier (eviction, snapshots) carry them.
//	A value entry of a 29-byte composite key costs 12 + 1 + 1 + 29 + 3 (seq
//	below 2^21) bytes besides its value: 46 against version 1's 64; a map
//	entry after its map's first costs 12 + 1 + 1 + 1 + 3 besides its user
//	key and value: 18 against 74.
//
//	Version 1 (no longer written or read) had fixed record headers: seq
//	u64, hash u64, kind u8, klen u16, vlen u32 (23 bytes), and for the map
//	kinds also uklen u16 and user hash u64 (33 bytes). Slices are never
//	persisted in this format — Store.Close moves them through eviction into
//	the LsmStore's table format (internal/engine/persist.go) — so no file
//	of version 1 exists to read; Decode refuses it with ErrFormatVersion.
//
// Blocks start on a 4 KiB boundary and the header is 64 bytes, so the
// fingerprint array starts on a cache line and is read in place as a
// []uint64 (little-endian hosts only; init checks). A lookup costs a
// lower bound over the fingerprints and, usually, one record touch (two for
// a key reference: the record holding the key, nearby and the same for a
// map's entries): the entries with the same order hash are binary-searched
// by (key, user key).
//
// # Table
//
//	buckets[order >> (64-BucketBits)]
//	  chain: run 0 (newest) ─► run 1 ─► … ─► run k (oldest: evictable)
//	         [slice][slice]    [slice]        [slice][slice][slice]
//	          ordered by key range inside a run; runs ordered by age
//
// Get, ListGet, MapGet and MapIter walk the chain newest run first; inside
// a run they binary-search the run's slices by order range, and only the
// slices whose range holds the order hash are searched. A read that
// resolves in a slice bumps that slice's hit counter. A map's entries share
// its order hash, so a large map spans many slices of a run: MapGet searches
// each of them (O(slices) per lookup), while MapIter and MapShadow position
// one cursor per run and search each slice once per iteration (the search
// for the map's clears stops where its key-level region ends), so a whole
// iteration is O(slices + entries). Stats.MapSearches counts the searches.
//
// # Invariants
//
//  1. A slice's header, fingerprints, offsets and records tile [0, size)
//     exactly: offs[0] = 64+12n, each record ends where the next begins
//     (its value runs to there), the last ends at size, and every record
//     holds at least its kind, its lengths, its keys and its seq. Decode
//     checks every bound before reading.
//  2. Entries are strictly increasing in (Order, Key, UserKey, Seq
//     descending); fps[i] is entry i's Order, so fps is sorted; the
//     header's order and sequence ranges are those of the entries.
//  3. Magic, version and checksum type are checked in that order, each
//     with its own error, then the CRC32C, then invariants 1 and 2; every
//     failure wraps base.ErrCorruption.
//  4. A slice's bytes never change after Build; a relocation may move
//     them, unchanged, to another block (same *Slice, same place in its
//     chain). The owner frees a slice (back to the Allocator) only once it
//     has left the table or never joined it, and only when no compaction
//     or eviction uses it (busy); a slice that leaves while a relocation
//     reads it (moving) keeps its block until the relocation ends.
//     Readers are the owner, and a MapIter notices a free or a move
//     through the table's generation counter.
//  5. A slice lies inside one bucket: Build cuts at bucket boundaries and
//     whenever the next entry does not fit the block. An entry that does
//     not fit an empty block gets an oversized slice of its own.
//  6. A chain's runs are ordered by sequence number without overlap:
//     every seq in run i is greater than every seq in run i+1. Install
//     refuses (ErrSeqOrder) a run that is not newer than its chain, and a
//     compaction replaces a contiguous range of runs by one run whose
//     sequence numbers lie inside the range's.
//  7. So the newest run holding a key-level version of a key decides Get;
//     inside a run the first version in entry order is the newest. For a
//     map, a key-level tombstone (clear or delete) in a run hides that
//     run's older entries of the map and every older run.
//  8. Eviction takes only slices of a chain's oldest run, in whole units:
//     for every key, what stays in the table is newer than what moves
//     below, so a Deleted or complete answer from the table is final.
//  9. Build, Compaction.Run, Eviction.Run and Relocation.Run read only
//     immutable slice bytes and immutable Table configuration and allocate
//     through the Allocator (a mutex per block); the slices they read are
//     busy or moving — no compaction or eviction takes a busy one, no
//     relocation takes a busy or moving one, nothing frees their blocks —
//     until the owner installs or cancels the job.
//  10. Compaction drops a tombstone only when its inputs end the chain and
//     no lower tier may hold data of the bucket (Options.LowerHolds for its
//     order hashes; without it, Options.LowerTier false and no eviction
//     picked so far); otherwise tombstones stay. Every kind of compaction
//     decides so (Table.nothingBelow).
//  11. Get, ListGet (with room in dst), MapGet and MapIter (chains of up to
//     8 runs) allocate nothing, take no lock and make no interface call;
//     the only write is a slice's hit counter.
//  12. Placement: a block comes from the most used held segment that has a
//     free block and is not draining; else from a draining one; a new
//     segment is taken from the Pool only when no held segment has a free
//     block. A segment goes back to the Pool when its last block is freed
//     and no relocation drains it.
//  13. A relocation drains at most relocSegs segments, each of whose
//     movable slices fit, at the pick, the free blocks of segments at
//     least as used less those claimed by the segments picked before it
//     in the same job; while it is pending no block of those segments
//     goes to a relocation, and a block of them goes to a build only
//     when no other held segment has one free (invariant 12).
//  14. A relocation moves a block only into a segment at least as used as
//     the one it drains (and never into new memory), so the sum over
//     segments of (blocks in use)² grows with every move: relocations
//     converge, they cannot shuttle slices back and forth.
//  15. At most one relocation per table is pending. Its slices are moving,
//     not busy: reads, compactions and evictions use them as usual;
//     InstallRelocation points a moved slice at its copy only if it is
//     still installed and in no other job, else it frees the copy (and,
//     for a slice that left the table, the old block).
//  16. While a Snapshot of the table is open (taken, not yet released),
//     the owner gives no block or oversized region back to the Allocator:
//     free (compaction and eviction installs, Release, a slice dropped
//     while moving) and the end of a relocation (a swapped slice's old
//     block, an unused copy) defer it to a list instead; it stays
//     allocated and counted by the Allocator and the Budget
//     (Stats.PinnedBytes) until the last open snapshot is released. A
//     snapshot's *Slice values are copies the owner never writes (a
//     relocation rebases the installed *Slice, not the copy), over blocks
//     whose bytes never change (invariant 4) and, not being free, are
//     never handed out again; so a snapshot is read from any goroutine
//     with no lock, and the read paths (invariant 11) carry no pin check.
//     Only background paths release directly — Build's abort and a
//     cancelled Relocation.Run's copies — whose memory no snapshot holds.
//  17. A run's filter (filter.go), when it has one, holds the order hash
//     of every entry its slices held when it joined the table (newRun);
//     slices only leave a run (eviction), and relocation moves their bytes
//     unchanged, so it stays a superset, and a read that the filter tells
//     the run holds no entry of an order hash skips the run (invariant 7
//     is unchanged: the run holds no version of the key). Its bytes are
//     charged to the budget (memory.PurposeSlice) from newRun until the
//     run leaves the table (compaction, its last slice evicted, Close); a
//     refused charge leaves the run without one, searched as before.
//
// # Concurrency
//
// One mechanism: the owner reads, installs and frees; background jobs only
// read immutable slices and build new ones (or copies). The owner marks a
// job's inputs busy (moving for a relocation) when it picks the job
// (PickCompaction, PickEviction, PickRelocation), a scheduler task runs it
// (Compaction.Run, Eviction.Run, Relocation.Run — or Build for a
// transform), and the owner installs or cancels the result at its next
// operation, only after Run has returned (or will never run). No goroutine
// is started here (only scheduler/ starts goroutines).
//
// # Snapshots
//
// A checkpoint pins the tier on the owner and writes it out on a
// scheduler task:
//
//	s := t.Snapshot()       // owner: O(slices) copies of views; pins
//	it := s.Iter()          // background: every version, entry order
//	t.ReleaseSnapshot(s)    // owner, after the task ended: deferred frees
//
// Iter merges one source per chain depth, not one per run: run d of every
// bucket, concatenated in bucket order, is sorted (a bucket is a range of
// order hashes), and a key's versions live in one bucket, whose depths are
// ordered newest first (invariant 6), so the merge has as many sources as
// the longest chain and yields every version, like Eviction.Run. Pinning
// has a cost: memory that leaves the table while a snapshot is open is
// not reusable until it is released — an eviction lowers MemBytes but
// frees nothing meanwhile, and builds take new blocks (or new segments
// from the Pool) — so the engine holds a snapshot only for the length of
// one checkpoint. Close releases open snapshots with everything else;
// the engine releases them first, once their readers are done.
//
// # Compaction
//
// PickCompaction proposes the longest chain above CompactionThreshold
// runs. It takes the newest runs, adding an older one while that run is at
// most twice the bytes already taken (size-tiered, so a big old run is not
// rewritten for each small new one), at least two. Run merges them
// (base.MergingIter, newest run first) and resolves every key with
// base.Resolver, the merge rules of internal/base (doc.go, "Merge rules"):
// the newest version wins; list operands join their base, a tombstone or —
// at the end of the chain with nothing below (Bottom) — nothing, into
// pieces of at most MaxListMerge bytes (MaxList, rule 4: one base batch
// when the list fits, else a chain of pieces); map
// entries older than the map's newest clear go; tombstones go only as
// invariant 10 allows (DropTombstones). The output is one run.
//
// The threshold is measured (BenchmarkGet: 256K keys, 64 buckets, a hit
// on a key in any run, amd64 EPYC, Go 1.26.8, a loaded 2-vCPU machine): a
// hit costs about 155 ns at chain length 1, 255 ns at 4 and 520 ns at 16
// (1.65× and 3.4×); a miss searches every run. Four runs keep a hit within
// 2× of a fully compacted chain, so the default threshold is 4.
//
// # Eviction
//
// A slice's score is its hits per second of age: (decayed hits + 1) /
// (age + HeatHalfLife), where hits halve every HeatHalfLife (folded when
// scored, so the read path only increments a counter) and the +1 and
// +HeatHalfLife keep a new, not yet read slice from looking coldest.
// Compaction output inherits its inputs' heat and the oldest input's age.
// When the slices hold more than HighWatermark bytes, PickEviction scores
// the units of every chain's oldest run (invariant 8), takes the coldest
// (mean score) until EvictionBatch bytes (4 MiB by default), and Run hands
// them to an base.Sink as one run in entry order with every version kept;
// InstallEviction then removes and frees them. The sink (the LSM store)
// writes them as one sorted file; here a test sink proves the choice.
//
// # Memory compaction
//
// Compactions and evictions free blocks all over the allocator's
// segments, and a segment goes back to the Pool only when all of its
// blocks are free: measured in TestManySegments (internal/engine; 16 MiB
// segments of 1,024 blocks), 1,770 blocks in use held five segments with
// 3,350 free blocks inside them, so state that fits a budget did not.
// Two mechanisms keep held segments near ceil(blocks / blocks per segment):
//
//   - Placement (invariant 12): builds fill the most used segment first, so
//     lightly used ones drain as their slices are compacted or evicted.
//     Held segments sit in lists by blocks in use with a two-level bitmap
//     of the non-empty lists, so choosing one is O(1), not a scan.
//   - Relocation: when the free blocks inside partly used segments exceed
//     one segment's worth, PickRelocation proposes to empty the least used
//     segments (up to relocSegs in one job) holding slices of the table
//     that are not busy and fit the free blocks of segments at least as
//     used. One segment per job did not keep up with slice compactions
//     freeing blocks everywhere: the flight demo at 64 MiB (4 MiB
//     segments) evicted with 13 segments held for 2,003 blocks in use and
//     1,325 free (20 MiB of slack) while a one-segment relocation ran. Relocation.Run copies them
//     (a memcpy per slice, no decoding: the bytes, CRC included, are
//     position-independent) into those segments, fullest first;
//     InstallRelocation swaps each slice's memory for its copy and frees
//     the old block, and the drained segment goes back to the Pool.
//
// Scheduling follows the other jobs (and invariants 13-15):
//
//	r, ok := t.PickRelocation()     // owner: marks slices moving, segment draining
//	err := r.Run(ctx)               // background: copies; never maps memory
//	t.InstallRelocation(r)          // owner, after Run returned: swap, free
//	t.CancelRelocation(r)           // owner, instead (Run failed or never ran)
//
// A relocation never delays a compaction or an eviction: they may take
// its slices meanwhile, and it gives way (invariant 15). Run may move
// fewer slices than picked (Moved) when builds fill the receiving blocks
// first; a later pick sees the new state. Close with a relocation pending
// frees what no job uses; InstallRelocation (base.ErrClosed) or
// CancelRelocation afterwards frees the rest. After relocations to a fixed
// point with no job pending, a table alone on its allocator holds at most
// ceil(blocks / blocks per segment) + 1 segments (TestFragmentation), and
// the free blocks are then at most one segment's worth.
//
// Measured with TestManySegments and a relocation picked after every job
// (an unmerged harness, 5 runs each): without relocations the allocator
// held 3 segments at its sampled peak (1,640 blocks) and 3 after the final
// drain (964 blocks, 2,108 free); with them 2 at the peak (2,024 blocks,
// 24 free) and after the drain 2 for about 1,550 blocks or 1 for 979,
// moving 730-920 slices in 2-4 jobs; writers waited for memory 27 times
// instead of about 130.
//
// # TTL sweep
//
// With Options.Expiry set, the builder notes every entry it packs (Build,
// compaction output) in the summary of its slice (base.Expiry: earliest and
// latest expiry instant of its TTL data, and its bytes; kept in memory
// beside the slice, not in its bytes, so a relocation keeps it and the
// format does not change). PickExpired proposes one compaction per run
// holding a slice whose earliest instant has passed: the run alone is
// merged through the Options.NewFilter filter (sweep = true), which removes
// what has expired, so the work is proportional to the runs that hold
// expired data, not to the table. Invariants:
//
//  1. A sweep job is a Compaction of one run: same busy marks, Run,
//     InstallCompaction and CancelCompaction, so invariants 6-10 and 16
//     (snapshots defer frees) hold for it unchanged.
//  2. It drops expired data (and tombstones) only when its run ends the
//     chain and Options.LowerHolds says nothing lies below the bucket's
//     order hashes; while the job is in flight nothing can be put below:
//     evictions take each chain's oldest run first (invariant 8) and that
//     run is busy. Otherwise expired versions become tombstones.
//  3. After a sweep job at time T, the output's earliest instant is after
//     the filter's clock: PickExpired does not pick it again before new
//     data expires (the filter and Expiry skip the same unparsable data).
//
// # Slice size
//
// DefaultSliceSize is 16 KiB. Measured with the benchmarks above on the
// same machine, median of 3 (ns per Get hit at chain 1 / 4 / 16; Build
// throughput of a 256K-entry transform; block bytes per 64-byte entry):
//
//	slice   Get c=1   Get c=4   Get c=16   Build        mem/entry
//	16 KiB  157 ns    350 ns*   900 ns*    1660 MB/s    73.4 B
//	20 KiB  152 ns    251 ns    520 ns     1120 MB/s    74.3 B
//	32 KiB  230 ns    263 ns    541 ns     1000 MB/s    74.0 B
//	* disturbed by another process (spread 270-490 and 790-1480 ns)
//
// 16 and 20 KiB read alike on a compacted chain and 32 KiB is slower
// (a longer fingerprint array and a record area larger than the 48 KiB
// L1D of the machine measured); 16 KiB builds fastest, wastes least in the
// last, partly filled slice of each bucket's run, and leaves room in a
// 64 KiB L1D (Neoverse) for the FreshTable's index groups. The figures come
// from a loaded machine and should be re-taken on a quiet one; the
// allocator accepts 4-256 KiB so that is one option away.
//
// # Staged lookups (prefetch.go)
//
// PrefetchBatch walks the Get path of many order hashes in lock step (the run's maxOrder line
// of every key, then the slice headers, the fingerprints and offsets at the interpolated
// ranks, the records), so that each step issues one independent cache miss per key; a Get after it finds
// its lines in the cache. It reads only what Get reads, writes only Table.sink (so the loads
// are not elided), and counts no hits: skipping it changes no result.
//
// # Not built yet
//
// Wiring into the root package (reads: active segment → sealed segments →
// slices → LSM; transforms through the scheduler; relocations)
// and block size classes: a transform cuts a slice at every bucket
// boundary, so each bucket's run ends in a partly filled block (about half
// a block per bucket per run); BucketBits should be sized so a transform
// gives each bucket several slices. On arm64 lowerBound is
// asm_arm64.LowerBound (search_arm64.go); elsewhere the Go twin.
package slice
