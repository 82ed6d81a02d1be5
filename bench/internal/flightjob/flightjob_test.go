package flightjob

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/trace"
)

// TestReplayMatchesModel replays flights-20k.json through the job's states on Stores, one per
// "partition" (a route's partition: its index modulo 4), each with its own watermark as the
// Kafka runner keeps it, and checks the state and the emitted windows against Model; then
// that the checks see a window lost, a window emitted twice and a damaged state.
func TestReplayMatchesModel(t *testing.T) {
	tr, err := trace.LoadJSON(filepath.Join("..", "..", "testdata", "flights-20k.json"))
	if err != nil {
		t.Fatal(err)
	}
	const parts = 4
	part := map[string]int32{}
	for i := range tr.Routes {
		part[tr.RouteName(uint16(i))] = int32(i % parts)
	}
	exp := Model(tr, func(r string) int32 { return part[r] })

	type p struct {
		s      *strata.Store
		st     *States
		timers *strata.TimerService[[]byte]
		keys   map[string]strata.Key
	}
	var ps [parts]p
	for i := range ps {
		s, err := strata.Open("", strata.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st, err := Setup(s)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := strata.NewTimerService(s, strata.TimerServiceDescriptor[[]byte]{Name: "timers", NamespaceCodec: strata.Bytes})
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p{s, st, ts, map[string]strata.Key{}}
	}
	got := map[string]int{}
	for _, r := range tr.Rows {
		name := tr.RouteName(r.Route)
		x := &ps[part[name]]
		k, ok := x.keys[name]
		if !ok {
			k = x.s.Key([]byte(name))
			x.keys[name] = k
		}
		v := EncodeFlight(nil, r)
		if err := x.st.Process(k, v, x.timers); err != nil {
			t.Fatal(err)
		}
		err := x.timers.AdvanceWatermark(EventTime(v), func(tm strata.Timer[[]byte]) error {
			key, val, err := x.st.OnTimer(tm)
			if val != nil {
				got[string(key)+"="+string(val)]++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if d := exp.CheckOutput(got, 10); len(d) > 0 {
		t.Fatalf("output differs from the model:\n%v", d)
	}
	for i := range ps {
		d, err := exp.CheckState(ps[i].st, ps[i].keys, 10)
		if err != nil || len(d) > 0 {
			t.Fatalf("partition %d: state differs from the model (%v):\n%v", i, err, d)
		}
	}
	if exp.WindowCount() < 1000 {
		t.Fatalf("%d windows fired: the check would see little", exp.WindowCount())
	}

	// The checks must fail on a lost window, a duplicate, and a damaged state.
	for w := range got {
		lost := maps.Clone(got)
		delete(lost, w)
		dup := maps.Clone(got)
		dup[w]++
		if len(exp.CheckOutput(lost, 1)) == 0 || len(exp.CheckOutput(dup, 1)) == 0 {
			t.Fatalf("CheckOutput does not see window %s lost or emitted twice", w)
		}
		break
	}
	x := &ps[0]
	for name, k := range x.keys {
		if err := x.st.Last.Add(k, 1); err != nil {
			t.Fatal(err)
		}
		if d, err := exp.CheckState(x.st, x.keys, 1); err != nil || len(d) == 0 {
			t.Fatalf("CheckState does not see route %s's last delays damaged (%v)", name, err)
		}
		break
	}
}

func TestCodecs(t *testing.T) {
	a := DelayAcc{}.Add(-5).Add(30).Add(7)
	if got, err := (AccCodec{}).Decode(AccCodec{}.Append(nil, a)); err != nil || got != a {
		t.Fatalf("AccCodec round trip: %+v, %v; want %+v", got, err, a)
	}
	if _, err := (AccCodec{}).Decode(make([]byte, AccSize-1)); err == nil {
		t.Fatal("AccCodec decoded a short value")
	}
	r := trace.Row{Minute: 16_000_000, Delay: -12}
	m, d, err := DecodeFlight(EncodeFlight(nil, r))
	if err != nil || m != r.Minute || d != r.Delay {
		t.Fatalf("flight round trip: %d, %d, %v", m, d, err)
	}
	if _, _, err := DecodeFlight([]byte{1, 2, 3}); err == nil {
		t.Fatal("DecodeFlight decoded 3 bytes")
	}
	if a.Count != 3 || a.Sum != 32 || a.Min != -5 || a.Max != 30 || a.SumSq != 25+900+49 {
		t.Fatalf("DelayAcc %+v", a)
	}
}
