package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// sweepStates are the states of the sweep tests: value, list and map state with a TTL of 100
// ms (the default bound, 2 × TTL = 200 ms: ticks every 40 ms), a value state with a TTL of an
// hour and one without a TTL, whose data lies in the same slices and files and must stay.
type sweepStates struct {
	v     *ValueState[string]
	l     *ListState[string]
	m     *MapState[string, string]
	long  *ValueState[string]
	plain *ValueState[string]
}

func newSweepStates(t *testing.T, s *Store) *sweepStates {
	t.Helper()
	ttl := &TTLConfig{TTL: 100 * time.Millisecond}
	return &sweepStates{
		v:     must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: ttl})),
		l:     must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String, TTL: ttl})),
		m:     must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String, TTL: ttl})),
		long:  must(NewValueState(s, ValueDescriptor[string]{Name: "long", Codec: String, TTL: &TTLConfig{TTL: time.Hour}})),
		plain: must(NewValueState(s, ValueDescriptor[string]{Name: "plain", Codec: String})),
	}
}

// write writes keys [from, to) of prefix into every state.
func (ss *sweepStates) write(t *testing.T, s *Store, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		k := s.Key(fmt.Appendf(nil, "%s-%d", prefix, i))
		must(0, ss.v.Put(k, "value-of-some-length"))
		must(0, ss.l.AddAll(k, []string{"a", "b"}))
		must(0, ss.m.Put(k, "uk1", "x"))
		must(0, ss.m.Put(k, "uk2", "y"))
		must(0, ss.long.Put(k, "long"))
		must(0, ss.plain.Put(k, "plain"))
	}
}

// counts returns NumEntries of the TTL'd states (expired data not yet removed counts, as
// Flink's getKeys) and of the states that must keep their data.
func (ss *sweepStates) counts(t *testing.T, s *Store) (ttl, kept int64) {
	t.Helper()
	for _, st := range []State{ss.v, ss.l, ss.m} {
		ttl += must(s.NumEntries(st))
	}
	for _, st := range []State{ss.long, ss.plain} {
		kept += must(s.NumEntries(st))
	}
	return ttl, kept
}

// checkLive reads keys [from, to) of prefix in every state: all present.
func (ss *sweepStates) checkLive(t *testing.T, s *Store, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		k := s.Key(fmt.Appendf(nil, "%s-%d", prefix, i))
		if x, ok, err := ss.v.Get(k); err != nil || !ok || x != "value-of-some-length" {
			t.Fatalf("%s-%d: value %q %v %v", prefix, i, x, ok, err)
		}
		if x, ok, err := ss.m.Get(k, "uk2"); err != nil || !ok || x != "y" {
			t.Fatalf("%s-%d: map %q %v %v", prefix, i, x, ok, err)
		}
		n := 0
		for it := ss.l.Get(k); it.Next(); {
			n++
		}
		if n != 2 {
			t.Fatalf("%s-%d: list of %d elements", prefix, i, n)
		}
	}
}

// TestTTLSweep: data written once and never read again is reclaimed by the sweep within the
// bound — from the FreshTable (a segment left active is sealed), the SliceTable (runs
// rewritten) and the LsmStore (files found at Open, and files rewritten in place) — while
// data that has not expired, of states with a longer TTL or none, stays; Stats count it,
// and the Store reopens to the same contents.
func TestTTLSweep(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	s := must(Open(dir, opts))
	defer func() { s.Close() }()
	ss := newSweepStates(t, s)
	const n = 400
	// t=0: "dead" keys, never touched again. The sweep sees the active segment at its first
	// writes (t=0); ticks at 50 and 90 leave it (nothing in it can expire before the smallest
	// TTL, 100, and the sweep waits a period more: sweepSealAge 140); the tick at 150 seals
	// it; its slices expire at 100 and are due 3 periods later, at 220.
	ss.write(t, s, "dead", 0, n)
	must(0, s.WaitBackground())
	now.Store(50)
	must(0, s.WaitBackground())
	now.Store(90)
	must(0, s.WaitBackground())
	if st := s.Stats(); st.TTL.SweepSeals != 0 {
		t.Fatalf("a segment sealed before its oldest data could expire: %d seals", st.TTL.SweepSeals)
	}
	ttl, kept := ss.counts(t, s)
	if ttl != 4*n || kept != 2*n {
		t.Fatalf("before expiry: %d TTL entries, %d kept", ttl, kept)
	}
	now.Store(150)
	must(0, s.WaitBackground())
	st := s.Stats()
	if st.TTL.SweepSeals != 1 || st.Slices.Count == 0 || st.Fresh.Records != 0 {
		t.Fatalf("after the tick at 150: %d seals, %d slices, %d FreshTable records", st.TTL.SweepSeals, st.Slices.Count, st.Fresh.Records)
	}
	sliceBytes := st.Slices.Bytes
	// The dead keys expired at 100, reported pending; at the tick at 200 they are still
	// within the sweep's lag. "live" keys written at 200 expire at 300. The bound is 200 ms:
	// by 300 the dead data must be gone — here at the first tick past 220 (the lag), 240,
	// which leaves the live keys' segment active (for 40 ms).
	if st.TTL.SweepDueUnits == 0 || st.TTL.ExpiredPendingBytes == 0 {
		t.Fatalf("expired data not reported pending: %d units, %d bytes", st.TTL.SweepDueUnits, st.TTL.ExpiredPendingBytes)
	}
	now.Store(200)
	must(0, s.WaitBackground())
	if ttl, _ := ss.counts(t, s); ttl != 4*n {
		t.Fatalf("dead keys swept within the lag: %d TTL entries (want %d)", ttl, 4*n)
	}
	ss.write(t, s, "live", 0, n)
	must(0, s.WaitBackground())
	now.Store(240)
	must(0, s.WaitBackground())
	st = s.Stats()
	ttl, kept = ss.counts(t, s)
	if ttl != 4*n || kept != 4*n {
		t.Fatalf("after the sweep: %d TTL entries (want %d: the live keys'), %d kept (want %d)", ttl, 4*n, kept, 4*n)
	}
	if st.TTL.SweepJobs == 0 || st.TTL.SweepEntries < 5*n || st.TTL.SweepBytes == 0 || st.TTL.SweepReadBytes == 0 {
		t.Fatalf("sweep stats: %d jobs, %d entries, %d bytes, %d read", st.TTL.SweepJobs, st.TTL.SweepEntries, st.TTL.SweepBytes, st.TTL.SweepReadBytes)
	}
	if st.TTL.SweepDueUnits != 0 || st.TTL.ExpiredPendingBytes != 0 {
		t.Fatalf("after the sweep: %d units due, %d bytes pending", st.TTL.SweepDueUnits, st.TTL.ExpiredPendingBytes)
	}
	if st.Slices.Bytes >= sliceBytes {
		t.Fatalf("slice memory %d after the sweep, %d before", st.Slices.Bytes, sliceBytes)
	}
	t.Logf("slices: %d → %d bytes; sweep: %d ticks, %d jobs read %d bytes, removed %d entries (%d bytes) in %v",
		sliceBytes, st.Slices.Bytes, st.TTL.SweepTicks, st.TTL.SweepJobs, st.TTL.SweepReadBytes,
		st.TTL.SweepEntries, st.TTL.SweepBytes, time.Duration(st.TTL.SweepNanos))
	ss.checkLive(t, s, "live", 0, n)
	// In the tiers: the dead values are gone, not tombstones (their runs ended their chains
	// and the LsmStore is empty).
	for i := range n {
		key, h := s.compose(s.Key(fmt.Appendf(nil, "dead-%d", i)), ss.v.id)
		if _, st := s.e.Get(h, key); st != absent {
			t.Fatalf("dead-%d: stored as %v after the sweep", i, st)
		}
	}
	for i := 0; i < n; i += 37 {
		k := s.Key(fmt.Appendf(nil, "dead-%d", i))
		if x, ok, err := ss.long.Get(k); err != nil || !ok || x != "long" {
			t.Fatalf("dead-%d: the long-TTL value %q %v %v", i, x, ok, err)
		}
	}

	// Into the LsmStore (Close persists) and back at t=240: the files found at Open are due
	// at 240 + 200 − 40 (the bound less a period), swept by the first tick after; the live
	// keys expire at 300.
	must(0, s.Close())
	now.Store(240)
	s = must(Open(dir, opts))
	ss = newSweepStates(t, s)
	ss.checkLive(t, s, "live", 0, n)
	now.Store(390)
	must(0, s.WaitBackground())
	if ttl, _ := ss.counts(t, s); ttl != 4*n {
		t.Fatalf("files found at Open swept before their bound: %d TTL entries", ttl)
	}
	before := s.Stats()
	if before.TTL.SweepDueUnits != 0 {
		t.Fatalf("%d units due before the bound", before.TTL.SweepDueUnits)
	}
	now.Store(430) // the first tick at or after 400 (ticks every 40 ms: 390, 430)
	must(0, s.WaitBackground())
	st = s.Stats()
	ttl, kept = ss.counts(t, s)
	if ttl != 0 || kept != 4*n {
		t.Fatalf("after the LSM sweep: %d TTL entries, %d kept (want 0, %d)", ttl, kept, 4*n)
	}
	if st.LSM.Bytes >= before.LSM.Bytes || st.TTL.SweepEntries < 5*n {
		t.Fatalf("LSM sweep: %d → %d bytes, %d entries removed", before.LSM.Bytes, st.LSM.Bytes, st.TTL.SweepEntries)
	}
	t.Logf("LSM (files found at Open): %d → %d bytes, %d entries removed", before.LSM.Bytes, st.LSM.Bytes, st.TTL.SweepEntries)

	// Files this Store wrote know their summaries: new keys at 430, pushed to the bottom
	// level now (nothing expired), expire at 530 and are rewritten in place by the first tick
	// past 530 + 3 periods (the sweep's lag: 650), within the bound's 4 periods — well
	// before the files found at Open are due (430 + 160).
	ss.write(t, s, "late", 0, n)
	must(0, s.Close())
	s = must(Open(dir, opts))
	ss = newSweepStates(t, s)
	must(0, s.e.CompactLSM()) // outputs written by this Store: summaries known
	now.Store(529)
	must(0, s.WaitBackground())
	if ttl, _ := ss.counts(t, s); ttl != 4*n {
		t.Fatalf("late keys swept before they expired: %d TTL entries", ttl)
	}
	ss.checkLive(t, s, "late", 0, n)
	now.Store(649) // expired, but within the lag
	must(0, s.WaitBackground())
	if ttl, _ := ss.counts(t, s); ttl != 4*n {
		t.Fatalf("late keys swept within the LsmStore's lag: %d TTL entries", ttl)
	}
	before = s.Stats()
	now.Store(690)
	must(0, s.WaitBackground())
	st = s.Stats()
	if ttl, kept := ss.counts(t, s); ttl != 0 || kept != 6*n {
		t.Fatalf("after the in-place sweep: %d TTL entries, %d kept (want 0, %d)", ttl, kept, 6*n)
	}
	if st.TTL.SweepJobs == before.TTL.SweepJobs || st.LSM.Bytes >= before.LSM.Bytes {
		t.Fatalf("in-place sweep: %d jobs, %d → %d bytes", st.TTL.SweepJobs-before.TTL.SweepJobs, before.LSM.Bytes, st.LSM.Bytes)
	}
	t.Logf("LSM (known summaries, in place): %d → %d bytes", before.LSM.Bytes, st.LSM.Bytes)

	// Restart after the sweep: the same contents.
	must(0, s.Close())
	s = must(Open(dir, opts))
	ss = newSweepStates(t, s)
	if ttl, kept := ss.counts(t, s); ttl != 0 || kept != 6*n {
		t.Fatalf("reopened after the sweep: %d TTL entries, %d kept", ttl, kept)
	}
}

// TestTTLSweepModel: random writes over advancing time, with the sweep running (ticks every
// 40 ms), restarts in between: every value that has not expired reads back as written, and
// at the end — nothing written for more than the bound — the sweep has left nothing of the
// TTL state in any tier.
func TestTTLSweepModel(t *testing.T) {
	seed := *modelSeed // -seed replays
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2, Clock: now.Load}
	s := must(Open(dir, opts))
	defer func() { s.Close() }()
	reg := func() (*ValueState[string], *ValueState[string]) {
		return must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: &TTLConfig{TTL: 100 * time.Millisecond}})),
			must(NewValueState(s, ValueDescriptor[string]{Name: "plain", Codec: String}))
	}
	v, plain := reg()
	type stamped struct {
		val string
		ts  int64
	}
	model := map[int]stamped{}
	const keys = 3000
	rounds := raceScale(60)
	for round := range rounds {
		now.Add(rng.Int64N(40))
		for range rng.IntN(2000) {
			i := rng.IntN(keys)
			val := fmt.Sprintf("v%d-%d", round, i)
			k := s.Key(fmt.Appendf(nil, "k%d", i))
			must(0, v.Put(k, val))
			must(0, plain.Put(k, val))
			model[i] = stamped{val, now.Load()}
		}
		switch rng.IntN(8) {
		case 0:
			must(0, s.Close())
			s = must(Open(dir, opts))
			v, plain = reg()
		case 1, 2:
			must(0, s.WaitBackground())
		}
		// Every live value reads back; an expired one never does (reading removes it).
		for i := 0; i < keys; i += 1 + rng.IntN(50) {
			k := s.Key(fmt.Appendf(nil, "k%d", i))
			m, ok := model[i]
			x, got, err := v.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			live := ok && m.ts+100 > now.Load()
			if got != live || live && x != m.val {
				t.Fatalf("round %d key %d at %d (written %v at %d): got %q %v", round, i, now.Load(), ok, m.ts, x, got)
			}
			if y, got, err := plain.Get(k); err != nil || got != ok || ok && y != m.val {
				t.Fatalf("round %d key %d: plain value %q %v %v", round, i, y, got, err)
			}
		}
	}
	// Nothing written for the bound (200 ms) and ticks along it: the sweep reclaimed all.
	for range 10 {
		now.Add(40)
		must(0, s.WaitBackground())
	}
	if n := must(s.NumEntries(v)); n != 0 {
		st := s.Stats()
		t.Fatalf("%d TTL entries left after the bound: %+v", n, st)
	}
	if n := must(s.NumEntries(plain)); n != int64(len(model)) {
		t.Fatalf("%d plain entries, want %d", n, len(model))
	}
	st := s.Stats()
	t.Logf("sweep: %d ticks, %d seals, %d jobs, %d entries removed", st.TTL.SweepTicks, st.TTL.SweepSeals, st.TTL.SweepJobs, st.TTL.SweepEntries)
}

// TestTTLSweepCheckpoint: a sweep that rewrites slices while a checkpoint pins them frees
// nothing the checkpoint reads (the pins defer the frees), and the checkpoint restores the
// state of its cut: values live then, judged by the clock of the restored Store.
func TestTTLSweepCheckpoint(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	dir := t.TempDir()
	stor := must(checkpoint.NewDirStorage(filepath.Join(dir, "ck")))
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load,
		Checkpoint: CheckpointOptions{Storage: stor, Grace: checkpoint.NoGrace}}
	s := must(Open(filepath.Join(dir, "a"), opts))
	defer func() { s.Close() }()
	ss := newSweepStates(t, s)
	const n = 300
	ss.write(t, s, "dead", 0, n)
	must(0, s.WaitBackground())
	now.Store(150)
	must(0, s.WaitBackground()) // sealed (sweepSealAge: minTTL + a period): the dead keys are in slices
	p := must(s.StartCheckpoint(1, nil))
	now.Store(230)               // the dead keys expired at 100: due after the lag, at 220
	ss.write(t, s, "live", 0, n) // ticks sweep the pinned slices
	must(0, s.WaitBackground())
	h := must(p.Wait(ctx))
	must(0, s.NotifyCheckpointComplete(1))
	st := s.Stats()
	if st.TTL.SweepJobs == 0 || st.TTL.SweepEntries < 5*n {
		t.Fatalf("no sweep while the checkpoint ran: %d jobs, %d entries", st.TTL.SweepJobs, st.TTL.SweepEntries)
	}
	if ttl, kept := ss.counts(t, s); ttl != 4*n || kept != 4*n {
		t.Fatalf("after the sweep: %d TTL entries, %d kept", ttl, kept)
	}
	// Restored at 90 (before the dead keys expire): the cut's contents.
	now.Store(90)
	r := must(Restore(filepath.Join(dir, "b"), opts, stor, h))
	defer r.Close()
	rs := newSweepStates(t, r)
	if ttl, kept := rs.counts(t, r); ttl != 4*n || kept != 2*n {
		t.Fatalf("restored: %d TTL entries, %d kept (want %d, %d)", ttl, kept, 4*n, 2*n)
	}
	rs.checkLive(t, r, "dead", 0, n)
}

// TestTTLCleanupEveryRecord: with EveryRecord, each RecordProcessed checks IncrementalSize
// more keys of the state and removes what expired — keys nobody accesses again — as Flink's
// runCleanupForEveryRecord; without it RecordProcessed leaves the state alone. A live key is
// never removed, and a Store with no such state does nothing and allocates nothing.
func TestTTLCleanupEveryRecord(t *testing.T) {
	for _, every := range []bool{false, true} {
		t.Run(fmt.Sprintf("every=%v", every), func(t *testing.T) {
			var now atomic.Int64
			s := openTest(t, Options{MaxParallelism: 16, Clock: now.Load})
			if n := testing.AllocsPerRun(100, func() { must(0, s.RecordProcessed()) }); n != 0 {
				t.Fatalf("RecordProcessed with no per-record state: %v allocs", n)
			}
			// NoSweep: only the incremental cleanup removes anything here.
			cl := TTLCleanup{IncrementalSize: 3, EveryRecord: every, NoSweep: true}
			v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: cl}}))
			m := must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String,
				TTL: &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: cl}}))
			const n = 30
			for i := range n {
				k := s.Key(fmt.Appendf(nil, "k%d", i))
				must(0, v.Put(k, "x"))
				must(0, m.Put(k, "a", "x"))
			}
			now.Store(60)
			live := s.Key([]byte("live"))
			must(0, v.Put(live, "y")) // expires at 160
			must(0, m.Put(live, "a", "y"))
			now.Store(100)              // the n keys expired; live not
			const records = (n+1)/3 + 1 // 3 keys each: every key at least once, wherever the cursor was
			for range records {
				must(0, s.RecordProcessed())
			}
			nv, nm := must(s.NumEntries(v)), must(s.NumEntries(m))
			want := int64(n + 1)
			if every {
				want = 1
			}
			if nv != want || nm != want {
				t.Fatalf("after %d records: %d values, %d map entries; want %d", records, nv, nm, want)
			}
			if x, ok, err := v.Get(live); err != nil || !ok || x != "y" {
				t.Fatalf("live value: %q %v %v", x, ok, err)
			}
			must(0, s.Close())
			if err := s.RecordProcessed(); !errors.Is(err, ErrClosed) {
				t.Fatalf("RecordProcessed after Close: %v", err)
			}
		})
	}
}

// TestTTLSweepCompactedBeforeRegistration: files an LSM compaction wrote after Open but before
// the states with a TTL were registered (their summaries noted under no table) are treated as
// files found at Open once the states register, so their expired data is swept too.
func TestTTLSweepCompactedBeforeRegistration(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	s := must(Open(dir, opts))
	defer func() { s.Close() }()
	ss := newSweepStates(t, s)
	const n = 200
	ss.write(t, s, "k", 0, n)
	must(0, s.Close())
	s = must(Open(dir, opts))
	must(0, s.e.CompactLSM()) // no state registered: no table to note the data with
	ss = newSweepStates(t, s)
	now.Store(400) // expired at 100; the bound counted from the registration (0) has passed
	for range 3 {
		must(0, s.WaitBackground())
		now.Add(40)
	}
	if ttl, kept := ss.counts(t, s); ttl != 0 || kept != 2*n {
		t.Fatalf("%d TTL entries, %d kept; want 0, %d", ttl, kept, 2*n)
	}
}
