// Package checkpoint is where Strata's checkpoints live: a Storage of immutable objects (an
// object store, or a local directory through DirStorage), the manifest that commits a
// checkpoint, and garbage collection by reachability. It imports only the standard library,
// internal/base, internal/vfs and internal/checkpointfs/hook (which hands its file-system
// entry points to the module's own code); the engine's Store.Checkpoint and restore build on it.
//
// The design follows DESIGN §4 ("Storage protocol"), SlateDB's manifest and checkpoint RFCs
// (0001, 0004: create-only manifests, writer epochs, GC by reachability with a grace period)
// and Flink's checkpoint storage (chk-<n> directories, shared/ incremental files,
// CheckpointListener, num-retained, NO_CLAIM/CLAIM), avoiding the Flink bugs named below.
//
// # Terms
//
//   - Object: an immutable byte string with a name, written once (Put, PutReader, PutFile,
//     Create), read whole or by range, deleted by GC.
//   - Owner: the lineage of checkpoints of one Store (one subtask's key-group range in one
//     job): one name segment, the first of every name it writes.
//   - Manifest: the object "<owner>/chk-<id>/MANIFEST" listing everything checkpoint id
//     needs; committed with Create, so it exists completely or not at all.
//   - Kept manifest: one GC keeps — retained (the Retain newest completed), pending (an id
//     above LastCompleted), pinned, or too young or in flight to delete.
//   - Reachable: named by a kept manifest (or being one).
//   - In flight: uploaded or referenced by a checkpoint of this process whose manifest is not
//     committed yet (InFlight).
//
// # Storage protocol
//
//  1. Objects are immutable and uniquely named (SharedName, PrivateName: a random 64-bit
//     suffix), so a name never refers to two contents — the FLINK-29913 class of bug, a file
//     deleted under a checkpoint that reused its name, cannot happen.
//  2. A checkpoint uploads its objects first and writes its manifest last, with Create (S3's
//     If-None-Match: *). Create of a manifest that exists fails with ErrExists: someone else
//     committed that id, and the caller stops. A writer of an epoch a restore fenced gets
//     ErrFenced ("Writer fencing").
//  3. The manifest records every object's name, size, CRC32C, key-group and order range, the
//     range of a packed object it covers and a table's LSM level, the Store's last sequence
//     number and its operator state (small: it travels inside the manifest), and one entry
//     per key group of its timers, so restore chooses objects by key-group range, checks them without
//     trusting the storage's listing, and rebuilds the LSM's shape and sequence numbering.
//  4. Nothing is counted: GC recomputes reachability from the manifests each time.
//
// # Object layout
//
//	<owner>/chk-<id>/MANIFEST                             the manifest of checkpoint id
//	<owner>/chk-<id>/<kgStart>-<kgEnd>-<rand>.<ext>       private objects of checkpoint id
//	<owner>/shared/<kgStart>-<kgEnd>/<id>-<rand>.<ext>    objects later checkpoints reuse
//	<owner>/fence/<epoch>                                 the fence of writer epoch epoch
//
//	id       checkpoint id, 20 decimal digits (names sort by id)
//	kg…      key groups, 5 decimal digits each, inclusive
//	rand     16 hex digits from a randomly seeded generator
//	ext      "sst" (tables), "log" (changelog), … — informative only
//
// The owner comes first so that one List of "<owner>/" sees a whole lineage and GC of one
// owner can never reach another's objects (an owner is one segment: "a/" is not a prefix of
// "ab/"), and so that an object store spreads the load of many owners over its key space (S3
// partitions by prefix). Within an owner, the key-group range spreads shared objects further
// and lets a restore of a sub-range find its candidates by prefix. A restore in NO_CLAIM mode
// references the source owner's objects by their full names and writes new ones under its
// own owner.
//
// Names are validated (ValidateName): "/"-separated non-empty segments of [A-Za-z0-9._-], none
// beginning with '.', relative, at most 1024 bytes; a bad one is a *NameError (ErrInvalidName).
//
// # Manifest layout (format version 4, and 5)
//
//	0          8         10   11   12         16
//	+----------+---------+----+----+----------+---------------------------+---------+
//	| magic    | version | ck | 0  | length   | payload (length bytes)    | crc32c  |
//	| STRATACK | u16 = 4 | =1 |    | u32      |                           | u32     |
//	+----------+---------+----+----+----------+---------------------------+---------+
//	all integers little endian; ck 1 = CRC32C (Castagnoli); crc32c covers every byte
//	before it (header and payload); length <= 256 MiB.
//
//	payload:
//	0        8        16       24          32      36      38      40        48
//	+--------+--------+--------+-----------+-------+-------+-------+---------+
//	| id     | parent | epoch  | created   | maxP  | kg    | kg    | lastSeq |
//	| u64    | u64    | u64    | unix ms   | u32   | start | end   | u64     |
//	|        | 0 none |        | i64       |       | u16   | u16   | 0 none  |
//	+--------+--------+--------+-----------+-------+-------+-------+---------+
//	48
//	+--------+-----------------+--------+------------------+-------+----------------+
//	| regLen | state registry  | posLen | input position   | opLen | operator state |
//	| u32    | (opaque)        | u32    | (opaque)         | u32   | (opaque)       |
//	+--------+-----------------+--------+------------------+-------+----------------+
//	+--------+----------------+
//	| count  | count objects  |
//	| u32    |                |
//	+--------+----------------+
//	operator state: the root package's operator state blob (magic STRATAOP, its own version
//	and CRC32C; the root's opstate.go draws it), the Store's operator list, union list and
//	broadcast state at the cut.
//
//	object (52 bytes + name):
//	0      1       2        4         4+n      +8       +12      +14      +16
//	+------+-------+--------+---------+--------+--------+--------+--------+
//	| kind | flags | nameLen| name    | size   | crc32c | kg     | kg     |
//	| u8   | u8    | u16    | n bytes | u64    | u32    | start  | end    |
//	|      |       |        |         |        |        | u16    | u16    |
//	+------+-------+--------+---------+--------+--------+--------+--------+
//	+16        +24        +32        +40        +48
//	+----------+----------+----------+----------+
//	| minOrder | maxOrder | offset   | length   |
//	| u64      | u64      | u64      | u64      |
//	+----------+----------+----------+----------+
//	kind: 1 table, 2 changelog, 3 other, 4 timers, 5 canonical savepoint (part of the
//	format; do not change)
//	size: of the whole object; crc32c: of the bytes the entry covers
//	timers: one key group's timer section (package timer's format, STRATATM), packed with
//	the other key groups' in one object per checkpoint; kg start = kg end; minOrder and
//	maxOrder: its first and last timestamps, sign bit flipped
//
//	flags:
//	  7   6   5   4   3   2   1   0
//	+---------------+-----------+---+
//	| level         | 0   0   0 | P |
//	+---------------+-----------+---+
//	P      packed: the entry covers [offset, offset+length) of the object; offset and
//	       length are 0 otherwise
//	level  the LSM level 0..15 the table held in the Store; 0 unless kind is table
//
// Format version 5 is version 4 with kind 5 (a canonical savepoint, "Canonical savepoint
// layout"): Encode writes version 5 exactly when a manifest lists a canonical object, so a
// reader of version 4 refuses a canonical savepoint instead of restoring it without its
// state, and every other manifest stays version 4 byte for byte; a version 5 manifest
// without a canonical object is corrupt (testdata/MANIFEST-v5 pins it).
//
// Format version 3 is the same without kind 4 (a version 3 reader refuses timer entries, so a
// checkpoint with timers is never restored without them). Format version 2 is version 3
// without opLen and the operator state (the object count follows the input position). Format
// version 1 is version 2 without lastSeq (its fixed payload fields end at byte 40, the
// registry length follows kg end) and without levels (flags bits 1..7 must be 0). Encode
// writes version 4, or 5 (above); DecodeManifest reads all five, a version 1 manifest with LastSeq 0
// and every Level 0, a version 1 or 2 one with no operator state (a restore sees no operator
// state in it, as in a checkpoint of a Store that had none), a version 1 to 3 one without
// timers.
//
// Checked in the order magic (base.ErrBadMagic; fewer than 8 bytes: base.ErrTruncated), header
// size (base.ErrTruncated), version 1 to 5 (base.ErrFormatVersion), checksum type
// (base.ErrChecksumType), reserved byte, length (base.ErrTruncated if the bytes end early),
// CRC32C (base.ErrChecksum), then the payload (a field running past it: base.ErrTruncated; a
// rule broken: base.ErrCorruption alone) — each a *base.CorruptionError naming the object and
// the byte offset. The rules: id >= 1; 1 <= maxP <= 32768; every key-group range start <= end
// < maxP; blobs <= 64 MiB; names valid; kind known in the manifest's version; flag bits known
// in the manifest's version; level 0 unless a table; one key group per timers entry; size >=
// 0; minOrder <= maxOrder; offset and length 0 unless packed, inside the object if packed; no
// byte after the last object. Every field has one fixed-width encoding, so a version 4
// manifest that decodes re-encodes to the same bytes, and a version 1 to 3 one re-encodes to a
// version 4 manifest that decodes to the same Manifest (FuzzManifestDecode checks both). The
// golden files testdata/MANIFEST-v1 to MANIFEST-v5 pin the formats: a change needs a new
// version and a new golden file.
//
// # Writer fencing
//
// A lineage has one writer at a time, but a process that lost its subtask (partitioned, or
// slow to die) may go on checkpointing after another restored the lineage: a zombie. With
// create-if-absent only (no rename, no lock, no conditional update of an existing object), a
// zombie's commit of an id the new writer has not used yet cannot collide with anything the
// new writer wrote, so it cannot be refused by the Create itself; instead the restored writer
// writes a fence, and the fences decide which manifests count. SlateDB's writer_epoch (RFC 0001) is
// the model: each writer start claims a new epoch with a Create, and a writer with an older
// epoch is a zombie.
//
//   - A Store restored into owner o (the lineage it writes) takes an epoch e above every
//     epoch of the manifests it restored and of o's fences at the time, and a random writer
//     id W it keeps in its directory. Before the manifest of its first checkpoint it claims
//     e: it Creates "<o>/fence/<e>" (WriteFence) recording W and P: the newest checkpoint
//     it restored or, if larger, the newest id of o at the restore (a scale-in from other
//     lineages, whose ids need not be o's, must not fence o's history). A
//     fence of W already there is its own (the Store was reopened): it keeps it. A fence of
//     another writer at e or above — a restore that claimed first — means it is the older
//     writer: ErrFenced, and it never claims an epoch. The claim waits for the first
//     checkpoint so that a Store restored only to read a checkpoint (tests, verification,
//     inspection) does not stop the lineage's writer.
//   - Fence (e, P) fences every manifest of o with epoch < e and id > P (Fence.Fences): the
//     writes of an older writer after the checkpoint the lineage goes on from.
//   - A fenced manifest is not committed, whenever it was written: LatestCheckpoint passes
//     over it, Restore refuses it (ErrFenced), and a commit of its id by a writer whose epoch
//     is at least the fence's deletes it and Creates its own (Commit).
//   - Commit of a manifest of epoch e and id n reads the fences above e (one List of
//     "<o>/fence/", no Get unless a fence above e exists) before the Create, and again after
//     it: if a fence fences (e, n), the writer gets ErrFenced and must stop.
//
// Why it holds: fences are immutable and never deleted (GC skips them), so "fenced" is a
// stable property of a manifest, decided by objects alone — it needs no ordering between the
// zombie's Create and the fence's. Whether the zombie's check saw the fence only decides when
// it learns it is a zombie (at the latest at its next commit, since the fence is durable and
// Storage promises read-after-write for List), never what a reader sees. Two writers of one
// epoch cannot exist: each epoch's fence is Created once, and a writer that finds its epoch
// or a later one claimed by another never writes a manifest.
//
// What it does not promise: a commit that returned nil may still be fenced later, by a
// restore of an older checkpoint of the lineage (P below its id) — as in Flink, restoring
// checkpoint P abandons every later checkpoint of the lineage. Between a restore and the
// restored Store's first checkpoint the old writer still commits (nothing fenced it yet);
// those commits are fenced by the first checkpoint's fence, and the old writer learns it at
// its next commit. A Store opened (not restored) from a directory keeps the epoch and writer
// id its Restore wrote there; a directory never restored has epoch 0 and no writer id — if
// its lineage was restored since, its checkpoints are fenced (a host restarts a subtask by a
// restore, as Flink does). Manifests written before fences existed carry epochs no fence
// knows of; a lineage is fenced from its first restore by this code on. Fences accumulate
// (48 bytes per restored Store that checkpointed). A List that lags may hide a new fence from
// a zombie's check for that long; readers and the next restore see it once List does.
//
// # Fence layout (format version 1)
//
//	0          8         10   11   12       20       28       36         44
//	+----------+---------+----+----+--------+--------+--------+----------+--------+
//	| magic    | version | ck | 0  | epoch  | point  | writer | created  | crc32c |
//	| STRATAFN | u16 = 1 | =1 |    | u64    | u64    | u64    | unix ms  | u32    |
//	+----------+---------+----+----+--------+--------+--------+----------+--------+
//	all integers little endian; crc32c covers bytes 0..43; epoch >= 1 and equal to the
//	name's; exactly 48 bytes. Checked in the order magic, size, version, checksum type,
//	reserved byte, CRC32C, epoch (DecodeFence); testdata/FENCE-v1 pins the format.
//
// # DirStorage protocol
//
// An object "a/b/c" is the file <dir>/a/b/c. Every write goes through a temporary in the
// object's directory, ".tmp.<16 hex>" (no object name segment begins with '.'):
//
//	Put, PutReader, PutFile (copy)  create temp, write, fsync temp, rename temp → name,
//	                                fsync the directory and each parent up to <dir>
//	PutFile (same file system)      fsync the source, link source → temp, rename temp →
//	                                name, fsync the directories (EXDEV, EPERM: copy instead)
//	Create                          create temp, write, fsync temp, link temp → name
//	                                (EEXIST: remove temp, ErrExists), remove temp, fsync
//	                                the directories
//	Delete                          remove name (missing: fine), fsync its directory, remove
//	                                the directories it emptied (not synced)
//
// By vfs's invariants 1–4, a crash at any write leaves each object absent or complete: the
// name appears only by a rename or link of a file whose bytes were synced before, and the
// directory fsyncs make an acknowledged object's name durable, with the names of the
// directories MkdirAll created (another put may have created them and not synced them yet,
// hence the whole chain every time). What a crash can leave is temporaries; List never shows
// them and Cleanup (GC calls it) removes those older than the grace period that this
// DirStorage is not writing. TestCrashStorage crashes every write of every method.
//
// # Garbage collection
//
// GC(ctx, storage, GCOptions) of one owner:
//
//  1. List "<owner>/" (and each claimed owner's prefix) once.
//  2. Keep manifests: the Retain (default 1) newest with ids <= LastCompleted, every one with
//     a larger id (pending: the job may still complete it; Flink completes a checkpoint only
//     when every task acked), the pinned ones; not the aborted ones. LastCompleted 0 keeps
//     every manifest: after a restart that knows nothing, nothing reachable is deleted
//     (FLINK-7268 lost data by trusting counters a restart had reset). A manifest that would
//     be deleted but is too young or in flight is kept too, with what it reaches.
//  3. Read every kept manifest (a damaged one stops GC before any delete); the reachable set
//     is their objects and themselves.
//  4. Delete each listed, unreachable object that is not in flight (checked at the moment of
//     deletion) and is older than the grace period (ObjectInfo.Created; unknown age: kept
//     unless NoGrace): manifests first, so a manifest in the storage never names a deleted
//     object. Then Cleanup of old temporaries.
//
// Fences ("<owner>/fence/") are never deleted: they are reachable from no manifest, but a
// zombie may write for as long as it runs.
//
// Why it is safe beside checkpoints being written (FLINK-29913): a checkpoint of this process
// Adds every object it uploads or reuses to the InFlight set before uploading or choosing it,
// and Releases them after its manifest is committed (then it is pending, hence kept) or after
// it is aborted. A Release during a GC run waits for the run to end, so a run that listed
// the manifests before the commit still sees the objects in flight. Writers in other processes
// (a zombie, a second job) are covered by the grace period, which must exceed the longest
// upload and the List lag of an eventually consistent store; List lag is otherwise harmless,
// since GC deletes only what a List showed. Orphans of failed or aborted checkpoints
// (FLINK-30461) are unreachable and not in flight, so the first GC after the grace period
// deletes them, temporaries included.
//
// Other lineages (FLINK-26985: a NO_CLAIM restore source must never be deleted) are never
// touched: GC lists only "<owner>/". The hook for CLAIM mode is GCOptions.Claimed: a claimed
// owner's objects are collected like ours, its own manifests kept only if pinned (the restored
// checkpoint, until one of ours completes).
//
// # Claims shared by several Stores
//
// A CLAIM restore that scales out gives one lineage X to several Stores (Flink claims the
// checkpoint for the job, and its new subtasks share it). Each claimant C first writes a claim
// marker "<X>/claims/<C>-<id>" (WriteClaim; id the restored checkpoint), then restores. A GC
// run of any claimant A that collects X lists X's objects, markers included, and for every
// other claimant C lists C's manifests:
//
//   - C has none: X's checkpoint id that C restored is pinned (kept, with all it reaches);
//   - C has some: each is read (one collected since the List is skipped) and what it names is
//     reachable.
//
// Markers are never deleted (a few bytes per claimant). No count is kept anywhere: what a
// sibling needs is recomputed from the storage at every run. Why it is sound:
//
//  1. A claimant's objects from X are the restored tables it imported; its LSM only loses
//     imported files (compactions), never gains them. So the objects of X that a checkpoint
//     of C names are a subset of those any earlier checkpoint of C names, and of those of the
//     restored checkpoint. Whatever C will ever name of X is therefore reachable from C's
//     oldest manifest present, or from X's restored checkpoint while C has none — in
//     particular a checkpoint C is uploading (not yet committed) names nothing of X that its
//     committed ones do not, and a manifest of C deleted between A's List and read only
//     names a superset of a later one that A reads or that C has not committed yet (then C's
//     earlier manifests are read instead, or X's checkpoint is pinned).
//  2. Every claimant's marker exists before any claimant's GC may delete X's objects: a
//     Store's GC runs when a checkpoint of it completes, and a checkpoint completes (Flink's
//     notifyCheckpointComplete) only once every subtask acknowledged it, so every subtask has
//     restored — and written its marker — by then. A claimant that restores X later than
//     that (outside Flink's protocol) may find objects collected: Restore then fails with
//     ErrNotFound, never returns partial state.
//  3. Deletions of X by two claimants race harmlessly: each deletes only what no claimant
//     reaches, and Delete of a missing object succeeds.
//
// # Native savepoints
//
// A native savepoint (Flink's NATIVE savepoint format) is a checkpoint whose objects are all
// its own: CopyNative copies every object a committed manifest names — shared, private, timer
// and packed changelog objects, each once — under PrivateName(dstOwner, id, …), checking each
// copied range's size and CRC32C against the manifest, and commits a manifest with the same
// fields (Parent 0, objects renamed) last, as every checkpoint's. Consequences:
//
//  1. No GC of the source lineage reaches it: its names are under another owner (the root
//     package's Savepoint uses "<owner>-savepoint"), whatever storage holds it.
//  2. It restores as any checkpoint (the root package's Restore: any key-group range, either
//     restore mode; in CLAIM mode the restored Store's checkpoints must go to the savepoint's
//     storage, since they reference its objects by name).
//  3. A copy cut short by a crash or an error commits no manifest: it leaves unreferenced
//     objects under "<dstOwner>/chk-<id>/" only, which a GC of dstOwner collects; the source
//     is only read.
//  4. A source object damaged or changed since its checkpoint fails the copy with a
//     corruption error naming it; nothing damaged is stored under the savepoint.
//
// # Canonical savepoint layout (format version 1)
//
// A canonical savepoint (Flink's CANONICAL savepoint format) is the state of a Store as
// logical entries — (state name, kind, key, namespace, map user key, value or list elements,
// TTL timestamp) —, its timers, its operator state, its state registry and the job's input
// position, in one object that depends on none of the engine's file formats: a later Strata,
// or another engine, reads it with this section alone. CanonicalWriter writes it,
// OpenCanonical / ReadCanonical / DecodeCanonical read it; a manifest of format version 5
// lists it as one object of kind 5 (KindCanonical), not packed, whose KeyGroups are the
// savepoint's. All integers little endian; uvarint is encoding/binary's.
//
//	0          8         10   11   12        16       18       20       24
//	+----------+---------+----+----+---------+--------+--------+--------+------+-----+-------+--------+
//	| magic    | version | ck | 0  | maxP    | kg     | kg     | crc32c | meta | ... | index | footer |
//	| STRATACS | u16 = 1 | =1 |    | u32     | start  | end    | u32    | block| blocks   |       | 24 B   |
//	+----------+---------+----+----+---------+--------+--------+--------+------+-----+-------+--------+
//	ck 1 = CRC32C (Castagnoli); crc32c covers bytes 0..19; 1 <= maxP <= 32768,
//	kg start <= kg end < maxP
//
//	block (the meta block first, right after the header; then entries and timers blocks):
//	0      1    2       4         8          12
//	+------+----+-------+---------+----------+-------------------+--------+
//	| kind | 0  | kg    | count   | length   | payload           | crc32c |
//	| u8   |    | u16   | u32     | u32      | (length bytes)    | u32    |
//	+------+----+-------+---------+----------+-------------------+--------+
//	kind: 1 meta (kg 0; count = states), 2 entries of key group kg, 3 timers of key group
//	kg (count = records); part of the format; do not change. crc32c covers the 12-byte
//	block header and the payload. length <= 256 MiB; writers end a block after 64 KiB of
//	records (CanonicalBlockTarget), so one key group may have many blocks.
//
//	meta payload: count states, then the input position and the operator state
//	+---------+------+------+-------+---------+------+---------+------+   +--------+-----+-------+----+
//	| nameLen | name | kind | flags | c0Len   | c0   | c1Len   | c1   |...| posLen | pos | opLen | op |
//	| uvarint |      | u8   | u8    | uvarint |      | uvarint |      |   | uvarint|     |uvarint|    |
//	+---------+------+------+-------+---------+------+---------+------+   +--------+-----+-------+----+
//	kind: 1 value, 2 list, 3 map, 4 reducing, 5 aggregating, 6 timer service (the root
//	package's state kinds; part of the format); flags bit 0: the state has TTL (its values
//	carry last-access timestamps), other bits 0; c0, c1: codec ids (informative); names
//	unique and not empty. op: the root package's operator state blob (magic STRATAOP, its
//	own version and CRC32C; lists, union lists, broadcast state), opaque here.
//
//	entry record (in a kind 2 block; its key group is the block's):
//	+---------+--------+-----+--------+----+--------------------------------------+
//	| state   | keyLen | key | nsLen  | ns | by the state's kind:                 |
//	| uvarint | uvarint|     | uvarint|    |                                      |
//	+---------+--------+-----+--------+----+--------------------------------------+
//	  value, reducing, aggregating:  [ttl i64] valLen uvarint, value
//	  map (one record per entry):    ukLen uvarint, user key, [ttl i64] valLen uvarint, value
//	  list:                          count uvarint (>= 1), count × ([ttl i64] len uvarint, elem)
//	state: index into the meta's states (not a timer service); ttl: the last-access
//	timestamp in milliseconds, present exactly when the state has TTL (per list element)
//
//	timer record (in a kind 3 block):
//	+---------+--------+---------+-----------+--------+-----+--------+----+
//	| service | domain | keyHash | timestamp | keyLen | key | nsLen  | ns |
//	| uvarint | u8     | i32     | i64       | uvarint|     | uvarint|    |
//	+---------+--------+---------+-----------+--------+-----+--------+----+
//	service: index of a timer service in the meta; domain 0 event time, 1 processing time;
//	keyHash: the int32 the key's group was assigned from (murmur hash mod maxP)
//
//	index (after the last block): count u32, then count entries of 16 bytes
//	+------+----+-------+----------+----------+
//	| kind | 0  | kg    | length   | offset   |     one per entries or timers block, sorted by
//	| u8   |    | u16   | u32      | u64      |     key group (entries before timers in one)
//	+------+----+-------+----------+----------+     length: the whole block, header and crc
//
//	footer (the object's last 24 bytes):
//	+----------+----------+--------+----------+
//	| index    | index    | crc32c | magic    |     crc32c covers the index and the
//	| offset   | length   | u32    | STRATACS |     footer's first 12 bytes
//	| u64      | u32      |        |          |
//	+----------+----------+--------+----------+
//
// Within a kind, blocks are written in key-group order, so the blocks of a key-group range
// are one run of the index and mostly one run of bytes: a restore into a sub-range (a
// rescale) reads the header, footer, index and meta, then only its blocks, adjacent ones in
// one ranged read (CanonicalReader.Scan). The manifest's CRC32C covers the whole object
// (checked by Verify, not by a restore, which checks each block it reads).
//
// What an entry means. A savepoint holds each live (key, namespace) of a state once: a value
// once, a list whole (its elements oldest first), a map one record per live entry. Tombstones,
// cleared maps and shadowed versions are never written — the writer reads through the Store's
// read path. Values of TTL states keep their timestamp, also expired ones no cleanup removed
// yet (the restoring Store judges them by its TTL at the first access, as Flink's savepoints
// keep what the backend holds).
//
// Decoding checks, in order: magic (base.ErrBadMagic; fewer than 8 bytes base.ErrTruncated),
// size, version (base.ErrFormatVersion), checksum type (base.ErrChecksumType), the header's
// CRC32C (base.ErrChecksum), the reserved byte, maxP and key groups, the footer's magic
// (base.ErrTruncated: an object cut short loses it), the index's bounds (base.ErrTruncated)
// and CRC32C (base.ErrChecksum), each index entry (kind, key group inside the header's
// range and ascending, inside the data, no two blocks overlapping), the meta block (CRC32C,
// bounds, unique known states, no trailing bytes); and for each block read, its CRC32C, its
// header against the index, then each record's bounds (base.ErrTruncated), state index and
// kind, the count and no trailing bytes. Each failure is a *base.CorruptionError naming the
// object and the byte offset. Readers never panic and allocate about what they read.
// testdata/CANONICAL-v1 pins the format (TestGoldenCanonical; -update-canonical rewrites it,
// and testdata/MANIFEST-v5); FuzzDecodeCanonical fuzzes the reader.
//
// # Invariants
//
//  1. An object name is written at most once (unique names); its bytes never change.
//  2. A manifest is committed at most once per (owner, id), by Create; it is written only
//     after every object it names is durable.
//  3. Every manifest in the storage names only objects that are stored (GC deletes manifests
//     before the objects only they reach; a crash between leaves only unreachable orphans).
//  4. GC deletes only objects it listed under the owners it collects, never a reachable,
//     in-flight or young one; a run cut short leaves only garbage for the next run.
//  5. A fence is written once per epoch (Create) and never deleted; a manifest fenced by a
//     fence of its owner is never treated as committed.
//  6. DirStorage: after a crash at any point, List shows only complete objects, and every
//     object whose write returned nil is there.
//
// # What is not promised
//
// DirStorage's directories emptied by Delete are removed without a sync, so a crash may bring
// back an empty directory. Object times come from the file system (mtime, or ctime on Linux
// where a hard link updates it); on other systems an object PutFile linked carries its
// source's mtime, and only the InFlight set protects it from GC. Created times on object
// stores come from the store's clock, GC's Now from the caller's: their skew must be well
// below the grace period. A manifest's objects are checked by size and CRC32C by restore, not
// by GC. Several DirStorages of one process on one directory do not know each other's
// temporaries: with NoGrace, use one.
package checkpoint
