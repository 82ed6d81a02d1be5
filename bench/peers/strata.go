package peers

import (
	"errors"
	"fmt"
	"os"

	"github.com/strata-db/strata"
)

// strataStore drives the root package's public API, as a user would.
type strataStore struct {
	s   *strata.Store
	dir string // removed by Close ("" for a Store in memory only)
	v   *strata.ValueState[[]byte]
	l   *strata.ListState[[]byte]
	m   *strata.MapState[[]byte, []byte]
}

func openStrata(cfg Config) (*strataStore, error) {
	// Always on a directory, as the on-disk peers are: state beyond the budget spills to the
	// LsmStore instead of failing with ErrMemoryBudget (list addAll(100) grows lists past
	// 1 GiB over a long run).
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "strata-bench-strata-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	s, err := strata.Open(dir, strata.Options{MaxParallelism: MaxParallelism, MemoryBudget: cfg.Budget, SegmentSize: cfg.SegmentSize})
	if err != nil {
		return nil, err
	}
	st := &strataStore{s: s, dir: dir}
	var ttl *strata.TTLConfig
	if cfg.TTL > 0 {
		ttl = &strata.TTLConfig{TTL: cfg.TTL}
	}
	if st.v, err = strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes, TTL: ttl}); err != nil {
		return nil, err
	}
	if st.l, err = strata.NewListState(s, strata.ListDescriptor[[]byte]{Name: "list", Codec: strata.Bytes, TTL: ttl}); err != nil {
		return nil, err
	}
	if st.m, err = strata.NewMapState(s, strata.MapDescriptor[[]byte, []byte]{Name: "map", KeyCodec: strata.Bytes, ValueCodec: strata.Bytes, TTL: ttl}); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *strataStore) Name() string { return "strata" }

func (st *strataStore) key(k Key) strata.Key {
	key := st.s.Key(k.K)
	if len(k.NS) > 0 {
		key = key.In(k.NS)
	}
	return key
}

func (st *strataStore) ValueGet(k Key) ([]byte, bool) {
	v, ok, err := st.v.Get(st.key(k))
	check(err)
	return v, ok
}

func (st *strataStore) ValuePut(k Key, v []byte) { check(st.v.Put(st.key(k), v)) }
func (st *strataStore) ValueDelete(k Key)        { check(st.v.Clear(st.key(k))) }
func (st *strataStore) ListAdd(k Key, e []byte)  { check(st.l.Add(st.key(k), e)) }
func (st *strataStore) ListAddAll(k Key, es [][]byte) {
	check(st.l.AddAll(st.key(k), es))
}
func (st *strataStore) ListUpdate(k Key, es [][]byte) { check(st.l.Update(st.key(k), es)) }

func (st *strataStore) ListGet(k Key) bool {
	it := st.l.Get(st.key(k))
	ok := it.Next()
	check(it.Err())
	return ok
}

func (st *strataStore) ListIterate(k Key) (n, bytes int) {
	it := st.l.Get(st.key(k))
	for it.Next() {
		n++
		bytes += len(it.Value())
	}
	check(it.Err())
	return n, bytes
}

func (st *strataStore) ListClear(k Key) { check(st.l.Clear(st.key(k))) }

func (st *strataStore) MapGet(k Key, uk []byte) ([]byte, bool) {
	v, ok, err := st.m.Get(st.key(k), uk)
	check(err)
	return v, ok
}

func (st *strataStore) MapContains(k Key, uk []byte) bool {
	ok, err := st.m.Contains(st.key(k), uk)
	check(err)
	return ok
}

func (st *strataStore) MapPut(k Key, uk, v []byte) { check(st.m.Put(st.key(k), uk, v)) }
func (st *strataStore) MapRemove(k Key, uk []byte) { check(st.m.Remove(st.key(k), uk)) }

func (st *strataStore) MapIterate(k Key) (n, bytes int) {
	it := st.m.Iterator(st.key(k))
	for it.Next() {
		n++
		bytes += len(it.Key()) + len(it.Value())
	}
	check(it.Err())
	return n, bytes
}

// Bulk(false) waits for the background work of the load (transforms into the SliceTable,
// evictions, LSM compactions), as Pebble's adapter flushes and compacts after loading.
func (st *strataStore) Bulk(on bool) {
	if !on {
		check(st.s.WaitBackground())
	}
}
func (st *strataStore) Close() error {
	err := st.s.Close()
	if st.dir != "" {
		err = errors.Join(err, os.RemoveAll(st.dir))
	}
	return err
}

// Stats summarises where the Store keeps its state (for the benchmark log:
// a larger-than-memory row must show evictions and LSM files).
func (st *strataStore) Stats() string {
	s := st.s.Stats()
	return fmt.Sprintf("budget %d/%d MiB, segments %d (sealed %d), slices %d MiB (%d slices, %d runs, longest chain %d), LSM %d files %d MiB (L0 %d), evictions %d, flushes %d, block cache hits/misses %d/%d, row cache hits/misses %d/%d",
		s.Budget.Used>>20, s.Budget.Limit>>20, s.Fresh.Segments, s.Fresh.SealedSegments, s.Slices.Bytes>>20, s.Slices.Count, s.Slices.Runs, s.Slices.MaxChain, s.LSM.Files, s.LSM.Bytes>>20, s.LSM.L0Files, s.Slices.Evictions, s.LSM.Flushes, s.Caches.BlockHits, s.Caches.BlockMisses, s.Caches.RowHits, s.Caches.RowMisses)
}
