package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"time"
)

// Options configure a Scheduler. The zero value is valid and gives the defaults.
type Options struct {
	// Workers is the number of worker goroutines, the bound on tasks running at once.
	// 0 means the default, max(GOMAXPROCS/2, 1) read at New; negative is invalid.
	Workers int

	// ClassLimits bounds the tasks of each class running at once, indexed by Class
	// (ClassLimits[Upload] = 1 runs uploads one at a time). 0 means no limit beyond
	// Workers; negative is invalid. A limit also keeps a busy high-priority class from
	// taking every worker: with Workers = 4 and ClassLimits[Transform] = 3 one worker is
	// always left for the lower classes.
	ClassLimits [NumClasses]int
}

// Validate returns nil or an error wrapping ErrInvalidOptions that names the bad field.
func (o Options) Validate() error {
	if o.Workers < 0 {
		return fmt.Errorf("%w: Workers = %d, want >= 0 (0 = default)", ErrInvalidOptions, o.Workers)
	}
	for c, l := range o.ClassLimits {
		if l < 0 {
			return fmt.Errorf("%w: ClassLimits[%s] = %d, want >= 0 (0 = no limit)",
				ErrInvalidOptions, Class(c), l)
		}
	}
	return nil
}

// DefaultWorkers returns the worker count used when Options.Workers is 0:
// max(runtime.GOMAXPROCS(0)/2, 1), leaving half the processors to the task threads that own
// the stores.
func DefaultWorkers() int {
	return max(runtime.GOMAXPROCS(0)/2, 1)
}

// Scheduler runs background tasks on a fixed set of worker goroutines, by priority class.
// All methods are safe for concurrent use. Close must not be called from inside a task (it
// would wait for itself).
type Scheduler struct {
	workers int
	limits  [NumClasses]int // 0 = no limit

	// base is the parent of every task context; Close cancels it.
	base       context.Context
	cancelBase context.CancelFunc

	wg     sync.WaitGroup // one count per live worker goroutine
	closed chan struct{}  // closed when Close has finished waiting

	mu      sync.Mutex
	cond    sync.Cond // signalled when a task may have become runnable, and on Close
	closing bool
	idle    int // workers waiting in cond.Wait
	queues  [NumClasses]queue
	running [NumClasses]int
	stats   [NumClasses]ClassStats
}

// queue is an intrusive FIFO of queued Handles, so Cancel unlinks in O(1).
type queue struct {
	head, tail *Handle
	n          int
}

func (q *queue) push(h *Handle) {
	h.prev, h.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = h
	} else {
		q.head = h
	}
	q.tail = h
	q.n++
}

func (q *queue) remove(h *Handle) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		q.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		q.tail = h.prev
	}
	h.prev, h.next = nil, nil
	q.n--
}

// New validates opts and starts the worker goroutines. The caller must Close the Scheduler
// to stop them. Errors wrap ErrInvalidOptions.
func New(opts Options) (*Scheduler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	n := opts.Workers
	if n == 0 {
		n = DefaultWorkers()
	}
	s := &Scheduler{
		workers: n,
		limits:  opts.ClassLimits,
		closed:  make(chan struct{}),
	}
	s.cond.L = &s.mu
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.wg.Add(n)
	for range n {
		go s.worker()
	}
	return s, nil
}

// Workers returns the number of worker goroutines (the bound on tasks running at once).
func (s *Scheduler) Workers() int { return s.workers }

// Submit queues fn to run on a worker as a task of class c named name, and returns its
// Handle. It never blocks on the task and never runs fn on the caller's goroutine.
//
// fn receives a context that is cancelled by Handle.Cancel and by Close, and that carries the
// pprof labels strata.task=<class> and strata.name=<name> (the worker goroutine carries them
// too while fn runs). fn should return promptly once the context is done; its return value
// becomes the task's error. A panic in fn is recovered into a *PanicError.
//
// Errors: ErrClosed after Close has been called; ErrInvalidTask (wrapped) for an invalid class
// or a nil fn. Safe for concurrent use, including from inside a running task.
func (s *Scheduler) Submit(c Class, name string, fn func(ctx context.Context) error) (*Handle, error) {
	if c >= NumClasses {
		return nil, fmt.Errorf("%w: class %d >= NumClasses (task %q)", ErrInvalidTask, c, name)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil function (task %s/%q)", ErrInvalidTask, c, name)
	}
	h := &Handle{s: s, class: c, name: name, fn: fn, done: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: submit %s/%q", ErrClosed, c, name)
	}
	s.queues[c].push(h)
	s.stats[c].Submitted++
	if s.idle > 0 {
		s.cond.Signal()
	}
	s.mu.Unlock()
	return h, nil
}

// Close stops accepting tasks (Submit returns ErrClosed), completes every queued task with
// ErrCancelled without running it, cancels the contexts of the running tasks, and waits until
// every running task has returned and every worker goroutine has exited. It then returns nil.
//
// Close is idempotent and safe for concurrent use: every call returns only after the
// shutdown is complete. It must not be called from inside a task (it would wait for itself).
// How long it waits depends on how promptly running tasks honour their context.
func (s *Scheduler) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.closed
		return nil
	}
	s.closing = true
	for c := range s.queues {
		q := &s.queues[c]
		for q.head != nil {
			h := q.head
			q.remove(h)
			s.dropLocked(h)
		}
	}
	s.cancelBase() // cancels every running task's context (they are children of base)
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
	close(s.closed)
	return nil
}

// dropLocked completes a queued task (already unlinked) with ErrCancelled.
func (s *Scheduler) dropLocked(h *Handle) {
	h.state = stateDone
	h.fn = nil
	s.stats[h.class].Cancelled++
	h.err = fmt.Errorf("%w (task %s/%q)", ErrCancelled, h.class, h.name)
	close(h.done)
}

// nextLocked unlinks and returns the first task of the highest-priority class that has a
// queued task and is below its limit, or nil.
func (s *Scheduler) nextLocked() *Handle {
	for c := range s.queues {
		q := &s.queues[c]
		if q.head != nil && (s.limits[c] == 0 || s.running[c] < s.limits[c]) {
			h := q.head
			q.remove(h)
			return h
		}
	}
	return nil
}

// runnableLocked reports whether nextLocked would return a task.
func (s *Scheduler) runnableLocked() bool {
	for c := range s.queues {
		if s.queues[c].head != nil && (s.limits[c] == 0 || s.running[c] < s.limits[c]) {
			return true
		}
	}
	return false
}

// take blocks until a task may run and marks it running, or returns nil once Close was called.
func (s *Scheduler) take() (*Handle, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closing {
			return nil, nil
		}
		if h := s.nextLocked(); h != nil {
			ctx, cancel := context.WithCancel(s.base)
			h.state = stateRunning
			h.cancel = cancel
			s.running[h.class]++
			// A woken worker may have lost the race for the task it was woken for; pass
			// the wake-up on so that no runnable task waits beside an idle worker.
			if s.idle > 0 && s.runnableLocked() {
				s.cond.Signal()
			}
			return h, ctx
		}
		s.idle++
		s.cond.Wait()
		s.idle--
	}
}

func (s *Scheduler) worker() {
	defer s.wg.Done()
	for {
		h, ctx := s.take()
		if h == nil {
			return
		}
		s.execute(h, ctx)
	}
}

// execute runs one task on the calling worker and completes it.
func (s *Scheduler) execute(h *Handle, ctx context.Context) {
	start := time.Now()
	returned := false
	defer func() {
		if returned {
			return
		}
		// fn called runtime.Goexit (a panic would have been recovered in call): this
		// goroutine is ending. Complete the task and start a replacement worker before
		// this one's wg.Done runs, so the count cannot reach zero in between.
		s.finish(h, ctx, fmt.Errorf("%w (task %s/%q)", ErrGoexit, h.class, h.name), time.Since(start))
		s.wg.Add(1)
		go s.worker()
	}()
	err := s.call(h, ctx)
	returned = true
	s.finish(h, ctx, err, time.Since(start))
}

// call runs fn under the task's pprof labels and turns a panic into a *PanicError.
func (s *Scheduler) call(h *Handle, ctx context.Context) (err error) {
	pprof.Do(ctx, pprof.Labels(LabelTask, h.class.String(), LabelName, h.name), func(ctx context.Context) {
		defer func() {
			if r := recover(); r != nil {
				err = &PanicError{Class: h.class, Name: h.name, Value: r, Stack: debug.Stack()}
			}
		}()
		err = h.fn(ctx)
	})
	return err
}

// finish records the outcome of a task that ran and wakes its waiters.
func (s *Scheduler) finish(h *Handle, ctx context.Context, err error, d time.Duration) {
	cancelled := ctx.Err() != nil && errors.Is(err, context.Canceled)
	h.cancel() // release the context's resources
	s.mu.Lock()
	c := h.class
	s.running[c]--
	st := &s.stats[c]
	st.RunNanos += int64(d)
	switch {
	case err == nil:
		st.Completed++
	case cancelled:
		st.Cancelled++
	default:
		st.Failed++
	}
	h.state = stateDone
	h.fn = nil
	h.cancel = nil
	h.err = err
	close(h.done)
	// A limited class may have become runnable while this worker goes on to a
	// higher-priority task; make sure an idle worker looks.
	if s.limits[c] != 0 && s.idle > 0 && s.queues[c].head != nil {
		s.cond.Signal()
	}
	s.mu.Unlock()
}

// Pprof label keys set on every task's context and worker goroutine while the task runs.
const (
	// LabelTask is the label key whose value is the task's Class name: "transform",
	// "compaction", "eviction" or "upload".
	LabelTask = "strata.task"
	// LabelName is the label key whose value is the task name passed to Submit.
	LabelName = "strata.name"
)
