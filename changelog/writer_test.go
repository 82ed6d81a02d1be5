package changelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// modelRec is the plain-Go model of a record.
type modelRec struct {
	kind    uint8
	kg      uint16
	seq     uint64
	k, u, v string
}

func fromRecord(r *Record) modelRec {
	return modelRec{r.Kind, r.KeyGroup, r.Seq, string(r.Key), string(r.UserKey), string(r.Value)}
}

func newStorage(t *testing.T) checkpoint.Storage {
	t.Helper()
	s, err := checkpointfs.NewDirStorage(vfs.NewMem(), "/ck")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randRec returns a random record of a key group in kg with sequence number seq.
func randRec(rng *rand.Rand, kg KeyGroupRange, seq uint64) modelRec {
	g := uint16(kg.Start + rng.IntN(kg.End-kg.Start+1))
	kind := uint8(1 + rng.IntN(8))
	r := modelRec{kind: kind, kg: g, seq: seq, k: string(kgKey(g, fmt.Sprint("k", rng.IntN(50))))}
	if kind == 6 || kind == 7 {
		r.u = fmt.Sprint("u", rng.IntN(10))
	}
	if kind == 1 || kind == 3 || kind == 4 || kind == 6 {
		r.v = string(bytes.Repeat([]byte{byte(seq)}, rng.IntN(200)))
	}
	return r
}

func appendModel(l *Log, r modelRec) error {
	return l.Append(r.kind, r.kg, r.seq, []byte(r.k), []byte(r.u), []byte(r.v))
}

// replayAll replays handles over kg and returns the records.
func replayAll(t *testing.T, s checkpoint.Storage, hs []checkpoint.Object, kg KeyGroupRange) []modelRec {
	t.Helper()
	var got []modelRec
	err := Replay(context.Background(), s, hs, kg, func(r *Record) error {
		if !contains(kg, r.KeyGroup) {
			t.Fatalf("replay of %s yielded key group %d", kg, r.KeyGroup)
		}
		got = append(got, fromRecord(r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func filterKG(rs []modelRec, kg KeyGroupRange) []modelRec {
	var out []modelRec
	for _, r := range rs {
		if contains(kg, r.kg) {
			out = append(out, r)
		}
	}
	return out
}

// TestWriterConcurrent: several Stores share a Writer, each appending on its own goroutine
// while another goroutine persists; then each Store's handles replay to exactly what it
// appended, over its whole range and over sub-ranges (rescaling). owner=true: each Log has
// an owner batch (Log.OwnerBatch), published every 1 to 100 records, on a refusal and at the
// end, as the engine does.
func TestWriterConcurrent(t *testing.T) {
	for _, owner := range []bool{false, true} {
		t.Run(fmt.Sprintf("owner=%v", owner), func(t *testing.T) { testWriterConcurrent(t, owner) })
	}
}

func testWriterConcurrent(t *testing.T, owner bool) {
	st := &countingStorage{Storage: newStorage(t)}
	budget := memory.NewBudget(64 << 20)
	w, err := NewWriter(WriterOptions{Storage: st, Prefix: "tm-1", Budget: budget, PreemptiveThreshold: chargeGranule, PersistDelay: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	ranges := []KeyGroupRange{{Start: 0, End: 31}, {Start: 32, End: 63}, {Start: 64, End: 64}, {Start: 65, End: 127}}
	logs := make([]*Log, len(ranges))
	models := make([][]modelRec, len(ranges))
	for i, kg := range ranges {
		if logs[i], err = w.Log(fmt.Sprintf("store-%d", i), kg); err != nil {
			t.Fatal(err)
		}
		if owner {
			logs[i].OwnerBatch()
		}
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	var persists atomic.Int64
	wg.Add(1)
	go func() { // the scheduler's persist job
		defer wg.Done()
		for !done.Load() {
			if w.PersistDue(time.Now()) {
				if _, err := w.Persist(context.Background()); err != nil {
					t.Error(err)
					return
				}
				persists.Add(1)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var stores sync.WaitGroup
	for i, l := range logs {
		stores.Add(1)
		go func() {
			defer stores.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			seq := uint64(0)
			publishIn := 1 + rng.IntN(100)
			defer l.Publish()
			for range 3000 {
				seq += 1 + uint64(rng.IntN(3))
				r := randRec(rng, ranges[i], seq)
				for {
					err := appendModel(l, r)
					if err == nil {
						break
					}
					if !errors.Is(err, memory.ErrMemoryBudget) {
						t.Error(err)
						return
					}
					l.Publish()                       // the owner batch holds the charge
					time.Sleep(10 * time.Microsecond) // backpressure
				}
				models[i] = append(models[i], r)
				if publishIn--; publishIn == 0 {
					l.Publish()
					publishIn = 1 + rng.IntN(100)
				}
				if seq%64 == 0 {
					time.Sleep(time.Microsecond) // let the persister interleave
				}
			}
		}()
	}
	stores.Wait()
	done.Store(true)
	wg.Wait()
	for i, l := range logs {
		hs, err := l.Checkpoint(context.Background(), l.LastSeq())
		if err != nil {
			t.Fatal(err)
		}
		if l.PersistedUpTo() != l.LastSeq() {
			t.Fatalf("store %d persisted up to %d, last %d", i, l.PersistedUpTo(), l.LastSeq())
		}
		for _, h := range hs {
			if h.Kind != checkpoint.KindChangelog || !h.Packed || !ranges[i].Contains(h.KeyGroups.Start) || !ranges[i].Contains(h.KeyGroups.End) {
				t.Fatalf("handle %+v", h)
			}
		}
		st.gets.Store(0)
		if got := replayAll(t, st, hs, ranges[i]); !slices.Equal(got, models[i]) {
			t.Fatalf("store %d: replayed %d records, appended %d", i, len(got), len(models[i]))
		}
		objs := map[string]bool{}
		for _, h := range hs {
			objs[h.Name] = true
		}
		if g := st.gets.Load(); g > int64(2*len(objs)) {
			t.Fatalf("store %d: %d ranged reads for %d objects (want a footer and one span each)", i, g, len(objs))
		}
		mid := ranges[i].Start + (ranges[i].End-ranges[i].Start)/2
		for _, sub := range []KeyGroupRange{{Start: ranges[i].Start, End: mid}, {Start: mid, End: ranges[i].End}, {Start: 200, End: 300}} {
			if got := replayAll(t, st, hs, sub); !slices.Equal(got, filterKG(models[i], sub)) {
				t.Fatalf("store %d sub-range %s: replayed %d records, want %d", i, sub, len(got), len(filterKG(models[i], sub)))
			}
		}
	}
	if persists.Load() < 2 {
		t.Fatalf("only %d background persists: the test did not run them concurrently with Appends", persists.Load())
	}
	if budget.Used() != 0 || w.Buffered() != 0 {
		t.Fatalf("after the last persist: budget %d, buffered %d", budget.Used(), w.Buffered())
	}
	// One object per persist, shared by the Stores.
	list, _ := st.List(context.Background(), "tm-1/changelog/")
	if int64(len(list)) > persists.Load()+int64(len(logs)) {
		t.Fatalf("%d objects for %d persists", len(list), persists.Load())
	}
}

// countingStorage counts GetRange calls.
type countingStorage struct {
	checkpoint.Storage
	gets atomic.Int64
}

func (c *countingStorage) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	c.gets.Add(1)
	return c.Storage.GetRange(ctx, name, off, n)
}

// failingStorage fails Put while fail is set.
type failingStorage struct {
	checkpoint.Storage
	fail atomic.Bool
}

var errInjected = errors.New("injected put failure")

func (f *failingStorage) Put(ctx context.Context, name string, data []byte) error {
	if f.fail.Load() {
		return errInjected
	}
	return f.Storage.Put(ctx, name, data)
}

// TestPersistFailureKeepsRecords: a failed Put loses nothing; the next Persist stores the
// failed attempt's records and the newer ones, in order, in one segment per Store.
func TestPersistFailureKeepsRecords(t *testing.T) {
	fs := &failingStorage{Storage: newStorage(t)}
	budget := memory.NewBudget(1 << 20)
	w, _ := NewWriter(WriterOptions{Storage: fs, Prefix: "tm-1", Budget: budget})
	kg := KeyGroupRange{Start: 0, End: 9}
	l, _ := w.Log("s", kg)
	l2, _ := w.Log("t", kg)
	rng := rand.New(rand.NewPCG(1, 2))
	var model []modelRec
	for seq := uint64(1); seq <= 50; seq++ {
		r := randRec(rng, kg, seq)
		if err := appendModel(l, r); err != nil {
			t.Fatal(err)
		}
		model = append(model, r)
	}
	appendModel(l2, randRec(rng, kg, 1))
	fs.fail.Store(true)
	if _, err := w.Persist(context.Background()); !errors.Is(err, errInjected) {
		t.Fatalf("persist over a failing Put: %v", err)
	}
	if l.PersistedUpTo() != 0 || budget.Used() == 0 {
		t.Fatalf("a failed persist moved PersistedUpTo to %d / refunded the budget (%d)", l.PersistedUpTo(), budget.Used())
	}
	if _, err := l.Handles(50); !errors.Is(err, ErrNotPersisted) {
		t.Fatalf("Handles after a failed persist: %v", err)
	}
	for seq := uint64(51); seq <= 80; seq++ {
		r := randRec(rng, kg, seq)
		appendModel(l, r)
		model = append(model, r)
	}
	if _, err := w.Persist(context.Background()); err == nil {
		t.Fatal("second failing persist succeeded")
	}
	fs.fail.Store(false)
	res, err := w.Persist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) != 2 || res.Segments[0].Store != "s" {
		t.Fatalf("result %+v", res)
	}
	hs, err := l.Handles(80)
	if err != nil || len(hs) != 1 {
		t.Fatalf("handles %v, %v", hs, err)
	}
	if got := replayAll(t, fs, hs, kg); !slices.Equal(got, model) {
		t.Fatalf("replayed %d records, appended %d", len(got), len(model))
	}
	if budget.Used() != 0 {
		t.Fatalf("budget %d after a successful persist", budget.Used())
	}
	list, _ := fs.List(context.Background(), "")
	if len(list) != 1 {
		t.Fatalf("%d objects stored, want 1", len(list))
	}
}

// TestBudgetAccounting: buffered bytes are charged while buffered (at least the bytes
// appended, at most a granule more per Log), refused past the budget with an error matching
// memory.ErrMemoryBudget, and refunded by Persist.
func TestBudgetAccounting(t *testing.T) {
	budget := memory.NewBudget(4 * chargeGranule)
	w, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-1", Budget: budget})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 0})
	val := bytes.Repeat([]byte("x"), 1000)
	var appended int64
	var refused error
	for seq := uint64(1); seq < 1000; seq++ {
		if err := l.Append(1, 0, seq, kgKey(0, "k"), nil, val); err != nil {
			refused = err
			break
		}
		appended += int64(recordLen(1, 1, kgKey(0, "k"), nil, val))
		if u := budget.UsedBy(memory.PurposeChangelog); u < appended || u > appended+segHeaderLen+chargeGranule {
			t.Fatalf("charged %d for %d bytes buffered", u, appended)
		}
	}
	if !errors.Is(refused, memory.ErrMemoryBudget) {
		t.Fatalf("append past the budget: %v", refused)
	}
	if !w.PersistDue(time.Now()) && w.Buffered() < w.opts.PreemptiveThreshold {
		// Under the size threshold: due once PersistDelay has passed.
		if !w.PersistDue(time.Now().Add(time.Second)) {
			t.Fatal("PersistDue false after the persist delay")
		}
	}
	if _, err := w.Persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if budget.Used() != 0 || w.Buffered() != 0 || w.PersistDue(time.Now().Add(time.Hour)) {
		t.Fatalf("after persist: budget %d, buffered %d, due %v", budget.Used(), w.Buffered(), w.PersistDue(time.Now().Add(time.Hour)))
	}
	if err := l.Append(1, 0, 2000, kgKey(0, "k"), nil, val); err != nil {
		t.Fatalf("append after persist: %v", err)
	}
	l.Close()
	if budget.Used() != 0 {
		t.Fatalf("Close left %d bytes charged", budget.Used())
	}
	if err := l.Append(1, 0, 2001, kgKey(0, "k"), nil, val); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}
}

// TestThreshold: past Threshold bytes, Append refuses (backpressure) until a persist.
func TestThreshold(t *testing.T) {
	w, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-1", Threshold: 2 * chargeGranule})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 0})
	val := make([]byte, 1000)
	seq := uint64(0)
	var err error
	for err == nil && seq < 1000 {
		seq++
		err = l.Append(1, 0, seq, kgKey(0, "k"), nil, val)
	}
	if !errors.Is(err, memory.ErrMemoryBudget) || !w.PersistDue(time.Now()) {
		t.Fatalf("append past the threshold: %v (seq %d), due %v", err, seq, w.PersistDue(time.Now()))
	}
	if _, err := w.Persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(1, 0, seq, kgKey(0, "k"), nil, val); err != nil {
		t.Fatalf("the refused record after a persist: %v", err)
	}
}

// TestThresholdBounds: WriterOptions.Validate refuses a negative Threshold and one above
// MaxThreshold (an object must stay below the 4 GiB a restore's record index addresses), and
// takes MaxThreshold itself.
func TestThresholdBounds(t *testing.T) {
	for _, c := range []struct {
		threshold int64
		ok        bool
	}{{-1, false}, {0, true}, {MaxThreshold, true}, {MaxThreshold + 1, false}, {8 << 30, false}} {
		o := WriterOptions{Storage: newStorage(t), Prefix: "tb-1", Threshold: c.threshold}
		if err := o.Validate(); (err == nil) != c.ok {
			t.Errorf("Threshold %d: %v, want ok %v", c.threshold, err, c.ok)
		}
	}
}

// TestReserve: after Reserve succeeded, the next Append of that record is not refused for
// memory — even when a Persist took the buffer in between and failed (its records and their
// charge stay pending) — and Reserve, not Append, is refused once Threshold bytes are held
// (a Store refuses the write before applying it). Unreserve and Close return reserved room:
// with everything persisted nothing stays charged.
func TestReserve(t *testing.T) {
	fs := &failingStorage{Storage: newStorage(t)}
	budget := memory.NewBudget(1 << 20)
	w, _ := NewWriter(WriterOptions{Storage: fs, Prefix: "tm-1", Budget: budget, Threshold: 2 * chargeGranule})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 0})
	key, val := kgKey(0, "k"), make([]byte, 1000)
	ctx := context.Background()
	fs.fail.Store(true)
	var refused error
	seq := uint64(0)
	for refused == nil && seq < 1000 {
		seq++
		if refused = l.Reserve(key, nil, val); refused != nil {
			break
		}
		if seq%7 == 0 {
			if _, err := w.Persist(ctx); !errors.Is(err, errInjected) {
				t.Fatalf("persist over a failing Put: %v", err)
			}
		}
		if err := l.Append(1, 0, seq, key, nil, val); err != nil {
			t.Fatalf("append %d after a successful Reserve: %v", seq, err)
		}
	}
	if !errors.Is(refused, memory.ErrMemoryBudget) {
		t.Fatalf("reserve past the threshold: %v (seq %d)", refused, seq)
	}
	fs.fail.Store(false)
	if _, err := w.Persist(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(key, nil, val); err != nil {
		t.Fatalf("reserve after a persist: %v", err)
	}
	if w.Buffered() == 0 || budget.Used() == 0 {
		t.Fatalf("reserved room not charged: buffered %d, budget %d", w.Buffered(), budget.Used())
	}
	l.Unreserve()
	if w.Buffered() != 0 || budget.Used() != 0 {
		t.Fatalf("after Unreserve: buffered %d, budget %d", w.Buffered(), budget.Used())
	}
	if err := l.Reserve(key, nil, val); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if w.Buffered() != 0 || budget.Used() != 0 {
		t.Fatalf("after Close: buffered %d, budget %d", w.Buffered(), budget.Used())
	}
	if err := l.Reserve(key, nil, val); !errors.Is(err, ErrClosed) {
		t.Fatalf("reserve after Close: %v", err)
	}
}

// TestAppendRules: Append refuses records that break the format's rules.
func TestAppendRules(t *testing.T) {
	w, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-1"})
	l, _ := w.Log("s", KeyGroupRange{Start: 5, End: 9})
	if err := l.Append(1, 5, 10, kgKey(5, "k"), nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"kind 0", l.Append(0, 5, 11, kgKey(5, "k"), nil, nil)},
		{"kind 9", l.Append(9, 5, 11, kgKey(5, "k"), nil, nil)},
		{"wrong key group (FLINK-26063)", l.Append(1, 6, 11, kgKey(5, "k"), nil, nil)},
		{"out of range", l.Append(1, 10, 11, kgKey(10, "k"), nil, nil)},
		{"short key", l.Append(1, 5, 11, []byte{0}, nil, nil)},
		{"user key of a put", l.Append(1, 5, 11, kgKey(5, "k"), []byte("u"), []byte("v"))},
		{"value of a delete", l.Append(2, 5, 11, kgKey(5, "k"), nil, []byte("v"))},
		{"value of a map remove", l.Append(7, 5, 11, kgKey(5, "k"), []byte("u"), []byte("v"))},
		{"user key of a map clear", l.Append(8, 5, 11, kgKey(5, "k"), []byte("u"), nil)},
		{"seq going back", l.Append(1, 5, 9, kgKey(5, "k"), nil, nil)},
	} {
		if !errors.Is(tt.err, ErrInvalidRecord) {
			t.Errorf("%s: %v, want ErrInvalidRecord", tt.name, tt.err)
		}
	}
}

// TestTruncate: Truncate drops the handles of segments entirely below the bound; Handles(upTo)
// leaves out segments entirely above upTo.
func TestTruncate(t *testing.T) {
	w, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-1"})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 0})
	for seq := uint64(1); seq <= 30; seq++ {
		l.Append(1, 0, seq, kgKey(0, "k"), nil, nil)
		if seq%10 == 0 {
			if _, err := w.Persist(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hs, _ := l.Handles(15); len(hs) != 2 {
		t.Fatalf("Handles(15): %d segments, want 2", len(hs))
	}
	l.Truncate(11)
	hs, _ := l.Handles(30)
	if len(hs) != 2 || hs[0].MinOrder != 11 {
		t.Fatalf("after Truncate(11): %+v", hs)
	}
	l.Truncate(12) // segment 11..20 still holds 12..20
	if hs, _ := l.Handles(30); len(hs) != 2 {
		t.Fatalf("Truncate(12) dropped a segment holding seqs >= 12")
	}
	var got []uint64
	ReplayRange(context.Background(), w.opts.Storage, hs, KeyGroupRange{Start: 0, End: 0}, 15, 25, func(r *Record) error {
		got = append(got, r.Seq)
		return nil
	})
	if len(got) != 11 || got[0] != 15 || got[10] != 25 {
		t.Fatalf("ReplayRange(15, 25): %v", got)
	}
}

// TestAppendAllocs pins 0 allocations per Append in steady state (the buffer reused across
// persists).
func TestAppendAllocs(t *testing.T) {
	budget := memory.NewBudget(1 << 30)
	w, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-1", Budget: budget})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 127})
	key, uk, val := kgKey(3, "some-key"), []byte("uk"), make([]byte, 64)
	seq := uint64(0)
	for range 3 { // warm up: buffers grown, then swapped and reused
		for range 2000 {
			seq++
			l.Append(6, 3, seq, key, uk, val)
		}
		if _, err := w.Persist(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	n := testing.AllocsPerRun(1000, func() {
		seq++
		if err := l.Append(6, 3, seq, key, uk, val); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Append allocates %v times per call", n)
	}
	full := memory.NewBudget(1)
	w2, _ := NewWriter(WriterOptions{Storage: newStorage(t), Prefix: "tm-2", Budget: full})
	l2, _ := w2.Log("s", KeyGroupRange{Start: 0, End: 127})
	if n := testing.AllocsPerRun(100, func() { _ = l2.Append(6, 3, 1, key, uk, val) }); n != 0 {
		t.Fatalf("a refused Append allocates %v times", n)
	}
}

// BenchmarkAppend: Append alone (the persists every 4096 records run with the timer
// stopped), as the engine appends: through an owner batch, published every 64 records.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{16, 256} {
		b.Run(fmt.Sprintf("value=%dB", size), func(b *testing.B) {
			w, _ := NewWriter(WriterOptions{Storage: discardStorage{}, Prefix: "tm-1", Budget: memory.NewBudget(1 << 30)})
			l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 127})
			l.OwnerBatch()
			key, val := kgKey(3, "key-0000000001"), make([]byte, size)
			b.ReportAllocs()
			b.SetBytes(int64(recordLen(1, 1, key, nil, val)))
			seq := uint64(0)
			for range b.N {
				seq++
				if err := l.Append(1, 3, seq, key, nil, val); err != nil {
					b.Fatal(err)
				}
				if seq%64 == 0 {
					l.Publish()
				}
				if seq%4096 == 0 {
					b.StopTimer()
					if _, err := w.Persist(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// TestReplayBothVersions: a restore reads objects of format version 1 (written before
// version 2: checkpoints still hold them) and version 2 alike, in one Replay, records in seq
// order across them, with ReplayRange's bounds and key-group filter applied to both.
func TestReplayBothVersions(t *testing.T) {
	st := newStorage(t)
	var hs []checkpoint.Object
	var want []modelRec
	for i, v := range versions {
		obj := goldenObject(v)
		name := fmt.Sprintf("tm-1/changelog/%020d-%016x.log", i+1, i+1)
		if err := st.Put(context.Background(), name, obj); err != nil {
			t.Fatal(err)
		}
		segs, err := DecodeObject(name, obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range segs {
			hs = append(hs, checkpoint.Object{Name: name, Kind: checkpoint.KindChangelog, Size: int64(len(obj)), CRC: s.CRC,
				KeyGroups: s.KeyGroups, MinOrder: s.MinSeq, MaxOrder: s.MaxSeq, Packed: true, Offset: s.Offset, Length: s.Length})
		}
		for _, s := range goldenStores(v) {
			for _, r := range s.recs {
				want = append(want, modelRec{r.kind, r.kg, r.seq, string(kgKey(r.kg, r.k)), r.u, r.v})
			}
		}
	}
	slices.SortStableFunc(want, func(a, b modelRec) int { return cmpInt64(int64(a.seq), int64(b.seq)) })
	all := KeyGroupRange{Start: 0, End: 65535}
	if got := replayAll(t, st, hs, all); !slices.Equal(got, want) {
		t.Fatalf("replayed %v\nwant %v", got, want)
	}
	part := KeyGroupRange{Start: 3, End: 200}
	var got []modelRec
	if err := ReplayRange(context.Background(), st, hs, part, 2, 100, func(r *Record) error {
		got = append(got, fromRecord(r))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wantPart []modelRec
	for _, r := range want {
		if contains(part, r.kg) && r.seq >= 2 && r.seq <= 100 {
			wantPart = append(wantPart, r)
		}
	}
	if len(wantPart) == 0 || !slices.Equal(got, wantPart) {
		t.Fatalf("ReplayRange replayed %v\nwant %v", got, wantPart)
	}
	// CollectParallel with the objects read at once, the last first: the same Batch — read
	// into Go slices, or into one off-heap buffer through a Storage that reads into it, or,
	// asked for OffHeap, into the Go slices of one that does not (no buffer, no copy).
	for _, c := range []struct {
		offHeap bool
		st      checkpoint.Storage
	}{{false, st}, {true, st}, {true, noReadInto{st}}} {
		if _, ok := c.st.(checkpoint.RangeReaderInto); ok != (c.st == st) {
			t.Fatalf("the test's storages: %T reads into: %v", c.st, ok)
		}
		for _, r := range []KeyGroupRange{all, part} {
			from, to := uint64(0), uint64(math.MaxUint64)
			if r == part {
				from, to = 2, 100
			}
			calls := 0
			b, err := CollectParallel(context.Background(), c.st, hs, r, from, to, CollectOptions{OffHeap: c.offHeap, Run: func(n int, f func(int) error) error {
				calls = n
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := n - 1; i >= 0; i-- {
					wg.Add(1)
					go func() { defer wg.Done(); errs[i] = f(i) }()
				}
				wg.Wait()
				return errors.Join(errs...)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if (b.scratch != nil) != (c.offHeap && c.st == st) {
				t.Fatalf("OffHeap %v, %T: the Batch's off-heap buffer is %d bytes", c.offHeap, c.st, len(b.scratch))
			}
			got := batchRecords(t, b)
			want := want
			if r == part {
				want = wantPart
			}
			if calls != len(versions) || !slices.Equal(got, want) {
				t.Fatalf("CollectParallel (%d objects read at once, off-heap %v, %T): %v\nwant %v", calls, c.offHeap, c.st, got, want)
			}
			if err := b.Release(); err != nil || b.Len() != 0 || b.Release() != nil {
				t.Fatalf("Release: %v, then %d records", err, b.Len())
			}
		}
	}
}

// batchRecords returns the records of b, in its order.
func batchRecords(t *testing.T, b *Batch) []modelRec {
	t.Helper()
	var got []modelRec
	var rec Record
	for i := range b.Len() {
		if err := b.Record(i, &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, fromRecord(&rec))
	}
	return got
}

// noReadInto hides a Storage's ReadRangeInto: CollectOptions.OffHeap's Go-slice path.
type noReadInto struct{ checkpoint.Storage }

// flightMix is a record mix like the flight demo's changelog (about 30 logical bytes a
// record): value and aggregate puts, list appends, map puts and removes, timer deletes, over
// 128 key groups, with sequence numbers mostly one apart (a write may take several).
type flightRec struct {
	kind    uint8
	kg      uint16
	seqStep uint64
	k, u, v []byte
}

func flightMix() []flightRec {
	rng := rand.New(rand.NewPCG(22, 2))
	out := make([]flightRec, 4096)
	for i := range out {
		g := uint16(rng.IntN(128))
		r := flightRec{kg: g, seqStep: 1}
		if rng.IntN(8) == 0 {
			r.seqStep = uint64(2 + rng.IntN(3))
		}
		switch x := rng.IntN(20); {
		case x < 8: // value / aggregating put: namespace + route key, a small accumulator
			r.kind, r.k, r.v = 1, kgKey(g, fmt.Sprintf("\x01\x02ns%08dKORD-KSFO", rng.IntN(1e6))), make([]byte, 12+rng.IntN(12))
		case x < 11: // list append: one framed element
			r.kind, r.k, r.v = 3, kgKey(g, fmt.Sprintf("\x03\x01N%05d", rng.IntN(1e5))), make([]byte, 10+rng.IntN(8))
		case x < 15: // map put
			r.kind, r.k, r.u, r.v = 6, kgKey(g, fmt.Sprintf("\x04\x01KORD%03d", rng.IntN(1000))), make([]byte, 8), make([]byte, 8+rng.IntN(8))
		case x < 17: // map remove
			r.kind, r.k, r.u = 7, kgKey(g, fmt.Sprintf("\x04\x01KORD%03d", rng.IntN(1000))), make([]byte, 8)
		default: // timer or window delete
			r.kind, r.k = 2, kgKey(g, fmt.Sprintf("\x05\x01%016x", rng.Uint64()))
		}
		out[i] = r
	}
	return out
}

// BenchmarkAppendMix: Append of the flight-like record mix (flightMix); B/record is the
// encoded bytes a record takes in the buffer (and in the segment), logical-B/record the key,
// user key and value bytes it carries.
func BenchmarkAppendMix(b *testing.B) {
	mix := flightMix()
	w, _ := NewWriter(WriterOptions{Storage: discardStorage{}, Prefix: "tm-1", Budget: memory.NewBudget(1 << 30)})
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 127})
	logical := 0
	for _, r := range mix {
		logical += len(r.k) + len(r.u) + len(r.v)
	}
	b.ReportAllocs()
	seq, i := uint64(0), 0
	for b.Loop() {
		r := &mix[i&(len(mix)-1)]
		i++
		seq += r.seqStep
		if err := l.Append(r.kind, r.kg, seq, r.k, r.u, r.v); err != nil {
			if _, err := w.Persist(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		if seq%4096 == 0 && w.PersistDue(time.Time{}) {
			w.Persist(context.Background())
		}
	}
	st := l.Stats()
	b.ReportMetric(float64(st.AppendedBytes)/float64(st.AppendedRecords), "B/record")
	b.ReportMetric(float64(logical)/float64(len(mix)), "logical-B/record")
}

// discardStorage accepts every Put and stores nothing.
type discardStorage struct{ checkpoint.Storage }

func (discardStorage) Put(context.Context, string, []byte) error { return nil }

// TestCoalesceMaxSpan: coalesce joins adjacent segments into one ranged read only while the
// range stays within maxSpan (a record's offset in its span is a uint32), and never splits a
// segment.
func TestCoalesceMaxSpan(t *testing.T) {
	const g = 1 << 30
	want := []*SegmentInfo{{Offset: 0, Length: g}, {Offset: g, Length: g}, {Offset: 2 * g, Length: g},
		{Offset: 3 * g, Length: g}, {Offset: 4 * g, Length: 10}}
	var got [][2]int
	coalesce(want, func(i, j int, start, end int64) {
		if end-start > maxSpan {
			t.Errorf("range [%d, %d) of segments %d..%d is longer than maxSpan", start, end, i, j)
		}
		got = append(got, [2]int{i, j})
	})
	if len(got) != 2 || got[0] != [2]int{0, 3} || got[1] != [2]int{3, 5} {
		t.Fatalf("reads %v, want segments 0..3 then 3..5", got)
	}
}
