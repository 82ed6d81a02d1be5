package peers

// kv is an ordered byte-keyed store: what Flink's RocksDB backend sees.
// kvStore turns it into a Store with Flink's composite keys.
type kv interface {
	name() string
	// get returns the value of key, valid until the next call.
	get(key []byte) ([]byte, bool)
	// set writes key = val; key and val may be reused by the caller after
	// set returns.
	set(key, val []byte)
	del(key []byte)
	// merge appends operand to the value of key with a merge operator; it
	// returns false when the store has none (kvStore then reads, appends
	// and writes).
	merge(key, operand []byte) bool
	// scan calls fn for every key starting with prefix, in key order.
	scan(prefix []byte, fn func(k, v []byte))
	bulk(on bool)
	close() error
}

type kvStore struct {
	db   kv
	kbuf []byte // composite key
	vbuf []byte // framed list elements
	lbuf []byte // list value rebuilt by a read-modify-write append
	// scan accumulators, kept here so the scan callback is allocated once.
	sn, sb int
	scanf  func(k, v []byte)
}

func newKVStore(db kv) *kvStore {
	st := &kvStore{db: db, kbuf: make([]byte, 0, 64), vbuf: make([]byte, 0, 1024)}
	st.scanf = func(k, v []byte) {
		st.sn++
		st.sb += len(k) - len(st.kbuf) + len(v)
	}
	return st
}

func (st *kvStore) Name() string { return st.db.name() }

func (st *kvStore) ValueGet(k Key) ([]byte, bool) {
	st.kbuf = composite(st.kbuf, k, nil)
	return st.db.get(st.kbuf)
}

func (st *kvStore) ValuePut(k Key, v []byte) {
	st.kbuf = composite(st.kbuf, k, nil)
	st.db.set(st.kbuf, v)
}

func (st *kvStore) ValueDelete(k Key) {
	st.kbuf = composite(st.kbuf, k, nil)
	st.db.del(st.kbuf)
}

func (st *kvStore) ListAdd(k Key, e []byte) {
	st.kbuf = composite(st.kbuf, k, nil)
	st.vbuf = appendFrame(st.vbuf[:0], e)
	st.appendList()
}

func (st *kvStore) ListAddAll(k Key, es [][]byte) {
	if len(es) == 0 {
		return
	}
	st.kbuf = composite(st.kbuf, k, nil)
	st.vbuf = appendFrames(st.vbuf[:0], es)
	st.appendList()
}

// appendList appends the framed elements in vbuf to the list at kbuf.
func (st *kvStore) appendList() {
	if st.db.merge(st.kbuf, st.vbuf) {
		return
	}
	st.lbuf = st.lbuf[:0]
	if old, ok := st.db.get(st.kbuf); ok {
		st.lbuf = append(st.lbuf, old...)
	}
	st.lbuf = append(st.lbuf, st.vbuf...)
	st.db.set(st.kbuf, st.lbuf)
}

func (st *kvStore) ListUpdate(k Key, es [][]byte) {
	st.kbuf = composite(st.kbuf, k, nil)
	if len(es) == 0 {
		st.db.del(st.kbuf)
		return
	}
	st.vbuf = appendFrames(st.vbuf[:0], es)
	st.db.set(st.kbuf, st.vbuf)
}

func (st *kvStore) ListGet(k Key) bool {
	st.kbuf = composite(st.kbuf, k, nil)
	v, ok := st.db.get(st.kbuf)
	return ok && len(v) > 0
}

func (st *kvStore) ListIterate(k Key) (n, bytes int) {
	st.kbuf = composite(st.kbuf, k, nil)
	v, _ := st.db.get(st.kbuf)
	return walkFrames(v)
}

func (st *kvStore) ListClear(k Key) {
	st.kbuf = composite(st.kbuf, k, nil)
	st.db.del(st.kbuf)
}

func (st *kvStore) MapGet(k Key, uk []byte) ([]byte, bool) {
	st.kbuf = composite(st.kbuf, k, uk)
	return st.db.get(st.kbuf)
}

func (st *kvStore) MapContains(k Key, uk []byte) bool {
	_, ok := st.MapGet(k, uk)
	return ok
}

func (st *kvStore) MapPut(k Key, uk, v []byte) {
	st.kbuf = composite(st.kbuf, k, uk)
	st.db.set(st.kbuf, v)
}

func (st *kvStore) MapRemove(k Key, uk []byte) {
	st.kbuf = composite(st.kbuf, k, uk)
	st.db.del(st.kbuf)
}

func (st *kvStore) MapIterate(k Key) (n, bytes int) {
	st.kbuf = composite(st.kbuf, k, nil)
	st.sn, st.sb = 0, 0
	st.db.scan(st.kbuf, st.scanf)
	return st.sn, st.sb
}

func (st *kvStore) Bulk(on bool) { st.db.bulk(on) }
func (st *kvStore) Close() error { return st.db.close() }

// prefixEnd returns the smallest key greater than every key with prefix p,
// appended to dst[:0] (nil when p is all 0xff).
func prefixEnd(dst, p []byte) []byte {
	dst = append(dst[:0], p...)
	for i := len(dst) - 1; i >= 0; i-- {
		if dst[i] != 0xff {
			dst[i]++
			return dst[:i+1]
		}
	}
	return nil
}
