package strata

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBudgetFloor: a budget that cannot hold a segment with its index is refused by Validate
// and Open, naming the field and the minimum; every budget Open accepts takes its first write
// and, with a directory, goes on writing far past the budget; two Stores sharing a 64 MiB
// budget with 16 MiB segments both write (issue "Nothing lost to a passing fault", item 3: a
// 16 MiB budget used to open and fail its first Put, and a second Store on a shared budget
// could never take its first segment).
func TestBudgetFloor(t *testing.T) {
	const seg = 16 << 20
	for _, mb := range []int64{16, 17, 18, 19} {
		o := Options{MemoryBudget: mb << 20, SegmentSize: seg}
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Options.MemoryBudget") ||
			!strings.Contains(err.Error(), fmt.Sprint(MinMemoryBudget(seg))) {
			t.Errorf("%d MiB: Validate = %v, want ErrInvalidOptions naming Options.MemoryBudget and %d", mb, err, MinMemoryBudget(seg))
		}
		if s, err := Open(t.TempDir(), o); !errors.Is(err, ErrInvalidOptions) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%d MiB: Open = %v, want ErrInvalidOptions", mb, err)
		}
	}
	val := make([]byte, 1000)
	write := func(t *testing.T, s *Store, v *ValueState[[]byte], n int) {
		t.Helper()
		for i := range n {
			if err := v.Put(s.Key(fmt.Appendf(nil, "k%d", i)), val); err != nil {
				t.Fatalf("put %d of %d: %v (stats %+v)", i, n, err, s.Stats())
			}
		}
	}
	for _, mb := range []int64{20, 24, 32} {
		for _, disk := range []bool{false, true} {
			t.Run(fmt.Sprintf("budget=%dMiB/disk=%v", mb, disk), func(t *testing.T) {
				dir := ""
				if disk {
					dir = t.TempDir()
				}
				s, err := Open(dir, Options{MemoryBudget: mb << 20, SegmentSize: seg})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
				n := 1000 // in memory the state must fit: a first write and a little more
				if disk {
					n = 3 * int(mb) << 10 // three times the budget
				}
				write(t, s, v, n)
			})
		}
	}
	t.Run("shared", func(t *testing.T) {
		shared := NewBudget(64 << 20)
		var stores []*Store
		var states []*ValueState[[]byte]
		for range 2 {
			s, err := Open(t.TempDir(), Options{SharedBudget: shared, SegmentSize: seg})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stores = append(stores, s)
			states = append(states, must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})))
		}
		for round := range 4 { // interleaved: each store fills segments while the other holds memory
			for i, s := range stores {
				if err := states[i].Put(s.Key(fmt.Appendf(nil, "first%d", round)), val); err != nil {
					t.Fatalf("store %d round %d: %v", i, round, err)
				}
				write(t, s, states[i], 40<<10)
			}
		}
	})
}
