package peers

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// bulkBatchOps is the number of writes per batch (or transaction) in a bulk
// load.
const bulkBatchOps = 10_000

type pebbleKV struct {
	db    *pebble.DB
	cache interface{ Unref() }
	dir   string
	val   []byte
	end   []byte
	batch *pebble.Batch
	iopts pebble.IterOptions
}

// quietLogger drops Pebble's informational logs; Fatalf panics.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

func openPebble(dir string, cfg Config) (Store, error) {
	cache := pebble.NewCache(cfg.Budget)
	opts := &pebble.Options{
		Cache:        cache,
		DisableWAL:   true,
		MemTableSize: 64 << 20,
		Merger:       pebble.DefaultMerger, // concatenates operands: list append
		Logger:       quietLogger{},
	}
	opts.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, err
	}
	return newKVStore(&pebbleKV{db: db, cache: cache, dir: dir}), nil
}

// PebbleDB returns the *pebble.DB under st when st is the Pebble peer (nil otherwise), for the
// benchmarks of Pebble's own API that the Store interface has no place for (DB.Checkpoint).
func PebbleDB(st Store) *pebble.DB {
	if kv, ok := st.(*kvStore); ok {
		if p, ok := kv.db.(*pebbleKV); ok {
			return p.db
		}
	}
	return nil
}

func (p *pebbleKV) name() string { return "pebble" }

func (p *pebbleKV) get(key []byte) ([]byte, bool) {
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	check(err)
	p.val = append(p.val[:0], v...)
	check(closer.Close())
	return p.val, true
}

func (p *pebbleKV) set(key, val []byte) {
	if p.batch != nil {
		check(p.batch.Set(key, val, nil))
		p.flushBatch(false)
		return
	}
	check(p.db.Set(key, val, pebble.NoSync))
}

func (p *pebbleKV) del(key []byte) { check(p.db.Delete(key, pebble.NoSync)) }

func (p *pebbleKV) merge(key, operand []byte) bool {
	if p.batch != nil {
		check(p.batch.Merge(key, operand, nil))
		p.flushBatch(false)
		return true
	}
	check(p.db.Merge(key, operand, pebble.NoSync))
	return true
}

func (p *pebbleKV) flushBatch(force bool) {
	if force || p.batch.Count() >= bulkBatchOps {
		check(p.batch.Commit(pebble.NoSync))
		p.batch.Reset()
	}
}

func (p *pebbleKV) scan(prefix []byte, fn func(k, v []byte)) {
	p.end = prefixEnd(p.end, prefix)
	p.iopts.LowerBound, p.iopts.UpperBound = prefix, p.end
	it, err := p.db.NewIter(&p.iopts)
	check(err)
	for ok := it.First(); ok; ok = it.Next() {
		fn(it.Key(), it.Value())
	}
	check(it.Close())
}

func (p *pebbleKV) bulk(on bool) {
	if on {
		p.batch = p.db.NewBatch()
		return
	}
	if p.batch == nil {
		return
	}
	p.flushBatch(true)
	check(p.batch.Close())
	p.batch = nil
	check(p.db.Flush())
	check(p.db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff, 0xff}, true))
}

func (p *pebbleKV) close() error {
	err := p.db.Close()
	p.cache.Unref()
	return errors.Join(err, os.RemoveAll(p.dir))
}
