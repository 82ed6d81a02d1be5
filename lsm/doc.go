// Package lsm is the LsmStore, Strata's third tier: immutable table files
// (package lsm/sstable) arranged in levels, named by a manifest of versions,
// merged by background compaction with a compaction filter. The SliceTable
// evicts its cold batches here (WriteL0 + InstallL0); reads that miss the
// FreshTable and the SliceTable end here (Get, MapRange).
//
// The design follows LevelDB/RocksDB/Pebble leveled LSMs (version edits in a
// manifest, CURRENT, L0 of overlapping files, L1+ of disjoint files, size
// ratio between levels) re-cut for Strata's entry order and its merge
// operands; the code is our own.
//
// # Terms
//
//   - Table (file): an sstable, "<num>.sst", immutable once written. Its
//     FileMeta (number, size, entry counts, [MinOrder, MaxOrder],
//     [MinSeq, MaxSeq]) is what the manifest records.
//   - Clip (range): a table's FileMeta [MinOrder, MaxOrder]. For a table the
//     DB wrote it is its file's Order range; Import may narrow it (key-group
//     rescaling: the Store owns a range of order hashes). The table then
//     holds only its file's entries in that range: reads never see the
//     others and compaction drops them (invariant 14, "Clipping").
//   - Snapshot: a version pinned by Snapshot until ReleaseSnapshot, so that a
//     checkpoint can hard-link or upload its tables ("Snapshots").
//   - Import: building a new DB directory from table files the caller placed
//     there (the tables of one or several snapshots), each clipped, with one
//     persist point ("Import").
//   - File number: one counter for tables and manifests (nextFile), never
//     reused within a directory's life (recovery restarts it above every
//     number in the manifest and in the directory).
//   - Level: L0 holds files in install order, newest first, whose Order
//     ranges may overlap; L1 … L(NumLevels-1) each hold files sorted by
//     MinOrder with disjoint inclusive Order ranges.
//   - Edit: one manifest record — files added (level, FileMeta), files
//     deleted (level, number), next file number, last sequence number.
//   - Version: an immutable set of files by level. The DB's current version
//     is the result of replaying every edit.
//   - Persist point: a manifest record (Persist) marking the version after
//     it as the one a crash or reopen recovers, with the caller's last
//     sequence number and metadata. The persisted version is the current
//     version as of the last persist point. Installs between persist points
//     are visible to reads of the running DB but not recovered: the store
//     (eviction into L0 between checkpoints, compaction) must reopen to
//     exactly its last persistence point (Close, later checkpoints).
//   - Owner: the goroutine that calls Get, GetLoc, ReadAt, MapRange, InstallL0,
//     PickCompaction, InstallCompaction, Persist, PersistedMeta, Metrics,
//     Snapshot, ReleaseSnapshot, Sync and Close (the store's task thread). Background: WriteL0 and CompactionJob.Run.
//   - Bottom (for a compaction): no level below the output level holds a file
//     overlapping the job's Order range.
//
// # Files in the directory
//
//	LOCK              flock(2)ed by the open DB (vfs.FS.Lock) from Open to
//	                  Close; empty, never deleted
//	CURRENT           names the live manifest and its last persist point
//	                  (replaced atomically)
//	CURRENT.tmp       CURRENT being written; deleted by Open
//	MANIFEST-000007   edits, appended and synced one record per install or
//	                  persist point
//	000012.sst        tables
//
// Open first takes LOCK: while a DB has the directory open, another Open —
// in this process or another one — fails with ErrLocked before reading or
// changing anything (invariant 12). After a clean recovery (invariant 11)
// Open deletes every table, manifest and temporary file the recovered state
// does not use; names it did not write are left alone.
//
// # CURRENT layout (56 bytes, format version 2)
//
//	0        8        10  11  12       16         24         32
//	+--------+--------+---+---+--------+----------+----------+
//	| magic  |version |ck |000| hdrcrc | manifest | synced   |
//	|STRATACU| u16=2  |=1 |   | u32    | num u64  | len u64  |
//	+--------+--------+---+---+--------+----------+----------+
//	32         40         48         52       56
//	+----------+----------+----------+--------+
//	| persist  | persist  | persist  | crc    |
//	| end u64  | seq u64  | rec crc  | u32    |
//	+----------+----------+----------+--------+
//	all little endian; hdrcrc = CRC32C(bytes 0..12); crc = CRC32C(bytes
//	0..52); ck 1 = CRC32C.
//	synced len   the manifest's length (a record boundary) when CURRENT
//	             was written: every byte below it had been synced.
//	persist end  the offset just past the last persist-point record in the
//	             manifest then (0: none; 16+12 <= end <= synced len);
//	persist seq  that record's lastSeq; rec crc its payload CRC32C (0 and 0
//	             without one). Together they identify the record.
//
// Version 1 (28 bytes: the header, the manifest number, crc) named only the
// manifest; nothing written with it shipped, and this code refuses it
// (base.ErrFormatVersion). The manifest format stays version 1.
//
// CURRENT is replaced, never rewritten: write CURRENT.tmp, Sync, Rename over
// CURRENT, Sync the directory — by every manifest rewrite and by every
// Persist (after its record is synced), so CURRENT always names the last
// persist point that Persist reported.
//
// # Manifest layout
//
//	file header (16 bytes), then records back to back:
//	0        8        10  11  12       16
//	+--------+--------+---+---+--------+
//	| magic  |version |ck |000| hdrcrc |    magic "STRATAMF", version 1,
//	|STRATAMF| u16=1  |=1 |   | u32    |    checksum type 1 = CRC32C
//	+--------+--------+---+---+--------+
//
//	record:
//	0          4          8          12
//	+----------+----------+----------+---------------------+
//	| length   | lencrc   | crc      | payload (length B)  |
//	| u32 LE   | u32 LE   | u32 LE   | one edit            |
//	+----------+----------+----------+---------------------+
//	lencrc = CRC32C(the 4 length bytes)   crc = CRC32C(payload)
//	length <= 64 MiB
//
//	edit payload: fields, each a uvarint tag and its values, any order;
//	tags are part of the format:
//	  1 next file number      uvarint
//	  2 last sequence number  uvarint
//	  3 add file              level uvarint, num uvarint, size uvarint,
//	                          entries uvarint, blocks uvarint,
//	                          tombstones uvarint, minOrder u64 LE,
//	                          maxOrder u64 LE, minSeq uvarint, maxSeq uvarint
//	  4 delete file           level uvarint, num uvarint
//	  5 persist point         lastSeq uvarint, metaLen uvarint,
//	                          meta (metaLen bytes, <= MaxPersistMeta = 16 MiB)
//	deletions apply before additions, and a persist point marks the version
//	after both; an unknown tag, a truncated field, a duplicate counter or
//	persist field, level >= MaxLevels (16), file number 0, an inverted range
//	or metaLen > 16 MiB is corruption. The tag values are part of the file
//	format; do not change.
//
//	persist-point record as Persist appends it (one edit):
//	+----+---------+----+---------+----+---------+--------+-------------+
//	| 01 | nextFile| 02 | lastSeq | 05 | lastSeq | metaLen| meta bytes  |
//	|    | uvarint |    | uvarint |    | uvarint | uvarint| (opaque)    |
//	+----+---------+----+---------+----+---------+--------+-------------+
//
// # Manifest rewrites
//
// A new manifest is written by Open, by an edit or Sync after a failed
// manifest write, once the manifest exceeds MaxManifestBytes, and by a
// Persist in those cases. Its records (each at most 1 MiB of file records;
// L0 files oldest first, so replay rebuilds newest-first order):
//
//	after a persist point:  snapshot of the persisted version (counters,
//	                        add-file records) │ its persist-point record │
//	                        the edits from it to the current version
//	                        (deletions, then additions) │ the new edit
//	Persist rewriting:      snapshot of the current version │ the new
//	                        persist-point record
//	no persist point yet:   snapshot of the current version │ the new edit
//
// So a rewrite keeps both what recovery needs (the persisted version) and
// what the running DB has installed since. The edits from the persisted to
// the current version exist because L0 only gains files at the front: the
// persisted L0 files still current are its oldest; the DB rebuilds the
// current version from the records before writing them and panics on a
// mismatch.
//
// # Torn tails
//
// A crash can tear only the record being appended (every acknowledged record
// was synced before the next was written). Recovery therefore tolerates a
// damaged record only where no complete record can follow it:
//
//	fewer than 12 bytes left                        → torn header, stop
//	lencrc wrong, every byte to the end zero       → unwritten tail, stop
//	lencrc right, payload runs past the end        → torn payload, stop
//	crc wrong and the record ends exactly at EOF   → torn payload, stop
//	anything else (lencrc wrong with data after,
//	  crc wrong with data after, a bad edit)        → *base.CorruptionError{file, offset}
//
// The length's own checksum is what lets a bit flip in a middle record's
// length be reported instead of being mistaken for a torn tail.
//
// A tail cut off or damaged at the end looks the same whether a crash tore
// an unsynced record or the medium lost synced ones (truncation, lost
// sectors); only the second loses acknowledged state. CURRENT tells them
// apart: it records how much of the manifest was synced when it was written
// and which record is the last persist point. Damage is a torn tail only
// beyond both; a manifest whose valid records stop before CURRENT's synced
// length, or that lacks the persist-point record CURRENT names (same end
// offset, lastSeq and payload CRC), is a *base.CorruptionError naming the
// manifest and that record's end offset — never a silent rollback to an
// older persist point or to an empty DB. (A flipped bit in the last
// record's payload is still taken for a torn write when that record lies
// beyond what CURRENT names: an install after the last persist point.)
//
// # Recovery
//
// Open takes LOCK (ErrLocked if held), reads CURRENT (layout checked: size,
// magic, version, checksum type, CRCs, field ranges), reads the manifest it
// names and replays its records in order; an edit that does not apply (a
// deleted file absent, an added file present) is corruption at that record's
// offset, and the replayed and the persisted version must satisfy the level
// invariants. The manifest must hold every record CURRENT vouches for: its
// valid records reach CURRENT's synced length, and the persist-point record
// CURRENT names is among them ("Torn tails"); otherwise Open fails with
// corruption. The recovered version is the one as of the LAST persist-point
// record — the one CURRENT names, or a later one whose Persist was cut off
// between its manifest sync and its CURRENT rename — (its lastSeq becomes
// LastSeq, its metadata PersistedMeta); the edits after it are ignored, and
// a manifest without a persist point (CURRENT names none) recovers an empty
// DB. Every table of the recovered
// version must exist with its recorded size and open (sstable.Open checks
// header, footer, index, filter). Open then writes a new manifest (see
// "Manifest rewrites"), points CURRENT at it, and deletes every table not in
// the recovered version (so the tables of ignored edits), every other
// manifest and CURRENT.tmp. A directory without CURRENT is a new DB, unless it holds
// tables: then CURRENT was lost, which is corruption, and nothing is deleted.
// (A torn Import looks the same and is refused the same way; its caller
// deletes the directory and imports again — "Import".)
// Any recovery error returns before anything is deleted (invariant 11).
//
// # Invariants
//
//  1. The manifest named by CURRENT, replayed, yields the current version of
//     the last Open, plus every edit the DB reported as installed since; its
//     last persist-point record is the last one Persist reported (or one whose
//     Persist failed: its fate is unknown). An install or persist point is
//     reported only after its record (or a new manifest holding it and the
//     CURRENT pointing there) is synced and the directory synced.
//  2. A table is named by a manifest record only after the table and its
//     directory entry were synced (WriteL0 and Run sync the directory).
//  3. L0 is in install order, newest first. L1+ files are sorted by MinOrder
//     and their inclusive ranges are disjoint: compaction outputs are cut
//     only between two different Orders, so one Order (one map) never spans
//     two files of a level.
//  4. A file number appears at most once in a version.
//  5. Per (Order, Key), every entry in level i is newer (larger Seq) than
//     every entry in level j > i, and within L0 a newer file holds newer
//     entries. It holds because compaction moves all of L0, or one L1+ file
//     with every overlapping file of the next level, and because of 6.
//  6. Install order (the caller's contract): for every (Order, Key), the
//     entries of a file installed later are newer than those of every file
//     installed before; the SliceTable evicts each bucket's oldest slices
//     first. Get relies on it to visit versions newest first.
//  7. Reference counts: a version counts the DB's current pointer, its
//     persisted pointer, every compaction job picked from it and every
//     unreleased snapshot of it; a file counts the versions holding it.
//     A file is closed when no version holds it, and removed from disk only
//     if an installed edit deleted it (obsolete). So a file a running job
//     reads is never deleted, and the current version's files are never
//     closed.
//  8. A file a failed manifest write may have named (a pending file whose
//     InstallL0 failed, a failed compaction's outputs) is not removed until
//     a later manifest is durable (deferred); a manifest a durable CURRENT
//     may name is not removed until a newer one is.
//  9. Only the owner changes versions, the manifest and the reference counts;
//     background work only reads files of a pinned version and writes new
//     files, taking file numbers from an atomic counter.
//  10. Deferred deletion: the DB holds a reference on the persisted version
//     until the next Persist succeeds, so no file it holds is removed while
//     the last durable persist point names it — a compaction input the
//     persisted version holds stays on disk (Metrics.PersistPinnedFiles)
//     until the next Persist; a file installed after the last persist point
//     and then compacted away is removed at once. A Persist that failed
//     keeps the previous persisted version; its own version cannot lose a
//     file before a later manifest write succeeds (no install happens before
//     the rewrite that follows a failed write), which makes its record moot.
//  11. Open deletes a file only after a clean recovery: CURRENT decoded, the
//     manifest it names holding every record CURRENT vouches for (its synced
//     length and its persist point), the whole manifest replayed without
//     corruption, and every table of the recovered version opened with its
//     recorded size. Every other outcome is an error returned before the
//     first removal, so a damaged directory stays as it was for repair; the
//     tables a recovery ignores are those installed after the recovered
//     persist point, never persisted state.
//  12. One open DB per directory: Open holds LOCK (exclusive, non-blocking,
//     across processes) until Close, also when Close fails; a failed Open
//     releases it.
//  13. The table cache closes a table's file descriptor only when no read
//     holds it (the handle's refs is 0): the cache may exceed MaxOpenFiles
//     for as long as reads hold files, and the table's release (Reader.Close)
//     leaves the close to its last read in flight. Reads never see a file
//     closed under them; the index and filter never leave memory.
//  14. Clipping: no read and no compaction yields an entry whose Order lies
//     outside its table's clip range [MinOrder, MaxOrder]. Get, GetLoc and
//     MapRange choose tables by that range (L0 by comparison, L1+ by
//     findFile) and search one Order; ReadAt finds a table only for an Order
//     in its range; compaction reads every input through a clipIter. There
//     are no trivial moves (every compaction rewrites its inputs), so a clip
//     ends at the table's first compaction, whose outputs hold only
//     in-range entries. Entries, Blocks, Tombstones, [MinSeq, MaxSeq] and
//     Size of a clipped table still describe its whole file (upper bounds
//     for the clip).
//  15. A snapshot's files stay on disk until ReleaseSnapshot (or Close),
//     whatever is installed meanwhile: the snapshot holds a reference on its
//     version (7), and a file is removed only at its last reference.
//  16. An imported directory holds a CURRENT only once the whole DB is
//     durable: tables and their directory entries synced before the manifest
//     is written, CURRENT renamed into place last, then the directory
//     synced ("Import").
//
// # Versions and reference counts
//
//	        current ──► v7 (refs 2: current + job J)       v6 (refs 1: job K)
//	                     │ L0: 31 30   L1: 22 25   L2: 9    │ L0: 30  L1: 22 24 …
//	                     ▼                                  ▼
//	file 24: refs 1 (v6), obsolete → removed when K is installed and v6 dropped
//	file 22: refs 2 (v6, v7)
//
// Every install builds a new version from the current one (copy of the level
// slices, edit applied), makes it current and drops the DB's reference to the
// old one. Get and MapRange run on the owner and use the current version
// without pinning it: nothing can change it during the call.
//
// # Snapshots
//
// Snapshot refs the current version (as a compaction job does) and lists its
// tables oldest first — the deepest level first, each level by MinOrder, up
// to L1, then L0 oldest first — with their FileMeta (the clip range
// included) and their paths. Until ReleaseSnapshot no file of it is removed
// (invariant 15): a compaction that makes one obsolete only marks it, and
// the snapshot's release drops the last reference and removes it. The files
// are immutable, so other goroutines may read or hard-link them meanwhile;
// the DB itself only changes reference counts, on the owner. Close ends
// every snapshot (files closed, not removed; the next Open removes what the
// recovered version does not hold). A snapshot is not a persist point: it
// may name tables installed after the last Persist.
//
// # Import
//
// Import(opts, tables, lastSeq, meta) builds a DB in a directory without
// CURRENT from table files the caller put there under TablePath(dir, Num):
//
//	check arguments → LOCK → CURRENT absent (else ErrExists)
//	→ open each table (sstable.Open checks), clip = its Order range ∩ the
//	  ImportTable's; empty clip (or file) → to drop
//	→ build the version: L0 in slice order (oldest first, invariant 6),
//	  L1+ by MinOrder; overlapping L1+ clips → ErrImportOverlap
//	  (nothing written, nothing removed)
//	→ sync each kept table → remove the dropped → sync dir → sync parent
//	→ manifest (snapshot of the version │ persist point: max(lastSeq,
//	  every given table's MaxSeq), meta) → sync → CURRENT.tmp → sync
//	  → rename to CURRENT → sync dir            ← commit point
//
// Crash at any write before the last directory sync: the crash leaves no
// CURRENT (CURRENT is made durable only by that sync), so Open refuses the
// directory if tables survived (tables without CURRENT are corruption,
// "Recovery") or sees an empty new one if none did; either way the caller
// deletes the directory and imports again. After it: the complete DB, which
// Open recovers like any persist point. TestImportCrash crashes at each of
// Import's writes.
//
// # Clipping
//
// Restore with key-group rescaling takes, from each checkpoint, the tables
// holding the Store's key groups — a contiguous range of order hashes —
// and clips each to that range; the tables of several checkpoints then
// share levels, disjoint after clipping. The clip lives only in the
// manifest (FileMeta, recorded and recovered as any range); the file keeps
// every entry until a compaction rewrites it. A clipIter (compaction.go)
// seeks each input to MinOrder and stops past MaxOrder; what it skips is
// counted in JobStats.Clipped and Metrics.ClippedEntries.
//
// # Compaction
//
// PickCompaction scores levels: L0 by file count / L0CompactionTrigger, level
// l >= 1 by bytes / (BaseLevelBytes · LevelSizeRatio^(l-1)), and the deepest
// non-empty level above the bottom also by (bytes above the bottom / bottom
// bytes) / (MaxSpaceAmplification − 1), so the DB's size stays within
// MaxSpaceAmplification × its bottom level once data reached it (updates in
// place would otherwise keep their old versions in the bottom); the highest score
// >= 1 wins among levels whose input and output level are not busy (a job
// marks both busy from pick to install, so concurrent jobs touch disjoint
// level pairs, e.g. L0→L1 beside L3→L4). An L0 job takes every L0 file plus
// the overlapping L1 files; an Li job takes one file (round robin by Order)
// plus the overlapping Li+1 files. Run merges the inputs (base.MergingIter
// over the L0 files newest first and the next level concatenated), resolves
// them ("Merge rules") and writes outputs of about TargetFileSize;
// InstallCompaction writes one edit deleting the inputs and adding the
// outputs. Files installed into L0 during a job are
// newer than all its inputs (6), so nothing it writes can hide them.
//
// # Table cache
//
// A table's sstable.Reader keeps the table's index and filter on the Go heap
// from the table's open to its release (invariant 7), but not necessarily
// its file: it reads blocks through a handle of the DB's table cache
// (tablecache.go), an LRU of open files of at most Options.MaxOpenFiles
// (default: half the process's RLIMIT_NOFILE, at most 1000), as RocksDB's
// max_open_files and Pebble's table cache bound theirs. A read that misses
// the block cache borrows the handle's file — opening it again if the cache
// closed it — and gives it back; the least recently used idle files are
// closed while more than MaxOpenFiles are open. So a DB of thousands of
// tables runs under a low file limit (ulimit -n 256), a Get that the filter
// or the block cache answers opens nothing, and a Get or compaction that
// reads holds one descriptor per file only for the duration of each read.
//
//	handle: name │ f (nil: closed) │ refs (reads in flight) │ closed (released)
//	  acquire: f nil → open; refs++; move to the LRU front
//	  release: refs--; over MaxOpenFiles → close idle files from the LRU back
//	  Close:   closed = true; f closed now if refs == 0, else by the last
//	           release
//
// Invariant 13 is the cache's reference count.
//
// Out of descriptors: the DB works through Options.FS wrapped so that any
// Create, Open or OpenDir refused with EMFILE or ENFILE — a table open, a
// flush or compaction output, the manifest, a directory sync — first closes
// every idle file of the cache and then tries once more (Metrics.OutOfFiles).
// So the cache's descriptors never starve the DB's writes when the process
// limit drops below MaxOpenFiles (a setrlimit after Open, other users of
// descriptors in the process); what still fails is reported as the error it
// is, for the caller to retry.
//
// Open files: Metrics.OpenTables; hits and misses (reads that found their
// file open, and opens): TableCacheHits, TableCacheMisses.
//
// # Merge rules
//
// A compaction applies the merge rules of internal/base (doc.go, "Merge
// rules"; base.Resolver) to its merged inputs: newest wins per (Order, Key,
// UserKey); list operands stack on the newest base below them, and with no
// base in the inputs stay one operand — or, at the bottom (Resolver.Bottom =
// CompactionJob.Bottom), become a KindListBase; a map's clear hides older
// entries of the map. A list joins into pieces of at most
// Options.MaxListPiece bytes (rule 4): a long list stays a chain of
// pieces — the oldest the base (or an operand above older files), newer
// ones append operands, each with the Seq of its newest operand — so no
// compaction builds an entry past the bound, and a read of the list
// (engine.ListGet) loads one piece at a time. The compaction filter then sees
// each survivor with bottom (base.Filter adapts it): DefaultFilter drops
// tombstones (KindTombstone, KindMapEntryTombstone) at the bottom and only
// there, so the resolver's own DropTombstones stays off. A Store with TTL
// states installs a filter (Options.NewFilter, one per job) that also drops
// expired values at the bottom, turns them into tombstones above it and
// rewrites list batches without their expired elements (base.TTLFilter).
//
// # TTL sweep
//
// With Options.Expiry set, every file the DB writes (WriteL0, compaction
// outputs) carries in memory a summary of its TTL data (base.Expiry: the
// earliest and latest expiry instant, the bytes), noted entry by entry as it
// is written. It is not in the file or the manifest (no format changes): a
// file found at Open or imported has no known summary, nor has any file
// after ForgetExpiry (the caller's table sweeps a state it did not before),
// nor the output of a compaction in flight across it (InstallCompaction), and
// PickExpired treats it as due at the caller's bound (unknownAt) — once; its
// sweep rewrites it whole, under the then current table, with a summary. PickExpired (sweep.go) picks the first due file, level by
// level, and proposes the cheapest job that runs it through the filter:
//
//	L0 file due        the L0 compaction (every L0 file into L1): L0 files
//	                   overlap and are ordered by age, so one cannot be
//	                   rewritten in place
//	Li file due, i>=1  the file alone, rewritten into Li in place (outputs
//	                   within its Order range: Li stays sorted and disjoint),
//	                   at the bottom when no deeper level overlaps it
//
// Invariants: a sweep job is a CompactionJob (busy levels, pinned version,
// InstallCompaction), so every invariant above holds for it; it reads one
// file of Li (or L0 + overlaps of L1), so its cost follows the files that
// hold expired data; after it the outputs' summaries start after the
// filter's clock, so they are not picked again before new data expires.
//
// # Failed manifest writes
//
// A manifest append or sync that fails leaves the record's fate unknown (it
// may be torn, complete but unsynced, or durable), so the DB never appends to
// that manifest again: it marks it broken, reports the error (nothing changes
// in memory: a failed Persist keeps the previous persist point), and the next
// edit — or Persist, Sync or Close — writes a new manifest (see "Manifest
// rewrites") and points CURRENT at it. Until
// that succeeds the failed edit's files stay on disk (invariant 8). A rename
// of CURRENT followed by a failed directory sync keeps both manifests.
//
// # Crash safety
//
// The target is the last persist point: after a crash, Open must recover
// exactly the version of the last reported Persist (or of a Persist cut off
// by the crash). The argument, step by step (vfs invariants 1–3: only synced
// bytes and synced directory entries survive):
//
//	WriteL0/Run:  create → write → Finish(sync) → close → dir sync
//	              crash anywhere: the file is unnamed by any manifest;
//	              Open deletes it (or it never became visible at all).
//	InstallL0 /   append record → sync
//	 Install-     whether or not the record survives, it follows the last
//	 Compaction   persist point, so recovery ignores it; its files are not
//	              in the persisted version and Open deletes them. It
//	              deletes no file of the persisted version (10).
//	Persist:      append persist-point record → sync → CURRENT.tmp (naming
//	              the record) → sync → rename → dir sync
//	              crash before the sync: the record is absent or torn at the
//	              tail, after what CURRENT names → recovery stops before it
//	              and uses the previous persist point, whose files (10) are
//	              all still on disk. After the sync: the record is complete
//	              (recovered whichever CURRENT survives); every file of the
//	              current version is durable under its name (2); only after
//	              the dir sync is Persist reported and does the previous
//	              persisted version release its files.
//	rotation:     new manifest (see "Manifest rewrites") → sync →
//	              CURRENT.tmp → sync → rename → dir sync. Before the dir
//	              sync a crash leaves CURRENT naming the old manifest
//	              (complete, still on disk) or the new one (complete and
//	              synced); both hold the same last persist point (or, for a
//	              Persist rewrite, the old or the new one, and that Persist
//	              is reported only after the dir sync).
//	deletions:    a table is removed only when no version holds it, so never
//	              while the persisted version does (10); if the removal is
//	              lost, Open removes it.
//
// So after any crash, CURRENT names a complete manifest whose last complete
// persist-point record is the last reported one (or a cut-off one), and the
// tables of that version exist with the recorded sizes. TestCrash checks this
// at every write operation of a workload of flushes, compactions, persist
// points, rotations and reopens, comparing every read with the model as of
// the last persist point.
//
// # Concurrency
//
// DB methods are for the owner goroutine only, except WriteL0 and
// CompactionJob.Run, which are safe on other goroutines concurrently with
// the owner and with each other until Close (the root runs them through the
// scheduler; lsm starts no goroutines). Run reads only the readers of its
// pinned version (sstable.Reader and the table cache are safe for
// concurrent use) and writes new files; InstallCompaction must be called after Run returned. Close must not
// run while background work does.
//
// # Errors
//
// Damage is a *base.CorruptionError (base.ErrCorruption) naming the file as
// Options.Name/<file> and the byte offset, built where it is found — the
// sstable's errors for tables pass through unchanged — with its cause when a
// check names one: base.ErrBadMagic, base.ErrFormatVersion,
// base.ErrChecksumType, base.ErrChecksum, base.ErrTruncated (a header or
// CURRENT cut short, a table shorter than the manifest records),
// fs.ErrNotExist (a file CURRENT or the manifest names is missing). Then
// ErrLocked (the directory is open elsewhere; also syscall.EWOULDBLOCK),
// base.ErrNoSpace (with syscall.ENOSPC) for a full disk, base.ErrClosed,
// ErrInvalidOptions, ErrJobNotRun, ErrMetaTooLarge; Import's ErrExists,
// ErrInvalidImport and ErrImportOverlap.
package lsm
