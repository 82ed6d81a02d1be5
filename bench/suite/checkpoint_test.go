package suite

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/peers"
	"github.com/strata-db/strata/checkpoint"
)

// Checkpoints and restores of value state on disk: 16 B keys, 100 B values, state of 256 MiB
// (1 GiB and 4 GiB with -big) counted as keys × (key + value), under a 64 MiB memory budget so
// that most of it lies in Strata's LsmStore (and in Pebble's sstables). Each checkpoint follows
// an update of 1 % of the keys (distinct keys, a new value each), as a job's checkpoint interval
// would: the figures are those of an incremental checkpoint after a first full one.
//
//	BenchmarkCheckpoint/state=256MiB/impl=strata
//	BenchmarkCheckpoint/state=256MiB/impl=pebble
//	BenchmarkRestore/state=256MiB/impl=strata/mode=plain
//	BenchmarkRestore/state=256MiB/impl=strata/mode=scaleout
//	BenchmarkRestore/state=256MiB/impl=strata/mode=scalein
//
// Strata checkpoints into a checkpoint.DirStorage on the same file system as its directory, so
// its table files reach the storage as hard links, as Pebble's DB.Checkpoint links its
// sstables: both rows measure the local-disk case, not an upload to an object store.
//
// A Checkpoint leaf takes max(b.N, -ckrounds) checkpoints, each after its update; ns/op,
// B/op and allocs/op are per checkpoint (update included) and the other figures are:
//
//   - sync-p50-ms, sync-p99-ms, sync-max-ms: Strata's CheckpointStats.SyncPause, the time the
//     task's goroutine spends in StartCheckpoint; Pebble's DB.Flush + DB.Checkpoint, all of which
//     is synchronous (Pebble runs with its WAL off, as every peer here, so a checkpoint must
//     flush the memtable first or it would miss the updates).
//   - start-p99-ms (Strata): StartCheckpoint as the caller's clock sees it.
//   - async-p50-ms, async-p99-ms (Strata): CheckpointStats.AsyncDuration, cut to manifest.
//   - link-p50-ms (Pebble): DB.Checkpoint alone, without the flush.
//   - bytes/ckpt: mean bytes a checkpoint stored anew — Strata's UploadedBytes; for Pebble the
//     files of its checkpoint directory that are not sstables of the previous checkpoint (what
//     an incremental upload of it would send, as Flink's RocksDB incremental checkpoints do).
//   - changed-B/ckpt: keys updated × (16 + 100) bytes; bytes/changed: their ratio.
//   - mem-B/ckpt (Strata): mean MemoryBytes, the part of bytes/ckpt that held the memory tiers
//     (the updates still in the FreshTable and SliceTable, stored as one table); the rest is
//     table files the LsmStore wrote since the last checkpoint (evictions, compactions).
//   - reused-B/ckpt (Strata): mean ReusedBytes; dir-B (Pebble): bytes of the last checkpoint
//     directory.
//
// A Restore leaf restores the last completed checkpoint of the Checkpoint rows (or, when they
// did not run, of a state built and checkpointed once) max(b.N, -restorerounds) times, each into
// a new directory, and reports restore-ms (median; ns/op is the mean) and restored-MiB (the
// table bytes the round's Stores restored, RestoreStats.Bytes summed): strata.Restore, which
// fetches the tables and opens the Store, then registering the value state and a first read of
// a key. mode=plain restores one Store of all key groups; scaleout two Stores of half the key
// groups each (ComputeKeyGroupRangeForOperatorIndex over parallelism 2), one after the other,
// restore-ms the sum and subtask-max-ms the slower; scalein one Store of all key groups from
// the checkpoints of those two halves (each checkpointed once, untimed). x-plain is restore-ms
// over the plain row's in the same run.

var (
	flagCkRounds      = flag.Int("ckrounds", 20, "checkpoints per BenchmarkCheckpoint leaf (at least; b.N if larger): the samples of the p50/p99 figures")
	flagRestoreRounds = flag.Int("restorerounds", 3, "restores per BenchmarkRestore leaf (at least; b.N if larger)")
)

const (
	ckKeySize   = 16
	ckValueSize = 100
	ckBudget    = 64 << 20
	ckSegment   = 16 << 20
	ckUpdateDiv = 100 // 1 % of the keys per checkpoint
	ckValues    = 1 << 16
)

type ckSize struct {
	label string
	bytes int64
	big   bool // only with -big
}

var ckSizes = []ckSize{{"256MiB", 256 << 20, false}, {"1GiB", 1 << 30, true}, {"4GiB", 4 << 30, true}}

func (c ckSize) keys() int { return int(c.bytes / (ckKeySize + ckValueSize)) }

// ckKey writes the 16-byte key of id: the id big-endian, then the id times the golden ratio.
func ckKey(dst *[ckKeySize]byte, id int32) []byte {
	binary.BigEndian.PutUint64(dst[:8], uint64(id))
	binary.BigEndian.PutUint64(dst[8:], uint64(id)*0x9e3779b97f4a7c15)
	return dst[:]
}

// ckUpdates returns the ids updated before checkpoint round r: 1 % of the n keys, distinct,
// consecutive in a fixed permutation (so rounds move through all keys).
func ckUpdates(perm []int32, r int) []int32 {
	n := len(perm)
	m := n / ckUpdateDiv
	off := (r * m) % n
	if off+m <= n {
		return perm[off : off+m]
	}
	return append(slices.Clone(perm[off:]), perm[:off+m-n]...)
}

var (
	ckRoot   string // removed by TestMain
	ckVals   [][]byte
	ckStates = map[string]*ckStrataState{}
)

func ckDir(b *testing.B, name string) string {
	if ckRoot == "" {
		d, err := os.MkdirTemp("", "strata-bench-ckpt-")
		if err != nil {
			b.Fatal(err)
		}
		ckRoot = d
		ckVals = Values(ckValues, ckValueSize, 41)
	}
	return filepath.Join(ckRoot, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, st := range ckStates {
		st.close()
	}
	for _, st := range clStates {
		if st.s != nil {
			st.s.Close()
		}
	}
	if ckRoot != "" {
		os.RemoveAll(ckRoot)
	}
	os.Exit(code)
}

func ckImpls() []string {
	var out []string
	for _, impl := range impls() {
		if impl == "strata" || impl == "pebble" {
			out = append(out, impl)
		}
	}
	return out
}

func ckSkipBig(b *testing.B, c ckSize) {
	if c.big && !*flagBig {
		b.Skip("state=" + c.label + " is off by default: building it takes minutes and " +
			"GiBs of disk per implementation on a 2-core machine; run with -big")
	}
}

// ckOptions are the Options of every Strata Store of these benchmarks.
func ckOptions(storage checkpoint.Storage, kg *strata.KeyGroupRange) strata.Options {
	return strata.Options{MemoryBudget: ckBudget, SegmentSize: ckSegment, KeyGroups: kg,
		Checkpoint: strata.CheckpointOptions{Storage: storage, Grace: checkpoint.NoGrace}}
}

// ckStrataState is one size's Strata state: the Store (nil once closed), its checkpoint
// storage and the last completed checkpoint, shared by the Checkpoint and Restore rows.
type ckStrataState struct {
	size    ckSize
	dir     string
	where   string // "": the Checkpoint rows' own; else s3Wheres' (s3_test.go)
	storage checkpoint.Storage
	s       *strata.Store
	v       *strata.ValueState[[]byte]
	perm    []int32
	rounds  int // update rounds so far
	last    strata.CheckpointHandle
	taken   uint64                    // the highest checkpoint id taken (savepoints included)
	halves  []strata.CheckpointHandle // checkpoints of the two halves, for scale-in
	plainMs []float64                 // restore-ms samples of mode=plain
}

func ckStrata(b *testing.B, c ckSize) *ckStrataState { return ckStrataOn(b, c, "") }

// ckStrataOn is ckStrata with the checkpoint storage where: "" for the Checkpoint and Restore
// rows' state, else one of s3Wheres (a state of its own, built the same way).
func ckStrataOn(b *testing.B, c ckSize, where string) *ckStrataState {
	key := c.label
	if where != "" {
		key += "/" + where
	}
	if st := ckStates[key]; st != nil {
		return st
	}
	b.StopTimer()
	defer b.StartTimer()
	n := c.keys()
	st := &ckStrataState{size: c, where: where, dir: ckDir(b, "strata-"+strings.ReplaceAll(key, "/", "-")), perm: Perm(0, n, 43)}
	var err error
	if where == "" || where == "local" {
		st.storage, err = checkpoint.NewDirStorage(filepath.Join(st.dir, "checkpoints"))
	} else {
		st.storage, err = s3Storage(c.label)
	}
	if err != nil {
		b.Fatal(err)
	}
	if st.s, err = strata.Open(filepath.Join(st.dir, "store"), ckOptions(st.storage, nil)); err != nil {
		b.Fatal(err)
	}
	if st.v, err = strata.NewValueState(st.s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var kb [ckKeySize]byte
	for i := range n {
		if err := st.v.Put(st.s.Key(ckKey(&kb, int32(i))), ckVals[i&(ckValues-1)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.s.WaitBackground(); err != nil {
		b.Fatal(err)
	}
	s := st.s.Stats()
	b.Logf("strata: loaded %d keys in %v: budget %d/%d MiB, slices %d MiB, LSM %d files %d MiB", n,
		time.Since(start).Round(time.Millisecond), s.Budget.Used>>20, s.Budget.Limit>>20, s.Slices.Bytes>>20, s.LSM.Files, s.LSM.Bytes>>20)
	h, err := st.s.Checkpoint(context.Background(), 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.s.NotifyCheckpointComplete(h.ID); err != nil {
		b.Fatal(err)
	}
	b.Logf("strata: first (full) checkpoint: sync %v, async %v, %d MiB in %d objects (memory tiers %d MiB)",
		h.Stats.SyncPause, h.Stats.AsyncDuration, h.Stats.UploadedBytes>>20, h.Stats.UploadedObjects, h.Stats.MemoryBytes>>20)
	st.last, st.taken = h, h.ID
	ckStates[key] = st
	return st
}

// update writes a new value to the next 1 % of the keys.
func (st *ckStrataState) update(b *testing.B) int {
	ids := ckUpdates(st.perm, st.rounds)
	var kb [ckKeySize]byte
	for _, id := range ids {
		if err := st.v.Put(st.s.Key(ckKey(&kb, id)), ckVals[(int(id)+st.rounds+1)&(ckValues-1)]); err != nil {
			b.Fatal(err)
		}
	}
	st.rounds++
	return len(ids)
}

// closeStore closes the Store and removes its directory, keeping the checkpoints (the
// Restore rows read them; their files are links of the Store's, so removing it frees nothing
// they hold).
func (st *ckStrataState) closeStore(b *testing.B) {
	if st.s == nil {
		return
	}
	if err := st.s.Close(); err != nil {
		b.Errorf("close: %v", err)
	}
	st.s, st.v = nil, nil
	os.RemoveAll(filepath.Join(st.dir, "store"))
	runtime.GC()
}

func (st *ckStrataState) close() {
	if st.s != nil {
		st.s.Close()
		st.s = nil
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	for _, c := range ckSizes {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			for _, impl := range ckImpls() {
				switch impl {
				case "strata":
					b.Run("impl=strata", func(b *testing.B) { benchStrataCheckpoint(b, ckStrata(b, c)) })
					if st := ckStates[c.label]; st != nil {
						st.closeStore(b)
					}
				case "pebble":
					p := &ckPebble{size: c}
					b.Run("impl=pebble", func(b *testing.B) { benchPebbleCheckpoint(b, p) })
					p.close(b)
				}
			}
		})
	}
}

// ckMeter counts what a leaf's rounds allocate and how long they take, so that ns/op, B/op
// and allocs/op are per checkpoint whatever b.N.
type ckMeter struct {
	ms    runtime.MemStats
	start time.Time
}

func (m *ckMeter) begin(b *testing.B) {
	b.ReportAllocs()
	runtime.ReadMemStats(&m.ms)
	b.ResetTimer()
	m.start = time.Now()
}

// end reports the figures of rounds taking elapsed in all (0: the time since begin).
func (m *ckMeter) end(b *testing.B, rounds int, elapsed time.Duration) {
	if elapsed == 0 {
		elapsed = time.Since(m.start)
	}
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(rounds), "ns/op")
	b.ReportMetric(float64(after.Mallocs-m.ms.Mallocs)/float64(rounds), "allocs/op")
	b.ReportMetric(float64(after.TotalAlloc-m.ms.TotalAlloc)/float64(rounds), "B/op")
}

func ms(d int64) float64 { return float64(d) / 1e6 }

func benchStrataCheckpoint(b *testing.B, st *ckStrataState) {
	if st.s == nil {
		b.Fatal("the Store of state=" + st.size.label + " is closed")
	}
	rounds := max(b.N, *flagCkRounds)
	sync, async, start := make([]int64, 0, rounds), make([]int64, 0, rounds), make([]int64, 0, rounds)
	var uploaded, reused, mem, changed int64
	ctx := context.Background()
	var m ckMeter
	m.begin(b)
	for range rounds {
		changed += int64(st.update(b)) * (ckKeySize + ckValueSize)
		st.taken++
		id := st.taken
		t0 := time.Now()
		p, err := st.s.StartCheckpoint(id, nil)
		start = append(start, int64(time.Since(t0)))
		if err != nil {
			b.Fatal(err)
		}
		h, err := p.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.s.NotifyCheckpointComplete(id); err != nil {
			b.Fatal(err)
		}
		st.last = h
		sync = append(sync, int64(h.Stats.SyncPause))
		async = append(async, int64(h.Stats.AsyncDuration))
		uploaded += h.Stats.UploadedBytes
		reused += h.Stats.ReusedBytes
		mem += h.Stats.MemoryBytes
	}
	m.end(b, rounds, 0)
	if err := st.s.WaitCheckpointGC(); err != nil {
		b.Errorf("checkpoint GC: %v", err)
	}
	r := float64(rounds)
	b.ReportMetric(float64(rounds), "ckpts")
	b.ReportMetric(ms(Percentile(sync, 0.5)), "sync-p50-ms")
	b.ReportMetric(ms(Percentile(sync, 0.99)), "sync-p99-ms")
	b.ReportMetric(ms(slices.Max(sync)), "sync-max-ms")
	b.ReportMetric(ms(Percentile(start, 0.99)), "start-p99-ms")
	b.ReportMetric(ms(Percentile(async, 0.5)), "async-p50-ms")
	b.ReportMetric(ms(Percentile(async, 0.99)), "async-p99-ms")
	b.ReportMetric(float64(uploaded)/r, "bytes/ckpt")
	b.ReportMetric(float64(changed)/r, "changed-B/ckpt")
	b.ReportMetric(float64(uploaded)/float64(changed), "bytes/changed")
	b.ReportMetric(float64(mem)/r, "mem-B/ckpt")
	b.ReportMetric(float64(reused)/r, "reused-B/ckpt")
	s := st.s.Stats()
	b.Logf("strata after %d checkpoints: LSM %d files %d MiB (L0 %d), evictions %d, slices %d MiB",
		st.last.ID, s.LSM.Files, s.LSM.Bytes>>20, s.LSM.L0Files, s.Slices.Evictions, s.Slices.Bytes>>20)
}

// ckPebble is one size's Pebble state for the Checkpoint rows.
type ckPebble struct {
	size   ckSize
	st     peers.Store
	db     *pebble.DB
	perm   []int32
	rounds int
	ckpts  []string // checkpoint directories, oldest first; the last two are kept
}

func (p *ckPebble) open(b *testing.B) {
	if p.st != nil {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	n := p.size.keys()
	p.perm = Perm(0, n, 43)
	st, err := peers.Open("pebble", peers.Config{Dir: ckDir(b, "pebble-"+p.size.label), Budget: ckBudget, Disk: true})
	if err != nil {
		b.Fatal(err)
	}
	p.st, p.db = st, peers.PebbleDB(st)
	start := time.Now()
	var kb [ckKeySize]byte
	st.Bulk(true)
	for i := range n {
		st.ValuePut(peers.Key{K: ckKey(&kb, int32(i))}, ckVals[i&(ckValues-1)])
	}
	st.Bulk(false)
	b.Logf("pebble: loaded %d keys in %v (flushed and compacted)", n, time.Since(start).Round(time.Millisecond))
	if _, _, err := p.checkpoint(b); err != nil {
		b.Fatal(err)
	}
}

// checkpoint flushes the memtable and checkpoints into a new directory; it returns the time
// of DB.Checkpoint alone and the bytes of the new directory that are not sstables of the
// previous checkpoint.
func (p *ckPebble) checkpoint(b *testing.B) (link time.Duration, fresh int64, err error) {
	dir := ckDir(b, fmt.Sprintf("pebble-%s-ckpt-%06d", p.size.label, len(p.ckpts)+1))
	if err := p.db.Flush(); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := p.db.Checkpoint(dir); err != nil {
		return 0, 0, err
	}
	link = time.Since(t0)
	prev := map[string]bool{}
	if len(p.ckpts) > 0 {
		es, _ := os.ReadDir(p.ckpts[len(p.ckpts)-1])
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".sst") {
				prev[e.Name()] = true
			}
		}
	}
	es, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range es {
		if prev[e.Name()] {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return 0, 0, err
		}
		fresh += fi.Size()
	}
	p.ckpts = append(p.ckpts, dir)
	if len(p.ckpts) > 2 {
		os.RemoveAll(p.ckpts[len(p.ckpts)-3])
	}
	return link, fresh, nil
}

func (p *ckPebble) close(b *testing.B) {
	for _, d := range p.ckpts {
		os.RemoveAll(d)
	}
	p.ckpts = nil
	if p.st != nil {
		if err := p.st.Close(); err != nil {
			b.Errorf("close pebble: %v", err)
		}
		p.st, p.db = nil, nil
		runtime.GC()
	}
}

func benchPebbleCheckpoint(b *testing.B, p *ckPebble) {
	p.open(b)
	rounds := max(b.N, *flagCkRounds)
	sync, link := make([]int64, 0, rounds), make([]int64, 0, rounds)
	var fresh, changed int64
	var kb [ckKeySize]byte
	var m ckMeter
	m.begin(b)
	for range rounds {
		ids := ckUpdates(p.perm, p.rounds)
		for _, id := range ids {
			p.st.ValuePut(peers.Key{K: ckKey(&kb, id)}, ckVals[(int(id)+p.rounds+1)&(ckValues-1)])
		}
		p.rounds++
		changed += int64(len(ids)) * (ckKeySize + ckValueSize)
		t0 := time.Now()
		l, f, err := p.checkpoint(b)
		sync = append(sync, int64(time.Since(t0)))
		if err != nil {
			b.Fatal(err)
		}
		link = append(link, int64(l))
		fresh += f
	}
	m.end(b, rounds, 0)
	var dirBytes int64
	filepath.WalkDir(p.ckpts[len(p.ckpts)-1], func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				dirBytes += fi.Size()
			}
		}
		return nil
	})
	r := float64(rounds)
	b.ReportMetric(float64(rounds), "ckpts")
	b.ReportMetric(ms(Percentile(sync, 0.5)), "sync-p50-ms")
	b.ReportMetric(ms(Percentile(sync, 0.99)), "sync-p99-ms")
	b.ReportMetric(ms(slices.Max(sync)), "sync-max-ms")
	b.ReportMetric(ms(Percentile(link, 0.5)), "link-p50-ms")
	b.ReportMetric(float64(fresh)/r, "bytes/ckpt")
	b.ReportMetric(float64(changed)/r, "changed-B/ckpt")
	b.ReportMetric(float64(fresh)/float64(changed), "bytes/changed")
	b.ReportMetric(float64(dirBytes), "dir-B")
}

func BenchmarkRestore(b *testing.B) {
	for _, c := range ckSizes {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			if !slices.Contains(impls(), "strata") {
				b.Skip("strata is not among -impls (Restore has no peer row)")
			}
			b.Run("impl=strata", func(b *testing.B) {
				for _, mode := range []string{"plain", "scaleout", "scalein"} {
					b.Run("mode="+mode, func(b *testing.B) {
						st := ckStrata(b, c)
						st.closeStore(b) // restores run alone, as after a failure
						benchRestore(b, st, mode)
					})
				}
			})
		})
	}
}

var ckRestores int // names restore directories

// restoreOne restores handles into a new Store of key groups kg (nil: all), registers the
// value state and reads one key of its key groups; it returns the Store and its directory.
func (st *ckStrataState) restoreOne(b *testing.B, kg *strata.KeyGroupRange, handles ...strata.CheckpointHandle) (*strata.Store, string) {
	ckRestores++
	dir := filepath.Join(st.dir, fmt.Sprintf("restore-%d", ckRestores))
	s, err := strata.Restore(dir, ckOptions(nil, kg), st.storage, handles...)
	if err != nil {
		b.Fatal(err)
	}
	v, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes})
	if err != nil {
		b.Fatal(err)
	}
	var kb [ckKeySize]byte
	for id := int32(0); ; id++ {
		k := s.Key(ckKey(&kb, id))
		if !s.KeyGroups().Contains(k.KeyGroup()) {
			continue
		}
		val, ok, err := v.Get(k)
		if err != nil || !ok || len(val) != ckValueSize {
			b.Fatalf("first read after restore of key %d: %d bytes, found %v, %v", id, len(val), ok, err)
		}
		sink += len(val)
		break
	}
	return s, dir
}

func discard(b *testing.B, s *strata.Store, dir string) {
	if err := s.Close(); err != nil {
		b.Errorf("close restored Store: %v", err)
	}
	os.RemoveAll(dir)
}

// halfRanges are the key groups of the two subtasks of a scale-out to parallelism 2.
func halfRanges() []strata.KeyGroupRange {
	return []strata.KeyGroupRange{
		strata.ComputeKeyGroupRangeForOperatorIndex(strata.DefaultMaxParallelism, 2, 0),
		strata.ComputeKeyGroupRangeForOperatorIndex(strata.DefaultMaxParallelism, 2, 1),
	}
}

// prepareHalves checkpoints each half of the state once (restored from the last checkpoint):
// the checkpoints a scale-in from 2 to 1 restores.
func (st *ckStrataState) prepareHalves(b *testing.B) {
	if st.halves != nil {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	for _, kg := range halfRanges() {
		s, dir := st.restoreOne(b, &kg, st.last)
		st.taken++ // above every id of the lineage, savepoints' included
		h, err := s.Checkpoint(context.Background(), st.taken, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.NotifyCheckpointComplete(h.ID); err != nil {
			b.Fatal(err)
		}
		b.Logf("half %v: checkpoint %d of %q, %d MiB", kg, h.ID, h.Owner, h.Stats.UploadedBytes>>20)
		st.halves = append(st.halves, h)
		discard(b, s, dir)
	}
}

func benchRestore(b *testing.B, st *ckStrataState, mode string) {
	if mode == "scalein" {
		st.prepareHalves(b)
	}
	rounds := max(b.N, *flagRestoreRounds)
	var total, slowest []int64
	var restored int64 // table bytes restored by every Store of every round
	var m ckMeter
	m.begin(b)
	var stats strata.RestoreStats
	for range rounds {
		var stores []*strata.Store
		var dirs []string
		var worst time.Duration
		t0 := time.Now()
		switch mode {
		case "plain":
			s, d := st.restoreOne(b, nil, st.last)
			stores, dirs = append(stores, s), append(dirs, d)
		case "scaleout":
			for _, kg := range halfRanges() {
				t1 := time.Now()
				s, d := st.restoreOne(b, &kg, st.last)
				worst = max(worst, time.Since(t1))
				stores, dirs = append(stores, s), append(dirs, d)
			}
		case "scalein":
			s, d := st.restoreOne(b, nil, st.halves...)
			stores, dirs = append(stores, s), append(dirs, d)
		}
		total = append(total, int64(time.Since(t0)))
		slowest = append(slowest, int64(worst))
		b.StopTimer()
		stats = stores[0].RestoreStats()
		for i, s := range stores {
			restored += s.RestoreStats().Bytes
			discard(b, s, dirs[i])
		}
		b.StartTimer()
	}
	var sum int64
	for _, t := range total {
		sum += t
	}
	m.end(b, rounds, time.Duration(sum))
	med := ms(Percentile(total, 0.5))
	b.ReportMetric(med, "restore-ms")
	b.ReportMetric(float64(restored)/float64(rounds)/(1<<20), "restored-MiB")
	if mode == "scaleout" {
		b.ReportMetric(ms(Percentile(slowest, 0.5)), "subtask-max-ms")
	}
	if mode == "plain" {
		st.plainMs = append(st.plainMs, med)
	} else if len(st.plainMs) > 0 {
		p := slices.Clone(st.plainMs)
		slices.Sort(p)
		b.ReportMetric(med/p[len(p)/2], "x-plain")
	}
	b.Logf("%s restore: %d tables, %d MiB (%d linked, %d copied, %d skipped) in the first Store", mode,
		stats.Tables, stats.Bytes>>20, stats.Linked, stats.Copied, stats.Skipped)
}
