package engine

import (
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/scheduler"
)

// Cost accounting (doc.go, "Cost accounting"): where the CPU of a Store goes, always on.
// Background work is measured exactly per job (the scheduler's thread CPU clock around each
// task, scheduler.Meter), the task side by sampling (one state operation in SampleEvery
// timed with the monotonic clock, split into engine read, engine write and changelog append,
// and scaled), and the task's total as the process's CPU minus the background's.

// BackgroundClass is a kind of background work for cost accounting, finer than a scheduler
// Class. The values index Stats.Background; they are not stored on disk.
type BackgroundClass uint8

const (
	BgTransform          BackgroundClass = iota // FreshTable segments into slices, and flushes to L0
	BgCompaction                                // slice compactions and relocations
	BgEviction                                  // cold slices to the LsmStore
	BgLSMCompaction                             // LSM compactions
	BgTTLSweep                                  // the TTL sweep's slice and LSM rewrites
	BgMaterialization                           // changelog materializations (uploads of the tiers)
	BgCheckpoint                                // checkpoint uploads (native and changelog) and checkpoint GC
	BgChangelogPersist                          // background changelog persists
	NumBackgroundClasses                        // the number of classes: the length of arrays indexed by BackgroundClass, not a class
)

var bgClassNames = [NumBackgroundClasses]string{"transform", "compaction", "eviction",
	"lsm-compaction", "ttl-sweep", "materialization", "checkpoint", "changelog-persist"}

// String returns the class's name ("transform", "compaction", …).
func (c BackgroundClass) String() string {
	if c < NumBackgroundClasses {
		return bgClassNames[c]
	}
	return "class(?)"
}

// ClassCost is the cost of one background class since Open.
type ClassCost struct {
	// Jobs counts the scheduler tasks that ran (a compaction task may merge several buckets).
	Jobs int64
	// CPUNanos is the CPU time of the worker threads while they ran (scheduler.Meter;
	// 0 where the OS has no thread CPU clock), RunNanos their wall-clock running time.
	CPUNanos, RunNanos int64
	// BytesIn and BytesOut are the bytes the class read and wrote (doc.go, "Cost
	// accounting", lists them per class; 0 where a class does not measure one).
	BytesIn, BytesOut int64
}

// TaskCost is the cost of the task side (the owner goroutine's state operations) since Open.
// The *Nanos parts are estimates: SampledOps of Ops operations were timed with the monotonic
// clock, and each part is their time scaled by Ops/SampledOps (wall time of the task thread,
// which is CPU time unless the thread was descheduled). Waits are not estimated: they are
// counted exactly (Stats' Backpressure*, L0Stall*, TransformStall*, CompactionStall*) and
// taken out of the sampled times.
type TaskCost struct {
	// Ops counts the state operations of the Store (the root's API calls: reads, writes,
	// timer calls, iterations), SampledOps those timed.
	Ops, SampledOps int64
	// OpNanos estimates the time inside the API calls, waits excluded; ReadNanos the part in
	// the engine's point reads (Get, ListGet, MapGet, batched gets), WriteNanos in its write
	// path (Apply) without the changelog append, ChangelogNanos in the changelog append,
	// TimerNanos in timer calls. OpNanos − the parts is the API and codecs.
	OpNanos, ReadNanos, WriteNanos, ChangelogNanos, TimerNanos int64
	// CPUNanos is the process's CPU time (user + system, getrusage) since Open minus the
	// CPUNanos of every background class: the task goroutine, its caller's own code, the Go
	// runtime (GC) and whatever else the process runs — exact for a process that runs one
	// Store's job, an upper bound otherwise. 0 where getrusage is not available.
	CPUNanos int64
	// AppliedBytes counts the logical bytes of the changes applied (every Apply: key, map
	// user key and value bytes, not counting records replayed at restore): the "bytes
	// changed" that bytes written to each tier and checkpoint storage are compared with.
	AppliedBytes int64
	// Applies counts the changes applied (Apply calls that succeeded).
	Applies int64
}

// SampleEvery is the sampling period of the task-side cost: one state operation in
// SampleEvery is timed (a power of two: the root tests a counter's low bits).
const SampleEvery = 64

// costState is the engine's half of the accounting.
type costState struct {
	meters [NumBackgroundClasses]scheduler.Meter
	// in and out are the bytes each class read and wrote; the owner adds at install, a task
	// (uploads, persists) when it ends.
	in, out [NumBackgroundClasses]atomic.Int64
	// on is set by the root for a sampled operation: the engine's entry points then time
	// themselves into read, write and log (off while one runs, so nested calls are not
	// counted twice).
	on               bool
	split            bool  // inside a sampled Apply: time the changelog append
	read, write, log int64 // ns, sampled operations only
	wait             int64 // ns of waits inside sampled writes (taken out of write)
	applied, applies int64
	cpu0             int64 // process CPU at Open
	clNew            atomic.Int64
}

// mono is the monotonic clock in nanoseconds since process start, for the sampled splits.
func mono() int64 { return int64(time.Since(monoBase)) }

var monoBase = time.Now()

// SampleOn and SampleOff bracket one sampled state operation (the root's meter; owner only):
// between them the engine times its point reads, its write path and the changelog append.
func (t *Engine) SampleOn() { t.cost.on = true }

// SampleOff ends a sampled operation; it returns the time (ns) the operation waited inside
// the engine (backpressure and write stalls), which the caller takes out of its own time.
func (t *Engine) SampleOff() (waited int64) {
	t.cost.on = false
	w := t.cost.wait
	t.cost.wait = 0
	return w
}

// waitNanos is the total time writers have waited (backpressure and the three write stalls).
func (t *Engine) waitNanos() int64 {
	return t.bpNanos + t.l0StallNanos + t.sealedStallNanos + t.runStallNanos
}

// meter returns the Meter of class c.
func (t *Engine) meter(c BackgroundClass) *scheduler.Meter { return &t.cost.meters[c] }

// costBytes adds bytes read and written by class c.
func (t *Engine) costBytes(c BackgroundClass, in, out int64) {
	if in != 0 {
		t.cost.in[c].Add(in)
	}
	if out != 0 {
		t.cost.out[c].Add(out)
	}
}

// costStats fills st.Background and the engine's part of st.Task (the root adds its own:
// Ops, SampledOps, OpNanos, TimerNanos, and scales).
func (t *Engine) costStats(st *Stats) {
	var bg int64
	for c := range st.Background {
		m := t.cost.meters[c].Load()
		st.Background[c] = ClassCost{Jobs: m.Jobs, CPUNanos: m.CPUNanos, RunNanos: m.RunNanos,
			BytesIn: t.cost.in[c].Load(), BytesOut: t.cost.out[c].Load()}
		bg += m.CPUNanos
	}
	st.Task.ReadNanos, st.Task.WriteNanos, st.Task.ChangelogNanos = t.cost.read, t.cost.write, t.cost.log
	st.Task.AppliedBytes, st.Task.Applies = t.cost.applied, t.cost.applies
	if p := processCPU(); p > 0 {
		st.Task.CPUNanos = max(p-t.cost.cpu0-bg, 0)
	}
}

// The sampled entry points: the engine's own entry point again with on cleared (nested calls
// are part of this one), timed. Out of line, so the common path pays one load and a branch.

func (t *Engine) sampledGet(h uint64, key []byte) ([]byte, status) {
	t.cost.on = false
	t0 := mono()
	v, st := t.Get(h, key)
	t.cost.read += mono() - t0
	t.cost.on = true
	return v, st
}

func (t *Engine) sampledListGet(h uint64, key []byte, dst [][]byte, ll *LowerList) ([][]byte, status, bool) {
	t.cost.on = false
	t0 := mono()
	dst, st, complete := t.ListGet(h, key, dst, ll)
	t.cost.read += mono() - t0
	t.cost.on = true
	return dst, st, complete
}

func (t *Engine) sampledMapGet(hm uint64, mapKey []byte, hu uint64, userKey []byte) ([]byte, status) {
	t.cost.on = false
	t0 := mono()
	v, st := t.MapGet(hm, mapKey, hu, userKey)
	t.cost.read += mono() - t0
	t.cost.on = true
	return v, st
}

func (t *Engine) sampledGetBatch(hs []uint64, keys [][]byte, vals [][]byte, sts []Status) int {
	t.cost.on = false
	t0 := mono()
	n := t.GetBatch(hs, keys, vals, sts)
	t.cost.read += mono() - t0
	t.cost.on = true
	return n
}

func (t *Engine) sampledMapGetBatch(hms []uint64, mks [][]byte, hus []uint64, uks [][]byte, vals [][]byte, sts []Status) int {
	t.cost.on = false
	t0 := mono()
	n := t.MapGetBatch(hms, mks, hus, uks, vals, sts)
	t.cost.read += mono() - t0
	t.cost.on = true
	return n
}

// sampledApply times Apply, with the changelog append split out (split) and the waits for
// memory and stalls taken out (wait, which SampleOff hands to the root).
func (t *Engine) sampledApply(op Op) error {
	t.cost.on, t.cost.split = false, true
	w0, t0 := t.waitNanos(), mono()
	log0 := t.cost.log
	err := t.Apply(op)
	d, w := mono()-t0, t.waitNanos()-w0
	t.cost.write += max(d-w-(t.cost.log-log0), 0)
	t.cost.wait += w
	t.cost.on, t.cost.split = true, false
	return err
}

// LSMMaxLevels is the LsmStore's number of levels (lsm.MaxLevels), for the root's Stats.
const LSMMaxLevels = lsm.MaxLevels
