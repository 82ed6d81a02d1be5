package strata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/zeebo/xxh3"
)

// The backend-level key operations of Flink's KeyedStateBackend: getKeys,
// getKeysAndNamespaces, applyToAllKeys, and the test backends' numKeyValueStateEntries. They
// are built on one merged, ordered scan of every tier (internal/engine, "Key scans"), run in
// steps of a bounded batch of keys, so a scan of any size holds O(batch) of the Go heap and
// writes between the keys are allowed.

// State is a state registered on a Store — a *ValueState, *ListState, *MapState,
// *ReducingState or *AggregatingState — as the backend-level key operations take it (Flink's
// take the state's descriptor: Store.Keys, KeysAndNamespaces, NumEntries, ApplyToAllKeys).
// Only this package's states implement it.
type State interface {
	// Name returns the name the state was registered under.
	Name() string
	base() *stateBase
}

func (b *stateBase) base() *stateBase { return b }

// scanBatch is the number of keys a scan step reads at once (the Go heap a scan holds: about
// scanBatch keys' bytes plus their Key values).
const scanBatch = 1024

// countBatch is NumEntries' step: its keys are not kept.
const countBatch = 8192

// Keys returns the keys that have state in st under exactly the namespace ns (empty: the void
// namespace), as Flink's KeyedStateBackend#getKeys(state, namespace), and a function that
// reports the error that ended the last range early (nil when it ran to its end or the loop
// broke out of it: check it after every range, as for MapState.Entries).
//
//	seq, errf := store.Keys(counts, window)
//	for k := range seq { ... }      // k is in namespace window: counts.Get(k) reads its state
//	if err := errf(); err != nil { ... }
//
// Each key with state is yielded once — a map state with many entries under a key, or a list
// kept in many pieces across the tiers, counts once (FLINK-9804) — and only under the
// namespace asked for, even when another namespace has it as a prefix (FLINK-8679). A key
// whose state was cleared (Clear, Remove of its last map entry, ListState.Update with no
// elements) is not yielded. Keys come in scan order: key group by key group, then by a hash,
// so not sorted by their bytes; only the Store's key groups occur.
//
// The yielded Key is ready for state operations: its key group is the stored one, its hashes
// are Store.Key's, and its bytes are the scan's own copy (safe to keep and to use after the
// loop). Its Hash is the low 32 bits of xxh3 of the key bytes, as Store.Key's; a key made with
// KeyWithHash keeps its stored key group, but not the host hash it came from.
//
// Concurrency: from the Store's goroutine only, like every state operation. The loop body may
// read and write the Store, this state included: the scan reads the tiers in steps of up to
// 1024 keys, each a fresh merge started after the last key it read, so no key is yielded
// twice and a key that has state throughout the loop is yielded (FLINK-9060). A key given
// state or cleared during the loop is yielded or not as its state was when the scan read it:
// a key behind the scan is not seen again, one ahead is seen as it is then — and the scan
// reads up to a batch ahead of the loop body, so a key the body clears may still come (as a
// RocksDB iterator's snapshot would yield it). Each range starts a new scan.
//
// Errors (from the error function): ErrIncompatibleState when st is nil or registered on
// another Store; ErrClosed (also when the Store is closed in the loop); ErrCorruption (a
// damaged file, with its name and offset) and I/O errors of the LsmStore.
//
// Cost: a scan reads every entry of every state of the Store between the keys it yields (the
// tiers are ordered by key group and hash, not by state), and sorts the FreshTable's records
// as a transform does (about 0.5 µs per key in the FreshTable, 0.1 µs in the SliceTable:
// BenchmarkKeys). It allocates one arena per 1024 keys and about twenty times per scan,
// nothing per key (TestKeysAllocs); it holds the batch and an index of the FreshTable's
// records (40 bytes each, mapped outside the Go heap when large).
func (s *Store) Keys(st State, ns []byte) (iter.Seq[Key], func() error) {
	var err error
	return func(yield func(Key) bool) {
		err = s.scanKeys(st, ns, false, yield)
	}, func() error { return err }
}

// KeysAndNamespaces returns every (key, namespace) pair that has state in st, as Flink's
// KeyedStateBackend#getKeysAndNamespaces(state): each Key carries its namespace
// (Key.Namespace, a copy), and is yielded once per namespace it has state in. Order,
// concurrency, errors and cost are those of Keys.
func (s *Store) KeysAndNamespaces(st State) (iter.Seq[Key], func() error) {
	var err error
	return func(yield func(Key) bool) {
		err = s.scanKeys(st, nil, true, yield)
	}, func() error { return err }
}

// NumEntries returns the number of live entries of st, as the numKeyValueStateEntries of
// Flink's test backends for one state: one per (key, namespace) with state for value,
// reducing, aggregating and list state (a list counts once, whatever its length), one per live
// user key for map state (a map of n entries counts n). O(entries of the Store) (it scans
// them, as Keys); it allocates one arena per 8192 keys and about twenty times per scan.
// Errors as Keys.
func (s *Store) NumEntries(st State) (int64, error) {
	b, err := s.scanState(st)
	if err != nil {
		return 0, err
	}
	sc := s.newScan(b, nil, true)
	defer s.closeScan(&sc)
	var n int64
	for {
		_, cnts, err := s.scanStep(&sc, countBatch)
		if err != nil {
			return n, b.wrap("count entries", err)
		}
		if len(cnts) == 0 {
			return n, nil
		}
		for _, c := range cnts {
			n += c
		}
	}
}

// ApplyToAllKeys calls fn for every key that has state in st under exactly the namespace ns,
// as Flink's KeyedStateBackend#applyToAllKeys(namespace, serializer, descriptor, function): fn
// gets the key in namespace ns and may read, clear or rewrite its state — or any other state
// of the Store — while the scan goes on (FLINK-9060: deleting the state of the key visited
// does not make the scan skip or repeat a key). Each key is visited once; which keys are
// visited follows Keys: every key that has state from the start to its visit, and of the keys
// that get or lose state during the call, those that had it when the scan read them (up to a
// batch of 1024 keys ahead of fn).
//
// fn's error stops the scan and is returned as it is; otherwise the errors are Keys' (wrapped,
// naming the state). From the Store's goroutine only.
func (s *Store) ApplyToAllKeys(ns []byte, st State, fn func(k Key) error) error {
	seq, errf := s.Keys(st, ns)
	var ferr error
	for k := range seq {
		if ferr = fn(k); ferr != nil {
			return ferr
		}
	}
	return errf()
}

// scanState checks that st is a state of s and s is open.
func (s *Store) scanState(st State) (*stateBase, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: nil state", ErrIncompatibleState)
	}
	b := st.base()
	if b == nil || b.s != s {
		return nil, fmt.Errorf("%w: state %q is not registered on this Store", ErrIncompatibleState, st.Name())
	}
	if s.closed {
		return nil, b.wrap("scan keys", ErrClosed)
	}
	return b, nil
}

// newScan returns a scan of b's keys in ns (any namespace with anyNS) over the Store's key
// groups. It allocates nothing (the engine scans it opens do).
func (s *Store) newScan(b *stateBase, ns []byte, anyNS bool) stateScan {
	return stateScan{s: s, b: b, ns: ns, anyNS: anyNS}
}

// stateScan is a scan of one state's keys: one engine scan per key-group range over which the
// state's id is constant (one range unless the registry has aliases for it,
// internal/engine/registry.go "State id aliases"), one after the other in key-group order. Owner
// goroutine only.
type stateScan struct {
	s     *Store
	b     *stateBase
	ns    []byte
	anyNS bool
	pos   int          // the index (from the Store's first key group) of the next range's first key group
	sc    *engine.Scan // the range being scanned; nil: open the next one
}

// next returns the next batch of at most n keys (and their entry counts), none at the end.
// The caller is inside the guard.
func (x *stateScan) next(n int) ([][]byte, []int64, error) {
	span := int(x.s.kgSpan) + 1
	for {
		if x.sc == nil {
			if x.pos >= span {
				return nil, nil, nil
			}
			lo, id, end := x.pos, x.b.id, span
			if ids := x.b.ids; ids != nil {
				id, end = ids[lo], lo+1
				for end < span && ids[end] == id {
					end++
				}
			}
			x.pos = end
			kg0 := int(x.s.kgStart)
			x.sc = x.s.e.NewScan(engine.ScanSpec{State: id, Namespace: x.ns, AnyNamespace: x.anyNS,
				KeyGroups: checkpoint.KeyGroupRange{Start: kg0 + lo, End: kg0 + end - 1}})
		}
		keys, cnts, err := x.sc.Next(n)
		if err != nil || len(keys) > 0 {
			return keys, cnts, err
		}
		x.sc.Close()
		x.sc = nil
	}
}

// close releases the scan (the caller is inside the guard).
func (x *stateScan) close() {
	if x.sc != nil {
		x.sc.Close()
		x.sc = nil
	}
	x.pos = int(x.s.kgSpan) + 1
}

// scanStep reads the next batch of sc (the Store must be open).
func (s *Store) scanStep(sc *stateScan, n int) ([][]byte, []int64, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.hotErrCheck(); err != nil { // the tier's dirty keys are not in the scan (hot.go, H1)
		return nil, nil, err
	}
	return sc.next(n)
}

func (s *Store) closeScan(sc *stateScan) {
	s.enter(opCall)
	defer s.exit()
	sc.close()
}

// scanKeys runs a scan of st's keys (in namespace ns, or any with anyNS) and yields each.
func (s *Store) scanKeys(st State, ns []byte, anyNS bool, yield func(Key) bool) error {
	b, err := s.scanState(st)
	if err != nil {
		return err
	}
	var nh uint64
	if !anyNS {
		ns = bytes.Clone(ns) // the caller may reuse its slice during the loop
		if ns == nil {
			ns = []byte{}
		}
		nh = base.HashNamespace(ns)
	}
	sc := s.newScan(b, ns, anyNS)
	defer s.closeScan(&sc)
	for {
		keys, _, err := s.scanStep(&sc, scanBatch)
		if err != nil {
			return b.wrap("scan keys", err)
		}
		if len(keys) == 0 {
			return nil
		}
		for _, ck := range keys {
			if s.closed { // closed in the loop
				return b.wrap("scan keys", ErrClosed)
			}
			k, err := s.keyOf(ck, anyNS, ns, nh)
			if err != nil {
				return b.wrap("scan keys", err)
			}
			if !yield(k) {
				return nil
			}
		}
	}
}

// keyOf makes the Key of composite key ck (a scan's copy, which the Key aliases): in
// namespace ns (hash nh) unless anyNS, else in the namespace ck holds.
func (s *Store) keyOf(ck []byte, anyNS bool, ns []byte, nh uint64) (Key, error) {
	if len(ck) < 5 {
		return Key{}, fmt.Errorf("%w: malformed composite key %x", ErrCorruption, ck)
	}
	n, m := binary.Uvarint(ck[4:])
	if m <= 0 || n > uint64(len(ck)-4-m) {
		return Key{}, fmt.Errorf("%w: malformed composite key %x", ErrCorruption, ck)
	}
	kb := ck[4+m : 4+m+int(n) : 4+m+int(n)]
	if anyNS {
		ns = ck[4+m+int(n):]
		nh = base.HashNamespace(ns)
	}
	kh := xxh3.Hash(kb)
	return Key{b: kb, ns: ns, kh: kh, nh: nh, kg: uint32(ck[0])<<8 | uint32(ck[1]), maxP: s.maxP,
		hash: int32(uint32(kh))}, nil
}
