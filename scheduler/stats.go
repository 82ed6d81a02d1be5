package scheduler

// ClassStats are the counters of one class. Counts are of tasks since New; each submitted
// task is counted in exactly one of Completed, Failed or Cancelled once it has completed, so
// Submitted == Completed + Failed + Cancelled + Queued + Running.
type ClassStats struct {
	// Submitted counts tasks accepted by Submit.
	Submitted uint64
	// Completed counts tasks whose function returned nil.
	Completed uint64
	// Failed counts tasks whose function returned an error (other than a cancellation, see
	// Cancelled), panicked, or called runtime.Goexit.
	Failed uint64
	// Cancelled counts tasks dropped before they ran (Handle.Cancel, Close) and tasks whose
	// context was cancelled and whose function returned an error wrapping context.Canceled.
	Cancelled uint64
	// Queued is the current queue depth: tasks submitted and not yet started or dropped.
	Queued int
	// Running is the number of this class's tasks running now.
	Running int
	// RunNanos is the total wall-clock time in nanoseconds that this class's tasks spent
	// running on workers (from start to return, queueing excluded).
	RunNanos int64
	// CPUNanos is the total CPU time (user + system, ns) of the worker threads while this
	// class's tasks ran (invariant 11); 0 where the OS does not provide a thread CPU clock.
	CPUNanos int64
}

// Stats is a snapshot of a Scheduler's counters, taken under its lock so the numbers are
// consistent with each other.
type Stats struct {
	// Workers is the number of worker goroutines that take every class; Reserved, per
	// class, those that take only that class (Options.Reserved).
	Workers  int
	Reserved [NumClasses]int
	// Busy is the number of workers running a task now (the sum of Classes[c].Running).
	Busy int
	// Classes holds the counters of each class, indexed by Class.
	Classes [NumClasses]ClassStats
}

// Stats returns a snapshot of the counters. Safe for concurrent use, also after Close.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Workers: s.workers, Reserved: s.reserved, Classes: s.stats}
	for c := range st.Classes {
		st.Classes[c].Queued = s.queues[c].n
		st.Classes[c].Running = s.running[c]
		st.Busy += s.running[c]
	}
	return st
}
