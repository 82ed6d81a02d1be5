package slice

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// listIter is an base.Iterator over a Go slice of entries.
type listIter struct {
	es  []base.Entry
	i   int
	err error
}

func (l *listIter) Next() bool         { l.i++; return l.i <= len(l.es) }
func (l *listIter) Entry() *base.Entry { return &l.es[l.i-1] }
func (l *listIter) Err() error         { return l.err }

func iterOf(es ...base.Entry) *listIter { return &listIter{es: es} }

// sortEntries sorts es in the order the tiers below the FreshTable use.
func sortEntries(es []base.Entry) {
	slices.SortFunc(es, func(a, b base.Entry) int {
		return base.Compare(&a, &b)
	})
}

// clock is a manual clock for Options.Now.
type clock struct{ now time.Duration }

func (c *clock) Now() time.Duration { return c.now }

type env struct {
	budget *memory.Budget
	pool   *memory.Pool
	a      *Allocator
	t      *Table
	clk    *clock
}

func newEnv(tb testing.TB, blockSize int, opts Options) *env {
	return newEnvSeg(tb, blockSize, 0, opts)
}

// newEnvSeg is newEnv with an allocator that uses only perSeg blocks of
// each 16 MiB segment (0: all), so tests reach many segments cheaply.
func newEnvSeg(tb testing.TB, blockSize, perSeg int, opts Options) *env {
	tb.Helper()
	limit := int64(1 << 30)
	if perSeg > 0 {
		limit = 1 << 36 // 16 MiB of address space for every few blocks
	}
	b := memory.NewBudget(limit)
	p, err := memory.NewPool(b, memory.SegmentSize16M)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := NewAllocator(p, blockSize)
	if err != nil {
		tb.Fatal(err)
	}
	if perSeg > 0 {
		a = newAllocator(p, blockSize, perSeg)
	}
	clk := &clock{}
	opts.Allocator = a
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	t, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	e := &env{budget: b, pool: p, a: a, t: t, clk: clk}
	tb.Cleanup(func() {
		if err := t.Close(); err != nil {
			tb.Error(err)
		}
		if st := a.Stats(); st.Blocks != 0 || st.Oversized != 0 || st.Segments != 0 || st.FreeBlocks != 0 ||
			st.Draining != 0 || st.OversizedSize != 0 || a.lv.free != 0 {
			tb.Errorf("allocator leaks after Close: %+v", st)
		}
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
		if u := b.Used(); u != 0 {
			tb.Errorf("budget holds %d bytes after Close", u)
		}
	})
	return e
}

// install builds es (sorted here) and installs the result.
func (e *env) install(tb testing.TB, es ...base.Entry) []*Slice {
	tb.Helper()
	es = slices.Clone(es)
	sortEntries(es)
	out, err := e.t.Build(context.Background(), iterOf(es...))
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.t.Install(out); err != nil {
		tb.Fatal(err)
	}
	return out
}

func kv(order uint64, key string, seq uint64, val string) base.Entry {
	return base.Entry{Order: order, Hash: keyHash([]byte(key)), Seq: seq, Kind: base.KindValue, Key: []byte(key), Value: []byte(val)}
}

func tomb(order uint64, key string, seq uint64) base.Entry {
	return base.Entry{Order: order, Hash: keyHash([]byte(key)), Seq: seq, Kind: base.KindTombstone, Key: []byte(key)}
}

func lbase(order uint64, key string, seq uint64, val string) base.Entry {
	e := kv(order, key, seq, val)
	e.Kind = base.KindListBase
	return e
}

func lapp(order uint64, key string, seq uint64, val string) base.Entry {
	e := kv(order, key, seq, val)
	e.Kind = base.KindListAppend
	return e
}

func ment(order uint64, key, uk string, seq uint64, val string) base.Entry {
	return base.Entry{Order: order, Hash: keyHash([]byte(key)), UserHash: base.HashUserKey([]byte(uk)), Seq: seq, Kind: base.KindMapEntry,
		Key: []byte(key), UserKey: []byte(uk), Value: []byte(val)}
}

func mtomb(order uint64, key, uk string, seq uint64) base.Entry {
	e := ment(order, key, uk, seq, "")
	e.Kind = base.KindMapEntryTombstone
	return e
}

func joined(bs [][]byte) string { return string(bytes.Join(bs, []byte("|"))) }
