package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/memory"
)

// statsLine formats the store's own accounting: records and bytes in the FreshTable's
// mmap'd segments and hash indices (outside the Go heap).
func statsLine(st strata.Stats) string {
	const mib = 1 << 20
	return fmt.Sprintf("%d records in %d segments: %d bytes used (%.1f MiB) of %d mapped (%.0f MiB), index %d bytes (%.1f MiB), budget used %.0f of %.0f MiB; "+
		"slices %.1f MiB; LsmStore %d files, %.0f MiB (%d flushes, %d evictions, %d compactions, write amplification %.2f); %d writes waited for memory, %d for L0",
		st.Fresh.Records, st.Fresh.Segments, st.Fresh.DataBytes, float64(st.Fresh.DataBytes)/mib, st.Fresh.SegmentBytes, float64(st.Fresh.SegmentBytes)/mib,
		st.Fresh.IndexBytes, float64(st.Fresh.IndexBytes)/mib, float64(st.Budget.Used)/mib, float64(st.Budget.Limit)/mib,
		float64(st.Slices.Bytes)/mib, st.LSM.Files, float64(st.LSM.Bytes)/mib, st.LSM.Flushes, st.Slices.Evictions, st.LSM.Compactions,
		st.LSM.WriteAmplification, st.Stalls.BackpressureWaits, st.Stalls.L0)
}

// budgetLine formats where the memory budget goes (Stats.Budget.ByPurpose): the parts the
// state needs (FreshTable data and index, slices, timers, operator state) and the parts that
// are fixed costs of the engine (free FreshTable segments, the block cache, the changelog's
// buffer, other mappings such as the transforms' sort buffers), in MiB; then the budget's
// fixed costs as Stats.Budget.Fixed counts them (segments, caches, reserve, eviction room)
// beside issue 22's target, an eighth of the budget.
func budgetLine(b strata.BudgetStats) string {
	const mib = 1 << 20
	var out string
	for p := memory.Purpose(0); p < memory.NumPurposes; p++ {
		out += fmt.Sprintf("%s %.1f, ", p, float64(b.ByPurpose[p])/mib)
	}
	return fmt.Sprintf("%.1f of %.0f MiB used: %sfree segments %.1f; reserve for background work %.1f; room kept for the next segment %.1f; fixed costs %.1f MiB of %.0f (target ≤ %.0f)",
		float64(b.Used)/mib, float64(b.Limit)/mib, out, float64(b.Pooled)/mib, float64(b.Reserve)/mib,
		float64(b.EvictionRoom)/mib, float64(b.Fixed)/mib, float64(b.Limit)/mib, float64(b.Limit)/8/mib)
}

// processCPU returns the process's CPU time (user + system), 0 where getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// costFigures are the job-level figures of issue 22 for one run, computed from the last
// Store's Stats (events since its Open) and the Go model's timing.
type costFigures struct {
	events                      int
	eventsPerSec, modelPerSec   float64
	taskUs, bgUs, modelUs       float64 // CPU µs per event
	bgPerTask, changelogPerTask float64 // background CPU ÷ task CPU; changelog append ÷ task CPU
	ckptPerChanged              float64 // Σ new checkpoint bytes ÷ Σ bytes changed (checkpoints 2..n)
	evictions                   int64
}

// costTable prints the cost accounting beside events/s: CPU µs per event for the task's
// parts and each background class, background ÷ task, bytes per event to each tier, the
// changelog and checkpoint storage, and bytes per checkpoint ÷ bytes changed. It returns
// the figures for the machine-readable "job:" line.
func costTable(out io.Writer, st strata.Stats, events int, elapsed time.Duration, modelEvents int,
	modelTime, modelCPU time.Duration, taken []ckRecord) costFigures {
	ev := float64(events)
	us := func(ns int64) float64 { return float64(ns) / 1e3 / ev }
	t, b := st.Task, st.Background
	bg := b.CPUNanos()
	f := costFigures{events: events, eventsPerSec: ev / elapsed.Seconds(),
		modelPerSec: float64(modelEvents) / modelTime.Seconds(),
		taskUs:      us(t.CPUNanos), bgUs: us(bg), modelUs: float64(modelCPU.Nanoseconds()) / 1e3 / float64(modelEvents),
		evictions: st.Slices.Evictions}
	// The task's parts are sampled wall time: on a busy machine, where the task thread waits
	// for a core inside its calls, they add up to more than its CPU. They are then scaled
	// down to it (shares of the sampled time), and the rest — operator code and GC — is
	// unknown (shown as 0).
	scale := 1.0
	if t.OpNanos > t.CPUNanos && t.OpNanos > 0 {
		scale = float64(t.CPUNanos) / float64(t.OpNanos)
	}
	part := func(ns int64) float64 { return us(ns) * scale }
	if t.CPUNanos > 0 {
		f.bgPerTask = float64(bg) / float64(t.CPUNanos)
		f.changelogPerTask = float64(t.ChangelogNanos) * scale / float64(t.CPUNanos)
	}
	var ckNew, ckChanged int64
	for i, r := range taken {
		if i > 0 && !r.Child && r.Changed > 0 { // the first is a full checkpoint
			ckNew += r.New
			ckChanged += r.Changed
		}
	}
	if ckChanged > 0 {
		f.ckptPerChanged = float64(ckNew) / float64(ckChanged)
	}
	fmt.Fprintf(out, "cost (Stats' accounting, CPU µs per event over the %d events this process replayed — after a kill or rescale the Stats are the last Store's only; task parts sampled 1 call in 64):\n", events)
	fmt.Fprintf(out, "  task        %6.2f  = API+codecs %.2f, engine read %.2f, engine write %.2f, changelog append %.2f, timers %.2f, operator code+GC %.2f\n",
		f.taskUs, part(t.APINanos), part(t.ReadNanos), part(t.WriteNanos), part(t.ChangelogNanos), part(t.TimerNanos), us(max(t.CPUNanos-t.OpNanos, 0)))
	if scale < 1 {
		fmt.Fprintf(out, "              (the API calls' sampled wall time, %.2f µs per event, exceeds the task's CPU: the thread waited for a core; parts scaled by %.2f)\n",
			us(t.OpNanos), scale)
	}
	fmt.Fprintf(out, "  waits       %d writes waited %.0f ms (memory %d, of which the changelog's buffer %d for %.0f ms; L0 %d, transforms %d, compactions %d)\n",
		t.Waits, float64(t.WaitNanos)/1e6, st.Stalls.BackpressureWaits, st.Stalls.ChangelogWaits, float64(st.Stalls.ChangelogWaitNanos)/1e6,
		st.Stalls.L0, st.Stalls.Transform, st.Stalls.Compaction)
	fmt.Fprintf(out, "  background  %6.2f  = %.2f× the task's\n", f.bgUs, f.bgPerTask)
	for _, c := range []struct {
		name string
		c    strata.ClassCost
	}{{"transform", b.Transform}, {"compaction", b.Compaction}, {"eviction", b.Eviction}, {"LSM compaction", b.LSMCompaction},
		{"TTL sweep", b.TTLSweep}, {"materialization", b.Materialization}, {"checkpoint", b.Checkpoint}, {"changelog persist", b.ChangelogPersist}} {
		if c.c.Jobs == 0 {
			continue
		}
		fmt.Fprintf(out, "    %-17s %6.2f  (%d jobs, %.0f MiB in, %.0f MiB out, %.1f s running)\n", c.name, us(c.c.CPUNanos), c.c.Jobs,
			float64(c.c.BytesIn)/(1<<20), float64(c.c.BytesOut)/(1<<20), float64(c.c.RunNanos)/1e9)
	}
	fmt.Fprintf(out, "  total       %6.2f  = %.2f× the Go model's %.2f (process CPU of its run); changelog append %.1f%% of the task's CPU\n",
		f.taskUs+f.bgUs, (f.taskUs+f.bgUs)/f.modelUs, f.modelUs, 100*f.changelogPerTask)
	w := st.Written
	per := func(n int64) float64 { return float64(n) / ev }
	amp := func(n int64) float64 {
		if w.Changed == 0 {
			return 0
		}
		return float64(n) / float64(w.Changed)
	}
	fmt.Fprintf(out, "  bytes/event changed %.0f (logical: keys + values of the changes applied); slices %.0f (%.2f×), LSM %.0f (%.2f×), changelog %.0f (%.2f×), checkpoint storage %.0f (%.2f×)\n",
		per(w.Changed), per(w.Slices), amp(w.Slices), per(w.LSM), amp(w.LSM), per(w.Changelog), amp(w.Changelog),
		per(w.CheckpointStorage), amp(w.CheckpointStorage))
	fmt.Fprintf(out, "  bytes per checkpoint ÷ bytes changed since the previous one: %.2f (objects new in the manifest ÷ logical bytes applied between the cuts, checkpoints 2..n)\n",
		f.ckptPerChanged)
	return f
}

// jobLine is the machine-readable line the bench suite's BenchmarkJob parses (key=value).
func jobLine(out io.Writer, f costFigures) {
	fmt.Fprintf(out, "job: events=%d events/s=%.0f model-events/s=%.0f task-us/event=%.4f bg-us/event=%.4f model-us/event=%.4f bg/task=%.4f changelog/task=%.4f ckpt/changed=%.4f evictions=%d\n",
		f.events, f.eventsPerSec, f.modelPerSec, f.taskUs, f.bgUs, f.modelUs, f.bgPerTask, f.changelogPerTask, f.ckptPerChanged, f.evictions)
}
