package strata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestIterationReportsReadErrors: a map whose table file is damaged must not look complete
// through any iteration API (Flink's FLINK-9373): Entries, Keys and Values report
// ErrCorruption through their error function, Iterator through Err, and a list read of the
// damaged file through its iterator's Err. Before the sequences had an error function, the
// range loops yielded 0 of 5000 entries and ended normally.
func TestIterationReportsReadErrors(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20}
	s := must(Open(dir, opts))
	m := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	k := s.Key([]byte("the-key"))
	for i := range 5000 {
		must(0, m.Put(k, fmt.Sprintf("user-key-%05d", i), int64(i)))
		must(0, l.Add(k, int64(i)))
	}
	must(0, s.Close()) // persisted: the map and the list are in LsmStore tables now
	tables, _ := filepath.Glob(filepath.Join(dir, "lsm", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table files after Close")
	}
	for _, p := range tables { // flip bytes across the data blocks, not the footer
		b := must(os.ReadFile(p))
		for off := 64; off < len(b)-4096; off += 997 {
			b[off] ^= 0x5a
		}
		must(0, os.WriteFile(p, b, 0o644))
	}
	s = must(Open(dir, opts))
	defer s.Close()
	m = must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
	l = must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))

	check := func(what string, n int, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorruption) {
			t.Errorf("%s: %d entries, error %v; want ErrCorruption", what, n, err)
		}
	}
	entries, errf := m.Entries(k)
	n := 0
	for range entries {
		n++
	}
	check("Entries", n, errf())
	keys, errf := m.Keys(k)
	n = 0
	for range keys {
		n++
	}
	check("Keys", n, errf())
	values, errf := m.Values(k)
	n = 0
	for range values {
		n++
	}
	check("Values", n, errf())
	it := m.Iterator(k)
	n = 0
	for it.Next() {
		n++
	}
	check("Iterator", n, it.Err())
	li := l.Get(k)
	n = 0
	for li.Next() {
		n++
	}
	check("ListState.Get", n, li.Err())
	if _, err := m.IsEmpty(k); !errors.Is(err, ErrCorruption) {
		t.Errorf("IsEmpty: %v, want ErrCorruption", err)
	}
}
