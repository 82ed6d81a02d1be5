package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The input position a checkpoint carries (strata's CheckpointHandle.InputPosition, opaque to
// Strata): where to resume the replay, and the job's memory that the state does not hold
// (job invariant 3). Layout, version 2, big endian:
//
//	+---------+------------+--------+----------+----------+-----------+------------+
//	| version | trace rows | scale  | row      | open day | days: N   | days: Sum  |
//	| u8 = 1  | u64        | u32 K  | u64      | u32      | u64       | u64        |
//	+---------+------------+--------+----------+----------+-----------+------------+
//	  0         1            9        13         21         25          33          41
//
//	+-------------+-----------+----------------------------------------------+
//	| max event t | watermark | etOut (eventtime.go), its fields in order:    |
//	| i64, ms     | i64, ms   | u64/i64 each, arrays element by element       |
//	+-------------+-----------+----------------------------------------------+
//	  41            49          57                                   57+etOutSize
//
// row: the rows [0, row) are in the checkpoint, the replay resumes at row (event row*K).
// open day: the event-time day of row-1 (0 when row is 0). days: the digest of the (route key,
// day, max) triples of the days closed so far — what the job has emitted downstream, kept with
// the checkpoint as a transactional sink keeps its pending output, so that a replay neither
// loses nor repeats a closed day. trace rows and scale identify the input: a checkpoint of
// another input or scale is refused rather than silently mixed. There is no checksum: the
// manifest that holds the position is checksummed (package checkpoint). max event t and the
// watermark (math.MinInt64: none yet) are the event-time operators' memory, and etOut what
// they emitted, kept as the daily digest is (eventtime.go).

// positionVersion is the layout version above. Part of the format; do not change.
const positionVersion = 2

var positionSize = 57 + etOutSize

// etOutSize is the encoded size of etOut.
var etOutSize = binary.Size(etOut{})

// errPosition reports an input position that does not decode, or that belongs to another input.
var errPosition = errors.New("flightdemo: bad checkpoint input position")

// position is the decoded input position.
type position struct {
	Rows uint64 // rows of the trace
	K    uint32 // scale
	Row  int    // the replay resumes at this row
	Day  uint32 // the open event-time day
	Days dayDigest
	MaxT int64 // the largest event time of rows [0, Row), ms; math.MinInt64 when none
	WM   int64 // the watermark after row Row-1, ms; math.MinInt64 when none
	Out  etOut // what the event-time operators emitted
}

func (p position) encode() []byte {
	b := make([]byte, 0, positionSize)
	b = append(b, positionVersion)
	b = binary.BigEndian.AppendUint64(b, p.Rows)
	b = binary.BigEndian.AppendUint32(b, p.K)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Row))
	b = binary.BigEndian.AppendUint32(b, p.Day)
	b = binary.BigEndian.AppendUint64(b, p.Days.N)
	b = binary.BigEndian.AppendUint64(b, p.Days.Sum)
	b = binary.BigEndian.AppendUint64(b, uint64(p.MaxT))
	b = binary.BigEndian.AppendUint64(b, uint64(p.WM))
	b, err := binary.Append(b, binary.BigEndian, &p.Out)
	if err != nil {
		panic("flightdemo: invariant: etOut is not fixed-size: " + err.Error())
	}
	return b
}

// decodePosition decodes b and checks that it belongs to a trace of rows rows at scale K.
func decodePosition(b []byte, rows, K int) (position, error) {
	if len(b) == 0 {
		return position{}, fmt.Errorf("%w: empty", errPosition)
	}
	if b[0] != positionVersion {
		return position{}, fmt.Errorf("%w: version %d, want %d", errPosition, b[0], positionVersion)
	}
	if len(b) != positionSize {
		return position{}, fmt.Errorf("%w: %d bytes, want %d", errPosition, len(b), positionSize)
	}
	p := position{
		Rows: binary.BigEndian.Uint64(b[1:]),
		K:    binary.BigEndian.Uint32(b[9:]),
		Row:  int(binary.BigEndian.Uint64(b[13:])),
		Day:  binary.BigEndian.Uint32(b[21:]),
		Days: dayDigest{N: binary.BigEndian.Uint64(b[25:]), Sum: binary.BigEndian.Uint64(b[33:])},
		MaxT: int64(binary.BigEndian.Uint64(b[41:])),
		WM:   int64(binary.BigEndian.Uint64(b[49:])),
	}
	if _, err := binary.Decode(b[57:], binary.BigEndian, &p.Out); err != nil {
		return position{}, fmt.Errorf("%w: event-time output: %v", errPosition, err)
	}
	if p.Rows != uint64(rows) || p.K != uint32(K) {
		return position{}, fmt.Errorf("%w: written for %d rows at scale %d, the input has %d rows at scale %d",
			errPosition, p.Rows, p.K, rows, K)
	}
	if p.Row < 0 || p.Row > rows {
		return position{}, fmt.Errorf("%w: row %d beyond the %d rows", errPosition, p.Row, rows)
	}
	return p, nil
}

// positionAt is the job's position before row (the rows [0, row) done).
func (j *job) positionAt(row int) position {
	p := position{Rows: uint64(len(j.tr.Rows)), K: uint32(j.K), Row: row, Days: j.days,
		MaxT: j.et.maxT, WM: j.et.wm, Out: j.et.out}
	if row > 0 {
		p.Day = j.day
	}
	return p
}
