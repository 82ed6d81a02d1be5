package engine

import (
	"bytes"
	"testing"
)

// TestApplyEveryOp applies every OpKind through Apply and reads its effect back, so that a new
// kind of state change cannot be added without Engine.write handling it (write panics on an
// unknown kind) and without this test saying what it does. The changelog will record every
// kind this test covers.
func TestApplyEveryOp(t *testing.T) {
	e := openTest(t, Options{})
	vk, vh := testKey(1, []byte("v"))
	lk, lh := testKey(2, []byte("l"))
	mk, mh := testKey(3, []byte("m"))
	value := func() ([]byte, Status) { return e.Get(vh, vk) }
	list := func() [][]byte {
		b, _, _ := e.ListGet(lh, lk, nil, nil)
		return b
	}
	mapGet := func(uk string) Status {
		_, st := e.MapGet(mh, mk, opMapPut(nil, 0, []byte(uk), nil).UserHash, []byte(uk))
		return st
	}
	covered := map[OpKind]bool{}
	steps := []struct {
		op    Op
		check func() bool
	}{
		{opPut(vk, vh, []byte("x")), func() bool { v, st := value(); return st == Found && string(v) == "x" }},
		{Op{Kind: OpDelete, Hash: vh, Key: vk}, func() bool { _, st := value(); return st != Found }},
		{Op{Kind: OpListAppend, Hash: lh, Key: lk, Value: frame([]byte("a"))}, func() bool { return bytes.Equal(bytes.Join(list(), nil), frame([]byte("a"))) }},
		{Op{Kind: OpListReplace, Hash: lh, Key: lk, Value: frame([]byte("b"))}, func() bool { return bytes.Equal(bytes.Join(list(), nil), frame([]byte("b"))) }},
		{Op{Kind: OpListDelete, Hash: lh, Key: lk}, func() bool { return len(list()) == 0 }},
		{opMapPut(mk, mh, []byte("u"), []byte("1")), func() bool { return mapGet("u") == Found }},
		{opMapRemove(mk, mh, []byte("u")), func() bool { return mapGet("u") != Found }},
		{opMapPut(mk, mh, []byte("w"), []byte("2")), func() bool { return mapGet("w") == Found }},
		{Op{Kind: OpMapClear, Hash: mh, Key: mk}, func() bool { return mapGet("w") != Found }},
	}
	for i, s := range steps {
		if err := e.Apply(s.op); err != nil {
			t.Fatalf("step %d (%v): %v", i, s.op.Kind, err)
		}
		if !s.check() {
			t.Fatalf("step %d (%v): effect not visible", i, s.op.Kind)
		}
		covered[s.op.Kind] = true
	}
	for k := OpKind(1); k < numOpKinds; k++ {
		if !covered[k] {
			t.Errorf("OpKind %v is not covered by this test", k)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Apply of an unknown OpKind did not panic")
		}
	}()
	e.Apply(Op{Kind: numOpKinds, Hash: vh, Key: vk})
}
