package main

import (
	"container/heap"
	"math"
	"slices"
	"sort"

	"github.com/strata-db/strata/bench/internal/trace"
)

// fairModel is the Go model doing the same work as the Strata job (job.go, eventtime.go): the
// same keyed states with the same lifetimes, the same operations in the same order per event,
// but on Go values in Go maps, with no serialization, no memory budget, no disk and no
// checkpoints. It is the fair point of comparison for the Strata replay's throughput; the
// plain model (model.go, model_et.go) keeps no per-(route, day) history and computes the
// event-time operators without timers, so it does less.
//
// State for state, keyed by the key index (the Strata job keys by a prebuilt Key whose hash is
// computed once, as Flink's setCurrentKey; a Go map keyed by an int is the counterpart):
//
//	stats   route              AggregatingState  a delayAcc, read, added to, written back
//	last    route              ListState         append; when longer than lastN, cut to the last lastN
//	dests   origin             MapState          destination name -> destStats: get, then put
//	daily   (route, day)       ReducingState     max; read and deleted when the day closes
//	hist    (route, day)       ListState         append, kept for the whole run
//	win     (route, UTC day)   AggregatingState  with an event-time timer per (route, day) in a heap
//	sessSet destination        ValueState        the merging window set, a Go slice
//	sess    (dest, state win)  AggregatingState  merged as MergeNamespaces does; timers in a heap,
//	                                             deleted timers skipped when they surface
//	active  route              AggregatingState  with its write time: expired after activeTTL of
//	                                             event time (the timestamp checked on access)
//
// Timers behave as strata.TimerService: registering a (key, namespace, time) again is a no-op,
// a deleted timer does not fire, AdvanceWatermark fires those at or before the watermark.
type fairModel struct {
	tr *trace.Trace
	K  int

	stats map[int32]delayAcc
	last  map[int32][]int16
	dests map[int32]map[string]destStats
	daily map[fairDayKey]int16
	hist  map[fairDayKey][]int16

	day       uint32
	opened    []int32  // route keys with a maximum in the open day
	openedDay []uint32 // by route key: day+1 when in opened
	days      dayDigest

	bound, maxT, wm int64
	every           int
	zones           []zone
	states          []uint8
	lt              localTime
	regDay          []uint64 // by route key: day+1 of the window timer last registered (as the job's cache)
	out             etOut

	win      map[fairWinKey]winAcc
	winT     fairWinTimers
	winReg   map[fairWinKey]struct{}
	sessSet  map[int32][]sessEntry
	sess     map[fairSessKey]winAcc
	sessT    fairSessTimers
	sessLive map[fairSessKey]struct{} // registered, not deleted, not fired
	active   map[int32]fairActivity
}

type fairDayKey struct {
	ki  int32
	day uint32
}

type fairWinKey struct {
	ki  int32
	day int64
}

type fairSessKey struct {
	ai int32
	w  sessWin
}

type fairActivity struct {
	a       activity
	written int64 // the clock (largest event time) at the last write
}

type fairWinTimer struct {
	ts int64
	k  fairWinKey
}

type fairSessTimer struct {
	ts int64
	k  fairSessKey
}

type fairWinTimers []fairWinTimer

func (h fairWinTimers) Len() int           { return len(h) }
func (h fairWinTimers) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h fairWinTimers) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fairWinTimers) Push(x any)        { *h = append(*h, x.(fairWinTimer)) }
func (h *fairWinTimers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type fairSessTimers []fairSessTimer

func (h fairSessTimers) Len() int           { return len(h) }
func (h fairSessTimers) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h fairSessTimers) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fairSessTimers) Push(x any)        { *h = append(*h, x.(fairSessTimer)) }
func (h *fairSessTimers) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runFairModel replays tr at scale K through the fair model, the event-time operators with
// ec (its airports table, bound and watermark period), and returns what the Strata job's
// results return (it must equal runModel's), and the number of (route, day) history lists it
// kept and of the delays in them.
func runFairModel(tr *trace.Trace, K int, ec etConfig) (res *results, histLists, histDelays int) {
	nr, no := len(tr.Routes)*K, len(tr.Airports)*K
	m := &fairModel{
		tr: tr, K: K,
		stats: map[int32]delayAcc{}, last: map[int32][]int16{}, dests: map[int32]map[string]destStats{},
		daily: map[fairDayKey]int16{}, hist: map[fairDayKey][]int16{}, openedDay: make([]uint32, nr),
		bound: ec.Bound.Milliseconds(), maxT: math.MinInt64, wm: math.MinInt64, every: ec.every(),
		regDay: make([]uint64, nr),
		win:    map[fairWinKey]winAcc{}, winReg: map[fairWinKey]struct{}{},
		sessSet: map[int32][]sessEntry{}, sess: map[fairSessKey]winAcc{}, sessLive: map[fairSessKey]struct{}{},
		active: map[int32]fairActivity{},
	}
	for _, c := range tr.Airports { // the job reads these once from its broadcast state
		a := ec.Airports[c]
		m.zones = append(m.zones, zoneOf(a))
		m.states = append(m.states, uint8(stateIndex(a.State)))
	}
	for i, r := range tr.Rows {
		if day := r.Day(); i == 0 || day != m.day {
			m.closeDay()
			m.day = day
		}
		rt := tr.Routes[r.Route]
		dest := tr.Airports[rt.Dest]
		for k := range K {
			m.event(int32(int(r.Route)*K+k), int32(int(rt.Origin)*K+k), dest, copyDelay(i, k, r.Delay))
		}
		m.etRow(i, r, rt)
	}
	m.closeDay()
	m.advance(math.MaxInt64)

	res = &results{Stats: make([]delayAcc, nr), Last: make([][]int16, nr), Dests: make([]map[string]destStats, no),
		Days: m.days, ET: m.out}
	ttl := activeTTL.Milliseconds()
	for ki, s := range m.stats {
		res.Stats[ki] = s
		a := m.active[ki]
		if m.maxT >= a.written+ttl {
			res.Expired++
			continue
		}
		res.Activity += digest(uint64(ki), uint64(a.a.Start), uint64(a.a.Flights), 0, 0)
		res.ActFlights += int64(a.a.Flights)
	}
	for ki, l := range m.last {
		res.Last[ki] = l
	}
	for oi := range res.Dests {
		res.Dests[oi] = map[string]destStats{}
		for d, s := range m.dests[int32(oi)] {
			res.Dests[oi][d] = s
		}
	}
	for _, l := range m.hist {
		histLists++
		histDelays += len(l)
	}
	return res, histLists, histDelays
}

// event is job.event on Go maps.
func (m *fairModel) event(ki, oi int32, dest string, d int16) {
	m.stats[ki] = m.stats[ki].Add(d)

	l := append(m.last[ki], d)
	if len(l) > lastN {
		l = l[:copy(l, l[len(l)-lastN:])]
	}
	m.last[ki] = l

	dm := m.dests[oi]
	if dm == nil {
		dm = map[string]destStats{}
		m.dests[oi] = dm
	}
	s := dm[dest]
	dm[dest] = destStats{s.Count + 1, s.Sum + int64(d)}

	if m.openedDay[ki] != m.day+1 {
		m.openedDay[ki] = m.day + 1
		m.opened = append(m.opened, ki)
	}
	dk := fairDayKey{ki, m.day}
	if cur, ok := m.daily[dk]; !ok || d > cur {
		m.daily[dk] = d
	}
	m.hist[dk] = append(m.hist[dk], d)
}

// closeDay is job.closeDay: read and delete the open day's maxima.
func (m *fairModel) closeDay() {
	for _, ki := range m.opened {
		dk := fairDayKey{ki, m.day}
		v := m.daily[dk]
		delete(m.daily, dk)
		m.days.add(int(ki), m.day, v)
	}
	m.opened = m.opened[:0]
}

// etRow is job.etRow.
func (m *fairModel) etRow(i int, r trace.Row, rt trace.Route) {
	t := m.lt.eventTime(r.Minute, m.zones[rt.Origin])
	m.maxT = max(m.maxT, t)
	for k := range m.K {
		m.etEvent(int32(int(r.Route)*m.K+k), int32(int(rt.Dest)*m.K+k), t, copyDelay(i, k, r.Delay))
	}
	if wm := m.maxT - m.bound; (i+1)%m.every == 0 && wm > m.wm {
		m.advance(wm)
	}
}

// etEvent is job.etEvent.
func (m *fairModel) etEvent(ki, ai int32, t int64, d int16) {
	day := t / dayMs
	if (day+1)*dayMs-1 <= m.wm {
		m.out.WinLate++
	} else {
		wk := fairWinKey{ki, day}
		m.win[wk] = m.win[wk].add(d)
		if m.regDay[ki] != uint64(day)+1 {
			if _, ok := m.winReg[wk]; !ok {
				m.winReg[wk] = struct{}{}
				heap.Push(&m.winT, fairWinTimer{(day+1)*dayMs - 1, wk})
			}
			m.regDay[ki] = uint64(day) + 1
		}
	}

	// TTL: the accumulator starts afresh when its last write is activeTTL behind the clock.
	a := m.active[ki]
	if a.a.Flights > 0 && m.maxT >= a.written+activeTTL.Milliseconds() {
		a.a = activity{}
	}
	m.active[ki] = fairActivity{a.a.add(t), m.maxT}

	m.sessionAdd(ai, t, d)
}

// sessionAdd is job.sessionAdd: Flink's merging window assignment on a Go slice.
func (m *fairModel) sessionAdd(ai int32, t int64, d int16) {
	set := m.sessSet[ai]
	w := sessWin{t, t + sessionGap}
	lo := sort.Search(len(set), func(i int) bool { return set[i].W.End >= w.Start })
	hi := lo
	for hi < len(set) && set[hi].W.Start <= w.End {
		hi++
	}
	var state sessWin
	switch {
	case lo == hi:
		if w.End-1 <= m.wm {
			m.out.SessLate++
			return
		}
		set = slices.Insert(set, lo, sessEntry{w, w})
		m.register(fairSessKey{ai, w})
		state = w
	case hi-lo == 1 && set[lo].W.Start <= w.Start && set[lo].W.End >= w.End:
		sk := fairSessKey{ai, set[lo].State}
		m.sess[sk] = m.sess[sk].add(d)
		return
	default:
		c := w
		for _, x := range set[lo:hi] {
			c.Start, c.End = min(c.Start, x.W.Start), max(c.End, x.W.End)
		}
		state = set[lo].State
		if hi-lo > 1 { // MergeNamespaces: the sources' accumulators into the target's
			tk := fairSessKey{ai, state}
			acc := m.sess[tk]
			for _, x := range set[lo+1 : hi] {
				sk := fairSessKey{ai, x.State}
				acc = acc.merge(m.sess[sk])
				delete(m.sess, sk)
			}
			m.sess[tk] = acc
			m.out.SessMerged += uint64(hi - lo - 1)
		}
		m.register(fairSessKey{ai, c})
		for _, x := range set[lo:hi] {
			delete(m.sessLive, fairSessKey{ai, x.W})
		}
		m.out.SessExtended++
		set[lo] = sessEntry{c, state}
		set = slices.Delete(set, lo+1, hi)
	}
	m.sessSet[ai] = set
	sk := fairSessKey{ai, state}
	m.sess[sk] = m.sess[sk].add(d)
}

// register registers the session timer of k (at its window's last millisecond) unless it is.
func (m *fairModel) register(k fairSessKey) {
	if _, ok := m.sessLive[k]; ok {
		return
	}
	m.sessLive[k] = struct{}{}
	heap.Push(&m.sessT, fairSessTimer{k.w.End - 1, k})
}

// advance is job.advance: fire the window timers, then the session timers, at or before wm.
func (m *fairModel) advance(wm int64) {
	for len(m.winT) > 0 && m.winT[0].ts <= wm {
		tm := heap.Pop(&m.winT).(fairWinTimer)
		delete(m.winReg, tm.k)
		acc := m.win[tm.k]
		delete(m.win, tm.k)
		origin := m.tr.Routes[int(tm.k.ki)/m.K].Origin
		m.out.window(int(tm.k.ki), tm.k.day, acc, int(m.states[origin]))
	}
	for len(m.sessT) > 0 && m.sessT[0].ts <= wm {
		tm := heap.Pop(&m.sessT).(fairSessTimer)
		if _, ok := m.sessLive[tm.k]; !ok {
			continue // deleted
		}
		delete(m.sessLive, tm.k)
		set := m.sessSet[tm.k.ai]
		i := slices.IndexFunc(set, func(x sessEntry) bool { return x.W == tm.k.w })
		sk := fairSessKey{tm.k.ai, set[i].State}
		acc := m.sess[sk]
		delete(m.sess, sk)
		m.out.session(int(tm.k.ai), tm.k.w, acc)
		if set = slices.Delete(set, i, i+1); len(set) == 0 {
			delete(m.sessSet, tm.k.ai)
		} else {
			m.sessSet[tm.k.ai] = set
		}
	}
	m.wm = wm
}
