package strata

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// ListDescriptor describes a list state: a list of elements of type T per key and
// namespace, as Flink's ListStateDescriptor.
type ListDescriptor[T any] struct {
	Name  string   // unique per Store
	Codec Codec[T] // element codec, required
	// TTL, when not nil, gives each element a time to live (TTLConfig, Flink's
	// StateTtlConfig); nil: elements never expire.
	TTL *TTLConfig
}

// ListState is a list of elements per key and namespace, as Flink's ListState (and
// InternalMergingState for MergeNamespaces). Add appends in O(1) without reading the list:
// the FreshTable keeps appended batches as merge operands and ListState.Get walks them.
//
// Elements are framed inside a batch as
//
//	+----------------------+---------------------+----------------------+-----
//	| len(e0) uvarint      | e0: codec bytes     | len(e1) uvarint      | ...
//	+----------------------+---------------------+----------------------+-----
//
// so batches concatenate into batches (appends and merges copy bytes, never re-encode).
// With a TTL (ListDescriptor.TTL) an element's bytes are its 8-byte big-endian timestamp and
// then its codec bytes (base.TTLList), and Get follows Flink's TtlListState (TTLConfig).
// Use from the Store's goroutine only.
type ListState[T any] struct {
	stateBase
	codec Codec[T]
	lbuf  [][]byte         // batches of the last Get
	low   engine.LowerList // the last Get's pieces in the LsmStore, when read one at a time
	// TTL: the last Get's own copies (ReturnExpired, OnReadAndWrite), and its composite key
	// for the iterator that clears a list found all expired.
	tbuf, wbuf []byte
	ck         []byte
	ch         uint64
	one        [1][]byte
}

// NewListState registers d on s, or returns the list state registered under d.Name before
// (same codec). Errors: ErrIncompatibleState (another kind, codec or type), ErrClosed.
func NewListState[T any](s *Store, d ListDescriptor[T]) (*ListState[T], error) {
	return registerTTL(s, d.Name, kindList, [2]any{d.Codec, nil}, d.TTL, func(b stateBase) *ListState[T] {
		return &ListState[T]{stateBase: b, codec: d.Codec, lbuf: make([][]byte, 0, 8)}
	})
}

// maxBatch is the largest batch handed to fresh in one call; longer batches are cut at
// element boundaries (fresh refuses batches above a quarter of a segment).
func (s *Store) maxBatch() int { return s.opts.SegmentSize / 8 }

// Add appends x to the list of k, as Flink's ListState.add, in O(1) (no read of the list).
// Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge, ErrValueTooLarge, ErrMemoryBudget.
func (l *ListState[T]) Add(k Key, x T) error {
	s := l.s
	key, h, err := s.beginHot(k, l.idAt(k))
	defer s.exit()
	if err != nil {
		return l.wrap("add", err)
	}
	if l.ttl != nil {
		if err := l.ttlAccess(); err != nil {
			return l.wrap("add", err)
		}
	}
	// Encode after a reserved varint header, then write the header right before the element.
	buf := append(s.vbuf[:0], make([]byte, binary.MaxVarintLen64)...)
	if l.ttl != nil {
		buf = base.AppendTS(buf, s.clock())
	}
	buf = l.codec.Append(buf, x)
	s.vbuf = buf
	var hdr [binary.MaxVarintLen64]byte
	m := binary.PutUvarint(hdr[:], uint64(len(buf)-binary.MaxVarintLen64))
	start := binary.MaxVarintLen64 - m
	copy(buf[start:], hdr[:m])
	if err := l.listWrite(key, h, buf[start:], false); err != nil {
		return l.wrap("add", err)
	}
	return nil
}

// listWrite writes the framed batch b to the list of key (hash h): appended, or with replace
// replacing the list (an empty b deletes it), through the state's hot table when it has one
// (hot.go), else to the engine (writeList, cut in pieces). Inside beginHot.
func (l *ListState[T]) listWrite(key []byte, h uint64, b []byte, replace bool) error {
	s := l.s
	if t := l.hotTab(); t != nil {
		return s.hotListWrite(t, key, h, b, replace)
	}
	if replace && len(b) == 0 {
		return s.apply(engine.OpListDelete, key, h, nil, nil)
	}
	return s.writeList(h, key, b, replace)
}

// appendElems appends the framed encodings of xs to dst, using s.ubuf as element scratch;
// with a TTL, each element stamped now.
func (l *ListState[T]) appendElems(dst []byte, xs []T) []byte {
	s := l.s
	var now int64
	if l.ttl != nil {
		now = s.clock()
	}
	for i := range xs {
		s.ubuf = s.ubuf[:0]
		if l.ttl != nil {
			s.ubuf = base.AppendTS(s.ubuf, now)
		}
		s.ubuf = l.codec.Append(s.ubuf, xs[i])
		dst = binary.AppendUvarint(dst, uint64(len(s.ubuf)))
		dst = append(dst, s.ubuf...)
	}
	return dst
}

// AddAll appends xs to the list of k in order, as Flink's ListState.addAll; an empty (or nil)
// xs changes nothing. The elements go to the FreshTable as one batch (several when larger
// than an eighth of a segment). Errors as Add. A refused key or element (ErrKeyTooLarge,
// ErrValueTooLarge) writes nothing; ErrMemoryBudget writes nothing for a batch of up to an
// eighth of a segment, while a larger one may stop after appending some of its first
// elements, in order.
func (l *ListState[T]) AddAll(k Key, xs []T) error {
	s := l.s
	key, h, err := s.beginHot(k, l.idAt(k))
	defer s.exit()
	if err != nil {
		return l.wrap("add all", err)
	}
	if l.ttl != nil {
		if err := l.ttlAccess(); err != nil {
			return l.wrap("add all", err)
		}
	}
	if len(xs) == 0 {
		return nil
	}
	s.vbuf = l.appendElems(s.vbuf[:0], xs)
	if err := l.listWrite(key, h, s.vbuf, false); err != nil {
		return l.wrap("add all", err)
	}
	return nil
}

// Update replaces the list of k with xs, as Flink's ListState.update: an empty (or nil) xs
// removes the list (as Clear). Errors as Add. A refused key or element (ErrKeyTooLarge,
// ErrValueTooLarge) writes nothing and keeps the old list; ErrMemoryBudget keeps the old list
// for xs of up to an eighth of a segment encoded, while a larger xs may leave the list
// replaced by a prefix of xs.
func (l *ListState[T]) Update(k Key, xs []T) error {
	s := l.s
	key, h, err := s.beginHot(k, l.idAt(k))
	defer s.exit()
	if err != nil {
		return l.wrap("update", err)
	}
	if l.ttl != nil {
		if err := l.ttlAccess(); err != nil {
			return l.wrap("update", err)
		}
	}
	s.vbuf = l.appendElems(s.vbuf[:0], xs)
	err = l.listWrite(key, h, s.vbuf, true)
	if err != nil {
		return l.wrap("update", err)
	}
	return nil
}

// writeList hands a framed batch to fresh, cut at element boundaries into pieces of at most
// maxBatch bytes (a single larger element goes alone). With replace, the first piece replaces
// the list and the others append. A batch of several pieces is checked for an element fresh
// would refuse (ErrValueTooLarge) before the first piece is written, so that a refused
// Update or AddAll writes nothing; the key is checked by fresh on the first piece.
func (s *Store) writeList(h uint64, key, batch []byte, replace bool) error {
	max := s.maxBatch()
	if len(batch) > max {
		if err := s.checkElems(batch); err != nil {
			return err
		}
	}
	for len(batch) > 0 {
		n := engine.ListPiece(batch, max)
		kind := engine.OpListAppend
		if replace {
			kind, replace = engine.OpListReplace, false
		}
		if err := s.apply(kind, key, h, nil, batch[:n]); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// checkElems returns ErrValueTooLarge when a framed element of batch is larger than fresh
// accepts in one record (a quarter of a segment, fresh's maxValue).
//
//go:noinline
func (s *Store) checkElems(batch []byte) error {
	return engine.CheckListElems(batch, s.opts.SegmentSize/4)
}

// Get returns an iterator over the list of k, oldest element first, as Flink's ListState.get;
// an absent or cleared list yields no element. Elements are decoded lazily, one per Next.
// The iterator reads the Store's memory in place: it is valid until the next write to the
// Store or the next Get on this state (collect the elements first to write while iterating).
// Errors (ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption) are reported by the iterator's Err.
//
// A long list in the LsmStore streams: Get records where its pieces are (16 bytes per piece
// of up to 1 MiB) and Next loads one piece at a time, so reading a list holds one piece of
// it, not the list. Elements already yielded stay valid until the next write, as for any
// list; an iterator of a list streamed so that is advanced after a write (or WaitBackground)
// stops with ErrIteratorInvalidated instead of reading pieces that may be gone.
//
// With a TTL, Get follows Flink's TtlListState (TTLConfig): the iterator skips expired
// elements, and when the whole list has expired, the Next that reaches its end without
// having yielded an element removes the list (a write). With TTLReturnExpiredIfNotCleanedUp
// or TTLOnReadAndWrite, Get reads the whole list at once (no streaming; as Flink collects
// it): a list found all expired is removed by Get and, with TTLReturnExpiredIfNotCleanedUp,
// iterated from Get's own copy; TTLOnReadAndWrite rewrites the unexpired elements with the
// current time (a write) and iterates what it wrote (or, returning expired elements too, a
// copy of the list as found). Those copies are valid until the next Get on this state.
func (l *ListState[T]) Get(k Key) ListIterator[T] {
	s := l.s
	key, h, err := s.beginHot(k, l.idAt(k))
	defer s.exit()
	if err != nil {
		return ListIterator[T]{err: l.wrap("get", err)}
	}
	if l.ttl != nil {
		return l.getTTL(key, h)
	}
	var st status
	if t := l.hotTab(); t != nil {
		if l.lbuf, st, err = s.hotListGet(t, key, h, l.lbuf[:0], &l.low); err != nil {
			return ListIterator[T]{err: l.wrap("get", err)}
		}
	} else {
		l.lbuf, st, _ = s.e.ListGet(h, key, l.lbuf[:0], &l.low)
	}
	if st != found {
		if st == failed {
			return ListIterator[T]{err: l.wrap("get", s.e.TakeErr())}
		}
		return ListIterator[T]{}
	}
	it := ListIterator[T]{s: s, codec: l.codec, batches: l.lbuf, name: l.name}
	if l.low.Pending() {
		it.low = &l.low
	}
	return it
}

// Clear removes the list of k (its key in its namespace only), as Flink's State.clear;
// clearing an absent list is not an error. Errors: ErrKeyGroupOutOfRange, ErrClosed,
// ErrMemoryBudget.
func (l *ListState[T]) Clear(k Key) error {
	s := l.s
	key, h, err := s.beginHot(k, l.idAt(k))
	defer s.exit()
	if err != nil {
		return l.wrap("clear", err)
	}
	if l.ttl != nil {
		if err := l.ttlAccess(); err != nil {
			return l.wrap("clear", err)
		}
	}
	if err := l.listWrite(key, h, nil, true); err != nil {
		return l.wrap("clear", err)
	}
	return nil
}

// MergeNamespaces merges the lists of k in the source namespaces into the list of k in the
// target namespace and clears the sources, as Flink's InternalMergingState.mergeNamespaces
// (used when session windows merge): the target keeps its elements and gets the sources'
// elements appended, in source order. Absent sources are ignored, a source equal to target
// is skipped and a repeated source counts once. The target is written before the sources are
// cleared, so an error part-way (ErrMemoryBudget) may leave a source uncleared but never
// loses elements. Errors as Add.
func (l *ListState[T]) MergeNamespaces(k Key, target []byte, sources ...[]byte) (err error) {
	s := l.s
	s.enter(opCall)
	defer s.exit()
	if err := s.check(k); err != nil {
		return l.wrap("merge namespaces", err)
	}
	if l.ttl != nil {
		if err := l.ttlAccess(); err != nil {
			return l.wrap("merge namespaces", err)
		}
	}
	acc, present := s.bufs[0][:0], s.present[:0]
	defer func() {
		s.bufs[0], s.present = acc, present
		if err != nil {
			err = l.wrap("merge namespaces", err)
		}
	}()
	for i, src := range sources {
		if bytes.Equal(src, target) || repeated(sources, i) {
			continue
		}
		key, h := s.compose(k.In(src), l.idAt(k))
		var st status
		l.lbuf, st, _ = s.e.ListGet(h, key, l.lbuf[:0], nil) // copied whole: acc holds it anyway
		if st == failed {
			return s.e.TakeErr()
		}
		if st != found {
			continue
		}
		present = append(present, i)
		for _, b := range l.lbuf {
			acc = append(acc, b...)
		}
	}
	if len(acc) > 0 {
		key, h := s.compose(k.In(target), l.idAt(k))
		if err := s.writeList(h, key, acc, false); err != nil {
			return err
		}
	}
	for _, i := range present {
		key, h := s.compose(k.In(sources[i]), l.idAt(k))
		if err := s.apply(engine.OpListDelete, key, h, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// getTTL is Get of a list with a TTL (see Get); inside the guard, key in the key scratch.
func (l *ListState[T]) getTTL(key []byte, h uint64) ListIterator[T] {
	s, t := l.s, l.ttl
	if err := l.ttlAccess(); err != nil {
		return ListIterator[T]{err: l.wrap("get", err)}
	}
	eager := t.returnExpired || t.onRead
	var low *engine.LowerList
	if !eager {
		low = &l.low
	}
	var st status
	l.lbuf, st, _ = s.e.ListGet(h, key, l.lbuf[:0], low)
	if st != found {
		if st == failed {
			return ListIterator[T]{err: l.wrap("get", s.e.TakeErr())}
		}
		return ListIterator[T]{}
	}
	now := s.clock()
	it := ListIterator[T]{s: s, codec: l.codec, batches: l.lbuf, name: l.name, ttl: true, ttlMs: t.ms, now: now}
	if !eager {
		// Lazy, as Flink's IteratorWithCleanup: skip expired elements; the end clears a list
		// that had no unexpired one.
		if l.low.Pending() {
			it.low = &l.low
		}
		l.ck, l.ch = append(l.ck[:0], key...), h
		it.clr, it.seq = l, s.e.Seq()
		return it
	}
	live, dead := 0, 0
	for _, b := range l.lbuf {
		n, ok := base.CountExpired(b, t.ms, now)
		if !ok {
			return ListIterator[T]{err: fmt.Errorf("%w: list state %q: bad element framing", ErrCorruption, l.name)}
		}
		dead += n
		live += elemCount(b) - n
	}
	// With expired elements to return, iterate a copy of the list as found.
	if t.returnExpired && dead > 0 {
		l.tbuf = l.tbuf[:0]
		for _, b := range l.lbuf {
			l.tbuf = append(l.tbuf, b...)
		}
		l.one[0] = l.tbuf
		it.batches, it.all = l.one[:], true
	}
	switch {
	case live == 0:
		if err := s.apply(engine.OpListDelete, key, h, nil, nil); err != nil {
			return ListIterator[T]{err: l.wrap("get", err)}
		}
		if !t.returnExpired {
			return ListIterator[T]{}
		}
	case t.onRead:
		// Flink's TtlListState.updateTs: the unexpired elements, stamped now, replace the list.
		l.wbuf = l.wbuf[:0]
		for _, b := range l.lbuf {
			l.wbuf = restamp(l.wbuf, b, t.ms, now)
		}
		clear(l.lbuf)
		if err := s.writeList(h, key, l.wbuf, true); err != nil {
			return ListIterator[T]{err: l.wrap("get", err)}
		}
		if !it.all {
			l.one[0] = l.wbuf
			it.batches = l.one[:]
		}
	default:
		it.all = t.returnExpired
	}
	return it
}

// elemCount returns the number of elements of a well-formed list batch.
func elemCount(b []byte) int {
	n := 0
	for len(b) > 0 {
		ln, m := binary.Uvarint(b)
		b = b[m+int(ln):]
		n++
	}
	return n
}

// restamp appends the elements of a well-formed TTL list batch that are not expired at now to
// dst, each with its timestamp replaced by now.
func restamp(dst, b []byte, ttl, now int64) []byte {
	for len(b) > 0 {
		ln, m := binary.Uvarint(b)
		e := b[m : m+int(ln)]
		b = b[m+int(ln):]
		if ts, _ := base.TS(e); !base.Expired(ts, ttl, now) {
			dst = binary.AppendUvarint(dst, ln)
			dst = base.AppendTS(dst, now)
			dst = append(dst, e[base.TSLen:]...)
		}
	}
	return dst
}

// ListIterator iterates the elements of one list, as returned by ListState.Get:
//
//	it := list.Get(k)
//	for it.Next() {
//		use(it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// The zero ListIterator yields nothing.
type ListIterator[T any] struct {
	s       *Store
	codec   Codec[T]
	low     *engine.LowerList // pieces in the LsmStore not yet started, before batches
	batches [][]byte          // batches not yet started
	cur     []byte            // rest of the current batch
	v       T
	err     error
	name    string
	// TTL (ListState.Get of a list with a TTL): elements carry timestamps; expired ones are
	// skipped unless all; clr, if set, is the state whose list the end clears when no element
	// was unexpired — if the Store's sequence number is still seq (nothing written since).
	ttl        bool
	all        bool
	seen, live bool
	ttlMs, now int64
	clr        *ListState[T]
	seq        uint64
}

// Next advances to the next element and reports whether there is one. It returns false at
// the end of the list and on an error (see Err).
func (it *ListIterator[T]) Next() bool {
	if it.err != nil {
		return false
	}
	if it.s != nil && it.s.closed { // the batches point into unmapped memory now
		it.err = fmt.Errorf("strata: list state %q: %w", it.name, ErrClosed)
		return false
	}
	if it.low != nil && !it.low.Valid() { // a streamed list: its pieces may be gone
		it.err = fmt.Errorf("strata: list state %q: %w", it.name, ErrIteratorInvalidated)
		it.low = nil
		return false
	}
again:
	for len(it.cur) == 0 {
		if it.low != nil && it.low.Pending() {
			if it.cur, it.err = it.low.Next(); it.err != nil {
				it.err = fmt.Errorf("strata: list state %q: %w", it.name, it.err)
				return false
			}
			continue
		}
		if len(it.batches) == 0 {
			if it.clr != nil && it.seen && !it.live {
				it.end()
			}
			return false
		}
		it.cur, it.batches = it.batches[0], it.batches[1:]
	}
	n, m := binary.Uvarint(it.cur)
	if m <= 0 || n > uint64(len(it.cur)-m) {
		it.err = it.corrupt()
		return false
	}
	elem := it.cur[m : m+int(n)]
	it.cur = it.cur[m+int(n):]
	if it.ttl {
		ts, ok := base.TS(elem)
		if !ok {
			it.err = it.corrupt()
			return false
		}
		it.seen = true
		if !base.Expired(ts, it.ttlMs, it.now) {
			it.live = true
		} else if !it.all {
			goto again
		}
		elem = elem[base.TSLen:]
	}
	v, err := it.codec.Decode(elem)
	if err != nil {
		it.err = fmt.Errorf("strata: list state %q: %w", it.name, err)
		return false
	}
	it.v = v
	return true
}

// end clears a list whose elements all expired (Flink's IteratorWithCleanup.cleanupIfEmpty),
// once; no element was yielded, so the write invalidates nothing the iteration returned.
//
//go:noinline
func (it *ListIterator[T]) end() {
	l := it.clr
	it.clr = nil
	s := it.s
	if s.e.Seq() != it.seq {
		return // the Store was written since Get: the list may not be as read
	}
	s.enter(opCall)
	err := s.apply(engine.OpListDelete, l.ck, l.ch, nil, nil)
	s.exit()
	if err != nil {
		it.err = fmt.Errorf("strata: list state %q: %w", it.name, err)
	}
}

//go:noinline
func (it *ListIterator[T]) corrupt() error {
	return fmt.Errorf("%w: list state %q: bad element framing", ErrCorruption, it.name)
}

// Value returns the element Next moved to (aliasing the Store's memory for aliasing codecs
// such as Bytes, with the iterator's validity).
func (it *ListIterator[T]) Value() T { return it.v }

// Err returns the error that ended the iteration, or nil: ErrKeyGroupOutOfRange or ErrClosed
// from ListState.Get, ErrClosed when the Store was closed under the iterator, ErrCorruption
// (wrapped, naming the state) from the framing, the codec or a piece read from the LsmStore,
// an I/O error of such a read, ErrIteratorInvalidated when a list streamed from the LsmStore
// (ListState.Get) is iterated past a write.
func (it *ListIterator[T]) Err() error { return it.err }
