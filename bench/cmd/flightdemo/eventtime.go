package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/flightjob"
)

// The event-time operators of the job (besides the per-row ones of job.go), as a Flink job
// with a WatermarkStrategy.forBoundedOutOfOrderness and three keyed operators would run them:
//
//   - event time: the departure in UTC (airports.go: the local time at the origin, shifted by
//     the origin's zone from the airports broadcast state); the watermark is the largest event
//     time seen minus the out-of-orderness bound (-out-of-order, default 6 h: the measured
//     maximum of the file, see airports.go), emitted every wmEvery rows (periodically, as
//     Flink's autoWatermarkInterval does, but by rows so that replays agree); at the end of
//     the input it goes to +inf (Flink's final watermark), which fires every window left.
//   - tumbling windows of one UTC day per route key: an AggregatingState of delay statistics
//     with the day as namespace, and an event-time timer per (route key, day) at the day's
//     last millisecond (Flink's window.maxTimestamp()); the timer reads the window, emits it
//     and clears it. A flight whose window has fired (its last millisecond <= the watermark)
//     is late: dropped and counted (allowed lateness 0).
//   - session windows per destination airport key with a gap of 3 h (the files carry no tail
//     number, so the flights bound for one airport stand in for one aircraft's legs: an
//     airport's "inbound" activity, quiet for 3 h between sessions): Flink's merging windows.
//     Each flight opens [t, t+3h); the open windows of a key are kept in a ValueState
//     (Flink's MergingWindowSet: window -> state window, sorted by start); a flight whose
//     window intersects open ones (Flink's TimeWindow.intersects, ends inclusive) merges them
//     into their cover: the accumulators of the merged state windows go into the first one's
//     with AggregatingState.MergeNamespaces, the merged windows' timers are deleted and one is
//     registered at the cover's last millisecond. A flight is late when its window intersects
//     no open window and its last millisecond is <= the watermark.
//   - a 24 h TTL on per-route state: an AggregatingState per route key (the route's current
//     activity period: its first event time and its flights) with TTLConfig{TTL: 24h}; the
//     Stores' Options.Clock is the largest event time seen (so replays, restores and the Go
//     model agree), so a route idle for 24 h of event time expires and its next flight starts
//     a new period (an Add to an expired accumulator starts afresh, as Flink's
//     TtlAggregateFunction). At the end the job reads every route's period back: expired, or
//     live with its start and flights (results.Activity, a digest).
//
// Everything these operators emitted (etOut) travels in the checkpoint's input position, as a
// transactional sink's pending output: the state after rows [0, i) plus etOut and the
// watermark at row i determine the rest of the replay (job invariant 3).

const (
	dayMs      = 24 * 3600 * 1000
	sessionGap = 3 * 3600 * 1000 // ms
	activeTTL  = 24 * time.Hour

	// defaultOutOfOrder is the default bound of the watermark: the file's measured maximum.
	defaultOutOfOrder = 6 * time.Hour

	// wmEvery is the watermark's period in rows: it advances after rows i with (i+1) %
	// wmEvery == 0, about every 20 minutes of the data's event time.
	wmEvery = 256

	durBucket  = 15 * 60 * 1000 // ms: session durations are counted in 15-minute buckets
	durBuckets = 193            // 0 .. 48 h, the last bucket holds the longer ones
	maxStates  = 64             // origin states of the per-state window figures (the last: other)
)

// stateNames are the states of stateZones, sorted: the index of a state in etOut's per-state
// arrays; a state not listed counts under maxStates-1.
var stateNames = func() []string {
	var s []string
	for k := range stateZones {
		s = append(s, k)
	}
	slices.Sort(s)
	if len(s) >= maxStates {
		panic("flightdemo: invariant: more states than maxStates-1")
	}
	return s
}()

func stateIndex(state string) int {
	if i, ok := slices.BinarySearch(stateNames, state); ok {
		return i
	}
	return maxStates - 1
}

// etOut is what the event-time operators emitted so far. Comparable: the Strata replay and
// the Go model must emit equal ones.
type etOut struct {
	WinFired, WinLate uint64 // day windows fired; flights dropped as late
	WinDigest         uint64 // sum of mix of (route key, day, count, sum, max)
	StateFlights      [maxStates]int64
	StateDelay        [maxStates]int64 // by the origin state of the fired windows' routes

	SessFired, SessLate uint64
	SessExtended        uint64 // flights that changed the open windows by merging into them
	SessMerged          uint64 // state windows merged into another (MergeNamespaces sources)
	SessDigest          uint64 // sum of mix of (airport key, start, end, count, sum)
	Dur                 [durBuckets]uint64
}

func digest(a, b, c, d, e uint64) uint64 {
	return mix64(a ^ mix64(b^mix64(c^mix64(d^mix64(e)))))
}

func (o *etOut) window(ki int, day int64, acc winAcc, state int) {
	o.WinFired++
	o.WinDigest += digest(uint64(ki), uint64(day), uint64(acc.Count), uint64(acc.Sum), uint64(acc.Max))
	o.StateFlights[state] += int64(acc.Count)
	o.StateDelay[state] += acc.Sum
}

func (o *etOut) session(ai int, w sessWin, acc winAcc) {
	o.SessFired++
	o.SessDigest += digest(uint64(ai), uint64(w.Start), uint64(w.End), uint64(acc.Count), uint64(acc.Sum))
	o.Dur[min((w.End-sessionGap-w.Start)/durBucket, durBuckets-1)]++
}

// durQuantile returns the q-quantile of the session durations (the bucket's lower bound).
func (o *etOut) durQuantile(q float64) time.Duration {
	var n uint64
	for _, c := range o.Dur {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for i, c := range o.Dur {
		if acc += c; acc >= max(rank, 1) {
			return time.Duration(i) * durBucket * time.Millisecond
		}
	}
	return (durBuckets - 1) * durBucket * time.Millisecond
}

// winAcc is the accumulator of the day and session windows: flights, the sum and the maximum
// of their delays (minutes). 14 bytes encoded (winAccCodec), so the windows' state and
// changelog stay small.
type winAcc struct {
	Count uint32
	Sum   int64
	Max   int16 // meaningful when Count > 0
}

func (a winAcc) add(d int16) winAcc {
	if a.Count == 0 || d > a.Max {
		a.Max = d
	}
	a.Count++
	a.Sum += int64(d)
	return a
}

func (a winAcc) merge(b winAcc) winAcc {
	switch {
	case a.Count == 0:
		return b
	case b.Count == 0:
		return a
	}
	return winAcc{a.Count + b.Count, a.Sum + b.Sum, max(a.Max, b.Max)}
}

// winAccCodec encodes a winAcc as Count (u32), Sum (i64), Max (i16), big endian.
type winAccCodec struct{}

func (winAccCodec) Append(dst []byte, a winAcc) []byte {
	dst = binary.BigEndian.AppendUint32(dst, a.Count)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Sum))
	return binary.BigEndian.AppendUint16(dst, uint16(a.Max))
}

func (winAccCodec) Decode(b []byte) (winAcc, error) {
	if len(b) != 14 {
		return winAcc{}, fmt.Errorf("%w: window accumulator: %d bytes, want 14", errCodec, len(b))
	}
	return winAcc{binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:])), int16(binary.BigEndian.Uint16(b[12:]))}, nil
}

// sessWin is a session window [Start, End) in ms and its state window (the namespace its
// accumulator is under), as an entry of Flink's MergingWindowSet.
type sessWin struct{ Start, End int64 }

type sessEntry struct{ W, State sessWin }

// winCodec encodes a window as two 8-byte big-endian integers (timer and state namespaces).
type winCodec struct{}

func (winCodec) Append(dst []byte, w sessWin) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(w.Start))
	return binary.BigEndian.AppendUint64(dst, uint64(w.End))
}

func (winCodec) Decode(b []byte) (sessWin, error) {
	if len(b) != 16 {
		return sessWin{}, fmt.Errorf("%w: window: %d bytes, want 16", errCodec, len(b))
	}
	return sessWin{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// appendSet encodes a merging window set: 32 bytes per entry (window, state window).
func appendSet(dst []byte, set []sessEntry) []byte {
	for _, e := range set {
		dst = winCodec{}.Append(dst, e.W)
		dst = winCodec{}.Append(dst, e.State)
	}
	return dst
}

// decodeSet decodes a merging window set into dst[:0].
func decodeSet(dst []sessEntry, b []byte) ([]sessEntry, error) {
	if len(b)%32 != 0 {
		return nil, fmt.Errorf("%w: window set: %d bytes, not a multiple of 32", errCodec, len(b))
	}
	dst = dst[:0]
	for ; len(b) > 0; b = b[32:] {
		w, _ := winCodec{}.Decode(b[:16])
		s, _ := winCodec{}.Decode(b[16:32])
		dst = append(dst, sessEntry{w, s})
	}
	return dst, nil
}

// activity is the per-route TTL'd accumulator: the start (event time, ms) and the flights of
// the route's current activity period.
type activity struct {
	Start   int64
	Flights uint32
}

type activityCodec struct{}

func (activityCodec) Append(dst []byte, a activity) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Start))
	return binary.BigEndian.AppendUint32(dst, a.Flights)
}

func (a activity) add(t int64) activity {
	if a.Flights == 0 {
		a.Start = t
	}
	a.Flights++
	return a
}

func (activityCodec) Decode(b []byte) (activity, error) {
	if len(b) != 12 {
		return activity{}, fmt.Errorf("%w: activity: %d bytes, want 12", errCodec, len(b))
	}
	return activity{int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint32(b[8:])}, nil
}

// etParts are the event-time states of one part (Store).
type etPart struct {
	win      *strata.AggregatingState[int16, winAcc, winAcc]     // route key, ns = UTC day
	winT     *strata.TimerService[uint64]                        // route key, ns = UTC day
	sess     *strata.AggregatingState[int16, winAcc, winAcc]     // airport key, ns = state window
	sessSet  *strata.ValueState[[]byte]                          // airport key: the merging window set
	sessT    *strata.TimerService[sessWin]                       // airport key, ns = window
	active   *strata.AggregatingState[int64, activity, activity] // route key, TTL 24 h
	airports *strata.BroadcastState[string, airport]

	// The timer callbacks of this part, made once by attach (not a closure per advance).
	fireWin  func(strata.Timer[uint64]) error
	fireSess func(strata.Timer[sessWin]) error
}

func newETPart(s *strata.Store) (etPart, error) {
	var p etPart
	var err error
	agg := func(name string) strata.AggregatingDescriptor[int16, winAcc, winAcc] {
		return strata.AggregatingDescriptor[int16, winAcc, winAcc]{
			Name:              name,
			AccCodec:          winAccCodec{},
			CreateAccumulator: func() winAcc { return winAcc{} },
			Add:               func(in int16, acc winAcc) winAcc { return acc.add(in) },
			GetResult:         func(acc winAcc) winAcc { return acc },
			Merge:             func(a, b winAcc) winAcc { return a.merge(b) },
		}
	}
	if p.win, err = strata.NewAggregatingState(s, agg("route-utc-day-window")); err != nil {
		return p, err
	}
	if p.winT, err = strata.NewTimerService(s, strata.TimerServiceDescriptor[uint64]{Name: "route-utc-day-timers", NamespaceCodec: strata.Uint64}); err != nil {
		return p, err
	}
	if p.sess, err = strata.NewAggregatingState(s, agg("dest-session-window")); err != nil {
		return p, err
	}
	if p.sessSet, err = strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "dest-session-set", Codec: strata.Bytes}); err != nil {
		return p, err
	}
	if p.sessT, err = strata.NewTimerService(s, strata.TimerServiceDescriptor[sessWin]{Name: "dest-session-timers", NamespaceCodec: winCodec{}}); err != nil {
		return p, err
	}
	if p.active, err = strata.NewAggregatingState(s, strata.AggregatingDescriptor[int64, activity, activity]{
		Name:              "route-activity",
		AccCodec:          activityCodec{},
		CreateAccumulator: func() activity { return activity{} },
		Add:               func(t int64, a activity) activity { return a.add(t) },
		GetResult:         func(a activity) activity { return a },
		Merge: func(a, b activity) activity {
			return activity{Start: min(a.Start, b.Start), Flights: a.Flights + b.Flights}
		},
		TTL: &strata.TTLConfig{TTL: activeTTL},
	}); err != nil {
		return p, err
	}
	p.airports, err = strata.NewBroadcastState(s, strata.BroadcastDescriptor[string, airport]{
		Name: "airports", KeyCodec: strata.String, ValueCodec: airportCodec{},
	})
	return p, err
}

// etJob is the job's memory for the event-time operators.
type etJob struct {
	bound int64 // out-of-orderness bound, ms
	every int   // the watermark's period in rows
	maxT  int64 // largest event time seen, math.MinInt64 before the first
	wm    int64 // the watermark, math.MinInt64 before the first row
	out   etOut
	clock *eventClock // the Stores' Options.Clock: maxT (0 before the first row)

	zones  []zone  // by airport id, from the broadcast state
	states []uint8 // by airport id: stateIndex of its state
	lt     localTime
	regDay []uint64 // by route key index: day+1 of the window timer last registered (a cache)
	keyIdx map[string]int

	restoredCopies int // broadcast states restored (one per Store per restore)

	// sets[ai] is airport key ai's merging window set, as its ValueState holds it (job
	// invariant 4): written through on every change, re-read from the state on restore,
	// compared with the state at every session firing.
	sets [][]sessEntry

	set      []sessEntry
	setBuf   []byte
	nsT, nsS []byte
	srcs     [][]byte
	firing   *part
}

// etEvent applies one flight copy at event time t with delay d to the windows of route key ki,
// the sessions of airport key ai and the activity of route key ki.
func (j *job) etEvent(ki, ai int, t int64, d int16) error {
	e := &j.et
	rk := j.routeKeys[ki]
	rp := j.parts[j.routePart[ki]]

	// Tumbling day window of the route.
	day := t / dayMs
	if (day+1)*dayMs-1 <= e.wm {
		e.out.WinLate++
	} else {
		e.nsT = strata.Uint64.Append(e.nsT[:0], uint64(day))
		if err := rp.et.win.Add(rk.In(e.nsT), d); err != nil {
			return fmt.Errorf("window add: %w", err)
		}
		if e.regDay[ki] != uint64(day)+1 {
			if err := rp.et.winT.RegisterEventTimeTimer(rk, uint64(day), (day+1)*dayMs-1); err != nil {
				return fmt.Errorf("window timer: %w", err)
			}
			e.regDay[ki] = uint64(day) + 1
		}
	}

	// Activity of the route, TTL 24 h of event time.
	if err := rp.et.active.Add(rk, t); err != nil {
		return fmt.Errorf("activity add: %w", err)
	}

	// Session of the destination airport.
	if err := j.sessionAdd(ai, t, d); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	return nil
}

// sessionAdd is Flink's WindowOperator.processElement for merging windows, for one flight.
func (j *job) sessionAdd(ai int, t int64, d int16) error {
	e := &j.et
	k := j.originKeys[ai]
	p := j.parts[j.originPart[ai]]
	e.set = e.sets[ai]
	defer func() { e.sets[ai] = e.set }()
	w := sessWin{t, t + sessionGap}
	lo := sort.Search(len(e.set), func(i int) bool { return e.set[i].W.End >= w.Start })
	hi := lo
	for hi < len(e.set) && e.set[hi].W.Start <= w.End {
		hi++
	}
	var state sessWin
	switch {
	case lo == hi: // a new session
		if w.End-1 <= e.wm {
			e.out.SessLate++
			return nil
		}
		e.set = slices.Insert(e.set, lo, sessEntry{w, w})
		if err := p.et.sessT.RegisterEventTimeTimer(k, w, w.End-1); err != nil {
			return err
		}
		state = w
	case hi-lo == 1 && e.set[lo].W.Start <= w.Start && e.set[lo].W.End >= w.End: // inside one
		state = e.set[lo].State
		e.nsS = winCodec{}.Append(e.nsS[:0], state)
		return p.et.sess.Add(k.In(e.nsS), d)
	default: // merge the windows [lo, hi) and w into their cover
		m := w
		for _, x := range e.set[lo:hi] {
			m.Start, m.End = min(m.Start, x.W.Start), max(m.End, x.W.End)
		}
		state = e.set[lo].State
		if hi-lo > 1 {
			e.nsS = winCodec{}.Append(e.nsS[:0], state)
			e.srcs = e.srcs[:0]
			for _, x := range e.set[lo+1 : hi] {
				e.srcs = append(e.srcs, winCodec{}.Append(nil, x.State))
			}
			if err := p.et.sess.MergeNamespaces(k, e.nsS, e.srcs...); err != nil {
				return err
			}
			e.out.SessMerged += uint64(hi - lo - 1)
		}
		if err := p.et.sessT.RegisterEventTimeTimer(k, m, m.End-1); err != nil {
			return err
		}
		for _, x := range e.set[lo:hi] {
			if err := p.et.sessT.DeleteEventTimeTimer(k, x.W, x.W.End-1); err != nil {
				return err
			}
		}
		e.out.SessExtended++
		e.set[lo] = sessEntry{m, state}
		e.set = slices.Delete(e.set, lo+1, hi)
	}
	e.setBuf = appendSet(e.setBuf[:0], e.set)
	if err := p.et.sessSet.Put(k, e.setBuf); err != nil {
		return err
	}
	e.nsS = winCodec{}.Append(e.nsS[:0], state)
	return p.et.sess.Add(k.In(e.nsS), d)
}

// fireWindow is the day-window timer of p: emit the window and clear it.
func (j *job) fireWindow(p *part, tm strata.Timer[uint64]) error {
	acc, found, err := p.et.win.Get(tm.Key)
	if err != nil {
		return fmt.Errorf("window get: %w", err)
	}
	ki, ok := j.et.keyIdx[string(tm.Key.Bytes())]
	if !found || !ok {
		return fmt.Errorf("window timer of %q day %d: no window state (found %v) or unknown key", tm.Key.Bytes(), tm.Namespace, found)
	}
	if err := p.et.win.Clear(tm.Key); err != nil {
		return fmt.Errorf("window clear: %w", err)
	}
	origin := j.tr.Routes[ki/j.K].Origin
	j.et.out.window(ki, int64(tm.Namespace), acc, int(j.et.states[origin]))
	return nil
}

// fireSession is the session timer of p: emit the session, clear its state, retire it from
// the merging window set.
func (j *job) fireSession(p *part, tm strata.Timer[sessWin]) error {
	e := &j.et
	ai, ok := e.keyIdx[string(tm.Key.Bytes())]
	if !ok {
		return fmt.Errorf("session timer of unknown key %q", tm.Key.Bytes())
	}
	k := j.originKeys[ai]
	b, _, err := p.et.sessSet.Get(k)
	if err != nil {
		return err
	}
	e.setBuf = appendSet(e.setBuf[:0], e.sets[ai])
	if string(b) != string(e.setBuf) {
		return fmt.Errorf("session timer of %q: the window set in state differs from the job's (%d and %d bytes)", tm.Key.Bytes(), len(b), len(e.setBuf))
	}
	e.set = e.sets[ai]
	defer func() { e.sets[ai] = e.set }()
	i := slices.IndexFunc(e.set, func(x sessEntry) bool { return x.W == tm.Namespace })
	if i < 0 {
		return fmt.Errorf("session timer of %q %v: not in the window set %v", tm.Key.Bytes(), tm.Namespace, e.set)
	}
	e.nsS = winCodec{}.Append(e.nsS[:0], e.set[i].State)
	acc, found, err := p.et.sess.Get(k.In(e.nsS))
	if err != nil || !found {
		return fmt.Errorf("session %v of %q: get: found %v, %v", tm.Namespace, tm.Key.Bytes(), found, err)
	}
	if err := p.et.sess.Clear(k.In(e.nsS)); err != nil {
		return err
	}
	e.out.session(ai, tm.Namespace, acc)
	e.set = slices.Delete(e.set, i, i+1)
	if len(e.set) == 0 {
		return p.et.sessSet.Clear(k)
	}
	e.setBuf = appendSet(e.setBuf[:0], e.set)
	return p.et.sessSet.Put(k, e.setBuf)
}

// advance moves the watermark of every part to wm, firing what is due.
func (j *job) advance(wm int64) error {
	for _, p := range j.parts {
		if err := p.et.winT.AdvanceWatermark(wm, p.et.fireWin); err != nil {
			return fmt.Errorf("watermark %d: windows: %w", wm, err)
		}
		if err := p.et.sessT.AdvanceWatermark(wm, p.et.fireSess); err != nil {
			return fmt.Errorf("watermark %d: sessions: %w", wm, err)
		}
	}
	j.et.wm = wm
	return nil
}

// every returns the watermark's period in rows.
func (ec etConfig) every() int {
	if ec.Every > 0 {
		return ec.Every
	}
	return wmEvery
}

// etRow runs the event-time operators for row i (every copy), then advances the watermark at
// the end of a period of wmEvery rows.
func (j *job) etRow(i int) error {
	r := j.tr.Rows[i]
	rt := j.tr.Routes[r.Route]
	e := &j.et
	t := e.lt.eventTime(r.Minute, e.zones[rt.Origin])
	e.maxT = max(e.maxT, t)
	e.clock.set(e.maxT)
	for k := range j.K {
		ki := int(r.Route)*j.K + k
		ai := int(rt.Dest)*j.K + k
		if err := j.etEvent(ki, ai, t, copyDelay(i, k, r.Delay)); err != nil {
			return fmt.Errorf("row %d copy %d: %w", i, k, err)
		}
	}
	if wm := e.maxT - e.bound; (i+1)%e.every == 0 && wm > e.wm {
		return j.advance(wm)
	}
	return nil
}

// loadAirportsState fills the broadcast state of every part from the table when it is empty
// (the job's first start; a restored Store has it from its checkpoint), then builds the job's
// per-airport zones from the first part's copy. Every airport of the trace must be in it.
func (j *job) loadAirportsState(table map[string]airport) error {
	for _, p := range j.parts {
		n, err := p.et.airports.Len()
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if table == nil {
			return fmt.Errorf("airports: a Store without the broadcast state and no table to fill it")
		}
		codes := slices.Sorted(func(yield func(string) bool) {
			for c := range table {
				if !yield(c) {
					return
				}
			}
		})
		for _, c := range codes {
			if err := p.et.airports.Put(c, table[c]); err != nil {
				return fmt.Errorf("airports: put %s: %w", c, err)
			}
		}
	}
	e := &j.et
	e.zones = make([]zone, len(j.tr.Airports))
	e.states = make([]uint8, len(j.tr.Airports))
	for i, c := range j.tr.Airports {
		a, ok, err := j.parts[0].et.airports.Get(c)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("airports: %s of the flights is not in the broadcast state", c)
		}
		e.zones[i] = zoneOf(a)
		e.states[i] = uint8(stateIndex(a.State))
	}
	return nil
}

// eventClock is the Stores' Options.Clock: the largest event time the job has seen, in ms (0
// before the first). It never goes back (TTLConfig asks that of a clock); safe for concurrent
// use (the Stores' background work reads it).
type eventClock struct{ v atomic.Int64 }

// set moves the clock to t when t is later.
func (c *eventClock) set(t int64) {
	if t > c.v.Load() {
		c.v.Store(t)
	}
}

// now returns the clock's time.
func (c *eventClock) now() int64 { return c.v.Load() }

// resumeET re-derives the event-time operators' memory from pos (the position the Stores were
// restored from) and sets the restored timer services' watermark to pos.WM. Every timer at or
// before it fired before the checkpoint, so none may fire now: one that does is an error.
func (j *job) resumeET(pos position) error {
	e := &j.et
	e.maxT, e.wm, e.out = pos.MaxT, pos.WM, pos.Out
	e.clock.set(e.maxT)
	for ai, k := range j.originKeys {
		b, _, err := j.parts[j.originPart[ai]].et.sessSet.Get(k)
		if err != nil {
			return fmt.Errorf("resume: %s: window set get: %w", originKeyName(j.tr, j.K, ai), err)
		}
		if j.et.sets[ai], err = decodeSet(j.et.sets[ai], b); err != nil {
			return fmt.Errorf("resume: %s: %w", originKeyName(j.tr, j.K, ai), err)
		}
	}
	if e.wm == math.MinInt64 {
		return nil
	}
	for _, p := range j.parts {
		if err := p.et.winT.AdvanceWatermark(e.wm, func(tm strata.Timer[uint64]) error {
			return fmt.Errorf("resume: window timer of %q day %d at %d, at or before the restored watermark %d, was pending", tm.Key.Bytes(), tm.Namespace, tm.Timestamp, e.wm)
		}); err != nil {
			return err
		}
		if err := p.et.sessT.AdvanceWatermark(e.wm, func(tm strata.Timer[sessWin]) error {
			return fmt.Errorf("resume: session timer of %q %v at %d, at or before the restored watermark %d, was pending", tm.Key.Bytes(), tm.Namespace, tm.Timestamp, e.wm)
		}); err != nil {
			return err
		}
	}
	return nil
}

// loadAirportsTable reads the airports CSV of c (default: testdata/airports.csv).
func loadAirportsTable(c config) (map[string]airport, string, error) {
	path := c.airports
	if path == "" {
		var err error
		if path, err = flightjob.FindData("airports.csv"); err != nil {
			return nil, "", err
		}
	}
	t, err := loadAirports(path)
	return t, path, err
}

// reportET prints the event-time operators' figures: windows, sessions, TTL, broadcast state.
func reportET(out io.Writer, j *job, got *results, airports int) {
	o := got.ET
	best, bestMean := -1, math.Inf(-1)
	for i := range maxStates {
		if o.StateFlights[i] >= 1000 {
			if m := float64(o.StateDelay[i]) / float64(o.StateFlights[i]); m > bestMean {
				best, bestMean = i, m
			}
		}
	}
	most := ""
	if best >= 0 {
		name := "other"
		if best < len(stateNames) {
			name = stateNames[best]
		}
		most = fmt.Sprintf("; most delayed origin state %s, mean %.1f min over %d flights", name, bestMean, o.StateFlights[best])
	}
	fmt.Fprintf(out, "\nwindows: %d (route, UTC day) tumbling windows fired by the watermark (bound %v), %d late flights dropped%s\n",
		o.WinFired, time.Duration(j.et.bound)*time.Millisecond, o.WinLate, most)
	fmt.Fprintf(out, "sessions: %d per destination airport (gap %v) fired, %d late dropped; %d flights extended a session, %d sessions merged by MergeNamespaces; duration p50 %v, p90 %v\n",
		o.SessFired, time.Duration(sessionGap)*time.Millisecond, o.SessLate, o.SessExtended, o.SessMerged, o.durQuantile(0.5), o.durQuantile(0.9))
	routes := 0
	for _, s := range got.Stats {
		if s.Count > 0 {
			routes++
		}
	}
	fmt.Fprintf(out, "TTL: %d of %d routes' activity expired at the end (idle for %v of event time); the %d live ones' current periods hold %.1f flights on average\n",
		got.Expired, routes, activeTTL, routes-got.Expired, float64(got.ActFlights)/float64(max(routes-got.Expired, 1)))
	fmt.Fprintf(out, "broadcast: %d airports in every Store's broadcast state; restored with the keyed state %d times\n",
		airports, j.et.restoredCopies)
}
