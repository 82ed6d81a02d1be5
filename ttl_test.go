package strata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// TTL semantics, as the scenarios of Flink's TtlStateTestBase, run for each state kind as
// scripts (ttlScripts): a clock the script sets, writes and reads of one key and namespace,
// the stored data ignoring TTL ("raw"), checkpoints, restores and reopens between steps, and
// incremental cleanup of the whole state.
//
// Commands (one per line; "#" starts a comment; "∅" is absent):
//
//	config ttl=MS|max update=write|read|off vis=never|return incr=N snapshot=BOOL compact=BOOL
//	                                       TTLConfig of the next registration (restore, reopen)
//	t N                                    set the clock to N ms
//	key K / ns N                           the key / namespace of the following commands
//	put ARGS                               value: Put(a); list: AddAll(a b …); map: Put(u=v …);
//	                                       reducing, aggregating: Add(n) for each n
//	update ARGS                            list: Update(a b …)
//	get WANT…                              value: a; list: a b …; map: u=v … (sorted);
//	                                       reducing: the sum; aggregating: "sum/count"
//	mapget U WANT / contains U BOOL / isempty BOOL / remove U / clear
//	merge TARGET SRC…                      MergeNamespaces of the current key (ns "-": void)
//	raw WANT                               stored, ignoring TTL: ∅, or the count of values,
//	                                       list elements or map entries
//	entries N                              Store.NumEntries (expired data not yet removed too)
//	keys N                                 put x (1 for numbers, u=x for maps) on keys k0..kN-1
//	rawkeys N                              how many of k0..kN-1 hold data, ignoring TTL
//	access N                               N reads of key "probe" (incremental cleanup)
//	checkpoint / restore / reopen          a checkpoint; Restore of the last one into a new
//	                                       directory; Close and Open; each registers again
//	register-fails                         the next registration fails with ErrIncompatibleState
//	changelog                              Close; a new Store with the changelog on (checkpoints
//	                                       from then on are changelog checkpoints), registered
//	rescale                                restore as above into a Store owning only the key
//	                                       group of the current key (scale out)
type ttlHarness struct {
	t     *testing.T
	kind  stateKind
	now   atomic.Int64
	fs    *vfs.MemFS
	store *checkpoint.DirStorage
	dir   string
	dirs  int
	opts  Options
	s     *Store
	cfg   *TTLConfig
	key   string
	ns    string
	ck    []CheckpointHandle
	line  int

	val *ValueState[string]
	lst *ListState[string]
	mp  *MapState[string, string]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, string]
}

func newTTLHarness(t *testing.T, kind stateKind) *ttlHarness {
	h := &ttlHarness{t: t, kind: kind, fs: vfs.NewMem(), key: "k", cfg: &TTLConfig{TTL: 100 * time.Millisecond}}
	st, err := checkpointfs.NewDirStorage(h.fs, "/checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	h.opts = Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1,
		Clock: h.now.Load, Checkpoint: CheckpointOptions{Storage: st, Grace: checkpoint.NoGrace}}
	h.opts.fs = h.fs
	h.dir = h.newDir()
	h.s = must(Open(h.dir, h.opts))
	if err := h.register(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !h.s.closed {
			h.s.Close()
		}
	})
	return h
}

func (h *ttlHarness) newDir() string {
	h.dirs++
	return fmt.Sprintf("/store-%d", h.dirs)
}

func (h *ttlHarness) register() (err error) {
	s, c, name := h.s, h.cfg, "s"
	switch h.kind {
	case kindValue:
		h.val, err = NewValueState(s, ValueDescriptor[string]{Name: name, Codec: String, TTL: c})
	case kindList:
		h.lst, err = NewListState(s, ListDescriptor[string]{Name: name, Codec: String, TTL: c})
	case kindMap:
		h.mp, err = NewMapState(s, MapDescriptor[string, string]{Name: name, KeyCodec: String, ValueCodec: String, TTL: c})
	case kindReducing:
		h.red, err = NewReducingState(s, ReducingDescriptor[int64]{Name: name, Codec: Int64, TTL: c,
			Reduce: func(a, b int64) int64 { return a + b }})
	case kindAggregating:
		d := AggregatingDescriptor[int64, avgAcc, string]{Name: name, AccCodec: avgCodec{}, TTL: c,
			CreateAccumulator: func() avgAcc { return avgAcc{} },
			Add:               func(in int64, a avgAcc) avgAcc { return avgAcc{a.sum + in, a.n + 1} },
			GetResult:         func(a avgAcc) string { return fmt.Sprintf("%d/%d", a.sum, a.n) },
			Merge:             func(a, b avgAcc) avgAcc { return avgAcc{a.sum + b.sum, a.n + b.n} }}
		h.agg, err = NewAggregatingState(s, d)
	}
	return err
}

func (h *ttlHarness) state() State {
	switch h.kind {
	case kindValue:
		return h.val
	case kindList:
		return h.lst
	case kindMap:
		return h.mp
	case kindReducing:
		return h.red
	}
	return h.agg
}

func (h *ttlHarness) k() Key {
	ns := h.ns
	if ns == "-" {
		ns = ""
	}
	return h.s.Key([]byte(h.key)).In([]byte(ns))
}

func (h *ttlHarness) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("line %d: %s", h.line, fmt.Sprintf(format, args...))
}

// put writes args to the current key.
func (h *ttlHarness) put(args []string) error {
	k := h.k()
	switch h.kind {
	case kindValue:
		return h.val.Put(k, strings.Join(args, " "))
	case kindList:
		return h.lst.AddAll(k, args)
	case kindMap:
		for _, a := range args {
			u, v, _ := strings.Cut(a, "=")
			if err := h.mp.Put(k, u, v); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range args {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return err
		}
		if h.kind == kindReducing {
			err = h.red.Add(k, n)
		} else {
			err = h.agg.Add(k, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// get reads the current key as the script writes it ("∅" when absent).
func (h *ttlHarness) get() (string, error) {
	k := h.k()
	switch h.kind {
	case kindValue:
		v, ok, err := h.val.Get(k)
		if !ok {
			return "∅", err
		}
		return v, err
	case kindList:
		var got []string
		it := h.lst.Get(k)
		for it.Next() {
			got = append(got, it.Value())
		}
		if len(got) == 0 {
			return "∅", it.Err()
		}
		return strings.Join(got, " "), it.Err()
	case kindMap:
		var got []string
		seq, errf := h.mp.Entries(k)
		for u, v := range seq {
			got = append(got, u+"="+v)
		}
		slices.Sort(got)
		if len(got) == 0 {
			return "∅", errf()
		}
		return strings.Join(got, " "), errf()
	case kindReducing:
		v, ok, err := h.red.Get(k)
		if !ok {
			return "∅", err
		}
		return strconv.FormatInt(v, 10), err
	}
	v, ok, err := h.agg.Get(k)
	if !ok {
		return "∅", err
	}
	return v, err
}

// raw returns what is stored for the current key ignoring TTL: ∅ or a count.
func (h *ttlHarness) raw() string {
	s := h.s
	if err := s.syncHot(); err != nil { // what is stored: the hot tier's writes too
		h.fail("writing the hot tier back: %v", err)
	}
	key, hh := s.compose(h.k(), h.state().base().id)
	n := 0
	switch h.kind {
	case kindList:
		bats, st, _ := s.e.ListGet(hh, key, nil, nil)
		if st == found {
			for _, b := range bats {
				n += elemCount(b)
			}
		}
	case kindMap:
		it := s.e.MapIter(hh, key)
		for it.Next() {
			n++
		}
		it.Close()
	default:
		if _, st := s.e.Get(hh, key); st == found {
			n = 1
		}
	}
	if n == 0 {
		return "∅"
	}
	return strconv.Itoa(n)
}

// reregister registers the state on a new Store, as the next registration expects.
func (h *ttlHarness) reregister(s *Store, wantFail bool) {
	h.t.Helper()
	h.s = s
	err := h.register()
	if wantFail {
		if !errors.Is(err, ErrIncompatibleState) {
			h.fail("registration: %v, want ErrIncompatibleState", err)
		}
		h.t.Logf("line %d: %v", h.line, err)
		return
	}
	if err != nil {
		h.fail("registration: %v", err)
	}
}

func (h *ttlHarness) run(script string) {
	h.t.Helper()
	ctx := context.Background()
	regFails := false
	for i, line := range strings.Split(script, "\n") {
		h.line = i + 1
		if j := strings.Index(line, "#"); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		cmd, args := f[0], f[1:]
		want := strings.Join(args, " ")
		var err error
		switch cmd {
		case "config":
			c := TTLConfig{TTL: 100 * time.Millisecond}
			for _, a := range args {
				name, v, _ := strings.Cut(a, "=")
				switch name {
				case "ttl":
					if v == "max" {
						c.TTL = math.MaxInt64
					} else {
						c.TTL = time.Duration(must(strconv.ParseInt(v, 10, 64))) * time.Millisecond
					}
				case "update":
					c.UpdateType = map[string]TTLUpdateType{"write": TTLOnCreateAndWrite, "read": TTLOnReadAndWrite, "off": TTLUpdateDisabled}[v]
				case "vis":
					c.Visibility = map[string]TTLVisibility{"never": TTLNeverReturnExpired, "return": TTLReturnExpiredIfNotCleanedUp}[v]
				case "incr":
					c.Cleanup.IncrementalSize = int(must(strconv.ParseInt(v, 10, 64)))
				case "snapshot":
					c.Cleanup.FullSnapshot = v == "true"
				case "compact":
					c.Cleanup.NoCompaction = v != "true"
				default:
					h.fail("config %s", a)
				}
			}
			h.cfg = &c
		case "first-config": // the Store is new: register it with this config now
			h.s.Close()
			h.dir = h.newDir()
			h.s = must(Open(h.dir, h.opts))
			h.reregister(h.s, false)
		case "t":
			h.now.Store(must(strconv.ParseInt(want, 10, 64)))
		case "key":
			h.key = want
		case "ns":
			h.ns = want
		case "put":
			err = h.put(args)
		case "update":
			err = h.lst.Update(h.k(), args)
		case "get":
			var got string
			if got, err = h.get(); err == nil && got != want {
				h.fail("get = %q, want %q", got, want)
			}
		case "mapget":
			v, ok, gerr := h.mp.Get(h.k(), args[0])
			if !ok {
				v = "∅"
			}
			if err = gerr; err == nil && v != args[1] {
				h.fail("map get %s = %q, want %q", args[0], v, args[1])
			}
		case "contains":
			var ok bool
			if ok, err = h.mp.Contains(h.k(), args[0]); err == nil && strconv.FormatBool(ok) != args[1] {
				h.fail("contains %s = %v, want %s", args[0], ok, args[1])
			}
		case "isempty":
			var ok bool
			if ok, err = h.mp.IsEmpty(h.k()); err == nil && strconv.FormatBool(ok) != want {
				h.fail("isempty = %v, want %s", ok, want)
			}
		case "remove":
			err = h.mp.Remove(h.k(), want)
		case "clear":
			switch h.kind {
			case kindValue:
				err = h.val.Clear(h.k())
			case kindList:
				err = h.lst.Clear(h.k())
			case kindMap:
				err = h.mp.Clear(h.k())
			case kindReducing:
				err = h.red.Clear(h.k())
			default:
				err = h.agg.Clear(h.k())
			}
		case "merge":
			var srcs [][]byte
			for _, a := range args[1:] {
				srcs = append(srcs, []byte(a))
			}
			k := h.s.Key([]byte(h.key))
			switch h.kind {
			case kindList:
				err = h.lst.MergeNamespaces(k, []byte(args[0]), srcs...)
			case kindReducing:
				err = h.red.MergeNamespaces(k, []byte(args[0]), srcs...)
			case kindAggregating:
				err = h.agg.MergeNamespaces(k, []byte(args[0]), srcs...)
			}
		case "raw":
			if got := h.raw(); got != want {
				h.fail("raw = %s, want %s", got, want)
			}
		case "entries":
			n, nerr := h.s.NumEntries(h.state())
			if err = nerr; err == nil && strconv.FormatInt(n, 10) != want {
				h.fail("NumEntries = %d, want %s", n, want)
			}
		case "keys":
			n := int(must(strconv.ParseInt(want, 10, 64)))
			old := h.key
			for j := range n {
				h.key = fmt.Sprintf("k%d", j)
				x := "x"
				switch h.kind {
				case kindMap:
					x = "u=x"
				case kindReducing, kindAggregating:
					x = "1"
				}
				if err = h.put([]string{x}); err != nil {
					break
				}
			}
			h.key = old
		case "rawkeys":
			n := int(must(strconv.ParseInt(want, 10, 64)))
			old, held := h.key, 0
			for j := range 1 << 10 {
				h.key = fmt.Sprintf("k%d", j)
				if h.raw() != "∅" {
					held++
				}
			}
			h.key = old
			if held != n {
				h.fail("%d keys hold data, want %d", held, n)
			}
		case "access":
			old := h.key
			h.key = "probe"
			for range must(strconv.Atoi(want)) {
				if _, err = h.get(); err != nil {
					break
				}
			}
			h.key = old
		case "checkpoint":
			var hd CheckpointHandle
			hd, err = h.s.Checkpoint(ctx, uint64(len(h.ck)+1), nil)
			h.ck = append(h.ck, hd)
		case "restore":
			if err = h.s.Discard(); err != nil {
				break
			}
			h.dir = h.newDir()
			s, rerr := Restore(h.dir, h.opts, h.store, h.ck[len(h.ck)-1])
			if rerr != nil {
				h.fail("restore: %v", rerr)
			}
			h.reregister(s, regFails)
			regFails = false
		case "changelog":
			h.s.Close()
			h.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
			h.dir = h.newDir()
			h.s = must(Open(h.dir, h.opts))
			h.reregister(h.s, false)
		case "rescale":
			kg := h.k().KeyGroup()
			if err = h.s.Discard(); err != nil {
				break
			}
			h.dir = h.newDir()
			o := h.opts
			o.KeyGroups = &KeyGroupRange{Start: kg, End: kg}
			s, rerr := Restore(h.dir, o, h.store, h.ck[len(h.ck)-1])
			if rerr != nil {
				h.fail("rescale: %v", rerr)
			}
			h.reregister(s, regFails)
			regFails = false
		case "reopen":
			if err = h.s.Close(); err != nil {
				break
			}
			h.reregister(must(Open(h.dir, h.opts)), regFails)
			regFails = false
		case "register-fails":
			regFails = true
		case "stats":
			st := h.s.Stats()
			if got := fmt.Sprintf("compaction=%d snapshot=%d", st.TTL.CompactionEntries, st.TTL.SnapshotEntries); got != want {
				h.fail("stats %s, want %s", got, want)
			}
		default:
			h.fail("unknown command %q", cmd)
		}
		if err != nil {
			h.fail("%s: %v", line, err)
		}
	}
}

// ttlScripts are the scenarios by state kind. Each runs on a new Store with TTL 100 ms,
// TTLOnCreateAndWrite, TTLNeverReturnExpired unless it starts with a config and first-config.
var ttlScripts = map[stateKind]map[string]string{
	kindValue: {
		"non-existent": `
get ∅
raw ∅`,
		"exact-expiration-on-write": `
t 0
put a
t 20
get a
t 50
put b
t 120
get b
t 170
put c
t 220
get c
t 269
get c
t 270            # inclusive: 170 + 100 <= 270
get ∅
raw ∅            # the read removed it`,
		"relaxed-expiration-on-write": `
config vis=return
first-config
t 0
put a
t 120
raw 1
get a            # expired, not cleaned up: returned once
raw ∅
get ∅`,
		"exact-expiration-on-read": `
config update=read
first-config
t 0
put a
t 50
get a            # renews: now 50
t 120
get a            # 50 + 100 > 120; renews: 120
t 219
get a
t 319
get ∅
raw ∅`,
		"relaxed-expiration-on-read": `
config update=read vis=return
first-config
t 0
put a
t 50
get a
t 170
get a            # expired at 150, returned once
get ∅`,
		"disabled-update-type": `
config update=off
first-config
t 0
put a
t 1000000
get a
reopen`,
		"overflow": `
t 9223372036854775800
put a
t 9223372036854775806
get a            # ts + 100 saturates at MaxInt64
t 9223372036854775807
get ∅`,
		"max-ttl": `
config ttl=max
first-config
t 10
put a
t 9223372036854
get a
t 9223372036864
get ∅`,
		"checkpoint-restore-downtime": `
t 0
put a
checkpoint
t 60
restore          # timestamps survive: the time since the checkpoint counts
get a
t 100
get ∅`,
		"reopen-downtime": `
t 0
put a
t 30
reopen
t 99
get a
t 100
get ∅`,
		"restore-with-a-longer-ttl": `
t 0
put a
checkpoint
config ttl=500
t 450
restore
get a
t 500
get ∅`,
		"full-snapshot": `
config snapshot=true
first-config
t 0
put a
key k2
put b
t 50
put c
t 120            # a expired, c not
checkpoint
stats compaction=0 snapshot=1
restore
raw 1
get c
key k
raw ∅            # the checkpoint holds a tombstone
entries 1`,
		"no-full-snapshot": `
t 0
put a
t 120
checkpoint
restore
raw 1            # expired but written: compactions or reads remove it
get ∅
raw ∅`,
		"incremental-cleanup": `
config incr=5
first-config
t 0
keys 20
t 100
rawkeys 20
entries 20
access 4         # 20 keys, 5 per access
rawkeys 0
entries 0`,
		"clear": `
put a
clear
get ∅
raw ∅`,
	},
	kindList: {
		"exact-expiration-on-write": `
t 0
put a
t 20
get a
t 50
put b c
t 120
get b c          # a expired: skipped, not removed
raw 3
t 170
put d
t 220
get d
t 270
get ∅
raw ∅            # all expired: the read removed the list (FLINK-21413)
entries 0`,
		"update": `
t 0
put a
t 50
update b c
t 120
get b c
raw 2
t 150
get ∅
raw ∅`,
		"relaxed-expiration-on-write": `
config vis=return
first-config
t 0
put a
t 50
put b
t 120
get a b          # a expired, returned; not all expired: nothing removed
get a b
raw 2
t 150
get a b          # all expired: returned once, removed
raw ∅
get ∅`,
		"exact-expiration-on-read": `
config update=read
first-config
t 0
put a
t 50
put b
t 60
get a b          # renews both: 60
t 159
get a b          # renews: 159
t 258
get a b
t 358
get ∅
raw ∅`,
		"on-read-drops-expired": `
config update=read
first-config
t 0
put a
t 50
put b
t 120
get b            # a expired: the renewal rewrites the list without it
raw 1`,
		"relaxed-expiration-on-read": `
config update=read vis=return
first-config
t 0
put a
t 50
put b
t 120
get a b          # a returned once; b renewed, a dropped by the rewrite
raw 1
get b
t 260
get b
get ∅`,
		"merge-namespaces": `
t 0
ns w1
put a
t 50
ns w2
put b
ns w3
put c
t 120
merge w3 w1 w2
ns w3
get c b          # a expired on the way
raw 3
ns w1
raw ∅`,
		"checkpoint-restore-downtime": `
t 0
put a
t 50
put b
checkpoint
t 110
restore
get b
t 150
get ∅`,
		"full-snapshot": `
config snapshot=true
first-config
t 0
put a
t 50
put b
t 120
checkpoint
restore
raw 1
get b`,
		"incremental-cleanup": `
config incr=3
first-config
t 0
keys 9
t 100
rawkeys 9
access 3
rawkeys 0`,
		"overflow": `
t 9223372036854775800
put a
t 9223372036854775806
get a
t 9223372036854775807
get ∅`,
	},
	kindMap: {
		"exact-expiration-on-write": `
t 0
put u=a
t 20
get u=a
t 50
put v=b
t 120
raw 2
get v=b          # u expired: skipped and removed
raw 1
t 170
put u=c
t 220
get u=c
mapget v ∅
t 270
isempty true
raw ∅`,
		"get-contains": `
t 0
put u=a v=b
t 50
put v=c
t 100
contains u false # expired: removed
raw 1
mapget v c
t 150
mapget v ∅
raw ∅`,
		"relaxed-expiration-on-write": `
config vis=return
first-config
t 0
put u=a
t 50
put v=b
t 120
get u=a v=b      # u expired: returned once, removed
get v=b
raw 1
t 150
contains v true  # expired: returned once
contains v false
raw ∅`,
		"exact-expiration-on-read": `
config update=read
first-config
t 0
put u=a v=b
t 60
mapget u a       # renews u only
t 150
get u=a
t 249
get u=a
isempty false
t 349
isempty true
raw ∅`,
		"relaxed-expiration-on-read": `
config update=read vis=return
first-config
t 0
put u=a
t 50
mapget u a
t 150
mapget u a       # expired at 150, returned once
mapget u ∅`,
		"remove-clear": `
t 0
put u=a v=b
remove u
get v=b
clear
get ∅
raw ∅`,
		"checkpoint-restore-downtime": `
t 0
put u=a
t 50
put v=b
checkpoint
t 110
restore
get v=b
raw 1
t 150
get ∅`,
		"full-snapshot": `
config snapshot=true
first-config
t 0
put u=a
t 50
put v=b
t 120
checkpoint
restore
raw 1
entries 1
get v=b`,
		"incremental-cleanup": `
config incr=4
first-config
t 0
keys 8
t 100
entries 8
access 2
entries 0
rawkeys 0`,
		"overflow": `
t 9223372036854775800
put u=a
t 9223372036854775806
get u=a
t 9223372036854775807
get ∅`,
	},
	kindReducing: {
		"exact-expiration-on-write": `
t 0
put 1
t 20
get 1
t 50
put 2            # 1 is live: 3
t 120
get 3
t 170
put 4            # 3 expired at 150: starts afresh
t 220
get 4
t 270
get ∅
raw ∅`,
		"relaxed-expiration-on-write": `
config vis=return
first-config
t 0
put 1
t 120
put 2            # ReturnExpiredIfNotCleanedUp: the expired value still present is reduced
get 3
t 300
get 3
get ∅`,
		"exact-expiration-on-read": `
config update=read
first-config
t 0
put 1
t 90
get 1
t 189
put 2
get 3
t 389
get ∅`,
		"merge-namespaces": `
t 0
ns w1
put 1
t 50
ns w2
put 2
ns w3
put 4
t 100            # w1 expired
merge w3 w1 w2
ns w3
get 6
ns w1
raw ∅
ns w2
raw ∅
t 199
ns w3
get 6            # merged values are stamped at the merge: 100
t 200
get ∅`,
		"merge-all-expired": `
t 0
ns w1
put 1
ns w2
put 2
ns w3
put 4
t 100
merge w3 w1 w2   # w1 and w2 merge to nothing: the target is not touched
ns w3
raw 1
get ∅
raw ∅
ns w1
raw ∅`,
		"checkpoint-restore-downtime": `
t 0
put 5
checkpoint
t 99
restore
get 5
t 100
get ∅`,
		"incremental-cleanup": `
config incr=10
first-config
t 0
keys 15
t 100
access 1
rawkeys 5
access 1
rawkeys 0`,
		"overflow": `
t 9223372036854775800
put 1
t 9223372036854775807
get ∅`,
	},
	kindAggregating: {
		"exact-expiration-on-write": `
t 0
put 1
t 20
get 1/1
t 50
put 2
t 120
get 3/2
t 170
put 4            # expired: a new accumulator
t 220
get 4/1
t 270
get ∅
raw ∅`,
		"relaxed-expiration-on-write": `
config vis=return
first-config
t 0
put 1
t 120
put 2            # the expired accumulator still present is added to, as Flink
get 3/2`,
		"exact-expiration-on-read": `
config update=read
first-config
t 0
put 1
t 90
get 1/1
t 189
get 1/1
t 289
get ∅`,
		"merge-namespaces": `
t 0
ns w1
put 1
t 50
ns w2
put 2
ns w3
put 4
t 100
merge w3 w1 w2
ns w3
get 6/2
ns w1
raw ∅`,
		"checkpoint-restore-downtime": `
t 0
put 5
checkpoint
t 99
restore
get 5/1
t 100
get ∅`,
		"incremental-cleanup": `
config incr=2
first-config
t 0
keys 4
t 100
access 2
rawkeys 0`,
	},
}

// TestTTLScenarios runs ttlScripts: Flink's TtlStateTestBase scenarios for every state kind.
func TestTTLScenarios(t *testing.T) {
	for _, kind := range []stateKind{kindValue, kindList, kindMap, kindReducing, kindAggregating} {
		names := make([]string, 0, len(ttlScripts[kind]))
		for name := range ttlScripts[kind] {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			t.Run(kind.String()+"/"+name, func(t *testing.T) {
				newTTLHarness(t, kind).run(ttlScripts[kind][name])
			})
		}
	}
}

// TestTTLConfigValidation: a TTL below 1 ms and out-of-range fields are ErrInvalidOptions;
// registering a name again with or without a TTL where it had the other is
// ErrIncompatibleState; TTLUpdateDisabled is no TTL.
func TestTTLConfigValidation(t *testing.T) {
	s := openTest(t, Options{})
	for _, c := range []TTLConfig{
		{},
		{TTL: time.Microsecond},
		{TTL: -time.Second},
		{TTL: time.Second, UpdateType: 3},
		{TTL: time.Second, Visibility: 2},
		{TTL: time.Second, Cleanup: TTLCleanup{IncrementalSize: -1}},
		{TTL: time.Second, Cleanup: TTLCleanup{QueryTimeAfterNumEntries: -1}},
		{TTL: time.Second, Cleanup: TTLCleanup{EveryRecord: true}},
		{TTL: time.Second, Cleanup: TTLCleanup{ReclaimWithin: -time.Second}},
		{TTL: time.Second, Cleanup: TTLCleanup{ReclaimWithin: time.Microsecond}},
	} {
		if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &c}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", c, err)
		}
	}
	must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: time.Second}}))
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
		t.Errorf("re-registered without a TTL: %v", err)
	}
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: time.Second, UpdateType: TTLUpdateDisabled}}); !errors.Is(err, ErrIncompatibleState) {
		t.Errorf("re-registered with TTLUpdateDisabled: %v", err)
	}
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: time.Hour}}); err != nil {
		t.Errorf("re-registered with another TTL: %v", err)
	}
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64, TTL: &TTLConfig{TTL: time.Second, UpdateType: TTLUpdateDisabled}}))
	if l.ttl != nil {
		t.Error("TTLUpdateDisabled gave the state a TTL")
	}
}

// TestTTLValueValidity: a value read with TTLOnReadAndWrite (a read that writes) stays valid
// until the next write, and so does an expired value returned once; values read before a
// read that removed expired data are not required to be.
func TestTTLValueValidity(t *testing.T) {
	var now atomic.Int64
	s := openTest(t, Options{Clock: now.Load})
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes, TTL: &TTLConfig{TTL: 100 * time.Millisecond, UpdateType: TTLOnReadAndWrite}}))
	r := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "r", Codec: Bytes, TTL: &TTLConfig{TTL: 100 * time.Millisecond, Visibility: TTLReturnExpiredIfNotCleanedUp}}))
	k := s.Key([]byte("k"))
	must(0, v.Put(k, []byte("value-one")))
	must(0, r.Put(k, []byte("expired-one")))
	now.Store(50)
	a, _, _ := v.Get(k) // renews: decoded from what it wrote
	if string(a) != "value-one" {
		t.Fatalf("%q", a)
	}
	now.Store(120)
	b, ok, err := r.Get(k) // expired: returned once from a copy, removed (a write)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if string(b) != "expired-one" {
		t.Fatalf("%q", b)
	}
	c, _, _ := v.Get(k) // renewed at 50: live
	if string(c) != "value-one" {
		t.Fatalf("%q", c)
	}
	if _, ok, _ := r.Get(k); ok {
		t.Fatal("the expired value was returned twice")
	}
}

// TestTTLCompactionCleanup: expired data disappears from the SliceTable by memory
// compactions and from the LsmStore by LSM compactions, counted in Stats; a state with
// NoCompaction keeps it; data that has not expired survives both.
func TestTTLCompactionCleanup(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	s := must(Open(dir, opts))
	defer func() { s.Close() }()
	// NoSweep: the compactions, not the sweep (TestTTLSweep), must find the expired data.
	cfg := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoSweep: true}}
	keep := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoCompaction: true}}
	reg := func(s *Store) (*ValueState[string], *ListState[string], *MapState[string, string], *ValueState[string]) {
		return must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: cfg})),
			must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String, TTL: cfg})),
			must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String, TTL: cfg})),
			must(NewValueState(s, ValueDescriptor[string]{Name: "keep", Codec: String, TTL: keep}))
	}
	v, l, m, kv := reg(s)
	const n = 500
	write := func(round int) {
		for i := range n {
			k := s.Key(fmt.Appendf(nil, "key-%d", i))
			must(0, v.Put(k, fmt.Sprintf("v%d-%d", round, i)))
			must(0, l.Add(k, fmt.Sprintf("e%d", round)))
			must(0, m.Put(k, fmt.Sprint(round), "x"))
			must(0, kv.Put(k, "kept"))
		}
	}
	// Round 0 at t=0, round 1 at t=50: at t=120 round 0 has expired, round 1 not.
	write(0)
	must(0, s.seal())
	must(0, s.WaitBackground())
	now.Store(50)
	write(1)
	must(0, s.seal())
	must(0, s.WaitBackground())
	now.Store(120)
	// Memory compactions: a third run makes the chains due.
	for i := range n {
		must(0, kv.Put(s.Key(fmt.Appendf(nil, "key-%d", i)), "kept"))
	}
	must(0, s.seal())
	must(0, s.WaitBackground())
	st := s.Stats()
	if st.Slices.Compactions == 0 || st.TTL.CompactionEntries == 0 {
		t.Fatalf("memory compactions %d removed %d expired entries", st.Slices.Compactions, st.TTL.CompactionEntries)
	}
	t.Logf("slice compactions: %d entries, %d bytes expired", st.TTL.CompactionEntries, st.TTL.CompactionBytes)
	// Into the LsmStore (Close persists), then compact every level at t=170: round 1 expired.
	must(0, s.Close())
	s = must(Open(dir, opts))
	v, l, m, kv = reg(s)
	before := s.Stats().LSM.Bytes
	now.Store(170)
	must(0, s.e.CompactLSM())
	st = s.Stats()
	if st.TTL.CompactionEntries < 3*n {
		t.Fatalf("LSM compactions removed %d expired entries, want at least %d", st.TTL.CompactionEntries, 3*n)
	}
	if st.LSM.Bytes >= before {
		t.Errorf("LSM bytes %d after compaction, %d before", st.LSM.Bytes, before)
	}
	t.Logf("LSM: %d → %d bytes, %d entries expired", before, st.LSM.Bytes, st.TTL.CompactionEntries)
	for i := range n {
		k := s.Key(fmt.Appendf(nil, "key-%d", i))
		key, h := s.compose(k, v.id)
		if _, st := s.e.Get(h, key); st == found {
			t.Fatalf("key %d: expired value still stored", i)
		}
		key, h = s.compose(k, l.id)
		if _, st, _ := s.e.ListGet(h, key, nil, nil); st == found {
			t.Fatalf("key %d: expired list still stored", i)
		}
		key, h = s.compose(k, m.id)
		it := s.e.MapIter(h, key)
		if it.Next() {
			t.Fatalf("key %d: expired map entry still stored", i)
		}
		it.Close()
		key, h = s.compose(k, kv.id)
		if _, st := s.e.Get(h, key); st != found {
			t.Fatalf("key %d: the NoCompaction state lost its expired value", i)
		}
	}
}

// TestTTLCompactionKeepsLive: compactions keep unexpired data and a list's unexpired
// elements, across the SliceTable and the LsmStore.
func TestTTLCompactionKeepsLive(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	s := must(Open(dir, opts))
	defer func() { s.Close() }()
	cfg := &TTLConfig{TTL: 100 * time.Millisecond}
	l := must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String, TTL: cfg}))
	k := s.Key([]byte("k"))
	must(0, l.AddAll(k, []string{"a", "b"}))
	must(0, s.seal())
	now.Store(60)
	must(0, l.Add(k, "c"))
	must(0, s.Close())
	s = must(Open(dir, opts))
	l = must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String, TTL: cfg}))
	now.Store(110)
	must(0, s.e.CompactLSM())
	key, h := s.compose(k, l.id)
	bats, _, _ := s.e.ListGet(h, key, nil, nil)
	n := 0
	for _, b := range bats {
		n += elemCount(b)
	}
	if n != 1 {
		t.Fatalf("%d elements stored after compaction, want 1 (c)", n)
	}
	it := l.Get(k)
	if !it.Next() || it.Value() != "c" || it.Next() {
		t.Fatal("list after compaction")
	}
}

// TestTTLRowCache: a value the row cache holds (read from the LsmStore) that expires is not
// returned, and reading it removes it from the cache.
func TestTTLRowCache(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1,
		RowCacheSize: 64 << 10, Clock: now.Load}
	s := must(Open(dir, opts))
	cfg := &TTLConfig{TTL: 100 * time.Millisecond}
	v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: cfg}))
	k := s.Key([]byte("k"))
	must(0, v.Put(k, "a"))
	must(0, s.Close())
	s = must(Open(dir, opts))
	defer s.Close()
	v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: cfg}))
	now.Store(50)
	if x, ok, err := v.Get(k); err != nil || !ok || x != "a" { // from the LsmStore: cached
		t.Fatal(x, ok, err)
	}
	if x, ok, err := v.Get(k); err != nil || !ok || x != "a" { // from the cache
		t.Fatal(x, ok, err)
	}
	if st := s.Stats(); st.Caches.RowHits == 0 || st.Caches.RowEntries != 1 {
		t.Fatalf("row cache: %d hits, %d entries", st.Caches.RowHits, st.Caches.RowEntries)
	}
	now.Store(100)
	if x, ok, err := v.Get(k); err != nil || ok {
		t.Fatalf("expired value from the row cache: %q %v %v", x, ok, err)
	}
	if n := s.Stats().Caches.RowEntries; n != 0 {
		t.Fatalf("the row cache still holds %d entries", n)
	}
	if _, ok, _ := v.Get(k); ok {
		t.Fatal("expired value read again")
	}
}

// TestTTLListStreamed: a long list in the LsmStore streamed piece by piece, all expired, is
// removed by the Next that ends the iteration; partly expired, its live elements come out.
func TestTTLListStreamed(t *testing.T) {
	var now atomic.Int64
	dir := t.TempDir()
	opts := Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	s := must(Open(dir, opts))
	cfg := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoCompaction: true}}
	l := must(NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes, TTL: cfg}))
	k, k2 := s.Key([]byte("k")), s.Key([]byte("k2"))
	big := make([]byte, 64<<10)
	for range 16 { // 1 MiB: streamed (more than ListEagerBytes)
		must(0, l.Add(k, big))
		must(0, l.Add(k2, big))
	}
	now.Store(50)
	must(0, l.Add(k2, []byte("live")))
	must(0, s.Close())
	s = must(Open(dir, opts))
	defer s.Close()
	l = must(NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes, TTL: cfg}))
	now.Store(120)
	it := l.Get(k)
	if it.low == nil {
		t.Fatal("the list was not streamed")
	}
	for it.Next() {
		t.Fatal("an expired element")
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	key, h := s.compose(k, l.id)
	if _, st, _ := s.e.ListGet(h, key, nil, nil); st == found {
		t.Fatal("the expired list is still stored")
	}
	var got []string
	it = l.Get(k2)
	for it.Next() {
		got = append(got, string(it.Value()))
	}
	if it.Err() != nil || !slices.Equal(got, []string{"live"}) {
		t.Fatal(got, it.Err())
	}
}

// TestTTLDefaultClock: a Store on the default clock switches to the coarse clock when its first
// TTL state registers (a Store without one holds no ticker), stamps by the wall clock within
// the coarse clock's lag, expires by it, and lets the ticker go at Close and at Discard.
func TestTTLDefaultClock(t *testing.T) {
	for _, end := range []string{"Close", "Discard"} {
		t.Run(end, func(t *testing.T) {
			deadline := time.Now().Add(2 * time.Second)
			base := runtime.NumGoroutine()
			s := must(Open("", Options{}))
			plain := must(NewValueState(s, ValueDescriptor[int64]{Name: "plain", Codec: Int64}))
			must(0, plain.Put(s.Key([]byte("k")), 1))
			if s.unclock != nil {
				t.Fatal("a Store without TTL states holds the coarse clock")
			}
			v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: 30 * time.Millisecond}}))
			if s.unclock == nil {
				t.Fatal("the first TTL state did not switch to the coarse clock")
			}
			// Within a tick or two of the wall clock, never ahead of it. The ticker is a
			// goroutine: on a machine whose every P is busy (CI under -race beside other jobs)
			// it may run late, so the lag is awaited, not timed.
			d := time.Now().UnixMilli() - s.clock()
			for d > 50 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				d = time.Now().UnixMilli() - s.clock()
			}
			if d < -1 || d > 50 {
				t.Fatalf("the coarse clock is %d ms off the wall clock", d)
			}
			k := s.Key([]byte("k"))
			must(0, v.Put(k, 7))
			if x, ok, err := v.Get(k); err != nil || !ok || x != 7 {
				t.Fatalf("Get right after Put: %v %v %v", x, ok, err)
			}
			stamped := s.clock()
			for s.clock() < stamped+30 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if _, ok, err := v.Get(k); err != nil || ok {
				t.Fatalf("Get after the TTL passed on the coarse clock: ok=%v err=%v", ok, err)
			}
			if end == "Close" {
				must(0, s.Close())
			} else {
				must(0, s.Discard())
			}
			for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > base {
				t.Fatalf("goroutines after %s: %d, before Open: %d (the clock's ticker?)", end, n, base)
			}
		})
	}
}

// ttlMigrateScripts are the TTL migration scenarios (ttl_migrate.go), run for every kind of
// state with PUT, GET and RAW replaced by ttlMigrateArgs: a state stored without a TTL and
// registered with one (on) or the reverse (off), after a reopen, a native checkpoint's
// restore, a changelog checkpoint's restore and a rescale. Each checks Flink's rules: values
// are equal after the migration; turned on, they expire TTL after the migration; turned off,
// an expired value not cleaned up is visible again and nothing expires; and the next open or
// restore sees the new flag (a second migration would stamp again, or strip bytes that are
// not a timestamp).
var ttlMigrateScripts = map[string]string{
	"on/reopen": `
config update=off
first-config
t 0
put PUT
t 1000
config
reopen          # migrated: stamped 1000
get GET
t 1050
reopen          # stored with a TTL now: not stamped again
t 1099
get GET
t 1100
get ∅`,
	"off/reopen": `
config compact=false
first-config
t 0
put PUT
t 200           # expired, not cleaned up
raw RAW
config update=off
reopen          # timestamps dropped: visible again, as Flink's
get GET
t 100000
reopen          # stored without a TTL now: nothing stripped again
get GET
config
reopen          # on again: stamped 100000
t 100099
get GET
t 100100
get ∅`,
	"on/restore": `
config update=off
first-config
t 0
put PUT
checkpoint
t 1000
config
restore
get GET
checkpoint
t 1050
restore
t 1099
get GET
t 1100
get ∅`,
	"off/restore": `
config compact=false
first-config
t 0
put PUT
checkpoint
t 200
config update=off
restore
get GET
checkpoint
t 100000
restore
get GET`,
	"on/changelog": `
config update=off
changelog
t 0
put PUT
checkpoint      # the first is native
key k2
put PUT
checkpoint      # k2 in the changelog
t 1000
config
restore
key k
get GET
checkpoint      # the migration's writes in the changelog
t 1050
restore
t 1099
get GET
key k2
get GET
t 1100
get ∅
key k
get ∅`,
	"off/changelog": `
config compact=false
changelog
t 0
put PUT
checkpoint
key k2
put PUT
checkpoint
t 200
config update=off
restore
get GET
checkpoint
t 100000
restore
get GET
key k
get GET`,
	"on/rescale": `
config update=off
first-config
t 0
put PUT
checkpoint
t 1000
config
rescale
get GET
checkpoint
t 1050
restore
t 1099
get GET
t 1100
get ∅`,
	"off/rescale": `
config compact=false
first-config
t 0
put PUT
checkpoint
t 200
config update=off
rescale
get GET
checkpoint
t 100000
restore
get GET`,
}

// ttlMigrateArgs are the PUT, GET and RAW of ttlMigrateScripts by kind.
var ttlMigrateArgs = map[stateKind][3]string{
	kindValue:       {"a", "a", "1"},
	kindList:        {"a b", "a b", "2"},
	kindMap:         {"u=a v=b", "u=a v=b", "2"},
	kindReducing:    {"1 2", "3", "1"},
	kindAggregating: {"1 2", "3/2", "1"},
}

// TestTTLMigrate runs ttlMigrateScripts for every kind of state.
func TestTTLMigrate(t *testing.T) {
	for _, kind := range []stateKind{kindValue, kindList, kindMap, kindReducing, kindAggregating} {
		names := slices.Sorted(maps.Keys(ttlMigrateScripts))
		a := ttlMigrateArgs[kind]
		for _, name := range names {
			t.Run(kind.String()+"/"+name, func(t *testing.T) {
				script := strings.NewReplacer("PUT", a[0], "GET", a[1], "RAW", a[2]).Replace(ttlMigrateScripts[name])
				newTTLHarness(t, kind).run(script)
			})
		}
	}
}
