package main

import (
	"container/heap"
	"math"
	"slices"
	"sort"

	"github.com/strata-db/strata/bench/internal/trace"
)

// etModel replays the event-time operators (eventtime.go) on plain Go maps and slices, from
// the airports table directly (not from a broadcast state), with the same watermark rule,
// late rule, merging rule and TTL rule: the reference the Strata replay is checked against.
type etModel struct {
	tr    *trace.Trace
	K     int
	bound int64
	every int
	zones []zone
	state []int
	lt    localTime
	maxT  int64
	wm    int64
	out   etOut

	windows map[int64]map[int]winAcc // day -> route key index -> accumulator
	sess    [][]modelSess            // by airport key index: the open windows, by start
	ends    sessHeap                 // pending session ends, stale ones skipped
	written []int64                  // by route key index: the clock at the activity's last write
	seen    []bool                   // by route key index: written holds a time
	period  []activity               // by route key index: its current activity period
}

type modelSess struct {
	W   sessWin
	Acc winAcc
}

type sessEnd struct {
	ts int64
	ai int
	w  sessWin
}

type sessHeap []sessEnd

func (h sessHeap) Len() int           { return len(h) }
func (h sessHeap) Less(i, j int) bool { return h[i].ts < h[j].ts }
func (h sessHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sessHeap) Push(x any)        { *h = append(*h, x.(sessEnd)) }
func (h *sessHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runETModel replays tr at scale K with ec's airports table, out-of-orderness bound and
// watermark period;
// it returns what the operators emitted, and the number of route keys whose activity had
// expired at the end, the digest of the live ones' periods and their flights
// (results.Expired, Activity, ActFlights).
func runETModel(tr *trace.Trace, K int, ec etConfig) (out etOut, expired int, act uint64, actFlights int64) {
	airports := ec.Airports
	m := &etModel{tr: tr, K: K, bound: ec.Bound.Milliseconds(), every: ec.every(), maxT: math.MinInt64, wm: math.MinInt64,
		windows: map[int64]map[int]winAcc{}, sess: make([][]modelSess, len(tr.Airports)*K),
		written: make([]int64, len(tr.Routes)*K), seen: make([]bool, len(tr.Routes)*K), period: make([]activity, len(tr.Routes)*K)}
	for _, c := range tr.Airports {
		a := airports[c] // every airport is in the table (the job checks)
		m.zones = append(m.zones, zoneOf(a))
		m.state = append(m.state, stateIndex(a.State))
	}
	for i, r := range tr.Rows {
		rt := tr.Routes[r.Route]
		t := m.lt.eventTime(r.Minute, m.zones[rt.Origin])
		m.maxT = max(m.maxT, t)
		for k := range K {
			m.event(int(r.Route)*K+k, int(rt.Dest)*K+k, t, copyDelay(i, k, r.Delay))
		}
		if wm := m.maxT - m.bound; (i+1)%m.every == 0 && wm > m.wm {
			m.advance(wm)
		}
	}
	m.advance(math.MaxInt64)
	ttl := activeTTL.Milliseconds()
	for ki, w := range m.written {
		if !m.seen[ki] {
			continue
		}
		if m.maxT >= w+ttl {
			expired++
			continue
		}
		a := m.period[ki]
		act += digest(uint64(ki), uint64(a.Start), uint64(a.Flights), 0, 0)
		actFlights += int64(a.Flights)
	}
	return m.out, expired, act, actFlights
}

func (m *etModel) event(ki, ai int, t int64, d int16) {
	day := t / dayMs
	if (day+1)*dayMs-1 <= m.wm {
		m.out.WinLate++
	} else {
		w := m.windows[day]
		if w == nil {
			w = map[int]winAcc{}
			m.windows[day] = w
		}
		w[ki] = w[ki].add(d)
	}

	if !m.seen[ki] || m.maxT >= m.written[ki]+activeTTL.Milliseconds() {
		m.period[ki] = activity{} // a new period: the old one expired
	}
	m.period[ki] = m.period[ki].add(t)
	m.written[ki], m.seen[ki] = m.maxT, true

	set := m.sess[ai]
	nw := sessWin{t, t + sessionGap}
	lo := sort.Search(len(set), func(i int) bool { return set[i].W.End >= nw.Start })
	hi := lo
	for hi < len(set) && set[hi].W.Start <= nw.End {
		hi++
	}
	switch {
	case lo == hi:
		if nw.End-1 <= m.wm {
			m.out.SessLate++
			return
		}
		set = slices.Insert(set, lo, modelSess{W: nw, Acc: winAcc{}.add(d)})
		heap.Push(&m.ends, sessEnd{nw.End - 1, ai, nw})
	case hi-lo == 1 && set[lo].W.Start <= nw.Start && set[lo].W.End >= nw.End:
		set[lo].Acc = set[lo].Acc.add(d)
	default:
		c := modelSess{W: nw}
		for _, x := range set[lo:hi] {
			c.W.Start, c.W.End = min(c.W.Start, x.W.Start), max(c.W.End, x.W.End)
			c.Acc = c.Acc.merge(x.Acc)
		}
		c.Acc = c.Acc.add(d)
		m.out.SessMerged += uint64(hi - lo - 1)
		m.out.SessExtended++
		set[lo] = c
		set = slices.Delete(set, lo+1, hi)
		heap.Push(&m.ends, sessEnd{c.W.End - 1, ai, c.W})
	}
	m.sess[ai] = set
}

func (m *etModel) advance(wm int64) {
	for day, w := range m.windows {
		if (day+1)*dayMs-1 > wm {
			continue
		}
		for ki, acc := range w {
			m.out.window(ki, day, acc, m.state[m.tr.Routes[ki/m.K].Origin])
		}
		delete(m.windows, day)
	}
	for len(m.ends) > 0 && m.ends[0].ts <= wm {
		e := heap.Pop(&m.ends).(sessEnd)
		set := m.sess[e.ai]
		i := slices.IndexFunc(set, func(x modelSess) bool { return x.W == e.w })
		if i < 0 {
			continue // merged into another window
		}
		m.out.session(e.ai, set[i].W, set[i].Acc)
		m.sess[e.ai] = slices.Delete(set, i, i+1)
	}
	m.wm = wm
}
