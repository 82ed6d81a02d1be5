package strata

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/strata-db/strata/internal/engine"
)

// Tests of the Store's own calls (store.go) beside its states: Discard and WaitBackground.

// open is Open with adjust changing the engine's options after opts.adjust (tests: a lower
// tier, eviction settings, bucket bits; either may be nil).
func open(dir string, opts Options, adjust func(*engine.Options)) (*Store, error) {
	if first := opts.adjust; first != nil && adjust != nil {
		opts.adjust = func(eo *engine.Options) { first(eo); adjust(eo) }
	} else if adjust != nil {
		opts.adjust = adjust
	}
	return Open(dir, opts)
}

// TestRestoreStatsOf: every field of the engine's RestoreStats reaches the root's field of the
// same name (restoreStatsOf copies them one by one, so a new field must be added there).
func TestRestoreStatsOf(t *testing.T) {
	var st engine.RestoreStats
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		v.Field(i).SetInt(int64(i + 1))
	}
	got := reflect.ValueOf(restoreStatsOf(st))
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if f := got.FieldByName(name); !f.IsValid() || f.Int() != int64(i+1) {
			t.Errorf("RestoreStats.%s: %v, want %d", name, f, i+1)
		}
	}
}

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

// TestWaitBackground: after writes that sealed segments, WaitBackground leaves no sealed
// segment waiting for its transform, every value reads back (now from the SliceTable or the
// LsmStore), and it reports ErrClosed after Close. Run in memory and on a directory with a
// budget small enough that evictions and LSM work are queued too.
func TestWaitBackground(t *testing.T) {
	for _, dir := range []string{"", "disk"} {
		t.Run("dir="+dir, func(t *testing.T) {
			path, budget := "", int64(256<<20) // in memory: the state must fit
			if dir != "" {
				path, budget = t.TempDir(), 64<<20
			}
			s, err := Open(path, Options{MemoryBudget: budget, SegmentSize: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
			const n = 200000
			value := func(i int) []byte { return fmt.Appendf(make([]byte, 0, 200), "%0200d", i) }
			for i := range n {
				if err := val.Put(s.Key(fmt.Appendf(nil, "k%d", i)), value(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.seal(); err != nil { // the last segment's transform is queued now
				t.Fatal(err)
			}
			if st := s.Stats(); st.Fresh.SealedSegments == 0 {
				t.Fatalf("the workload sealed no segment (stats %+v): the test checks nothing", st)
			}
			if err := s.WaitBackground(); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.Fresh.SealedSegments != 0 {
				t.Fatalf("after WaitBackground: %d sealed segments still wait for their transform", st.Fresh.SealedSegments)
			}
			if st.Slices.Transforms+st.LSM.Flushes == 0 {
				t.Fatalf("after WaitBackground: nothing was transformed or flushed (stats %+v)", st)
			}
			for i := range n {
				v, ok, err := val.Get(s.Key(fmt.Appendf(nil, "k%d", i)))
				if err != nil || !ok || string(v) != string(value(i)) {
					t.Fatalf("key %d after WaitBackground: %q %v %v", i, v, ok, err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitBackground(); !errors.Is(err, ErrClosed) {
				t.Fatalf("WaitBackground after Close: %v, want ErrClosed", err)
			}
		})
	}
}
