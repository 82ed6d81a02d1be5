//go:build race || invariants

package strata

import "testing"

// TestGuardDetectsOverlap simulates a second goroutine inside the Store (the guard held) and
// checks that a state operation panics instead of corrupting the scratch buffers.
func TestGuardDetectsOverlap(t *testing.T) {
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	k := s.Key([]byte("k"))
	s.guard.enter()
	defer func() {
		s.guard.exit()
		if r := recover(); r == nil {
			t.Fatal("overlapping use did not panic")
		}
	}()
	_ = v.Put(k, 1)
}
