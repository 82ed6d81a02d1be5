// Package peers puts Strata and the stores it is measured against behind one
// interface, Store, so that every benchmark in bench/suite drives each of them
// with the same keys, values and operation order in the same binary.
//
// # Terms
//
//   - Key: the harness's current key, Flink's setCurrentKey: K is the
//     serialized key (an 8-byte big-endian Long in the key=8B rows, as
//     LongSerializer writes it; 16 bytes in the key=16B+ns8B rows), NS the
//     serialized namespace (empty for Flink's VoidNamespace, an 8-byte
//     window in the key=16B+ns8B and window rows).
//
//   - Key group: strata.AssignToKeyGroup(low 32 bits of xxh3(K), 128), the
//     same function and hash Strata's Store.Key uses, computed per operation
//     by every implementation (Flink computes it on setCurrentKey for every
//     backend).
//
//   - Composite key: what Flink's RocksDB backend writes
//     (RocksDBSerializedCompositeKeyBuilder), used by every byte-keyed peer:
//
//     +----------------+-------------+--------------------+--------------------+
//     | key group u16BE| K (8 bytes) | NS (0 or 8 bytes)  | user key (map only)|
//     +----------------+-------------+--------------------+--------------------+
//
//     Keys and namespaces have a fixed width in every workload, so, as in
//     Flink with fixed-length serializers, no length prefix is needed.
//     The byte-keyed peers keep all three state kinds in one keyspace, so a
//     benchmark uses one kind per Store instance, as Flink gives each state
//     its own RocksDB column family.
//
//   - List value: the elements framed as [uvarint len][bytes]... so that an
//     append is a byte concatenation (Pebble's merge operator, RocksDB's
//     merge in Flink) and a get parses the frames.
//
// # Implementations (Names)
//
//	strata   the root package's public API: ValueState/ListState/MapState
//	         with the Bytes codec, MemoryBudget = Config.Budget, on a
//	         (temporary) directory so that what exceeds the budget spills to
//	         its LsmStore (block cache: its default share of the budget),
//	         Options.SegmentSize = Config.SegmentSize.
//	pebble   Pebble v2 on disk in a temporary directory: block cache =
//	         Config.Budget, 64 MiB memtable, WAL disabled (DisableWAL), no
//	         compression on any level, lists via the concatenating
//	         DefaultMerger (Merge), as Flink's RocksDB list state.
//	badger   Badger v4: block cache = Config.Budget, 64 MiB memtable,
//	         SyncWrites off, conflict detection off, no compression, one
//	         View/Update transaction per operation (its API); its value log
//	         is its WAL and cannot be disabled. Lists are read-modify-write.
//	leveldb  goleveldb v1.0.0: block cache = Config.Budget, 64 MiB write
//	         buffer, no compression, writes without sync; its journal (WAL)
//	         cannot be disabled. Lists are read-modify-write.
//	bbolt    bbolt: NoSync, NoFreelistSync; one read-write transaction that
//	         serves reads and writes and is committed every CommitEvery
//	         writes (a per-operation Update costs a page copy and a commit,
//	         ~50 µs, that no in-memory store pays). No cache setting: it
//	         reads the OS page cache through its mmap.
//	gomap    Go builtin maps, the layout of Flink's heap backend: one map
//	         per state kind from the composite key (as a string) to the
//	         value, a *[]byte of framed list elements, or a nested
//	         map[string][]byte per (key, namespace). Overwrites of an equal
//	         length copy in place.
//	swiss    cockroachdb/swiss maps in the same shape as gomap; lookups
//	         use an unsafe string view of the composite-key buffer.
//
// # Invariants
//
//  1. Every Store is used by one goroutine. Slices returned by a Store are
//     valid until its next operation.
//  2. A Store panics on an error of the store below: the benchmarks have no
//     error path to measure, and an error is a harness bug.
//  3. Every implementation answers every operation with the same result for
//     the same sequence of operations (peers_test.go checks it).
//  4. Between Bulk(true) and Bulk(false) writes may be batched and are not
//     yet visible to reads; Bulk(false) makes them visible (and compacts
//     the LSM peers, as Flink's benchmark compacts RocksDB after setup).
package peers
