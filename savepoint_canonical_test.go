package strata

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// TestSavepointCanonical: a canonical savepoint holds exactly the state at its call (writes
// after it are not in it), lists one canonical object, restores into 1, 2 and 3 Stores
// (rescaling) in both restore modes and back from 2 into 1 (its Stores' canonical
// savepoints), reads the same as a native savepoint of the same state restored, and a restored
// Store checkpoints on.
func TestSavepointCanonical(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	sp := spStorage(t, e)
	r := e.open(nil)
	r.writes(raceScale(8000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(2000)) // in memory at the savepoint
	hc, err := r.st.s.Savepoint(ctx, sp, SavepointCanonical, 2, []byte("pos-2"))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Owner != SavepointOwner(r.st.s.owner()) || hc.ID != 2 || string(hc.InputPosition) != "pos-2" {
		t.Fatalf("savepoint handle %+v", hc)
	}
	hn, err := r.st.s.Savepoint(ctx, sp, SavepointNative, 3, []byte("pos-2"))
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.writes(raceScale(2000)) // not in either savepoint
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, hc.Owner, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Objects) != 1 || man.Objects[0].Kind != checkpoint.KindCanonical {
		t.Fatalf("canonical savepoint manifest lists %+v", man.Objects)
	}
	for _, mode := range []RestoreMode{NoClaim, Claim} {
		for _, par := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("mode=%v/parallelism=%d", mode, par), func(t *testing.T) {
				e.t = t
				for i := range par {
					kg := ComputeKeyGroupRangeForOperatorIndex(maxP, par, i)
					p, err := e.restoreFrom(sp, &kg, mode, hc)
					if err != nil {
						t.Fatal(err)
					}
					if err := p.st.checkOwned(m); err != nil {
						p.st.s.Close()
						t.Fatalf("part %d of %d (%v): %v", i, par, kg, err)
					}
					if par == 2 && mode == NoClaim && p.st.s.RestoreStats().CanonicalEntries == 0 {
						t.Errorf("part %d: no canonical entries restored", i)
					}
					if err := p.st.s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	e.t = t
	// Canonical and native restored read the same; 2 → 1 through canonical savepoints of
	// the two halves.
	pn, err := e.restoreFrom(sp, nil, NoClaim, hn)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := e.restoreFrom(sp, nil, NoClaim, hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := pn.st.checkOwned(m); err != nil {
		t.Fatalf("native: %v", err)
	}
	if err := pc.st.checkOwned(m); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	if err := pc.st.checkSameAs(pn.st); err != nil {
		t.Fatalf("canonical vs native: %v", err)
	}
	pn.st.s.Close()
	defer pc.st.s.Close()
	var halves []CheckpointHandle
	for i := range 2 {
		kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 2, i)
		o := e.opts
		o.KeyGroups, o.Checkpoint.Owner = &kg, fmt.Sprintf("half-%d", i)
		o.SubtaskIndex, o.Parallelism = i, 2
		o.Checkpoint.Storage = nil
		s, err := Restore(e.newDir(), o, sp, hc)
		if err != nil {
			t.Fatal(err)
		}
		p := e.run(s)
		h, err := p.st.s.Savepoint(ctx, sp, SavepointCanonical, 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		halves = append(halves, h)
		p.st.s.Close()
	}
	one, err := e.restoreFrom(sp, nil, NoClaim, halves...)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.st.checkOwned(m); err != nil {
		t.Fatalf("2 → 1: %v", err)
	}
	one.st.s.Close()
	// The restored Store goes on: a checkpoint of its own.
	if _, err := pc.st.s.Checkpoint(ctx, 10, nil); err != nil {
		t.Fatal(err)
	}
}

// checkSameAs compares every slot's state of st with o's (both hold every key group).
func (st *modelStates) checkSameAs(o *modelStates) error {
	for slot := range st.u.slots() {
		a, okA, errA := st.val.Get(st.key(slot))
		b, okB, errB := o.val.Get(o.key(slot))
		if errA != nil || errB != nil || okA != okB || string(a) != string(b) {
			return fmt.Errorf("slot %d: value %q %v %v vs %q %v %v", slot, a, okA, errA, b, okB, errB)
		}
		na, _ := st.mp.IsEmpty(st.key(slot))
		nb, _ := o.mp.IsEmpty(o.key(slot))
		if na != nb {
			return fmt.Errorf("slot %d: map empty %v vs %v", slot, na, nb)
		}
	}
	return nil
}

// TestSavepointCanonicalDamaged: a canonical savepoint object with a flipped byte or cut
// short fails its restore with ErrCorruption naming the object; another format version is
// ErrFormatVersion; the restore leaves no Store.
func TestSavepointCanonicalDamaged(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 32)
	r := e.open(nil)
	r.writes(raceScale(2000))
	sp := spStorage(t, e)
	h, err := r.st.s.Savepoint(ctx, sp, SavepointCanonical, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, h.Owner, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	obj := man.Objects[0]
	good, err := sp.Get(ctx, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		bytes func() []byte
		cause error
	}{
		{"flipped", func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 1; return b }, ErrChecksum},
		{"truncated", func() []byte { return good[:len(good)-10] }, ErrTruncated},
		{"version", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint16(b[8:], 9)
			return b
		}, ErrFormatVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			if err := sp.Delete(ctx, obj.Name); err != nil {
				t.Fatal(err)
			}
			if err := sp.Put(ctx, obj.Name, tc.bytes()); err != nil {
				t.Fatal(err)
			}
			_, err := e.restoreFrom(sp, nil, NoClaim, h)
			var ce *base.CorruptionError
			if !errors.Is(err, ErrCorruption) || !errors.Is(err, tc.cause) || !errors.As(err, &ce) || ce.File != obj.Name {
				t.Fatalf("restore of a damaged savepoint: %v, want ErrCorruption (%v) naming %s", err, tc.cause, obj.Name)
			}
		})
	}
}

// TestSavepointCanonicalTTLTimersOps: TTL states keep their timestamps (an expired value no
// cleanup removed is in the savepoint and expires in the restored Store at the same time),
// timers of both domains and operator list, union list and broadcast state travel with a
// canonical savepoint, and the savepoint's entries carry the timestamps.
func TestSavepointCanonicalTTLTimersOps(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1000)
	dir := t.TempDir()
	sp, err := checkpoint.NewDirStorage(filepath.Join(dir, "sp"))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 4 << 20, Clock: now.Load}
	type states struct {
		v  *ValueState[int64]
		l  *ListState[int64]
		m  *MapState[string, int64]
		tm *TimerService[string]
		ol *OperatorListState[int64]
		ou *OperatorListState[int64]
		bc *BroadcastState[string, int64]
	}
	reg := func(s *Store) states {
		cfg := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoSweep: true}}
		return states{
			v:  must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: cfg})),
			l:  must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64, TTL: cfg})),
			m:  must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64, TTL: cfg})),
			tm: must(NewTimerService(s, TimerServiceDescriptor[string]{Name: "tm", NamespaceCodec: String})),
			ol: must(NewOperatorListState(s, OperatorListDescriptor[int64]{Name: "ol", Codec: Int64})),
			ou: must(NewUnionListState(s, OperatorListDescriptor[int64]{Name: "ou", Codec: Int64})),
			bc: must(NewBroadcastState(s, BroadcastDescriptor[string, int64]{Name: "bc", KeyCodec: String, ValueCodec: Int64})),
		}
	}
	s, err := Open(filepath.Join(dir, "a"), opts)
	if err != nil {
		t.Fatal(err)
	}
	a := reg(s)
	old, fresh := s.Key([]byte("old")), s.Key([]byte("fresh"))
	must0(t, a.v.Put(old, 1))
	now.Store(1050)
	must0(t, a.v.Put(fresh, 2))
	must0(t, a.l.Add(fresh, 3))
	must0(t, a.m.Put(fresh, "uk", 4))
	must0(t, a.tm.RegisterEventTimeTimer(fresh, "w", 77))
	must0(t, a.tm.RegisterProcessingTimeTimer(old, "", 88))
	must0(t, a.ol.AddAll([]int64{5, 6}))
	must0(t, a.ou.Add(7))
	must0(t, a.bc.Put("b", 8))
	now.Store(1120) // "old" expired (not cleaned up: no sweep, not read)
	h, err := s.Savepoint(ctx, sp, SavepointCanonical, 1, []byte("pos"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, h.Owner, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.ReadCanonical(ctx, sp, man.Objects[0].Name, man.Objects[0].Size)
	if err != nil {
		t.Fatal(err)
	}
	ttls := map[string]int64{}
	err = r.Scan(r.Meta().KeyGroups, func(e *checkpoint.CanonicalEntry) error {
		name := r.Meta().States[e.State].Name + "/" + string(e.Key)
		ttls[name] = e.TTL
		if len(e.ElementTTLs) > 0 {
			ttls[name] = e.ElementTTLs[0]
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"v/old": 1000, "v/fresh": 1050, "l/fresh": 1050, "m/fresh": 1050}; !reflect.DeepEqual(ttls, want) {
		t.Fatalf("entries' TTL timestamps %v, want %v", ttls, want)
	}
	if n, m, err := r.Verify(); err != nil || n != 4 || m != 2 {
		t.Fatalf("Verify: %d entries, %d timers, %v", n, m, err)
	}
	s2, err := Restore(filepath.Join(dir, "b"), opts, sp, h)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	b := reg(s2)
	old, fresh = s2.Key([]byte("old")), s2.Key([]byte("fresh"))
	if _, ok, err := b.v.Get(old); ok || err != nil {
		t.Errorf("expired value restored readable: %v, %v", ok, err)
	}
	if x, ok, err := b.v.Get(fresh); !ok || x != 2 || err != nil {
		t.Errorf("value: %d, %v, %v", x, ok, err)
	}
	now.Store(1160) // fresh expires at 1150 in the restored Store too: the timestamp was kept
	if _, ok, err := b.m.Get(fresh, "uk"); ok || err != nil {
		t.Errorf("map entry past its TTL after restore: %v, %v", ok, err)
	}
	if b.tm.NumEventTimeTimers() != 1 || b.tm.NumProcessingTimeTimers() != 1 {
		t.Errorf("timers: %d event, %d processing", b.tm.NumEventTimeTimers(), b.tm.NumProcessingTimeTimers())
	}
	if xs, err := b.ol.Get(); err != nil || !reflect.DeepEqual(xs, []int64{5, 6}) {
		t.Errorf("operator list %v, %v", xs, err)
	}
	if xs, err := b.ou.Get(); err != nil || !reflect.DeepEqual(xs, []int64{7}) {
		t.Errorf("union list %v, %v", xs, err)
	}
	if x, ok, err := b.bc.Get("b"); !ok || x != 8 || err != nil {
		t.Errorf("broadcast %d, %v, %v", x, ok, err)
	}
	if string(h.InputPosition) != "pos" {
		t.Errorf("input position %q", h.InputPosition)
	}
}

func must0(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSavepoint measures writing a savepoint of keys value entries of 64 bytes and
// restoring it into one Store, native against canonical (go test -bench Savepoint
// -benchtime 3x): the canonical restore writes every entry through the write path, the
// native one imports files.
func BenchmarkSavepoint(b *testing.B) {
	const keys = 100_000
	ctx := context.Background()
	dir := b.TempDir()
	ck, err := checkpoint.NewDirStorage(filepath.Join(dir, "ck"))
	if err != nil {
		b.Fatal(err)
	}
	sp, err := checkpoint.NewDirStorage(filepath.Join(dir, "sp"))
	if err != nil {
		b.Fatal(err)
	}
	// The default grace: with NoGrace the GC after each native savepoint's abort races the
	// next one's upload in DirStorage (a directory emptied and removed under its MkdirAll).
	opts := Options{MaxParallelism: 128, MemoryBudget: 256 << 20, SegmentSize: 16 << 20,
		Checkpoint: CheckpointOptions{Storage: ck}}
	s, err := Open(filepath.Join(dir, "src"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	val := make([]byte, 64)
	for i := range keys {
		if err := v.Put(s.Key(fmt.Appendf(nil, "key-%08d", i)), val); err != nil {
			b.Fatal(err)
		}
	}
	id := uint64(0)
	for _, kind := range []SavepointKind{SavepointNative, SavepointCanonical} {
		var h CheckpointHandle
		b.Run(fmt.Sprintf("kind=%v/op=write/keys=100k", kind), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				id++
				if h, err = s.Savepoint(ctx, sp, kind, id, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/entry")
		})
		b.Run(fmt.Sprintf("kind=%v/op=restore/keys=100k", kind), func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				o := opts
				o.Checkpoint.Storage = nil
				r, err := Restore(filepath.Join(dir, fmt.Sprintf("r-%v-%d-%d", kind, id, n)), o, sp, h)
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/entry")
		})
	}
}
