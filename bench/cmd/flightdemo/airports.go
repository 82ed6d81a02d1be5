package main

import (
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"
)

// The airports table (testdata/airports.csv, 3,376 US airports): the job's broadcast state,
// airport IATA code -> airport, filled once at the job's first start and from then on carried
// by checkpoints (a Restore at any parallelism gives every Store one copy). The job reads it
// into its own per-airport-id table (job.tz) at every start and restore, and uses it for the
// event time: the flight files carry the departure as the local wall-clock time at the origin
// (testdata/SOURCE.md), and the origin's state gives its time zone, so
//
//	event time (UTC, ms) = (local minute − the origin's UTC offset at that minute) × 60 000.
//
// The zones are by state (the state's main zone; Indiana, Arizona, Hawaii, Puerto Rico and the
// Virgin Islands without daylight saving time, as in 2001), with the longitude for the few
// airports whose state is missing ("NA"): an approximation (counties of split states are not
// modelled) that the Strata replay and the Go model share, so the check does not depend on it.
//
// Out-of-orderness: the files are sorted by local time, so in UTC they are out of order by up
// to the spread of the zones' offsets: 6 h between Hawaii (UTC−10) and the East Coast in
// summer (UTC−4) or Puerto Rico (UTC−4 all year). TestOutOfOrderness measures it on the data.

// airport is one row of the airports table, as the broadcast state holds it.
type airport struct {
	City, State string
	Lat, Lon    float64
}

// airportCodec encodes an airport as lat, lon (float64 bits, 8 bytes each, big endian), then
// the state and the city, each a 1-byte length and its bytes.
type airportCodec struct{}

func (airportCodec) Append(dst []byte, a airport) []byte {
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.Lat))
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.Lon))
	for _, s := range []string{a.State, a.City} {
		s = s[:min(len(s), 255)]
		dst = append(dst, byte(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

func (airportCodec) Decode(b []byte) (airport, error) {
	if len(b) < 18 {
		return airport{}, fmt.Errorf("%w: airport: %d bytes, want at least 18", errCodec, len(b))
	}
	a := airport{Lat: math.Float64frombits(binary.BigEndian.Uint64(b)), Lon: math.Float64frombits(binary.BigEndian.Uint64(b[8:]))}
	b = b[16:]
	var s [2]string
	for i := range s {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return airport{}, fmt.Errorf("%w: airport: truncated string", errCodec)
		}
		s[i], b = string(b[1:1+int(b[0])]), b[1+int(b[0]):]
	}
	if len(b) != 0 {
		return airport{}, fmt.Errorf("%w: airport: %d trailing bytes", errCodec, len(b))
	}
	a.State, a.City = s[0], s[1]
	return a, nil
}

// loadAirports reads the airports CSV at path (header iata,name,city,state,country,latitude,
// longitude) into a map by IATA code.
func loadAirports(path string) (map[string]airport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(head) != 7 || head[0] != "iata" || head[3] != "state" || head[6] != "longitude" {
		return nil, fmt.Errorf("%s: header %v, want iata,name,city,state,country,latitude,longitude", path, head)
	}
	m := map[string]airport{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		lat, err1 := strconv.ParseFloat(rec[5], 64)
		lon, err2 := strconv.ParseFloat(rec[6], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: airport %s: bad coordinates %q, %q", path, rec[0], rec[5], rec[6])
		}
		m[rec[0]] = airport{City: rec[2], State: rec[3], Lat: lat, Lon: lon}
	}
}

// zone is a time zone as the job uses it: the standard offset from UTC in minutes (negative
// west of Greenwich) and whether US daylight saving time applies.
type zone struct {
	Std int32
	DST bool
}

// stateZones is the main zone of each state and territory of the airports table, 2001.
var stateZones = func() map[string]zone {
	m := map[string]zone{}
	set := func(std int32, dst bool, states ...string) {
		for _, s := range states {
			m[s] = zone{std * 60, dst}
		}
	}
	set(-5, true, "CT", "DC", "DE", "FL", "GA", "KY", "MA", "MD", "ME", "MI", "NC", "NH", "NJ", "NY", "OH", "PA", "RI", "SC", "VA", "VT", "WV")
	set(-5, false, "IN")
	set(-6, true, "AL", "AR", "IA", "IL", "KS", "LA", "MN", "MO", "MS", "ND", "NE", "OK", "SD", "TN", "TX", "WI")
	set(-7, true, "CO", "ID", "MT", "NM", "UT", "WY")
	set(-7, false, "AZ")
	set(-8, true, "CA", "NV", "OR", "WA")
	set(-9, true, "AK")
	set(-10, false, "HI")
	set(-4, false, "PR", "VI")
	set(10, false, "GU", "CQ")
	set(-11, false, "AS")
	return m
}()

// zoneOf returns the zone of a: by its state, else by its longitude (15° an hour).
func zoneOf(a airport) zone {
	if z, ok := stateZones[a.State]; ok {
		return z
	}
	return zone{int32(math.Round(a.Lon/15)) * 60, true}
}

// dstRange returns the US daylight-saving time of year y in local minutes since the epoch:
// from 02:00 on the first Sunday of April (the rule of 1987–2006) to 02:00 on the last Sunday
// of October.
func dstRange(y int) (start, end int64) {
	apr := time.Date(y, time.April, 1, 2, 0, 0, 0, time.UTC)
	apr = apr.AddDate(0, 0, (7-int(apr.Weekday()))%7)
	oct := time.Date(y, time.October, 31, 2, 0, 0, 0, time.UTC)
	oct = oct.AddDate(0, 0, -int(oct.Weekday()))
	return apr.Unix() / 60, oct.Unix() / 60
}

// localTime turns local minutes into event times; it remembers the daylight-saving range of
// the last year it met (the data spans one year), so a conversion costs two compares.
// The zero value is ready; not for concurrent use.
type localTime struct {
	yearLo, yearHi int64 // local minutes of the cached year, [lo, hi); hi = 0: none cached
	dstLo, dstHi   int64
}

// offset returns z's offset from UTC in minutes at local minute m.
func (c *localTime) offset(z zone, m uint32) int32 {
	if !z.DST {
		return z.Std
	}
	if mm := int64(m); mm < c.yearLo || mm >= c.yearHi {
		y := time.Unix(mm*60, 0).UTC().Year()
		c.yearLo = time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC).Unix() / 60
		c.yearHi = time.Date(y+1, time.January, 1, 0, 0, 0, 0, time.UTC).Unix() / 60
		c.dstLo, c.dstHi = dstRange(y)
	}
	if int64(m) >= c.dstLo && int64(m) < c.dstHi {
		return z.Std + 60
	}
	return z.Std
}

// eventTime returns the event time in milliseconds (UTC) of a departure at local minute m in
// zone z.
func (c *localTime) eventTime(m uint32, z zone) int64 {
	return (int64(m) - int64(c.offset(z, m))) * 60_000
}
