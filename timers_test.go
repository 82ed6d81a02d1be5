package strata

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/timer"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

// ft is a fired (or pending) timer as the tests compare them.
type ft struct {
	key, ns string
	ts      int64
}

func (f ft) String() string { return fmt.Sprintf("%s/%s@%d", f.key, f.ns, f.ts) }

// timerOrder is the documented firing order of timers of one Store: (timestamp, key group,
// hash, key, namespace), the hash being timer.Hash of the key's and namespace's xxh3.
func timerOrder(s *Store) func(a, b ft) int {
	return func(a, b ft) int {
		ka, kb := s.Key([]byte(a.key)).In([]byte(a.ns)), s.Key([]byte(b.key)).In([]byte(b.ns))
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(ka.kg, kb.kg),
			cmp.Compare(timer.Hash(ka.kh, ka.nh, a.ts), timer.Hash(kb.kh, kb.nh, b.ts)),
			strings.Compare(a.key, b.key), strings.Compare(a.ns, b.ns))
	}
}

func strTimers(t testing.TB, s *Store, name string) *TimerService[string] {
	t.Helper()
	ts, err := NewTimerService(s, TimerServiceDescriptor[string]{Name: name, NamespaceCodec: String})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// collect advances ts's event time (or processing time) to to and returns the timers fired.
func collect(t testing.TB, ts *TimerService[string], event bool, to int64) []ft {
	t.Helper()
	var got []ft
	fn := func(x Timer[string]) error {
		got = append(got, ft{string(x.Key.Bytes()), x.Namespace, x.Timestamp})
		return nil
	}
	var err error
	if event {
		err = ts.AdvanceWatermark(to, fn)
	} else {
		err = ts.AdvanceProcessingTime(to, fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func pending(t testing.TB, ts *TimerService[string], event bool) []ft {
	t.Helper()
	var got []ft
	fn := func(x Timer[string]) error {
		got = append(got, ft{string(x.Key.Bytes()), x.Namespace, x.Timestamp})
		return nil
	}
	var err error
	if event {
		err = ts.ForEachEventTimeTimer(fn)
	} else {
		err = ts.ForEachProcessingTimeTimer(fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTimers: the semantics of a timer service, one table row each.
func TestTimers(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *Store, ts *TimerService[string])
	}{
		{"order and ties", func(t *testing.T, s *Store, ts *TimerService[string]) {
			var all []ft
			for i := range 200 {
				x := ft{fmt.Sprintf("k%d", i%37), fmt.Sprintf("w%d", i%3), int64(i % 7)} // many equal timestamps
				if !slices.Contains(all, x) {
					all = append(all, x)
				}
				must(0, ts.RegisterEventTimeTimer(s.Key([]byte(x.key)), x.ns, x.ts))
			}
			slices.SortFunc(all, timerOrder(s))
			got := collect(t, ts, true, 100)
			if !slices.Equal(got, all) {
				t.Fatalf("fired %v\nwant %v", got, all)
			}
			// Ties by key group first: equal timestamps fire in ascending key groups.
			for i := 1; i < len(got); i++ {
				a, b := got[i-1], got[i]
				if a.ts == b.ts && s.Key([]byte(a.key)).KeyGroup() > s.Key([]byte(b.key)).KeyGroup() {
					t.Fatalf("%v before %v: key groups out of order", a, b)
				}
			}
		}},
		{"deduplication", func(t *testing.T, s *Store, ts *TimerService[string]) {
			k := s.Key([]byte("a"))
			for range 3 {
				must(0, ts.RegisterEventTimeTimer(k, "w", 5))
			}
			must(0, ts.RegisterEventTimeTimer(k, "w2", 5))
			must(0, ts.RegisterEventTimeTimer(k, "w", 6))
			if n := ts.NumEventTimeTimers(); n != 3 {
				t.Fatalf("%d timers, want 3", n)
			}
			if got := collect(t, ts, true, 10); len(got) != 3 {
				t.Fatalf("fired %v", got)
			}
		}},
		{"delete pending, fired and absent", func(t *testing.T, s *Store, ts *TimerService[string]) {
			k := s.Key([]byte("a"))
			must(0, ts.RegisterEventTimeTimer(k, "w", 5))
			must(0, ts.RegisterEventTimeTimer(k, "w", 7))
			must(0, ts.DeleteEventTimeTimer(k, "w", 5))
			must(0, ts.DeleteEventTimeTimer(k, "w", 5))   // deleted already
			must(0, ts.DeleteEventTimeTimer(k, "x", 7))   // absent
			must(0, ts.DeleteEventTimeTimer(k, "w", 7))   // the other
			must(0, ts.RegisterEventTimeTimer(k, "w", 7)) // again after its delete
			if got := collect(t, ts, true, 10); !slices.Equal(got, []ft{{"a", "w", 7}}) {
				t.Fatalf("fired %v", got)
			}
			must(0, ts.DeleteEventTimeTimer(k, "w", 7)) // fired
			if n := ts.NumEventTimeTimers(); n != 0 {
				t.Fatalf("%d timers after deleting a fired one", n)
			}
			if got := collect(t, ts, true, 20); len(got) != 0 {
				t.Fatalf("fired %v", got)
			}
		}},
		{"register in the callback", func(t *testing.T, s *Store, ts *TimerService[string]) {
			must(0, ts.RegisterEventTimeTimer(s.Key([]byte("a")), "w", 10))
			var got []ft
			err := ts.AdvanceWatermark(20, func(x Timer[string]) error {
				got = append(got, ft{string(x.Key.Bytes()), x.Namespace, x.Timestamp})
				if x.Timestamp == 10 {
					must(0, ts.RegisterEventTimeTimer(s.Key([]byte("b")), "w", 15)) // due: this advance
					must(0, ts.RegisterEventTimeTimer(s.Key([]byte("c")), "w", 20)) // due: this advance
					must(0, ts.RegisterEventTimeTimer(s.Key([]byte("d")), "w", 21)) // later
					must(0, ts.RegisterEventTimeTimer(s.Key([]byte("e")), "w", 3))  // in the past: fires now
					must(0, ts.DeleteEventTimeTimer(s.Key([]byte("c")), "w", 20))   // never fires
					must(0, ts.RegisterProcessingTimeTimer(s.Key([]byte("p")), "w", 1))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := []ft{{"a", "w", 10}, {"e", "w", 3}, {"b", "w", 15}}; !slices.Equal(got, want) {
				t.Fatalf("fired %v, want %v", got, want)
			}
			if ts.CurrentWatermark() != 20 || ts.NumEventTimeTimers() != 1 || ts.NumProcessingTimeTimers() != 1 {
				t.Fatalf("watermark %d, %d event-time and %d processing-time timers", ts.CurrentWatermark(),
					ts.NumEventTimeTimers(), ts.NumProcessingTimeTimers())
			}
		}},
		{"event and processing time are independent", func(t *testing.T, s *Store, ts *TimerService[string]) {
			k := s.Key([]byte("a"))
			must(0, ts.RegisterEventTimeTimer(k, "w", 5))
			must(0, ts.RegisterProcessingTimeTimer(k, "w", 5))
			must(0, ts.RegisterProcessingTimeTimer(k, "w", 9))
			if got := collect(t, ts, false, 6); !slices.Equal(got, []ft{{"a", "w", 5}}) {
				t.Fatalf("processing time fired %v", got)
			}
			if ts.NumEventTimeTimers() != 1 || ts.CurrentWatermark() != math.MinInt64 || ts.CurrentProcessingTime() != 6 {
				t.Fatal("advancing processing time touched event time")
			}
			must(0, ts.DeleteProcessingTimeTimer(k, "w", 9))
			if got := collect(t, ts, true, 100); !slices.Equal(got, []ft{{"a", "w", 5}}) {
				t.Fatalf("event time fired %v", got)
			}
			if ts.NumProcessingTimeTimers() != 0 || len(collect(t, ts, false, 100)) != 0 {
				t.Fatal("a deleted processing-time timer fired")
			}
		}},
		{"state access from the callback", func(t *testing.T, s *Store, ts *TimerService[string]) {
			counts := must(NewValueState(s, ValueDescriptor[int64]{Name: "counts", Codec: Int64}))
			for i := range 20 {
				k := s.Key(fmt.Appendf(nil, "user-%d", i))
				must(0, counts.Put(k.In([]byte("win")), int64(i)))
				must(0, ts.RegisterEventTimeTimer(k, "win", int64(i)))
			}
			n := 0
			err := ts.AdvanceWatermark(100, func(x Timer[string]) error {
				v, ok, err := counts.Get(x.Key)
				if err != nil || !ok || v != x.Timestamp {
					return fmt.Errorf("state of %s in %q: %v %v %v", x.Key.Bytes(), x.Key.Namespace(), v, ok, err)
				}
				n++
				return counts.Clear(x.Key) // a write inside the callback
			})
			if err != nil || n != 20 {
				t.Fatalf("%d fired: %v", n, err)
			}
		}},
		{"callback error stops the advance", func(t *testing.T, s *Store, ts *TimerService[string]) {
			for i := range 5 {
				must(0, ts.RegisterEventTimeTimer(s.Key([]byte("k")), "w", int64(i)))
			}
			stop := errors.New("stop")
			n := 0
			err := ts.AdvanceWatermark(10, func(x Timer[string]) error {
				if n++; x.Timestamp == 2 {
					return stop
				}
				return nil
			})
			if !errors.Is(err, stop) || n != 3 || ts.NumEventTimeTimers() != 2 {
				t.Fatalf("%v after %d timers, %d pending", err, n, ts.NumEventTimeTimers())
			}
			if got := collect(t, ts, true, 10); len(got) != 2 {
				t.Fatalf("the rest fired %v", got)
			}
		}},
		{"busy", func(t *testing.T, s *Store, ts *TimerService[string]) {
			k := s.Key([]byte("k"))
			must(0, ts.RegisterEventTimeTimer(k, "w", 1))
			err := ts.ForEachEventTimeTimer(func(Timer[string]) error {
				for _, err := range []error{ts.RegisterEventTimeTimer(k, "w", 2), ts.DeleteEventTimeTimer(k, "w", 1),
					ts.AdvanceWatermark(5, func(Timer[string]) error { return nil })} {
					if !errors.Is(err, ErrTimerServiceBusy) {
						return fmt.Errorf("inside ForEach: %v, want ErrTimerServiceBusy", err)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = ts.AdvanceWatermark(5, func(Timer[string]) error {
				if err := ts.AdvanceWatermark(6, nil); !errors.Is(err, ErrTimerServiceBusy) {
					return fmt.Errorf("nested advance: %v", err)
				}
				return ts.AdvanceProcessingTime(6, func(Timer[string]) error { return nil }) // the other domain: fine
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"key groups and sizes", func(t *testing.T, s *Store, ts *TimerService[string]) {
			other := openTest(t, Options{MaxParallelism: 64})
			if err := ts.RegisterEventTimeTimer(other.Key([]byte("x")), "w", 1); !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Fatalf("a Key of another MaxParallelism: %v", err)
			}
			if err := ts.RegisterEventTimeTimer(Key{}, "w", 1); !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Fatalf("the zero Key: %v", err)
			}
			if err := ts.RegisterEventTimeTimer(s.Key([]byte("x")), strings.Repeat("n", timer.MaxNamespaceLen+1), 1); !errors.Is(err, ErrKeyTooLarge) {
				t.Fatalf("a namespace too large: %v", err)
			}
			// KeyWithHash: the timer's Key comes back with the host's hash and key group.
			k := s.KeyWithHash([]byte("host"), 12345)
			must(0, ts.RegisterEventTimeTimer(k, "w", 1))
			err := ts.AdvanceWatermark(1, func(x Timer[string]) error {
				if x.Key.Hash() != 12345 || x.Key.KeyGroup() != k.KeyGroup() || x.Key.KeyGroup() != AssignToKeyGroup(12345, 128) {
					return fmt.Errorf("fired key hash %d group %d", x.Key.Hash(), x.Key.KeyGroup())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"registration", func(t *testing.T, s *Store, ts *TimerService[string]) {
			if again := strTimers(t, s, "timers"); again != ts {
				t.Fatal("a second registration returned another service")
			}
			if _, err := NewTimerService(s, TimerServiceDescriptor[int64]{Name: "timers", NamespaceCodec: Int64}); !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("another codec: %v", err)
			}
			must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
			if _, err := NewTimerService(s, TimerServiceDescriptor[string]{Name: "v", NamespaceCodec: String}); !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("a value state's name: %v", err)
			}
			if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "timers", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("a value state of a timer service's name: %v", err)
			}
			if _, err := NewBroadcastState(s, BroadcastDescriptor[string, int64]{Name: "timers", KeyCodec: String, ValueCodec: Int64}); !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("a broadcast state of a timer service's name: %v", err)
			}
			if _, err := NewTimerService(s, TimerServiceDescriptor[string]{Name: "nil"}); !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("no codec: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, Options{MaxParallelism: 128})
			tc.run(t, s, strTimers(t, s, "timers"))
		})
	}
}

// TestTimersClosed: every operation of a closed Store's timer service fails with ErrClosed,
// and Close gives the timers' memory back to the budget.
func TestTimersClosed(t *testing.T) {
	s, err := Open("", Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ts := strTimers(t, s, "t")
	for i := range 10000 {
		must(0, ts.RegisterEventTimeTimer(s.Key(fmt.Appendf(nil, "k%d", i)), "w", int64(i)))
	}
	if s.Budget().UsedBy(memory.PurposeTimers) == 0 {
		t.Fatal("10000 timers and nothing charged to the budget")
	}
	k := s.Key([]byte("k"))
	must(0, s.Close())
	if got := s.Budget().UsedBy(memory.PurposeTimers); got != 0 {
		t.Fatalf("after Close %d bytes of timers are charged", got)
	}
	for _, err := range []error{ts.RegisterEventTimeTimer(k, "w", 1), ts.DeleteProcessingTimeTimer(k, "w", 1),
		ts.AdvanceWatermark(1, nil), ts.ForEachEventTimeTimer(nil)} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("on a closed Store: %v", err)
		}
	}
	if _, err := NewTimerService(s, TimerServiceDescriptor[string]{Name: "u", NamespaceCodec: String}); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewTimerService on a closed Store: %v", err)
	}
}

// TestTimersBudget: with the budget full, a registration waits for background work as a
// keyed write does (backpressure) and then fails with ErrMemoryBudget, changing nothing; the
// pending timers stay intact and fire.
func TestTimersBudget(t *testing.T) {
	s := openTest(t, Options{MemoryBudget: 40 << 20, SegmentSize: 16 << 20, BackpressureTimeout: 50e6})
	ts := strTimers(t, s, "t")
	n := 0
	var err error
	for ; n < 2_000_000; n++ {
		if err = ts.RegisterEventTimeTimer(s.Key(fmt.Appendf(nil, "key-%d", n)), "window", int64(n)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("after %d timers: %v, want ErrMemoryBudget", n, err)
	}
	if st := s.Stats(); st.Stalls.BackpressureWaits == 0 {
		t.Fatal("the refused registration did not wait (backpressure)")
	}
	if ts.NumEventTimeTimers() != n {
		t.Fatalf("%d timers pending, %d registered", ts.NumEventTimeTimers(), n)
	}
	fired := 0
	if err := ts.AdvanceWatermark(math.MaxInt64, func(Timer[string]) error { fired++; return nil }); err != nil || fired != n {
		t.Fatalf("fired %d of %d: %v", fired, n, err)
	}
	t.Logf("%d timers in a 40 MiB budget (%d MiB used by the FreshTable and reserve)", n, (s.Budget().Used()-s.Budget().UsedBy(memory.PurposeTimers))>>20)
}

// timerEnv runs Stores with timers over a MemFS and one checkpoint storage.
type timerEnv struct {
	t    *testing.T
	fs   *vfs.MemFS
	st   *checkpoint.DirStorage
	dirs int
}

func newTimerEnv(t *testing.T) *timerEnv {
	fsys := vfs.NewMem()
	st, err := checkpointfs.NewDirStorage(fsys, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	return &timerEnv{t: t, fs: fsys, st: st}
}

func (e *timerEnv) opts(owner string, kg *KeyGroupRange) Options {
	o := Options{MaxParallelism: 128, KeyGroups: kg, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1,
		Checkpoint: CheckpointOptions{Storage: e.st, Owner: owner, Grace: checkpoint.NoGrace}}
	o.fs = e.fs
	return o
}

func (e *timerEnv) dir() string {
	e.dirs++
	return fmt.Sprintf("/store-%d", e.dirs)
}

// load registers n timers of each domain on ts (keys k0.., namespaces of three windows) and
// returns them.
func loadTimers(t testing.TB, s *Store, ts *TimerService[string], n int) (ev, pt []ft) {
	for i := range n {
		x := ft{fmt.Sprintf("k%d", i), fmt.Sprintf("w%d", i%3), int64(i * 7 % 1000)}
		must(0, ts.RegisterEventTimeTimer(s.Key([]byte(x.key)), x.ns, x.ts))
		ev = append(ev, x)
		if i%2 == 0 {
			must(0, ts.RegisterProcessingTimeTimer(s.Key([]byte(x.key)), x.ns, x.ts+1))
			pt = append(pt, ft{x.key, x.ns, x.ts + 1})
		}
	}
	return ev, pt
}

func sortedFt(s *Store, xs []ft) []ft {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, timerOrder(s))
	return xs
}

// TestTimersCloseOpen: timers survive Close and Open, for a service registered again and one
// not registered in between (kept all the same), and fire in order after the reopen; the
// directory keeps exactly one timer file; a damaged timer file fails Open with ErrCorruption.
func TestTimersCloseOpen(t *testing.T) {
	e := newTimerEnv(t)
	dir := e.dir()
	o := e.opts("x", nil)
	s := must(Open(dir, o))
	ts := strTimers(t, s, "a")
	ev, pt := loadTimers(t, s, ts, 500)
	other := strTimers(t, s, "b")
	must(0, other.RegisterProcessingTimeTimer(s.Key([]byte("z")), "", 42))
	must(0, ts.AdvanceWatermark(100, func(Timer[string]) error { return nil }))
	ev = slices.DeleteFunc(ev, func(x ft) bool { return x.ts <= 100 })
	must(0, s.Close())
	for round := range 3 {
		s = must(Open(dir, o))
		if round == 0 {
			// "b" stays unregistered this round: its timers are kept and persisted again.
			ts = strTimers(t, s, "a")
			if got := sortedFt(s, pending(t, ts, true)); !slices.Equal(got, sortedFt(s, ev)) {
				t.Fatalf("reopened: %d event-time timers, want %d", len(got), len(ev))
			}
			must(0, s.Close())
			continue
		}
		ts = strTimers(t, s, "a")
		other = strTimers(t, s, "b")
		if ts.CurrentWatermark() != math.MinInt64 {
			t.Fatal("the watermark was persisted")
		}
		if got := pending(t, other, false); !slices.Equal(got, []ft{{"z", "", 42}}) {
			t.Fatalf("round %d: the other service holds %v", round, got)
		}
		if round == 2 {
			if got := collect(t, ts, true, math.MaxInt64); !slices.Equal(got, sortedFt(s, ev)) {
				t.Fatalf("fired %d timers after reopening, want %d", len(got), len(ev))
			}
			if got := collect(t, ts, false, math.MaxInt64); !slices.Equal(got, sortedFt(s, pt)) {
				t.Fatalf("fired %d processing-time timers, want %d", len(got), len(pt))
			}
		}
		must(0, s.Close())
	}
	timerFiles := func() []string {
		var files []string
		for _, n := range must(e.fs.List(dir)) {
			if strings.HasPrefix(n, engine.TimerFilePrefix) {
				files = append(files, n)
			}
		}
		if len(files) != 1 {
			t.Fatalf("timer files in the directory: %v", files)
		}
		return files
	}
	timerFiles()
	// A stray timer file (a Close that crashed after writing it) is removed by Open.
	stray := filepath.Join(dir, engine.TimerFilePrefix+"0123456789abcdef")
	f := must(e.fs.Create(stray))
	f.Close()
	s = must(Open(dir, o))
	if _, err := e.fs.Stat(stray); err == nil {
		t.Fatal("a stray timer file survived Open")
	}
	must(0, s.Close())
	files := timerFiles()
	// Damage: a flipped bit, a truncation, a missing file.
	path := filepath.Join(dir, files[0])
	good := must(vfs.ReadFile(e.fs, path))
	for _, tc := range []struct {
		name  string
		b     []byte
		cause error
	}{
		{"flipped bit", func() []byte { b := bytes.Clone(good); b[len(b)/2] ^= 4; return b }(), ErrChecksum},
		{"truncated", good[:len(good)-3], ErrTruncated},
		{"missing", nil, nil},
	} {
		if tc.b == nil {
			must(0, e.fs.Remove(path))
		} else {
			writeFile(t, e.fs, path, tc.b)
		}
		_, err := Open(dir, o)
		if !errors.Is(err, ErrCorruption) || (tc.cause != nil && !errors.Is(err, tc.cause)) || !strings.Contains(err.Error(), files[0]) {
			t.Fatalf("%s timer file: Open = %v, want ErrCorruption naming it", tc.name, err)
		}
	}
	writeFile(t, e.fs, path, good)
	s = must(Open(dir, o))
	must(0, s.Close())
}

func writeFile(t testing.TB, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
}

// TestTimersCheckpointRestore: a restored Store holds exactly the timers of the checkpoint's
// cut — not the registrations, deletions and firings after it — for native and changelog
// checkpoints, and a checkpoint's damaged timer object fails Restore with ErrCorruption.
func TestTimersCheckpointRestore(t *testing.T) {
	for _, changelog := range []bool{false, true} {
		t.Run(fmt.Sprintf("changelog=%v", changelog), func(t *testing.T) {
			ctx := context.Background()
			e := newTimerEnv(t)
			o := e.opts("src", nil)
			if changelog {
				o.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
			}
			s := must(Open(e.dir(), o))
			defer s.Close()
			ts := strTimers(t, s, "t")
			ev, pt := loadTimers(t, s, ts, 2000)
			id := uint64(1)
			if changelog { // a materialization first, so that the next one is a changelog checkpoint
				must(s.Checkpoint(ctx, id, nil))
				must(0, s.NotifyCheckpointComplete(id))
				id++
				must(0, ts.RegisterEventTimeTimer(s.Key([]byte("after-mat")), "w", 5))
				ev = append(ev, ft{"after-mat", "w", 5})
			}
			p := must(s.StartCheckpoint(id, nil))
			// After the cut: nothing of this is in the checkpoint, though it changes every key
			// group before the upload ends (copy on write).
			for i := range 300 {
				must(0, ts.RegisterEventTimeTimer(s.Key(fmt.Appendf(nil, "late-%d", i)), "w", int64(i)))
				must(0, ts.DeleteProcessingTimeTimer(s.Key([]byte(pt[i].key)), pt[i].ns, pt[i].ts))
			}
			must(0, ts.AdvanceWatermark(500, func(Timer[string]) error { return nil }))
			h := must(p.Wait(ctx))
			if changelog && h.Stats.MemoryBytes != 0 {
				t.Fatalf("not a changelog checkpoint: %+v", h.Stats)
			}
			r := must(Restore(e.dir(), e.opts("dst", nil), e.st, h))
			defer r.Close()
			if got := r.RestoreStats().Timers; got != len(ev)+len(pt) {
				t.Fatalf("restored %d timers, want %d", got, len(ev)+len(pt))
			}
			rt := strTimers(t, r, "t")
			if got := collect(t, rt, true, math.MaxInt64); !slices.Equal(got, sortedFt(r, ev)) {
				t.Fatalf("restored event-time timers: %d, want %d", len(got), len(ev))
			}
			if got := collect(t, rt, false, math.MaxInt64); !slices.Equal(got, sortedFt(r, pt)) {
				t.Fatalf("restored processing-time timers: %d, want %d", len(got), len(pt))
			}
			// The timer object is one object of packed key-group sections.
			m := must(checkpoint.ReadManifest(ctx, e.st, "src", id))
			var tobj []checkpoint.Object
			for _, ob := range m.Objects {
				if ob.Kind == checkpoint.KindTimers {
					tobj = append(tobj, ob)
				}
			}
			if len(tobj) < 100 || tobj[0].Name != tobj[len(tobj)-1].Name || !tobj[0].Packed {
				t.Fatalf("%d timer entries", len(tobj))
			}
			// Damage one section: Restore fails with ErrCorruption naming the object.
			b := must(e.st.Get(ctx, tobj[3].Name))
			b[tobj[3].Offset+20] ^= 1
			must(0, e.st.Delete(ctx, tobj[3].Name))
			must(0, e.st.Put(ctx, tobj[3].Name, b))
			if _, err := Restore(e.dir(), e.opts("dst2", nil), e.st, h); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), tobj[3].Name) {
				t.Fatalf("restore of a damaged timer object: %v", err)
			}
			// A Store restored with another range of key groups, one that misses the damaged
			// section, restores.
			kg := int(tobj[3].KeyGroups.Start)
			part := KeyGroupRange{Start: kg + 1, End: 127}
			if kg == 127 {
				part = KeyGroupRange{Start: 0, End: kg - 1}
			}
			r2 := must(Restore(e.dir(), e.opts("dst3", &part), e.st, h))
			defer r2.Close()
		})
	}
}

// TestTimersRescale: timers move with their key groups: a checkpoint of one Store restored
// into three (1→3), their checkpoints into two (3→2): each Store holds exactly the timers of
// its key groups, and every timer fires exactly once in exactly one Store.
func TestTimersRescale(t *testing.T) {
	ctx := context.Background()
	e := newTimerEnv(t)
	s := must(Open(e.dir(), e.opts("one", nil)))
	ts := strTimers(t, s, "t")
	ev, pt := loadTimers(t, s, ts, 3000)
	h := must(s.Checkpoint(ctx, 1, nil))
	must(0, s.Close())
	wantEv, wantPt := map[ft]int{}, map[ft]int{}
	for _, x := range ev {
		wantEv[x]++
	}
	for _, x := range pt {
		wantPt[x]++
	}
	restoreInto := func(step string, hs []CheckpointHandle, par int) ([]*Store, []CheckpointHandle) {
		var stores []*Store
		var out []CheckpointHandle
		for i := range par {
			kg := ComputeKeyGroupRangeForOperatorIndex(128, par, i)
			r := must(Restore(e.dir(), e.opts(fmt.Sprintf("%s-%d", step, i), &kg), e.st, hs...))
			rt := strTimers(t, r, "t")
			// Exactly the timers of its key groups.
			for _, x := range append(pending(t, rt, true), pending(t, rt, false)...) {
				if !kg.Contains(r.Key([]byte(x.key)).KeyGroup()) {
					t.Fatalf("%s: Store %d (%v) holds a timer of key group %d", step, i, kg, r.Key([]byte(x.key)).KeyGroup())
				}
			}
			stores = append(stores, r)
			out = append(out, must(r.Checkpoint(ctx, 1, nil)))
		}
		return stores, out
	}
	three, hs := restoreInto("three", []CheckpointHandle{h}, 3)
	n := 0
	for _, r := range three {
		n += r.RestoreStats().Timers
		must(0, r.Close())
	}
	if n != len(ev)+len(pt) {
		t.Fatalf("1→3: %d timers restored, want %d", n, len(ev)+len(pt))
	}
	two, _ := restoreInto("two", hs, 2)
	gotEv, gotPt := map[ft]int{}, map[ft]int{}
	for _, r := range two {
		rt := strTimers(t, r, "t")
		for _, x := range collect(t, rt, true, math.MaxInt64) {
			gotEv[x]++
		}
		for _, x := range collect(t, rt, false, math.MaxInt64) {
			gotPt[x]++
		}
		must(0, r.Close())
	}
	if !maps.Equal(gotEv, wantEv) || !maps.Equal(gotPt, wantPt) {
		t.Fatalf("3→2: fired %d+%d distinct timers, want %d+%d (each once)", len(gotEv), len(gotPt), len(wantEv), len(wantPt))
	}
}

// TestTimerCorruptionCauses: a timer file whose sections hold what the registry and the key
// groups cannot — an unknown service, a key group outside the Store's, a key hash of another
// key group, a timer twice — fails Open with ErrCorruption, though its size and CRC32C match
// the persist point's reference.
func TestTimerCorruptionCauses(t *testing.T) {
	e := newTimerEnv(t)
	kg := KeyGroupRange{Start: 0, End: 63}
	o := e.opts("x", &kg)
	probe := openTest(t, Options{MaxParallelism: 128})
	k := probe.Key([]byte("a"))
	for k.KeyGroup() > 62 {
		k = probe.Key(append(k.Bytes(), 'a'))
	}
	tm := timer.Timer{KeyHash: k.Hash(), Key: k.Bytes(), Namespace: []byte("w"), Timestamp: 9}
	for _, tc := range []struct {
		name string
		sec  []byte
		want string
	}{
		{"unknown service", timer.AppendSection(nil, k.KeyGroup(), []timer.Block{{Service: "nope", Timers: []timer.Timer{tm}}}), "does not name"},
		{"key group outside", timer.AppendSection(nil, 100, []timer.Block{{Service: "svc", Timers: []timer.Timer{tm}}}), "outside"},
		{"hash of another key group", timer.AppendSection(nil, k.KeyGroup()+1, []timer.Block{{Service: "svc", Timers: []timer.Timer{tm}}}), "gives key group"},
		{"twice", timer.AppendSection(nil, k.KeyGroup(), []timer.Block{{Service: "svc", Timers: []timer.Timer{tm, tm}}}), "twice"},
	} {
		dir := e.dir()
		s := must(Open(dir, o))
		strTimers(t, s, "svc")
		name := engine.TimerFilePrefix + "00000000000000aa"
		writeFile(t, e.fs, filepath.Join(dir, name), tc.sec)
		if err := s.e.Persist(s.persistMeta(engine.TimerFileRef{Name: name, Size: int64(len(tc.sec)), CRC: crc32.Checksum(tc.sec, base.CRC32C)})); err != nil {
			t.Fatal(err)
		}
		must(0, s.Discard())
		if _, err := Open(dir, o); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Open = %v, want ErrCorruption (%s)", tc.name, err, tc.want)
		}
	}
	if got := e.fs; got == nil {
		t.Fatal(base.ErrCorruption)
	}
}

// TestGoldenRegistryV4: the state registry with a timer service and a timer file (persist.go,
// version 4; with operator state and a state with a TTL too) encodes to exactly
// testdata/registry-v4.bin and decodes back; a registry with timer services but no operator
// state is version 4 with opLen 0; one without timers keeps its version 1, 2 or 3 bytes.
func TestGoldenRegistryV4(t *testing.T) {
	s := goldenRegistryStore(t)
	v1 := s.encodeRegistry()
	strTimers(t, s, "timers") // id 9
	r := s.registry()
	old := r.States["old"]
	old.TTL = true // the state flags of version 3 are in version 4 too
	r.States["old"] = old
	ops := goldenOpSnapshotV1()
	r.TimerFile = engine.TimerFileRef{Name: "TIMERS-0123456789abcdef", Size: 1 << 40, CRC: 0xdeadbeef}
	// Its operator state blob is of version 1, no longer written: the file is decoded only.
	golden := goldenfile.Read(t, "testdata/registry-v4.bin")
	got, err := decodeReg(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !opEqual(got.ops, ops) || !maps.Equal(got.States, r.States) || got.NextID != 10 || got.TimerFile != r.TimerFile ||
		got.States["timers"] != (engine.PersistedState{ID: 9, Kind: kindTimerService, Codecs: [2]string{"github.com/strata-db/strata.stringCodec", ""}}) {
		t.Fatalf("registry-v4.bin decodes to %+v", got)
	}
	if v := golden[8]; v != 4 {
		t.Fatalf("version %d", v)
	}
	r.TimerFile = engine.TimerFileRef{}
	if b := r.Encode(); b[8] != 4 {
		t.Fatalf("a registry with a timer service is version %d", b[8])
	} else if got, err := decodeReg(b); err != nil || got.ops != nil || got.TimerFile.Name != "" || !got.States["old"].TTL {
		t.Fatalf("version 4 without operator state: %+v, %v", got, err)
	}
	noTimers := *r
	noTimers.States = maps.Clone(r.States)
	delete(noTimers.States, "timers")
	if b := noTimers.Encode(); b[8] != 3 {
		t.Fatalf("a registry with a TTL state and no timers is version %d", b[8])
	}
	if v1[8] != 1 {
		t.Fatal("goldenRegistryStore's registry is not version 1")
	}
	delete(s.states, "timers")
	if b := s.encodeRegistry(); b[8] != 1 {
		t.Fatalf("a registry without timers is version %d", b[8])
	}
	for _, bad := range []string{"TIMERS-0123", "../x", "TIMERS-0123456789ABCDEF", "timers-0123456789abcdef"} {
		r.TimerFile = engine.TimerFileRef{Name: bad, Size: 1}
		if _, err := decodeReg(r.Encode()); !errors.Is(err, ErrCorruption) {
			t.Fatalf("timer file %q: %v", bad, err)
		}
	}
}
