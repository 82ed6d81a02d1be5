package peers

import (
	"bytes"
	"errors"
	"os"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

type badgerKV struct {
	db  *badger.DB
	dir string
	val []byte
	wb  *badger.WriteBatch
	// the current operation's arguments, read by the transaction closures
	// below (allocated once, so that only Badger's own allocations count).
	key, arg []byte
	found    bool
	scanFn   func(k, v []byte)
	viewGet  func(txn *badger.Txn) error
	updSet   func(txn *badger.Txn) error
	updDel   func(txn *badger.Txn) error
	viewScan func(txn *badger.Txn) error
}

func openBadger(dir string, cfg Config) (Store, error) {
	opts := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithSyncWrites(false).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithCompression(options.None).
		WithBlockCacheSize(cfg.Budget).
		WithMemTableSize(64 << 20).
		WithMetricsEnabled(false)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, err
	}
	b := &badgerKV{db: db, dir: dir}
	b.viewGet = func(txn *badger.Txn) error {
		item, err := txn.Get(b.key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			b.found = false
			return nil
		}
		if err != nil {
			return err
		}
		b.found = true
		b.val, err = item.ValueCopy(b.val[:0])
		return err
	}
	b.updSet = func(txn *badger.Txn) error { return txn.Set(b.key, b.arg) }
	b.updDel = func(txn *badger.Txn) error { return txn.Delete(b.key) }
	b.viewScan = func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: b.key})
		defer it.Close()
		for it.Seek(b.key); it.ValidForPrefix(b.key); it.Next() {
			item := it.Item()
			err := item.Value(func(v []byte) error {
				b.scanFn(item.Key(), v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	return newKVStore(b), nil
}

func (b *badgerKV) name() string { return "badger" }

func (b *badgerKV) get(key []byte) ([]byte, bool) {
	b.key = key
	check(b.db.View(b.viewGet))
	if !b.found {
		return nil, false
	}
	return b.val, true
}

func (b *badgerKV) set(key, val []byte) {
	if b.wb != nil {
		// A WriteBatch keeps the slices until it flushes.
		check(b.wb.Set(bytes.Clone(key), bytes.Clone(val)))
		return
	}
	b.key, b.arg = key, val
	check(b.db.Update(b.updSet))
}

func (b *badgerKV) del(key []byte) {
	b.key = key
	check(b.db.Update(b.updDel))
}

func (b *badgerKV) merge(key, operand []byte) bool { return false }

func (b *badgerKV) scan(prefix []byte, fn func(k, v []byte)) {
	b.key, b.scanFn = prefix, fn
	check(b.db.View(b.viewScan))
}

func (b *badgerKV) bulk(on bool) {
	if on {
		b.wb = b.db.NewWriteBatch()
		return
	}
	if b.wb == nil {
		return
	}
	check(b.wb.Flush())
	b.wb = nil
}

func (b *badgerKV) close() error {
	return errors.Join(b.db.Close(), os.RemoveAll(b.dir))
}
