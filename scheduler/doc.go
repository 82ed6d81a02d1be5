// Package scheduler runs Strata's background work — FreshTable transforms, slice and LSM
// compactions, evictions, changelog and checkpoint uploads — on a bounded set of worker
// goroutines, by priority class, with cancellation and pprof labels, and keeps the coarse
// millisecond clock of state TTL (AcquireClock). It is the only Strata
// package that starts goroutines, and Close waits for every one of them. It imports only the
// standard library and golang.org/x/sys/unix (the thread CPU clock, invariant 11).
//
// # Terms
//
//   - Task: a function func(ctx context.Context) error submitted with a Class and a name.
//   - Class: the task's priority class. Transform (0) is the highest priority, then
//     Compaction (1), Eviction (2), Persist (3), Upload (4). Transform comes first because
//     writers wait on it when the memory budget is full; uploads come last because they only
//     move finished bytes to checkpoint storage. Persist (the changelog's) is apart from
//     Upload so that a reserved worker runs it beside a long upload: writers wait on it when
//     the changelog buffer is full.
//   - Worker: one of Options.Workers goroutines started by New. Workers take tasks; no
//     goroutine is started per task.
//   - Reserved worker: one of Options.Reserved[c] goroutines started by New that take tasks
//     of class c only (an Upload lane beside the shared workers, so that checkpoint uploads
//     do not queue behind compactions; a Persist lane, so that changelog persists do not
//     queue behind uploads).
//   - Handle: the caller's view of one task: Wait, Done, Cancel.
//   - Class limit: Options.ClassLimits[c], an optional bound on tasks of class c running at
//     once.
//
// # Task life cycle
//
//	  Submit
//	    │  (ErrClosed after Close: no Handle)
//	    ▼
//	┌────────┐  Handle.Cancel / Close       ┌──────────────────────────┐
//	│ queued │ ───────────────────────────► │ done, err = ErrCancelled │
//	└────────┘                              └──────────────────────────┘
//	    │ a worker takes it (invariant 2)
//	    ▼
//	┌─────────┐  Handle.Cancel / Close cancel its ctx; fn decides when to return
//	│ running │
//	└─────────┘
//	    │ fn returns err / panics / calls runtime.Goexit
//	    ▼
//	┌──────────────────────────────────────────────────────┐
//	│ done, err = fn's error | *PanicError | ErrGoexit     │
//	└──────────────────────────────────────────────────────┘
//
// Per class the scheduler keeps an intrusive FIFO queue of Handles (so Cancel unlinks a
// queued task in O(1)), a running count and the counters reported by Stats. One mutex guards
// all of it and a condition variable parks idle workers; the mutex is taken a few times per
// task, never per state operation, so it is not on any get/put path.
//
// # Invariants
//
//  1. Goroutines. The only goroutines the package starts are the Options.Workers workers and
//     the Options.Reserved workers started by New, and a replacement of the same kind for a
//     worker whose task called runtime.Goexit
//     (started before the old one is counted out, so there are always exactly Workers until
//     Close). Context cancellation starts none: every task context is a child of one base
//     context made with context.WithCancel. Beside the workers, the process-wide coarse
//     clock (AcquireClock, clock.go) runs one ticker goroutine while it is held, and its
//     last release waits for it to return.
//  2. Priority. A worker that takes a task takes the oldest queued task of the
//     lowest-numbered Class whose queue is non-empty and whose running count is below its
//     class limit; a reserved worker of class c takes the oldest queued task of c, under the
//     same limit, and nothing else. So, with one worker and none reserved, ready tasks run
//     in class order Transform, Compaction, Eviction, Persist, Upload, and in submission order within a class. Priority is strict and not
//     preemptive: a running task is never interrupted for a more urgent one, and a class can
//     wait indefinitely while higher classes keep every worker busy — a class limit on the
//     higher class, or a reserved worker for the lower, is the remedy.
//  3. Bounds. At every instant at most Workers + ΣReserved tasks run, at most Workers +
//     Reserved[c] of class c, and at most ClassLimits[c] of class c (when that limit is
//     non-zero).
//  4. No idle worker beside a runnable task. A task becomes runnable only when it is submitted
//     or when a task of its (limited) class finishes. Submit wakes a parked worker of each kind
//     that could take a runnable task (a shared one; a reserved one of a class with a
//     runnable task — never a reserved worker for another class's task, which would lose
//     the wake-up); a finishing worker loops and takes the highest-priority runnable task itself, and wakes a parked
//     worker if its limited class still has queued tasks; a worker that takes a task wakes
//     another if runnable tasks remain, so a wake-up consumed by a worker that lost the race
//     for its task is passed on rather than lost.
//  5. Completion. Every Handle returned by Submit completes exactly once: its error is set,
//     then Done is closed, under the mutex; Wait returns that error. A task that never ran
//     completes with an error wrapping ErrCancelled (which wraps context.Canceled).
//  6. Cancellation. A running task's context is cancelled by Handle.Cancel and by Close. The
//     scheduler never abandons a running task: it completes when its function returns.
//  7. Close. After the first Close, Submit returns ErrClosed and nothing new is queued. Close
//     drops the queued tasks (invariant 5), cancels the running ones (invariant 6) and returns
//     only after every worker has returned from its loop — no task code runs and no goroutine
//     of this package does any work after Close returns. Every later or concurrent Close
//     returns only after the same point. (A worker may still be in the Go runtime's goroutine
//     exit for a moment; it runs no code of ours.)
//  8. Labels. While a task's function runs, its context and its worker goroutine carry the
//     pprof labels strata.task=<Class.String()> and strata.name=<name> (runtime/pprof.Do), so
//     CPU and goroutine profiles attribute background time per class and per task. The worker
//     drops the labels again when the function returns.
//  9. Panics. A panic in a task's function is recovered on the worker and becomes the task's
//     error, a *PanicError carrying the value and the stack (errors.Is(err, ErrPanic)). The
//     worker carries on with the next task; the process does not crash. Background work of a
//     stream processor must fail the task (and so the checkpoint or the store operation
//     waiting on it), not the job's process. A task that calls runtime.Goexit completes with
//     ErrGoexit.
//  10. Accounting. For each class, Submitted == Completed + Failed + Cancelled + Queued +
//     Running whenever the mutex is not held, and Stats reads all counters under it.
//  11. CPU cost. Every worker goroutine is locked to its OS thread for its whole life
//     (runtime.LockOSThread, never unlocked), so the thread's CPU clock
//     (CLOCK_THREAD_CPUTIME_ID, linux) read before and after a task is the CPU that task
//     used on it, whatever the Go scheduler does with other goroutines. The difference is
//     added to the class's ClassStats.CPUNanos and, for a task submitted with a Meter
//     (SubmitMetered), to the Meter — before the Handle completes. Two clock reads per task,
//     none per state operation: background tasks are coarse (a segment transform, a
//     compaction, an upload), so the accounting is always on. Elsewhere the clock reads 0.
//
// # Concurrency rules
//
// Submit, Handle.Cancel, Handle.Wait, Handle.Done, Stats and Close are safe for concurrent
// use from any goroutine, including from inside a task — except Close, which must not be
// called from a task (it would wait for itself), and Wait on a task that cannot start until
// the waiting task finishes (with every worker waiting, nothing runs).
package scheduler
