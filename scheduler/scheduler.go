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

	// Reserved adds, per class, workers that run only tasks of that class (Reserved[Upload] =
	// 1: one more goroutine that takes uploads only), beside the Workers, which take every
	// class. A reserved worker keeps a lower class from waiting behind a busy higher one
	// (invariant 2): uploads, mostly I/O, need not queue behind CPU-bound compactions. Class
	// limits bind reserved workers too. Negative is invalid.
	Reserved [NumClasses]int
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
	for c, r := range o.Reserved {
		if r < 0 {
			return fmt.Errorf("%w: Reserved[%s] = %d, want >= 0", ErrInvalidOptions, Class(c), r)
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
	workers  int
	reserved [NumClasses]int
	limits   [NumClasses]int // 0 = no limit

	// base is the parent of every task context; Close cancels it.
	base       context.Context
	cancelBase context.CancelFunc

	wg     sync.WaitGroup // one count per live worker goroutine
	closed chan struct{}  // closed when Close has finished waiting

	mu      sync.Mutex
	cond    sync.Cond // signalled when a task may have become runnable, and on Close
	closing bool
	idle    int // workers waiting in cond.Wait
	// rcond[c] parks the idle reserved workers of class c (ridle[c] of them).
	rcond   [NumClasses]sync.Cond
	ridle   [NumClasses]int
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
		workers:  n,
		reserved: opts.Reserved,
		limits:   opts.ClassLimits,
		closed:   make(chan struct{}),
	}
	s.cond.L = &s.mu
	for c := range s.rcond {
		s.rcond[c].L = &s.mu
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	for range n {
		s.wg.Add(1)
		go s.worker(anyClass)
	}
	for c, r := range opts.Reserved {
		for range r {
			s.wg.Add(1)
			go s.worker(Class(c))
		}
	}
	return s, nil
}

// anyClass is the class argument of a worker that takes every class.
const anyClass = NumClasses

// Workers returns the number of worker goroutines that take every class (Options.Workers).
// The bound on tasks running at once is Workers plus the reserved workers (Reserved).
func (s *Scheduler) Workers() int { return s.workers }

// Reserved returns the number of reserved workers of class c (Options.Reserved[c]).
func (s *Scheduler) Reserved(c Class) int {
	if c >= NumClasses {
		return 0
	}
	return s.reserved[c]
}

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
	return s.SubmitMetered(c, name, nil, fn)
}

// SubmitMetered is Submit that also charges the task's cost — one job, the CPU time of its
// worker thread and its running time — to m (nil: none, as Submit) before the Handle
// completes. The class's ClassStats count the same cost whether m is nil or not. Errors and
// concurrency as Submit.
func (s *Scheduler) SubmitMetered(c Class, name string, m *Meter, fn func(ctx context.Context) error) (*Handle, error) {
	if c >= NumClasses {
		return nil, fmt.Errorf("%w: class %d >= NumClasses (task %q)", ErrInvalidTask, c, name)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil function (task %s/%q)", ErrInvalidTask, c, name)
	}
	h := &Handle{s: s, class: c, name: name, fn: fn, meter: m, done: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: submit %s/%q", ErrClosed, c, name)
	}
	s.queues[c].push(h)
	s.stats[c].Submitted++
	s.wakeLocked()
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
	for c := range s.rcond {
		s.rcond[c].Broadcast()
	}
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

// classRunnableLocked reports whether class c has a queued task and is below its limit.
func (s *Scheduler) classRunnableLocked(c int) bool {
	return s.queues[c].head != nil && (s.limits[c] == 0 || s.running[c] < s.limits[c])
}

// nextLocked unlinks and returns the first task of the highest-priority class that has a
// queued task and is below its limit — of class only, for a reserved worker — or nil.
func (s *Scheduler) nextLocked(only Class) *Handle {
	for c := range s.queues {
		if (only == anyClass || Class(c) == only) && s.classRunnableLocked(c) {
			q := &s.queues[c]
			h := q.head
			q.remove(h)
			return h
		}
	}
	return nil
}

// runnableLocked reports whether a worker that takes every class would find a task.
func (s *Scheduler) runnableLocked() bool {
	for c := range s.queues {
		if s.classRunnableLocked(c) {
			return true
		}
	}
	return false
}

// wakeLocked wakes one parked worker of each kind that has a runnable task (invariant 4): a
// reserved worker of each class with one, and a worker of every class. A worker woken for a
// task another took parks again; a wake-up is never owed to a worker that cannot take the
// task (a reserved worker is only woken for its own class).
func (s *Scheduler) wakeLocked() {
	for c := range s.rcond {
		if s.ridle[c] > 0 && s.classRunnableLocked(c) {
			s.rcond[c].Signal()
		}
	}
	if s.idle > 0 && s.runnableLocked() {
		s.cond.Signal()
	}
}

// take blocks until a task may run and marks it running, or returns nil once Close was called.
// only is the class of a reserved worker, or anyClass.
func (s *Scheduler) take(only Class) (*Handle, context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closing {
			return nil, nil
		}
		if h := s.nextLocked(only); h != nil {
			ctx, cancel := context.WithCancel(s.base)
			h.state = stateRunning
			h.cancel = cancel
			s.running[h.class]++
			// A woken worker may have lost the race for the task it was woken for; pass
			// the wake-up on so that no runnable task waits beside an idle worker.
			s.wakeLocked()
			return h, ctx
		}
		if only == anyClass {
			s.idle++
			s.cond.Wait()
			s.idle--
		} else {
			s.ridle[only]++
			s.rcond[only].Wait()
			s.ridle[only]--
		}
	}
}

// worker is the loop of a worker goroutine; only is its reserved class, or anyClass.
func (s *Scheduler) worker(only Class) {
	defer s.wg.Done()
	// Locked for its whole life (invariant 11), so that the thread's CPU clock read around a
	// task measures that task. Never unlocked: a worker whose task calls runtime.Goexit
	// takes its thread with it, and its replacement locks a new one.
	runtime.LockOSThread()
	for {
		h, ctx := s.take(only)
		if h == nil {
			return
		}
		s.execute(h, ctx, only)
	}
}

// execute runs one task on the calling worker and completes it.
func (s *Scheduler) execute(h *Handle, ctx context.Context, only Class) {
	start, cpu0 := time.Now(), threadCPU()
	returned := false
	defer func() {
		if returned {
			return
		}
		// fn called runtime.Goexit (a panic would have been recovered in call): this
		// goroutine is ending. Complete the task and start a replacement worker before
		// this one's wg.Done runs, so the count cannot reach zero in between.
		s.finish(h, ctx, fmt.Errorf("%w (task %s/%q)", ErrGoexit, h.class, h.name), time.Since(start), threadCPU()-cpu0)
		s.wg.Add(1)
		go s.worker(only)
	}()
	err := s.call(h, ctx)
	returned = true
	s.finish(h, ctx, err, time.Since(start), threadCPU()-cpu0)
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

// finish records the outcome of a task that ran — its running time d and the CPU time cpu
// of its worker thread — and wakes its waiters.
func (s *Scheduler) finish(h *Handle, ctx context.Context, err error, d time.Duration, cpu int64) {
	cancelled := ctx.Err() != nil && errors.Is(err, context.Canceled)
	h.cancel() // release the context's resources
	cpu = max(cpu, 0)
	if h.meter != nil {
		h.meter.add(cpu, int64(d)) // before done is closed: a Wait that returns sees it
	}
	s.mu.Lock()
	c := h.class
	s.running[c]--
	st := &s.stats[c]
	st.RunNanos += int64(d)
	st.CPUNanos += cpu
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
	if s.limits[c] != 0 {
		s.wakeLocked()
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
