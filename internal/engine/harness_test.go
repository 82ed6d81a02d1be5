package engine

import (
	"encoding/binary"
	"testing"
)

// harness drives one Engine with byte keys, as the root package's typed API would, for the
// tests of the engine's mechanisms (row cache, lower reads, background work): a state is a
// state id, a key is bytes in the void namespace (testKey), a value state is OpPut/OpDelete,
// a list state OpListAppend of framed elements. close and reopen are the root's Close and
// Open: Persist, Close, and Open again on the same options (so the state is in the LsmStore).
// The Engine open at the end of the test is closed then. Owner goroutine only, as the Engine.
type harness struct {
	tb testing.TB
	o  Options
	e  *Engine
}

// newHarness opens an Engine on o with openTest's defaults for the zero fields (o.Dir "":
// in memory).
func newHarness(tb testing.TB, o Options) *harness {
	tb.Helper()
	h := &harness{tb: tb, o: o}
	h.open()
	tb.Cleanup(func() {
		if h.e != nil {
			h.e.Close()
		}
	})
	return h
}

func (h *harness) open() {
	h.tb.Helper()
	o := h.o
	applyTestDefaults(&o)
	e, _, err := Open(o)
	if err != nil {
		h.tb.Fatal(err)
	}
	h.e = e
}

// close persists everything (when the Engine has a directory) and closes the Engine, as the
// root's Store.Close.
func (h *harness) close() {
	h.tb.Helper()
	if h.e.HasDisk() {
		if err := h.e.Persist(nil); err != nil {
			h.tb.Fatalf("persist: %v", err)
		}
	}
	e := h.e
	h.e = nil
	if err := e.Close(); err != nil {
		h.tb.Fatalf("close: %v", err)
	}
}

// reopen is close, then Open of the same directory: the state is in the LsmStore after it.
func (h *harness) reopen() {
	h.tb.Helper()
	h.close()
	h.open()
}

// apply applies op, failing the test on an error.
func (h *harness) apply(op Op) {
	h.tb.Helper()
	if err := h.e.Apply(op); err != nil {
		h.tb.Fatalf("apply %v on %q: %v", op.Kind, op.Key, err)
	}
}

// put sets the value of key in state id.
func (h *harness) put(id uint16, key, value []byte) {
	h.tb.Helper()
	k, hh := testKey(id, key)
	h.apply(opPut(k, hh, value))
}

// del removes the value of key in state id (a tombstone).
func (h *harness) del(id uint16, key []byte) {
	h.tb.Helper()
	k, hh := testKey(id, key)
	h.apply(Op{Kind: OpDelete, Hash: hh, Key: k})
}

// get returns the value of key in state id (valid until the next write) and whether it is
// present; a read failure fails the test.
func (h *harness) get(id uint16, key []byte) ([]byte, bool) {
	h.tb.Helper()
	k, hh := testKey(id, key)
	v, st := h.e.Get(hh, k)
	if st == failed {
		h.tb.Fatalf("get %q: %v", key, h.e.TakeErr())
	}
	return v, st == found
}

// listAdd appends elems to the list of key in state id (one framed batch).
func (h *harness) listAdd(id uint16, key []byte, elems ...[]byte) {
	h.tb.Helper()
	k, hh := testKey(id, key)
	h.apply(Op{Kind: OpListAppend, Hash: hh, Key: k, Value: frame(elems...)})
}

// listGet reads the list of key in state id: ll nil copies it whole; otherwise its lower-tier
// part longer than the eager limit is left in ll (LowerList.Next). It returns the batches
// read (valid until the next write) and whether the list is present.
func (h *harness) listGet(id uint16, key []byte, ll *LowerList) ([][]byte, bool) {
	h.tb.Helper()
	k, hh := testKey(id, key)
	bs, st, _ := h.e.ListGet(hh, k, nil, ll)
	if st == failed {
		h.tb.Fatalf("list get %q: %v", key, h.e.TakeErr())
	}
	return bs, st == found
}

// list returns the elements of the list of key in state id, oldest first, copied whole.
func (h *harness) list(id uint16, key []byte) [][]byte {
	h.tb.Helper()
	bs, _ := h.listGet(id, key, nil)
	var out [][]byte
	for _, b := range bs {
		out = append(out, unframe(h.tb, b)...)
	}
	return out
}

// unframe splits a list batch into its elements (aliasing b).
func unframe(tb testing.TB, b []byte) [][]byte {
	tb.Helper()
	var out [][]byte
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			tb.Fatalf("malformed list batch at %x", b)
		}
		out = append(out, b[w:w+int(n)])
		b = b[w+int(n):]
	}
	return out
}

// settle seals the active segment (its transform is queued) and waits for the background.
func (h *harness) settle() {
	h.tb.Helper()
	if err := h.e.Seal(); err != nil {
		h.tb.Fatal(err)
	}
	if err := h.e.WaitBackground(); err != nil {
		h.tb.Fatal(err)
	}
}

// pushDown moves everything into the LsmStore: seal, transform, evict every slice.
func (h *harness) pushDown() {
	h.tb.Helper()
	h.settle()
	for i := 0; i < 100 && h.e.Stats().Slices > 0; i++ {
		if _, err := h.e.Evict(); err != nil {
			h.tb.Fatal(err)
		}
		if err := h.e.WaitBackground(); err != nil {
			h.tb.Fatal(err)
		}
	}
	if st := h.e.Stats(); st.Slices != 0 || st.SealedSegments != 0 || st.Records != 0 {
		h.tb.Fatalf("not all in the LsmStore: %+v", st)
	}
}

// rowHits returns the row cache's hits so far.
func (h *harness) rowHits() int64 { return h.e.Stats().RowCacheHits }

// composite returns the composite key of key in state id (what the row cache holds).
func composite(id uint16, key []byte) []byte {
	k, _ := testKey(id, key)
	return k
}
