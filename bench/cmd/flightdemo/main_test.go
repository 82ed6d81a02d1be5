package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/trace"
)

var (
	jsonPath    = filepath.Join("..", "..", "testdata", "flights-20k.json")
	parquetPath = filepath.Join("..", "..", "testdata", "flights-3m.parquet")
	airportsCSV = filepath.Join("..", "..", "testdata", "airports.csv")
)

// testAirports returns the airports table of testdata.
func testAirports(t *testing.T) map[string]airport {
	t.Helper()
	a, err := loadAirports(airportsCSV)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestMain runs the child process of -kill-after when the test binary re-executes itself
// (os.Executable is the test binary under go test).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := runChild(os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "flightdemo (child):", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type dayKey struct {
	ki  int
	day uint32
}

// replayBoth replays tr at scale K through Strata and through the plain Go map model and
// returns both results and both sets of closed (route key, day) maxima.
func replayBoth(t *testing.T, tr *trace.Trace, K int) (got, want *results, gotDays, wantDays map[dayKey]int16, j *job) {
	return replayBothBound(t, tr, K, defaultOutOfOrder, 0)
}

// replayBothBound is replayBoth with the watermark's out-of-orderness bound and period in
// rows (0: the default).
func replayBothBound(t *testing.T, tr *trace.Trace, K int, bound time.Duration, every int) (got, want *results, gotDays, wantDays map[dayKey]int16, j *job) {
	t.Helper()
	clock := new(eventClock)
	store, err := strata.Open(t.TempDir(), strata.Options{Clock: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	airports := testAirports(t)
	ec := etConfig{Bound: bound, Every: every, Clock: clock, Airports: airports}
	j, err = newJob(tr, K, ec, store)
	if err != nil {
		t.Fatal(err)
	}
	gotDays, wantDays = map[dayKey]int16{}, map[dayKey]int16{}
	j.onDay = func(ki int, day uint32, v int16) {
		k := dayKey{ki, day}
		if _, dup := gotDays[k]; dup {
			t.Errorf("strata: day %d of route key %d closed twice", day, ki)
		}
		gotDays[k] = v
	}
	if err := j.replay(0, len(tr.Rows), nil); err != nil {
		t.Fatal(err)
	}
	if got, err = j.results(); err != nil {
		t.Fatal(err)
	}
	want = runModel(tr, K, ec, func(ki int, day uint32, v int16) { wantDays[dayKey{ki, day}] = v })
	if d := diff(got, want, 20); len(d) > 0 {
		t.Errorf("Strata state differs from the plain Go map model:\n%s", strings.Join(d, "\n"))
	}
	if !maps.Equal(gotDays, wantDays) {
		t.Errorf("daily maxima: %d from Strata, %d from the model, not equal", len(gotDays), len(wantDays))
	}
	return got, want, gotDays, wantDays, j
}

func routeIndex(t *testing.T, tr *trace.Trace, name string) int {
	t.Helper()
	for r := range tr.Routes {
		if tr.RouteName(uint16(r)) == name {
			return r
		}
	}
	t.Fatalf("route %s not in the trace", name)
	return -1
}

func airportIndex(t *testing.T, tr *trace.Trace, code string) int {
	t.Helper()
	i := slices.Index(tr.Airports, code)
	if i < 0 {
		t.Fatalf("airport %s not in the trace", code)
	}
	return i
}

func dayOf(t *testing.T, date string) uint32 {
	t.Helper()
	tm, err := time.Parse("2006/01/02", date)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(tm.Unix() / 86400)
}

// TestReplayJSON replays flights-20k.json and checks the state against the model and against
// values computed from the raw JSON with an independent script (Python over the file).
func TestReplayJSON(t *testing.T) {
	tr, err := trace.LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	got, _, gotDays, _, _ := replayBoth(t, tr, 1)

	for _, tc := range []struct {
		route             string
		count, sum, sumSq int64
		min, max          int64
		last              []int16
		days              int
		firstDay          string
		firstDayMax       int16
	}{
		{"LAX-PHX", 59, 541, 47115, -19, 134, []int16{21, 0, 9, 2, -11, -11, 8, -13, 134, 15}, 46, "2001/01/01", -7},
		{"LAX-LAS", 56, 851, 104989, -18, 238, []int16{-6, -1, 70, -14, -1, 6, -18, -13, 3, -1}, 47, "2001/01/01", -9},
		{"PHX-LAX", 56, 798, 57744, -17, 134, []int16{-5, 32, 10, -7, -8, -4, -9, -12, 32, -14}, 42, "2001/01/03", 7},
	} {
		ki := routeIndex(t, tr, tc.route)
		want := delayAcc{Count: tc.count, Sum: tc.sum, SumSq: tc.sumSq, Min: tc.min, Max: tc.max}
		if got.Stats[ki] != want {
			t.Errorf("%s: stats %+v, want %+v", tc.route, got.Stats[ki], want)
		}
		if !slices.Equal(got.Last[ki], tc.last) {
			t.Errorf("%s: last %v, want %v", tc.route, got.Last[ki], tc.last)
		}
		days := 0
		for k := range gotDays {
			if k.ki == ki {
				days++
			}
		}
		if days != tc.days {
			t.Errorf("%s: %d days with flights, want %d", tc.route, days, tc.days)
		}
		if v, ok := gotDays[dayKey{ki, dayOf(t, tc.firstDay)}]; !ok || v != tc.firstDayMax {
			t.Errorf("%s: max delay on %s = %d (found %v), want %d", tc.route, tc.firstDay, v, ok, tc.firstDayMax)
		}
	}
	if got.Days.N != 18825 || len(gotDays) != 18825 {
		t.Errorf("(route, day) maxima = %d / %d, want 18825", got.Days.N, len(gotDays))
	}
	ord := got.Dests[airportIndex(t, tr, "ORD")]
	if len(ord) != 108 || ord["LGA"] != (destStats{33, 223}) || ord["LAX"] != (destStats{26, 164}) {
		t.Errorf("ORD: %d destinations, LGA %+v, LAX %+v; want 108, {33 223}, {26 164}", len(ord), ord["LGA"], ord["LAX"])
	}
	worst := worstRoutes(got.Stats, 3, 20)
	var names []string
	for _, r := range worst {
		names = append(names, tr.RouteName(uint16(r.Key)))
	}
	if !slices.Equal(names, []string{"DFW-ATL", "SEA-SFO", "ATL-EWR"}) || worst[0].Stats.Count != 29 || worst[0].Stats.Sum != 998 {
		t.Errorf("worst routes (>= 20 flights) = %v %+v, want DFW-ATL (29 flights, sum 998), SEA-SFO, ATL-EWR", names, worst)
	}
}

// TestReplayScaled replays flights-20k.json with 3 salted copies of every key: copy 0 must equal
// the unscaled replay, copies 1 and 2 differ by the jitter but still match the model.
func TestReplayScaled(t *testing.T) {
	tr, err := trace.LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	const K = 3
	got, _, _, _, _ := replayBoth(t, tr, K)
	base := runModel(tr, 1, etConfig{Bound: defaultOutOfOrder, Airports: testAirports(t)}, nil)
	ki := routeIndex(t, tr, "LAX-PHX")
	if got.Stats[ki*K] != base.Stats[ki] {
		t.Errorf("LAX-PHX#0: %+v, want the unscaled %+v", got.Stats[ki*K], base.Stats[ki])
	}
	for k := 1; k < K; k++ {
		s := got.Stats[ki*K+k]
		if s.Count != base.Stats[ki].Count || s == base.Stats[ki] {
			t.Errorf("LAX-PHX#%d: %+v, want %d flights with jittered delays", k, s, base.Stats[ki].Count)
		}
		if d := s.Sum - base.Stats[ki].Sum; d < -jitterMax*s.Count || d > jitterMax*s.Count {
			t.Errorf("LAX-PHX#%d: sum %d, more than the jitter away from %d", k, s.Sum, base.Stats[ki].Sum)
		}
	}
	if n := len(got.Dests); n != len(tr.Airports)*K {
		t.Errorf("origin keys = %d, want %d", n, len(tr.Airports)*K)
	}
}

// TestReplayParquetPrefix replays the first 200,000 rows of flights-3m.parquet (the first ~12
// days) and checks them against the model, with a few pinned values.
func TestReplayParquetPrefix(t *testing.T) {
	tr, err := trace.LoadParquet(parquetPath, 200_000)
	if err != nil {
		t.Fatal(err)
	}
	got, _, gotDays, _, _ := replayBoth(t, tr, 1)
	ki := routeIndex(t, tr, "LAX-LAS")
	if s := got.Stats[ki]; s.Count < 400 || len(got.Last[ki]) != lastN {
		t.Errorf("LAX-LAS: %+v, last %v: want hundreds of flights and %d last delays", s, got.Last[ki], lastN)
	}
	days := map[uint32]bool{}
	for k := range gotDays {
		days[k.day] = true
	}
	if first := tr.Rows[0].Day(); !days[first] || len(days) != int(tr.Rows[len(tr.Rows)-1].Day()-first+1) {
		t.Errorf("closed days: %d, want every day from %d to %d", len(days), first, tr.Rows[len(tr.Rows)-1].Day())
	}
}

// TestDiffDetects makes sure the cross-check can fail: every kind of difference is reported.
func TestDiffDetects(t *testing.T) {
	tr, err := trace.LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	want := runModel(tr, 1, etConfig{Bound: defaultOutOfOrder, Airports: testAirports(t)}, nil)
	for name, mutate := range map[string]func(r *results){
		"stats": func(r *results) { r.Stats[5].Sum++ },
		"last":  func(r *results) { r.Last[5] = r.Last[5][1:] },
		"dests": func(r *results) {
			for k, v := range r.Dests[0] {
				r.Dests[0][k] = destStats{v.Count, v.Sum + 1}
				break
			}
		},
		"days":     func(r *results) { r.Days.Sum++ },
		"windows":  func(r *results) { r.ET.WinDigest++ },
		"states":   func(r *results) { r.ET.StateDelay[0]++ },
		"sessions": func(r *results) { r.ET.Dur[3]++ },
		"ttl":      func(r *results) { r.Expired++ },
		"activity": func(r *results) { r.Activity++ },
	} {
		got := runModel(tr, 1, etConfig{Bound: defaultOutOfOrder, Airports: testAirports(t)}, nil)
		if d := diff(got, want, 5); len(d) != 0 {
			t.Fatalf("%s: identical replays differ: %v", name, d)
		}
		mutate(got)
		if d := diff(got, want, 5); len(d) == 0 {
			t.Errorf("%s: mutation not detected", name)
		}
	}
}

// TestRunCLI runs the command end to end on the JSON sample and on a parquet prefix found
// through the default data path.
func TestRunCLI(t *testing.T) {
	for _, args := range [][]string{
		{"-json", jsonPath, "-dir", t.TempDir()},
		{"-rows", "30000", "-scale", "2"},
	} {
		var out bytes.Buffer
		if err := run(args, &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		for _, want := range []string{"events:", "agg.add", "day.close", "windows:", "sessions:", "TTL:", "broadcast:", "check: OK"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for v := 1; v <= 1000; v++ {
		h.record(time.Duration(v) * time.Microsecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(tc.q)
		if d := float64(got-tc.want) / float64(tc.want); d < -0.0625 || d > 0.0625 {
			t.Errorf("quantile(%v) = %v, want %v within 6.25%%", tc.q, got, tc.want)
		}
	}
	for v := uint64(0); v < 1<<20; v += 7 {
		lo, w := histBucket(histIndex(v))
		if v < lo || v >= lo+w {
			t.Fatalf("value %d in bucket [%d, %d)", v, lo, lo+w)
		}
	}
}

// runOut runs the command with args and fails unless it ends with check: OK; it returns the
// output.
func runOut(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(args, &out); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.String())
	}
	if !strings.Contains(out.String(), "check: OK") {
		t.Fatalf("%v: no check: OK:\n%s", args, out.String())
	}
	return out.String()
}

// count returns the integer of the first submatch of re in s, failing without a match.
func count(t *testing.T, s, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("output lacks %q:\n%s", re, s)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// changelogModes are the two ways the demo checkpoints: with the changelog (the default) and
// without (native incremental checkpoints).
var changelogModes = []struct {
	name string
	args []string
}{{"changelog=on", []string{"-changelog=true"}}, {"changelog=off", []string{"-changelog=false"}}}

// TestCheckpointsDefault: the plain run checkpoints about every twelfth of a small input, and
// the checkpoints are incremental (they reuse what the previous one stored); with the
// changelog on, it reports the log and its materializations, and a short materialization
// interval makes some (each then the base of the next checkpoints).
func TestCheckpointsDefault(t *testing.T) {
	for _, m := range changelogModes {
		t.Run(m.name, func(t *testing.T) {
			args := append([]string{"-json", jsonPath}, m.args...)
			seriesPath := filepath.Join(t.TempDir(), "series.txt")
			if m.name == "changelog=on" {
				args = append(args, "-materialize-every", "20ms", "-series", seriesPath)
			}
			out := runOut(t, args...)
			if n := count(t, out, `checkpoints: (\d+) taken every`); n < 10 {
				t.Errorf("%d checkpoints, want >= 10:\n%s", n, out)
			}
			for _, want := range []string{"sync pause", "async", "duration", "bytes per checkpoint (objects not in the previous checkpoint)"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if m.name == "changelog=off" {
				if strings.Contains(out, "changelog:") || !strings.Contains(out, "native incremental") {
					t.Errorf("-changelog=false: want native checkpoints and no changelog figures:\n%s", out)
				}
				return
			}
			if n := count(t, out, `changelog: (\d+) materializations`); n < 1 {
				t.Errorf("no materialization at a 20 ms interval:\n%s", out)
			}
			if !strings.Contains(out, "log since the last materialization at a checkpoint") {
				t.Errorf("output lacks the log's size:\n%s", out)
			}
			// -series: the progress samples, every checkpoint and the materializations.
			b, err := os.ReadFile(seriesPath)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
				var sec float64
				var events int
				var kind string
				if _, err := fmt.Sscanf(l, "%g %d %s", &sec, &events, &kind); err != nil {
					t.Fatalf("series line %q: %v", l, err)
				}
				kinds[kind]++
			}
			if ck := count(t, out, `checkpoints: (\d+) taken every`); kinds["progress"] < 2 || kinds["checkpoint"] != ck || kinds["materialization"] < 1 {
				t.Errorf("series records %v, want progress, %d checkpoints and materializations:\n%s", kinds, ck, b)
			}
		})
	}
}

// TestKill SIGKILLs the child process in the middle of the 20k flights; the restored job must
// resume from the child's last committed checkpoint (not from event 0: the interval makes
// several before the kill) and still equal the model — with the changelog on (the restore
// replays the log on top of the first checkpoint's materialization) and off.
func TestKill(t *testing.T) {
	for _, m := range changelogModes {
		t.Run(m.name, func(t *testing.T) {
			out := runOut(t, append([]string{"-json", jsonPath, "-checkpoint-every", "2000", "-kill-after", "11000"}, m.args...)...)
			if !strings.Contains(out, "signal: killed") {
				t.Errorf("the child was not reported killed by a signal:\n%s", out)
			}
			if n := count(t, out, `it reported (\d+) checkpoints complete`); n < 3 {
				t.Errorf("the child completed %d checkpoints before the kill, want >= 3:\n%s", n, out)
			}
			// The child's reported checkpoints are committed, so the restore starts at the last of
			// them or at a later one (committed while the SIGKILL was on its way): a checkpoint
			// position, so a multiple of the interval.
			last := count(t, out, `checkpoints complete, the last \d+ at event (\d+)`)
			at := count(t, out, `resuming at event (\d+)`)
			if at < last || at%2000 != 0 {
				t.Errorf("resumed at event %d, want a multiple of 2000 from the child's last reported checkpoint (event %d) on:\n%s", at, last, out)
			}
			if n := count(t, out, `restored with the keyed state (\d+) times`); n != 1 {
				t.Errorf("broadcast state restored %d times, want 1:\n%s", n, out)
			}
			if count(t, out, `windows: (\d+) \(route, UTC day\)`) == 0 || count(t, out, `sessions: (\d+) per destination`) == 0 {
				t.Errorf("no windows or sessions fired:\n%s", out)
			}
			if !strings.Contains(out, "by the killed child process") {
				t.Errorf("checkpoint figures do not cover the child's:\n%s", out)
			}
			// The restored checkpoint is one of the child's third or later: with the changelog,
			// the log since the first (its materialization) is replayed; without, none is.
			records := count(t, out, `; (\d+) changelog records replayed,`)
			if on := m.name == "changelog=on"; on != (records > 0) {
				t.Errorf("%s: %d changelog records replayed:\n%s", m.name, records, out)
			}
		})
	}
}

// TestKillBeforeFirstCheckpoint: a kill before any checkpoint is committed replays from event 0.
func TestKillBeforeFirstCheckpoint(t *testing.T) {
	out := runOut(t, "-json", jsonPath, "-checkpoint-every", "15000", "-kill-after", "2000")
	if !strings.Contains(out, "replaying from event 0") {
		t.Errorf("want a restart from event 0:\n%s", out)
	}
}

// TestRescale restores into 2 and 3 Stores splitting the key groups, then back into one, at
// scale 2 (so route and origin keys of one flight often sit in different Stores), with the
// changelog on (materializing every 20 ms, so the rescaled Stores materialize too) and off.
func TestRescale(t *testing.T) {
	for _, m := range changelogModes {
		for _, p := range []string{"2", "3"} {
			t.Run(m.name+"/p="+p, func(t *testing.T) {
				// p=3 with a 2 h bound: late flights are dropped, and the model agrees across restores.
				args := []string{"-json", jsonPath, "-scale", "2", "-rescale", p, "-materialize-every", "20ms"}
				if p == "3" {
					args = append(args, "-out-of-order", "2h")
				}
				out := runOut(t, append(args, m.args...)...)
				// Broadcast state: one copy into each of the p Stores, then one into the last.
				if want, _ := strconv.Atoi(p); count(t, out, `restored with the keyed state (\d+) times`) != want+1 {
					t.Errorf("-rescale %s: broadcast state not restored into every Store:\n%s", p, out)
				}
				if late := count(t, out, `, (\d+) late flights dropped`); (p == "3") != (late > 0) {
					t.Errorf("-rescale %s: %d late flights dropped:\n%s", p, late, out)
				}
				for _, want := range []string{"scale out 1 -> " + p, "scale in " + p + " -> 1", "restore time:"} {
					if !strings.Contains(out, want) {
						t.Errorf("-rescale %s: output lacks %q:\n%s", p, want, out)
					}
				}
			})
		}
	}
}

// TestPositionRoundTrip pins the input position's layout and its refusals.
func TestPositionRoundTrip(t *testing.T) {
	p := position{Rows: 20000, K: 2, Row: 1234, Day: 11323, Days: dayDigest{N: 7, Sum: 1 << 63}, MaxT: 978336000000, WM: -5}
	p.Out.WinFired, p.Out.SessDigest, p.Out.Dur[192], p.Out.StateDelay[63] = 3, 1<<64-1, 9, -7
	b := p.encode()
	if len(b) != positionSize || b[0] != positionVersion {
		t.Fatalf("encoded %d bytes, version %d", len(b), b[0])
	}
	got, err := decodePosition(b, 20000, 2)
	if err != nil || got != p {
		t.Fatalf("decode: %+v, %v; want %+v", got, err, p)
	}
	for name, tc := range map[string]struct {
		b       []byte
		rows, K int
	}{
		"empty":       {nil, 20000, 2},
		"version":     {append([]byte{1}, b[1:]...), 20000, 2},
		"short":       {b[:positionSize-1], 20000, 2},
		"other input": {b, 20001, 2},
		"other scale": {b, 20000, 1},
		"row beyond":  {position{Rows: 10, K: 1, Row: 11}.encode(), 10, 1},
	} {
		if _, err := decodePosition(tc.b, tc.rows, tc.K); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestFairModel checks that the Go model doing the job's work (model_fair.go) computes what
// the plain model does, at several scales and watermark bounds (a small bound makes late
// flights, dropped windows and sessions), and keeps one history list per (route key, day)
// with every delay.
func TestFairModel(t *testing.T) {
	tr, err := trace.LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	airports := testAirports(t)
	for _, tc := range []struct {
		K     int
		bound time.Duration
		every int
	}{
		{1, defaultOutOfOrder, 0},
		{3, defaultOutOfOrder, 0},
		{1, 10 * time.Minute, 1},
		{2, 0, 7},
	} {
		ec := etConfig{Bound: tc.bound, Every: tc.every, Airports: airports}
		want := runModel(tr, tc.K, ec, nil)
		got, lists, delays := runFairModel(tr, tc.K, ec)
		if d := diff(got, want, 10); len(d) > 0 {
			t.Errorf("K %d bound %v every %d: the fair model differs from the plain one:\n%s", tc.K, tc.bound, tc.every, strings.Join(d, "\n"))
		}
		if late := want.ET.WinLate + want.ET.SessLate; tc.bound < time.Hour && late == 0 {
			t.Errorf("K %d bound %v: no late flight, the case tests nothing late", tc.K, tc.bound)
		}
		days := map[[2]int]bool{}
		for _, r := range tr.Rows {
			for k := range tc.K {
				days[[2]int{int(r.Route)*tc.K + k, int(r.Day())}] = true
			}
		}
		if lists != len(days) || delays != len(tr.Rows)*tc.K {
			t.Errorf("K %d: %d history lists with %d delays, want %d with %d", tc.K, lists, delays, len(days), len(tr.Rows)*tc.K)
		}
	}
}

// BenchmarkGoModels times the demo's two Go models over the 3 M flights of the parquet file,
// one replay per iteration, in events/s: "fair" (model_fair.go, the job's work on Go maps,
// the figure the demo prints beside Strata's) and "plain" (model.go, no history, no timers).
func BenchmarkGoModels(b *testing.B) {
	tr, err := trace.LoadParquet(parquetPath, 0)
	if err != nil {
		b.Fatal(err)
	}
	a, err := loadAirports(airportsCSV)
	if err != nil {
		b.Fatal(err)
	}
	ec := etConfig{Bound: defaultOutOfOrder, Airports: a}
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"fair", func() { runFairModel(tr, 1, ec) }},
		{"plain", func() { runModel(tr, 1, ec, nil) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
			b.ReportMetric(float64(len(tr.Rows))*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
		})
	}
}
