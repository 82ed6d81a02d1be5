package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// errCodec reports a state value whose length does not match its fixed-width codec.
var errCodec = errors.New("flightdemo: bad encoded value")

// int16Codec encodes a delay in minutes as 2 bytes big endian (state stays compact).
type int16Codec struct{}

func (int16Codec) Append(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v))
}

func (int16Codec) Decode(b []byte) (int16, error) {
	if len(b) != 2 {
		return 0, fmt.Errorf("%w: int16: %d bytes, want 2", errCodec, len(b))
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

// delayAcc is the accumulator (and result) of the per-route AggregatingState: delay statistics
// in minutes.
type delayAcc struct {
	Count, Sum, SumSq int64
	Min, Max          int64 // meaningful when Count > 0
}

func (a delayAcc) add(d int16) delayAcc {
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

func (a delayAcc) merge(b delayAcc) delayAcc {
	switch {
	case a.Count == 0:
		return b
	case b.Count == 0:
		return a
	}
	return delayAcc{a.Count + b.Count, a.Sum + b.Sum, a.SumSq + b.SumSq, min(a.Min, b.Min), max(a.Max, b.Max)}
}

func (a delayAcc) mean() float64 { return float64(a.Sum) / float64(a.Count) }

func (a delayAcc) stddev() float64 {
	m := a.mean()
	v := float64(a.SumSq)/float64(a.Count) - m*m
	if v <= 0 {
		return 0
	}
	return math.Sqrt(v)
}

const accSize = 5 * 8

// accCodec encodes a delayAcc as five 8-byte little-endian integers (40 bytes), so an Add
// rewrites the value in place.
type accCodec struct{}

func (accCodec) Append(dst []byte, a delayAcc) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Count))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Sum))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.SumSq))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(a.Min))
	return binary.LittleEndian.AppendUint64(dst, uint64(a.Max))
}

func (accCodec) Decode(b []byte) (delayAcc, error) {
	if len(b) != accSize {
		return delayAcc{}, fmt.Errorf("%w: delay accumulator: %d bytes, want %d", errCodec, len(b), accSize)
	}
	return delayAcc{
		Count: int64(binary.LittleEndian.Uint64(b)),
		Sum:   int64(binary.LittleEndian.Uint64(b[8:])),
		SumSq: int64(binary.LittleEndian.Uint64(b[16:])),
		Min:   int64(binary.LittleEndian.Uint64(b[24:])),
		Max:   int64(binary.LittleEndian.Uint64(b[32:])),
	}, nil
}

// destStats is the per-(origin, destination) entry of the per-origin MapState.
type destStats struct {
	Count int64 // flights
	Sum   int64 // sum of delays, minutes
}

// destCodec encodes destStats as two 8-byte little-endian integers.
type destCodec struct{}

func (destCodec) Append(dst []byte, s destStats) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Count))
	return binary.LittleEndian.AppendUint64(dst, uint64(s.Sum))
}

func (destCodec) Decode(b []byte) (destStats, error) {
	if len(b) != 16 {
		return destStats{}, fmt.Errorf("%w: destination stats: %d bytes, want 16", errCodec, len(b))
	}
	return destStats{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))}, nil
}
