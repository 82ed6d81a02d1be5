// Package strata is the keyed state of a stream processor, kept in a Go process without cgo:
// what a Flink task keeps in its keyed state backend — value, list, map, reducing and
// aggregating state per key and namespace — in memory mapped outside the Go heap.
//
// # Model
//
// A Store holds the state of one operator subtask. It owns a range of key groups
// (Options.KeyGroups) out of Options.MaxParallelism, Flink's model, so that rescaling is a
// re-assignment of key-group ranges. A Key is the serialized key bytes plus a namespace
// (a window, or empty); its key group and hashes are computed once by Store.Key (or
// Store.KeyWithHash, to reproduce Flink's partitioning with Java's hashCode) and reused for
// every state the record touches, as Flink's setCurrentKey. Key.In switches the namespace.
//
// States are registered by descriptor (a name unique per Store, a Codec per stored type) and
// follow Flink's interfaces with Go idioms:
//
//	ValueState[T]        Get / Put / Clear / GetBatch / PutBatch     (Flink ValueState)
//	ListState[T]         Add / AddAll / Update / Get / Clear /       (Flink ListState)
//	                     MergeNamespaces
//	MapState[UK, UV]     Get / Put / PutAll / Remove / Contains / IsEmpty /
//	                     Iterator / Entries / Keys / Values / Clear / GetBatch
//	                                                                 (Flink MapState)
//	ReducingState[T]     Get / Add / Clear / MergeNamespaces         (Flink ReducingState)
//	AggregatingState     Get / Add / Clear / MergeNamespaces         (Flink AggregatingState)
//
// Operator state — the non-keyed state of a subtask, Flink's OperatorStateBackend — is
// registered the same way (operator.go), in the same namespace of names:
//
//	OperatorListState[T] Get / Add / AddAll / Update / Clear         (Flink operator ListState;
//	                     NewOperatorListState: even-split, NewUnionListState: union)
//	BroadcastState[K, V] Get / Put / PutAll / Remove / Contains / Entries / Clear
//	                                                                 (Flink BroadcastState)
//
// It is small and lives on the Go heap, counted and charged to the memory budget
// (memory.PurposeOperatorState) up to MaxOperatorStateSize; checkpoints store it whole in their
// manifest and Restore redistributes it by Options.SubtaskIndex and Options.Parallelism, as
// Flink's RoundRobinOperatorStateRepartitioner (a union list stored once, not once per
// subtask).
//
// Timers — Flink's InternalTimerService — are registered by name the same way (timers.go),
// typed by their namespace codec, and kept per key group outside the Go heap, charged to the
// memory budget (package timer's queues, which internal/engine owns):
//
//	TimerService[N]      RegisterEventTimeTimer / RegisterProcessingTimeTimer /
//	                     DeleteEventTimeTimer / DeleteProcessingTimeTimer /
//	                     AdvanceWatermark / AdvanceProcessingTime (fire due timers, in
//	                     timestamp order, through a callback that gets a Key usable with the
//	                     states) / CurrentWatermark / NumEventTimeTimers / ForEach…Timer
//
// The caller drives time: there is no clock and no goroutine. Timers are part of every
// checkpoint (a section per key group; restored and rescaled with their key groups) and of
// what Close persists.
//
// The backend-level key operations of Flink's KeyedStateBackend take a registered state
// (keys.go); they scan every tier in steps of a bounded batch, so the loop may write:
//
//	Store.Keys(state, ns)                each key with state in namespace ns, once  (getKeys)
//	Store.KeysAndNamespaces(state)       each (key, namespace) with state, once     (getKeysAndNamespaces)
//	Store.NumEntries(state)              live entries; a map's are its user keys    (numKeyValueStateEntries)
//	Store.ApplyToAllKeys(ns, state, fn)  fn may clear or rewrite each key's state   (applyToAllKeys)
//
// A descriptor's TTL field (TTLConfig, Flink's StateTtlConfig) gives a state a time to live:
// each value, list element and map entry carries the processing time of its last write
// (Options.Clock, milliseconds) and expires TTL after it, exactly as Flink's TTL states decide
// (ttl.go); reads remove what they find expired, compactions and (optionally) checkpoints and
// each access clean up the rest. A state stored with a TTL and registered without one after a
// reopen, restore or rescale (or the reverse) has its stored values migrated by the
// registration, as Flink 2.x migrates them (ttl_migrate.go).
//
// Absent keys read as (zero, false, nil), where Flink returns null. Go values have no null,
// so ValueState.Put stores whatever the codec encodes (a nil []byte reads back as an empty,
// present value) where Flink's update(null) clears: use Clear.
//
// # Layout
//
// A Store keeps its states in three tiers (internal/engine/doc.go draws the paths): writes go to a
// FreshTable (package fresh) in segments of Options.SegmentSize bytes taken from a memory.Pool
// under a hard memory.Budget; sealed segments are transformed in the background into the
// sorted slices of a SliceTable (package slice); with a directory, the coldest slices — or,
// when the budget is too small for slices, whole sealed segments — go to an LsmStore of files
// (package lsm) once the budget lacks room for the next segment (Options.EvictionWatermark).
// Reads fall through the tiers,
// newest first. A record's key is
//
//	[key group u16 BE][state id u16 BE][uvarint len(key)][key][namespace]
//
// hashed by combining xxh3 of the key, xxh3 of the namespace and the state id. Map user keys
// nest under that key and are hashed with go-metro; list elements are framed as
// [uvarint len][codec bytes] inside append-only batches.
//
// # Invariants
//
//  1. A Store and its states are used by one goroutine at a time (the task's), like a Flink
//     task thread. They share per-Store scratch buffers, so get and put allocate nothing;
//     builds with -race or -tags invariants panic on overlapping use.
//  2. Bytes returned by aliasing codecs (Bytes) and list iterators read the Store's memory in
//     place and are valid until the next write to the Store — any state's Put, Add, Update,
//     Remove, Clear or MergeNamespaces, and StartCheckpoint, Checkpoint, WaitBackground and
//     Close — however many reads come between (waiting for a checkpoint, notifying its
//     completion or abort, reading stats, Evict and Check do not end it) (a list iterator
//     also until the next Get or MergeNamespaces on its state, which reuse its buffer). A
//     read of a state with a TTL is a write when it removes expired data, renews a timestamp
//     (TTLOnReadAndWrite) or runs incremental cleanup (TTLCleanup.IncrementalSize), as
//     Flink's TTL states write on read: it ends the validity of what was read before it, and
//     what it returns is valid until the next write (a copy, or decoded from what it wrote).
//  3. A key group is computed exactly as Flink's KeyGroupRangeAssignment, and a state
//     operation on a Key outside the Store's range fails with ErrKeyGroupOutOfRange.
//  4. Memory beyond the budget is refused with ErrMemoryBudget, never taken.
//  5. With a directory, Close persists every acknowledged write and Open recovers it; a crash
//     reopens to the state of the last Close, and a damaged file gives ErrCorruption (with
//     ErrTruncated, ErrChecksum, ErrFormatVersion or ErrBadMagic, and the file and offset),
//     never a wrong value or a panic (persist.go).
//  6. A fault that may pass (EMFILE, EIO, ENOSPC, a timeout) never stops a Store: failed
//     background work is retried with backoff while reads and writes go on (writes see
//     ErrNoSpace while a full disk's retry waits, nothing else), and a Close that cannot
//     persist for such a fault leaves the Store open for another Close. Only damage
//     (ErrCorruption) or a broken invariant stops it (Store, "Failures of background work").
//
// # Durability
//
// Close persists a Store's directory; between Closes, checkpoints (StartCheckpoint, to a
// checkpoint.Storage; incremental, or the changelog's tail on top of a materialization with
// CheckpointOptions.Changelog) are what survives a crash: Restore builds a Store from the
// checkpoints of one or more Stores for any key-group range (rescaling). A Store in memory
// only (dir "") drops its state on Close unless checkpointed.
//
// # TTL cleanup
//
// Expired data of keys that are never read again is removed by compactions (TTLCleanup.
// NoCompaction turns that off), by the background sweep that bounds how long it stays
// (TTLCleanup.ReclaimWithin; internal/engine/doc.go, "TTL sweep"), by a checkpoint with
// TTLCleanup.FullSnapshot, and by incremental cleanup on accesses (IncrementalSize) or for
// every record the task marks with Store.RecordProcessed (EveryRecord, Flink's
// runCleanupForEveryRecord).
//
// # Hot tier (Options.HotTierSize; issue 22)
//
// A state call costs about 2.7× a Go map's even with everything in cache (BenchmarkHotReduce:
// 96–160 ns a ReducingState.Add against 30–60 ns), and the flight job makes about 15 per event:
// composing and hashing the key, the codec both ways, the FreshTable probe, a new record
// version per first write to a segment, and a changelog record per change. The hot tier is
// Flink's heap backend in front of the tiers (HeapKeyedStateBackend, CopyOnWriteStateMap): per
// registered state without a TTL, a table on the Go heap of the keys in use, written in place
// and written back to the engine as one net change per dirty entry (OpPut, OpDelete,
// OpListReplace or OpListDelete then OpListAppend, OpMapPut, OpMapRemove). It is off by default
// in this version (HotTierSize 0) and on in the flight demo (an eighth of the budget).
//
// As built (hot.go, whose comment numbers them H1–H9), the entries hold engine-level
// bytes rather than decoded values: one mechanism for every kind and codec, the codec still
// runs at each call, and aliasing (invariant 7) is what it is without the tier. Invariants:
//
//  1. One answer. A point read finds the entry first (hit), else reads the tiers and inserts
//     a clean entry. Every call that reads across keys (Keys, KeysAndNamespaces, NumEntries,
//     ApplyToAllKeys, map iterators and Entries, GetBatch, list MergeNamespaces, a map's
//     Clear, IsEmpty) enters as opCall, which writes every dirty entry back first; every
//     engine write outside the tier goes through Store.apply, which drops the key's entry.
//  2. Write-back before every cut. StartCheckpoint, Savepoint, Materialize, WaitBackground,
//     CompactAll and Close write every dirty entry back before the engine's cut; a failed
//     write-back fails the cut and keeps the entries dirty; Discard drops the tier. The
//     changelog holds one record per dirty entry per cut instead of one per call: a restore
//     replays net changes, which Flink's changelog semantics allow.
//  3. Order within a key: an entry's write-back is the net effect of its calls since the last.
//  4. Errors where the call is: sizes (ErrKeyTooLarge, ErrValueTooLarge) and the engine's
//     sticky state (damage, a full disk's retry window, a failed lazy tail) are checked at the
//     call. A point operation never fails for a write-back (with no room it goes to the
//     tiers directly); a call that reads across keys does, while the write-back fails (a full
//     disk, a checkpoint storage outage that filled the changelog buffer): point reads and
//     writes go on meanwhile.
//  5. Inside the budget: entries are charged (memory.PurposeHotTier) up to HotTierSize; at the
//     bound the tier drops its clean entries when they hold a quarter of its bytes or more
//     (no write: the dirty ones stay for the next cut), else it writes everything back and
//     drops every entry (no clock order yet).
//  6. TTL: a value, reducing or aggregating state with a TTL has a table only with the
//     default TTL settings (expiry decided on the entry's bytes at each read); list and map
//     states with a TTL have none (hot.go, H6).
//  7. Aliasing: a value read from an entry is valid until the next write to the Store; a
//     point read does not write (a full tier serves it uncached), but a call that reads
//     across keys writes the tier back first, so it ends the values read before it as a
//     write does.
//  8. Net no-ops: a delete of a key the tiers below do not hold leaves the tier, never
//     reaching the engine or the changelog (HotTierStats.Elided).
//  9. A table earns its place: every 65,536 entries a table makes, it is judged at the enter
//     of the next call that writes the tier back (a cut, a read across keys); when its
//     lookups found fewer entries made by earlier calls than it made (keys written or read
//     once between cuts, or read back across keys after each write, as Nexmark q19's ranking
//     iterates the map it just wrote), the table is turned off for the Store's life and its
//     state goes to the engine (HotTierStats.TablesOff). Measured on Nexmark (1–2 M events,
//     2 vCPUs, events per CPU-second ÷ the Go model's): the tier took q19 from 0.55 to 0.44;
//     with the judgement its table is turned off and it runs at 0.53–0.58; q16's two tables
//     of keys read once are turned off, its other tables' hits go from 54 % to 84 % and it
//     runs at 0.41 (0.34 before). The flight job's tables all stay.
//
// Measured on the flight demo (2026-12-05, 2 vCPUs, alternated runs; bench/cmd/flightdemo
// -hot): 90 % of point reads hit; engine writes fall 6.7× (3.4 M write-backs for 3 M events),
// the changelog's share of the task from 10 % to 2–3 %, background CPU per event by about a
// quarter (3.0–3.3 → 2.2–2.5 µs); but the task's CPU per event does not fall (4.8–5.6 µs
// against 5.4–5.9 µs off): the tier's lookups are bound by memory latency as the FreshTable's
// probes were (a slot, then the entry: about 100 ns each at this working set), so replacing
// one probe by another moves little. What would move it is fewer lookups per event (a typed
// entry per key holding every state of the operator) or a working set that fits the caches.
// Since 2026-12-06 a table keeps its entries in its own array behind 1-byte tags, so a lookup
// is one load from memory instead of two (the slot, then the entry): a ReducingState.Add over
// 256 Ki keys went from 515 to 400 ns (BenchmarkHotReduce keys=256k, 6 alternated rounds,
// p=0.002), 3,400 keys in cache from 95 to 100 ns; the flight job's lookup share fell from
// about 25 to 22 % of its CPU, its events/s within this VM's noise.
//
// # Example
//
//	store, err := strata.Open(dir, strata.Options{MaxParallelism: 128, MemoryBudget: 1 << 30})
//	counts, err := strata.NewValueState(store, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
//	k := store.Key(userID)               // key group and hashes computed once
//	n, ok, err := counts.Get(k)
//	err = counts.Put(k.In(window), n+1)  // namespaced (windowed) access
package strata
