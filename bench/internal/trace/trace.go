package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"
)

// ErrRange reports a row whose delay, distance, date or key does not fit the compact layout.
var ErrRange = errors.New("trace: value out of range")

// MinutesPerDay is the length of an event-time day in minutes.
const MinutesPerDay = 1440

// Row is one flight in the compact trace (12 bytes in memory).
type Row struct {
	Minute   uint32 // departure, minutes since the Unix epoch (local wall clock read as UTC)
	Delay    int16  // arrival delay in minutes, negative = early
	Distance uint16 // miles
	Route    uint16 // route id, index into Trace.Routes
}

// Day returns the event-time day number of r (days since the Unix epoch).
func (r Row) Day() uint32 { return r.Minute / MinutesPerDay }

// Route is an (origin, destination) pair of airport ids.
type Route struct {
	Origin, Dest uint16
}

// Trace is a decoded flight file: rows in event-time order plus the dictionaries their ids
// refer to. A Trace is immutable after Load*; it is safe for concurrent readers.
type Trace struct {
	Rows     []Row
	Airports []string // airport id -> IATA code
	Routes   []Route  // route id -> (origin, destination)
}

// RouteName returns "ORG-DST" for route id r.
func (t *Trace) RouteName(r uint16) string {
	rt := t.Routes[r]
	return t.Airports[rt.Origin] + "-" + t.Airports[rt.Dest]
}

// builder interns airports and routes while rows are appended.
type builder struct {
	t        Trace
	airports map[string]uint16
	routes   map[Route]uint16
}

func newBuilder(sizeHint int) *builder {
	return &builder{
		t:        Trace{Rows: make([]Row, 0, sizeHint)},
		airports: make(map[string]uint16),
		routes:   make(map[Route]uint16),
	}
}

func (b *builder) airport(code string) (uint16, error) {
	if id, ok := b.airports[code]; ok {
		return id, nil
	}
	if len(b.t.Airports) > math.MaxUint16 {
		return 0, fmt.Errorf("%w: more than %d airports", ErrRange, math.MaxUint16+1)
	}
	id := uint16(len(b.t.Airports))
	b.airports[code] = id
	b.t.Airports = append(b.t.Airports, code)
	return id, nil
}

// add appends one row given in the files' units: unixMinute in minutes, delay in minutes,
// distance in miles.
func (b *builder) add(unixMinute, delay, distance int64, origin, dest string) error {
	if unixMinute < 0 || unixMinute > math.MaxUint32 {
		return fmt.Errorf("%w: minute %d", ErrRange, unixMinute)
	}
	if delay < math.MinInt16 || delay > math.MaxInt16 {
		return fmt.Errorf("%w: delay %d minutes", ErrRange, delay)
	}
	if distance < 0 || distance > math.MaxUint16 {
		return fmt.Errorf("%w: distance %d miles", ErrRange, distance)
	}
	o, err := b.airport(origin)
	if err != nil {
		return err
	}
	d, err := b.airport(dest)
	if err != nil {
		return err
	}
	rt := Route{Origin: o, Dest: d}
	id, ok := b.routes[rt]
	if !ok {
		if len(b.t.Routes) > math.MaxUint16 {
			return fmt.Errorf("%w: more than %d routes", ErrRange, math.MaxUint16+1)
		}
		id = uint16(len(b.t.Routes))
		b.routes[rt] = id
		b.t.Routes = append(b.t.Routes, rt)
	}
	b.t.Rows = append(b.t.Rows, Row{
		Minute:   uint32(unixMinute),
		Delay:    int16(delay),
		Distance: uint16(distance),
		Route:    id,
	})
	return nil
}

func (b *builder) finish() *Trace {
	sorted := slices.IsSortedFunc(b.t.Rows, func(x, y Row) int { return int(x.Minute) - int(y.Minute) })
	if !sorted {
		slices.SortStableFunc(b.t.Rows, func(x, y Row) int {
			switch {
			case x.Minute < y.Minute:
				return -1
			case x.Minute > y.Minute:
				return 1
			}
			return 0
		})
	}
	t := b.t
	return &t
}

// parquetRow is the schema of flights-3m.parquet (all columns optional, none null).
type parquetRow struct {
	Date        time.Time `parquet:"date,timestamp(microsecond)"`
	Delay       int64     `parquet:"delay"`
	Distance    int64     `parquet:"distance"`
	Origin      string    `parquet:"origin"`
	Destination string    `parquet:"destination"`
}

// LoadParquet decodes the first limit rows (all rows when limit <= 0) of the flights parquet file
// at path. Errors: the file's open/read errors, parquet decoding errors, ErrRange.
func LoadParquet(path string, limit int) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := parquet.NewGenericReader[parquetRow](f)
	defer r.Close()
	n := int(r.NumRows())
	if limit > 0 && limit < n {
		n = limit
	}
	b := newBuilder(n)
	buf := make([]parquetRow, 4096)
	for len(b.t.Rows) < n {
		want := min(len(buf), n-len(b.t.Rows))
		got, err := r.Read(buf[:want])
		for i := range got {
			p := &buf[i]
			// The timestamp is a local wall-clock time (isAdjustedToUTC=false): read it as UTC.
			m := p.Date.Unix()
			if m%60 != 0 {
				return nil, fmt.Errorf("%w: %s: row %d: date %v is not on a minute", ErrRange, path, len(b.t.Rows), p.Date)
			}
			if err := b.add(m/60, p.Delay, p.Distance, p.Origin, p.Destination); err != nil {
				return nil, fmt.Errorf("%s: row %d: %w", path, len(b.t.Rows), err)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if len(b.t.Rows) != n {
		return nil, fmt.Errorf("%s: read %d rows, want %d", path, len(b.t.Rows), n)
	}
	return b.finish(), nil
}

// jsonRow is one element of flights-20k.json.
type jsonRow struct {
	Date        string `json:"date"` // "2001/01/01 06:55", local wall clock
	Delay       int64  `json:"delay"`
	Distance    int64  `json:"distance"`
	Origin      string `json:"origin"`
	Destination string `json:"destination"`
}

// LoadJSON decodes a flights JSON file (an array of rows). Errors: the file's open/read errors,
// JSON syntax errors, a bad date, ErrRange.
func LoadJSON(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []jsonRow
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b := newBuilder(len(rows))
	for i, jr := range rows {
		tm, err := time.Parse("2006/01/02 15:04", jr.Date)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, i, err)
		}
		if err := b.add(tm.Unix()/60, jr.Delay, jr.Distance, jr.Origin, jr.Destination); err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, i, err)
		}
	}
	return b.finish(), nil
}
