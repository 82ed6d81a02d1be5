package strata_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/strata-db/strata"
)

// A windowed count per user: one Store per subtask, a value state, keys in namespaces.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "strata-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := strata.Open(filepath.Join(dir, "subtask-0"), strata.Options{
		MaxParallelism: 128,
		MemoryBudget:   256 << 20,
		SegmentSize:    16 << 20,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	counts, err := strata.NewValueState(store, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
	if err != nil {
		log.Fatal(err)
	}
	window := []byte("2024-01-01T10:00")
	for _, user := range []string{"alice", "bob", "alice"} {
		k := store.Key([]byte(user)).In(window) // key group and hashes computed once
		n, _, err := counts.Get(k)
		if err != nil {
			log.Fatal(err)
		}
		if err := counts.Put(k, n+1); err != nil {
			log.Fatal(err)
		}
	}
	n, ok, _ := counts.Get(store.Key([]byte("alice")).In(window))
	fmt.Println(n, ok)
	_, ok, _ = counts.Get(store.Key([]byte("alice"))) // the void namespace is another namespace
	fmt.Println(ok)
	// Output:
	// 2 true
	// false
}

// Flink's partitioning: the key group of a Java String key and the subtask that owns it.
func ExampleAssignToKeyGroup() {
	hash := int32(97) // "a".hashCode() in Java
	kg := strata.AssignToKeyGroup(hash, 10)
	fmt.Println(kg, strata.ComputeOperatorIndexForKeyGroup(10, 3, kg), strata.ComputeKeyGroupRangeForOperatorIndex(10, 3, 0))
	// Output: 1 0 KeyGroupRange{startKeyGroup=0, endKeyGroup=3}
}

func ExampleListState() {
	store, _ := strata.Open("", strata.Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	defer store.Close()
	events, _ := strata.NewListState(store, strata.ListDescriptor[string]{Name: "events", Codec: strata.String})
	k := store.Key([]byte("session-1"))
	_ = events.Add(k.In([]byte("w1")), "click")
	_ = events.Add(k.In([]byte("w2")), "view")
	_ = events.Add(k.In([]byte("w2")), "buy")
	// Session windows w1 and w2 merge into w1.
	_ = events.MergeNamespaces(k, []byte("w1"), []byte("w2"))
	it := events.Get(k.In([]byte("w1")))
	for it.Next() {
		fmt.Println(it.Value())
	}
	if err := it.Err(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// click
	// view
	// buy
}

func ExampleMapState_Iterator() {
	store, _ := strata.Open("", strata.Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	defer store.Close()
	carts, _ := strata.NewMapState(store, strata.MapDescriptor[string, int64]{
		Name: "cart", KeyCodec: strata.String, ValueCodec: strata.Int64,
	})
	k := store.Key([]byte("user-7"))
	_ = carts.Put(k, "apple", 3)
	_ = carts.Put(k, "pear", 0)
	it := carts.Iterator(k)
	for it.Next() {
		if it.Value() == 0 {
			_ = it.Remove() // removing the current entry does not disturb the iteration
		}
	}
	entries, errf := carts.Entries(k)
	for item, n := range entries {
		fmt.Println(item, n)
	}
	if err := errf(); err != nil { // a sequence that stops early says why
		panic(err)
	}
	// Output: apple 3
}

func ExampleAggregatingState() {
	store, _ := strata.Open("", strata.Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	defer store.Close()
	maxLen, _ := strata.NewAggregatingState(store, strata.AggregatingDescriptor[string, int64, string]{
		Name:              "longest",
		AccCodec:          strata.Int64,
		CreateAccumulator: func() int64 { return 0 },
		Add:               func(in string, acc int64) int64 { return max(acc, int64(len(in))) },
		GetResult:         func(acc int64) string { return fmt.Sprintf("%d bytes", acc) },
		Merge:             func(a, b int64) int64 { return max(a, b) },
	})
	k := store.Key([]byte("k"))
	for _, s := range []string{"ab", "abcd", "a"} {
		_ = maxLen.Add(k, s)
	}
	out, _, _ := maxLen.Get(k)
	fmt.Println(out)
	// Output: 4 bytes
}
