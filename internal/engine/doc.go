// Package engine is the byte-level keyed store under Strata's typed API: the read path across
// the three tiers (FreshTable → SliceTable → LsmStore), the one write path (Apply), the install
// protocol for background work, backpressure, the transform of sealed segments into slices, the
// lower tier and its row cache, and persisting at Close. It never imports the root package; the
// tiers (fresh/, slice/, lsm/) never import it or one another.
//
// # Terms
//
//   - composite key: key group, state id, key and namespace as bytes (base.AppendCompositeKey);
//     map user keys are nested under it.
//   - op: one state change (Op, OpKind); Apply is the only way state changes.
//   - install: the owner goroutine making finished background work visible (below).
//   - flush: a sealed segment written straight to the LsmStore as one L0 file (a budget too
//     small for a transform's slices).
//   - persist: Close moving every slice and segment into the LsmStore and recording a persist
//     point (Persist, persist.go).
//   - eviction: the coldest slices moved to the LsmStore while running.
//
// # The tiers and the paths through them
//
// The root package (the typed API) composes keys (base.AppendCompositeKey) and calls Get,
// ListGet, MapGet and MapIter to read, and Apply — the one write path (write.go) — to change
// state; it never sees a tier. Data flows down:
//
//	write ──► FreshTable (active segment) ──seal──► sealed segments
//	                                                   │ transform (background): entries, hashes,
//	                                                   ▼ sort, slice.Build; installed in seal order
//	read  ──► FreshTable ──Absent/partial──► SliceTable ──Absent/partial──► LsmStore (lower tier)
//	             │                              │ ▲ compaction (background)   ▲ │ LSM compaction
//	             │                              ▼ eviction (background) ──────┘ ▼ (background)
//	             └── flush of a sealed segment (background; only while the SliceTable is
//	                 empty, when the budget cannot hold a transform's slices) ──► LsmStore L0
//
// Concurrency (one mechanism): the owner goroutine (the caller's) does every read, write and
// install. Background tasks (scheduler/, the only goroutine starter) read immutable inputs —
// sealed segments, slices — and build immutable outputs; when one finishes it bumps an atomic
// counter, and the owner installs finished work at its next write (one atomic load on the fast
// path), or while a writer waits for memory (backpressure). Reads never install, so values and
// list batches a read returns stay valid until the next write, as the API documents.
//
// Install protocol:
//  1. Transforms are installed strictly in seal order (the head of a FIFO of sealed segments):
//     slice.Table.Install of the segment's slices, then fresh.Table.DropSealed of the segment.
//     Between the two calls the data is in both tiers (the FreshTable, read first, wins), so a
//     read never sees a gap or a stale version. Transforms run one at a time, which is what the
//     budget's reserve (below) is sized for.
//  2. A compaction or eviction job owns its input slices (slice marks them busy) until the owner
//     installs or cancels it; the owner frees replaced inputs at install, when no read can hold
//     them (readers are the owner, and values are documented valid until the next write).
//  3. An eviction's run goes to the lower tier in two steps, like a flush: the task writes it
//     (invisible), the owner installs it in the lower tier and then removes the slices.
//  4. Map iterations span writes (MapIterator.Remove, Put of the current user key). While one is
//     open, installs wait (a transform or compaction would move or free what it walks) — for at
//     most maxDeferredWrites writes, or until a writer needs memory; an install made while an
//     iteration is open ends it with ErrIteratorInvalidated rather than yield wrong entries.
//  5. The LsmStore's install order (lsm invariant 6: a file installed later is newer for every
//     key) holds because the tiers are in age order: evictions take each chain's oldest run,
//     and a flush — a sealed segment written as one L0 file, installed at the head of the FIFO
//     like a transform (InstallL0, then DropSealed) — is only started while the SliceTable is
//     empty and no eviction or slice compaction is in flight, so nothing older can be
//     installed after it. LSM compactions are picked after every install, run as Compaction
//     tasks and installed by the owner like the others; while L0 holds Options.L0StopWrites
//     files, writers wait for one (L0 stall).
//  6. A bulk replay's parallel parts (invariant 30) are written by tasks and by the owner, each
//     part invisible until the owner installs them all in one lower-tier install (one lsm
//     manifest record naming every part's L0 file), or discards them all if any part failed:
//     reads see a batch of the log tail entirely or not at all.
//
// Write stalls (one mechanism, stall): a writer that outruns the background waits, at most
// Options.BackpressureTimeout, for the job that ends its debt, and never fails for it. Three
// debts: L0 files (above); sealed segments queued for their transform, more than sealedStop
// (transform stall); runs in the SliceTable's chains, more than runStopPerBucket per bucket on
// average (compaction stall). Without the last two, a writer on a core it shares with the one
// worker borrows memory against work the worker never catches up with: sealed segments pile up
// (each one a FreshTable probe per read), and, since the worker takes compactions only between
// transforms (scheduler priority), chains grow until the budget is full of shadowed versions and
// live state is evicted — an overwrite load of 124 MiB of state at 1 GiB went to the LsmStore.
// Compactions are submitted in batches of about a segment's input (submitCompactions) for the
// same reason. A stall waits only while a job is in flight that can end it (none after a
// compaction failed for memory, or while the head transform waits for memory: backpressure).
//
// Eviction policy: while the writers' room in the budget (memory.Budget.WriterRoom) is below
// Options.EvictionRoom — the FreshTable's next segment (the block and row caches do not count:
// mapCaches maps them once the lower tier holds data, only from room beyond EvictionRoom, and
// no eviction is made for them: they yield to state); above Options.EvictionWatermark bytes of slices (when
// set); and whenever a writer waits for memory or the head transform failed for it, the
// coldest units of the chains' oldest runs are evicted (slice.Table.PickEviction, one batch
// in flight). The room test does not evict while a relocation is pending whose segments
// (slice.Relocation.Segments, whole segments back to the Pool at its install) cover the
// shortfall (except while a cache waits to be mapped over an LsmStore that holds data: the
// eviction's room maps it): that memory is held, not used, and comes back without moving state; a writer
// the budget refuses meanwhile waits for the relocation like for any job in flight, and
// evicts (backpressure) only if nothing is left in flight. Relocations run at the transform's
// priority (a memcpy of at most four segments: it frees memory as a transform does). The
// flight demo at 64 MiB evicted with 19 MiB free inside held slice segments while a
// relocation of four of them was pending. So state that fits the budget is never evicted. A transform that fails for
// memory while the SliceTable is empty switches to flushes for the next flushProbe segments:
// a budget that cannot hold a transform's slices beside the FreshTable (64 MiB with 16 MiB
// segments) then runs as FreshTable → LsmStore.
//
// Memory: the store adds a reserve to its budget (memory.Budget.AddReserve) that the FreshTable
// cannot take, sized for the slices of one transform, so a transform can always build its
// output before the segment it frees is dropped. Its size follows the transforms' measured
// output (reserveSize, sizeReserve, invariant 31): one segment until a transform has
// installed, then the largest output of the last reserveWindow transforms plus an eighth,
// rounded up to whole segments (a transform's new slice memory comes from the Pool a segment
// at a time), never below one segment nor above two; a transform that fails for memory puts
// it at two until the next install. The flight demo's transforms turn a segment into about
// half a segment of slices (its live records), so its reserve is one segment. A write refused
// with ErrMemoryBudget while background work is in flight waits for it (backpressure, counted
// in Stats) and retries.
//
// # Fixed costs
//
// The fixed costs are the budget's bytes that hold no state the Store could keep instead
// (root Stats.Budget.Fixed): the FreshTable's segments with their indices (the active one,
// and the sealed ones in flight to their transform), the transform reserve, EvictionRoom (the
// room eviction keeps free for the next segment: the root sets it to MinMemoryBudget, a
// segment and a quarter for its index), and the block and row caches once mapped. State is
// evicted beyond Limit − fixed costs, so they decide how much state stays in memory (issue 22:
// at most an eighth of a 64 MiB budget, more only when the state does not need the room).
// The rule, one mechanism:
//
//	part                      size (seg = segment size)        at 64 MiB (seg 2 MiB)
//	active segment + index    seg + its index: 8-byte slots,     2.5 MiB (the demo's
//	                            seg/8 for 100-byte records,         50-byte records)
//	                            seg/4 for 50-byte ones
//	EvictionRoom              seg + seg/4                       2.5 MiB
//	transform reserve         seg while a transform's slices    2 MiB
//	                            beyond the allocator's free
//	                            blocks fit in 8/9 of a segment
//	block and row caches      0 until the LsmStore holds data,  0
//	                            then only from room beyond
//	                            EvictionRoom (mapCaches)
//	sum                       27/8 to 7/2 seg                   7 MiB ≤ 64/8
//
// The root's default segment is the largest size (2 to 64 MiB) at most 1/32 of the budget's
// limit, so at the defaults the sum is at most 7/64 of the limit ≤ 1/8 from 64 MiB up (below
// 64 MiB the 2 MiB floor makes it a larger share). What may be more: the sealed segments in
// flight (one while its transform runs, at most sealedStop before writers stall: a transient
// that their transforms give back), a reserve of two segments for transforms whose slices
// outgrow a segment and the allocator's free blocks (measured, or after a transform failed
// for memory: the state's own need), and the caches, which map only from room the state
// does not use and never cause an eviction (more only when the state does not need the
// room). What smaller
// segments cost: more transforms, each with its fixed work (the sort buffer, a partly filled
// block per bucket: the SliceTable keeps a quarter of a segment of buckets' blocks, 32
// buckets at 2 MiB), fewer writes in place (a smaller active segment holds fewer keys'
// newest records), and values of at most a quarter of a segment. The flight demo at 64 MiB,
// 4 → 2 MiB segments (2026-12-05, a machine at load 10–15): transforms 136 → 165 (its
// checkpoints had sealed the 4 MiB ones half full), bytes transformed +15 %, CPU per event
// about +6 % (task and background alike; four alternated pairs, noisy), fixed costs 13.5 → 7 MiB at the end (mean
// over the run 14.9 → 8.4 with the sealed segments in flight), evictions 0–3 → 0; at 48 MiB,
// evictions 10 → 5. 64 buckets at 2 MiB built larger slices (323 MiB out of 308 in, not 284
// of 304) and compacted more.
//
// # What the budget covers
//
// The budget (memory.Budget) is the memory mapped outside the Go heap; everything else is Go
// heap, and each part of it is bounded independently of the state's shape (DESIGN §5: process
// peak ≤ MemoryBudget + a stated fixed allowance, for huge lists, huge maps, many
// namespaces):
//
//	inside the budget (hard limit)        outside (Go heap), per Store
//	────────────────────────────────       ─────────────────────────────────────────────────────
//	FreshTable segments + hash indices     LsmStore table indexes and bloom filters (~0.1% of
//	SliceTable slices                        the data on disk)
//	transform reserve (one transform's     LsmStore read/compaction buffers: one block per
//	  slices)                                open read or input; a compaction's list piece
//	LsmStore block cache                     (≤ base.MaxListPiece, 1 MiB: lists join in pieces)
//	row cache                              one list piece per open list read of a long LSM list
//	                                         (LowerList: ListGet copies ≤ ListEagerBytes, 256
//	                                         KiB, at once; longer lists stream piece by piece)
//	                                       one chunk (~MapChunk = 1024 live entries) per open map
//	                                         iteration reaching the LsmStore (lowMap)
//	                                       the sort buffer of the one transform or flush in
//	                                         flight (segRec, 40 bytes per entry, and the radix
//	                                         sort's scratch): mapped outside the Go heap and
//	                                         reused (recBuf), so it does not pace the collector
//	                                       the row cache's set summaries (8 bytes per 1 KiB
//	                                         set, 1/128 of the row cache; rowcache.go)
//	                                       the Go runtime; heap not yet collected (GOGC)
//
// tests/'s TestMemoryShapes and TestBoundedMemory assert VmHWM ≤ MemoryBudget + 96 MiB with
// 16 MiB segments (root Options.MemoryBudget).
//
// # Failures
//
// Background work can fail for reasons that pass: too many open files (EMFILE, ENFILE), an I/O
// error (EIO), a full disk (ENOSPC), an interrupted or timed-out call. It must never stop the
// Store for good nor make Close discard intact data (DESIGN §4), so every job's end goes
// through one function, jobEnded (retry.go), and one decision, transient:
//
//	job fails ──► budget shortage, cancellation ──► handled by the install logic (not failures)
//	          ──► transient(err) ──► retry: the kind of work (transform/flush, slice
//	          │                      compaction, relocation, eviction, LSM compaction) waits
//	          │                      10 ms · 2^(n-1), at most 1 s (NoSpaceRetry = 1 s for a
//	          │                      full disk), then kick resubmits it; success resets it
//	          └─ not transient ────► sticky: bgErr; damage (ErrCorruption) or a broken
//	                                 invariant (a task panicked, entries out of order)
//
// With the changelog on, its persists and materializations, which write to the checkpoint
// storage, end in jobEnded too (kinds bgPersist and bgMaterialization, "remote": retried by
// pollChangelog, never reported to writes nor waited for by Drain; see Changelog).
//
// Only the sticky kind stops the engine: writes report it, kick submits nothing more, Persist
// refuses (and the root's Close closes with it). A transient failure is counted
// (Stats.BackgroundErrors, BackgroundRetries, LastBackgroundError) and otherwise invisible to
// writes: the failed work's inputs stay where they were — a failed transform or flush keeps
// its segment at the head of the queue, a failed eviction's slices and a failed compaction's
// inputs stay readable (cancelled) — so reads and writes go on, and a writer that runs out of
// memory because the work that frees it keeps failing gets backpressure: it waits for the
// retries (awaitRetry) up to Options.BackpressureTimeout, then fails with ErrMemoryBudget
// naming the failure (not wrapping it). The one exception is a full disk: while the retry of
// work that failed with ErrNoSpace waits, writes and WaitBackground report that ErrNoSpace
// (a full disk needs the operator; the write itself is not applied), and the first write after
// NoSpaceRetry retries the work. WaitBackground retries failed work on its schedule and
// returns the last failure only if it still fails after BackpressureTimeout.
//
// Persist (Close) needs no background work: it waits for the jobs in flight, ignores
// transient failures, and moves the slices and segments into the LsmStore itself. An LSM
// compaction that keeps failing — the EMFILE at ~300 MiB — costs nothing but a larger
// L0; if Persist itself fails for a transient reason it returns the error with nothing lost
// (Transient tells the root to keep the Store open for another Close).
//
// # Checkpoints (checkpoint.go, restore.go)
//
// A native checkpoint is cut at an install boundary, on the owner goroutine, in
// StartCheckpoint: the active FreshTable segment is sealed (the only mutable part; sealing
// copies nothing and queues its transform as usual), then the sealed segments, the slices and
// the LsmStore's version are pinned (fresh PinSealed, slice Snapshot, lsm Snapshot). A pin
// does not stop installs: a transform, compaction, eviction, relocation or LSM compaction
// installed meanwhile changes the tiers as always, and only the release of what it frees —
// segment memory, slice blocks, table files — waits for the pin's release. So the cut is
// O(slices + table files) pointer copies, and the task goes on writing while the upload reads
// the pinned view from a scheduler task (class Upload):
//
//	cut (owner)                     upload (background)                      install (owner)
//	seal active segment   ──►  memory table: slices ∪ sealed segments  ──►  release pins
//	pin segments, slices,       merged in entry order, every version        (deferred frees
//	  LSM version, seq           kept, one table file, stored privately      happen now);
//	                           LSM tables: reused from the base by file      durable → pending
//	                             number, else stored (hard link) shared      completion
//	                           manifest (v2: levels, LastSeq) by Create
//
// The state at the cut is exactly the pinned version's tables (each at its level) below the
// memory table: at an install boundary every datum is in exactly one tier (a transform's
// Install and DropSealed, an eviction's lower-tier install and InstallEviction, a flush's
// InstallL0 and DropSealed each happen in one owner step), so nothing — a list append above
// all — is in the checkpoint twice. Pinned memory still counts in the budget; a writer short
// of it waits for the upload (it is in flight, inFlight) like for any background work.
//
// Incremental: the base is the table objects of the last completed checkpoint (or of the
// restore in CLAIM mode), by LSM file number; a table of the pinned version found there is
// referenced, with its current level, not stored again. Only CompleteCheckpoint moves the
// base (Flink's CheckpointListener: an aborted or merely durable checkpoint never becomes one).
// Garbage collection (checkpoint.GC, by reachability) runs as a scheduler task after each
// completion or abort; the objects of a running checkpoint are in its InFlight set.
//
// Restore's table import (restore.go; step 4 of "The restore sequence" below) writes a new
// Dir/lsm from the table objects of one or more checkpoints — hard links from a local
// checkpoint directory — clipped to the order hashes of the key groups each may answer for, and lsm.Import records them at their levels with the clip as
// their range; Open then recovers it like any LsmStore. Reads never see a table's entries
// outside its range, and compactions drop them (DESIGN §4, item 6: no key-by-key rewrite).
//
// # Lazy restore (lazy.go; issue 24, item 3)
//
// A lazy restore (RestoreSpec.Lazy; restoreLazy) does not wait for the tables' bytes: each
// table object becomes a LAZY FILE of a LazyFS, the vfs.FS the restored engine (its LsmStore,
// its checkpoints) works through, and Restore returns once the manifests are read and the directory skeleton
// (Dir/lsm with its manifest and CURRENT) is written. A lazy file is in one of four states:
//
//	linked    a hard link to a local checkpoint object (DirStorage on the same file system),
//	          size checked, CRC32C not yet: reads go to the local file
//	remote    no local bytes: reads are ranged reads of the object (checkpoint.Storage.GetRange)
//	local     complete and verified: reads go to the local file
//	corrupt   its CRC32C or size differs from the manifest: reads fail with that
//	          *base.CorruptionError (ErrCorruption)
//
// Before lsm.Import opens the tables, restoreLazy reads every remote file's first 4 KiB and its
// last 1/32 (at least 64 KiB: the footer, and the filter and index before it) in parallel on a
// scheduler of its own, and keeps them in memory until the file is local: a table's opens
// (Import's and Open's) then cost no round trip, and the restore of a remote checkpoint
// waits for about one round trip per 8 tables instead of six per table. That memory (about 3 %
// of the remote tables' bytes, Go heap) is outside the Store's budget while the prefetch runs.
//
// A PREFETCH (Engine.StartPrefetch: one task per file on a scheduler of its own with 4
// workers when every file is linked, DefaultRemotePrefetchLanes (16; Options.RemotePrefetchLanes)
// when any is remote — the bound on files in flight, closed by Engine.Close — its tasks
// mostly wait for the storage, and on
// the engine's scheduler they would hold the workers a compaction or a checkpoint's upload
// needs) moves every linked and remote file to local or corrupt: a linked
// file is read once for its CRC32C; a remote one is copied in 4 MiB ranges into a temporary
// beside it, its CRC32C computed on the way, synced and renamed over its name. When every file
// is local the prefetch syncs Dir/lsm and calls the restore's done function (the root removes
// its RESTORING marker there).
//
// The prefetch serves what the job reads first (ForSt's and SlateDB's readers fetch a remote
// table whole once it is read rather than block by block): a read of a remote file that goes
// to the storage PROMOTES the file — it moves to the head of the prefetch queue, after the
// files promoted before it (first read, first fetched) — so the next free lane fetches it
// whole; the files nobody read follow in manifest order. An object store's stream is slow
// (about 100 MB/s) next to its number of streams, and a restored table is read uniformly, so
// the remote lanes are many (16 × 4 MiB ranges in flight, Go heap outside the Store's budget
// while the prefetch runs): the whole state is local sooner, and the job's reads stop paying
// a round trip each. Ranged reads of single blocks are not cached: with uniform keys a
// read-ahead window of a table is hit again by about window/table of later reads, while the
// whole-file fetch makes every later read local.
//
// Invariants:
//
//  19. A lazy file's state only moves forward: linked → local | corrupt, remote → local |
//     corrupt; a read sees one state per call (one atomic load) and never mixes bytes of two
//     sources. The local and the remote bytes are the same bytes (the object is immutable and
//     the local copy is renamed into place only once its CRC32C matched), so a read that
//     raced the switch returns the same data either way.
//  20. Bytes of a remote file that reads return are unverified as a whole file, as a linked
//     file's are: the sstable blocks' own CRC32Cs check what a read uses. A file found
//     corrupt on arrival fails every later read of it — a Get names the object; a compaction
//     stops the engine (sticky, "Failures") — and LazyStats.Corrupt counts it; the directory
//     then never loses its RESTORING marker.
//  21. A transient storage error (anything but corruption, ErrNotFound and the context) is
//     retried by the prefetch with a backoff (doubling from 10 ms to 1 s, the task holding its
//     prefetch worker while it waits) and never stops the Store; a read that meets one fails
//     with it, and a compaction that meets one is retried as any transient failure is.
//  22. The directory is complete only once the prefetch finished: until then it keeps the
//     root's RESTORING marker, so a crash or a Close during the prefetch leaves a directory
//     that Open refuses (ErrRestoreIncomplete), and the caller restores again. A lazy file
//     the LsmStore removes (a compaction consumed it) leaves the prefetch; Remove of a remote
//     file removes only its name.
//  23. Link of a file that is not local fails with EXDEV, so a checkpoint of the restored
//     Store (checkpoint.putFile) copies it through the lazy file instead of linking a name
//     that has no bytes; Sync of a remote file does nothing (its durability is the prefetch's
//     and invariant 22's).
//  25. Promotion changes only the order of the prefetch: a file is promoted at most once,
//     fetched once by one lane (a promoted file already taken by a lane is not taken again),
//     checked and renamed as any other (invariants 19 to 22); a read during its fetch — or
//     during the retries of a failed fetch (invariant 21) — is served by the storage until
//     the rename, and a promoted file the LsmStore removed is skipped as any removed file.
//     Only reads after StartPrefetch promote (the restore's own opens do not).
//
// What is not promised: a linked file's bytes read before its check finished are as unchecked
// as a remote file's (invariant 20); a checkpoint taken during the prefetch uploads a file's
// bytes as read, unverified as a whole; Close does not wait for the prefetch.
//
// # The restore sequence (restoreseq.go: Restore)
//
// The root's strata.Restore validates its arguments, makes one call, Restore, and wraps the
// Engine it returns in a Store (the registry and operator state it returns become the Store's
// recovered ones, as Open's). Restore builds the Store's directory in nine steps; what each
// leaves durable, and what a crash right after it leaves:
//
//	step                                            durable after it            a crash leaves
//	1  RESTORING marker created, dir synced        the marker                  refused dir
//	2  manifests read; each source's fences        nothing                     refused dir
//	   checked; registries merged by name
//	   (restoreIDs); operator state redistributed
//	   (RedistributeOps) and bounded; the writer
//	   epoch and fence point chosen from the
//	   Store's own lineage (fences, checkpoint ids)
//	3  CLAIM mode: a claim marker in every other   claim markers (storage)     refused dir
//	   lineage restored from
//	4  tables fetched or linked into dir/lsm,      dir/lsm, its persist point  refused dir
//	   clipped (restore.go); lsm.Import writes a    naming the tables, the
//	   persist point with the merged registry and   registry and operator
//	   the operator state, no timer file            state
//	5  the engine opened over dir (lazily: over    nothing                     refused dir
//	   the LazyFS); the queues of the registry's
//	   timer services made
//	6  the WRITER file (writerfile.go): epoch,     WRITER                      refused dir
//	   fence point, a new writer id
//	7  checkpoint base (memory); the changelog     a bulk replay's or bulk     refused dir
//	   replayed (bulk or Apply); timers restored;   load's L0 files, named by
//	   canonical savepoints loaded (bulk or Apply)  no persist point yet
//	8  if step 7 added anything: PersistAll (the   the whole restored state    refused dir
//	   timer file, then a persist point naming it
//	   with the registry and operator state)
//	9  the marker removed (eager), or the          complete dir                dir Open recovers
//	   prefetch started, which removes it once                                 (lazily: refused
//	   every table is local (invariant 22)                                     until the prefetch
//	                                                                           is done)
//
// "Refused dir": Open fails with the root's ErrRestoreIncomplete; the caller removes dir and
// restores again (the checkpoints are unchanged). Invariants:
//
//  26. The RESTORING marker is durable before any other file of the directory is written, and
//     goes only once the whole restored state — tables, replayed changelog, timers, canonical
//     entries — is under one durable persist point (step 8, or step 4 when step 7 added
//     nothing) and, lazily, every table is local and verified: Open sees either a refused
//     directory or exactly the checkpoints' state for the Store's key groups, never a part.
//  27. The checkpoint storage is only read, except for the claim markers of step 3, which are
//     written before any object of the claimed lineage is used. The fence waits for the
//     Store's first checkpoint (the root's fenceCheckpoint, with the epoch of step 6), so a
//     Restore that fails, or a Store that never checkpoints, fences no writer.
//  28. An error leaves no engine open and removes what Restore wrote under dir
//     (RemoveRestored, the marker last: what it cannot remove stays refused); the claim
//     markers stay — a leak of storage, never a loss (they only keep objects from GC). After
//     Restore returned, a failure of the root's wrap (charging the operator state) undoes it
//     the same way (Restored.Discard).
//  29. The registry persisted at step 4 (and 8) is the one Restored returns: every state of
//     every source by name, distinct effective ids in every key group (restoreIDs), with the
//     Store's share of the operator state, at most MaxOperatorStateSize counted bytes and no
//     name both keyed and operator state. The root registers nothing before it wraps, so the
//     Store's next persist point (Close) writes the same registry plus what it registers.
//
// # Changelog (changelog.go; Options.Changelog, off by default)
//
// With the changelog on (Flink's FLIP-158, DESIGN §4), Apply's FreshTable write is followed by
// Log.Append of the same change — its OpKind, key group, the FreshTable's seq after the write,
// key, user key, value — the dual write. The order is reserve, write, append:
//
//	Log.Reserve(record) ──refused for memory──► persist the buffer on the owner goroutine
//	      │ ok                                   (or wait for the tiers' background work when
//	      ▼                                      nothing was buffered), reserve again, until
//	FreshTable write (with backpressure)         BackpressureTimeout: then ErrMemoryBudget
//	      │ ok                                   naming the persist's failure; nothing applied
//	      ▼
//	Log.Append (draws on the reservation: never refused for memory)
//
// A full log buffer is thus backpressure, never damage: the write waits, then fails with
// nothing applied, and the next write tries again (a checkpoint-storage outage fills the
// buffer, since no persist succeeds). The seq of the record is the FreshTable's after the
// write, so the append cannot come first; the reservation (changelog doc.go, Writer protocol
// 1) is what makes it certain. A write refused for memory or size logs nothing and keeps its
// reservation for the next write; an append refused anyway is a broken invariant (sticky),
// since the FreshTable then holds a change the log lacks. Reads never touch the log.
// Each generation's Log has an owner batch (changelog.Log.OwnerBatch): Append takes no
// mutex, and the owner publishes the batch (Log.Publish) before it submits or runs a persist,
// at a changelog checkpoint's cut, when a cut ends the generation, and before Stats — so
// every record up to a cut is in the Log's buffer when the checkpoint's task persists it.
// Every 64 logged writes the owner asks Writer.PersistDue and submits a persist (class
// Persist, on its own reserved worker when UploadWorkers > 0, so it never queues behind a
// materialization's or a checkpoint's upload) and starts a materialization when one is due
// (interval, or SpaceAmplificationCap); StartCheckpoint asks too, so that a state that shrank
// with no write since is seen.
//
// The space-amplification cap (livesize.go) holds the changelog's storage — the last durable
// materialization M and the log L since the last cut — to SpaceAmplificationCap (cp, DESIGN
// §5: 1.5) × the LIVE STATE: liveStateBytes, the FreshTable's data bytes + the SliceTable's
// memory + the LsmStore's table bytes, the tiers' own figures (at least 1 MiB; recomputed at
// most every 10 ms). A materialization is due when
//
//	growth:  L > (cp − 1) × live
//	shrink:  live < live at the last cut, M ≤ cp × live at the last cut, and M + L > cp × live
//
// The growth rule is the cap of a growing or steady state (it replaces "× M", which let M + L
// reach cp × a state that has since shrunk). The shrink rule catches a state that TTL
// cleanup or compactions of deletes made smaller while little was logged; its second
// condition keeps a materialization larger than the tiers (the checkpoint format) from
// starting another at every check. Live is the resident size: it falls when the tiers drop
// deleted and expired data (compactions, the TTL sweep), not at the delete itself.
//
//	generation 0            generation 1              generation 2 (appends)
//	seq (0, M1]             seq (M1, M2]              seq (M2, …)
//	──────────────────┬─────────────────────────┬───────────────────────►
//	                  M1: materialization cut   M2: materialization cut
//
// A materialization is a native checkpoint cut and upload (one in flight) that commits no
// manifest. Each
// native cut opens a new generation — a new changelog.Log — so no segment straddles a
// materialization. A checkpoint with a durable materialization M cuts only its seq S (no seal,
// no pin) and its task lists M's tables (with their levels) and the persisted segments of M's
// generation and every later one up to S (Log.Checkpoint persists the tail), LastSeq = S. The
// first checkpoint of a Store (no materialization yet) is native and is its first
// materialization. Restore loads the tables and replays every listed segment, records with
// seq <= LastSeq of the Store's key groups — in bulk (below) or through Apply: nothing to know
// about M, so the manifest format is unchanged. Replayed records are not logged again: the restored Store has
// no materialization, so its first checkpoint is native (a materialization) and holds them. When a checkpoint completes, the generations before its
// materialization are closed (truncation) and older materializations release their objects.
// Materialize (Store.Materialize) cuts one on demand, after waiting for one already running.
// Stats count the log through each Log's LogStats: appended and persisted are the live
// generations' counts plus the closed ones' (clState.gone), truncated is what the closed ones
// had persisted; a failed materialization (to start or to upload) counts in
// MaterializationFailures with its error.
//
// Checkpoint-storage failures (issue 21). The local state never depends on the checkpoint
// storage: Persist (Close) writes the tiers to Dir/lsm whatever the storage does, so a
// storage that refuses writes (EIO, ENOSPC, timeouts) costs checkpoints, never writes or
// Close. A failed background persist or materialization ends in jobEnded (Failures) as kinds
// bgPersist and bgMaterialization: transient → retried on the backoff (persists 10 ms doubling
// to 1 s, 1 s after ENOSPC; materializations, which seal the active segment at each cut, at
// least materializationRetry, 1 s) by pollChangelog, which submits neither while its backoff runs — they are
// "remote" kinds, which kick does not resubmit, Drain and WaitBackground do not wait for and
// writes are never told of (a full checkpoint disk is not the local one); damage or a broken
// invariant → sticky, as for any job. A failed materialization leaves its generation in
// place (the next checkpoint lists it: it holds records after the last durable
// materialization) and the failed persist's records stay pending in the Writer, charged, for
// the next persist. A checkpoint during the outage fails with the storage's error (its
// Log.Checkpoint persist or its upload cannot store), is not durable and changes nothing; the
// first one after it succeeds. MaxMaterializationFailures only reports: from that many
// consecutive failures on, ChangelogStats.MaterializationFailing is true (Flink's
// max-allowed-failures fails the job; here the job keeps running and the operator is told).
//
// At Close (Discard too), after the scheduler stopped, the changelog objects the Logs
// persisted that no checkpoint references are deleted, as Flink discards them when the
// backend closes (dropUnreferencedChangelog): an object is deleted only when it holds a
// segment of this engine's Logs, no manifest of the lineage in the storage names it, no
// other Log of the Writer holds a segment of it, and — with a Writer shared by several
// Stores — its footer lists only segments of this Store's owner. Best effort: an error
// deletes nothing more; what is left is ordinary garbage for the lineage's GC. Objects of
// closed generations (truncated) are not considered: the checkpoints that completed them
// reference them, and GC collects them by reachability.
//
// # Bulk changelog replay (replay.go, bulk.go; issue 24, item 4)
//
// Replaying a log tail through Apply costs the write path per record — the FreshTable write,
// its backpressure at the Store's budget, the transforms and evictions that push the records
// down — and then the root's Persist writes them all to the LsmStore anyway. A restore
// instead applies the tail in bulk, the way a flush writes a sealed segment (protocol item 5):
//
//	Collect (seq order; the log's objects read and checked at once on the scheduler's
//	workers and the owner, changelog.CollectParallel through forEachParallel, into one
//	buffer outside the Go heap with huge pages when the storage reads into it (a local
//	directory, the changelog cache): CollectOptions.OffHeap; the Batch is
//	released once its records are written — by replaySource, or for a lazy tail once its
//	driver ended or the scheduler stopped, releaseSources)
//	  ──► batches of ≤ bulkRecords records / bulkBytes bytes, in seq order
//	per batch: one segRec (40 bytes) per record, mapped outside the Go heap (the sort
//	buffers of a transform), newest first; radix sort by order hash (stable: equal orders stay
//	newest first), runs of one order hash ordered by base.Compare on the decoded records
//	  ──► base.Resolver (Stable; not Bottom: the restored tables lie below) ──► lsm WriteL0
//	  ──► InstallL0 as the newest L0 file
//
// A batch large enough (Options.BulkParallelMin records, DefaultBulkParallelMin: 32768) is
// split into parts by key-group range before the sort, one part per scheduler worker plus
// one for the owner, the cuts placed on a
// histogram of the batch's key groups so the parts hold about as many records each (a tail
// whose key groups all lie in one half of the range is still split evenly; a tail of one key
// group is one part). Each part is sorted, resolved and written as its own L0 file on a lane
// of forEachParallel: lane 0 the owner (which would otherwise only wait), the others Transform
// tasks, one per worker, each taking the next part in turn. The files go in together (install
// protocol item 6):
//
//	batch ──► stable scatter by part (key-group cuts) ──► part 0 │ part 1 │ … │ part k-1
//	  each: radix sort ──► Resolver ──► WriteL0        (owner)    (tasks of the scheduler)
//	  ──► one install of the k files as the newest L0 files (lsm InstallL0s)
//
// Records become the entries the FreshTable would have made of them (opEntryKind): put →
// KindValue, delete, list delete and map clear → KindTombstone (user key empty), list append →
// KindListAppend, list replace → KindListBase, map put → KindMapEntry, map remove →
// KindMapEntryTombstone, each with the record's own seq. The resolving is the Resolver's, as in
// every compaction: no second set of merge rules. So replayKeep, which Apply replays need, is
// skipped: the sort brings a key's versions together and the Resolver drops the superseded
// ones (they count as ChangelogSkipped); its hash table cost about 0.9 µs a record of a
// 664,000-record tail, more than sorting and writing the 18 % it would have dropped.
//
// After the sort the records are decoded in key order, at random places of the Batch's
// spans: each a cache and TLB miss, two with the Batch's record index. The iterator touches
// a group of touchBatch records one group before it decodes them (bulkSource.Touch), and the
// ends of a decoded group's values together before the writer copies them; the ordering of
// equal-order runs touches their records a window ahead. So the misses of a group overlap
// with each other and with the work on the group before; met one by one they cost about as
// much as all the rest of a part's write. The sort buffers are scratch advised huge pages
// (memory.MapScratch): written from start to end once per restore, they would take a fault
// per 4 KiB page otherwise.
//
// Invariants:
//
//  15. Bulk replay runs only while the upper tiers hold nothing (canBulkReplay: no FreshTable
//     record, no sealed segment, no slice, no eviction or slice compaction in flight, an empty
//     row cache) and a lower tier exists; otherwise Apply replays. So each batch's file is
//     newer than everything below it for every key and nothing older is installed after it
//     (lsm invariant 6, protocol item 5), and no upper tier hides it.
//  16. Sequence numbers are the records' own, all in (materialization cut, LastSeq]: above
//     every version of the restored tables of their key (the source's materialization holds
//     only seqs <= its cut, and sources hold disjoint key groups), unique per key (one write,
//     one seq; a record read twice is the Resolver's duplicate, rule 8), and at most the
//     FreshTable's seq (Restore gives the LsmStore the sources' largest LastSeq, so Open
//     starts numbering above it; bulkReplay checks it). A batch holds a seq range above the
//     previous batch's, so files installed later are newer, as they must be.
//  17. The reads after a bulk replay are those after an Apply replay of the same records
//     (TestBulkReplayMatchesApply): the Resolver joins operands only where Apply's FreshTable
//     would have them stacked too, and leaves operands over nothing as KindListAppend on the
//     tables below.
//  18. Nothing is logged and nothing counts as applied (AppliedBytes), as for an Apply replay
//     (invariant 8); the file survives a crash only after the root's Persist that follows the
//     replay (lsm InstallL0), and until then the restore's marker makes the directory a failed
//     restore: the checkpoint stays restorable (it is only read).
//  30. The parts of a batch hold disjoint key-group ranges, so their files are disjoint in
//     order hash: no key has versions in two of them, and the order in which they enter L0
//     (one install, the same lsm edit) cannot break lsm invariant 6; each is newer than every
//     file below it for its keys by invariant 15 and the previous batches' by 16. A part task
//     reads only the Batch (immutable while the replay runs), its own slice of the sort
//     buffers and its own Resolver and iterator, and writes only its pending file; the owner
//     waits for every task of the batch, whatever the outcome, before it installs, discards,
//     or touches the buffers again.
//
// Memory: the Batch (about the bytes replayed, as before), 40 bytes per record of a batch
// outside the Go heap (twice that while sorting), the decoded entries of one order-hash run
// while it is ordered, and the Resolver's pending operands of one key.
//
// Canonical savepoints restore by the same mechanism (bulkload.go, BulkLoad): the root turns
// their logical entries into the changes Apply would take (put, list replace then appends of
// at most the write path's batch, map put) in a BulkEntries, and bulkReplay writes them as it
// writes a log tail. They carry no seqs of their own, so:
//
//  24. A bulk load gives its n changes the seqs S+1..S+n in their order, S the FreshTable's
//     seq, and replaces the FreshTable — without a record or a sealed segment (invariant 15's
//     conditions, CanBulkLoad), so no reader holds any of its memory — by one that continues
//     after S+n: the changes are
//     newer than every restored table (their key groups come from no other source) and older
//     than every later write, a list's pieces keep their order, and invariants 16-18 hold as
//     for a log tail. Otherwise the root applies them through Apply. A bulk load does not
//     start the L0 files' compactions (a replay does): the restore's persist, which waits for
//     background work, would wait for them; they start with the Store's first write (Apply
//     kicks the scheduler), until then reads look through the L0 files.
//
// # Lazy tail (tail.go; issue 24, item 4)
//
// A bulk replay (above) writes the whole log tail before Restore returns, and with the tail of
// a loaded Store (about a million records behind a 3 s checkpoint window) that is most of a
// changelog restore: the sort, the Resolver and the L0 files. A lazy restore (RestoreSpec.Lazy,
// the root's CheckpointOptions.LazyRestore; Options.LazyTail forces it for tests and benchmarks)
// applies the tail as it opens the tables, lazily: Restore returns after Collect, and the tail
// is written in the background and installed at the first call that needs it.
//
//	Restore (owner)                                   background (scheduler)
//	tables linked (or lazily opened)
//	Collect each source's tail (CRCs checked) ─queue─► the driver, one Transform task: each
//	timers restored                                    source's batches cut as bulkWrite cuts
//	timer file written; no persist point yet           them (scatter by key-group part),
//	return (the RESTORING marker stays)                the parts on min(parts, workers) lanes
//	                                                   (driver + Transform tasks): radix sort,
//	                                                   Resolver, WriteL0 → pending files only
//	first read / eviction / flush / cut / Persist / …
//	  ──► awaitTail (owner): wait for the driver; install every batch's files in ONE
//	      InstallL0s (batches in seq order, a batch's parts in any order: invariant 30); then
//	      the deferred steps 8 and 9 of the restore sequence: a persist point (tables + tail,
//	      the timer file Restore wrote) and the marker removed (or left to the prefetch)
//
// Invariants:
//
//  32. Restore returns once the tables are linked (or lazily opened), every source's tail is
//     collected and the timers are restored; not after the tail is sorted, resolved or
//     written. Collect stays synchronous: its CRC checks and the collected bytes are the
//     restore's integrity, so a damaged or missing log object fails Restore as before, and
//     the driver needs no storage. The driver reads only the collected Batches (immutable
//     until the job ended, and released — unmapped — only after it: awaitTail after Wait,
//     dropTail after the scheduler stopped) and the sort buffers it took (Engine.sb, busy: a transform
//     meanwhile sorts on the Go heap); it reaches the tiers only through WriteL0 (lsm: safe
//     off the owner, changes no version), so its files are invisible until the owner
//     installs them. A canonical savepoint's BulkLoad during the same Restore waits for the
//     tail first (invariant 34).
//  33. Every read entry point (Get, ListGet, MapGet, MapIter, GetBatch, MapGetBatch, NewScan)
//     first waits for the whole tail, except a Get that the tail's value index answers
//     (invariant 39) — every part, not only the key's (a read of another key
//     group does not go ahead: the parts of a batch run side by side on the lanes and end
//     together, so a per-part wait would buy little unless parts were finer than lanes, each
//     one more L0 file). With no tail pending the wait is one pointer test. It waits on the
//     owner goroutine for the driver's Handle (a channel closed when the task ended: no lost
//     wake-up). The install it makes is the one exception to invariant 2 (reads never
//     install). It invalidates nothing a read returned: it adds L0 files and releases the
//     collected Batches and their indexes; the values Gets took from an index before it were
//     copied out of the Batch (into the lower reader's arena, invariant 39), and every other
//     read waits for the install before it returns anything, so no list batch, LowerList
//     place, map entry or iterator can point into a Batch.
//  34. Writes before the install go to the FreshTable as always: their seqs are above the
//     tail's (Open numbers after the sources' largest LastSeq; the driver checks every record
//     against the seq at Restore), and the upper tiers are read first, so a write wins over
//     the tail's version of its key. Whatever moves data into the LsmStore waits for the tail
//     first: an eviction (evict), a flush (canFlush), Persist (and so PersistAll and the
//     root's Close), a native checkpoint's or a materialization's cut (cut: so a checkpoint or
//     a savepoint taken right after Restore holds the tail), a BulkLoad (bulkReplay),
//     WaitBackground, Drain and CompactAll. So the tail's files enter L0 before any file of
//     newer data (lsm invariant 6). LSM compactions of the restored tables may run
//     meanwhile: their outputs hold older data only, below L0, under the tail's files.
//  35. All or nothing: the install is one InstallL0s of every batch's files (one lsm manifest
//     record), so reads see the whole tail or none of it. A failure of the driver (a part's
//     WriteL0: ErrNoSpace, I/O; a panic; a record of an unknown kind), of the install or of
//     the deferred persist is sticky and final (bgErr, errTailFailed, not Transient: writes,
//     Persist and Close report it, and the root's Close closes) and the
//     failed job stays, so every later read fails with it too rather than read without the
//     tail; its pending files are discarded. The checkpoint was only read and the directory
//     keeps its RESTORING marker: the caller restores again.
//  36. The directory is complete only after the install: awaitTail records the persist point
//     naming the tail's files (with the registry and the timer file Restore wrote, so the
//     point holds exactly the restored state) and only then is the marker removed — with lazy
//     tables by whichever of the prefetch and the tail ends last. A crash or kill before that
//     leaves a refused directory (invariant 26); an Engine Close (the root's Discard) while
//     the driver runs waits for it and discards its files, writing nothing.
//  37. RestoreStats of a lazy tail: ChangelogRecords counts the records collected and
//     ChangelogSkipped is 0 (the Resolver's counts, which split them, come only at the
//     install); ReplayTime is Collect's. TailStats gives the install's figures.
//  38. What the tail's install does to the directory comes before anything that builds on it:
//     PersistAll (the root's Close) waits for the tail before it writes its timer file, since
//     the install's persist removes every timer file but the restore's (found by review: a
//     Close with timers before any read named a removed file). And a SetTTL that widens the
//     TTL sweep while the tail is pending marks it (tailJob.forget): the driver noted its
//     files' expiry summaries under the table of its time and ForgetExpiry reached only the
//     installed files, so the install forgets again and the tail's files are due for the
//     sweep like every file from before (lsm ForgetExpiry).
//  39. Value reads do not wait (tailindex.go). queueTail indexes each collected tail's value
//     records (OpPut, OpDelete) by composite-key hash, newest record per key (one pass in seq
//     order; 8-byte slots, at most 3/4 full: 11 to 21 bytes a collected record, off the Go
//     heap and outside the budget, like the sort buffers and the Batch's own 16 bytes a
//     record; released with the Batch). A tail of 2^32-1 records or more gets no index (its
//     record numbers are 32-bit): its reads wait. While the tail is pending and every source
//     has an index, Get reads the FreshTable and the SliceTable (writes since Restore: newer
//     than the tail, invariant 34), then the index (a put: found, its value copied into the
//     lower reader's arena, so it outlives the Batch's release by a later install; a delete:
//     deleted), then the lower tier, which holds only the restored tables (older: nothing
//     moves data into it before the install). That is the answer the installed tail gives:
//     the Resolver keeps a key's newest put or delete, and a key has one kind, so no list or
//     map record can hide a value record. A row cached from the lower tier meanwhile is of a
//     key the tail has no value record of, so the install leaves it right (rowcache.go,
//     invariant 1). Every other read waits as invariant 33 says, and so does Get when a source
//     has no index (its mapping failed) or the job failed. Once the driver has ended (a
//     non-blocking look at its Handle), Get and Apply's preamble install the tail (awaitTail
//     then does not wait), so the Batch's memory goes back at the first read or write after
//     the driver, and a driver's failure is reported there as before (invariant 35); the
//     values served before it were the tail's own records, never a part of it.
//
// # Incremental materialization (issue 22; PLANNED — not implemented yet)
//
// Today every materialization rewrites the whole memory state (slices and sealed segments)
// into one private memory table and stores it (memoryTable, about 18 % of the flight demo's
// CPU, and most of its checkpoint bytes). The plan is a delta scheme by seq, as Flink's
// changelog backend materializes through an incremental RocksDB checkpoint. Terms: the
// horizon H of a Store is the cut seq of its last durable materialization; its chain is the
// memory objects that materialization lists (one full table F, then deltas D1..Dk).
//
//	materialization at cut seq S (H = previous cut, chain F, D1..Dk)
//	  delta: the pinned slices and sealed segments' entries with seq in (H, S], one table
//	         (a slice whose maxSeq <= H is skipped whole, by its seq range, unread)
//	  lists: F, D1..Dk, the new delta, the pinned LSM tables (shared by file number, as now)
//	  full:  when the chain's bytes exceed (SpaceAmplificationCap − 1) × the live memory
//	         bytes, or k reaches a bound, the memory table is written whole (today's path)
//	         and the chain restarts
//
// Invariants the implementation must keep (each one a test before the code):
//
//  1. No elision above the horizon. A compaction (slice compaction at the bottom of a chain,
//     LSM compaction at the last level, TTL filters) may drop a tombstone, or a version a
//     tombstone shadows, only when its seq <= H; a tombstone with seq > H is kept until a
//     materialization with cut seq >= its seq is durable (it is then in that delta). Without
//     this, restore merges F's old version with no tombstone above it: resurrection. The
//     engine passes H to the tiers' filters like a Pebble snapshot seq; H only grows.
//  2. Exactly once across tiers. With deltas, a version can be in the chain (materialized from
//     memory at seq <= H) and again in an LSM table flushed after H. Restore and LSM merges
//     must treat equal (composite key, seq) entries as one version — a list append counted
//     twice doubles an element. Compactions skip such duplicates already (base.Resolver.Add:
//     an entry with the group's previous Seq) and so do the LsmStore's map reads
//     (lsm/read.go); list reads and the engine's own merges need a test that proves the same,
//     else the manifest clips each memory object by seq to what no listed LSM table holds.
//  3. Order on restore. Chain objects are imported as L0, older below newer (F, D1..Dk in
//     install order), each clipped by key-group range as today; TTL cleanup in full snapshots
//     (ttl.go) applies only to full rewrites (Flink: cleanupFullSnapshot is not applied to
//     incremental checkpoints), deltas keep versions as they are.
//  4. Ownership and GC. Chain objects are stored under shared names (SharedName), referenced
//     by every later materialization and changelog checkpoint until a full rewrite; GC by
//     reachability is unchanged; CLAIM/NO_CLAIM restore treats them like shared LSM tables;
//     a failed materialization leaves H and the chain where they were (the next one retries
//     the same delta range).
//  5. Bytes. A materialization uploads the delta (≈ bytes changed since H) plus new LSM
//     tables; the full rewrite's cost is amortised by the cap in the table above.
//
// Measured on the flight demo (2026-12-04, 2 s interval, 26 materializations; a debug count,
// not committed): the entries with seq > H are 14–89 % of the memory table's entry bytes,
// about 30 % after warm-up (3–6 MiB of 10–20 MiB), so a delta writes about a third of today's
// memory table. The rest of a materialization's upload is LSM tables rewritten by LSM
// compactions since the base (0–35 MiB each, write amplification about 10), which a delta
// scheme does not change; they are shared by file number already.
//
// A flaw in invariant 3, found on review (2026-12-06), before any code: chain objects cannot
// be imported as L0 above the LSM tables. The LsmStore answers a key from the highest level
// that holds it (and a list stops at the first base), which is right only while every
// version above is newer than every version below. A chain breaks that both ways: F holds a
// key's version at seq 5; the key is evicted to an LSM table T (seq 5), rewritten (seq 50)
// and evicted again (T2) before the next delta, which then holds nothing for it — imported
// as L0, F answers seq 5 above T2's 50 (a lost update). Imported at the bottom instead, a
// delta's seq-70 version would sit below an LSM table's older seq-40 one. And a list's
// operand evicted to the LSM (seq 7) below F's base (seq 5) is lost to a read that stops at
// F's base. So a delta scheme needs one of:
//   - a restore that merges the chain with the LSM tables by seq (keeping a chain entry only
//     where no LSM table holds a newer full version — a put, base or tombstone, not an
//     operand — and re-joining operands across both): restore cost about the chain's entries
//     in point lookups, and the list rule above is subtle;
//   - or, as RocksDB's flush makes Flink's incremental checkpoint, the LsmStore as the
//     durable copy of every materialized version: a materialization writes the memory
//     tiers' entries with seq > H as new L0 tables of the LsmStore itself (newer than all it
//     holds, since everything older is in it), the memory tiers keep them as clean copies,
//     an eviction of a clean entry writes nothing, and the materialization lists LSM tables
//     only (shared by file number, as now). This keeps the LSM's order invariant by
//     construction, at the cost of LSM compaction of the materialized deltas in the
//     background (write amplification, measured per class in Stats) and the memory tiers
//     learning clean/dirty per entry. The second is the sounder design; it changes the
//     tiers' contract (doc.go "Tiers"), so it is an issue of its own, not a patch.
//
// # Timers (checkpoint.go)
//
// The engine keeps the timers of the root's timer services in package timer's queues (one per
// time domain of a service, per key group a set, a heap and an arena in one region outside the
// Go heap, memory.PurposeTimers; timers.go: TimerQueues, whose methods the root's typed
// TimerService calls). StartCheckpoint freezes them at the cut (CheckpointSpec.timers) —
// right after the tiers are pinned, or after a changelog checkpoint's sequence number is
// taken — copy on write, O(key groups): a group changed later is copied by its change, the
// frozen region released with the snapshot. The upload writes them first, beside the memory
// table, into one local file of one section per key group (timer.Snapshot.WriteTo), then
// releases them with the memory pins (memDone: a writer short of memory waits for that, as
// for the memory table), stores the file as one private object (PutFile) and lists one
// KindTimers entry per key group (manifest v4: packed range, CRC32C of the section, the key
// group). A restore picks the entries of its key groups (RestoreTimers). Not inside the
// memory table: its entries are imported into the restored LsmStore as keyed state, so timers
// there would have to be found again by a scan of every tier at each restore and kept out of
// the tiers' reads and compactions; as sections they are read straight into the timer
// queues, one range read per checkpoint. The directory's timer file (timerfile.go) holds the
// same sections at Close (PersistAll) and is read back at Open (LoadTimerFile).
//
// Every checkpoint stores the timers whole, changelog checkpoints too: timer changes are not
// logged. A changelog checkpoint then restores exactly the timers of its cut without a replay
// rule for them (a timer fires outside the FreshTable's sequence numbering, so a log of timer
// changes would need an order of its own), at a cost of O(timers) bytes uploaded per
// checkpoint, written in the background; timers are small beside keyed state (tens of bytes
// each). Materializations do not store them.
//
// # The root's metadata formats (registry.go, opstate.go)
//
// Two byte formats the root fills and reads back live here with their decoders, goldens (the
// root's testdata/registry-v*.bin, opstate-v*.bin) and fuzz targets, so that the root keeps
// only the typed side: the state registry (Registry: state names, kinds, codec identities,
// ids and their aliases, the timer file's name; the persist point's metadata and every
// manifest's Registry field), and the operator state blob (OpSnapshot: the operator states of
// one subtask) with its redistribution over a new parallelism on Restore (RedistributeOps, as
// Flink's RoundRobinOperatorStateRepartitioner). The registry carries the operator state blob
// opaque (Registry.Ops). Neither is on a hot path: they are encoded at Close and at each
// checkpoint, decoded at Open and Restore.
//
// # Key scans (scan.go)
//
// Flink's KeyedStateBackend#getKeys, getKeysAndNamespaces and applyToAllKeys need every key of
// a state: one merged, ordered walk over all tiers (Scan). Sources, newest first: each
// FreshTable segment (sealed ones and the active one) through the scan's own sorted index of
// its records, the SliceTable (slice.Cursor: bucket by bucket, a bucket's runs merged), the
// lower tier (LowerTier.Scan: lsm.Iter, every level merged, each table clipped to its range).
// One base.MergingIter puts them in entry order, so the versions of one composite key (a run)
// arrive together, newest first, and a run is resolved as the merge rules say (base doc,
// rules 1, 2, 5): the newest key-level version decides a value or list key (a tombstone hides
// older tiers; a list with an operand on top has elements whatever lies below), a map lives
// while one user key's newest version is an entry newer than the map's newest clear. A run
// yields its composite key once, with its live entries counted: list pieces and map entries
// collapse into their key. Only runs of the scan's state id, namespace (compared exactly, after
// the key's length prefix: a namespace that is a prefix of another never matches, FLINK-8679)
// and key groups count; the order hash puts key group before key group, so the walk goes key
// group by key group, and it starts and stops at the order hashes of the scan's key groups.
//
// Concurrency: a scan runs in steps (Scan.Next), each on the owner goroutine between two
// writes, reading the tiers in place like a point read — nothing is installed during a step,
// so nothing needs a pin. A step materializes a batch of at most a given number of keys into
// a new Go-heap arena and ends at a run boundary; it remembers the last composite key it
// finished. Between steps the owner may write (the root's ApplyToAllKeys calls the user's
// function for each key of the batch, which may clear or rewrite state), and installs happen
// as always. The next step merges the tiers as they are then, from the position on: no key is
// visited twice, a key live before the scan and after its step is visited, and a key written
// or cleared ahead of the position is seen as it is when the walk reaches it (FLINK-9060:
// deleting while iterating neither skips nor repeats).
//
// Between steps a scan holds: its position and batch; for each FreshTable segment on the read
// path, its sorted index (a 40-byte segRec per live record, as a transform's sort: on the Go
// heap up to 1 MiB, mapped outside it and outside the budget above; indexes of segments that
// left the read path are dropped at the next step, before anything is read) and the segment's
// handle; the lower tier's walk with its read buffers (256 KiB per L0 file and per level,
// lsm.Iter) but no pinned version. Nothing of the tiers' memory is held or deferred, so writes
// between steps never wait for a scan. Engine.Close ends every open scan (ErrClosed).
//
// Allocation: per step one arena for the batch's keys and, when the tiers changed, the
// lower tier's iterators of new tables; per scan about twenty (the Scan, its batch buffers
// sized once, a segment's index); nothing per key or per entry (the root's TestKeysAllocs).
// Cost: a step merges
// every entry of every state between two positions (the tiers are ordered by order hash, not
// by state), so a scan of one state reads all of them; plus, when the active segment was
// written since the last step, sorting the records appended as a new run of its index (runs
// merged geometrically: O(log n) sorts per record over a scan, not one per step).
//
// # TTL (ttl.go)
//
// The engine stores TTL values as any value (the root puts the timestamps in: base.TTL*); it
// takes part in TTL only to clean up. The root gives it a table of the states with a TTL
// (SetTTL: TTL, where the timestamps are, which cleanups the state wants) and the clock, as an
// immutable base.TTLTable behind an atomic pointer that background jobs load when they start.
// Every lookup in it goes by the whole composite key (TTLTable.StateOf: key group, then state
// id), never by the id alone: a Store restored from checkpoints whose Stores gave a state
// different ids keeps their ids per key-group range, so one id may name a state with a TTL in
// some key groups and one without in others (the root's state id aliases, registry.go).
//
//	slice compaction   slice.Options.NewFilter → base.TTLFilter per job (bottom: the chain's
//	                   end with no lower tier)
//	LSM compaction     lsm.Options.NewFilter → DefaultFilter, then base.TTLFilter per job
//	checkpoint         the memory table (memoryTable) through a TTLFilter that is never at the
//	                   bottom (the tables of the checkpoint lie below it)
//	row cache          a cached TTL value that has expired is a miss (rowcache.go, invariant 4)
//
// A filter drops expired values, map entries and whole list batches where nothing older lies
// below, turns them into tombstones elsewhere (so no older version resurfaces), and rewrites
// list batches without their expired elements; it reads the clock at its first TTL entry and
// again every QueryEvery entries (Flink's queryTimeAfterNumEntries). What it removed is
// counted in Stats (TTLCompaction*, TTLSnapshot*). Reads never judge expiry here: the root
// does, and its removals are ordinary writes through Apply.
//
// CompactAll (Store.CompactAll, RocksDB's CompactRange) runs those filters over everything:
// seal and transform the active segment, merge each bucket's whole chain into one run on the
// owner goroutine (slice.Table.PickChain: bottom where nothing may lie below, as the sweep
// decides), then CompactLSM into the last level. The background picks only chains over the
// compaction threshold and LSM levels over their size, so without it a single run or a file
// that is not due keeps its expired data until the sweep reaches it.
//
// # TTL sweep (sweep.go)
//
// Compactions reach data only when new data pushes it, so the expired data of keys nobody
// reads or writes again could stay for ever. The sweep bounds that (DESIGN §5, TTL): each
// state with a TTL has a bound R (root TTLCleanup.ReclaimWithin, default 2 × TTL; the table's
// smallest R is the Store's, base.TTLTable.Sweep), and the sweep runs in ticks of period
// P = R/5 (at least 1 ms) by the TTL clock:
//
//	tier          unit            summary                         the tick's work
//	FreshTable    active segment  fresh.Table.Active id, first     seal it once it stayed
//	                              seen (every sweepWrites writes)  active minTTL + P (a
//	                                                               transform follows)
//	SliceTable    run             base.Expiry per slice, noted by a compaction of the run alone
//	                              the builder (Build, compaction) through the TTL filter
//	LsmStore      table file      base.Expiry per file, noted as  the L0 compaction (an L0 file),
//	                              written; unknown for files      else the file rewritten in
//	                              found at Open or imported       place (lsm.DB.PickExpired)
//
// A slice run or a table file is due sweepLag (3) periods after its earliest expiry instant
// (base.Expiry.Due at now − 3P): a unit holding old copies of keys that are rewritten all the
// time has an oldest copy expiring at every tick, and the lag makes it one rewrite per four
// ticks, and one L0 compaction for the L0 files of several evictions, instead of one per tick
// and one per eviction (each an L0 compaction of all of L1). The active segment is sealed once
// it stayed active sweepSealAge — the smallest TTL of a state that sweeps (base.TTLTable.
// MinSweepTTL) and a period more — counted from the first look after its first write
// (sweepDue looks every sweepWrites writes), not from a tick: nothing in it can expire
// sooner, so sealing sooner moves no reclaim earlier (the run is due 3P after its earliest
// expiry whenever it was built) and costs transforms of partly filled segments. Sealing after
// one period counted from a tick sealed the flight demo's segment every ~1.5 periods, 391 transforms of
// 1.3 MiB instead of ~50 full segments, and their small runs' compactions cost 44 % of the
// process's CPU (2026-12-04; with both, one A/B run on the loaded VM: sweep jobs 4814 → 1232,
// transforms 410 → 213, transform + compaction + sweep CPU 3.06 → 2.24 µs per event). A file without
// a known summary — found at Open, imported by a restore, or written while the table lacked
// a state it now sweeps (SetTTL calls lsm ForgetExpiry when the swept states grow: a
// compaction at Open may run before the states register) — is due at openAt + R − P, openAt
// being the last such SetTTL: its data was stamped before, so what of it expired by then is
// reclaimed within R of openAt, and its rewrite has a summary. Slices need no such rule: they
// hold only data written since Open, noted under a table that knew its state. So the work of a
// tick follows the units that hold expired data, not the state: a slice run or file whose
// data all lives is not read. The summaries live beside the units in memory (a few words
// each); no format changed.
//
// When: a tick runs in kick (after every install, and whenever work may start; Apply's after
// kicks when sweepDue says so, every sweepWrites = 64 writes), when the period has passed
// since the last tick or the last tick's work was installed (again: a sealed segment's
// transform, a run's or file's rewrite may make more work due). The tick seals at the start
// of the kick (so the kick submits the transform) and picks at its end (sweepPick), after
// transforms, compactions and LSM compactions took their slots: the sweep yields to the
// tiers' own work (which filters expired data too), and with no compaction slot free it
// ticks again at the next kick. Between ticks it costs a counter per write and an atomic
// load and a clock read per kick. No goroutine and no timer: the sweep runs on the owner's
// calls, as every install does (invariant 4), so a Store nobody calls sweeps nothing.
//
// The bound: a datum expiring at x (or written after x) in a slice run or a table file is
// rewritten by the first tick after x + 3P, at most 4P after x (the lag); in the active
// segment written at w, it is sealed by the first tick 2P after the segment's first write
// (≤ w + 3P), and its run is due 3P after its earliest expiry (≤ x) — so within 4P = 4R/5 of
// max(x, w), if the owner calls in at least every P and the jobs (P of slack) keep up. A
// Store written fewer than sweepWrites times a period sees its active segment at the next
// tick instead, up to P later: within 5P = R, with no slack.
//
// Invariants:
//
//  11. Sweep jobs are the tiers' own jobs: a slice sweep is a slice.Compaction of one run,
//     installed by install's compaction loop; an LSM sweep is an lsm.CompactionJob in
//     lsmJobs. So the install protocol, the checkpoints' pins (deferred frees, invariant 6)
//     and the validity of values until the next write (invariant 2: ticks run only where
//     installs may) hold for them unchanged, and they remove only what the TTL filter
//     removes (invariant 10). The seal of the active segment is a Seal, as a checkpoint's;
//     it waits while a map iteration is open (protocol item 4).
//  12. A sweep job's output holds nothing expired by its filter's clock, so its summary is not
//     due before new data expires: ticks do not rewrite the same units over and again.
//     Data the filter keeps unparsed is left out of the summaries too.
//
// # Batched reads (batch.go)
//
// GetBatch reads up to BatchMax keys in stages, each issuing one independent load per key
// before any key's dependent work, so the core overlaps the keys' cache misses (Flink 2.0's
// asynchronous state access batches state reads for the same reason; here the overlap is the
// CPU's, not threads'): the FreshTable's index groups, then their records, then the lookups;
// for the keys the FreshTable lacks, slice.Table.PrefetchBatch (the search of every key in lock
// step), then the lookups; for the keys the SliceTable lacks, the row-cache sets, then, in
// order-hash order, the row cache and the lower tier as Get reads them.
//
//  13. A batch's results are Get's, key by key in order: the touch passes change nothing but
//     the cache (their loads feed a sink field); the lookups are Get's own code (lowGet is
//     shared), in batch order for the upper tiers and in order-hash order for the lower tier,
//     whose reads change only the row cache and its counters — as the same Gets in that
//     order would, and a row-cache hit returns what the lower tier holds.
//  14. The lower tier's reads are one at a time on the owner goroutine (no read is in flight
//     across a batch, nothing is started): ordering only lets consecutive reads share the
//     LsmStore's index and data blocks. A failed read fails its key only; the smallest failed
//     index is returned and TakeErr gives its error.
//
// # Cost accounting (cost.go; the root's cost.go and stats.go)
//
// Where a Store's CPU goes, always on (Stats.Background, Stats.Task; issue 22):
//
//  1. Background work is measured per job, exactly. Every task the engine submits carries
//     the Meter of its BackgroundClass (run, and the upload submits): the scheduler's worker
//     is locked to its OS thread and reads the thread CPU clock before and after the task
//     (scheduler invariant 11), so ClassCost.CPUNanos is that class's CPU, not wall time.
//     Classes: transform (and flush), compaction (slice compactions, relocations),
//     eviction, LSM compaction, TTL sweep, materialization, checkpoint (uploads and GC),
//     changelog persist. Bytes: transform in = segment data bytes, out = slice bytes built
//     (owner, at install); compaction and TTL sweep in = input slice bytes (at install);
//     eviction in = slice bytes evicted, out = L0 bytes (lsm Metrics, flushes included);
//     LSM compaction out = table bytes written; materialization and checkpoint out = bytes
//     stored (a changelog checkpoint's changelog segments excluded), persist out = the
//     object's size (by the task, atomically).
//  2. The task side is sampled. The root counts every API call and marks one in
//     SampleEvery (64): for it, SampleOn sets cost.on, and each entry point (Get, ListGet,
//     MapGet, GetBatch, MapGetBatch, Apply) re-enters itself with on cleared, timed with the
//     monotonic clock — nested calls are part of the outer one. A sampled Apply also times
//     the changelog append (split) and takes the time writers waited (waitNanos:
//     backpressure and the three stalls) out of its write time; SampleOff hands that wait to
//     the root, which takes it out of the call's time. The sums are scaled by
//     calls/sampled by the root. The common path pays one load and a branch per entry
//     point and nothing else: no clock read, no allocation.
//  3. The task's CPU is the process's (getrusage) since Open minus every class's CPU: it
//     holds the caller's code and the Go runtime too — exact for a process that runs one
//     Store's job.
//  4. AppliedBytes counts the logical bytes (composite key, map user key, value) of every
//     change Apply applied, records replayed at restore excluded: the "bytes changed" that
//     bytes written to each tier and to checkpoint storage are compared with.
//
// # Invariants
//
//  1. Every state change goes through Apply: before (sticky error or pending full disk, due
//     retries, read arena reset, installs, L0 stall), the FreshTable write with backpressure, the row-cache write-through, after
//     (queue transforms, the TTL sweep's check). A new OpKind must be handled by Engine.write (TestApplyEveryOp).
//  2. Reads never install and never write: values, list batches and map entries a read returns
//     stay valid until the next Apply (or StartCheckpoint, Materialize, WaitBackground,
//     Persist, Close). WaitCheckpoint, CompleteCheckpoint, AbortCheckpoint, WaitGC and
//     ChangelogStats only settle checkpoints (settleCheckpoints: pins, results), never tiers. A long list in the
//     lower tier is returned as places (LowerList) whose pieces are read one at a time; the
//     places, too, are valid only until then (LowerList.Valid; ErrIteratorInvalidated after).
//  3. Installs keep every tier's data in age order (protocol items 1, 3, 5), so reading newest
//     tier first and stopping at the first complete answer is correct.
//  4. Only the owner goroutine touches an Engine; background tasks touch only their job's
//     immutable inputs and outputs and the fields documented as shared (ready, wake).
//  5. A background failure stops the engine (bgErr) only if transient says it cannot pass;
//     every other one leaves the data where it was and is retried (Failures). This holds for
//     the changelog's persists and materializations: a checkpoint-storage outage stops
//     nothing (Changelog).
//  6. A checkpoint's pins are released only by the owner, after its upload ended (install,
//     WaitCheckpoint, Close); until then nothing the pinned view references is freed or
//     removed. One checkpoint runs at a time.
//  7. A checkpoint's manifest is committed only after every object it names is durable, with
//     create-if-absent; the base moves only on completion.
//  8. Changelog: every change Apply made to the FreshTable (but a restore's replay, while the
//     Store has no materialization) is, before Apply returns, in the newest generation's Log with a seq above the last materialization cut and at most the
//     FreshTable's seq (TestChangelogEveryOp covers each OpKind). Apply changes the FreshTable
//     only after the Log reserved the change's room (reserveLog), so a full log buffer refuses
//     the write, not its append (TestChangelogBufferFullOutage). A durable materialization's
//     objects, and every segment a Log references (WriterOptions.InFlight, own writer), are in
//     flight until truncation, so GC never takes what a later checkpoint will list.
//  9. Key scans: a step reads the tiers only (reads never install, invariant 2) and is
//     bracketed by writes, so it sees every datum in exactly one tier (invariant 3); between
//     steps a scan holds no pin, no tier memory and no offset into a segment that left the
//     read path (refresh drops such indexes before reading), and its position only grows, so
//     no composite key is yielded twice. Each composite key yielded has live state of the
//     scan's state id, exact namespace and key groups at the time of its step.
//  10. TTL cleanup (compactions, the sweep, the checkpoint memory table) removes only what has expired
//     by the clock when it runs, and replaces a removed version by a tombstone wherever an
//     older version may lie below: with a clock that never goes back, no read can tell
//     whether cleanup ran, except that an expired value not yet removed may still be returned
//     with Flink's ReturnExpiredIfNotCleanedUp.
//  11. and 12.: the TTL sweep, above.
//  13. and 14.: batched reads, above.
//  15. to 18. and 30.: bulk changelog replay, above (the one exception to invariant 1: a restore's
//     records reach the LsmStore without Apply, while the Store takes no other write).
//  19. to 23. and 25.: lazy restore, above.
//  24. and 15. to 18.: the bulk load of a canonical savepoint, above.
//  26. to 29.: the restore sequence, above.
//  31. The transform reserve is one segment at Open and at least one segment and at least
//     ceil(9/8 × the largest output of the last reserveWindow installed transforms ÷ a
//     segment) segments, at most two (and within the caps: a quarter of the budget for all
//     stores sharing it, room for a segment and a quarter beside it); after a transform fails
//     for memory it is two segments until the next transform installs. One function sizes it
//     (reserveSize). Only the owner changes it (installTransforms), so a writer sees either
//     size, never a torn one, and a transform that needs more than the reserve fails for
//     memory and is retried as before (the reserve then grows). So while transforms' slices
//     fit in 8/9 of a segment the fixed costs are about 3.5 segments (Fixed costs).
//  32. to 39.: the lazy tail, above (33: the one exception to invariant 2).
package engine
