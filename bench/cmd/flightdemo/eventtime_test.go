package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/bench/internal/trace"
)

// TestZones pins the conversion of local departure times to event times (UTC).
func TestZones(t *testing.T) {
	airports := testAirports(t)
	var lt localTime
	for _, tc := range []struct {
		code, local, utc string
	}{
		{"JFK", "2001-01-15 08:00", "2001-01-15 13:00"}, // EST
		{"JFK", "2001-07-01 08:00", "2001-07-01 12:00"}, // EDT
		{"JFK", "2001-04-01 01:59", "2001-04-01 06:59"}, // just before the switch
		{"JFK", "2001-04-01 03:00", "2001-04-01 07:00"}, // just after
		{"HNL", "2001-07-01 08:00", "2001-07-01 18:00"}, // no DST
		{"PHX", "2001-07-01 08:00", "2001-07-01 15:00"}, // Arizona: no DST
		{"SJU", "2001-01-15 08:00", "2001-01-15 12:00"}, // AST
		{"ANC", "2001-01-15 08:00", "2001-01-15 17:00"},
		{"MQT", "2001-01-15 08:00", "2001-01-15 14:00"}, // state NA: by longitude (-87.4°)
	} {
		a, ok := airports[tc.code]
		if !ok {
			t.Fatalf("%s not in the table", tc.code)
		}
		l, _ := time.Parse("2006-01-02 15:04", tc.local)
		u, _ := time.Parse("2006-01-02 15:04", tc.utc)
		if got := lt.eventTime(uint32(l.Unix()/60), zoneOf(a)); got != u.UnixMilli() {
			t.Errorf("%s %s local: event time %v, want %s UTC", tc.code, tc.local, time.UnixMilli(got).UTC(), tc.utc)
		}
	}
}

// TestOutOfOrderness measures the file: the event times of flights-3m.parquet, which is sorted
// by local time, lag the largest event time seen by at most 6 h — the default bound, so the
// default run drops no flight as late.
func TestOutOfOrderness(t *testing.T) {
	tr, err := trace.LoadParquet(parquetPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	airports := testAirports(t)
	var lt localTime
	maxT, worst, over5h := int64(-1<<62), int64(0), 0
	for _, r := range tr.Rows {
		et := lt.eventTime(r.Minute, zoneOf(airports[tr.Airports[tr.Routes[r.Route].Origin]]))
		lag := maxT - et
		worst = max(worst, lag)
		if lag > 5*3600*1000 {
			over5h++
		}
		maxT = max(maxT, et)
	}
	if worst != defaultOutOfOrder.Milliseconds() {
		t.Errorf("largest lag %v, want the default bound %v", time.Duration(worst)*time.Millisecond, defaultOutOfOrder)
	}
	t.Logf("largest lag %v; %d of %d flights lag more than 5 h", time.Duration(worst)*time.Millisecond, over5h, len(tr.Rows))
}

// TestSessionMerge: two sessions of LAX's inbound flights (from Honolulu, 5 h apart in UTC)
// and a flight from New York that arrives in the stream after both (its local time is later)
// but lies between them in event time. With a 6 h bound the first session is still open: the
// late flight bridges both, and their state windows merge (MergeNamespaces). With a 1 h bound
// the first has fired: the flight only extends the second. The watermark advances after every
// row.
func TestSessionMerge(t *testing.T) {
	local := func(s string) uint32 {
		tm, _ := time.Parse("2006-01-02 15:04", s)
		return uint32(tm.Unix() / 60)
	}
	tr := &trace.Trace{
		Airports: []string{"HNL", "LAX", "JFK"},
		Routes:   []trace.Route{{Origin: 0, Dest: 1}, {Origin: 2, Dest: 1}},
		Rows: []trace.Row{
			{Minute: local("2001-01-15 05:00"), Delay: 10, Route: 0}, // 15:00 UTC
			{Minute: local("2001-01-15 10:00"), Delay: 20, Route: 0}, // 20:00 UTC
			{Minute: local("2001-01-15 12:30"), Delay: 30, Route: 1}, // 17:30 UTC
		},
	}
	lax := 1
	for _, tc := range []struct {
		bound                   time.Duration
		fired, extended, merged uint64
		wantDigest              func() uint64
	}{
		{6 * time.Hour, 1, 1, 1, func() uint64 {
			var o etOut
			o.session(lax, sessWin{utc("2001-01-15 15:00"), utc("2001-01-15 23:00")}, winAcc{}.add(10).add(20).add(30))
			return o.SessDigest
		}},
		{time.Hour, 2, 1, 0, func() uint64 {
			var o etOut
			o.session(lax, sessWin{utc("2001-01-15 15:00"), utc("2001-01-15 18:00")}, winAcc{}.add(10))
			o.session(lax, sessWin{utc("2001-01-15 17:30"), utc("2001-01-15 23:00")}, winAcc{}.add(20).add(30))
			return o.SessDigest
		}},
	} {
		got, _, _, _, _ := replayBothBound(t, tr, 1, tc.bound, 1)
		o := got.ET
		if o.SessFired != tc.fired || o.SessExtended != tc.extended || o.SessMerged != tc.merged || o.SessLate != 0 {
			t.Errorf("bound %v: sessions fired %d, extended %d, merged %d, late %d; want %d, %d, %d, 0",
				tc.bound, o.SessFired, o.SessExtended, o.SessMerged, o.SessLate, tc.fired, tc.extended, tc.merged)
		}
		if o.SessDigest != tc.wantDigest() {
			t.Errorf("bound %v: sessions differ from the expected windows", tc.bound)
		}
		if o.WinFired != 2 || o.WinLate != 0 || got.Expired != 0 || got.ActFlights != 3 {
			t.Errorf("bound %v: %d windows fired, %d late, %d routes expired, %d flights in live periods; want 2, 0, 0, 3",
				tc.bound, o.WinFired, o.WinLate, got.Expired, got.ActFlights)
		}
	}
}

func utc(s string) int64 {
	tm, _ := time.Parse("2006-01-02 15:04", s)
	return tm.UnixMilli()
}

// TestLateAndExpired: on the 20k sample, a 2 h bound drops flights as late from windows and
// sessions (the model drops the same ones: replayBoth compares), and routes idle for a day
// expire (and the live ones' periods count only the flights since their last idle day: the
// model's digest agrees).
func TestLateAndExpired(t *testing.T) {
	tr, err := trace.LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, bound := range []time.Duration{2 * time.Hour, defaultOutOfOrder} {
		got, _, _, _, _ := replayBothBound(t, tr, 1, bound, 0)
		o := got.ET
		late := bound < defaultOutOfOrder
		if (o.WinLate > 0) != late || (o.SessLate > 0) != late {
			t.Errorf("bound %v: %d late in windows, %d in sessions; want some: %v", bound, o.WinLate, o.SessLate, late)
		}
		if o.SessMerged == 0 || o.WinFired == 0 {
			t.Errorf("bound %v: %d sessions merged, %d windows fired; want some", bound, o.SessMerged, o.WinFired)
		}
		routes := 0
		for _, s := range got.Stats {
			if s.Count > 0 {
				routes++
			}
		}
		var flights int64
		for _, s := range got.Stats {
			flights += s.Count
		}
		if got.Expired == 0 || got.Expired >= routes || got.ActFlights == 0 || got.ActFlights >= flights/10 {
			t.Errorf("bound %v: %d of %d routes expired, %d of %d flights in live periods", bound, got.Expired, routes, got.ActFlights, flights)
		}
	}
}

// TestAirportsCodec round-trips an airport and refuses damaged bytes.
func TestAirportsCodec(t *testing.T) {
	a := airport{City: "Kailua/Kona", State: "HI", Lat: 19.73, Lon: -156.04}
	b := airportCodec{}.Append(nil, a)
	if got, err := (airportCodec{}).Decode(b); err != nil || got != a {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{b[:10], b[:len(b)-1], append(b, 0)} {
		if _, err := (airportCodec{}).Decode(bad); err == nil {
			t.Errorf("%d bytes decoded", len(bad))
		}
	}
	if _, err := loadAirports(filepath.Join(t.TempDir(), "none.csv")); err == nil {
		t.Error("a missing airports file loaded")
	}
}
