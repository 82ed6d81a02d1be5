package peers

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// CommitEvery is the number of writes after which the bbolt peer commits
// its read-write transaction and begins the next one.
const CommitEvery = 1000

var boltBucket = []byte("state")

type boltKV struct {
	db     *bolt.DB
	dir    string
	tx     *bolt.Tx
	b      *bolt.Bucket
	writes int
	every  int
}

func openBbolt(dir string, cfg Config) (Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "state.bolt"), 0o600, &bolt.Options{
		NoSync:         true,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, err
	}
	k := &boltKV{db: db, dir: dir, every: CommitEvery}
	k.begin()
	if k.b, err = k.tx.CreateBucketIfNotExists(boltBucket); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return newKVStore(k), nil
}

func (k *boltKV) begin() {
	tx, err := k.db.Begin(true)
	check(err)
	k.tx, k.b = tx, tx.Bucket(boltBucket)
	k.writes = 0
}

func (k *boltKV) wrote() {
	if k.writes++; k.writes >= k.every {
		check(k.tx.Commit())
		k.begin()
	}
}

func (k *boltKV) name() string { return "bbolt" }

func (k *boltKV) get(key []byte) ([]byte, bool) {
	v := k.b.Get(key)
	return v, v != nil
}

func (k *boltKV) set(key, val []byte) {
	// bbolt keeps key and value until the transaction commits.
	check(k.b.Put(bytes.Clone(key), bytes.Clone(val)))
	k.wrote()
}

func (k *boltKV) del(key []byte) {
	check(k.b.Delete(key))
	k.wrote()
}

func (k *boltKV) merge(key, operand []byte) bool { return false }

func (k *boltKV) scan(prefix []byte, fn func(k, v []byte)) {
	c := k.b.Cursor()
	for ck, cv := c.Seek(prefix); ck != nil && bytes.HasPrefix(ck, prefix); ck, cv = c.Next() {
		fn(ck, cv)
	}
}

func (k *boltKV) bulk(on bool) {
	if on {
		k.every = bulkBatchOps
		return
	}
	k.every = CommitEvery
	check(k.tx.Commit())
	k.begin()
}

func (k *boltKV) close() error {
	return errors.Join(k.tx.Commit(), k.db.Close(), os.RemoveAll(k.dir))
}
