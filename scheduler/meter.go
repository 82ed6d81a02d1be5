package scheduler

import "sync/atomic"

// Meter accumulates the cost of the tasks submitted with it (SubmitMetered): how many ran,
// the CPU time of the worker thread while they ran, and their running (wall-clock) time. A
// caller keeps one Meter per kind of work finer than a Class (the engine: transform, slice
// compaction, eviction, LSM compaction, TTL sweep, materialization, checkpoint upload,
// changelog persist), so that Stats can say where background CPU went without a profile.
//
// The zero value is ready to use. The worker adds to it once per task, after the task's
// function returned and before the Handle completes, so a Wait that returned sees the task's
// cost in Load. Safe for concurrent use.
type Meter struct {
	jobs, cpu, run atomic.Int64
}

// MeterStats is a snapshot of a Meter.
type MeterStats struct {
	// Jobs counts the tasks that ran (completed, failed or cancelled while running; not
	// those dropped before they ran).
	Jobs int64
	// CPUNanos is the CPU time (user + system, ns) of the worker's OS thread while the tasks
	// ran — CLOCK_THREAD_CPUTIME_ID read before and after each task on a worker locked to its
	// thread (doc.go, invariant 11); 0 where the OS does not provide it (not linux).
	CPUNanos int64
	// RunNanos is the wall-clock time (ns) the tasks ran, queueing excluded; RunNanos −
	// CPUNanos is the time they waited (I/O, locks, preemption by other threads).
	RunNanos int64
}

// Load returns the Meter's counters. Safe for concurrent use.
func (m *Meter) Load() MeterStats {
	return MeterStats{Jobs: m.jobs.Load(), CPUNanos: m.cpu.Load(), RunNanos: m.run.Load()}
}

// add charges one task.
func (m *Meter) add(cpu, run int64) {
	m.jobs.Add(1)
	m.cpu.Add(cpu)
	m.run.Add(run)
}
