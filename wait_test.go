package strata

import (
	"errors"
	"fmt"
	"testing"
)

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
