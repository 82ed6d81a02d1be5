package strata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// openFS opens a Store over dir in fs (MemFS or FaultFS in tests).
func openFS(fs vfs.FS, dir string, opts Options) (*Store, error) {
	opts.fs = fs
	return Open(dir, opts)
}

// bigState is a workload of value, list and map state larger than a small budget, with a
// check of every read; round r of writes is reproducible from (i, r).
type bigState struct {
	s    *Store
	val  *ValueState[[]byte]
	lst  *ListState[int64]
	mp   *MapState[int64, []byte]
	keys int
	vlen int
	buf  []byte
}

func newBigState(t testing.TB, s *Store, keys, vlen int) *bigState {
	t.Helper()
	b := &bigState{s: s, keys: keys, vlen: vlen, buf: make([]byte, vlen)}
	var err error
	if b.val, err = NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}); err != nil {
		t.Fatal(err)
	}
	if b.lst, err = NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}); err != nil {
		t.Fatal(err)
	}
	if b.mp, err = NewMapState(s, MapDescriptor[int64, []byte]{Name: "m", KeyCodec: Int64, ValueCodec: Bytes}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bigState) key(i int) Key { return b.s.Key(fmt.Appendf(nil, "key-%09d", i)) }

// value is the value of key i written in round r: vlen bytes, recognisable.
func (b *bigState) value(i, r int) []byte {
	v := b.buf[:b.vlen]
	for j := range v {
		v[j] = byte(i*7 + r*13 + j)
	}
	copy(v, fmt.Appendf(nil, "%d/%d/", i, r))
	return v
}

// write runs round r over keys [from, to): a value put, a list add and a map put per key.
func (b *bigState) write(t testing.TB, r, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		k := b.key(i)
		if err := b.val.Put(k, b.value(i, r)); err != nil {
			t.Fatalf("round %d key %d: value put: %v (stats %+v)", r, i, err, b.s.Stats())
		}
		if err := b.lst.Add(k, int64(r)); err != nil {
			t.Fatalf("round %d key %d: list add: %v", r, i, err)
		}
		if err := b.mp.Put(k, int64(r%4), b.value(i, r)[:b.vlen/4]); err != nil {
			t.Fatalf("round %d key %d: map put: %v", r, i, err)
		}
	}
}

// check reads every key back after rounds complete rounds.
func (b *bigState) check(t testing.TB, when string, rounds int) {
	t.Helper()
	for i := range b.keys {
		k := b.key(i)
		v, ok, err := b.val.Get(k)
		if want := b.value(i, rounds-1); !ok || err != nil || string(v) != string(want) {
			t.Fatalf("%s: value %d = %.24q %v %v, want %.24q", when, i, v, ok, err, want)
		}
		it := b.lst.Get(k)
		n := 0
		for it.Next() {
			if it.Value() != int64(n) {
				t.Fatalf("%s: list %d element %d = %d", when, i, n, it.Value())
			}
			n++
		}
		if it.Err() != nil || n != rounds {
			t.Fatalf("%s: list %d has %d elements (%v), want %d", when, i, n, it.Err(), rounds)
		}
		seen := 0
		mi := b.mp.Iterator(k)
		for mi.Next() {
			uk := mi.Key()
			last := -1
			for r := range rounds {
				if int64(r%4) == uk {
					last = r
				}
			}
			if last < 0 || string(mi.Value()) != string(b.value(i, last)[:b.vlen/4]) {
				t.Fatalf("%s: map %d[%d] = %.16q (last round %d)", when, i, uk, mi.Value(), last)
			}
			seen++
		}
		if mi.Err() != nil || seen != min(rounds, 4) {
			t.Fatalf("%s: map %d has %d entries (%v), want %d", when, i, seen, mi.Err(), min(rounds, 4))
		}
	}
}

// TestLSMRoundTrip: state several times a 64 MiB budget, in value, list and map state, is
// evicted to the LsmStore while it is written, reads back through all three tiers, is
// persisted by Close and recovered by Open (registry, sequence numbers), and keeps being
// written after the reopen.
func TestLSMRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2}
	keys, vlen := 40000, 1000 // at least 2.5× the budget: the test needs evictions to the LSM
	if testing.Short() || raceEnabled {
		keys = 20000
	}
	s, err := openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b := newBigState(t, s, keys, vlen)
	b.write(t, 0, 0, keys)
	b.write(t, 1, 0, keys)
	b.check(t, "before close", 2)
	st := s.Stats()
	t.Logf("before close: %+v", st)
	if st.Slices.Evictions+st.LSM.Flushes == 0 || st.LSM.Files == 0 || st.Budget.Used > st.Budget.Limit {
		t.Fatalf("nothing evicted to the LSM: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b = newBigState(t, s, keys, vlen)
	b.check(t, "after reopen", 2)
	b.write(t, 2, 0, keys)
	b.check(t, "after reopen and a round", 3)
	t.Logf("after reopen: %+v", s.Stats())
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering v with another codec: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Registry checks on reopen.
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering l with another codec after reopen: %v", err)
	}
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "m", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering map m as a value after reopen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o2 := opts
	o2.MaxParallelism = 256
	if _, err := openFS(fs, "/db", o2); !errors.Is(err, ErrIncompatibleStore) {
		t.Fatalf("reopen with another MaxParallelism: %v", err)
	}
	o2 = opts
	o2.KeyGroups = &KeyGroupRange{Start: 0, End: 63}
	if _, err := openFS(fs, "/db", o2); !errors.Is(err, ErrIncompatibleStore) {
		t.Fatalf("reopen with another key-group range: %v", err)
	}
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b = newBigState(t, s, keys, vlen)
	b.check(t, "third open", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// rewriteFile replaces name in fs by edit(contents), synced.
func rewriteFile(t *testing.T, fs vfs.FS, name string, edit func([]byte) []byte) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b = edit(b)
	w, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// TestCorruptFiles: a table file of a persisted Store that is truncated, has a flipped bit in a
// data block, or names another format version gives ErrCorruption with a distinct cause
// (ErrTruncated, ErrChecksum, ErrFormatVersion), at Open or at the read that meets it, naming
// the file; never a panic and never a wrong value. The same for a damaged manifest (Open).
func TestCorruptFiles(t *testing.T) {
	base := vfs.NewMem()
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BlockCacheSize: -1}
	s, err := openFS(base, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 3000
	b := newBigState(t, s, keys, 200)
	b.write(t, 0, 0, keys)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := base.List("/db/lsm")
	if err != nil {
		t.Fatal(err)
	}
	var table, manifest string
	for _, n := range names {
		switch {
		case len(n) > 4 && n[len(n)-4:] == ".sst" && table == "":
			table = "/db/lsm/" + n
		case len(n) > 8 && n[:8] == "MANIFEST":
			manifest = "/db/lsm/" + n
		}
	}
	if table == "" || manifest == "" {
		t.Fatalf("no table or manifest in %v", names)
	}
	for _, tc := range []struct {
		name  string
		file  string
		edit  func([]byte) []byte
		cause error
	}{
		{"table/truncated", table, func(b []byte) []byte { return b[:len(b)-40] }, ErrTruncated},
		{"table/bitflip", table, func(b []byte) []byte { b[100] ^= 0x10; return b }, ErrChecksum},
		{"table/version", table, func(b []byte) []byte { b[8]++; return b }, ErrFormatVersion},
		{"table/magic", table, func(b []byte) []byte { b[0] ^= 0xff; return b }, ErrBadMagic},
		{"manifest/version", manifest, func(b []byte) []byte { b[8]++; return b }, ErrFormatVersion},
		{"manifest/magic", manifest, func(b []byte) []byte { b[0] ^= 0xff; return b }, ErrBadMagic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := base.CrashClone()
			rewriteFile(t, fs, tc.file, tc.edit)
			var errs []error
			s, err := openFS(fs, "/db", opts)
			if err != nil {
				errs = append(errs, err)
			} else {
				b := newBigState(t, s, keys, 200)
				for i := range keys {
					k := b.key(i)
					v, ok, err := b.val.Get(k)
					if err != nil {
						errs = append(errs, err)
					} else if !ok || string(v) != string(b.value(i, 0)) {
						t.Fatalf("value %d: %v, wrong value without an error", i, ok)
					}
					it := b.lst.Get(k)
					for it.Next() {
					}
					if it.Err() != nil {
						errs = append(errs, it.Err())
					}
					mi := b.mp.Iterator(k)
					for mi.Next() {
					}
					if mi.Err() != nil {
						errs = append(errs, mi.Err())
					}
				}
				s.Close()
			}
			if len(errs) == 0 {
				t.Fatal("no error from a damaged file")
			}
			for _, err := range errs {
				if !errors.Is(err, ErrCorruption) || !errors.Is(err, tc.cause) {
					t.Fatalf("%v: want ErrCorruption and %v", err, tc.cause)
				}
			}
			t.Logf("%d errors, first: %v", len(errs), errs[0])
		})
	}
}

// TestRegistryDecode: the registry blob round-trips, and every damage is a typed error, never
// a panic: each truncation, each flipped bit (of version 1, of version 2 with operator state,
// of version 3 with a TTL state, with and without operator state, of version 4 with a timer
// service and a timer file, and without either operator state or timer file), another version.
func TestRegistryDecode(t *testing.T) {
	s := openTest(t, Options{})
	must(NewValueState(s, ValueDescriptor[int64]{Name: "a", Codec: Int64}))
	must(NewMapState(s, MapDescriptor[string, []byte]{Name: "b", KeyCodec: String, ValueCodec: Bytes}))
	blob := s.encodeRegistry()
	r, err := decodeReg(blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.States) != 2 || r.States["b"].Kind != kindMap || r.States["a"].Codecs[0] != "github.com/strata-db/strata.int64Codec" || r.NextID != 3 {
		t.Fatalf("decoded %+v", r)
	}
	bc := must(NewBroadcastState(s, BroadcastDescriptor[string, int64]{Name: "c", KeyCodec: String, ValueCodec: Int64}))
	must(0, bc.Put("k", 1))
	blob2 := s.persistMeta(engine.TimerFileRef{})
	if r2, err := decodeReg(blob2); err != nil || r2.ops == nil || len(r2.ops.States) != 1 || r2.ops.States[0].Map["k"] == nil {
		t.Fatalf("version 2 decoded %+v, %v", r2, err)
	}
	// Version 3: a state with a TTL (and the operator state).
	must(NewValueState(s, ValueDescriptor[int64]{Name: "t", Codec: Int64, TTL: &TTLConfig{TTL: time.Second}}))
	blob3 := s.persistMeta(engine.TimerFileRef{})
	if r3, err := decodeReg(blob3); err != nil || !r3.States["t"].TTL || r3.States["a"].TTL || r3.ops == nil {
		t.Fatalf("version 3 decoded %+v, %v", r3, err)
	}
	if v := binary.LittleEndian.Uint16(blob3[8:]); v != 3 {
		t.Fatalf("a registry with a TTL state is version %d", v)
	}
	blob3n := s.encodeRegistry() // version 3 without operator state
	// Version 4: a timer service and a timer file (with the TTL state and the operator state).
	strTimers(t, s, "timers")
	blob4 := s.persistMeta(engine.TimerFileRef{Name: "TIMERS-00000000000000ff", Size: 77, CRC: 0xfeedf00d})
	if r4, err := decodeReg(blob4); err != nil || r4.TimerFile.Size != 77 || r4.States["timers"].Kind != kindTimerService ||
		!r4.States["t"].TTL || r4.States["timers"].TTL || r4.ops == nil {
		t.Fatalf("version 4 decoded %+v, %v", r4, err)
	}
	if v := binary.LittleEndian.Uint16(blob4[8:]); v != 4 {
		t.Fatalf("a registry with a timer service is version %d", v)
	}
	blob4n := s.encodeRegistry() // version 4 without operator state and timer file
	// Version 5: state id aliases (with everything above).
	s.nextID += 2
	s.aliases = map[string][]engine.IDAlias{"a": {{Lo: 10, Hi: 20, ID: uint16(s.nextID - 1)}, {Lo: 21, Hi: 21, ID: uint16(s.nextID - 2)}},
		"b": {{Lo: 0, Hi: 127, ID: uint16(s.nextID - 1)}}}
	blob5 := s.persistMeta(engine.TimerFileRef{Name: "TIMERS-00000000000000ff", Size: 77, CRC: 0xfeedf00d})
	if r5, err := decodeReg(blob5); err != nil || !maps.EqualFunc(r5.Aliases, s.aliases, slices.Equal) || r5.TimerFile.Size != 77 || r5.ops == nil {
		t.Fatalf("version 5 decoded %+v, %v", r5, err)
	}
	if v := binary.LittleEndian.Uint16(blob5[8:]); v != 5 {
		t.Fatalf("a registry with aliases is version %d", v)
	}
	blob5n := s.encodeRegistry()
	for j, blob := range [][]byte{blob, blob2, blob3, blob3n, blob4, blob4n, blob5, blob5n} {
		v := []string{"1", "2", "3", "3 without operator state", "4", "4 without operator state and timer file", "5", "5 without operator state and timer file"}[j]
		for n := range len(blob) {
			if _, err := decodeReg(blob[:n]); !errors.Is(err, ErrCorruption) {
				t.Fatalf("version %s truncated to %d: %v", v, n, err)
			}
		}
		for i := range len(blob) * 8 {
			b := bytes.Clone(blob)
			b[i/8] ^= 1 << (i % 8)
			if _, err := decodeReg(b); !errors.Is(err, ErrCorruption) {
				t.Fatalf("version %s, bit %d flipped: %v", v, i, err)
			}
		}
	}
	b := bytes.Clone(blob)
	b[8] = 6
	if _, err := decodeReg(b); !errors.Is(err, ErrFormatVersion) {
		t.Fatalf("version 6: %v", err)
	}
}

// FuzzRegistryDecode: decodeRegistry never panics, and never returns a nil registry without
// an error, on damaged registries of every version.
func FuzzRegistryDecode(f *testing.F) {
	s, err := Open("", Options{MemoryBudget: 32 << 20, SegmentSize: 16 << 20})
	if err != nil {
		f.Fatal(err)
	}
	must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	f.Add(s.encodeRegistry())
	u := must(NewUnionListState(s, OperatorListDescriptor[int64]{Name: "u", Codec: Int64}))
	must(0, u.AddAll([]int64{1, 2}))
	f.Add(s.persistMeta(engine.TimerFileRef{})) // version 2, with operator state
	must(NewMapState(s, MapDescriptor[string, int64]{Name: "t", KeyCodec: String, ValueCodec: Int64, TTL: &TTLConfig{TTL: time.Hour}}))
	f.Add(s.persistMeta(engine.TimerFileRef{})) // version 3, with a TTL state and operator state
	f.Add(s.encodeRegistry())                   // version 3 without operator state
	strTimers(f, s, "timers")
	f.Add(s.persistMeta(engine.TimerFileRef{Name: "TIMERS-0000000000000001", Size: 1, CRC: 2})) // version 4
	f.Add(s.encodeRegistry())                                                                   // version 4 without operator state and timer file
	s.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeReg(b); err == nil && r == nil {
			t.Fatal("nil registry without an error")
		}
	})
}

// decodedRegistry is decodeRegistry's two results in one value, for tests.
type decodedRegistry struct {
	*engine.Registry
	ops *engine.OpSnapshot
}

// decodeReg is decodeRegistry for tests: the registry and its operator state in one value.
func decodeReg(b []byte) (*decodedRegistry, error) {
	r, ops, err := decodeRegistry(b)
	if err != nil {
		return nil, err
	}
	return &decodedRegistry{r, ops}, nil
}
