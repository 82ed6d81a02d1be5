package main

import (
	"github.com/strata-db/strata/bench/internal/trace"
)

// model replays the workload into plain Go maps and slices: the reference the Strata replay is
// checked against (same emission order, same copies, same day boundaries).
type model struct {
	tr    *trace.Trace
	K     int
	stats map[int]delayAcc     // route key index -> stats
	last  map[int][]int16      // route key index -> last delays
	dests map[[2]int]destStats // (origin key index, destination id) -> stats
	today map[int]int16        // route key index -> max delay of the open day
	day   uint32               // the open event-time day
	days  dayDigest            // closed days
	onDay func(ki int, day uint32, maxDelay int16)
}

// runModel replays tr at scale K, the event-time operators with ec (its airports table,
// bound and watermark period); onDay (may be nil) sees every closed (route key, day, max).
func runModel(tr *trace.Trace, K int, ec etConfig, onDay func(ki int, day uint32, maxDelay int16)) *results {
	m := &model{
		tr: tr, K: K,
		stats: make(map[int]delayAcc),
		last:  make(map[int][]int16),
		dests: make(map[[2]int]destStats),
		today: make(map[int]int16),
		onDay: onDay,
	}
	for i, r := range tr.Rows {
		if day := r.Day(); i == 0 || day != m.day {
			m.closeDay()
			m.day = day
		}
		rt := tr.Routes[r.Route]
		for k := range K {
			ki := int(r.Route)*K + k
			oi := int(rt.Origin)*K + k
			d := copyDelay(i, k, r.Delay)
			m.stats[ki] = m.stats[ki].Add(d)
			l := append(m.last[ki], d)
			if len(l) > lastN {
				l = append(l[:0], l[len(l)-lastN:]...)
			}
			m.last[ki] = l
			ds := m.dests[[2]int{oi, int(rt.Dest)}]
			m.dests[[2]int{oi, int(rt.Dest)}] = destStats{ds.Count + 1, ds.Sum + int64(d)}
			if cur, ok := m.today[ki]; !ok || d > cur {
				m.today[ki] = d
			}
		}
	}
	m.closeDay()
	res := m.results()
	res.ET, res.Expired, res.Activity, res.ActFlights = runETModel(tr, K, ec)
	return res
}

func (m *model) closeDay() {
	for ki, v := range m.today {
		m.days.add(ki, m.day, v)
		if m.onDay != nil {
			m.onDay(ki, m.day, v)
		}
	}
	clear(m.today)
}

func (m *model) results() *results {
	nr, no := len(m.tr.Routes)*m.K, len(m.tr.Airports)*m.K
	res := &results{
		Stats: make([]delayAcc, nr),
		Last:  make([][]int16, nr),
		Dests: make([]map[string]destStats, no),
		Days:  m.days,
	}
	for ki, s := range m.stats {
		res.Stats[ki] = s
	}
	for ki, l := range m.last {
		res.Last[ki] = l
	}
	for oi := range res.Dests {
		res.Dests[oi] = map[string]destStats{}
	}
	for k, s := range m.dests {
		res.Dests[k[0]][m.tr.Airports[k[1]]] = s
	}
	return res
}
