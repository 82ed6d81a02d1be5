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
// # Hot tier (issue 22; PLANNED — not implemented yet)
//
// A state call costs about 2.7× a Go map's even with everything in cache (BenchmarkHotReduce:
// 96–160 ns a ReducingState.Add against 30–60 ns), and the flight job makes about 15 per event:
// composing and hashing the key, the codec both ways, the FreshTable probe (two dependent
// cache misses: index group, record), a new record version per first write to a segment,
// and a changelog record per change. The plan is Flink's heap backend in front of the tiers
// (HeapKeyedStateBackend, CopyOnWriteStateMap): per registered state, a table on the Go heap
// of the keys in use holding decoded values, written in place and written back to the
// engine in batches. Terms: an entry is one (state, composite key[, user key]) with its value
// T — for a list, the elements appended since it was last written back, or the whole list
// when a Get or Update made it known —, dirty when it differs from what the engine holds; a
// write-back applies every dirty entry of a set through engine.Apply, as one net change per
// entry (OpPut, OpDelete, OpListAppend of the batch, OpListReplace, OpMapPut, OpMapRemove,
// OpMapClear first when the map was cleared).
//
// Invariants the implementation must keep (each one a test before the code; the model test
// gains a hot step kind):
//
//  1. One answer. A read finds the entry first (hit: T as written, no codec); a miss reads
//     the tiers as today and may insert a clean entry. So every read sees the newest write,
//     whichever side holds it. Reads that span keys (Keys, KeysAndNamespaces, NumEntries,
//     ApplyToAllKeys, a map's Iterator and Entries, GetBatch over several keys) write back
//     the state's dirty entries first (a map's iterator only that map key's).
//  2. Write-back before every cut. StartCheckpoint, Checkpoint, Savepoint, Materialize and
//     Close write back every dirty entry before the engine's cut, so a checkpoint, a
//     materialization, a savepoint and Close's persist hold every acknowledged write
//     (invariant 5 above and the checkpoint protocol unchanged); Discard drops the tier. The
//     changelog then holds one record per dirty entry per checkpoint interval instead of one
//     per call: a restore replays the net changes, which Flink's changelog semantics allow
//     (a checkpoint promises the state at its barrier, not the history before it).
//  3. Order within a key. An entry's write-back is the net effect of the calls since the last
//     one, in order: a Clear followed by Adds writes OpDelete (or OpListDelete, OpMapClear)
//     then the new value, never the reverse; different keys carry no order (they never did:
//     the tiers order by key, the changelog's per-key order is all a replay needs).
//  4. Errors where the call is. ErrKeyTooLarge and ErrValueTooLarge are decided at the call
//     (the key is composed at the call; the value's encoded size is checked at the call for a
//     codec without a fixed size — it is encoded then, the bytes kept for the write-back).
//     A write-back that meets ErrMemoryBudget after backpressure, or a full disk, fails the
//     operation that asked for it (the checkpoint fails, as Flink's when its snapshot cannot
//     be written) and leaves every entry dirty: nothing is lost, the next cut retries.
//  5. Inside the budget. Entries are charged to the memory budget (a purpose of their own,
//     bounded by an option, default an eighth of the limit), estimated from their encoded
//     size plus a fixed overhead; at the bound the tier writes back and drops clean entries
//     (clock order), so its memory is a cache's, never the state's only copy beyond one
//     checkpoint interval, and a steady job's sync pause is bounded by the dirty bound.
//  6. TTL as today. An entry keeps the timestamp the tiers would store; reads decide
//     expiry and visibility by the same rules (ttl.go), OnReadAndWrite renews it in the entry
//     (dirty). The background sweep works below the tier: a dirty entry is newer than what it
//     removes.
//  7. Aliasing. A T holding bytes (the Bytes codec) is copied into the entry at the write and
//     returned from it at a read, valid until the next write of that key (no longer than
//     invariant 2 above promises).
//
// Expected, from the flight demo's profile (2026-12-05): the task's engine read, engine write
// and changelog append (about 2.8 of 4.2 µs an event) and most of its codec time become Go
// map work plus about one write-back per key per checkpoint interval (about 17,000 entries
// per 50,000 events); background work falls with the versions no longer written. That is the
// lever for ½ of the Go model; tuning the per-call path as it is moved the
// ratio from 0.10 to about 0.2 over several sessions.
//
// # Example
//
//	store, err := strata.Open(dir, strata.Options{MaxParallelism: 128, MemoryBudget: 1 << 30})
//	counts, err := strata.NewValueState(store, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
//	k := store.Key(userID)               // key group and hashes computed once
//	n, ok, err := counts.Get(k)
//	err = counts.Put(k.In(window), n+1)  // namespaced (windowed) access
package strata
