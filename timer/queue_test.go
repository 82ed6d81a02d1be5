package timer

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/memory"
	"github.com/zeebo/xxh3"
)

// mt is a model timer.
type mt struct {
	kg      int
	key, ns string
	ts      int64
}

func (t mt) h() uint32 { return Hash(xxh3.HashString(t.key), xxh3.HashString(t.ns), t.ts) }

// modelCmp is the queue's documented order: (ts, key group, h, key, namespace).
func modelCmp(a, b mt) int {
	return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.kg, b.kg), cmp.Compare(a.h(), b.h()),
		cmp.Compare(a.key, b.key), cmp.Compare(a.ns, b.ns))
}

func add(t testing.TB, q *Queue, x mt) bool {
	t.Helper()
	ok, err := q.Add(x.kg, x.h(), int32(len(x.key)), []byte(x.key), []byte(x.ns), x.ts)
	if err != nil {
		t.Fatalf("Add(%v): %v", x, err)
	}
	return ok
}

func del(t testing.TB, q *Queue, x mt) bool {
	t.Helper()
	ok, err := q.Delete(x.kg, x.h(), []byte(x.key), []byte(x.ns), x.ts)
	if err != nil {
		t.Fatalf("Delete(%v): %v", x, err)
	}
	return ok
}

func pop(t testing.TB, q *Queue, limit int64) (mt, bool) {
	t.Helper()
	tm, _, ok, err := q.Pop(limit, nil)
	if err != nil {
		t.Fatalf("Pop(%d): %v", limit, err)
	}
	if ok && tm.KeyHash != int32(len(tm.Key)) {
		t.Fatalf("popped %q with key hash %d", tm.Key, tm.KeyHash)
	}
	return mt{tm.KeyGroup, string(tm.Key), string(tm.Namespace), tm.Timestamp}, ok
}

// checkQueue verifies the invariants of doc.go (2-5) over every group of q.
func checkQueue(t testing.TB, q *Queue) {
	t.Helper()
	live, mapped := 0, int64(0)
	nonEmpty := 0
	for _, g := range q.groups {
		if g == nil {
			continue
		}
		if g.r == nil {
			if g.live != 0 || g.n != 0 {
				t.Fatalf("key group %d: no region but %d live, %d entries", g.kg, g.live, g.n)
			}
			continue
		}
		mapped += int64(len(g.r.Bytes()))
		slots := 0
		for i, s := range g.set {
			if s.ref == 0 {
				continue
			}
			slots++
			_, _, _, _, dead := g.record(s.ref)
			if dead {
				t.Fatalf("key group %d: slot %d holds a dead record", g.kg, i)
			}
			// Reachable from its home without an empty slot.
			mask := len(g.set) - 1
			for j := int(s.h) & mask; j != i; j = (j + 1) & mask {
				if g.set[j].ref == 0 {
					t.Fatalf("key group %d: slot %d unreachable from its home %d", g.kg, i, int(s.h)&mask)
				}
			}
		}
		if slots != g.live || 4*g.live > 3*len(g.set) {
			t.Fatalf("key group %d: %d slots, %d live, set of %d", g.kg, slots, g.live, len(g.set))
		}
		liveEntries, ghosts, slotBytes, recBytes := 0, 0, 0, 0
		if g.n == 0 && g.f > 0 {
			t.Fatalf("key group %d: %d far entries and no near one", g.kg, g.f)
		}
		for i, e := range append(slices.Clone(g.near()), g.far()...) {
			if i < g.n && i > 0 && g.less(&e, &g.heap[(i-1)/arity]) {
				t.Fatalf("key group %d: heap order broken at %d", g.kg, i)
			}
			if (i < g.n) != (e.ts <= g.boundary) {
				t.Fatalf("key group %d: entry %d (near: %v) at %d, boundary %d", g.kg, i, i < g.n, e.ts, g.boundary)
			}
			_, _, kl, nl, dead := g.record(e.ref)
			_, ss := slotClass(recSize(kl, nl))
			slotBytes += ss
			if dead {
				ghosts++
			} else {
				recBytes += recSize(kl, nl)
				liveEntries++
				if g.set[g.findRef(e.h, e.ref)].ref != e.ref {
					t.Fatal("findRef")
				}
			}
		}
		if ghosts != g.ghosts || slotBytes != g.slotBytes || recBytes != g.recBytes {
			t.Fatalf("key group %d: %d ghosts, %d slot bytes, %d record bytes; the group counts %d, %d, %d",
				g.kg, ghosts, slotBytes, recBytes, g.ghosts, g.slotBytes, g.recBytes)
		}
		// The free lists hold slots of their class inside the high-water mark, none in use.
		free := 0
		for c, r := range g.free {
			for ; r != 0; r = binary.LittleEndian.Uint32(g.arena[r:]) {
				if int(r) < arenaBase || int(r) >= g.alen || free > len(g.arena) {
					t.Fatalf("key group %d: free slot %d of class %d outside [%d, %d)", g.kg, r, c, arenaBase, g.alen)
				}
				_, ss := slotClass(c*8 + 16)
				if c >= 31 {
					ss = 1 << (c - 31 + 9)
				}
				free += ss
			}
		}
		if free+slotBytes != g.alen-arenaBase {
			t.Fatalf("key group %d: %d free and %d used slot bytes in an arena of %d", g.kg, free, slotBytes, g.alen-arenaBase)
		}
		if liveEntries != g.live {
			t.Fatalf("key group %d: %d live heap entries, %d live", g.kg, liveEntries, g.live)
		}
		if g.n > 0 {
			if _, _, _, _, dead := g.record(g.heap[0].ref); dead {
				t.Fatalf("key group %d: a ghost at the top", g.kg)
			}
			nonEmpty++
			pos := q.pos[g.kg-q.kgStart]
			if pos < 0 || q.heads[pos].ts != g.heap[0].ts || int(q.heads[pos].kg) != g.kg-q.kgStart {
				t.Fatalf("key group %d: pos %d not in the group heap", g.kg, pos)
			}
		} else if q.pos[g.kg-q.kgStart] >= 0 {
			t.Fatalf("key group %d: empty but in the group heap", g.kg)
		}
		live += g.live
	}
	if live != q.live || nonEmpty != len(q.heads) {
		t.Fatalf("%d live (queue says %d), %d non-empty groups (heap %d)", live, q.live, nonEmpty, len(q.heads))
	}
	for i := 1; i < len(q.heads); i++ {
		if headLess(&q.heads[i], &q.heads[(i-1)/2]) {
			t.Fatalf("group heap order broken at %d", i)
		}
	}
	if mapped != q.mapped {
		t.Fatalf("mapped %d, queue says %d", mapped, q.mapped)
	}
}

// TestQueueModel drives a queue with random adds, deletes, re-adds and pops against a sorted
// model, checking every invariant as it goes and every pop's order.
func TestQueueModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kgs     int
		keys    int
		spread  int64
		longKey bool
	}{
		{"one-kg", 1, 50, 20, false},
		{"many-kgs", 16, 300, 200, false},
		{"ties", 8, 200, 2, false},
		{"long-keys", 4, 40, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			b := memory.NewBudget(1 << 30)
			q := NewQueue(b, 10, tc.kgs)
			model := map[mt]bool{}
			draw := func() mt {
				k := rng.IntN(tc.keys)
				key := fmt.Sprintf("key-%d", k)
				if tc.longKey {
					key += string(bytes.Repeat([]byte{byte(k)}, 100+k*37))
				}
				return mt{kg: 10 + k%tc.kgs, key: key, ns: []string{"", "w1", "win-2"}[rng.IntN(3)], ts: rng.Int64N(tc.spread)}
			}
			wm := int64(-1)
			for step := range 20000 {
				switch x := rng.IntN(100); {
				case x < 55:
					m := draw()
					m.ts += wm + 1
					if got := add(t, q, m); got == model[m] {
						t.Fatalf("step %d: Add(%v) = %v with model %v", step, m, got, model[m])
					}
					model[m] = true
				case x < 75:
					m := draw()
					m.ts += wm + 1
					if rng.IntN(2) == 0 && len(model) > 0 { // a present one
						for k := range model {
							m = k
							break
						}
					}
					if got := del(t, q, m); got != model[m] {
						t.Fatalf("step %d: Delete(%v) = %v with model %v", step, m, got, model[m])
					}
					delete(model, m)
				default:
					wm += rng.Int64N(tc.spread/2 + 1)
					var due []mt
					for k := range model {
						if k.ts <= wm {
							due = append(due, k)
						}
					}
					slices.SortFunc(due, modelCmp)
					for i, want := range due {
						got, ok := pop(t, q, wm)
						if !ok || got != want {
							t.Fatalf("step %d: pop %d of %d at %d = %v %v, want %v", step, i, len(due), wm, got, ok, want)
						}
						delete(model, want)
					}
					if got, ok := pop(t, q, wm); ok {
						t.Fatalf("step %d: popped %v past the due timers", step, got)
					}
				}
				if q.Len() != len(model) {
					t.Fatalf("step %d: Len %d, model %d", step, q.Len(), len(model))
				}
				if step%97 == 0 {
					checkQueue(t, q)
				}
			}
			checkQueue(t, q)
			// Drain: every timer in order, memory back to a page per key group at most.
			all := slices.SortedFunc(func(yield func(mt) bool) {
				for k := range model {
					if !yield(k) {
						return
					}
				}
			}, modelCmp)
			for _, want := range all {
				if got, ok := pop(t, q, 1<<62); !ok || got != want {
					t.Fatalf("drain: %v %v, want %v", got, ok, want)
				}
			}
			checkQueue(t, q)
			if q.Len() != 0 || q.MappedBytes() > int64(tc.kgs*pageSize) {
				t.Fatalf("after draining: %d timers, %d bytes mapped", q.Len(), q.MappedBytes())
			}
			if got := b.UsedBy(memory.PurposeTimers); got != q.MappedBytes() {
				t.Fatalf("budget counts %d bytes of timers, the queue maps %d", got, q.MappedBytes())
			}
			q.Close()
			if got := b.Used(); got != 0 {
				t.Fatalf("after Close the budget holds %d bytes", got)
			}
		})
	}
}

// TestQueueOrder: ties of timestamps go by key group, then by Hash, then by bytes; a timer
// added twice is one timer; deleting an absent or a fired timer does nothing.
func TestQueueOrder(t *testing.T) {
	q := NewQueue(memory.NewBudget(1<<26), 0, 4)
	defer q.Close()
	ts := []mt{
		{3, "a", "", 5}, {0, "b", "", 5}, {1, "c", "x", 5}, {1, "c", "y", 5}, {0, "z", "", 4}, {2, "a", "", 6},
	}
	for _, x := range ts {
		if !add(t, q, x) {
			t.Fatalf("Add(%v) = false", x)
		}
		if add(t, q, x) {
			t.Fatalf("second Add(%v) = true", x)
		}
	}
	if q.Len() != len(ts) {
		t.Fatalf("Len %d", q.Len())
	}
	want := slices.Clone(ts)
	slices.SortFunc(want, modelCmp)
	if want[0] != (mt{0, "z", "", 4}) || want[1].kg != 0 || want[2].kg != 1 || want[4].kg != 3 {
		t.Fatalf("the model's order is not (ts, key group, ...): %v", want)
	}
	if del(t, q, mt{0, "nope", "", 5}) {
		t.Fatal("deleting an absent timer reported true")
	}
	for _, w := range want {
		got, ok := pop(t, q, 1000)
		if !ok || got != w {
			t.Fatalf("pop = %v %v, want %v", got, ok, w)
		}
		if del(t, q, w) {
			t.Fatalf("deleting fired timer %v reported true", w)
		}
	}
	if _, ok := pop(t, q, 1000); ok {
		t.Fatal("pop of an empty queue")
	}
	if _, ok := q.Peek(); ok {
		t.Fatal("Peek of an empty queue")
	}
}

// TestQueueBudget: an Add the budget refuses fails with ErrMemoryBudget and changes nothing;
// once memory is back it succeeds.
func TestQueueBudget(t *testing.T) {
	b := memory.NewBudget(int64(4 * pageSize))
	q := NewQueue(b, 0, 8)
	defer q.Close()
	n := 0
	var refused error
	for kg := range 8 {
		for i := range 1000 {
			x := mt{kg, fmt.Sprintf("k%d", i), "ns", int64(i)}
			_, err := q.Add(x.kg, x.h(), 0, []byte(x.key), []byte(x.ns), x.ts)
			if err != nil {
				refused = err
				break
			}
			n++
		}
		if refused != nil {
			break
		}
	}
	if !errors.Is(refused, memory.ErrMemoryBudget) {
		t.Fatalf("no ErrMemoryBudget over a 4-page budget after %d timers: %v", n, refused)
	}
	if q.Len() != n {
		t.Fatalf("Len %d after %d accepted adds", q.Len(), n)
	}
	checkQueue(t, q)
	if b.Used() > b.Limit() {
		t.Fatal("over the budget")
	}
}

// TestSnapshotCopyOnWrite: a snapshot sees the timers of its cut whatever the queue does
// after it (adds, deletes, pops, growth, compaction); the cut copies nothing; changed groups
// are copied once and their frozen regions released with the snapshot.
func TestSnapshotCopyOnWrite(t *testing.T) {
	b := memory.NewBudget(1 << 30)
	q := NewQueue(b, 0, 8)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[mt]bool{}
	for i := range 3000 {
		x := mt{rng.IntN(8), fmt.Sprintf("key-%d", rng.IntN(500)), fmt.Sprint(rng.IntN(3)), rng.Int64N(1000)}
		add(t, q, x)
		model[x] = true
		if i%7 == 0 {
			del(t, q, x)
			delete(model, x)
		}
	}
	before := b.UsedBy(memory.PurposeTimers)
	s := Freeze([]Source{{Service: "svc", Domain: EventTime, Queue: q}})
	if b.UsedBy(memory.PurposeTimers) != before || s.Timers() != len(model) {
		t.Fatalf("Freeze mapped memory or counted %d timers of %d", s.Timers(), len(model))
	}
	at := maps(model)
	// Change every group after the cut.
	for range 2000 {
		x := mt{rng.IntN(8), fmt.Sprintf("key-%d", rng.IntN(500)), fmt.Sprint(rng.IntN(3)), rng.Int64N(1000)}
		if rng.IntN(2) == 0 {
			add(t, q, x)
		} else {
			pop(t, q, 300)
		}
	}
	checkQueue(t, q)
	var buf bytes.Buffer
	secs, err := s.WriteTo(t.Context(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[mt]bool{}
	for i, sec := range secs {
		part := buf.Bytes()[sec.Offset : sec.Offset+sec.Length]
		if crc := crcOf(part); crc != sec.CRC {
			t.Fatalf("section %d: CRC %#x, entry says %#x", i, crc, sec.CRC)
		}
		n := 0
		kg, size, err := DecodeSection("snap", sec.Offset, part, func(service string, d Domain, tm Timer) error {
			if service != "svc" || d != EventTime {
				return fmt.Errorf("block %q %v", service, d)
			}
			got[mt{tm.KeyGroup, string(tm.Key), string(tm.Namespace), tm.Timestamp}] = true
			n++
			return nil
		})
		if err != nil || kg != sec.KeyGroup || size != int(sec.Length) || n != sec.Timers {
			t.Fatalf("section %d: kg %d size %d n %d: %v (%+v)", i, kg, size, n, err, sec)
		}
		if i > 0 && secs[i-1].KeyGroup >= kg {
			t.Fatal("sections out of key-group order")
		}
	}
	if !equalSets(got, at) {
		t.Fatalf("the snapshot holds %d timers, the cut had %d", len(got), len(at))
	}
	held := b.UsedBy(memory.PurposeTimers) - q.MappedBytes()
	if held <= 0 {
		t.Fatal("changed groups did not leave their frozen regions to the snapshot")
	}
	s.Release()
	s.Release()
	if b.UsedBy(memory.PurposeTimers) != q.MappedBytes() {
		t.Fatalf("after Release: %d bytes of timers, the queue maps %d", b.UsedBy(memory.PurposeTimers), q.MappedBytes())
	}
	for _, g := range q.groups {
		if g != nil && g.frozen != nil {
			t.Fatal("a group is still frozen")
		}
	}
	// Unchanged groups are unfrozen in place; a second snapshot may freeze them.
	s2 := Freeze([]Source{{Service: "svc", Domain: EventTime, Queue: q}})
	q.Close() // frozen regions go to the snapshot
	s2.Release()
	if b.Used() != 0 {
		t.Fatalf("after Close and Release: %d bytes", b.Used())
	}
}

func maps(m map[mt]bool) map[mt]bool {
	c := map[mt]bool{}
	for k := range m {
		c[k] = true
	}
	return c
}

func equalSets(a, b map[mt]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestQueueDeleteAddSteady: deleting a timer and adding a later one for the same key (a
// session window extended) with a steady live count compacts the groups in place: no region
// is mapped or released once the groups have grown, and the queue keeps its order and its
// invariants (doc.go, "Compaction").
func TestQueueDeleteAddSteady(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	b := memory.NewBudget(1 << 30)
	q := NewQueue(b, 0, 4)
	defer q.Close()
	const keys = 3000
	cur := make([]mt, keys)
	model := map[mt]bool{}
	for k := range cur {
		cur[k] = mt{kg: k % 4, key: fmt.Sprintf("session-%d", k), ns: "w", ts: rng.Int64N(10_000)}
		add(t, q, cur[k])
		model[cur[k]] = true
	}
	step := func() {
		k := rng.IntN(keys)
		if !del(t, q, cur[k]) {
			t.Fatalf("Delete(%v) found nothing", cur[k])
		}
		delete(model, cur[k])
		cur[k].ts += 1 + rng.Int64N(10_000)
		if !add(t, q, cur[k]) {
			t.Fatalf("Add(%v) found it there", cur[k])
		}
		model[cur[k]] = true
	}
	for range 20 * keys { // let every group reach its steady size
		step()
	}
	checkQueue(t, q)
	regions := make([]*memory.Region, 4)
	for i, g := range q.groups {
		regions[i] = g.r
	}
	mapped := q.MappedBytes()
	for i := range 20 * keys {
		step()
		if i%997 == 0 {
			checkQueue(t, q)
		}
	}
	checkQueue(t, q)
	for i, g := range q.groups {
		if g.r != regions[i] {
			t.Fatalf("key group %d rebuilt in the steady state", i)
		}
	}
	if q.MappedBytes() != mapped {
		t.Fatalf("mapped %d bytes, then %d", mapped, q.MappedBytes())
	}
	// Firing everything gives the model's order.
	want := make([]mt, 0, len(model))
	for x := range model {
		want = append(want, x)
	}
	slices.SortFunc(want, modelCmp)
	for i, w := range want {
		got, ok := pop(t, q, 1<<62)
		if !ok || got != w {
			t.Fatalf("pop %d: %v %v, want %v", i, got, ok, w)
		}
		if i%500 == 0 {
			checkQueue(t, q)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("%d timers left", q.Len())
	}
}

// TestSpareRegions: the regions a released snapshot gives back serve the rebuilds of the next
// snapshot's frozen groups (doc.go, "Spare regions"): under a steady load (each cut pops one
// timer of every key group and adds one), cuts after the first map nothing new, the queue stays
// right, the budget counts exactly what the queue holds, and spares never outweigh the groups'
// regions, also after the queue drains.
func TestSpareRegions(t *testing.T) {
	b := memory.NewBudget(1 << 30)
	q := NewQueue(b, 0, 8)
	model := map[mt]bool{}
	n := 0
	addEach := func() { // one new timer in each key group, the latest of all
		for kg := range 8 {
			x := mt{kg, fmt.Sprintf("key-%d", n), "ns", int64(n)}
			add(t, q, x)
			model[x] = true
			n++
		}
	}
	popEach := func() { // the 8 oldest timers: one of each key group
		for range 8 {
			x, ok := pop(t, q, math.MaxInt64)
			if !ok || !model[x] {
				t.Fatalf("pop: %v %v", x, ok)
			}
			delete(model, x)
		}
	}
	for range 50 {
		addEach()
	}
	held := func() map[*memory.Region]bool { // the regions the queue holds: its groups' and spares
		m := map[*memory.Region]bool{}
		for _, g := range q.groups {
			if g != nil && g.r != nil {
				m[g.r] = true
			}
		}
		for _, r := range q.spare {
			m[r] = true
		}
		return m
	}
	for c := range 6 {
		before := held()
		s := Freeze([]Source{{Service: "svc", Domain: EventTime, Queue: q}})
		popEach() // every group is frozen: each rebuilds, into a spare region when one fits
		addEach()
		s.Release()
		if c >= 2 {
			for r := range held() {
				if !before[r] {
					t.Fatalf("cut %d: a steady cut mapped a new region: the spares were not used", c)
				}
			}
		}
		checkQueue(t, q)
		if q.Len() != len(model) || b.UsedBy(memory.PurposeTimers) != q.MappedBytes() || q.spareBytes > q.mapped {
			t.Fatalf("cut %d: %d timers (want %d), budget %d, queue %d, spares %d of %d", c, q.Len(), len(model),
				b.UsedBy(memory.PurposeTimers), q.MappedBytes(), q.spareBytes, q.mapped)
		}
	}
	for q.Len() > 0 {
		popEach()
	}
	if q.spareBytes > q.mapped || b.UsedBy(memory.PurposeTimers) != q.MappedBytes() {
		t.Fatalf("drained: spares %d of %d, the budget counts %d, the queue %d", q.spareBytes, q.mapped, b.UsedBy(memory.PurposeTimers), q.MappedBytes())
	}
	q.Close()
}
