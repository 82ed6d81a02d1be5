package strata

// The model: one plain-Go model of the five state kinds (value, list, map, reducing,
// aggregating) over a universe of keys × namespaces, and of the operator states (an even-split
// list, a union list, a broadcast map), one random step generator, and the places that compare
// the Store with the model (modelStates.checkSlot, modelStates.checkOps). TestModel drives it over
// several configurations; the crash, fault, damage and SIGKILL tests (crash_test.go,
// store_fault_test.go, persist_damage_test.go, crash_kill_test.go) drive the same model with write-only workloads.
//
// Adding a step kind: a stepKind constant, a function func(*modelRun, int32) error, its entry
// in modelSteps, and a weight in the configurations that should draw it.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/engine/enginetest"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/zeebo/xxh3"
)

var (
	modelSeed     = flag.Int64("seed", 0, "TestModel: seed to replay (0 = time-based)")
	modelStepsN   = flag.Int("steps", 0, "TestModel: steps per configuration (0 = 16000 with -short, 64000 without; a third with -race; a quarter in the slow configurations)")
	modelDuration = flag.Duration("duration", 0, "TestModel: run each configuration this long instead of -steps")
)

// errMismatch marks a read that returned something other than the model's state (a wrong
// answer without an error: the worst outcome).
var errMismatch = errors.New("model: read differs from the model")

// universe is the keys and namespaces a run draws from. A slot is one (key, namespace):
// slot = key index × len(nss) + namespace index.
type universe struct {
	keys []string
	nss  []string
}

func (u *universe) slots() int32 { return int32(len(u.keys) * len(u.nss)) }

func (u *universe) kn(slot int32) (key, ns string) {
	return u.keys[int(slot)/len(u.nss)], u.nss[int(slot)%len(u.nss)]
}

// nsSlot is the slot of the key of slot in namespace ns (an index into nss).
func (u *universe) nsSlot(slot int32, ns int) int32 {
	return slot - slot%int32(len(u.nss)) + int32(ns)
}

// plainUniverse has n keys fmt.Sprintf(format, i) and the namespaces nss.
func plainUniverse(format string, n int, nss ...string) *universe {
	u := &universe{nss: nss}
	for i := range n {
		u.keys = append(u.keys, fmt.Sprintf(format, i))
	}
	return u
}

// edgeUniverse has keys of many lengths, some in the key-group range kg of a Store with maxP
// key groups (nil: all): the composite key is 5 bytes + key + namespace, so keys of 110..116
// bytes put key+value right at the row cache's slot limit for short values, and a key of 130
// bytes has a 6-byte header.
func edgeUniverse(maxP int, kg *KeyGroupRange) *universe {
	u := &universe{nss: []string{"", "w", "win-07"}}
	lens := []int{1, 2, 3, 7, 12, 30, 47, 64, 90, 103, 107, 110, 111, 112, 113, 114, 115, 116, 117, 130}
	for i := 0; len(u.keys) < 28; i++ {
		n := lens[i%len(lens)]
		k := fmt.Sprintf("%d-", i)
		k += strings.Repeat(string(rune('a'+i%26)), max(n-len(k), 0))
		k = k[:max(n, 1)]
		if kg != nil {
			// As Store.Key: the key group of the low 32 bits of the key's xxh3.
			if g := int(uint32(murmurHash(int32(uint32(xxh3.Hash([]byte(k)))))) % uint32(maxP)); g < kg.Start || g > kg.End {
				continue
			}
		}
		u.keys = append(u.keys, k)
	}
	return u
}

// modelUserKeys are the map states' user keys; the model holds their indices.
var modelUserKeys = func() (u [10]string) {
	for i := range u {
		u[i] = fmt.Sprintf("uk-%d", i)
	}
	return
}()

func modelReduce(a, b int64) int64 { return a*3 + b } // not commutative: merge order matters

// mval is a model value: its bytes are modelBytes(seed, n) (a model of 60 000 slots of
// kilobyte values stays small).
type mval struct {
	seed uint64
	n    int32
}

// modelBytes returns n pseudo-random bytes of seed.
func modelBytes(dst []byte, seed uint64, n int) []byte {
	if cap(dst) < n { // sized once: the pressure configuration's values are megabytes
		dst = make([]byte, n)
	}
	dst = dst[:n]
	x := seed
	var w [8]byte
	for i := 0; i < n; i += 8 {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		binary.LittleEndian.PutUint64(w[:], z)
		copy(dst[i:], w[:])
	}
	return dst
}

// model is what every read must return, by slot. Absent slots are absent from the maps;
// lists and maps are never empty.
type model struct {
	val map[int32]mval
	lst map[int32][]int64
	mp  map[int32]map[uint8]int64
	red map[int32]int64
	agg map[int32]avgAcc
	// Operator state of a Store of parallelism 1, which holds it all: the even-split list, the
	// union list, the broadcast map (by user key index).
	opl, opu []int64
	opb      map[uint8]int64
	// The pending timers of the timer service, by time domain (timer.EventTime,
	// timer.ProcessingTime).
	tim [2]map[mtimer]bool
	// TTL states (ttl_model_test.go), each value with its timestamp.
	tv map[int32]tsv
	tl map[int32][]tsv
	tm map[int32]map[uint8]tsv
	tr map[int32]tsv
}

func newModel() *model {
	return &model{val: map[int32]mval{}, lst: map[int32][]int64{}, mp: map[int32]map[uint8]int64{},
		red: map[int32]int64{}, agg: map[int32]avgAcc{}, opb: map[uint8]int64{}, tim: [2]map[mtimer]bool{{}, {}},
		tv: map[int32]tsv{}, tl: map[int32][]tsv{}, tm: map[int32]map[uint8]tsv{}, tr: map[int32]tsv{}}
}

// clone returns a deep copy (the model as of a persist point).
func (m *model) clone() *model {
	c := &model{val: maps.Clone(m.val), lst: map[int32][]int64{}, mp: map[int32]map[uint8]int64{},
		red: maps.Clone(m.red), agg: maps.Clone(m.agg), opl: slices.Clone(m.opl), opu: slices.Clone(m.opu),
		opb: maps.Clone(m.opb), tim: [2]map[mtimer]bool{maps.Clone(m.tim[0]), maps.Clone(m.tim[1])}}
	for k, v := range m.lst {
		c.lst[k] = slices.Clone(v)
	}
	for k, v := range m.mp {
		c.mp[k] = maps.Clone(v)
	}
	c.tv, c.tr, c.tl, c.tm = maps.Clone(m.tv), maps.Clone(m.tr), map[int32][]tsv{}, map[int32]map[uint8]tsv{}
	for k, v := range m.tl {
		c.tl[k] = slices.Clone(v)
	}
	for k, v := range m.tm {
		c.tm[k] = maps.Clone(v)
	}
	return c
}

// slotState is the model's state of one slot (every kind).
type slotState struct {
	val          mval
	hasVal       bool
	lst          []int64
	mp           map[uint8]int64
	red          int64
	agg          avgAcc
	hasR, hasAgg bool
}

func (m *model) slot(s int32) slotState {
	v, hv := m.val[s]
	r, hr := m.red[s]
	a, ha := m.agg[s]
	return slotState{val: v, hasVal: hv, lst: slices.Clone(m.lst[s]), mp: maps.Clone(m.mp[s]), red: r, agg: a, hasR: hr, hasAgg: ha}
}

func (m *model) setSlot(s int32, x slotState) {
	delete(m.val, s)
	delete(m.lst, s)
	delete(m.mp, s)
	delete(m.red, s)
	delete(m.agg, s)
	if x.hasVal {
		m.val[s] = x.val
	}
	if len(x.lst) > 0 {
		m.lst[s] = x.lst
	}
	if len(x.mp) > 0 {
		m.mp[s] = x.mp
	}
	if x.hasR {
		m.red[s] = x.red
	}
	if x.hasAgg {
		m.agg[s] = x.agg
	}
}

func (m *model) putMap(s int32, u uint8, x int64) {
	if m.mp[s] == nil {
		m.mp[s] = map[uint8]int64{}
	}
	m.mp[s][u] = x
}

func (m *model) removeMap(s int32, u uint8) {
	delete(m.mp[s], u)
	if len(m.mp[s]) == 0 {
		delete(m.mp, s)
	}
}

func (m *model) addRed(s int32, x int64) {
	if old, ok := m.red[s]; ok {
		m.red[s] = modelReduce(old, x)
	} else {
		m.red[s] = x
	}
}

// mergeSources returns the distinct source slots of a MergeNamespaces into target, in order,
// without the target (it is not its own source).
func mergeSources(target int32, srcs []int32) []int32 {
	var out []int32
	for _, s := range srcs {
		if s != target && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// mergeList, mergeRed and mergeAgg are MergeNamespaces (Flink's mergeNamespaces): the
// sources' states are merged into the target in order and cleared.
func (m *model) mergeList(target int32, srcs []int32) {
	for _, s := range mergeSources(target, srcs) {
		if l, ok := m.lst[s]; ok {
			m.lst[target] = append(m.lst[target], l...)
			delete(m.lst, s)
		}
	}
}

func (m *model) mergeRed(target int32, srcs []int32) {
	var merged int64
	have := false
	for _, s := range mergeSources(target, srcs) {
		if v, ok := m.red[s]; ok {
			if have {
				merged = modelReduce(merged, v)
			} else {
				merged, have = v, true
			}
			delete(m.red, s)
		}
	}
	if have {
		m.addRed(target, merged)
	}
}

func (m *model) mergeAgg(target int32, srcs []int32) {
	var merged avgAcc
	have := false
	for _, s := range mergeSources(target, srcs) {
		if a, ok := m.agg[s]; ok {
			merged = avgAcc{merged.sum + a.sum, merged.n + a.n}
			have = true
			delete(m.agg, s)
		}
	}
	if have {
		a := m.agg[target]
		m.agg[target] = avgAcc{a.sum + merged.sum, a.n + merged.n}
	}
}

// modelStates are the model's five states registered on one Store.
type modelStates struct {
	s   *Store
	u   *universe
	val *ValueState[[]byte]
	lst *ListState[int64]
	mp  *MapState[string, int64]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, float64]
	vb  []byte
	// Operator states (registerOps; nil when the workload has no operator state steps).
	opl, opu *OperatorListState[int64]
	opb      *BroadcastState[string, int64]
	// The timer service (registerTimers; nil when the workload has no timer steps).
	tim *TimerService[string]
	// TTL states (registerTTL; nil when the workload has none) and the run's clock.
	tv      *ValueState[int64]
	tl      *ListState[int64]
	tm      *MapState[string, int64]
	tr      *ReducingState[int64]
	now     func() int64
	expired *int // counts the TTL values the model's reads found expired
}

// registerOps registers the model's operator states: an even-split list, a union list and a
// broadcast map.
func (st *modelStates) registerOps() error {
	var err error
	if st.opl, err = NewOperatorListState(st.s, OperatorListDescriptor[int64]{Name: "model-op-list", Codec: Int64}); err != nil {
		return err
	}
	if st.opu, err = NewUnionListState(st.s, OperatorListDescriptor[int64]{Name: "model-op-union", Codec: Int64}); err != nil {
		return err
	}
	st.opb, err = NewBroadcastState(st.s, BroadcastDescriptor[string, int64]{Name: "model-op-broadcast", KeyCodec: String, ValueCodec: Int64})
	return err
}

// checkOps compares the operator states with m (a Store of parallelism 1: all of it).
func (st *modelStates) checkOps(m *model) error {
	return st.checkOpShare(m, 0, 1)
}

// checkOpShare compares the operator states of subtask index of parallelism with what a
// restore of m (written at parallelism 1) gives it: its even split of the list (the model has
// one even-split state: the split's round starts at subtask 0), the whole union, the whole
// broadcast map.
func (st *modelStates) checkOpShare(m *model, index, parallelism int) error {
	if st.opl == nil {
		return nil
	}
	sh := refShares(len(m.opl), parallelism)[index]
	for _, c := range []struct {
		name string
		l    *OperatorListState[int64]
		want []int64
	}{{"even-split", st.opl, m.opl[sh[0]:sh[1]]}, {"union", st.opu, m.opu}} {
		got, err := c.l.Get()
		if err != nil {
			return fmt.Errorf("operator %s list: %w", c.name, err)
		}
		if !slices.Equal(got, c.want) {
			return fmt.Errorf("%w: subtask %d of %d: operator %s list = %v, model %v", errMismatch, index, parallelism, c.name, got, c.want)
		}
	}
	seq, errf := st.opb.Entries()
	got := map[uint8]int64{}
	for k, v := range seq {
		u := slices.Index(modelUserKeys[:], k)
		if u < 0 {
			return fmt.Errorf("%w: broadcast state: key %q", errMismatch, k)
		}
		got[uint8(u)] = v
	}
	if err := errf(); err != nil {
		return fmt.Errorf("broadcast state: %w", err)
	}
	if !maps.Equal(got, m.opb) {
		return fmt.Errorf("%w: subtask %d of %d: broadcast state = %v, model %v", errMismatch, index, parallelism, got, m.opb)
	}
	return nil
}

func registerModel(s *Store, u *universe) (*modelStates, error) {
	st := &modelStates{s: s, u: u}
	var err error
	if st.val, err = NewValueState(s, ValueDescriptor[[]byte]{Name: "model-val", Codec: Bytes}); err != nil {
		return nil, err
	}
	if st.lst, err = NewListState(s, ListDescriptor[int64]{Name: "model-lst", Codec: Int64}); err != nil {
		return nil, err
	}
	if st.mp, err = NewMapState(s, MapDescriptor[string, int64]{Name: "model-map", KeyCodec: String, ValueCodec: Int64}); err != nil {
		return nil, err
	}
	if st.red, err = NewReducingState(s, ReducingDescriptor[int64]{Name: "model-red", Codec: Int64, Reduce: modelReduce}); err != nil {
		return nil, err
	}
	if st.agg, err = NewAggregatingState(s, avgDescriptor("model-agg")); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *modelStates) key(slot int32) Key {
	k, ns := st.u.kn(slot)
	return st.s.Key([]byte(k)).In([]byte(ns))
}

// mergeArgs returns the key (no namespace), target and sources of a MergeNamespaces over the
// namespaces of slot's key.
func (st *modelStates) mergeArgs(target int32, srcs []int32) (Key, []byte, [][]byte) {
	k, tns := st.u.kn(target)
	var sb [][]byte
	for _, s := range srcs {
		_, ns := st.u.kn(s)
		sb = append(sb, []byte(ns))
	}
	return st.s.Key([]byte(k)), []byte(tns), sb
}

// heldValue is a value a read handed out (aliasing the Store's memory: Bytes) and what it
// must still hold until the next write.
type heldValue struct {
	slot int32
	got  []byte
	want []byte
}

// checkSlot compares every state of slot with m: the one place reads meet the model. Values
// read are appended to held when it is not nil. It returns the Store's error, or errMismatch
// with the details.
func (st *modelStates) checkSlot(m *model, slot int32, held *[]heldValue) error {
	if st.tv != nil {
		// TTL reads may write: the values held so far must be intact now, and are dead after.
		if held != nil {
			if err := heldIntact(*held); err != nil {
				return err
			}
			*held = (*held)[:0]
		}
		if err := st.checkTTL(m, slot); err != nil {
			return err
		}
	}
	k := st.key(slot)
	v, ok, err := st.val.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d value: %w", slot, err)
	}
	mv, mok := m.val[slot]
	want := modelBytes(st.vb, mv.seed, int(mv.n))
	st.vb = want
	if ok != mok || (ok && !bytes.Equal(v, want)) {
		return fmt.Errorf("%w: slot %d value = %s %v, model %s %v", errMismatch, slot, shortBytes(v), ok, shortBytes(want), mok)
	}
	if ok && held != nil {
		*held = append(*held, heldValue{slot, v, slices.Clone(want)})
	}
	var got []int64
	it := st.lst.Get(k)
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("slot %d list: %w", slot, err)
	}
	if !slices.Equal(got, m.lst[slot]) {
		return fmt.Errorf("%w: slot %d list = %v, model %v", errMismatch, slot, got, m.lst[slot])
	}
	if st.s.hot.limit > 0 && held != nil {
		// With the hot tier, an iteration writes the tier back first, which ends the values
		// read before it as a write does (Options.HotTierSize): check them, forget them.
		if err := heldIntact(*held); err != nil {
			return err
		}
		*held = (*held)[:0]
	}
	n := 0
	mi := st.mp.Iterator(k)
	for mi.Next() {
		n++
		uk, x := mi.Key(), mi.Value()
		u := slices.Index(modelUserKeys[:], uk)
		if u < 0 {
			return fmt.Errorf("%w: slot %d map: user key %q", errMismatch, slot, uk)
		}
		if mx, ok := m.mp[slot][uint8(u)]; !ok || mx != x {
			return fmt.Errorf("%w: slot %d map: %s=%d, model %d (%v)", errMismatch, slot, uk, x, mx, ok)
		}
	}
	if err := mi.Err(); err != nil {
		return fmt.Errorf("slot %d map: %w", slot, err)
	}
	if n != len(m.mp[slot]) {
		return fmt.Errorf("%w: slot %d map: %d entries, model %v", errMismatch, slot, n, m.mp[slot])
	}
	if e, err := st.mp.IsEmpty(k); err != nil || e != (n == 0) {
		return fmt.Errorf("%w: slot %d map: IsEmpty = %v %v with %d entries", errMismatch, slot, e, err, n)
	}
	r, ok, err := st.red.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d reducing: %w", slot, err)
	}
	if mr, mok := m.red[slot]; ok != mok || r != mr {
		return fmt.Errorf("%w: slot %d reducing = %d %v, model %d %v", errMismatch, slot, r, ok, mr, mok)
	}
	a, ok, err := st.agg.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d aggregating: %w", slot, err)
	}
	ma, mok := m.agg[slot]
	var wa float64
	if mok {
		wa = float64(ma.sum) / float64(ma.n)
	}
	if ok != mok || a != wa {
		return fmt.Errorf("%w: slot %d aggregating = %v %v, model %v %v", errMismatch, slot, a, ok, wa, mok)
	}
	return nil
}

// checkAll checks every slot of the universe; it returns the first error.
func (st *modelStates) checkAll(m *model) error {
	for slot := range st.u.slots() {
		if err := st.checkSlot(m, slot, nil); err != nil {
			return err
		}
	}
	return nil
}

// stepKind is one kind of random step. The weights of a configuration are indexed by it.
type stepKind uint8

const (
	// Writes: their arguments come from the rng only, so a run of writes can be replayed on a
	// model without a Store (the SIGKILL test's parent).
	stepValPut stepKind = iota
	stepValClear
	stepListAdd
	stepListAddAll
	stepListUpdate
	stepListClear
	stepListMerge
	stepMapPut
	stepMapPutAll
	stepMapRemove
	stepMapClear
	stepRedAdd
	stepRedClear
	stepRedMerge
	stepAggAdd
	stepAggClear
	stepAggMerge
	stepOpAdd    // operator list (even-split or union) Add
	stepOpAddAll // operator list AddAll
	stepOpUpdate // operator list Update
	stepOpClear  // operator list Clear
	stepBcPut    // broadcast state Put
	stepBcRemove // broadcast state Remove
	// Steps that need a Store.
	stepOpRead      // every operator state
	stepValTooLarge // a refused Put changes nothing
	stepMapIterate  // iterate, removing and updating entries
	stepRead        // every state of one slot
	stepReadMapKey  // Get and Contains of one user key
	stepReadBurst   // reads of a few slots: fill and churn the row cache
	stepListHeld    // a list iterator held across reads of other states
	stepCheckHeld   // values read since the last write are intact
	stepCheckCache  // the row cache's contents against the model
	stepSeal        // seal the active segment (a transform queued)
	stepDrain       // install finished background work, wait for the rest
	stepWait        // WaitBackground
	stepEvict       // start an eviction (read-only: installed at the next write)
	stepEvictDrain  // evict and install
	stepPushDown    // everything into the lower tier
	stepReopen      // Close and Open: every acknowledged write survives
	stepCrash       // the file system keeps what was synced: the Store reopens to its last Close
	stepNoSpace     // ENOSPC part-way through Close; reads stay right; a retried Close works
	stepCheckpoint  // cut a checkpoint; its upload runs during the next steps (checkpoint_model_test.go)
	stepCkNotify    // wait for it, then complete it (or abort it)
	stepRestore     // restore the newest durable checkpoint and go on with it
	stepRescale     // restore it into 1, 2 or 3 Stores, check them, scale them back into one
	stepMaterialize // force a changelog materialization (refused with the changelog off)
	stepClToggle    // restore the newest durable checkpoint with the changelog switched on↔off
	stepCkOutage    // the checkpoint storage refuses writes (EIO, ENOSPC) during a few steps
	stepKeys        // Keys, KeysAndNamespaces and NumEntries of every state against the model (keys_model_test.go)
	stepApplyKeys   // ApplyToAllKeys of one state and namespace, clearing or rewriting visited keys
	stepTimerReg    // register an event-time or processing-time timer (timers_model_test.go)
	stepTimerDel    // delete one, pending or not
	stepTimerFire   // advance the watermark or processing time: every due timer fires once, in order
	stepTimerCheck  // every pending timer of both domains against the model
	stepTTLWrite    // a write of a TTL state (ttl_model_test.go): stamped with the clock
	stepTTLRead     // every TTL state of one slot: the model applies expiry (reads may write)
	stepClock       // the clock jumps forward, often to just before, at or after an expiry
	stepValBatch    // ValueState.GetBatch of a few dozen slots, repeats included
	stepValPutBatch // ValueState.PutBatch of a few dozen slots, repeats included
	stepMapBatch    // MapState.GetBatch of a few dozen (slot, user key) pairs
	stepSavepoint   // a native savepoint, restored into 1, 2 or 3 Stores and into the one the run goes on with
	stepHotCheck    // the hot tier's invariants (hot_test.go), then a write-back or a drop of it
	stepHotJudge    // a write-back that judges the hot tables (H9), one of them made to fail: it is turned off
	numSteps
)

type stepDef struct {
	name  string
	write bool // draws from the rng only and changes the model (replayable without a Store)
	run   func(r *modelRun, slot int32) error
}

var modelSteps = [numSteps]stepDef{
	stepValPut:      {"value-put", true, (*modelRun).valPut},
	stepValClear:    {"value-clear", true, (*modelRun).valClear},
	stepListAdd:     {"list-add", true, (*modelRun).listAdd},
	stepListAddAll:  {"list-add-all", true, (*modelRun).listAddAll},
	stepListUpdate:  {"list-update", true, (*modelRun).listUpdate},
	stepListClear:   {"list-clear", true, (*modelRun).listClear},
	stepListMerge:   {"list-merge", true, (*modelRun).listMerge},
	stepMapPut:      {"map-put", true, (*modelRun).mapPut},
	stepMapPutAll:   {"map-put-all", true, (*modelRun).mapPutAll},
	stepMapRemove:   {"map-remove", true, (*modelRun).mapRemove},
	stepMapClear:    {"map-clear", true, (*modelRun).mapClear},
	stepRedAdd:      {"reducing-add", true, (*modelRun).redAdd},
	stepRedClear:    {"reducing-clear", true, (*modelRun).redClear},
	stepRedMerge:    {"reducing-merge", true, (*modelRun).redMerge},
	stepAggAdd:      {"aggregating-add", true, (*modelRun).aggAdd},
	stepAggClear:    {"aggregating-clear", true, (*modelRun).aggClear},
	stepAggMerge:    {"aggregating-merge", true, (*modelRun).aggMerge},
	stepOpAdd:       {"op-list-add", true, (*modelRun).opAdd},
	stepOpAddAll:    {"op-list-add-all", true, (*modelRun).opAddAll},
	stepOpUpdate:    {"op-list-update", true, (*modelRun).opUpdate},
	stepOpClear:     {"op-list-clear", true, (*modelRun).opClear},
	stepBcPut:       {"broadcast-put", true, (*modelRun).bcPut},
	stepBcRemove:    {"broadcast-remove", true, (*modelRun).bcRemove},
	stepOpRead:      {"op-read", false, func(r *modelRun, _ int32) error { return r.st.checkOps(r.m) }},
	stepValTooLarge: {"value-too-large", false, (*modelRun).valTooLarge},
	stepMapIterate:  {"map-iterate", false, (*modelRun).mapIterate},
	stepRead:        {"read", false, (*modelRun).read},
	stepReadMapKey:  {"read-map-key", false, (*modelRun).readMapKey},
	stepReadBurst:   {"read-burst", false, (*modelRun).readBurst},
	stepListHeld:    {"list-held", false, (*modelRun).listHeld},
	stepCheckHeld:   {"check-held", false, func(r *modelRun, _ int32) error { return r.checkHeld() }},
	stepCheckCache:  {"check-cache", false, func(r *modelRun, _ int32) error { return r.checkCache() }},
	stepSeal:        {"seal", false, (*modelRun).seal},
	stepDrain:       {"drain", false, (*modelRun).drain},
	stepWait:        {"wait", false, (*modelRun).wait},
	stepEvict:       {"evict", false, (*modelRun).evict},
	stepEvictDrain:  {"evict-drain", false, (*modelRun).evictDrain},
	stepPushDown:    {"push-down", false, (*modelRun).pushDown},
	stepReopen:      {"reopen", false, (*modelRun).reopen},
	stepCrash:       {"crash", false, (*modelRun).crash},
	stepNoSpace:     {"close-nospace", false, (*modelRun).noSpaceClose},
	stepCheckpoint:  {"checkpoint", false, (*modelRun).checkpoint},
	stepCkNotify:    {"checkpoint-notify", false, (*modelRun).ckNotify},
	stepRestore:     {"restore", false, (*modelRun).restoreStep},
	stepRescale:     {"rescale", false, (*modelRun).rescale},
	stepMaterialize: {"materialize", false, (*modelRun).materialize},
	stepClToggle:    {"changelog-toggle", false, (*modelRun).changelogToggle},
	stepKeys:        {"keys", false, (*modelRun).keys},
	stepApplyKeys:   {"apply-to-all-keys", false, (*modelRun).applyKeys},
	stepTimerReg:    {"timer-register", false, (*modelRun).timerRegister},
	stepTimerDel:    {"timer-delete", false, (*modelRun).timerDelete},
	stepTimerFire:   {"timer-advance", false, (*modelRun).timerAdvance},
	stepTimerCheck:  {"timer-check", false, func(r *modelRun, _ int32) error { return r.st.checkTimers(r.m) }},
	stepTTLWrite:    {"ttl-write", true, (*modelRun).ttlWrite},
	stepTTLRead:     {"ttl-read", false, (*modelRun).ttlRead},
	stepClock:       {"clock-jump", true, (*modelRun).clockJump},
	stepValBatch:    {"value-get-batch", false, (*modelRun).valGetBatch},
	stepValPutBatch: {"value-put-batch", false, (*modelRun).valPutBatch},
	stepMapBatch:    {"map-get-batch", false, (*modelRun).mapGetBatch},
	stepHotCheck:    {"hot-check", false, (*modelRun).hotCheck},
	stepHotJudge:    {"hot-judge", false, (*modelRun).hotJudge},
}

// modelWeights are the relative frequencies of the step kinds.
type modelWeights [numSteps]int

// with returns w with the kinds ks set to weight x.
func (w modelWeights) with(x int, ks ...stepKind) modelWeights {
	for _, k := range ks {
		w[k] = x
	}
	return w
}

// writeWeights are every write, merges included.
var writeWeights = modelWeights{
	stepValPut: 100, stepValClear: 20, stepListAdd: 60, stepListAddAll: 25, stepListUpdate: 25, stepListClear: 10,
	stepListMerge: 15, stepMapPut: 70, stepMapPutAll: 15, stepMapRemove: 25, stepMapClear: 8, stepRedAdd: 70,
	stepRedClear: 10, stepRedMerge: 20, stepAggAdd: 70, stepAggClear: 10, stepAggMerge: 20,
}

// withOps adds the operator state steps to w (their states are registered on every Store of a
// workload that draws them: modelWorkload.hasOps).
func (w modelWeights) withOps() modelWeights {
	return w.with(8, stepOpAdd, stepBcPut).with(3, stepOpAddAll, stepOpUpdate, stepBcRemove, stepOpRead).with(1, stepOpClear)
}

// withTimers adds the timer steps to w (the timer service is registered on every Store of a
// workload that draws them: modelWorkload.hasTimers).
func (w modelWeights) withTimers() modelWeights {
	return w.with(40, stepTimerReg).with(8, stepTimerDel).with(10, stepTimerFire).with(2, stepTimerCheck)
}

// readWeights are the reads, read-only checks and the in-memory tier moves.
var readWeights = writeWeights.with(5, stepValTooLarge).with(20, stepMapIterate).with(150, stepRead).
	with(40, stepReadMapKey).with(60, stepReadBurst).with(40, stepListHeld).with(10, stepCheckHeld).
	with(8, stepSeal).with(3, stepDrain).with(3, stepWait).with(8, stepKeys).with(5, stepApplyKeys).
	with(20, stepValBatch).with(10, stepValPutBatch).with(10, stepMapBatch)

// modelWorkload is how steps are drawn: over which universe, with which weights and values.
type modelWorkload struct {
	u       *universe
	weights modelWeights
	maxVal  int  // values up to maxVal bytes, and around the row cache's slot limit
	bigVals bool // half the values 256 KiB..1 MiB (budget pressure)
	hot     bool // half the steps on one of a few slots (repeated reads hit the row cache)
	ttl     bool // TTL states and a clock (ttl_model_test.go)
}

// hasOps reports whether w draws operator state steps (its Stores register the operator states).
func (w *modelWorkload) hasOps() bool { return w.weights[stepOpAdd] > 0 }

// hasTimers reports whether w draws timer steps (its Stores register the timer service).
func (w *modelWorkload) hasTimers() bool { return w.weights[stepTimerReg] > 0 }

// register registers the model's states on s (the operator states too when the workload has
// them).
func (r *modelRun) register(s *Store) (*modelStates, error) {
	st, err := registerModel(s, r.w.u)
	if err == nil && r.w.hasOps() {
		err = st.registerOps()
	}
	if err == nil && r.w.hasTimers() {
		err = st.registerTimers()
	}
	if err == nil && r.w.ttl {
		err = st.registerTTL(r.now.Load, &r.ttlExpired)
	}
	return st, err
}

// attackWorkload is the write-only workload of the attack tests: every write but the merges
// (a fault test resolves a refused write on its one slot).
func attackWorkload(keys, maxVal int) *modelWorkload {
	return &modelWorkload{u: plainUniverse("attack-key-%07d", keys, "", "w1", "window-2"), maxVal: maxVal,
		weights: writeWeights.with(0, stepListMerge, stepRedMerge, stepAggMerge)}
}

// modelRun draws steps of a workload and applies them to a model and, when st is set, to a
// Store; every read is compared with the model.
type modelRun struct {
	hotSteps int // hot-check steps run (hot_test.go): odd ones write the tier back, even ones drop it
	t        testing.TB
	w        *modelWorkload
	rng      *rand.Rand
	m        *model
	st       *modelStates // nil: the model only (write steps only)
	held     []heldValue
	big      []byte // a value too large for the Store
	vb       []byte
	op       int

	// faulty: a refused write leaves its slot at its old or its new state (fault tests);
	// the model follows the Store.
	faulty bool
	// pressure: a write refused with ErrMemoryBudget changes nothing and is allowed.
	pressure bool

	// A Store with a directory (lifecycle steps).
	dir       string
	opts      Options
	adjust    func(*engine.Options)
	mem       *vfs.MemFS   // nil: not crashable
	fault     *vfs.FaultFS // nil: no fault injection
	persisted *model
	// changelog: the open Store has the changelog on (ckInit sets its options; the
	// changelog-toggle step flips it across a restore).
	changelog bool

	now                                                         *atomic.Int64 // the clock of TTL workloads (Options.Clock)
	ck                                                          ckRun         // checkpoints (checkpoint_model_test.go)
	timers                                                      timerCounts
	counts                                                      [numSteps]int
	clCounts                                                    [numSteps]int // steps begun with the changelog on
	total                                                       Stats         // stats of the Stores closed so far
	budgetFails, cacheChecks, cachedSeen, invalid, noSpaceFails int
	ttlExpired                                                  int // TTL values found expired by the model's reads
}

// runSession runs ops write steps of session n (its own rng) on m and, when st is set, on st.
func (w *modelWorkload) session(seed int64, n, ops int, m *model, st *modelStates) error {
	r := &modelRun{w: w, rng: rand.New(rand.NewPCG(uint64(seed), uint64(n))), m: m, st: st}
	for i := range ops {
		if err := r.step(); err != nil {
			return fmt.Errorf("session %d op %d: %w", n, i, err)
		}
	}
	return nil
}

// pick draws a slot.
func (r *modelRun) pick() int32 {
	if r.w.hot && r.rng.IntN(2) == 0 {
		i := int32(r.rng.IntN(4))
		return i * 5 * int32(len(r.w.u.nss)+1) % r.w.u.slots()
	}
	return r.rng.Int32N(r.w.u.slots())
}

// step draws and runs one step.
func (r *modelRun) step() error {
	total := 0
	for _, x := range r.w.weights {
		total += x
	}
	x := r.rng.IntN(total)
	k := stepKind(0)
	for ; x >= r.w.weights[k]; k++ {
		x -= r.w.weights[k]
	}
	if r.st == nil && !modelSteps[k].write {
		panic(fmt.Sprintf("strata: model: step %s needs a Store", modelSteps[k].name))
	}
	r.counts[k]++
	if r.changelog {
		r.clCounts[k]++
	}
	if err := modelSteps[k].run(r, r.pick()); err != nil {
		return fmt.Errorf("%s: %w", modelSteps[k].name, err)
	}
	return nil
}

// write runs do on the Store and apply on the model. Values read before it must still be
// intact; after it they are dead.
func (r *modelRun) write(slot int32, do func() error, apply func()) error {
	if r.st == nil {
		apply()
		return nil
	}
	if err := r.checkHeld(); err != nil {
		return err
	}
	var old slotState
	if r.faulty {
		old = r.m.slot(slot)
	}
	err := do()
	r.held = r.held[:0]
	switch {
	case err == nil:
		apply()
	case r.pressure && errors.Is(err, ErrMemoryBudget):
		r.budgetFails++
		return nil
	case r.faulty:
		apply()
		if cerr := r.st.checkSlot(r.m, slot, nil); cerr != nil {
			newer := r.m.slot(slot)
			r.m.setSlot(slot, old)
			if cerr2 := r.st.checkSlot(r.m, slot, nil); cerr2 != nil {
				r.m.setSlot(slot, newer)
				r.t.Fatalf("after a refused write (%v), slot %d is neither old (%v) nor new (%v)", err, slot, cerr2, cerr)
			}
		}
	}
	return err
}

// value draws a value: often exactly at, one under or one over the row cache's entry limit for
// slot's key, empty, or up to maxVal bytes.
func (r *modelRun) value(slot int32) mval {
	k, ns := r.w.u.kn(slot)
	room := engine.RowCacheMaxData - (5 + len(k) + len(ns))
	if len(k) >= 128 {
		room--
	}
	var n int
	switch r.rng.IntN(8) {
	case 0:
		n = 0
	case 1:
		n = room
	case 2:
		n = room + 1
	case 3:
		n = room - 1
	default:
		n = r.rng.IntN(r.w.maxVal + 1)
	}
	if r.w.bigVals && r.rng.IntN(2) == 0 {
		n = 256<<10 + r.rng.IntN(768<<10)
	}
	return mval{seed: r.rng.Uint64(), n: int32(max(n, 0))}
}

func (r *modelRun) valPut(slot int32) error {
	v := r.value(slot)
	return r.write(slot, func() error {
		r.vb = modelBytes(r.vb, v.seed, int(v.n))
		return r.st.val.Put(r.st.key(slot), r.vb)
	}, func() { r.m.val[slot] = v })
}

func (r *modelRun) valClear(slot int32) error {
	return r.write(slot, func() error { return r.st.val.Clear(r.st.key(slot)) }, func() { delete(r.m.val, slot) })
}

func (r *modelRun) elems(n int) []int64 {
	xs := make([]int64, n)
	for i := range xs {
		xs[i] = r.rng.Int64N(1 << 40)
	}
	return xs
}

func (r *modelRun) listAdd(slot int32) error {
	x := r.rng.Int64()
	return r.write(slot, func() error { return r.st.lst.Add(r.st.key(slot), x) },
		func() { r.m.lst[slot] = append(r.m.lst[slot], x) })
}

func (r *modelRun) listAddAll(slot int32) error {
	xs := r.elems(r.rng.IntN(4))
	return r.write(slot, func() error { return r.st.lst.AddAll(r.st.key(slot), xs) }, func() {
		if len(xs) > 0 {
			r.m.lst[slot] = append(r.m.lst[slot], xs...)
		}
	})
}

func (r *modelRun) listUpdate(slot int32) error {
	xs := r.elems(r.rng.IntN(4))
	return r.write(slot, func() error { return r.st.lst.Update(r.st.key(slot), xs) }, func() {
		if len(xs) == 0 {
			delete(r.m.lst, slot)
		} else {
			r.m.lst[slot] = slices.Clone(xs)
		}
	})
}

func (r *modelRun) listClear(slot int32) error {
	return r.write(slot, func() error { return r.st.lst.Clear(r.st.key(slot)) }, func() { delete(r.m.lst, slot) })
}

// sources draws merge sources among the namespaces of slot's key (repeats and the target
// itself included).
func (r *modelRun) sources(slot int32) []int32 {
	var out []int32
	for range 1 + r.rng.IntN(3) {
		out = append(out, r.w.u.nsSlot(slot, r.rng.IntN(len(r.w.u.nss))))
	}
	return out
}

func (r *modelRun) listMerge(slot int32) error {
	srcs := r.sources(slot)
	return r.write(slot, func() error {
		k, t, s := r.st.mergeArgs(slot, srcs)
		return r.st.lst.MergeNamespaces(k, t, s...)
	}, func() { r.m.mergeList(slot, srcs) })
}

func (r *modelRun) mapPut(slot int32) error {
	u, x := uint8(r.rng.IntN(len(modelUserKeys))), r.rng.Int64N(1000)-500
	return r.write(slot, func() error { return r.st.mp.Put(r.st.key(slot), modelUserKeys[u], x) },
		func() { r.m.putMap(slot, u, x) })
}

func (r *modelRun) mapPutAll(slot int32) error {
	add := map[uint8]int64{uint8(r.rng.IntN(len(modelUserKeys))): 1, uint8(r.rng.IntN(len(modelUserKeys))): r.rng.Int64()}
	// PutAll is not atomic (as Flink's putAll): the entries put before a refused one stay. The
	// model applies exactly the entries the Store took.
	var put []uint8
	return r.write(slot, func() error {
		return r.st.mp.PutAll(r.st.key(slot), func(yield func(string, int64) bool) {
			for u, x := range add {
				if !yield(modelUserKeys[u], x) {
					return
				}
				put = append(put, u)
			}
		})
	}, func() {
		if r.st == nil { // the model alone (a replayed workload): every entry
			for u := range add {
				put = append(put, u)
			}
		}
		for _, u := range put {
			r.m.putMap(slot, u, add[u])
		}
	})
}

func (r *modelRun) mapRemove(slot int32) error {
	u := uint8(r.rng.IntN(len(modelUserKeys)))
	return r.write(slot, func() error { return r.st.mp.Remove(r.st.key(slot), modelUserKeys[u]) },
		func() { r.m.removeMap(slot, u) })
}

func (r *modelRun) mapClear(slot int32) error {
	return r.write(slot, func() error { return r.st.mp.Clear(r.st.key(slot)) }, func() { delete(r.m.mp, slot) })
}

func (r *modelRun) redAdd(slot int32) error {
	x := r.rng.Int64N(100) - 30
	return r.write(slot, func() error { return r.st.red.Add(r.st.key(slot), x) }, func() { r.m.addRed(slot, x) })
}

func (r *modelRun) redClear(slot int32) error {
	return r.write(slot, func() error { return r.st.red.Clear(r.st.key(slot)) }, func() { delete(r.m.red, slot) })
}

func (r *modelRun) redMerge(slot int32) error {
	srcs := r.sources(slot)
	return r.write(slot, func() error {
		k, t, s := r.st.mergeArgs(slot, srcs)
		return r.st.red.MergeNamespaces(k, t, s...)
	}, func() { r.m.mergeRed(slot, srcs) })
}

func (r *modelRun) aggAdd(slot int32) error {
	x := r.rng.Int64N(1000)
	return r.write(slot, func() error { return r.st.agg.Add(r.st.key(slot), x) }, func() {
		a := r.m.agg[slot]
		r.m.agg[slot] = avgAcc{a.sum + x, a.n + 1}
	})
}

// opList returns the operator list state and its model: the union list or the even-split one.
func (r *modelRun) opList(union bool) (*OperatorListState[int64], *[]int64) {
	if union {
		if r.st == nil {
			return nil, &r.m.opu
		}
		return r.st.opu, &r.m.opu
	}
	if r.st == nil {
		return nil, &r.m.opl
	}
	return r.st.opl, &r.m.opl
}

func (r *modelRun) opAdd(slot int32) error {
	l, m := r.opList(r.rng.IntN(2) == 0)
	x := r.rng.Int64N(1 << 40)
	return r.write(slot, func() error { return l.Add(x) }, func() { *m = append(*m, x) })
}

func (r *modelRun) opAddAll(slot int32) error {
	l, m := r.opList(r.rng.IntN(2) == 0)
	xs := r.elems(r.rng.IntN(4))
	return r.write(slot, func() error { return l.AddAll(xs) }, func() { *m = append(*m, xs...) })
}

func (r *modelRun) opUpdate(slot int32) error {
	l, m := r.opList(r.rng.IntN(2) == 0)
	xs := r.elems(r.rng.IntN(5))
	return r.write(slot, func() error { return l.Update(xs) }, func() {
		*m = nil
		if len(xs) > 0 {
			*m = slices.Clone(xs)
		}
	})
}

func (r *modelRun) opClear(slot int32) error {
	l, m := r.opList(r.rng.IntN(2) == 0)
	return r.write(slot, func() error { return l.Clear() }, func() { *m = nil })
}

func (r *modelRun) bcPut(slot int32) error {
	u, x := uint8(r.rng.IntN(len(modelUserKeys))), r.rng.Int64N(1000)-500
	return r.write(slot, func() error { return r.st.opb.Put(modelUserKeys[u], x) }, func() { r.m.opb[u] = x })
}

func (r *modelRun) bcRemove(slot int32) error {
	u := uint8(r.rng.IntN(len(modelUserKeys)))
	return r.write(slot, func() error { return r.st.opb.Remove(modelUserKeys[u]) }, func() { delete(r.m.opb, u) })
}

func (r *modelRun) aggClear(slot int32) error {
	return r.write(slot, func() error { return r.st.agg.Clear(r.st.key(slot)) }, func() { delete(r.m.agg, slot) })
}

func (r *modelRun) aggMerge(slot int32) error {
	srcs := r.sources(slot)
	return r.write(slot, func() error {
		k, t, s := r.st.mergeArgs(slot, srcs)
		return r.st.agg.MergeNamespaces(k, t, s...)
	}, func() { r.m.mergeAgg(slot, srcs) })
}

// valTooLarge: a refused write (ErrValueTooLarge) changes nothing, the row cache's copy
// included, and does not end the validity of values read before it.
func (r *modelRun) valTooLarge(slot int32) error {
	if r.big == nil {
		r.big = make([]byte, r.st.s.opts.SegmentSize/4+1)
	}
	if err := r.checkHeld(); err != nil {
		return err
	}
	if err := r.st.val.Put(r.st.key(slot), r.big); !errors.Is(err, ErrValueTooLarge) {
		return fmt.Errorf("put of %d bytes: %v, want ErrValueTooLarge", len(r.big), err)
	}
	r.held = r.held[:0]
	return r.st.checkSlot(r.m, slot, &r.held)
}

// mapIterate iterates the map of slot, removing some entries (MapIterator.Remove) and
// updating others in place (Put of the current user key); every entry is seen once with the
// model's value, and all of them unless the iteration was invalidated (ErrIteratorInvalidated
// is documented when an iteration's writes outlast the install hold-back).
func (r *modelRun) mapIterate(slot int32) error {
	if err := r.checkHeld(); err != nil {
		return err
	}
	r.held = r.held[:0]
	rm, up := r.rng.Uint32(), r.rng.Uint32()
	k := r.st.key(slot)
	before := maps.Clone(r.m.mp[slot])
	seen := map[uint8]bool{}
	it := r.st.mp.Iterator(k)
	for it.Next() {
		uk, x := it.Key(), it.Value()
		i := slices.Index(modelUserKeys[:], uk)
		if i < 0 {
			return fmt.Errorf("%w: slot %d map iterator: user key %q", errMismatch, slot, uk)
		}
		u := uint8(i)
		if seen[u] {
			return fmt.Errorf("%w: slot %d map iterator: %q twice", errMismatch, slot, uk)
		}
		seen[u] = true
		if want, ok := r.m.mp[slot][u]; !ok || want != x {
			return fmt.Errorf("%w: slot %d map iterator: %s=%d, model %d %v", errMismatch, slot, uk, x, want, ok)
		}
		switch {
		case rm>>u&1 != 0:
			if err := r.write(slot, it.Remove, func() { r.m.removeMap(slot, u) }); err != nil {
				return err
			}
		case up>>u&1 != 0:
			if err := r.write(slot, func() error { return r.st.mp.Put(k, uk, x+1) },
				func() { r.m.putMap(slot, u, x+1) }); err != nil {
				return err
			}
		}
	}
	if err := it.Err(); errors.Is(err, ErrIteratorInvalidated) {
		r.invalid++ // what it wrote is in the model; later checks compare the whole map
		return nil
	} else if err != nil {
		return err
	}
	if len(seen) != len(before) {
		return fmt.Errorf("%w: slot %d map iterator: saw %v, model before %v", errMismatch, slot, seen, before)
	}
	return nil
}

func (r *modelRun) read(slot int32) error { return r.st.checkSlot(r.m, slot, &r.held) }

func (r *modelRun) readMapKey(slot int32) error {
	u := uint8(r.rng.IntN(len(modelUserKeys)))
	k := r.st.key(slot)
	got, ok, err := r.st.mp.Get(k, modelUserKeys[u])
	want, wantOK := r.m.mp[slot][u]
	if err != nil || ok != wantOK || got != want {
		return fmt.Errorf("%w: slot %d map Get(%q) = %d %v %v, model %d %v", errMismatch, slot, modelUserKeys[u], got, ok, err, want, wantOK)
	}
	c, err := r.st.mp.Contains(k, modelUserKeys[u])
	if err != nil || c != wantOK {
		return fmt.Errorf("%w: slot %d map Contains(%q) = %v %v, model %v", errMismatch, slot, modelUserKeys[u], c, err, wantOK)
	}
	return nil
}

// readBurst reads a few slots (keys likely in the lower tier): the row cache fills and churns.
func (r *modelRun) readBurst(int32) error {
	for range 8 {
		if err := r.st.checkSlot(r.m, r.pick(), &r.held); err != nil {
			return err
		}
	}
	return nil
}

// batchSlots draws the slots of a batch: up to two chunks and a bit (BatchChunk), often
// repeating a slot.
func (r *modelRun) batchSlots() []int32 {
	slots := make([]int32, r.rng.IntN(2*BatchChunk+6))
	for i := range slots {
		if i > 0 && r.rng.IntN(6) == 0 {
			slots[i] = slots[r.rng.IntN(i)]
		} else {
			slots[i] = r.pick()
		}
	}
	return slots
}

// valGetBatch reads the values of a batch of slots with GetBatch: each as the model says (a
// single Get's result), the values intact together until the next write.
func (r *modelRun) valGetBatch(int32) error {
	slots := r.batchSlots()
	keys := make([]Key, len(slots))
	for i, sl := range slots {
		keys[i] = r.st.key(sl)
	}
	vals, ok := make([][]byte, len(keys)), make([]bool, len(keys))
	if err := r.st.val.GetBatch(keys, vals, ok); err != nil {
		return err
	}
	for i, sl := range slots {
		mv, mok := r.m.val[sl]
		want := modelBytes(nil, mv.seed, int(mv.n))
		if ok[i] != mok || (mok && !bytes.Equal(vals[i], want)) {
			return fmt.Errorf("%w: batch of %d, key %d: slot %d value = %s %v, model %s %v", errMismatch, len(slots), i, sl,
				shortBytes(vals[i]), ok[i], shortBytes(want), mok)
		}
		if mok {
			r.held = append(r.held, heldValue{sl, vals[i], want})
		}
	}
	return nil
}

// mapGetBatch reads a batch of (slot, user key) pairs with MapState.GetBatch: each as the model
// says (a single Get's result).
func (r *modelRun) mapGetBatch(int32) error {
	slots := r.batchSlots()
	keys, uks, us := make([]Key, len(slots)), make([]string, len(slots)), make([]uint8, len(slots))
	for i, sl := range slots {
		us[i] = uint8(r.rng.IntN(len(modelUserKeys)))
		keys[i], uks[i] = r.st.key(sl), modelUserKeys[us[i]]
	}
	vals, ok := make([]int64, len(keys)), make([]bool, len(keys))
	if err := r.st.mp.GetBatch(keys, uks, vals, ok); err != nil {
		return err
	}
	for i, sl := range slots {
		want, wantOK := r.m.mp[sl][us[i]]
		if ok[i] != wantOK || vals[i] != want {
			return fmt.Errorf("%w: batch of %d, pair %d: slot %d map Get(%q) = %d %v, model %d %v", errMismatch, len(slots), i, sl,
				uks[i], vals[i], ok[i], want, wantOK)
		}
	}
	return nil
}

// valPutBatch writes a batch of slots' values with PutBatch (the last value of a repeated slot
// wins). A refused key (a *BatchError) leaves the keys before it written and the rest not; the
// refused key itself follows write's rules (under budget pressure nothing, under faults its old
// or its new value).
func (r *modelRun) valPutBatch(int32) error {
	if err := r.checkHeld(); err != nil {
		return err
	}
	slots := r.batchSlots()
	keys, vs, bufs := make([]Key, len(slots)), make([]mval, len(slots)), make([][]byte, len(slots))
	for i, sl := range slots {
		keys[i], vs[i] = r.st.key(sl), r.value(sl)
		bufs[i] = modelBytes(nil, vs[i].seed, int(vs[i].n))
	}
	err := r.st.val.PutBatch(keys, bufs)
	r.held = r.held[:0]
	done := len(slots)
	var be *BatchError
	if err != nil {
		if !errors.As(err, &be) {
			return err
		}
		done = be.Index
	}
	for i := range done {
		r.m.val[slots[i]] = vs[i]
	}
	switch {
	case err == nil:
	case r.pressure && errors.Is(err, ErrMemoryBudget):
		r.budgetFails++
		return nil
	case r.faulty:
		sl := slots[done]
		old := r.m.slot(sl)
		r.m.val[sl] = vs[done]
		if cerr := r.st.checkSlot(r.m, sl, nil); cerr != nil {
			newer := r.m.slot(sl)
			r.m.setSlot(sl, old)
			if cerr2 := r.st.checkSlot(r.m, sl, nil); cerr2 != nil {
				r.m.setSlot(sl, newer)
				r.t.Fatalf("after a refused batch write (%v), slot %d is neither old (%v) nor new (%v)", err, sl, cerr2, cerr)
			}
		}
	}
	return err
}

// listHeld reads the list of slot and consumes its iterator only after reads of other slots
// (row-cache hits and misses, the lower reader's arena): a list batch stays valid until the
// next write.
func (r *modelRun) listHeld(slot int32) error {
	it := r.st.lst.Get(r.st.key(slot))
	for range 1 + r.rng.IntN(20) {
		o := r.pick()
		k := r.st.key(o)
		if _, _, err := r.st.val.Get(k); err != nil {
			return err
		}
		if _, _, err := r.st.red.Get(k); err != nil {
			return err
		}
		if _, _, err := r.st.agg.Get(k); err != nil {
			return err
		}
	}
	var got []int64
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil || !slices.Equal(got, r.m.lst[slot]) {
		return fmt.Errorf("%w: slot %d list held across reads = %v %v, model %v", errMismatch, slot, got, err, r.m.lst[slot])
	}
	return nil
}

// checkHeld: every value handed out since the last write still holds what it held.
func (r *modelRun) checkHeld() error { return heldIntact(r.held) }

// heldIntact: every value of held still holds what it held when it was read.
func heldIntact(held []heldValue) error {
	for _, h := range held {
		if !bytes.Equal(h.got, h.want) {
			return fmt.Errorf("%w: slot %d: a value handed out before the next write changed: %s, want %s",
				errMismatch, h.slot, shortBytes(h.got), shortBytes(h.want))
		}
	}
	return nil
}

// invalidate checks the values held, then forgets them (a write-like step follows).
func (r *modelRun) invalidate() error {
	err := r.checkHeld()
	r.held = r.held[:0]
	return err
}

// checkCache checks the row cache: Store.Check (its structure, and each entry against a read
// of the tiers with the cache bypassed), then the walk Check runs (engine.CheckRowCache) with a
// visit that checks each entry against the model: every cached key is a value-like key (value,
// reducing, aggregating) of the universe that the model holds now, with exactly the model's
// encoding. A stale or resurrected entry fails before it is read.
func (r *modelRun) checkCache() error {
	if r.st.s.Stats().Caches.RowSets == 0 {
		return nil
	}
	r.cacheChecks++
	if err := r.st.s.Check(); err != nil {
		return fmt.Errorf("%w: %w", errMismatch, err)
	}
	type want struct {
		slot    int32
		kind    string
		present bool
		enc     []byte
	}
	exp := map[string]want{}
	for slot := range r.w.u.slots() {
		key := r.st.key(slot)
		add := func(id uint16, kind string, present bool, enc []byte) {
			ck := base.AppendCompositeKey(nil, uint16(key.kg), id, key.b, key.ns)
			exp[string(ck)] = want{slot, kind, present, enc}
		}
		v, ok := r.m.val[slot]
		add(r.st.val.id, "value", ok, modelBytes(nil, v.seed, int(v.n)))
		rv, ok := r.m.red[slot]
		add(r.st.red.id, "reducing", ok, Int64.Append(nil, rv))
		av, ok := r.m.agg[slot]
		add(r.st.agg.id, "aggregating", ok, avgCodec{}.Append(nil, av))
		if r.st.tv != nil { // TTL values are cached with their timestamps
			tv, ok := r.m.tv[slot]
			add(r.st.tv.id, "ttl-value", ok, Int64.Append(base.AppendTS(nil, tv.ts), tv.v))
			tr, ok := r.m.tr[slot]
			add(r.st.tr.id, "ttl-reducing", ok, Int64.Append(base.AppendTS(nil, tr.ts), tr.v))
		}
	}
	return r.st.s.e.CheckRowCache(func(ck, cv []byte) error {
		e, ok := exp[string(ck)]
		if !ok && bytes.Contains(ck, []byte("extra-")) {
			return nil // a value of the rescale parts' extra states (rescaleExtrasWrite), not modelled here
		}
		if !ok {
			return fmt.Errorf("%w: row cache holds a key of no value-like state: %x", errMismatch, ck)
		}
		if !e.present {
			// TTL cleanup in compactions may have removed an expired value the cache still
			// holds (rowcache.go, invariant 4); it is never returned.
			if ts, ok := base.TS(cv); ok && strings.HasPrefix(e.kind, "ttl-") && base.Expired(ts, modelTTL, r.now.Load()) {
				return nil
			}
			return fmt.Errorf("%w: row cache holds slot %d %s = %x, which the model says is absent (a stale entry)", errMismatch, e.slot, e.kind, cv)
		}
		if !bytes.Equal(cv, e.enc) {
			return fmt.Errorf("%w: row cache holds slot %d %s = %x, model %x (a stale entry)", errMismatch, e.slot, e.kind, cv, e.enc)
		}
		r.cachedSeen++
		return nil
	})
}

// pressureErr drops ErrMemoryBudget under budget pressure (background work that cannot get
// memory now).
func (r *modelRun) pressureErr(err error) error {
	if r.pressure && errors.Is(err, ErrMemoryBudget) {
		r.budgetFails++
		return nil
	}
	return err
}

func (r *modelRun) seal(int32) error {
	if err := r.invalidate(); err != nil {
		return err
	}
	return r.pressureErr(r.st.s.seal())
}

func (r *modelRun) drain(int32) error {
	if err := r.invalidate(); err != nil {
		return err
	}
	return r.pressureErr(r.st.s.e.Drain())
}

func (r *modelRun) wait(int32) error {
	if err := r.invalidate(); err != nil {
		return err
	}
	return r.pressureErr(r.st.s.WaitBackground())
}

// evict starts an eviction; nothing is installed until the next write, so values read before
// stay valid.
func (r *modelRun) evict(int32) error {
	r.st.s.Evict()
	return nil
}

func (r *modelRun) evictDrain(slot int32) error {
	r.st.s.Evict()
	return r.drain(slot)
}

// pushDown moves everything into the lower tier (seal, wait, evict every slice), so the next
// reads go through the row cache.
func (r *modelRun) pushDown(int32) error {
	if err := r.invalidate(); err != nil {
		return err
	}
	s := r.st.s
	if err := s.seal(); err != nil {
		return r.pressureErr(err)
	}
	if err := s.WaitBackground(); err != nil {
		return r.pressureErr(err)
	}
	for i := 0; i < 200 && s.Stats().Slices.Count > 0; i++ {
		if ok, _ := s.Evict(); !ok { // false on a sticky failure too: the next steps report it
			break
		}
		if err := s.WaitBackground(); err != nil {
			return fmt.Errorf("WaitBackground after evict: %w", err)
		}
	}
	if st := s.Stats(); st.Fresh.SealedSegments != 0 {
		return fmt.Errorf("WaitBackground left %d sealed segments", st.Fresh.SealedSegments)
	}
	return nil
}

// openStore opens the run's directory and registers the states.
func (r *modelRun) openStore() error {
	r.held = r.held[:0] // values of a closed Store (whoever closed it checked them)
	s, err := open(r.dir, r.opts, r.adjust)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if r.st, err = r.register(s); err != nil {
		s.Close()
		return err
	}
	return nil
}

// addStats adds the open Store's statistics to the run's totals (before it closes).
func (r *modelRun) addStats() {
	st := r.st.s.Stats()
	r.total.Slices.Transforms += st.Slices.Transforms
	r.total.Slices.Compactions += st.Slices.Compactions
	r.total.Slices.Evictions += st.Slices.Evictions
	r.total.LSM.Flushes += st.LSM.Flushes
	r.total.LSM.Compactions += st.LSM.Compactions
	r.total.Stalls.BackpressureWaits += st.Stalls.BackpressureWaits
	r.total.Caches.RowHits += st.Caches.RowHits
	r.total.Caches.RowMisses += st.Caches.RowMisses
	r.total.LSM.PersistFiles += st.LSM.PersistFiles
	r.total.TTL.CompactionEntries += st.TTL.CompactionEntries
	r.total.TTL.SnapshotEntries += st.TTL.SnapshotEntries
	r.total.HotTier.Hits += st.HotTier.Hits
	r.total.HotTier.Misses += st.HotTier.Misses
	r.total.HotTier.Syncs += st.HotTier.Syncs
	r.total.HotTier.WrittenBack += st.HotTier.WrittenBack
	r.total.HotTier.Drops += st.HotTier.Drops
	r.total.HotTier.TablesOff += st.HotTier.TablesOff
}

// checkEvery checks every slot, the operator states and the row cache.
func (r *modelRun) checkEvery() error {
	if r.st.tv != nil { // TTL reads may write: check the values held, forget them
		if err := r.invalidate(); err != nil {
			return err
		}
	}
	if err := r.st.checkAll(r.m); err != nil {
		return err
	}
	if err := r.st.checkOps(r.m); err != nil {
		return err
	}
	if err := r.st.checkTimers(r.m); err != nil {
		return err
	}
	return r.checkCache()
}

func (r *modelRun) reopen(int32) error {
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.invalidate(); err != nil {
		return err
	}
	r.addStats()
	if err := r.st.s.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	r.persisted = r.m.clone()
	if err := r.openStore(); err != nil {
		return err
	}
	return r.checkEvery()
}

// crash: the file system keeps only what was synced; the Store reopens to its last Close.
func (r *modelRun) crash(int32) error {
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.invalidate(); err != nil {
		return err
	}
	r.addStats()
	r.fault.Crash()
	// The process dies: nothing more is persisted. Discard frees the memory; its errors are
	// the crashed file system's.
	if err := r.st.s.Discard(); err != nil && !errors.Is(err, vfs.ErrCrashed) {
		return fmt.Errorf("discard at the crash: %v", err)
	}
	if !r.st.s.closed {
		return errors.New("the Store is open after Discard")
	}
	r.mem = r.mem.CrashClone()
	r.fault = vfs.NewFaultFS(r.mem)
	r.opts.fs = r.fault
	if err := r.ckInit(); err != nil { // the storage on the crashed file system
		return err
	}
	r.m = r.persisted.clone()
	if err := r.openStore(); err != nil {
		return err
	}
	return r.checkEvery()
}

// noSpaceClose fails a Close with ENOSPC part-way through moving the tiers into the LsmStore
// (the Store stays open, part of its state moved down: list operands must not be there twice),
// checks every read and the row cache in that state twice (the second pass reads what the
// first cached), then closes once space is back and reopens.
func (r *modelRun) noSpaceClose(int32) error {
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.invalidate(); err != nil {
		return err
	}
	r.fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpWrite, vfs.OpSync, vfs.OpCreate), Nth: 1 + r.rng.Int64N(6), Sticky: true,
		Err: errNoSpaceErrno})
	err := r.st.s.Close()
	if err != nil {
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, errNoSpaceErrno) {
			r.fault.ClearFaults()
			return fmt.Errorf("close on a full disk: %v, want ErrNoSpace", err)
		}
		r.noSpaceFails++
		// With the hot tier holding writes Close could not write back, a read across keys
		// needs that write-back and fails while the engine's writes fail (Options.HotTierSize):
		// the reads are checked after the reopen below (checkEvery) instead.
		checks := 2
		if r.st.s.hot.dirty > 0 {
			checks = 0
		}
		for range checks {
			if err := r.st.checkAll(r.m); err != nil {
				return fmt.Errorf("after a Close that failed with ENOSPC: %w", err)
			}
			if err := r.checkCache(); err != nil {
				return fmt.Errorf("after a Close that failed with ENOSPC: %w", err)
			}
		}
		r.fault.ClearFaults()
		r.addStats()
		err := r.st.s.Close()
		// The tier's write-back waits for the engine's retry of its failed background work
		// (a failed Close keeps the Store open): Close again, for up to a second.
		for i := 0; err != nil && checks == 0 && i < 50; i++ {
			time.Sleep(20 * time.Millisecond)
			err = r.st.s.Close()
		}
		if err != nil {
			return fmt.Errorf("close once space is back: %w", err)
		}
	} else {
		r.addStats()
	}
	r.fault.ClearFaults()
	r.persisted = r.m.clone()
	if err := r.openStore(); err != nil {
		return err
	}
	return r.checkEvery()
}

// modelConfig is one configuration of TestModel: how the Store is opened, which steps it
// draws, and what a run must have exercised.
type modelConfig struct {
	name string
	// dir: "" in memory; "mem" a MemFS directory (crashable, faults); "os" a real directory
	// (FaultFS over the OS: faults, no crashes).
	dir      string
	opts     Options
	adjust   func(*engine.Options)
	lower    bool // in memory with an enginetest.MemLower lower tier
	workload func(maxP int) *modelWorkload
	pressure bool
	// slow: the default number of steps is divided by it (large values, many keys).
	slow int
	// raceSlow: under -race the steps are divided by it as well. The race detector's cost
	// grows with the bytes a step copies (its shadow of every range memmove touches and every
	// allocation), so a configuration of megabyte values spends most of its -race time there;
	// scripts/test.sh runs it without -race at its full -short size in the plain step.
	raceSlow int
	// forced lifecycle steps: each runs once, at its fraction of the run, whatever the draws.
	forced []stepKind
	// changelog: the Store starts with the changelog on (CheckpointOptions.Changelog).
	changelog bool
	// mustChangelog: steps that must have run at least once with the changelog on.
	mustChangelog []stepKind
	// must: what the run must have exercised (checked at the end).
	// (SliceTable compactions are only required where no push-down empties the SliceTable
	// often.)
	mustCompact, mustEvict, mustLSMCompact, mustRowCache, mustPressure bool
	// mustTTL: TTL steps ran, and compactions and checkpoints removed expired data.
	mustTTL bool
}

// dirWeights add the steps of a Store with a directory (and the operator state steps, which
// checkpoints, restores and rescales carry).
var dirWeights = readWeights.withOps().withTimers().with(15, stepEvict, stepEvictDrain, stepCheckCache).with(12, stepPushDown).
	with(2, stepReopen, stepCrash, stepNoSpace).with(6, stepCheckpoint, stepCkNotify).with(1, stepRestore, stepRescale, stepCkOutage, stepSavepoint)

var modelConfigs = []modelConfig{
	{
		// In memory, no lower tier: FreshTable and SliceTable (4 buckets: long chains,
		// compactions).
		name:   "mem",
		opts:   Options{MaxParallelism: 64, MemoryBudget: 1 << 30, SegmentSize: 16 << 20, BackgroundWorkers: 2},
		adjust: func(o *engine.Options) { o.BucketBits = 2 },
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 48, weights: readWeights.withOps()}
		},
		mustCompact: true,
	},
	{
		// In memory over enginetest.MemLower: evictions, and a row cache of 8 sets in front of
		// the lower tier.
		name:  "memlower",
		lower: true,
		opts:  Options{MaxParallelism: 64, MemoryBudget: 1 << 30, SegmentSize: 16 << 20, BackgroundWorkers: 2},
		adjust: func(o *engine.Options) {
			o.LowWater, o.EvictionBatch, o.BucketBits, o.RowCacheSize = 1, 16<<10, 2, 4<<10
		},
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 48, hot: true,
				weights: readWeights.with(15, stepEvict, stepEvictDrain, stepCheckCache).with(8, stepPushDown)}
		},
		mustCompact: true, mustEvict: true, mustRowCache: true,
	},
	{
		// A MemFS directory: small bucket map and eviction batches (many L0 files, LSM
		// compactions), evictions only when asked, a small row cache; reopens, crashes,
		// full disks.
		name: "memfs",
		dir:  "mem",
		opts: Options{MaxParallelism: 64, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 8 << 10},
		adjust: func(o *engine.Options) {
			o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0
			// Lists as chains of small pieces, read piece by piece; maps walked in tiny chunks.
			o.MaxListPiece, o.ListEagerBytes, o.MapChunk = 200, 64, 2
		},
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 300, hot: true,
				weights: dirWeights}
		},
		forced:    []stepKind{stepReopen, stepCheckpoint, stepNoSpace, stepRescale, stepCrash, stepRestore, stepSavepoint},
		mustEvict: true, mustLSMCompact: true, mustRowCache: true,
	},
	{
		// The memfs configuration with the changelog on (CheckpointOptions.Changelog): every
		// write also logged, checkpoints of the log's tail on top of materializations forced
		// by a step, truncation at completion; the toggle step restores into a Store with the
		// changelog switched on or off, so checkpoints of both kinds are restored both ways.
		name: "changelog",
		dir:  "mem",
		opts: Options{MaxParallelism: 64, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 8 << 10},
		adjust: func(o *engine.Options) {
			o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0
			o.MaxListPiece, o.ListEagerBytes, o.MapChunk = 200, 64, 2
		},
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 300, hot: true,
				weights: dirWeights.with(3, stepMaterialize).with(1, stepClToggle)}
		},
		changelog: true,
		forced: []stepKind{stepCheckpoint, stepMaterialize, stepCheckpoint, stepCkNotify, stepCrash, stepRestore,
			stepClToggle, stepReopen, stepCkOutage, stepClToggle, stepRescale, stepNoSpace, stepCkOutage, stepSavepoint},
		mustChangelog: []stepKind{stepCheckpoint, stepCkNotify, stepMaterialize, stepRestore, stepRescale, stepCrash,
			stepReopen, stepNoSpace, stepClToggle, stepCkOutage},
		mustEvict: true, mustRowCache: true,
	},
	{
		// The changelog configuration with the hot tier on (hot.go), small enough to fill
		// and drop: point operations go through it, every cut and every read across keys
		// writes it back, and the hot-check step checks its invariants (a clean entry equals
		// the tiers) before a write-back or a drop.
		name: "hot-tier",
		dir:  "mem",
		opts: Options{MaxParallelism: 64, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 8 << 10, HotTierSize: 1 << 20},
		adjust: func(o *engine.Options) {
			o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0
			o.MaxListPiece, o.ListEagerBytes, o.MapChunk = 200, 64, 2
		},
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 300, hot: true,
				weights: dirWeights.with(3, stepMaterialize).with(1, stepClToggle).with(20, stepHotCheck).with(2, stepHotJudge)}
		},
		changelog: true,
		forced: []stepKind{stepHotCheck, stepCheckpoint, stepMaterialize, stepCkNotify, stepHotJudge, stepCrash, stepRestore,
			stepReopen, stepCkOutage, stepHotCheck, stepRescale, stepNoSpace, stepSavepoint, stepHotCheck, stepHotJudge},
		// Its steps in full under qemu too (as the changelog configuration): at a quarter, a
		// run can restore no checkpoint with a changelog tail to replay.
		mustChangelog: []stepKind{stepCheckpoint, stepMaterialize, stepRestore},
		mustEvict:     true,
	},
	{
		// The memfs configuration with TTL states (ttl_model_test.go) and a clock that jumps:
		// expiry on read, cleanup in compactions and full snapshots, timestamps across
		// checkpoints, restores, rescales, reopens and crashes. No full-disk Close: a TTL read
		// that removes expired data is a write, which a full disk refuses.
		name: "ttl",
		dir:  "mem",
		opts: Options{MaxParallelism: 64, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 8 << 10},
		adjust: func(o *engine.Options) {
			o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0
			o.MaxListPiece, o.ListEagerBytes, o.MapChunk = 200, 64, 2
		},
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 300, hot: true, ttl: true,
				weights: dirWeights.with(0, stepNoSpace).with(150, stepTTLWrite).with(60, stepTTLRead).with(25, stepClock)}
		},
		forced:    []stepKind{stepReopen, stepCheckpoint, stepRescale, stepCrash, stepRestore},
		mustEvict: true, mustLSMCompact: true, mustRowCache: true, mustTTL: true,
	},
	{
		// A row cache of one set (every key collides), MaxParallelism 1, keys and values
		// around the slot limit.
		name: "one-set",
		dir:  "mem",
		opts: Options{MaxParallelism: 1, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: engine.MinRowCacheSize},
		adjust: func(o *engine.Options) { o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0 },
		workload: func(maxP int) *modelWorkload {
			return &modelWorkload{u: edgeUniverse(maxP, nil), maxVal: 300, hot: true, weights: dirWeights}
		},
		forced:    []stepKind{stepReopen, stepCheckpoint, stepNoSpace, stepRescale, stepCrash, stepRestore},
		mustEvict: true, mustRowCache: true,
	},
	{
		// MaxParallelism 32768 over a key-group range, a row cache of the default size.
		name: "kg-range",
		dir:  "mem",
		opts: Options{MaxParallelism: 32768, KeyGroups: &KeyGroupRange{Start: 100, End: 20000}, MemoryBudget: 128 << 20,
			SegmentSize: 16 << 20, BackgroundWorkers: 2, BlockCacheSize: 1 << 20},
		adjust: func(o *engine.Options) {
			o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0
			o.MaxListPiece, o.ListEagerBytes, o.MapChunk = 100, 1, 1
		},
		workload: func(maxP int) *modelWorkload {
			return &modelWorkload{u: edgeUniverse(maxP, &KeyGroupRange{Start: 100, End: 20000}), maxVal: 300, hot: true,
				weights: dirWeights}
		},
		forced:    []stepKind{stepReopen, stepCheckpoint, stepRescale, stepCrash, stepRestore},
		mustEvict: true, mustRowCache: true,
	},
	{
		// A small budget and large values: segment rolls, backpressure, flushes, writes
		// refused with ErrMemoryBudget (allowed: nothing changes). No merges (a merge refused
		// part-way is not modelled).
		name: "pressure",
		dir:  "mem",
		opts: Options{MaxParallelism: 128, MemoryBudget: 32 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 2 * engine.MinRowCacheSize, BackpressureTimeout: 2 * time.Second},
		adjust: func(o *engine.Options) { o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0 },
		workload: func(maxP int) *modelWorkload {
			return &modelWorkload{u: edgeUniverse(maxP, nil), maxVal: 300, bigVals: true, hot: true,
				weights: dirWeights.with(0, stepListMerge, stepRedMerge, stepAggMerge, stepNoSpace, stepCkOutage)}
		},
		pressure:     true,
		slow:         4,
		raceSlow:     4, // 77 % of its -race CPU was the race runtime's range shadowing
		forced:       []stepKind{stepReopen, stepCheckpoint, stepRescale, stepCrash},
		mustRowCache: true, mustPressure: true,
	},
	{
		// A real directory (FaultFS over the OS file system), more keys than the others and
		// kilobyte values, the default row cache; reopens and full disks, no crashes.
		name:   "os",
		dir:    "os",
		opts:   Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2},
		adjust: func(o *engine.Options) { o.EvictionBatch, o.BucketBits = 64<<10, 4 },
		workload: func(int) *modelWorkload {
			return &modelWorkload{u: plainUniverse("os-key-%06d", 1500, "", "w1", "window-2"), maxVal: 1500,
				weights: dirWeights.with(0, stepCrash).with(60, stepReadBurst)}
		},
		slow:      4,
		forced:    []stepKind{stepReopen, stepCheckpoint, stepRescale, stepNoSpace, stepRestore},
		mustEvict: true, mustRowCache: true,
	},
}

// TestModel drives every state kind with random steps (modelSteps) and compares every read
// with the model, while the tiers move the data underneath (seals, drains, evictions, pushes
// into the lower tier) and, with a directory, the Store is reopened, crashed and closed on a
// full disk; the row cache's contents are checked against the model. Each configuration
// (modelConfigs) is a subtest. It logs its seed; replay a failure with
// go test -run 'TestModel/<config>' -seed N, and run longer with -steps N or -duration D.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	for i, cfg := range modelConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			steps := 64000
			if testing.Short() {
				steps = 16000
			}
			steps = raceScale(steps)
			if os.Getenv("STRATA_EMULATED") != "" && len(cfg.mustChangelog) == 0 {
				// Under qemu-user (about 20× slower) the model runs to check the arm64 kernels
				// inside the whole engine, which a quarter of the steps reaches as well: every
				// configuration still seals, transforms, compacts and evicts as it must. The
				// changelog configuration keeps its steps: at a quarter it materialized once
				// and replayed nothing.
				steps /= 4
			}
			steps /= max(cfg.slow, 1)
			if raceEnabled {
				steps /= max(cfg.raceSlow, 1)
			}
			if *modelStepsN > 0 {
				steps = *modelStepsN
			}
			t.Logf("seed %d (replay: go test -run 'TestModel/%s$' -seed %d)", seed, cfg.name, seed)
			r := newModelRunFor(t, cfg, rand.New(rand.NewPCG(uint64(seed), uint64(i))))
			defer func() {
				if r.st != nil && !r.st.s.closed {
					r.st.s.Close()
				}
			}()
			fail := func(format string, args ...any) {
				t.Helper()
				t.Fatalf("seed %d config %s step %d: %s (replay: go test -run 'TestModel/%s$' -seed %d)",
					seed, cfg.name, r.op, fmt.Sprintf(format, args...), cfg.name, seed)
			}
			start := time.Now()
			progress := func() float64 {
				if *modelDuration > 0 {
					return float64(time.Since(start)) / float64(*modelDuration)
				}
				return float64(r.op) / float64(steps)
			}
			forced := 0
			for r.op = 0; progress() < 1; r.op++ {
				if forced < len(cfg.forced) && progress() >= float64(forced+1)/float64(len(cfg.forced)+1) {
					k := cfg.forced[forced]
					forced++
					r.counts[k]++
					if r.changelog {
						r.clCounts[k]++
					}
					if err := modelSteps[k].run(r, 0); err != nil {
						fail("%s (forced): %v", modelSteps[k].name, err)
					}
				}
				if err := r.step(); err != nil {
					fail("%v", err)
				}
				if r.op%2000 == 1999 {
					if err := r.checkEvery(); err != nil {
						fail("check of every slot: %v", err)
					}
				}
			}
			if cfg.changelog {
				// Every step of mustChangelog runs at least once with the changelog on: the
				// draws may have left one to a Store with it off (toggles); run it now.
				for _, k := range cfg.mustChangelog {
					if r.clCounts[k] > 0 {
						continue
					}
					t.Logf("%s: %s not drawn with the changelog on: run at the end", cfg.name, modelSteps[k].name)
					var pre []stepKind
					if !r.changelog {
						pre = append(pre, stepClToggle)
					}
					if k == stepCkNotify {
						pre = append(pre, stepCheckpoint)
					}
					for _, k := range append(pre, k) {
						r.counts[k]++
						if r.changelog {
							r.clCounts[k]++
						}
						if err := modelSteps[k].run(r, 0); err != nil {
							fail("%s (at the end): %v", modelSteps[k].name, err)
						}
					}
				}
			}
			// The operator state and timer steps the checks below require run at the end if the
			// draws left them out (a short run: -race and a slow configuration draw about 1000
			// steps, of which a weight-3 step is absent one run in twenty).
			var must []stepKind
			if r.w.hasOps() {
				must = append(must, stepOpAdd, stepBcPut, stepOpRead)
			}
			for _, k := range must {
				if r.counts[k] == 0 {
					t.Logf("%s: %s not drawn: run at the end", cfg.name, modelSteps[k].name)
					r.counts[k]++
					if err := modelSteps[k].run(r, 0); err != nil {
						fail("%s (at the end): %v", modelSteps[k].name, err)
					}
				}
			}
			if r.w.hasTimers() && r.timers.fired == 0 {
				t.Logf("%s: no timer fired: register a due one and advance at the end", cfg.name)
				if err := r.timerFinale(); err != nil {
					fail("timers at the end: %v", err)
				}
			}
			if err := r.finish(); err != nil {
				fail("%v", err)
			}
			var drawn []string
			for k, n := range r.counts {
				if n > 0 {
					drawn = append(drawn, fmt.Sprintf("%s %d", modelSteps[k].name, n))
				}
			}
			tot := r.total
			t.Logf("%s: %d steps in %v (%s); %d transforms, %d compactions, %d evictions, %d flushes, %d LSM compactions, %d backpressure waits, %d budget failures, %d invalidated iterations, %d Closes failed with ENOSPC; row cache %d hits %d misses, %d checks saw %d entries",
				cfg.name, r.op, time.Since(start).Round(time.Millisecond), strings.Join(drawn, ", "), tot.Slices.Transforms,
				tot.Slices.Compactions, tot.Slices.Evictions, tot.LSM.Flushes, tot.LSM.Compactions, tot.Stalls.BackpressureWaits, r.budgetFails,
				r.invalid, r.noSpaceFails, tot.Caches.RowHits, tot.Caches.RowMisses, r.cacheChecks, r.cachedSeen)
			if h := tot.HotTier; cfg.opts.HotTierSize > 0 {
				t.Logf("%s: hot tier: %d hits, %d misses, %d write-backs of %d entries, %d drops, %d tables turned off", cfg.name, h.Hits, h.Misses, h.Syncs, h.WrittenBack, h.Drops, h.TablesOff)
				if h.Hits == 0 || h.WrittenBack == 0 || h.Drops == 0 {
					t.Errorf("%s: the hot tier was not exercised (hits, write-backs and drops all needed)", cfg.name)
				}
			}
			if tot.Slices.Transforms == 0 || (tot.Slices.Compactions == 0 && cfg.mustCompact) {
				fail("the run did not exercise the SliceTable: %d transforms, %d compactions", tot.Slices.Transforms, tot.Slices.Compactions)
			}
			if cfg.mustEvict && tot.Slices.Evictions == 0 {
				fail("the run evicted nothing")
			}
			if cfg.mustLSMCompact && tot.LSM.Compactions == 0 {
				fail("the run made no LSM compaction")
			}
			if cfg.mustRowCache && (tot.Caches.RowHits == 0 || tot.Caches.RowMisses == 0 || r.cachedSeen == 0) {
				fail("the run did not exercise the row cache: %d hits, %d misses, %d cached entries seen",
					tot.Caches.RowHits, tot.Caches.RowMisses, r.cachedSeen)
			}
			if cfg.dir != "" {
				t.Logf("%s: checkpoints: %d cut, %d durable kept, %d failed; %d restores, %d rescales (%d parts checked a share of an operator list)",
					cfg.name, r.ck.id, len(r.ck.durable), r.ck.failed, r.ck.restores, r.ck.rescales, r.ck.opSplits)
				if r.ck.rescales == 0 {
					fail("the run rescaled nothing")
				}
			}
			if r.w.hasOps() && (r.counts[stepOpAdd] == 0 || r.counts[stepBcPut] == 0 || r.counts[stepOpRead] == 0) {
				fail("the run did not exercise the operator state")
			}
			if r.w.hasTimers() {
				t.Logf("%s: timers: %d registered, %d fired (%d inside a callback that registered them), %d deleted, %d pending at the end",
					cfg.name, r.timers.registered, r.timers.fired, r.timers.sameAdvance, r.timers.deleted, len(r.m.tim[0])+len(r.m.tim[1]))
				// A short run (-race, a slow configuration) fires a few dozen timers: a callback
				// registering a due one and a delete of a pending one are then not certain.
				if r.timers.fired == 0 || r.timers.registered > 200 && (r.timers.sameAdvance == 0 || r.timers.deleted == 0) {
					fail("the run did not exercise the timers: %+v", r.timers)
				}
			}
			if cfg.mustTTL {
				t.Logf("%s: TTL: %d expired entries removed by compactions, %d by checkpoints; %d expiries seen by reads",
					cfg.name, tot.TTL.CompactionEntries, tot.TTL.SnapshotEntries, r.ttlExpired)
				if r.counts[stepTTLWrite] == 0 || r.counts[stepClock] == 0 || tot.TTL.CompactionEntries == 0 ||
					tot.TTL.SnapshotEntries == 0 || r.ttlExpired == 0 {
					fail("the run did not exercise TTL")
				}
			}
			if slices.Contains(cfg.forced, stepHotJudge) && tot.HotTier.TablesOff == 0 {
				fail("the run turned no hot table off (H9)")
			}
			if cfg.mustPressure && tot.Stalls.BackpressureWaits+tot.LSM.Flushes+int64(r.budgetFails) == 0 {
				fail("the run saw no budget pressure")
			}
			for _, k := range cfg.forced {
				if r.counts[k] == 0 {
					fail("the run never ran %s", modelSteps[k].name)
				}
			}
			if cfg.changelog {
				t.Logf("%s: changelog: %d materializations, %d toggles, %d changelog records replayed by restores; %d storage outages (%d materializations failed in them)",
					cfg.name, r.ck.materializations, r.ck.toggles, r.ck.replayed, r.ck.outages, r.ck.outageFails)
				for _, k := range cfg.mustChangelog {
					if r.clCounts[k] == 0 {
						fail("the run never ran %s with the changelog on", modelSteps[k].name)
					}
				}
				if r.ck.materializations == 0 || r.ck.toggles == 0 || r.ck.replayed == 0 {
					fail("the run did not exercise the changelog: %d materializations, %d toggles, %d records replayed",
						r.ck.materializations, r.ck.toggles, r.ck.replayed)
				}
			}
		})
	}
}

// newModelRunFor opens cfg's Store and returns a run over it.
func newModelRunFor(t *testing.T, cfg modelConfig, rng *rand.Rand) *modelRun {
	r := &modelRun{t: t, rng: rng, m: newModel(), pressure: cfg.pressure, opts: cfg.opts, adjust: cfg.adjust,
		changelog: cfg.changelog}
	switch cfg.dir {
	case "":
		if cfg.lower {
			low := enginetest.NewMemLower()
			r.adjust = func(o *engine.Options) { cfg.adjust(o); o.Lower = low }
		}
	case "mem":
		r.dir, r.mem = "/db", vfs.NewMem()
		r.fault = vfs.NewFaultFS(r.mem)
		r.opts.fs = r.fault
	case "os":
		r.dir = filepath.Join(t.TempDir(), "db")
		r.fault = vfs.NewFaultFS(vfs.Default())
		r.opts.fs = r.fault
	}
	maxP := r.opts.MaxParallelism
	r.w = cfg.workload(maxP)
	if r.w.ttl {
		r.now = new(atomic.Int64)
		r.now.Store(modelClockStart)
		r.opts.Clock = r.now.Load
	}
	r.persisted = r.m.clone()
	if err := r.ckInit(); err != nil {
		t.Fatal(err)
	}
	if err := r.openStore(); err != nil {
		t.Fatal(err)
	}
	return r
}

// finish drains the background work, checks everything twice (the first pass fills the row
// cache, the second reads its hits), and, with a directory, closes and checks the reopened
// Store; the Store is closed after.
func (r *modelRun) finish() error {
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.pushDown(0); err != nil {
		return fmt.Errorf("final push-down: %w", err)
	}
	for range 2 {
		if err := r.checkEvery(); err != nil {
			return fmt.Errorf("final check: %w", err)
		}
	}
	if r.dir != "" {
		if err := r.reopen(0); err != nil {
			return fmt.Errorf("final reopen: %w", err)
		}
	}
	r.addStats()
	return r.st.s.Close()
}

// shortBytes formats b for a message: its length and at most its first 40 bytes.
func shortBytes(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("[%d bytes] %x...", len(b), b[:40])
	}
	return fmt.Sprintf("[%d bytes] %x", len(b), b)
}
