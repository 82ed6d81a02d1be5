package nexmark

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Driver feeds events [From, To) of a generator to a query, in order, advancing the watermark
// (Query.Fire) whenever the event time of the last event moved it (every ms of event time),
// and fires every window left at the end of the input (math.MaxInt64, Flink's final watermark).
// Every CheckpointEvery events (0: never), after the event and the watermark it moved, it calls
// Checkpoint with the number of events done: the state then holds events [0, n) exactly, as at
// an aligned checkpoint barrier after event n-1.
type Driver struct {
	Gen             *Generator
	Query           Query
	Out             *Out
	From, To        int64
	CheckpointEvery int64
	Checkpoint      func(n int64) error // may be nil
	Progress        func(n int64)       // every 1024 events; may be nil
}

// Run runs the events and returns the first error of the query or of Checkpoint.
func (d *Driver) Run() error {
	var e Event
	wm := int64(math.MinInt64)
	if d.From > 0 {
		wm = d.Gen.Watermark(d.From - 1)
	}
	for n := d.From; n < d.To; n++ {
		d.Gen.Next(n, &e)
		if err := d.Query.Event(&e); err != nil {
			return fmt.Errorf("event %d: %w", n, err)
		}
		if w := d.Gen.Watermark(n); w > wm {
			wm = w
			if err := d.Query.Fire(wm); err != nil {
				return fmt.Errorf("watermark %d after event %d: %w", wm, n, err)
			}
		}
		if d.CheckpointEvery > 0 && (n+1)%d.CheckpointEvery == 0 && d.Checkpoint != nil && n+1 < d.To {
			if err := d.Checkpoint(n + 1); err != nil {
				return fmt.Errorf("checkpoint after event %d: %w", n, err)
			}
		}
		if d.Progress != nil && (n+1)%1024 == 0 {
			d.Progress(n + 1)
		}
	}
	if err := d.Query.Fire(math.MaxInt64); err != nil {
		return fmt.Errorf("final watermark: %w", err)
	}
	return nil
}

// Position is a checkpoint's input position: the events done and what the query had emitted
// by then (a transactional sink's pending output), 32 bytes: magic "nxmk" (4 bytes), version
// 1 (4 bytes), events, Out.Rows, Out.Changes, Out.Sum (8 each): see Encode.
type Position struct {
	Events int64
	Out    Out
}

const (
	positionMagic   = 0x6e786d6b // "nxmk"
	positionVersion = 1          // part of the format; do not change
	positionBytes   = 4 + 4 + 8 + 8 + 8 + 8
)

// Encode returns the position's bytes:
//
//	+-------+---------+--------+----------+-------------+---------+
//	| magic | version | events | out.Rows | out.Changes | out.Sum |
//	|  u32  |   u32   |  i64   |   i64    |     i64     |   u64   |   big-endian
//	+-------+---------+--------+----------+-------------+---------+
func (p Position) Encode() []byte {
	b := make([]byte, 0, positionBytes)
	b = binary.BigEndian.AppendUint32(b, positionMagic)
	b = binary.BigEndian.AppendUint32(b, positionVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Events))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Out.Rows))
	b = binary.BigEndian.AppendUint64(b, uint64(p.Out.Changes))
	return binary.BigEndian.AppendUint64(b, p.Out.Sum)
}

// DecodePosition decodes a position; errors wrap ErrCodec.
func DecodePosition(b []byte) (Position, error) {
	switch {
	case len(b) != positionBytes:
		return Position{}, fmt.Errorf("%w: input position: %d bytes, want %d", ErrCodec, len(b), positionBytes)
	case binary.BigEndian.Uint32(b) != positionMagic:
		return Position{}, fmt.Errorf("%w: input position: bad magic %08x", ErrCodec, binary.BigEndian.Uint32(b))
	case binary.BigEndian.Uint32(b[4:]) != positionVersion:
		return Position{}, fmt.Errorf("%w: input position: version %d, want %d", ErrCodec, binary.BigEndian.Uint32(b[4:]), positionVersion)
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[8+8*i:]) }
	return Position{Events: int64(u(0)), Out: Out{Rows: int64(u(1)), Changes: int64(u(2)), Sum: u(3)}}, nil
}
