package strata

import (
	"errors"
	"fmt"
	"testing"
)

// TestRowCacheStore: a value read twice from the LsmStore is served by the row cache the second
// time; a write drops it (the next read sees the new value from the FreshTable, then from the
// LsmStore again after an eviction); RowCacheSize < 0 turns it off; too small a size is
// refused with ErrInvalidOptions.
func TestRowCacheStore(t *testing.T) {
	if err := (Options{RowCacheSize: 100}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("RowCacheSize 100: %v, want ErrInvalidOptions", err)
	}
	for _, size := range []int64{0, -1} {
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, RowCacheSize: size})
			if err != nil {
				t.Fatal(err)
			}
			v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
			k := s.Key([]byte("key"))
			if err := v.Put(k, "one"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil { // persisted: the value is in the LsmStore now
				t.Fatal(err)
			}
			if s, err = Open(dir, Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, RowCacheSize: size}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
			read := func(want string) {
				t.Helper()
				got, ok, err := v.Get(k)
				if err != nil || !ok || got != want {
					t.Fatalf("get = %q %v %v, want %q", got, ok, err, want)
				}
			}
			read("one")
			read("one")
			st := s.Stats()
			if size < 0 {
				if st.RowCacheBytes != 0 || st.RowCacheHits != 0 {
					t.Fatalf("row cache off: stats %d bytes, %d hits", st.RowCacheBytes, st.RowCacheHits)
				}
				return
			}
			if st.RowCacheBytes != 64<<20/DefaultBlockCacheDivisor*DefaultRowCacheShare || st.RowCacheHits != 1 || st.RowCacheMisses != 1 {
				t.Fatalf("row cache: %d bytes, %d hits, %d misses; want %d, 1, 1", st.RowCacheBytes, st.RowCacheHits,
					st.RowCacheMisses, 64<<20/DefaultBlockCacheDivisor*DefaultRowCacheShare)
			}
			if err := v.Put(k, "two"); err != nil {
				t.Fatal(err)
			}
			read("two")
			if err := v.Clear(k); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := v.Get(k); ok || err != nil {
				t.Fatalf("after Clear: %v %v", ok, err)
			}
		})
	}
}
