package flightjob

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/trace"
)

// LastN is the length of the per-route list of last delays.
const LastN = 10

// ErrCodec reports a state value or an input record whose length does not match its
// fixed-width encoding.
var ErrCodec = errors.New("flightjob: bad encoded value")

// DelayAcc is the accumulator (and result) of the per-route AggregatingState: delay
// statistics in minutes.
type DelayAcc struct {
	Count, Sum, SumSq int64
	Min, Max          int64 // meaningful when Count > 0
}

// Add returns a with delay d (minutes) added.
func (a DelayAcc) Add(d int16) DelayAcc {
	v := int64(d)
	if a.Count == 0 || v < a.Min {
		a.Min = v
	}
	if a.Count == 0 || v > a.Max {
		a.Max = v
	}
	a.Count++
	a.Sum += v
	a.SumSq += v * v
	return a
}

// Merge returns the statistics of a and b together.
func (a DelayAcc) Merge(b DelayAcc) DelayAcc {
	switch {
	case a.Count == 0:
		return b
	case b.Count == 0:
		return a
	}
	return DelayAcc{a.Count + b.Count, a.Sum + b.Sum, a.SumSq + b.SumSq, min(a.Min, b.Min), max(a.Max, b.Max)}
}

// Mean is the mean delay in minutes (NaN when Count is 0).
func (a DelayAcc) Mean() float64 { return float64(a.Sum) / float64(a.Count) }

// Stddev is the population standard deviation of the delays in minutes.
func (a DelayAcc) Stddev() float64 {
	m := a.Mean()
	v := float64(a.SumSq)/float64(a.Count) - m*m
	if v <= 0 {
		return 0
	}
	return math.Sqrt(v)
}

// AccSize is the encoded size of a DelayAcc.
const AccSize = 5 * 8

// AccCodec encodes a DelayAcc as five 8-byte little-endian integers (40 bytes), so an Add
// rewrites the value in place. Decode errors: ErrCodec.
type AccCodec struct{}

// Append appends a's encoding to dst.
func (AccCodec) Append(dst []byte, a DelayAcc) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Count))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Sum))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.SumSq))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Min))
	return binary.LittleEndian.AppendUint64(dst, uint64(a.Max))
}

// Decode decodes AccSize bytes.
func (AccCodec) Decode(b []byte) (DelayAcc, error) {
	if len(b) != AccSize {
		return DelayAcc{}, fmt.Errorf("%w: delay accumulator: %d bytes, want %d", ErrCodec, len(b), AccSize)
	}
	return DelayAcc{
		Count: int64(binary.LittleEndian.Uint64(b)),
		Sum:   int64(binary.LittleEndian.Uint64(b[8:])),
		SumSq: int64(binary.LittleEndian.Uint64(b[16:])),
		Min:   int64(binary.LittleEndian.Uint64(b[24:])),
		Max:   int64(binary.LittleEndian.Uint64(b[32:])),
	}, nil
}

// Int16Codec encodes a delay in minutes as 2 bytes big endian (state stays compact). Decode
// errors: ErrCodec.
type Int16Codec struct{}

// Append appends v's encoding to dst.
func (Int16Codec) Append(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

// Decode decodes 2 bytes.
func (Int16Codec) Decode(b []byte) (int16, error) {
	if len(b) != 2 {
		return 0, fmt.Errorf("%w: int16: %d bytes, want 2", ErrCodec, len(b))
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

// FlightSize is the size of an encoded input record's value.
const FlightSize = 6

// EncodeFlight appends the input record value of row r: its departure minute (4 bytes big
// endian, minutes since the Unix epoch) and its delay (2 bytes big endian, minutes).
func EncodeFlight(dst []byte, r trace.Row) []byte {
	dst = binary.BigEndian.AppendUint32(dst, r.Minute)
	return binary.BigEndian.AppendUint16(dst, uint16(r.Delay))
}

// DecodeFlight decodes an input record value. Errors: ErrCodec.
func DecodeFlight(b []byte) (minute uint32, delay int16, err error) {
	if len(b) != FlightSize {
		return 0, 0, fmt.Errorf("%w: flight: %d bytes, want %d", ErrCodec, len(b), FlightSize)
	}
	return binary.BigEndian.Uint32(b), int16(binary.BigEndian.Uint16(b[4:])), nil
}

// EventTime is the event time of an input record value in milliseconds (0 when it does not
// decode: Process reports the error).
func EventTime(value []byte) int64 {
	m, _, err := DecodeFlight(value)
	if err != nil {
		return 0
	}
	return int64(m) * 60_000
}

const dayMillis = trace.MinutesPerDay * 60_000

// States are the job's states on one Store (one input partition).
type States struct {
	Stats *strata.AggregatingState[int16, DelayAcc, DelayAcc] // route: delay statistics
	Last  *strata.ListState[int16]                            // route: last LastN delays
	Day   *strata.AggregatingState[int16, DelayAcc, DelayAcc] // route, ns = day: the day window
	buf   []int16
	ns    [8]byte
}

func accDescriptor(name string) strata.AggregatingDescriptor[int16, DelayAcc, DelayAcc] {
	return strata.AggregatingDescriptor[int16, DelayAcc, DelayAcc]{
		Name:              name,
		AccCodec:          AccCodec{},
		CreateAccumulator: func() DelayAcc { return DelayAcc{} },
		Add:               func(in int16, acc DelayAcc) DelayAcc { return acc.Add(in) },
		GetResult:         func(acc DelayAcc) DelayAcc { return acc },
		Merge:             func(a, b DelayAcc) DelayAcc { return a.Merge(b) },
	}
}

// Setup registers the job's states on s (the same names every time, so a restored Store
// finds them).
func Setup(s *strata.Store) (*States, error) {
	st := &States{buf: make([]int16, 0, LastN+1)}
	var err error
	if st.Stats, err = strata.NewAggregatingState(s, accDescriptor("route-delay-stats")); err != nil {
		return nil, err
	}
	if st.Last, err = strata.NewListState(s, strata.ListDescriptor[int16]{Name: "route-last-delays", Codec: Int16Codec{}}); err != nil {
		return nil, err
	}
	if st.Day, err = strata.NewAggregatingState(s, accDescriptor("route-day-window")); err != nil {
		return nil, err
	}
	return st, nil
}

// Timers is the part of a timer service Process needs.
type Timers interface {
	RegisterEventTimeTimer(k strata.Key, ns []byte, ts int64) error
}

// Process handles one flight of route key k: it updates the three states and registers the
// event-time timer at the last millisecond of the flight's day (namespace: the day, 8 bytes
// big endian).
func (st *States) Process(k strata.Key, value []byte, timers Timers) error {
	minute, d, err := DecodeFlight(value)
	if err != nil {
		return err
	}
	if err := st.Stats.Add(k, d); err != nil {
		return err
	}
	acc, _, err := st.Stats.Get(k)
	if err != nil {
		return err
	}
	if err := st.Last.Add(k, d); err != nil {
		return err
	}
	if acc.Count > LastN { // the list held LastN before this Add (trimmed at every Add past it)
		st.buf = st.buf[:0]
		it := st.Last.Get(k)
		for it.Next() {
			st.buf = append(st.buf, it.Value())
		}
		if err := it.Err(); err != nil {
			return err
		}
		if err := st.Last.Update(k, st.buf[len(st.buf)-LastN:]); err != nil {
			return err
		}
	}
	day := uint64(minute / trace.MinutesPerDay)
	binary.BigEndian.PutUint64(st.ns[:], day)
	if err := st.Day.Add(k.In(st.ns[:]), d); err != nil {
		return err
	}
	return timers.RegisterEventTimeTimer(k, st.ns[:], int64(day+1)*dayMillis-1)
}

// OnTimer fires the day window of timer t (its Key is the route key in the day's
// namespace): it returns the record to emit (key the route, value WindowValue) and clears
// the window. A window already cleared returns nil.
func (st *States) OnTimer(t strata.Timer[[]byte]) (key, value []byte, err error) {
	if len(t.Namespace) != 8 {
		return nil, nil, fmt.Errorf("%w: day namespace: %d bytes, want 8", ErrCodec, len(t.Namespace))
	}
	acc, ok, err := st.Day.Get(t.Key)
	if err != nil || !ok {
		return nil, nil, err
	}
	if err := st.Day.Clear(t.Key); err != nil {
		return nil, nil, err
	}
	return t.Key.Bytes(), WindowValue(uint32(binary.BigEndian.Uint64(t.Namespace)), acc), nil
}

// WindowValue is the output record value of a day window: "day count sum min max" in
// decimal (day: days since the Unix epoch; delays in minutes).
func WindowValue(day uint32, a DelayAcc) []byte {
	return fmt.Appendf(nil, "%d %d %d %d %d", day, a.Count, a.Sum, a.Min, a.Max)
}

// Expected is the plain Go computation of the job over a trace.
type Expected struct {
	Stats   map[string]DelayAcc // route -> statistics
	Last    map[string][]int16  // route -> last LastN delays, oldest first
	Windows map[string]int      // "route=WindowValue" -> count (1 for each window fired)
}

// Model replays tr into Go maps. partition gives the input partition of a route key; a
// partition's windows fire up to its last event time.
func Model(tr *trace.Trace, partition func(route string) int32) *Expected {
	e := &Expected{Stats: map[string]DelayAcc{}, Last: map[string][]int16{}, Windows: map[string]int{}}
	type rd struct {
		route string
		day   uint32
	}
	days := map[rd]DelayAcc{}
	names := make([]string, len(tr.Routes))
	for i := range names {
		names[i] = tr.RouteName(uint16(i))
	}
	maxMinute := map[int32]uint32{}
	for _, r := range tr.Rows {
		k := names[r.Route]
		e.Stats[k] = e.Stats[k].Add(r.Delay)
		l := append(e.Last[k], r.Delay)
		if len(l) > LastN {
			l = l[1:]
		}
		e.Last[k] = l
		days[rd{k, r.Day()}] = days[rd{k, r.Day()}].Add(r.Delay)
		p := partition(k)
		maxMinute[p] = max(maxMinute[p], r.Minute)
	}
	for w, acc := range days {
		end := int64(w.day+1)*dayMillis - 1
		if end <= int64(maxMinute[partition(w.route)])*60_000 {
			e.Windows[w.route+"="+string(WindowValue(w.day, acc))]++
		}
	}
	return e
}

// Routes are the route keys of the model in sorted order.
func (e *Expected) Routes() []string {
	out := make([]string, 0, len(e.Stats))
	for k := range e.Stats {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// WindowCount is the number of window records the job must emit.
func (e *Expected) WindowCount() (n int) {
	for _, v := range e.Windows {
		n += v
	}
	return n
}

// CheckOutput compares the committed output (a multiset of "key=value" records) with the
// model's windows and returns up to limit differences.
func (e *Expected) CheckOutput(got map[string]int, limit int) []string {
	var d []string
	for k, v := range e.Windows {
		if got[k] != v {
			d = append(d, fmt.Sprintf("window %s: emitted %d times, want %d", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := e.Windows[k]; !ok {
			d = append(d, fmt.Sprintf("window %s: emitted %d times, want 0", k, v))
		}
	}
	slices.Sort(d)
	return d[:min(len(d), limit)]
}

// CheckState compares the statistics and last delays of the given route keys in st (keys
// built by the Store st is on) with the model's and returns up to limit differences.
func (e *Expected) CheckState(st *States, keys map[string]strata.Key, limit int) ([]string, error) {
	var d []string
	routes := make([]string, 0, len(keys))
	for r := range keys {
		routes = append(routes, r)
	}
	slices.Sort(routes)
	for _, r := range routes {
		k := keys[r]
		acc, _, err := st.Stats.Get(k)
		if err != nil {
			return nil, err
		}
		if acc != e.Stats[r] {
			d = append(d, fmt.Sprintf("route %s: stats %+v, want %+v", r, acc, e.Stats[r]))
		}
		var last []int16
		it := st.Last.Get(k)
		for it.Next() {
			last = append(last, it.Value())
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		if !slices.Equal(last, e.Last[r]) {
			d = append(d, fmt.Sprintf("route %s: last %v, want %v", r, last, e.Last[r]))
		}
		if len(d) >= limit {
			break
		}
	}
	return d[:min(len(d), limit)], nil
}

// FindData looks for bench/testdata/name of the repository: from the working directory
// (bench/ or the repository root), then next to this source file, then above the executable.
func FindData(name string) (string, error) {
	cands := []string{filepath.Join("testdata", name), filepath.Join("bench", "testdata", name)}
	if _, file, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Join(filepath.Dir(file), "..", "..", "testdata", name))
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		for range 4 {
			cands = append(cands, filepath.Join(d, "testdata", name), filepath.Join(d, "bench", "testdata", name))
			d = filepath.Dir(d)
		}
	}
	for _, p := range cands {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (tried %s); pass -data", name, strings.Join(cands, ", "))
}
