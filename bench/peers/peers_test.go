package peers

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"
)

func key(i uint64, ns string) Key {
	k := binary.BigEndian.AppendUint64(nil, i)
	return Key{K: k, NS: []byte(ns)}
}

// A Store keeps each state kind in the same keyspace of a byte-keyed peer
// (the benchmarks use one kind per Store, as RocksDB uses one column family
// per state), so the test gives each kind its own keys.
const listBase, mapBase = 1 << 20, 2 << 20

// TestRoundTrip drives every implementation through the same operations and
// checks every read against the expected state, so that a benchmark row
// never measures an adapter that loses or invents data.
func TestRoundTrip(t *testing.T) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			st, err := Open(name, Config{Dir: t.TempDir() + "/db", Budget: 256 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := st.Close(); err != nil {
					t.Error(err)
				}
			}()
			if st.Name() != name {
				t.Fatalf("Name() = %q", st.Name())
			}

			// Bulk load, then read back after Bulk(false).
			st.Bulk(true)
			for i := range uint64(100) {
				st.ValuePut(key(i, ""), []byte(fmt.Sprint("v", i)))
				st.ListAdd(key(i+listBase, ""), []byte("a"))
				st.MapPut(key(i+mapBase, ""), []byte{byte(i % 3)}, []byte("m"))
			}
			st.Bulk(false)
			for i := range uint64(100) {
				v, ok := st.ValueGet(key(i, ""))
				if !ok || string(v) != fmt.Sprint("v", i) {
					t.Fatalf("ValueGet(%d) = %q, %v", i, v, ok)
				}
				if n, _ := st.ListIterate(key(i+listBase, "")); n != 1 {
					t.Fatalf("list %d has %d elements after bulk load", i, n)
				}
				if v, ok := st.MapGet(key(i+mapBase, ""), []byte{byte(i % 3)}); !ok || string(v) != "m" {
					t.Fatalf("MapGet(%d) = %q, %v", i, v, ok)
				}
			}

			// Values: namespaces are distinct keys; overwrite; delete.
			a, aw := key(1000, ""), key(1000, "window01")
			if _, ok := st.ValueGet(a); ok {
				t.Fatal("absent key found")
			}
			st.ValuePut(a, []byte("x1"))
			st.ValuePut(aw, []byte("w1"))
			st.ValuePut(a, []byte("x2"))
			if v, _ := st.ValueGet(a); string(v) != "x2" {
				t.Fatalf("overwrite: got %q", v)
			}
			if v, _ := st.ValueGet(aw); string(v) != "w1" {
				t.Fatalf("namespace: got %q", v)
			}
			st.ValuePut(a, []byte("longer value"))
			if v, _ := st.ValueGet(a); string(v) != "longer value" {
				t.Fatalf("grow: got %q", v)
			}
			st.ValueDelete(a)
			if _, ok := st.ValueGet(a); ok {
				t.Fatal("deleted value found")
			}
			if v, _ := st.ValueGet(aw); string(v) != "w1" {
				t.Fatal("delete touched another namespace")
			}

			// Lists.
			l := key(2000, "ns")
			if st.ListGet(l) {
				t.Fatal("absent list non-empty")
			}
			st.ListAdd(l, []byte("e1"))
			st.ListAddAll(l, [][]byte{[]byte("e22"), []byte("e333")})
			st.ListAdd(l, []byte(""))
			if !st.ListGet(l) {
				t.Fatal("ListGet false")
			}
			if n, b := st.ListIterate(l); n != 4 || b != 9 {
				t.Fatalf("ListIterate = %d elements, %d bytes; want 4, 9", n, b)
			}
			st.ListUpdate(l, [][]byte{[]byte("only")})
			if n, b := st.ListIterate(l); n != 1 || b != 4 {
				t.Fatalf("after update: %d, %d", n, b)
			}
			st.ListUpdate(l, nil)
			if st.ListGet(l) {
				t.Fatal("update with no elements left a list")
			}
			st.ListAdd(l, []byte("z"))
			st.ListClear(l)
			if n, _ := st.ListIterate(l); n != 0 {
				t.Fatal("cleared list has elements")
			}

			// Maps: entries of neighbouring keys must not leak into a scan.
			m, next := key(3000, ""), key(3001, "")
			st.MapPut(next, []byte("u0"), []byte("other"))
			for u := range 10 {
				st.MapPut(m, []byte{'u', byte('0' + u)}, []byte{'v', byte(u)})
			}
			st.MapPut(m, []byte("u3"), []byte("V3")) // update
			if v, ok := st.MapGet(m, []byte("u3")); !ok || string(v) != "V3" {
				t.Fatalf("MapGet(u3) = %q, %v", v, ok)
			}
			if st.MapContains(m, []byte("zz")) {
				t.Fatal("Contains(miss) true")
			}
			if !st.MapContains(m, []byte("u9")) {
				t.Fatal("Contains(hit) false")
			}
			st.MapRemove(m, []byte("u5"))
			st.MapRemove(m, []byte("absent"))
			if _, ok := st.MapGet(m, []byte("u5")); ok {
				t.Fatal("removed entry found")
			}
			if n, b := st.MapIterate(m); n != 9 || b != 9*4 {
				t.Fatalf("MapIterate = %d entries, %d bytes; want 9, 36", n, b)
			}
			if n, _ := st.MapIterate(key(3002, "")); n != 0 {
				t.Fatal("absent map has entries")
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := prefixEnd(nil, c.in); string(got) != string(c.want) {
			t.Errorf("prefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

// TestStrataDiskReopen checks the larger-than-memory Strata adapter (Disk,
// a 64 MiB budget, 16 MiB segments): values written, some overwritten and
// deleted, read back the same before and after the Store is closed and
// opened again on its directory.
func TestStrataDiskReopen(t *testing.T) {
	cfg := Config{Dir: t.TempDir() + "/db", Budget: 64 << 20, Disk: true, SegmentSize: 16 << 20}
	st, err := Open("strata", cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	want := map[uint64]string{}
	for i := range uint64(n) {
		want[i] = fmt.Sprint("v", i)
		st.ValuePut(key(i, ""), []byte(want[i]))
	}
	for i := uint64(0); i < n; i += 7 {
		want[i] = fmt.Sprint("w", i)
		st.ValuePut(key(i, ""), []byte(want[i]))
	}
	for i := uint64(3); i < n; i += 11 {
		delete(want, i)
		st.ValueDelete(key(i, ""))
	}
	checkAll := func(st Store, when string) {
		t.Helper()
		for i := range uint64(n) {
			v, ok := st.ValueGet(key(i, ""))
			w, wok := want[i]
			if ok != wok || string(v) != w {
				t.Fatalf("%s: ValueGet(%d) = %q, %v; want %q, %v", when, i, v, ok, w, wok)
			}
		}
	}
	checkAll(st, "before reopen")
	// Close the Store but keep its directory (the adapter's Close removes it).
	if err := st.(*strataStore).s.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open("strata", cfg); err != nil {
		t.Fatal(err)
	}
	if st.(*strataStore).s.Dir() == "" {
		t.Fatal("Disk store opened in memory only")
	}
	checkAll(st, "after reopen")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.Dir); !os.IsNotExist(err) {
		t.Fatalf("Close left %s behind: %v", cfg.Dir, err)
	}
}
