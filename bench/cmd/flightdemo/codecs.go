package main

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-db/strata/bench/internal/flightjob"
)

// errCodec reports a state value whose length does not match its fixed-width codec.
var errCodec = errors.New("flightdemo: bad encoded value")

// The route delay statistics, their codec and the delay codec are shared with the flight
// job on Kafka (bench/internal/flightjob).
type (
	int16Codec = flightjob.Int16Codec
	delayAcc   = flightjob.DelayAcc
	accCodec   = flightjob.AccCodec
)

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
