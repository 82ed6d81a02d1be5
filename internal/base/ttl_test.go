package base

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestExpired: Flink's TtlUtils.expired, inclusive and saturating at MaxInt64.
func TestExpired(t *testing.T) {
	const max = math.MaxInt64
	for _, c := range []struct {
		ts, ttl, now int64
		want         bool
	}{
		{100, 10, 109, false},
		{100, 10, 110, true}, // inclusive
		{100, 10, 111, true},
		{0, 10, 9, false},
		{0, 10, 10, true},
		{-50, 10, -41, false}, // a negative timestamp cannot overflow
		{-50, 10, -40, true},
		{max - 5, 10, max - 1, false}, // ts + ttl saturates at MaxInt64
		{max - 5, 10, max, true},
		{max, 1, max, true},
		{max - 1, max, max - 1, false},
		{max - 1, max, max, true},
		{1, max, max, true}, // 1 + min(MaxInt64, MaxInt64-1) = MaxInt64
		{1, max, max - 1, false},
		{math.MinInt64, max, -2, false},
		{math.MinInt64, max, -1, true},
	} {
		if got := Expired(c.ts, c.ttl, c.now); got != c.want {
			t.Errorf("Expired(%d, %d, %d) = %v, want %v", c.ts, c.ttl, c.now, got, c.want)
		}
	}
}

func ttlKey(id uint16) []byte { return AppendCompositeKey(nil, 0, id, []byte("k"), nil) }

func ttlVal(ts int64, v string) []byte { return append(AppendTS(nil, ts), v...) }

func ttlList(elems ...any) []byte {
	var b []byte
	for i := 0; i < len(elems); i += 2 {
		e := ttlVal(int64(elems[i].(int)), elems[i+1].(string))
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// TestTTLFilter: each layout and kind, at and above the bottom, the snapshot use, states
// without a TTL and malformed values, the counters, and the clock read every QueryEvery
// entries.
func TestTTLFilter(t *testing.T) {
	now := int64(1000)
	reads := 0
	tab := NewTTLTable(func() int64 { reads++; return now }, map[uint16]TTLState{
		1: {TTL: 100, Layout: TTLValue, Compaction: true, QueryEvery: 2},
		2: {TTL: 100, Layout: TTLList, Compaction: true, Snapshot: true},
		3: {TTL: 100, Layout: TTLMap, Compaction: true},
		4: {TTL: 100, Layout: TTLValue, Snapshot: true}, // no compaction cleanup
	})
	if !tab.Cleans(false) || !tab.Cleans(true) {
		t.Fatal("Cleans")
	}
	var cnt TTLCounters
	type tc struct {
		name     string
		e        Entry
		bottom   bool
		snapshot bool
		want     Decision
		kind     Kind
		value    []byte
	}
	for _, c := range []tc{
		{name: "value live", e: Entry{Kind: KindValue, Key: ttlKey(1), Value: ttlVal(901, "a")}, want: FilterKeep},
		{name: "value expired above the bottom", e: Entry{Kind: KindValue, Key: ttlKey(1), Value: ttlVal(900, "a")}, want: FilterRewrite, kind: KindTombstone},
		{name: "value expired at the bottom", e: Entry{Kind: KindValue, Key: ttlKey(1), Value: ttlVal(900, "a")}, bottom: true, want: FilterDrop},
		{name: "no TTL state", e: Entry{Kind: KindValue, Key: ttlKey(9), Value: ttlVal(0, "a")}, want: FilterKeep},
		{name: "no compaction cleanup", e: Entry{Kind: KindValue, Key: ttlKey(4), Value: ttlVal(0, "a")}, want: FilterKeep},
		{name: "snapshot use", e: Entry{Kind: KindValue, Key: ttlKey(4), Value: ttlVal(0, "a")}, snapshot: true, want: FilterRewrite, kind: KindTombstone},
		{name: "snapshot: state without snapshot cleanup", e: Entry{Kind: KindValue, Key: ttlKey(1), Value: ttlVal(0, "a")}, snapshot: true, want: FilterKeep},
		{name: "short value", e: Entry{Kind: KindValue, Key: ttlKey(1), Value: []byte("abc")}, want: FilterKeep},
		{name: "map entry expired", e: Entry{Kind: KindMapEntry, Key: ttlKey(3), UserKey: []byte("u"), Value: ttlVal(10, "x")}, want: FilterRewrite, kind: KindMapEntryTombstone},
		{name: "map entry expired at the bottom", e: Entry{Kind: KindMapEntry, Key: ttlKey(3), UserKey: []byte("u"), Value: ttlVal(10, "x")}, bottom: true, want: FilterDrop},
		{name: "map tombstone", e: Entry{Kind: KindMapEntryTombstone, Key: ttlKey(3), UserKey: []byte("u")}, want: FilterKeep},
		{name: "list all live", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: ttlList(950, "a", 999, "b")}, want: FilterKeep},
		{name: "list some expired", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: ttlList(900, "a", 999, "b", 1, "c")}, want: FilterRewrite, kind: KindListBase, value: ttlList(999, "b")},
		{name: "list append all expired", e: Entry{Kind: KindListAppend, Key: ttlKey(2), Value: ttlList(900, "a")}, want: FilterDrop},
		{name: "list base all expired", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: ttlList(900, "a")}, want: FilterRewrite, kind: KindTombstone},
		{name: "list base all expired at the bottom", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: ttlList(900, "a")}, bottom: true, want: FilterDrop},
		{name: "list bad framing", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: []byte{5, 1}}, want: FilterKeep},
		{name: "list element shorter than its timestamp", e: Entry{Kind: KindListBase, Key: ttlKey(2), Value: []byte{2, 1, 1}}, want: FilterKeep},
	} {
		f := &TTLFilter{Table: tab, Bottom: c.bottom, Snapshot: c.snapshot, Counters: &cnt}
		in := c.e
		in.Seq, in.Order = 7, 42
		d, out := f.Filter(&in)
		if d != c.want {
			t.Errorf("%s: decision %d, want %d", c.name, d, c.want)
			continue
		}
		if d == FilterRewrite {
			if out.Kind != c.kind || !bytes.Equal(out.Value, c.value) || out.Seq != 7 || out.Order != 42 ||
				!bytes.Equal(out.Key, in.Key) || !bytes.Equal(out.UserKey, in.UserKey) {
				t.Errorf("%s: rewritten to %+v", c.name, out)
			}
		}
	}
	if e, b := cnt.Entries.Load(), cnt.Bytes.Load(); e != 10 || b == 0 {
		t.Errorf("counters: %d entries, %d bytes", e, b)
	}
	// The clock: read at the first TTL entry, then after QueryEvery (2) entries of state 1.
	reads = 0
	f := &TTLFilter{Table: tab}
	for range 5 {
		f.Filter(&Entry{Kind: KindValue, Key: ttlKey(1), Value: ttlVal(now, "a")})
	}
	if reads != 3 {
		t.Errorf("clock read %d times for 5 entries with QueryEvery 2, want 3", reads)
	}
}
