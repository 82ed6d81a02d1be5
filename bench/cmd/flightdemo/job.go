package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/trace"
)

// op is a kind of state operation whose latency is sampled.
type op int

const (
	opAggAdd    op = iota // AggregatingState.Add: per-route delay statistics
	opListAdd             // ListState.Add: per-route last delays
	opListTrim            // ListState.Get + Update with the last lastN (when the list exceeds lastN)
	opMapGet              // MapState.Get: per-origin destination stats
	opMapPut              // MapState.Put
	opReduceAdd           // ReducingState.Add: per-route, per-day max delay
	opDayClose            // ReducingState.Get + Clear of one (route, day) when the day is over
	opHistAdd             // ListState.Add: the delays of a route and day, kept (the flight history)
	numOps
)

var opNames = [numOps]string{"agg.add", "list.add", "list.trim", "map.get", "map.put", "reduce.add", "day.close", "hist.add"}

// job replays a trace through Strata keyed state, one event at a time, as a Flink task would:
// the Key of every route and origin is built once (Flink's setCurrentKey) and reused.
//
// The keyed state is split over one or more parts, each a Store owning a key-group range (the
// subtasks of a keyed operator at some parallelism); every Key goes to the part owning its key
// group, so the route states of a flight and the origin state of its airport may live in two
// different Stores. Keys are built once: a Key depends on MaxParallelism only, not on the Store.
//
// Invariants:
//
//  1. listLen[ki] is the length of route key ki's list in the ListState (the list is trimmed to
//     lastN whenever an Add makes it exceed lastN, so it never holds more than lastN+1).
//  2. opened holds every route key index with a ReducingState value in namespace day, once;
//     openedDay[ki] == day+1 exactly for those.
//  3. Everything the replay of rows [i, n) depends on, besides the trace, is the state after
//     rows [0, i) (keyed state, timers and the airports broadcast state) plus day, days and the
//     event-time operators' largest event time, watermark and output (et.maxT, et.wm, et.out):
//     listLen and opened are re-derived from the state by resume (invariants 1 and 2 say how),
//     the zones from the broadcast state, and day, days, maxT, wm and out travel in the
//     checkpoint's input position (position.go); et.regDay is a cache of registered timers
//     (registering again is a no-op), cleared on restore. So a restore from a checkpoint at
//     row i followed by the replay of [i, n) ends in the state and the digests of a replay of
//     [0, n).
//  4. et.sets[ai] equals the merging window set in airport key ai's ValueState (written
//     through on every change; re-read by resume).
type job struct {
	tr *trace.Trace
	K  int

	parts      []*part // the Stores, by subtask index
	routePart  []uint8 // by route key index: the part owning its key group
	originPart []uint8 // by origin key index

	routeKeys  []strata.Key // by route key index
	originKeys []strata.Key // by origin key index

	listLen   []uint8
	openedDay []uint32
	opened    []int32
	day       uint32
	dayNS     []byte // namespace of the open day: the day number, 8 bytes big endian
	days      dayDigest
	onDay     func(ki int, day uint32, maxDelay int16)

	ck *checkpointer // nil: no checkpoints

	et etJob // the event-time operators (eventtime.go)

	sampleMask int // latency is sampled on events with index&sampleMask == 0
	lat        [numOps]hist
	trimBuf    []int16
}

// part is the job's states on one Store.
type part struct {
	store *strata.Store
	agg   *strata.AggregatingState[int16, delayAcc, delayAcc]
	list  *strata.ListState[int16]
	dests *strata.MapState[string, destStats]
	daily *strata.ReducingState[int16]
	hist  *strata.ListState[int16] // route, ns = day: every delay of the day, kept
	et    etPart                   // the event-time operators' states (eventtime.go)
}

// etConfig configures the event-time operators of a job (eventtime.go).
type etConfig struct {
	Bound    time.Duration      // the watermark's out-of-orderness bound
	Every    int                // the watermark's period in rows; 0: wmEvery
	Clock    *eventClock        // the Stores' Options.Clock, which the job drives
	Airports map[string]airport // fills the broadcast state of new Stores; nil when restoring
}

// newJob builds every key of trace tr at scale K and registers the states on stores (see
// attach); the stores must share one MaxParallelism and have ec.Clock as their clock.
func newJob(tr *trace.Trace, K int, ec etConfig, stores ...*strata.Store) (*job, error) {
	if len(stores) == 0 {
		return nil, fmt.Errorf("flightdemo: a job needs a Store")
	}
	j := &job{tr: tr, K: K, sampleMask: 63}
	s := stores[0]
	j.routeKeys = make([]strata.Key, len(tr.Routes)*K)
	for ki := range j.routeKeys {
		j.routeKeys[ki] = s.Key([]byte(routeKeyName(tr, K, ki)))
	}
	j.originKeys = make([]strata.Key, len(tr.Airports)*K)
	for oi := range j.originKeys {
		j.originKeys[oi] = s.Key([]byte(originKeyName(tr, K, oi)))
	}
	j.listLen = make([]uint8, len(j.routeKeys))
	j.openedDay = make([]uint32, len(j.routeKeys))
	j.routePart = make([]uint8, len(j.routeKeys))
	j.originPart = make([]uint8, len(j.originKeys))
	j.trimBuf = make([]int16, 0, lastN+1)
	j.et = etJob{bound: ec.Bound.Milliseconds(), every: ec.every(), maxT: math.MinInt64, wm: math.MinInt64, clock: ec.Clock,
		regDay: make([]uint64, len(j.routeKeys)), keyIdx: map[string]int{}, sets: make([][]sessEntry, len(j.originKeys))}
	for ki, k := range j.routeKeys {
		j.et.keyIdx[string(k.Bytes())] = ki
	}
	for oi, k := range j.originKeys {
		j.et.keyIdx[string(k.Bytes())] = oi
	}
	if err := j.attach(stores...); err != nil {
		return nil, err
	}
	if err := j.loadAirportsState(ec.Airports); err != nil {
		return nil, err
	}
	return j, nil
}

// attach registers the states on stores, which replace the job's Stores (after a restore,
// possibly at another parallelism), and routes every key to the Store owning its key group.
// The stores' key-group ranges must cover every key's key group, and not overlap.
func (j *job) attach(stores ...*strata.Store) error {
	if len(stores) > 255 {
		return fmt.Errorf("flightdemo: %d Stores, at most 255", len(stores))
	}
	j.parts = j.parts[:0]
	for _, s := range stores {
		p, err := newPart(s)
		if err != nil {
			return err
		}
		p.et.fireWin = func(tm strata.Timer[uint64]) error { return j.fireWindow(p, tm) }
		p.et.fireSess = func(tm strata.Timer[sessWin]) error { return j.fireSession(p, tm) }
		j.parts = append(j.parts, p)
	}
	owner := func(k strata.Key) (uint8, error) {
		found := -1
		for i, s := range stores {
			if s.KeyGroups().Contains(k.KeyGroup()) {
				if found >= 0 {
					return 0, fmt.Errorf("flightdemo: key group %d in two Stores (%v and %v)", k.KeyGroup(), stores[found].KeyGroups(), s.KeyGroups())
				}
				found = i
			}
		}
		if found < 0 {
			return 0, fmt.Errorf("flightdemo: key %q: key group %d in no Store", k.Bytes(), k.KeyGroup())
		}
		return uint8(found), nil
	}
	clear(j.et.regDay) // the new Stores' timers are what they restored
	var err error
	for ki, k := range j.routeKeys {
		if j.routePart[ki], err = owner(k); err != nil {
			return err
		}
	}
	for oi, k := range j.originKeys {
		if j.originPart[oi], err = owner(k); err != nil {
			return err
		}
	}
	return nil
}

// newPart registers the five states on store.
func newPart(store *strata.Store) (*part, error) {
	p := &part{store: store}
	var err error
	p.agg, err = strata.NewAggregatingState(store, strata.AggregatingDescriptor[int16, delayAcc, delayAcc]{
		Name:              "route-delay-stats",
		AccCodec:          accCodec{},
		CreateAccumulator: func() delayAcc { return delayAcc{} },
		Add:               func(in int16, acc delayAcc) delayAcc { return acc.Add(in) },
		GetResult:         func(acc delayAcc) delayAcc { return acc },
		Merge:             func(a, b delayAcc) delayAcc { return a.Merge(b) },
	})
	if err != nil {
		return nil, err
	}
	p.list, err = strata.NewListState(store, strata.ListDescriptor[int16]{Name: "route-last-delays", Codec: int16Codec{}})
	if err != nil {
		return nil, err
	}
	p.dests, err = strata.NewMapState(store, strata.MapDescriptor[string, destStats]{
		Name: "origin-destinations", KeyCodec: strata.String, ValueCodec: destCodec{},
	})
	if err != nil {
		return nil, err
	}
	p.daily, err = strata.NewReducingState(store, strata.ReducingDescriptor[int16]{
		Name: "route-day-max-delay", Codec: int16Codec{}, Reduce: func(a, b int16) int16 { return max(a, b) },
	})
	if err != nil {
		return nil, err
	}
	p.hist, err = strata.NewListState(store, strata.ListDescriptor[int16]{Name: "route-day-delays", Codec: int16Codec{}})
	if err != nil {
		return nil, err
	}
	if p.et, err = newETPart(store); err != nil {
		return nil, err
	}
	return p, nil
}

// route returns the part holding route key ki's states.
func (j *job) route(ki int) *part { return j.parts[j.routePart[ki]] }

// resume re-derives the job's memory from the state of its Stores and from pos, the input
// position of the checkpoint they were restored from (invariant 3): the open day and the
// digest of closed days from pos; every route key's list length (invariant 1) and the route
// keys with a maximum in the open day (invariant 2) by reading them back.
func (j *job) resume(pos position) error {
	if err := j.loadAirportsState(nil); err != nil { // restored with the keyed state
		return fmt.Errorf("resume: %w", err)
	}
	j.et.restoredCopies += len(j.parts)
	j.day = pos.Day
	j.dayNS = binary.BigEndian.AppendUint64(nil, uint64(pos.Day))
	j.days = pos.Days
	if err := j.resumeET(pos); err != nil {
		return err
	}
	j.opened = j.opened[:0]
	clear(j.openedDay)
	for ki, k := range j.routeKeys {
		p := j.route(ki)
		n := 0
		it := p.list.Get(k)
		for it.Next() {
			n++
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("resume: %s: list get: %w", routeKeyName(j.tr, j.K, ki), err)
		}
		if n > lastN+1 {
			return fmt.Errorf("resume: %s: %d last delays, more than %d", routeKeyName(j.tr, j.K, ki), n, lastN+1)
		}
		j.listLen[ki] = uint8(n)
		if pos.Row == 0 {
			continue // no day is open before the first row
		}
		if _, found, err := p.daily.Get(k.In(j.dayNS)); err != nil {
			return fmt.Errorf("resume: %s: reducing get: %w", routeKeyName(j.tr, j.K, ki), err)
		} else if found {
			j.openedDay[ki] = j.day + 1
			j.opened = append(j.opened, int32(ki))
		}
	}
	return nil
}

// replay runs rows [from, to) of the trace, events [from*K, to*K) (rows [0, from) are in the
// state: from is 0, or the position of the checkpoint the Stores were restored from). Before
// row i it checkpoints at position i when the events [0, i*K) crossed a multiple of the
// checkpoint interval since row i-1. After the last row of the trace it closes the last day.
// progress (may be nil) is called every 1024 rows with the events done so far, counted from
// row 0.
func (j *job) replay(from, to int, progress func(events int)) error {
	rows := j.tr.Rows
	K := j.K
	every := 0
	if j.ck != nil {
		every = j.ck.every
	}
	for i := from; i < to; i++ {
		r := rows[i]
		events := i * K
		if every > 0 && i > from && events/every != (events-K)/every {
			if err := j.ck.start(j, i); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		if day := r.Day(); i == 0 || day != j.day {
			if err := j.closeDay(i&j.sampleMask == 0); err != nil {
				return err
			}
			j.day = day
			j.dayNS = binary.BigEndian.AppendUint64(nil, uint64(day))
		}
		rt := j.tr.Routes[r.Route]
		dest := j.tr.Airports[rt.Dest]
		for k := range K {
			ki := int(r.Route)*K + k
			oi := int(rt.Origin)*K + k
			if err := j.event(ki, oi, dest, copyDelay(i, k, r.Delay), events&j.sampleMask == 0); err != nil {
				return fmt.Errorf("row %d copy %d (%s): %w", i, k, routeKeyName(j.tr, K, ki), err)
			}
			events++
		}
		if err := j.etRow(i); err != nil {
			return err
		}
		if progress != nil && i&0x3ff == 0 {
			progress(events)
		}
	}
	if to < len(rows) {
		return nil
	}
	if err := j.closeDay(true); err != nil {
		return err
	}
	return j.advance(math.MaxInt64) // the end of the input: Flink's final watermark
}

// event applies one flight copy with delay d (minutes) to route key ki and origin key oi.
func (j *job) event(ki, oi int, dest string, d int16, sample bool) error {
	rk, ok := j.routeKeys[ki], j.originKeys[oi]
	rp, opt := j.parts[j.routePart[ki]], j.parts[j.originPart[oi]]
	var t0 time.Time
	if sample {
		t0 = time.Now()
	}
	mark := func(o op) {
		if sample {
			t1 := time.Now()
			j.lat[o].record(t1.Sub(t0))
			t0 = t1
		}
	}

	// Per route: delay statistics.
	if err := rp.agg.Add(rk, d); err != nil {
		return fmt.Errorf("aggregating add: %w", err)
	}
	mark(opAggAdd)

	// Per route: the last lastN delays.
	if err := rp.list.Add(rk, d); err != nil {
		return fmt.Errorf("list add: %w", err)
	}
	mark(opListAdd)
	if j.listLen[ki]++; j.listLen[ki] > lastN {
		buf := j.trimBuf[:0]
		it := rp.list.Get(rk)
		for it.Next() {
			buf = append(buf, it.Value())
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("list get: %w", err)
		}
		if len(buf) != int(j.listLen[ki]) {
			return fmt.Errorf("list get: %d elements, want %d", len(buf), j.listLen[ki])
		}
		if err := rp.list.Update(rk, buf[len(buf)-lastN:]); err != nil {
			return fmt.Errorf("list update: %w", err)
		}
		j.listLen[ki] = lastN
		j.trimBuf = buf
		mark(opListTrim)
	}

	// Per origin: destination -> stats.
	s, _, err := opt.dests.Get(ok, dest)
	if err != nil {
		return fmt.Errorf("map get: %w", err)
	}
	mark(opMapGet)
	if err := opt.dests.Put(ok, dest, destStats{s.Count + 1, s.Sum + int64(d)}); err != nil {
		return fmt.Errorf("map put: %w", err)
	}
	mark(opMapPut)

	// Per route and day: max delay.
	if j.openedDay[ki] != j.day+1 {
		j.openedDay[ki] = j.day + 1
		j.opened = append(j.opened, int32(ki))
	}
	if err := rp.daily.Add(rk.In(j.dayNS), d); err != nil {
		return fmt.Errorf("reducing add: %w", err)
	}
	mark(opReduceAdd)

	// Per route and day: the flight history, never cleared, so state grows with days × scale.
	if err := rp.hist.Add(rk.In(j.dayNS), d); err != nil {
		return fmt.Errorf("history add: %w", err)
	}
	mark(opHistAdd)
	return nil
}

// checkHistory reads back the history list of every (route key, day) of the trace and compares
// it with the delays of that route's flights that day, in event order, computed from the trace
// one day at a time (so the check holds one day's lists in memory, not the state). It returns
// the number of lists checked and a description of the first mismatches.
func (j *job) checkHistory(maxDiffs int) (lists int, diffs []string, err error) {
	rows := j.tr.Rows
	want := map[int][]int16{}
	flush := func(day uint32) error {
		ns := binary.BigEndian.AppendUint64(nil, uint64(day))
		for ki, w := range want {
			it := j.route(ki).hist.Get(j.routeKeys[ki].In(ns))
			var got []int16
			for it.Next() {
				got = append(got, it.Value())
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("day %d: %s: history get: %w", day, routeKeyName(j.tr, j.K, ki), err)
			}
			if !slicesEqual(got, w) && len(diffs) < maxDiffs {
				diffs = append(diffs, fmt.Sprintf("history %s day %d: %d delays, want %d", routeKeyName(j.tr, j.K, ki), day, len(got), len(w)))
			}
			lists++
		}
		clear(want)
		return nil
	}
	var day uint32
	for i, r := range rows {
		if d := r.Day(); i > 0 && d != day {
			if err := flush(day); err != nil {
				return lists, diffs, err
			}
		}
		day = r.Day()
		for k := range j.K {
			ki := int(r.Route)*j.K + k
			want[ki] = append(want[ki], copyDelay(i, k, r.Delay))
		}
	}
	return lists, diffs, flush(day)
}

func slicesEqual(a, b []int16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// closeDay reads and clears the per-day max of every route key opened in the open day.
func (j *job) closeDay(sample bool) error {
	for _, ki := range j.opened {
		var t0 time.Time
		if sample {
			t0 = time.Now()
		}
		k := j.routeKeys[ki].In(j.dayNS)
		daily := j.route(int(ki)).daily
		v, found, err := daily.Get(k)
		if err != nil {
			return fmt.Errorf("day %d: %s: reducing get: %w", j.day, routeKeyName(j.tr, j.K, int(ki)), err)
		}
		if !found {
			return fmt.Errorf("day %d: %s: reducing get: no value for a key added today", j.day, routeKeyName(j.tr, j.K, int(ki)))
		}
		if err := daily.Clear(k); err != nil {
			return fmt.Errorf("day %d: %s: reducing clear: %w", j.day, routeKeyName(j.tr, j.K, int(ki)), err)
		}
		if sample {
			j.lat[opDayClose].record(time.Since(t0))
		}
		j.days.add(int(ki), j.day, v)
		if j.onDay != nil {
			j.onDay(int(ki), j.day, v)
		}
	}
	j.opened = j.opened[:0]
	return nil
}

// results reads every route and origin key back from state.
func (j *job) results() (*results, error) {
	res := &results{
		Stats: make([]delayAcc, len(j.routeKeys)),
		Last:  make([][]int16, len(j.routeKeys)),
		Dests: make([]map[string]destStats, len(j.originKeys)),
		Days:  j.days,
		ET:    j.et.out,
	}
	for ki, k := range j.routeKeys {
		p := j.route(ki)
		s, found, err := p.agg.Get(k)
		if err != nil {
			return nil, fmt.Errorf("%s: aggregating get: %w", routeKeyName(j.tr, j.K, ki), err)
		}
		if found {
			res.Stats[ki] = s
			// The route's activity: expired when the route was idle for the TTL before the
			// last event time (the clock).
			if a, live, err := p.et.active.Get(k); err != nil {
				return nil, fmt.Errorf("%s: activity get: %w", routeKeyName(j.tr, j.K, ki), err)
			} else if !live {
				res.Expired++
			} else {
				res.Activity += digest(uint64(ki), uint64(a.Start), uint64(a.Flights), 0, 0)
				res.ActFlights += int64(a.Flights)
			}
		}
		it := p.list.Get(k)
		for it.Next() {
			res.Last[ki] = append(res.Last[ki], it.Value())
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("%s: list get: %w", routeKeyName(j.tr, j.K, ki), err)
		}
	}
	for oi, k := range j.originKeys {
		m := map[string]destStats{}
		it := j.parts[j.originPart[oi]].dests.Iterator(k)
		for it.Next() {
			m[it.Key()] = it.Value()
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("%s: map iterator: %w", originKeyName(j.tr, j.K, oi), err)
		}
		res.Dests[oi] = m
	}
	return res, nil
}
