package trace

import (
	"path/filepath"
	"testing"
	"time"
)

var (
	parquetPath = filepath.Join("..", "..", "testdata", "flights-3m.parquet")
	jsonPath    = filepath.Join("..", "..", "testdata", "flights-20k.json")
)

func minuteOf(t *testing.T, s string) uint32 {
	t.Helper()
	tm, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(tm.Unix() / 60)
}

// TestLoadJSON pins the first row and the dictionary sizes of flights-20k.json (values read off
// the file with jq).
func TestLoadJSON(t *testing.T) {
	tr, err := LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tr.Rows); got != 20000 {
		t.Fatalf("rows = %d, want 20000", got)
	}
	first := tr.Rows[0]
	if first.Minute != minuteOf(t, "2001-01-01 00:47") || first.Delay != 66 || first.Distance != 1750 ||
		tr.RouteName(first.Route) != "DTW-LAS" {
		t.Fatalf("first row = %+v %s, want 2001/01/01 00:47 66 1750 DTW-LAS", first, tr.RouteName(first.Route))
	}
	if got := len(tr.Routes); got != 2977 {
		t.Errorf("routes = %d, want 2977", got)
	}
	checkTrace(t, tr)
}

// TestLoadParquetPrefix pins the first rows of flights-3m.parquet and the limit argument.
func TestLoadParquetPrefix(t *testing.T) {
	tr, err := LoadParquet(parquetPath, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tr.Rows); got != 10000 {
		t.Fatalf("rows = %d, want 10000", got)
	}
	first := tr.Rows[0]
	if first.Minute != minuteOf(t, "2001-01-01 00:01") || first.Delay != 33 || first.Distance != 2176 {
		t.Fatalf("first row = %+v %s", first, tr.RouteName(first.Route))
	}
	checkTrace(t, tr)
}

// TestParquetContainsJSON decodes all 3M parquet rows and checks that the independently encoded
// JSON sample is (almost entirely) a sub-multiset of them: the two files come from the same BTS
// records, so this cross-checks dates, delays, distances and airport codes of the parquet decoder.
// 19,968 of the 20,000 JSON rows are found (the samples were drawn separately upstream).
func TestParquetContainsJSON(t *testing.T) {
	pq, err := LoadParquet(parquetPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(pq.Rows); got != 3_000_000 {
		t.Fatalf("rows = %d, want 3,000,000", got)
	}
	if len(pq.Airports) > 229+228 || len(pq.Routes) != 3399 {
		t.Fatalf("airports = %d, routes = %d, want <= 457, 3399", len(pq.Airports), len(pq.Routes))
	}
	if last := pq.Rows[len(pq.Rows)-1].Minute; last != minuteOf(t, "2001-07-01 00:00") {
		t.Errorf("last minute = %v", time.Unix(int64(last)*60, 0).UTC())
	}
	checkTrace(t, pq)
	js, err := LoadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	type flight struct {
		minute   uint32
		delay    int16
		distance uint16
		route    string
	}
	set := make(map[flight]int, len(pq.Rows))
	for _, r := range pq.Rows {
		set[flight{r.Minute, r.Delay, r.Distance, pq.RouteName(r.Route)}]++
	}
	found := 0
	for _, r := range js.Rows {
		f := flight{r.Minute, r.Delay, r.Distance, js.RouteName(r.Route)}
		if set[f] > 0 {
			set[f]--
			found++
		}
	}
	if found != 19968 {
		t.Errorf("JSON rows found in the parquet = %d, want 19968", found)
	}
}

func checkTrace(t *testing.T, tr *Trace) {
	t.Helper()
	for i, r := range tr.Rows {
		if i > 0 && r.Minute < tr.Rows[i-1].Minute {
			t.Fatalf("row %d: minute %d < previous %d", i, r.Minute, tr.Rows[i-1].Minute)
		}
		if int(r.Route) >= len(tr.Routes) {
			t.Fatalf("row %d: route %d out of %d", i, r.Route, len(tr.Routes))
		}
	}
	for i, rt := range tr.Routes {
		if int(rt.Origin) >= len(tr.Airports) || int(rt.Dest) >= len(tr.Airports) {
			t.Fatalf("route %d: %+v out of %d airports", i, rt, len(tr.Airports))
		}
	}
}
