package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/strata-db/strata/bench/internal/flightjob"
	"github.com/strata-db/strata/bench/internal/trace"
)

// The workload, shared by the Strata replay (job.go) and the plain Go map model (model.go).
//
// Terms:
//
//   - K, the scale: every trace row is emitted K times, copy k (0 <= k < K) keyed by the salted
//     route "ORG-DST#k" and the salted origin "ORG#k" (no salt when K = 1), so keys, events and
//     state grow K-fold while per-key rates, gaps and skew keep the shape of the real data.
//   - route key index ki = route*K + k; origin key index oi = origin*K + k.
//   - copy delay: copy 0 carries the row's delay; copy k > 0 adds a deterministic jitter in
//     [-jitterMax, +jitterMax] minutes from a hash of (row index, k), so the copies differ.
//   - event: one emitted copy; it updates four states (see job.event).

// lastN is the length of the per-route list of last delays.
const lastN = flightjob.LastN

// jitterMax bounds the per-copy delay jitter, in minutes.
const jitterMax = 5

// minFlights is the minimum count of a route key to rank in the worst-mean-delay top list.
const minFlights = 100

// mix64 is the splitmix64 finalizer: a cheap, well-mixed 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// copyDelay returns the delay of copy k of trace row i (see the terms above).
func copyDelay(i, k int, d int16) int16 {
	if k == 0 {
		return d
	}
	j := int64(mix64(uint64(i)<<20^uint64(k))%(2*jitterMax+1)) - jitterMax
	return int16(min(max(int64(d)+j, math.MinInt16), math.MaxInt16))
}

// routeKeyName returns the key bytes of route key index ki.
func routeKeyName(tr *trace.Trace, K, ki int) string {
	name := tr.RouteName(uint16(ki / K))
	if K > 1 {
		name += fmt.Sprintf("#%d", ki%K)
	}
	return name
}

// originKeyName returns the key bytes of origin key index oi.
func originKeyName(tr *trace.Trace, K, oi int) string {
	name := tr.Airports[oi/K]
	if K > 1 {
		name += fmt.Sprintf("#%d", oi%K)
	}
	return name
}

// dayDigest is an order-independent digest of the (route key, day, max delay) triples emitted
// when event-time days close; two replays that emit the same set agree on it.
type dayDigest struct {
	N   uint64 // triples
	Sum uint64 // sum of mix64(triple)
}

func (g *dayDigest) add(ki int, day uint32, maxDelay int16) {
	g.N++
	g.Sum += mix64(uint64(ki)<<40 ^ uint64(day)<<16 ^ uint64(uint16(maxDelay)))
}

// results is what a replay leaves in state, read back at the end.
type results struct {
	Stats []delayAcc             // per route key index; Count 0 = never seen
	Last  [][]int16              // per route key index: the last lastN delays, oldest first
	Dests []map[string]destStats // per origin key index: destination IATA -> stats
	Days  dayDigest
	ET    etOut // what the event-time operators emitted (eventtime.go)
	// Expired is the route keys seen whose activity (TTL 24 h of event time) had expired by
	// the last event time.
	Expired int
	// Activity is a digest of the live route keys' activity periods (key, start, flights), and
	// ActFlights their flights.
	Activity   uint64
	ActFlights int64
}

// ranked is one line of the worst-mean-delay list.
type ranked struct {
	Key   int // route key index
	Stats delayAcc
}

// worstRoutes returns the n route keys with the highest mean delay among those with at least
// minCount flights; ties broken by key index. Means are compared exactly (cross products).
func worstRoutes(stats []delayAcc, n int, minCount int64) []ranked {
	var out []ranked
	for ki, s := range stats {
		if s.Count >= max(minCount, 1) {
			out = append(out, ranked{ki, s})
		}
	}
	slices.SortFunc(out, func(a, b ranked) int {
		// a.Sum/a.Count > b.Sum/b.Count first; counts are positive.
		if c := cmp.Compare(b.Stats.Sum*a.Stats.Count, a.Stats.Sum*b.Stats.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out[:min(n, len(out))]
}

// diff compares two results and returns up to limit human-readable differences.
func diff(got, want *results, limit int) []string {
	var d []string
	add := func(format string, args ...any) {
		if len(d) < limit {
			d = append(d, fmt.Sprintf(format, args...))
		}
	}
	if len(got.Stats) != len(want.Stats) || len(got.Last) != len(want.Last) || len(got.Dests) != len(want.Dests) {
		add("shape: stats %d/%d, last %d/%d, dests %d/%d", len(got.Stats), len(want.Stats),
			len(got.Last), len(want.Last), len(got.Dests), len(want.Dests))
		return d
	}
	for ki := range want.Stats {
		if got.Stats[ki] != want.Stats[ki] {
			add("route key %d: stats %+v, want %+v", ki, got.Stats[ki], want.Stats[ki])
		}
		if !slices.Equal(got.Last[ki], want.Last[ki]) {
			add("route key %d: last %v, want %v", ki, got.Last[ki], want.Last[ki])
		}
	}
	for oi := range want.Dests {
		if !maps.Equal(got.Dests[oi], want.Dests[oi]) {
			add("origin key %d: destinations %v, want %v", oi, got.Dests[oi], want.Dests[oi])
		}
	}
	if got.Days != want.Days {
		add("daily max digest %+v, want %+v", got.Days, want.Days)
	}
	if g, w := got.ET, want.ET; g != w {
		add("windows: fired %d, late %d, digest %x; want %d, %d, %x", g.WinFired, g.WinLate, g.WinDigest, w.WinFired, w.WinLate, w.WinDigest)
		add("sessions: fired %d, late %d, extended %d, merged %d, digest %x; want %d, %d, %d, %d, %x",
			g.SessFired, g.SessLate, g.SessExtended, g.SessMerged, g.SessDigest, w.SessFired, w.SessLate, w.SessExtended, w.SessMerged, w.SessDigest)
		add("per-state window figures equal %v, session durations equal %v",
			g.StateFlights == w.StateFlights && g.StateDelay == w.StateDelay, g.Dur == w.Dur)
	}
	if got.Expired != want.Expired || got.Activity != want.Activity || got.ActFlights != want.ActFlights {
		add("routes expired (TTL): %d, live periods' digest %x, %d flights; want %d, %x, %d",
			got.Expired, got.Activity, got.ActFlights, want.Expired, want.Activity, want.ActFlights)
	}
	gw, ww := worstRoutes(got.Stats, 5, minFlights), worstRoutes(want.Stats, 5, minFlights)
	if !slices.Equal(gw, ww) {
		add("worst routes %v, want %v", gw, ww)
	}
	return d
}
