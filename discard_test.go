package strata

import (
	"errors"
	"testing"
)

// TestDiscard: Discard drops what the last Close did not persist, frees the budget, releases
// the directory's lock and leaves the Store closed; Open recovers the last Close's state.
func TestDiscard(t *testing.T) {
	dir := t.TempDir()
	budget := NewBudget(64 << 20)
	opts := Options{SharedBudget: budget, SegmentSize: 16 << 20}
	s := must(Open(dir, opts))
	v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
	k := s.Key([]byte("k"))
	must(0, v.Put(k, "persisted"))
	must(0, s.Close())
	s = must(Open(dir, opts))
	v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
	must(0, v.Put(k, "dropped"))
	must(0, v.Put(s.Key([]byte("new")), "dropped too"))
	if err := s.Discard(); err != nil {
		t.Fatal(err)
	}
	if u := budget.Used(); u != 0 {
		t.Errorf("budget used after Discard: %d bytes", u)
	}
	if err := s.Discard(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Discard: %v, want ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close after Discard: %v, want ErrClosed", err)
	}
	if _, _, err := v.Get(k); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Discard: %v, want ErrClosed", err)
	}
	s = must(Open(dir, opts)) // the lock was released
	defer s.Close()
	v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
	if got, ok, err := v.Get(k); err != nil || !ok || got != "persisted" {
		t.Errorf("after Discard and Open: %q %v %v, want the last Close's value", got, ok, err)
	}
	if _, ok, _ := v.Get(s.Key([]byte("new"))); ok {
		t.Error("a discarded write survived")
	}
}
