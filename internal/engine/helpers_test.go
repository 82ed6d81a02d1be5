package engine

import (
	"encoding/binary"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// openTest opens an engine in memory (o.Dir "") or on o.Dir with test defaults for the zero
// fields (applyTestDefaults). It is closed when tb ends.
func openTest(tb testing.TB, o Options) *Engine {
	tb.Helper()
	applyTestDefaults(&o)
	e, _, err := Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

// applyTestDefaults fills the zero fields of o with the tests' defaults: 256 MiB budget,
// 16 MiB segments, 128 key groups, the real file system, 10 s backpressure, 12 L0 files.
func applyTestDefaults(o *Options) {
	if o.Budget == nil {
		o.Budget = memory.NewBudget(256 << 20)
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = 16 << 20
	}
	if o.MaxParallelism == 0 {
		o.MaxParallelism = 128
	}
	if o.FS == nil {
		o.FS = vfs.Default()
	}
	if o.BackpressureTimeout == 0 {
		o.BackpressureTimeout = 10e9
	}
	if o.L0StopWrites == 0 {
		o.L0StopWrites = 12
	}
}

// testKey returns the composite key of (state id, key) in the void namespace, its key group
// from the key's hash, and its composite hash.
func testKey(id uint16, key []byte) ([]byte, uint64) {
	kh := base.HashKey(key)
	kg := uint16(uint32(kh) % 128)
	return base.AppendCompositeKey(nil, kg, id, key, nil), base.CompositeHash(kh, 0, id)
}

// u64 returns i as 8 big-endian bytes.
func u64(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func opPut(key []byte, h uint64, v []byte) Op {
	return Op{Kind: OpPut, Hash: h, Key: key, Value: v}
}

func opMapPut(mk []byte, hm uint64, uk, v []byte) Op {
	return Op{Kind: OpMapPut, Hash: hm, Key: mk, UserKey: uk, UserHash: base.HashUserKey(uk), Value: v}
}

func opMapRemove(mk []byte, hm uint64, uk []byte) Op {
	return Op{Kind: OpMapRemove, Hash: hm, Key: mk, UserKey: uk, UserHash: base.HashUserKey(uk)}
}

// frame returns the list batch of the given elements (uvarint length + bytes each).
func frame(elems ...[]byte) []byte {
	var b []byte
	for _, e := range elems {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}
