package changelog

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/strata-db/strata/memory"
)

// TestOwnerBatch: with an owner batch (Log.OwnerBatch) Persist, LastSeq and Stats see no
// record before the owner's Publish; a Publish before the previous one was persisted, and one
// after a failed persist, join into one segment that replays every record in order; the
// charge is whole while buffered and refunded by Persist; Close drops an unpublished batch
// and refunds it.
func TestOwnerBatch(t *testing.T) {
	fs := &failingStorage{Storage: newStorage(t)}
	budget := memory.NewBudget(1 << 20)
	w, _ := NewWriter(WriterOptions{Storage: fs, Prefix: "tm-1", Budget: budget})
	kg := KeyGroupRange{Start: 0, End: 9}
	l, _ := w.Log("s", kg)
	l.OwnerBatch()
	rng := rand.New(rand.NewPCG(3, 4))
	var model []modelRec
	seq := uint64(0)
	add := func(n int) {
		for range n {
			seq += uint64(1 + rng.IntN(300)) // multi-byte deltas at the joins too
			r := randRec(rng, kg, seq)
			if err := appendModel(l, r); err != nil {
				t.Fatal(err)
			}
			model = append(model, r)
		}
	}
	add(40)
	if res, err := w.Persist(context.Background()); err != nil || res.Size != 0 {
		t.Fatalf("persist before Publish stored %+v, %v", res, err)
	}
	if l.LastSeq() != 0 || l.Stats().AppendedRecords != 0 {
		t.Fatalf("before Publish: LastSeq %d, stats %+v", l.LastSeq(), l.Stats())
	}
	if budget.Used() == 0 || w.Buffered() != budget.Used() {
		t.Fatalf("unpublished records not charged: budget %d, buffered %d", budget.Used(), w.Buffered())
	}
	l.Publish()
	add(30)
	l.Publish() // joins the first publish: no persist between
	fs.fail.Store(true)
	if _, err := w.Persist(context.Background()); !errors.Is(err, errInjected) {
		t.Fatalf("persist over a failing Put: %v", err)
	}
	add(25)
	l.Publish() // joins the failed persist's pending records
	add(5)      // stays in the owner batch
	fs.fail.Store(false)
	if _, err := w.Persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	published := model[:95]
	if l.LastSeq() != published[94].seq || l.PersistedUpTo() != l.LastSeq() {
		t.Fatalf("LastSeq %d, PersistedUpTo %d, want %d", l.LastSeq(), l.PersistedUpTo(), published[94].seq)
	}
	if st := l.Stats(); st.AppendedRecords != 95 || st.PersistedRecords != 95 {
		t.Fatalf("stats %+v, want 95 appended and persisted", st)
	}
	hs, err := l.Handles(seq)
	if err != nil || len(hs) != 1 {
		t.Fatalf("handles %v, %v", hs, err)
	}
	if got := replayAll(t, fs, hs, kg); !slices.Equal(got, published) {
		t.Fatalf("replayed %d records, published %d", len(got), len(published))
	}
	if budget.Used() == 0 {
		t.Fatal("the owner batch's 5 records are not charged")
	}
	l.Close()
	if budget.Used() != 0 || w.Buffered() != 0 {
		t.Fatalf("after Close: budget %d, buffered %d", budget.Used(), w.Buffered())
	}
	if err := appendModel(l, randRec(rng, kg, seq+1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

// TestOwnerBatchAllocs: with an owner batch Append allocates nothing, nor does a Publish
// whose previous batch was persisted (the engine publishes once per persist).
func TestOwnerBatchAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race include the detector's own; the test command runs this test without -race")
	}
	w, _ := NewWriter(WriterOptions{Storage: discardStorage{}, Prefix: "tm-1", Budget: memory.NewBudget(1 << 30)})
	defer w.Close()
	l, _ := w.Log("s", KeyGroupRange{Start: 0, End: 127})
	l.OwnerBatch()
	key, uk, val := kgKey(3, "some-key"), []byte("uk"), make([]byte, 64)
	seq := uint64(0)
	var mallocs uint64
	round := func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 2000 {
			seq++
			if err := l.Append(6, 3, seq, key, uk, val); err != nil {
				t.Fatal(err)
			}
		}
		l.Publish()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		if _, err := w.Persist(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	round() // warm up: the Writer's idle chunks, its object buffer
	mallocs = 0
	for range 5 {
		round()
	}
	if mallocs != 0 {
		t.Fatalf("5 × (2000 appends and a Publish) allocated %d times", mallocs)
	}
}
