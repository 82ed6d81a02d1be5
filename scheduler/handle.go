package scheduler

import "context"

type taskState uint8

const (
	stateQueued taskState = iota
	stateRunning
	stateDone
)

// Handle is a submitted task. Its methods are safe for concurrent use.
type Handle struct {
	s     *Scheduler
	class Class
	name  string
	meter *Meter        // nil: the task's cost goes to its class only
	done  chan struct{} // closed once, after err is set

	// Guarded by s.mu.
	state      taskState
	prev, next *Handle // queue links while queued
	fn         func(ctx context.Context) error
	cancel     context.CancelFunc // while running
	err        error              // final once done is closed
}

// Class returns the task's class.
func (h *Handle) Class() Class { return h.class }

// Name returns the task's name, as passed to Submit.
func (h *Handle) Name() string { return h.name }

// Done returns a channel that is closed when the task has completed: it ran and returned (or
// panicked), or it was dropped by Cancel or Close before it ran.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait blocks until the task has completed and returns its error: the function's return
// value, a *PanicError if it panicked, or an error wrapping ErrCancelled if it was cancelled
// (by Cancel or Close) before it ran. A task should not Wait for a task queued behind it: with
// every worker waiting, nothing runs.
func (h *Handle) Wait() error {
	<-h.done
	return h.err
}

// Cancel cancels the task. A queued task is removed from its queue and completes at once
// with ErrCancelled, without running; a running task has its context cancelled and completes
// when its function returns; a completed task is unaffected. Cancel does not wait; use Wait.
// Idempotent.
func (h *Handle) Cancel() {
	s := h.s
	s.mu.Lock()
	var cancel context.CancelFunc
	switch h.state {
	case stateQueued:
		s.queues[h.class].remove(h)
		s.dropLocked(h)
	case stateRunning:
		cancel = h.cancel
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
