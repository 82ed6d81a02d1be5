package base_test

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// A point read of one key: its versions arrive newest first (here from a
// slice, as lsm.DB.Get's visit callback would deliver them), and the
// Resolver says per version what it contributes and when to stop. The
// entries are only valid during the visit, so the reader copies values.
func ExampleResolver_ReadKey() {
	versions := []base.Entry{ // newest first
		{Kind: base.KindListAppend, Seq: 9, Value: []byte("c")},
		{Kind: base.KindListAppend, Seq: 7, Value: []byte("b")},
		{Kind: base.KindListBase, Seq: 4, Value: []byte("a")},
		{Kind: base.KindValue, Seq: 2, Value: []byte("hidden")},
	}
	var r base.Resolver // one per reader, reused: no allocation per read
	var batches [][]byte
	visit := func(e *base.Entry) bool { // the shape of lowerTier.Get's visit
		switch r.ReadKey(e) {
		case base.StepOperand:
			batches = append(batches, append([]byte(nil), e.Value...))
			return true // older versions still count
		case base.StepBase:
			batches = append(batches, append([]byte(nil), e.Value...))
			return false // complete
		case base.StepDelete:
			return false // complete; the operands seen, if any, are the list
		}
		return true // StepSkip
	}
	r.StartRead()
	for i := range versions {
		if !visit(&versions[i]) {
			break
		}
	}
	st, complete, seq := r.Answer()
	fmt.Printf("%v complete=%v seq=%d batches newest first: %q\n", st, complete, seq, batches)
	// Output: found complete=true seq=4 batches newest first: ["c" "b" "a"]
}

// A map entry read: the versions of (map key, user key), then those of the
// map key itself (its clears), both newest first.
func ExampleResolver_ReadMapEntry() {
	entry := []base.Entry{{Kind: base.KindMapEntry, Seq: 3, UserKey: []byte("u"), Value: []byte("v")}}
	mapKey := []base.Entry{{Kind: base.KindTombstone, Seq: 5}} // cleared after the entry was written
	var r base.Resolver
	r.StartRead()
	for i := range entry {
		if r.ReadMapEntry(&entry[i]) != base.StepSkip {
			break
		}
	}
	for i := range mapKey {
		if r.ReadClear(&mapKey[i]) != base.StepSkip {
			break
		}
	}
	st, complete, _ := r.Answer()
	fmt.Println(st, complete)
	// Output: deleted true
}
