package strata

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
)

// Codec turns values of type T into bytes and back. States store exactly the bytes Append
// produced and give them back to Decode.
//
// Append appends the encoding of v to dst and returns the extended slice; it must not
// retain dst. Decode decodes b, which holds exactly one encoding; it may return a value that
// aliases b only if documented (the Bytes codec does), and returns an error wrapping
// ErrCorruption when b is not a valid encoding. A Codec must be safe to call from the
// goroutine that uses the state; the built-in codecs are stateless and safe everywhere.
//
// The codec is part of a state's identity: re-registering a state name with a codec of another
// type (or an unequal comparable codec value) fails with ErrIncompatibleState.
type Codec[T any] interface {
	Append(dst []byte, v T) []byte
	Decode(b []byte) (T, error)
}

// Built-in codecs. Integers are fixed-width big-endian so that byte order is value order.
var (
	// Bytes stores a []byte as is. Decode returns b itself (capacity clipped to its length, so
	// an append by the caller copies): a value read through Bytes aliases the store's memory
	// and is valid until the next write to the Store (any state's Put, Add, Update, Remove,
	// Clear or MergeNamespaces, StartCheckpoint, Checkpoint, WaitBackground and Close): reads,
	// checkpoint waits and notifications never move memory, so they leave it intact. Copy it
	// to keep it longer.
	Bytes Codec[[]byte] = bytesCodec{}
	// String stores the UTF-8 (or any) bytes of a string; Decode copies.
	String Codec[string] = stringCodec{}
	// Int64 stores 8 bytes big-endian with the sign bit flipped, so that encodings sort as the
	// values do (math.MinInt64 -> 00..00, -1 -> 7f ff.., 0 -> 80 00..).
	Int64 Codec[int64] = int64Codec{}
	// Uint64 stores 8 bytes big-endian.
	Uint64 Codec[uint64] = uint64Codec{}
	// Float64 stores math.Float64bits in 8 bytes big-endian, transformed to sort as the
	// values do: the sign bit is flipped for positive values and all bits are flipped for
	// negative ones. Every bit pattern, NaN payloads included, round-trips.
	Float64 Codec[float64] = float64Codec{}
)

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }
func (bytesCodec) Decode(b []byte) ([]byte, error)    { return b[:len(b):len(b)], nil }

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringCodec) Decode(b []byte) (string, error)    { return string(b), nil }

type int64Codec struct{}

func (int64Codec) Append(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^1<<63)
}

func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fixedWidthError("Int64", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ 1<<63), nil
}

type uint64Codec struct{}

func (uint64Codec) Append(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

func (uint64Codec) Decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fixedWidthError("Uint64", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	u := math.Float64bits(v)
	if u>>63 != 0 {
		u = ^u
	} else {
		u |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(dst, u)
}

func (float64Codec) Decode(b []byte) (float64, error) {
	if len(b) != 8 {
		return 0, fixedWidthError("Float64", len(b))
	}
	u := binary.BigEndian.Uint64(b)
	if u>>63 != 0 {
		u &^= 1 << 63
	} else {
		u = ^u
	}
	return math.Float64frombits(u), nil
}

// fixedWidthError is out of line so that the decoders stay small enough to inline.
//
//go:noinline
func fixedWidthError(codec string, n int) error {
	return fmt.Errorf("%w: %s codec: %d bytes, want 8", ErrCorruption, codec, n)
}

// sameCodec reports whether two codecs are interchangeable for a registered state: same
// dynamic type and, where the values are comparable, equal.
func sameCodec(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	if va.Comparable() && vb.Comparable() {
		return va.Equal(vb)
	}
	return true
}
