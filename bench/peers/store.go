package peers

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/strata-db/strata"
	"github.com/zeebo/xxh3"
)

// MaxParallelism is the number of key groups every implementation uses
// (Flink's default lower bound, Strata's default).
const MaxParallelism = 128

// Key is the current key of an operation: serialized key K and namespace NS
// (empty for the void namespace). The harness reuses the buffers between
// operations; a Store must not retain them.
type Key struct {
	K, NS []byte
}

// Store is one implementation under test, holding one value, one list and
// one map state. Results alias the Store's memory until its next operation.
type Store interface {
	// Name is the implementation's name (impl= in benchmark names).
	Name() string

	// ValueGet returns the value of k (Flink ValueState.value).
	ValueGet(k Key) ([]byte, bool)
	// ValuePut sets the value of k (ValueState.update).
	ValuePut(k Key, v []byte)
	// ValueDelete removes the value of k (ValueState.clear).
	ValueDelete(k Key)

	// ListAdd appends one element (ListState.add).
	ListAdd(k Key, e []byte)
	// ListAddAll appends the elements in order (ListState.addAll).
	ListAddAll(k Key, es [][]byte)
	// ListUpdate replaces the list (ListState.update).
	ListUpdate(k Key, es [][]byte)
	// ListGet fetches the list without walking it (ListState.get) and
	// reports whether it is non-empty.
	ListGet(k Key) bool
	// ListIterate walks the list and returns the number of elements and the
	// sum of their lengths.
	ListIterate(k Key) (n, bytes int)
	// ListClear removes the list (ListState.clear).
	ListClear(k Key)

	// MapGet returns the value of user key uk (MapState.get).
	MapGet(k Key, uk []byte) ([]byte, bool)
	// MapContains reports whether uk is in the map (MapState.contains).
	MapContains(k Key, uk []byte) bool
	// MapPut sets uk to v (MapState.put).
	MapPut(k Key, uk, v []byte)
	// MapRemove removes uk (MapState.remove).
	MapRemove(k Key, uk []byte)
	// MapIterate walks the map's entries (MapState.iterator) and returns
	// their number and the sum of the lengths of keys and values.
	MapIterate(k Key) (n, bytes int)

	// Bulk(true) starts a bulk load (writes may be batched); Bulk(false)
	// ends it, makes the writes visible and compacts.
	Bulk(on bool)
	// Close releases the store and removes its files.
	Close() error
}

// Config is what every implementation is given.
type Config struct {
	// Dir is a directory for on-disk peers; "" means a new temporary one.
	Dir string
	// Budget is the memory budget in bytes: Strata's MemoryBudget and the
	// block cache of Pebble, Badger and goleveldb.
	Budget int64
	// Disk marks the larger-than-memory rows. Strata always opens on Dir
	// (a new temporary directory when Dir is ""), so that what exceeds
	// Budget spills to its LsmStore, and Close removes the directory.
	Disk bool
	// SegmentSize is Strata's Options.SegmentSize (0: its default, 64 MiB).
	SegmentSize int
	// TTL, when positive, gives Strata's value, list and map states a TTLConfig with this
	// time to live and Flink's defaults otherwise (update on create and write, never return
	// expired, compaction cleanup), on Strata's default clock. The other implementations
	// have no TTL and ignore it.
	TTL time.Duration
}

// Names lists the implementations in the order the benchmarks run them;
// strata first, so that every table's first row is the subject.
var Names = []string{"strata", "pebble", "badger", "leveldb", "bbolt", "gomap", "swiss"}

// Open opens the implementation called name.
func Open(name string, cfg Config) (Store, error) {
	if cfg.Budget <= 0 {
		cfg.Budget = 1 << 30
	}
	switch name {
	case "strata":
		return openStrata(cfg)
	case "gomap":
		return newGoMap(), nil
	case "swiss":
		return newSwiss(), nil
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "strata-bench-"+name+"-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	switch name {
	case "pebble":
		return openPebble(dir, cfg)
	case "badger":
		return openBadger(dir, cfg)
	case "leveldb":
		return openLevelDB(dir, cfg)
	case "bbolt":
		return openBbolt(dir, cfg)
	}
	return nil, fmt.Errorf("peers: unknown implementation %q (want one of %v)", name, Names)
}

// keyGroup is the key group of serialized key k, exactly as strata.Store.Key
// computes it.
func keyGroup(k []byte) uint16 {
	return uint16(strata.AssignToKeyGroup(int32(uint32(xxh3.Hash(k))), MaxParallelism))
}

// composite appends Flink's RocksDB composite key of k (and user key uk,
// when not nil) to dst[:0].
func composite(dst []byte, k Key, uk []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst[:0], keyGroup(k.K))
	dst = append(dst, k.K...)
	dst = append(dst, k.NS...)
	return append(dst, uk...)
}

// appendFrame appends one framed list element.
func appendFrame(dst, e []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(e)))
	return append(dst, e...)
}

// appendFrames appends the framed elements es.
func appendFrames(dst []byte, es [][]byte) []byte {
	for _, e := range es {
		dst = appendFrame(dst, e)
	}
	return dst
}

// walkFrames counts the framed elements of b and sums their lengths.
func walkFrames(b []byte) (n, bytes int) {
	for len(b) > 0 {
		l, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < l {
			panic(fmt.Sprintf("peers: corrupt list framing at %d bytes left", len(b)))
		}
		n++
		bytes += int(l)
		b = b[w+int(l):]
	}
	return n, bytes
}

func check(err error) {
	if err != nil {
		panic(fmt.Errorf("peers: %w", err))
	}
}
