package peers

import (
	"errors"
	"os"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

type levelKV struct {
	db    *leveldb.DB
	dir   string
	batch *leveldb.Batch
	rng   util.Range
	end   []byte
}

func openLevelDB(dir string, cfg Config) (Store, error) {
	db, err := leveldb.OpenFile(dir, &opt.Options{
		BlockCacheCapacity: int(cfg.Budget),
		WriteBuffer:        64 << 20,
		Compression:        opt.NoCompression,
	})
	if err != nil {
		return nil, err
	}
	return newKVStore(&levelKV{db: db, dir: dir}), nil
}

func (l *levelKV) name() string { return "leveldb" }

func (l *levelKV) get(key []byte) ([]byte, bool) {
	v, err := l.db.Get(key, nil) // goleveldb returns a fresh copy: its API allocates
	if errors.Is(err, leveldb.ErrNotFound) {
		return nil, false
	}
	check(err)
	return v, true
}

func (l *levelKV) set(key, val []byte) {
	if l.batch != nil {
		l.batch.Put(key, val)
		l.flushBatch(false)
		return
	}
	check(l.db.Put(key, val, nil)) // nil WriteOptions: no sync
}

func (l *levelKV) flushBatch(force bool) {
	if force || l.batch.Len() >= bulkBatchOps {
		check(l.db.Write(l.batch, nil))
		l.batch.Reset()
	}
}

func (l *levelKV) del(key []byte) { check(l.db.Delete(key, nil)) }

func (l *levelKV) merge(key, operand []byte) bool { return false }

func (l *levelKV) scan(prefix []byte, fn func(k, v []byte)) {
	l.end = prefixEnd(l.end, prefix)
	l.rng.Start, l.rng.Limit = prefix, l.end
	it := l.db.NewIterator(&l.rng, nil)
	for it.Next() {
		fn(it.Key(), it.Value())
	}
	it.Release()
	check(it.Error())
}

func (l *levelKV) bulk(on bool) {
	if on {
		l.batch = new(leveldb.Batch)
		return
	}
	if l.batch == nil {
		return
	}
	l.flushBatch(true)
	l.batch = nil
	check(l.db.CompactRange(util.Range{}))
}

func (l *levelKV) close() error {
	return errors.Join(l.db.Close(), os.RemoveAll(l.dir))
}
