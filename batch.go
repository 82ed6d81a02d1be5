package strata

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// BatchChunk is the number of keys a batched operation (ValueState.GetBatch, PutBatch) hands
// the engine at once: a batch of any length is processed in chunks of BatchChunk keys, in
// order. Within a chunk the independent cache misses of the keys overlap (see GetBatch).
const BatchChunk = engine.BatchMax

// BatchError is the error of a batched operation: the first key, in batch order, whose
// operation failed, and that key's error as the single call (Get, Put) returns it. What
// happened to the other keys is documented by each operation. It unwraps to Err, so
// errors.Is(err, ErrKeyGroupOutOfRange) and the like hold for it.
type BatchError struct {
	Index int   // index in the batch (keys) of the first key that failed
	Err   error // that key's error, wrapped with the state name as the single call's
}

// Error names the index and the key's error.
func (e *BatchError) Error() string { return fmt.Sprintf("strata: batch key %d: %v", e.Index, e.Err) }

// Unwrap returns the failed key's error.
func (e *BatchError) Unwrap() error { return e.Err }

// batchScratch is the Store's scratch of one chunk of a batched operation: composite keys
// (kbuf, ends), their hashes and the engine's results. Allocated on the first batch, reused.
type batchScratch struct {
	kbuf []byte
	ends [BatchChunk]int
	keys [BatchChunk][]byte
	hs   [BatchChunk]uint64
	vals [BatchChunk][]byte
	sts  [BatchChunk]status
	// Map batches: the encoded user keys (ubuf, uends) and their hashes.
	ubuf  []byte
	uends [BatchChunk]int
	uks   [BatchChunk][]byte
	hus   [BatchChunk]uint64
}

// composeBatch checks the keys of one chunk (len(keys) <= BatchChunk) in order and composes
// them for state sb (its id in each key's key group) into the batch scratch, until the first key check refuses: it returns the
// scratch, the number n of keys composed and the refused key's error (nil when n ==
// len(keys)). The caller is inside the guard.
func (s *Store) composeBatch(keys []Key, sb *stateBase) (*batchScratch, int, error) {
	b := s.bat
	if b == nil {
		b = new(batchScratch)
		s.bat = b
	}
	b.kbuf = b.kbuf[:0]
	for i, k := range keys {
		if err := s.check(k); err != nil {
			b.slice(i)
			return b, i, err
		}
		id := sb.idAt(k)
		b.kbuf = base.AppendCompositeKey(b.kbuf, uint16(k.kg), id, k.b, k.ns)
		b.ends[i] = len(b.kbuf)
		b.hs[i] = base.CompositeHash(k.kh, k.nh, id)
	}
	b.slice(len(keys))
	return b, len(keys), nil
}

// decodeBatch fills vals[:n] and ok[:n] from the engine's results of one chunk (b.sts,
// b.vals), in order, until the key at (the one whose read failed, with error rerr; -1 for
// none) or the first value codec fails to decode: it returns that key's index and error, or
// (n, nil). The caller is inside the guard (decoded values may alias the Store's memory).
func decodeBatch[T any](codec Codec[T], b *batchScratch, n, at int, rerr error, vals []T, ok []bool) (int, error) {
	var zero T
	for i := range n {
		if i == at {
			return i, rerr
		}
		if b.sts[i] != found {
			vals[i], ok[i] = zero, false
			continue
		}
		x, err := codec.Decode(b.vals[i])
		if err != nil {
			return i, err
		}
		vals[i], ok[i] = x, true
	}
	return n, nil
}

// slice points keys[:n] into kbuf (after every append, which may move kbuf).
func (b *batchScratch) slice(n int) {
	start := 0
	for i := range n {
		b.keys[i] = b.kbuf[start:b.ends[i]:b.ends[i]]
		start = b.ends[i]
	}
}

// GetBatch reads the values of keys into vals and ok: vals[i], ok[i] are what
// Get(keys[i]) returns, for i < len(keys), as if Get were called for each key in order
// (repeated keys read the same value). vals and ok must be at least as long as keys (else
// ErrBatchLength, wrapped, and nothing is read); entries beyond len(keys) are untouched. A
// value decoded by an aliasing codec (Bytes) is valid until the next write to the Store.
//
// Batching is for throughput: as Flink 2.0's asynchronous state API (StateFuture, the
// ForSt backend's MultiGet) batches the state reads of many records so their I/O overlaps,
// GetBatch hands the keys to the engine BatchChunk at a time, which issues the independent
// cache misses of all of them together, tier by tier (FreshTable index groups, then records;
// SliceTable fingerprints, then records; row cache), so the core overlaps them, and reads the
// keys that reach the LsmStore in order-hash order, so they share its index and data blocks.
// The LsmStore reads themselves are issued one at a time (no two preads in flight).
//
// Errors: a *BatchError naming the first key, in order, whose Get would have failed, with
// that error (ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption from the codec or a damaged
// file, I/O errors). vals[:Index] and ok[:Index] then hold the keys' results, and
// vals[Index:len(keys)] are zero and ok[Index:len(keys)] false. Allocation-free beyond
// what the codec allocates (after the Store's first batch). Use from the Store's goroutine
// only.
//
// With a TTL (ValueDescriptor.TTL) a read may be a write (TTLConfig), and GetBatch calls Get
// for each key in order, stopping at the first error (with the results as above): the same
// semantics, without the overlap.
func (v *ValueState[T]) GetBatch(keys []Key, vals []T, ok []bool) error {
	if len(vals) < len(keys) || len(ok) < len(keys) {
		return v.wrap("get batch", fmt.Errorf("%w: %d keys, %d values, %d found flags", ErrBatchLength, len(keys), len(vals), len(ok)))
	}
	vals, ok = vals[:len(keys)], ok[:len(keys)]
	if v.ttl != nil {
		for i, k := range keys {
			x, hit, err := v.Get(k)
			if err != nil {
				clear(vals[i:])
				clear(ok[i:])
				return &BatchError{Index: i, Err: err}
			}
			vals[i], ok[i] = x, hit
		}
		return nil
	}
	s := v.s
	for off := 0; off < len(keys); off += BatchChunk {
		chunk := keys[off:min(off+BatchChunk, len(keys))]
		s.enter(opCall)
		b, n, err := s.composeBatch(chunk, &v.stateBase)
		at, rerr := -1, error(nil)
		if n > 0 {
			if at = s.e.GetBatch(b.hs[:n], b.keys[:n], b.vals[:n], b.sts[:n]); at >= 0 {
				rerr = s.e.TakeErr()
			}
		}
		if n2, derr := decodeBatch(v.codec, b, n, at, rerr, vals[off:], ok[off:]); derr != nil {
			err, n = derr, n2
		}
		s.exit()
		if err != nil {
			clear(vals[off+n:])
			clear(ok[off+n:])
			return &BatchError{Index: off + n, Err: v.wrap("get", err)}
		}
	}
	return nil
}

// PutBatch sets the value of keys[i] to vals[i] for every i, as if Put were called for each
// key in order (a repeated key ends with its last value). vals must be as long as keys (else
// ErrBatchLength, wrapped, and nothing is written).
//
// As GetBatch (Flink 2.0's batched asynchronous state access), PutBatch works BatchChunk
// keys at a time: it checks and composes the keys of a chunk, loads the index groups and
// records of all of them in the FreshTable's active segment, the only one a write looks at
// (overlapping their cache misses), then writes them one by one through the single write path
// (changelog, TTL stamp, backpressure as Put).
//
// Errors: a *BatchError naming the first key whose Put failed, with Put's error
// (ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge, ErrValueTooLarge, ErrMemoryBudget):
// keys[:Index] were written, keys[Index:] were not. Allocation-free beyond what the codec
// allocates (after the Store's first batch). Use from the Store's goroutine only. With a TTL
// PutBatch calls Put for each key in order (same semantics, without the overlap).
func (v *ValueState[T]) PutBatch(keys []Key, vals []T) error {
	if len(vals) != len(keys) {
		return v.wrap("put batch", fmt.Errorf("%w: %d keys, %d values", ErrBatchLength, len(keys), len(vals)))
	}
	if v.ttl != nil {
		for i, k := range keys {
			if err := v.Put(k, vals[i]); err != nil {
				return &BatchError{Index: i, Err: err}
			}
		}
		return nil
	}
	s := v.s
	for off := 0; off < len(keys); off += BatchChunk {
		chunk := keys[off:min(off+BatchChunk, len(keys))]
		s.enter(opCall)
		b, n, err := s.composeBatch(chunk, &v.stateBase)
		if n > 0 {
			s.e.PrefetchWrite(b.hs[:n])
		}
		for i := range n {
			s.vbuf = v.codec.Append(s.vbuf[:0], vals[off+i])
			if werr := s.apply(engine.OpPut, b.keys[i], b.hs[i], nil, s.vbuf); werr != nil {
				err, n = werr, i
				break
			}
		}
		s.exit()
		if err != nil {
			return &BatchError{Index: off + n, Err: v.wrap("put", err)}
		}
	}
	return nil
}

// GetBatch reads the values of user keys uks[i] in the maps of keys[i] into vals and ok:
// vals[i], ok[i] are what Get(keys[i], uks[i]) returns, for i < len(keys), as if Get were
// called for each pair in order. uks, vals and ok must be at least as long as keys (else
// ErrBatchLength, wrapped, and nothing is read); entries beyond len(keys) are untouched. A
// value decoded by an aliasing codec is valid until the next write to the Store.
//
// As ValueState.GetBatch (Flink 2.0's batched asynchronous state reads), the pairs go to the
// engine BatchChunk at a time, which issues the independent cache misses of all of them tier
// by tier (FreshTable index groups and map headers; the SliceTable searches of the maps in
// lock step) and reads the pairs that reach the LsmStore in order-hash order, one at a time.
//
// Errors: a *BatchError naming the first pair, in order, whose Get would have failed, with
// that error (ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption, I/O errors); vals[:Index] and
// ok[:Index] then hold the pairs' results, vals[Index:len(keys)] are zero and
// ok[Index:len(keys)] false. Allocation-free beyond what the codecs allocate (after the
// Store's first batch). Use from the Store's goroutine only. With a TTL (MapDescriptor.TTL) a
// read may be a write, and GetBatch calls Get for each pair in order (same semantics, without
// the overlap).
func (m *MapState[UK, UV]) GetBatch(keys []Key, uks []UK, vals []UV, ok []bool) error {
	if len(uks) < len(keys) || len(vals) < len(keys) || len(ok) < len(keys) {
		return m.wrap("get batch", fmt.Errorf("%w: %d keys, %d user keys, %d values, %d found flags",
			ErrBatchLength, len(keys), len(uks), len(vals), len(ok)))
	}
	vals, ok = vals[:len(keys)], ok[:len(keys)]
	if m.ttl != nil {
		for i, k := range keys {
			x, hit, err := m.Get(k, uks[i])
			if err != nil {
				clear(vals[i:])
				clear(ok[i:])
				return &BatchError{Index: i, Err: err}
			}
			vals[i], ok[i] = x, hit
		}
		return nil
	}
	s := m.s
	for off := 0; off < len(keys); off += BatchChunk {
		chunk := keys[off:min(off+BatchChunk, len(keys))]
		s.enter(opCall)
		b, n, err := s.composeBatch(chunk, &m.stateBase)
		at, rerr := -1, error(nil)
		if n > 0 {
			b.ubuf = b.ubuf[:0]
			for i := range n {
				b.ubuf = m.kc.Append(b.ubuf, uks[off+i])
				b.uends[i] = len(b.ubuf)
			}
			start := 0
			for i := range n {
				b.uks[i] = b.ubuf[start:b.uends[i]:b.uends[i]]
				b.hus[i] = base.HashUserKey(b.uks[i])
				start = b.uends[i]
			}
			if at = s.e.MapGetBatch(b.hs[:n], b.keys[:n], b.hus[:n], b.uks[:n], b.vals[:n], b.sts[:n]); at >= 0 {
				rerr = s.e.TakeErr()
			}
		}
		if n2, derr := decodeBatch(m.vc, b, n, at, rerr, vals[off:], ok[off:]); derr != nil {
			err, n = derr, n2
		}
		s.exit()
		if err != nil {
			clear(vals[off+n:])
			clear(ok[off+n:])
			return &BatchError{Index: off + n, Err: m.wrap("get", err)}
		}
	}
	return nil
}
