package engine

import "testing"

// TestOpEntryKindEveryOp: a bulk replay knows the entry kind of every OpKind (a new OpKind
// fails here until bulk.go maps it to the entry the FreshTable makes of it), and refuses an
// unknown one.
func TestOpEntryKindEveryOp(t *testing.T) {
	for k := OpKind(1); k < numOpKinds; k++ {
		if _, ok := opEntryKind(k); !ok {
			t.Errorf("OpKind %v has no entry kind for a bulk replay (bulk.go, opEntryKind)", k)
		}
	}
	for _, k := range []OpKind{0, numOpKinds, 255} {
		if _, ok := opEntryKind(k); ok {
			t.Errorf("OpKind %d: an entry kind for an unknown op", k)
		}
	}
}
