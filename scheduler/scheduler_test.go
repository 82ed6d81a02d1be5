package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/scheduler"
)

// newScheduler returns a Scheduler closed when the test ends.
func newScheduler(t testing.TB, opts scheduler.Options) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustSubmit(t testing.TB, s *scheduler.Scheduler, c scheduler.Class, name string, fn func(context.Context) error) *scheduler.Handle {
	t.Helper()
	h, err := s.Submit(c, name, fn)
	if err != nil {
		t.Fatalf("Submit(%s, %q): %v", c, name, err)
	}
	return h
}

// blocker submits a task that signals when it runs and then blocks until release is closed
// (or its context is cancelled).
func blocker(t testing.TB, s *scheduler.Scheduler, c scheduler.Class, release <-chan struct{}) *scheduler.Handle {
	t.Helper()
	started := make(chan struct{})
	h := mustSubmit(t, s, c, "blocker", func(ctx context.Context) error {
		close(started)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("blocker did not start")
	}
	return h
}

func waitErr(t testing.TB, h *scheduler.Handle) error {
	t.Helper()
	select {
	case <-h.Done():
		return h.Wait()
	case <-time.After(5 * time.Second):
		t.Fatalf("task %s/%q did not complete", h.Class(), h.Name())
		return nil
	}
}

func TestClassString(t *testing.T) {
	for _, tc := range []struct {
		c    scheduler.Class
		want string
	}{
		{scheduler.Transform, "transform"},
		{scheduler.Compaction, "compaction"},
		{scheduler.Eviction, "eviction"},
		{scheduler.Persist, "persist"},
		{scheduler.Upload, "upload"},
		{scheduler.NumClasses, "class(5)"},
		{255, "class(255)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("Class(%d).String() = %q, want %q", uint8(tc.c), got, tc.want)
		}
	}
	// Priority is the numeric order; these values are relied on by Stats indexing.
	if !(scheduler.Transform < scheduler.Compaction && scheduler.Compaction < scheduler.Eviction &&
		scheduler.Eviction < scheduler.Persist && scheduler.Persist < scheduler.Upload &&
		scheduler.Upload < scheduler.NumClasses) {
		t.Fatal("class values are not in priority order")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  scheduler.Options
		field string // "" = valid
	}{
		{"zero", scheduler.Options{}, ""},
		{"workers", scheduler.Options{Workers: 3}, ""},
		{"limits", scheduler.Options{Workers: 2, ClassLimits: [scheduler.NumClasses]int{1, 0, 0, 5}}, ""},
		{"negative workers", scheduler.Options{Workers: -1}, "Workers"},
		{"negative limit", scheduler.Options{ClassLimits: [scheduler.NumClasses]int{0, 0, -2, 0}}, "ClassLimits[eviction]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			s, newErr := scheduler.New(tc.opts)
			if s != nil {
				s.Close()
			}
			if tc.field == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate = %v, New = %v; want nil", err, newErr)
				}
				return
			}
			for _, e := range []error{err, newErr} {
				if !errors.Is(e, scheduler.ErrInvalidOptions) || !strings.Contains(e.Error(), tc.field) {
					t.Fatalf("error %v: want ErrInvalidOptions naming %s", e, tc.field)
				}
			}
		})
	}
}

func TestDefaultWorkers(t *testing.T) {
	s := newScheduler(t, scheduler.Options{})
	want := max(runtime.GOMAXPROCS(0)/2, 1)
	if s.Workers() != want || scheduler.DefaultWorkers() != want || s.Stats().Workers != want {
		t.Fatalf("workers = %d / %d / %d, want %d", s.Workers(), scheduler.DefaultWorkers(), s.Stats().Workers, want)
	}
}

func TestSubmitInvalid(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 1})
	if _, err := s.Submit(scheduler.NumClasses, "x", func(context.Context) error { return nil }); !errors.Is(err, scheduler.ErrInvalidTask) {
		t.Fatalf("invalid class: %v, want ErrInvalidTask", err)
	}
	if _, err := s.Submit(scheduler.Upload, "x", nil); !errors.Is(err, scheduler.ErrInvalidTask) {
		t.Fatalf("nil fn: %v, want ErrInvalidTask", err)
	}
	if st := s.Stats(); st.Classes[scheduler.Upload].Submitted != 0 {
		t.Fatalf("rejected task counted: %+v", st)
	}
}

// With one worker held by a blocker, tasks of mixed classes queue up; once released they must
// run strictly by class, FIFO within a class.
func TestPriorityOrder(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 1})
	release := make(chan struct{})
	b := blocker(t, s, scheduler.Upload, release)

	var mu sync.Mutex
	var order []string
	submitted := []struct {
		c    scheduler.Class
		name string
	}{
		{scheduler.Upload, "u1"}, {scheduler.Eviction, "e1"}, {scheduler.Compaction, "c1"},
		{scheduler.Upload, "u2"}, {scheduler.Transform, "t1"}, {scheduler.Eviction, "e2"},
		{scheduler.Compaction, "c2"}, {scheduler.Transform, "t2"}, {scheduler.Upload, "u3"},
		{scheduler.Transform, "t3"}, {scheduler.Persist, "p1"}, {scheduler.Eviction, "e3"},
	}
	var hs []*scheduler.Handle
	for _, sub := range submitted {
		hs = append(hs, mustSubmit(t, s, sub.c, sub.name, func(context.Context) error {
			mu.Lock()
			order = append(order, sub.name)
			mu.Unlock()
			return nil
		}))
	}
	st := s.Stats()
	if got := st.Classes[scheduler.Transform].Queued + st.Classes[scheduler.Compaction].Queued +
		st.Classes[scheduler.Eviction].Queued + st.Classes[scheduler.Persist].Queued +
		st.Classes[scheduler.Upload].Queued; got != len(submitted) {
		t.Fatalf("queued = %d, want %d (%+v)", got, len(submitted), st)
	}
	if st.Busy != 1 || st.Classes[scheduler.Upload].Running != 1 {
		t.Fatalf("busy = %d, upload running = %d; want 1, 1", st.Busy, st.Classes[scheduler.Upload].Running)
	}
	close(release)
	if err := waitErr(t, b); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if err := waitErr(t, h); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"t1", "t2", "t3", "c1", "c2", "e1", "e2", "e3", "p1", "u1", "u2", "u3"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("run order %v, want %v", order, want)
	}
}

// A class at its limit is skipped: lower classes run on the free workers meanwhile, and the
// limited class never runs more than its limit at once.
func TestClassLimit(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 3, ClassLimits: [scheduler.NumClasses]int{scheduler.Transform: 1}})
	release := make(chan struct{})
	b := blocker(t, s, scheduler.Transform, release)
	var transformsRan atomic.Int32
	t2 := mustSubmit(t, s, scheduler.Transform, "t2", func(context.Context) error {
		transformsRan.Add(1)
		return nil
	})
	u := mustSubmit(t, s, scheduler.Upload, "u", func(context.Context) error { return nil })
	if err := waitErr(t, u); err != nil {
		t.Fatal(err)
	}
	if transformsRan.Load() != 0 {
		t.Fatal("second transform ran beside the first despite ClassLimits[Transform] = 1")
	}
	if st := s.Stats(); st.Classes[scheduler.Transform].Queued != 1 || st.Busy != 1 {
		t.Fatalf("stats %+v: want 1 transform queued and 1 busy worker", st)
	}
	close(release)
	for _, h := range []*scheduler.Handle{b, t2} {
		if err := waitErr(t, h); err != nil {
			t.Fatal(err)
		}
	}

	// Many tasks of a limited class never exceed the limit.
	s2 := newScheduler(t, scheduler.Options{Workers: 4, ClassLimits: [scheduler.NumClasses]int{scheduler.Upload: 2}})
	var cur, peak atomic.Int32
	var hs []*scheduler.Handle
	for i := range 40 {
		hs = append(hs, mustSubmit(t, s2, scheduler.Upload, fmt.Sprint("u", i), func(context.Context) error {
			trackPeak(&cur, &peak)
			return nil
		}))
	}
	for _, h := range hs {
		if err := waitErr(t, h); err != nil {
			t.Fatal(err)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrent uploads = %d, want exactly the limit 2", p)
	}
}

// trackPeak counts the caller in, records the maximum, holds for a moment so that overlaps
// happen, and counts out.
func trackPeak(cur, peak *atomic.Int32) {
	n := cur.Add(1)
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(200 * time.Microsecond)
	cur.Add(-1)
}

func TestBoundedConcurrency(t *testing.T) {
	for _, workers := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			s := newScheduler(t, scheduler.Options{Workers: workers})
			var cur, peak atomic.Int32
			var busyPeak atomic.Int32
			var hs []*scheduler.Handle
			for i := range 200 {
				c := scheduler.Class(i % scheduler.NumClasses)
				hs = append(hs, mustSubmit(t, s, c, fmt.Sprint(i), func(context.Context) error {
					if b := int32(s.Stats().Busy); b > busyPeak.Load() {
						busyPeak.Store(b) // racy max is fine: only ever compared with the bound
					}
					trackPeak(&cur, &peak)
					return nil
				}))
			}
			for _, h := range hs {
				if err := waitErr(t, h); err != nil {
					t.Fatal(err)
				}
			}
			if p := peak.Load(); p > int32(workers) {
				t.Fatalf("peak concurrent tasks = %d > workers %d", p, workers)
			}
			if p := peak.Load(); p != int32(workers) {
				t.Fatalf("peak concurrent tasks = %d, want %d: workers were left idle", p, workers)
			}
			if b := busyPeak.Load(); b > int32(workers) {
				t.Fatalf("Stats().Busy reached %d > workers %d", b, workers)
			}
		})
	}
}

func TestCancelQueued(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 1})
	release := make(chan struct{})
	b := blocker(t, s, scheduler.Transform, release)
	var ran atomic.Bool
	h := mustSubmit(t, s, scheduler.Eviction, "victim", func(context.Context) error {
		ran.Store(true)
		return nil
	})
	other := mustSubmit(t, s, scheduler.Eviction, "other", func(context.Context) error { return nil })
	if q := s.Stats().Classes[scheduler.Eviction].Queued; q != 2 {
		t.Fatalf("queued = %d, want 2", q)
	}
	h.Cancel()
	// Cancelled while queued: completes at once, without a worker.
	err := waitErr(t, h)
	if !errors.Is(err, scheduler.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued task: %v, want ErrCancelled and context.Canceled", err)
	}
	h.Cancel() // idempotent
	if q := s.Stats().Classes[scheduler.Eviction].Queued; q != 1 {
		t.Fatalf("queued after cancel = %d, want 1", q)
	}
	close(release)
	for _, x := range []*scheduler.Handle{b, other} {
		if err := waitErr(t, x); err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() {
		t.Fatal("a task cancelled while queued ran")
	}
	st := s.Stats().Classes[scheduler.Eviction]
	if st.Submitted != 2 || st.Cancelled != 1 || st.Completed != 1 || st.Queued != 0 {
		t.Fatalf("eviction stats %+v", st)
	}
}

func TestCancelRunning(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 1})
	release := make(chan struct{}) // never closed: only the cancellation ends the task
	h := blocker(t, s, scheduler.Compaction, release)
	h.Cancel()
	if err := waitErr(t, h); !errors.Is(err, context.Canceled) || errors.Is(err, scheduler.ErrCancelled) {
		t.Fatalf("cancelled running task: %v, want the function's context.Canceled", err)
	}
	h.Cancel() // after completion: no effect, no panic
	if st := s.Stats().Classes[scheduler.Compaction]; st.Cancelled != 1 || st.Failed != 0 || st.Running != 0 {
		t.Fatalf("compaction stats %+v", st)
	}

	// A task that ignores the cancellation and returns nil counts as completed.
	started := make(chan struct{})
	h2 := mustSubmit(t, s, scheduler.Compaction, "stubborn", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return nil
	})
	<-started
	h2.Cancel()
	if err := waitErr(t, h2); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Classes[scheduler.Compaction]; st.Completed != 1 || st.Cancelled != 1 {
		t.Fatalf("compaction stats %+v", st)
	}

	// Cancelling one task leaves the others' contexts alone.
	s2 := newScheduler(t, scheduler.Options{Workers: 2})
	keep := make(chan struct{})
	a := blocker(t, s2, scheduler.Upload, keep)
	c := blocker(t, s2, scheduler.Upload, keep)
	a.Cancel()
	if err := waitErr(t, a); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		t.Fatal("cancelling one task ended another")
	case <-time.After(20 * time.Millisecond):
	}
	close(keep)
	if err := waitErr(t, c); err != nil {
		t.Fatal(err)
	}
}

// waitParked waits until n worker goroutines are parked waiting for work, so that the next
// Submit must wake one.
func waitParked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		parked := 0
		for _, g := range schedulerFrames() {
			if strings.Contains(g, "sync.(*Cond).Wait") && strings.Contains(g, "(*Scheduler).take") {
				parked++
			}
		}
		if parked == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers parked, want %d", parked, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Submit wakes one parked worker per task: two tasks that wait for each other complete only
// if both parked workers were woken.
func TestSubmitWakesParkedWorkers(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 2})
	waitParked(t, 2)
	a, b := make(chan struct{}), make(chan struct{})
	meet := func(mine, theirs chan struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			close(mine)
			select {
			case <-theirs:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	ha := mustSubmit(t, s, scheduler.Eviction, "a", meet(a, b))
	hb := mustSubmit(t, s, scheduler.Eviction, "b", meet(b, a))
	for _, h := range []*scheduler.Handle{ha, hb} {
		if err := waitErr(t, h); err != nil {
			t.Fatal(err)
		}
	}
}

// schedulerFrames returns the goroutine stacks that contain code of this package's
// Scheduler, excluding the calling goroutine.
func schedulerFrames() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "strata/scheduler.(*Scheduler)") {
			out = append(out, g)
		}
	}
	return out
}

// waitNoLeak waits briefly for goroutines to finish exiting (a worker has returned from our
// code when Close returns, but may still be inside the runtime's goroutine exit).
func waitNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, frames := runtime.NumGoroutine(), schedulerFrames()
		if n <= before && len(frames) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d after Close, %d before; scheduler frames:\n%s",
				n, before, strings.Join(frames, "\n\n"))
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseWaits(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine()) // settle leftovers of earlier tests
	before := runtime.NumGoroutine()
	s, err := scheduler.New(scheduler.Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.NumGoroutine(); got != before+4 {
		t.Fatalf("New started %d goroutines, want 4", got-before)
	}
	var finished atomic.Int32
	var running []*scheduler.Handle
	for i := range 4 {
		started := make(chan struct{})
		running = append(running, mustSubmit(t, s, scheduler.Compaction, fmt.Sprint("r", i), func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // a slow shutdown Close must wait for
			finished.Add(1)
			return ctx.Err()
		}))
		<-started
	}
	var queuedRan atomic.Bool
	var queued []*scheduler.Handle
	for i := range 10 {
		queued = append(queued, mustSubmit(t, s, scheduler.Class(i%scheduler.NumClasses), fmt.Sprint("q", i), func(context.Context) error {
			queuedRan.Store(true)
			return nil
		}))
	}

	// Concurrent Closes: all return only after the shutdown is complete.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
			if n := finished.Load(); n != 4 {
				t.Errorf("Close returned with %d of 4 running tasks finished", n)
			}
		})
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return: running tasks' contexts not cancelled?")
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if queuedRan.Load() {
		t.Fatal("a queued task ran during Close")
	}
	for _, h := range running {
		if err := waitErr(t, h); !errors.Is(err, context.Canceled) || errors.Is(err, scheduler.ErrCancelled) {
			t.Fatalf("running task at Close: %v, want its own context.Canceled", err)
		}
	}
	for _, h := range queued {
		if err := waitErr(t, h); !errors.Is(err, scheduler.ErrCancelled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("queued task at Close: %v, want ErrCancelled", err)
		}
	}
	if _, err := s.Submit(scheduler.Transform, "late", func(context.Context) error { return nil }); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Submit after Close: %v, want ErrClosed", err)
	}
	st := s.Stats()
	if st.Busy != 0 {
		t.Fatalf("busy after Close = %d", st.Busy)
	}
	var cancelled uint64
	for _, c := range st.Classes {
		cancelled += c.Cancelled
		if c.Queued != 0 || c.Running != 0 {
			t.Fatalf("class stats after Close %+v", c)
		}
	}
	if cancelled != 14 {
		t.Fatalf("cancelled = %d, want 14 (4 running + 10 queued)", cancelled)
	}
	waitNoLeak(t, before)
}

// Close on an idle scheduler, and on one that was never used.
func TestCloseIdle(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	for _, workers := range []int{1, 16} {
		s, err := scheduler.New(scheduler.Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if err := waitErr(t, mustSubmit(t, s, scheduler.Upload, "one", func(context.Context) error { return nil })); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	waitNoLeak(t, before)
}

func TestPanicRecovered(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 1})
	h := mustSubmit(t, s, scheduler.Eviction, "boom", func(context.Context) error {
		panicHere("boom")
		return nil
	})
	err := waitErr(t, h)
	var pe *scheduler.PanicError
	if !errors.Is(err, scheduler.ErrPanic) || !errors.As(err, &pe) {
		t.Fatalf("panicking task: %v, want a *PanicError", err)
	}
	if pe.Value != "boom" || pe.Class != scheduler.Eviction || pe.Name != "boom" {
		t.Fatalf("PanicError %+v", pe)
	}
	if !strings.Contains(string(pe.Stack), "panicHere") || !strings.Contains(err.Error(), "panicHere") {
		t.Fatalf("stack lacks the panicking frame:\n%s", pe.Stack)
	}

	// A panic with an error value: errors.Is sees it.
	sentinel := errors.New("sentinel")
	err = waitErr(t, mustSubmit(t, s, scheduler.Eviction, "err", func(context.Context) error { panic(sentinel) }))
	if !errors.Is(err, scheduler.ErrPanic) || !errors.Is(err, sentinel) {
		t.Fatalf("panic(error): %v", err)
	}
	// panic(nil) is still a panic.
	err = waitErr(t, mustSubmit(t, s, scheduler.Eviction, "nil", func(context.Context) error { panic(nil) }))
	if !errors.Is(err, scheduler.ErrPanic) {
		t.Fatalf("panic(nil): %v", err)
	}

	// The (single) worker survived, without the panicking task's labels.
	err = waitErr(t, mustSubmit(t, s, scheduler.Upload, "after", func(ctx context.Context) error {
		if v, _ := pprof.Label(ctx, scheduler.LabelName); v != "after" {
			return fmt.Errorf("label strata.name = %q", v)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats().Classes[scheduler.Eviction]; st.Failed != 3 || st.Completed != 0 {
		t.Fatalf("eviction stats %+v", st)
	}
}

//go:noinline
func panicHere(v any) { panic(v) }

func TestGoexit(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	s, err := scheduler.New(scheduler.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := mustSubmit(t, s, scheduler.Transform, "goexit", func(context.Context) error {
		runtime.Goexit()
		return nil
	})
	if err := waitErr(t, h); !errors.Is(err, scheduler.ErrGoexit) {
		t.Fatalf("Goexit task: %v, want ErrGoexit", err)
	}
	// The replacement worker runs the next task.
	if err := waitErr(t, mustSubmit(t, s, scheduler.Transform, "next", func(context.Context) error { return nil })); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Classes[scheduler.Transform].Failed != 1 || st.Classes[scheduler.Transform].Completed != 1 {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	waitNoLeak(t, before)
}

func TestLabels(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 2})
	for c := range scheduler.Class(scheduler.NumClasses) {
		name := "task-" + c.String()
		err := waitErr(t, mustSubmit(t, s, c, name, func(ctx context.Context) error {
			task, ok1 := pprof.Label(ctx, "strata.task")
			n, ok2 := pprof.Label(ctx, "strata.name")
			if !ok1 || !ok2 || task != c.String() || n != name {
				return fmt.Errorf("labels strata.task=%q (%v) strata.name=%q (%v), want %q, %q",
					task, ok1, n, ok2, c.String(), name)
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
	}

	// The worker goroutine itself carries the labels (what CPU profiles record): a goroutine
	// profile taken while a task runs shows them.
	release := make(chan struct{})
	b := blocker(t, s, scheduler.Compaction, release)
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := waitErr(t, b); err != nil {
		t.Fatal(err)
	}
	prof := buf.String()
	if !strings.Contains(prof, `"strata.task":"compaction"`) || !strings.Contains(prof, `"strata.name":"blocker"`) {
		t.Fatalf("goroutine profile lacks the task labels:\n%s", prof)
	}
}

func TestStatsAccounting(t *testing.T) {
	s := newScheduler(t, scheduler.Options{Workers: 2})
	fail := errors.New("fail")
	var hs []*scheduler.Handle
	hs = append(hs,
		mustSubmit(t, s, scheduler.Upload, "ok", func(context.Context) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}),
		mustSubmit(t, s, scheduler.Upload, "fail", func(context.Context) error { return fail }),
		mustSubmit(t, s, scheduler.Upload, "wrapped-canceled-without-cancel", func(context.Context) error {
			return fmt.Errorf("x: %w", context.Canceled) // not cancelled by us: a failure
		}),
	)
	for _, h := range hs {
		waitErr(t, h)
	}
	st := s.Stats()
	u := st.Classes[scheduler.Upload]
	if u.Submitted != 3 || u.Completed != 1 || u.Failed != 2 || u.Cancelled != 0 || u.Queued != 0 || u.Running != 0 {
		t.Fatalf("upload stats %+v", u)
	}
	if u.RunNanos < int64(5*time.Millisecond) {
		t.Fatalf("upload RunNanos = %d, want >= 5ms of sleep", u.RunNanos)
	}
	if st.Classes[scheduler.Transform] != (scheduler.ClassStats{}) {
		t.Fatalf("transform stats %+v, want zero", st.Classes[scheduler.Transform])
	}
}

// Many goroutines submit, cancel and wait while Close runs; every Handle completes and the
// accounting adds up. Run with -race.
func TestConcurrentStress(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	s, err := scheduler.New(scheduler.Options{Workers: 3, ClassLimits: [scheduler.NumClasses]int{scheduler.Upload: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				c := scheduler.Class((g + i) % scheduler.NumClasses)
				h, err := s.Submit(c, "stress", func(ctx context.Context) error {
					switch i % 5 {
					case 0:
						return errors.New("fail")
					case 1:
						panic("stress panic")
					case 2:
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-time.After(50 * time.Microsecond):
						}
					}
					_ = s.Stats()
					return nil
				})
				if errors.Is(err, scheduler.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				accepted.Add(1)
				if i%3 == 0 {
					h.Cancel()
				}
				if i%7 == 0 {
					h.Wait()
				}
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	s.Close()
	wg.Wait()
	var total uint64
	for c, st := range s.Stats().Classes {
		if st.Submitted != st.Completed+st.Failed+st.Cancelled || st.Queued != 0 || st.Running != 0 {
			t.Fatalf("class %s stats after Close do not add up: %+v", scheduler.Class(c), st)
		}
		total += st.Submitted
	}
	if total != uint64(accepted.Load()) {
		t.Fatalf("submitted %d, accepted %d", total, accepted.Load())
	}
	waitNoLeak(t, before)
}

func BenchmarkSubmitWait(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			s := newScheduler(b, scheduler.Options{Workers: workers})
			fn := func(context.Context) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				h, err := s.Submit(scheduler.Compaction, "bench", fn)
				if err != nil {
					b.Fatal(err)
				}
				if err := h.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("workers=4/submitters=parallel", func(b *testing.B) {
		s := newScheduler(b, scheduler.Options{Workers: 4})
		fn := func(context.Context) error { return nil }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h, err := s.Submit(scheduler.Compaction, "bench", fn)
				if err != nil {
					b.Error(err)
					return
				}
				h.Wait()
			}
		})
	})
}

// TestReserved: a reserved Upload worker runs an upload while the only shared worker is busy
// with a compaction (invariant 2's remedy), never takes another class's task, and counts in
// Stats; the goroutines are Workers + Reserved and all end at Close.
func TestReserved(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	var opts scheduler.Options
	opts.Workers = 1
	opts.Reserved[scheduler.Upload] = 1
	s, err := scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.NumGoroutine(); got != before+2 {
		t.Fatalf("goroutines: %d, want %d (1 shared + 1 reserved)", got, before+2)
	}
	if st := s.Stats(); st.Workers != 1 || st.Reserved[scheduler.Upload] != 1 || s.Reserved(scheduler.Upload) != 1 {
		t.Fatalf("Stats: %+v", st)
	}
	release := make(chan struct{})
	started := make(chan string, 3)
	block := func(name string) func(context.Context) error {
		return func(context.Context) error { started <- name; <-release; return nil }
	}
	c1, _ := s.Submit(scheduler.Compaction, "c1", block("c1"))
	if got := <-started; got != "c1" {
		t.Fatalf("started %q", got)
	}
	c2, _ := s.Submit(scheduler.Compaction, "c2", block("c2"))
	up, _ := s.Submit(scheduler.Upload, "up", func(context.Context) error { started <- "up"; return nil })
	select {
	case got := <-started:
		if got != "up" {
			t.Fatalf("started %q beside the busy shared worker, want the upload (the reserved worker took a compaction?)", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upload did not start while the shared worker was busy")
	}
	if err := up.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-started:
		t.Fatalf("%q started while the shared worker is still busy with c1", got)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if err := c1.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoLeak(t, before)
	var bad scheduler.Options
	bad.Reserved[scheduler.Upload] = -1
	if _, err := scheduler.New(bad); !errors.Is(err, scheduler.ErrInvalidOptions) {
		t.Fatalf("Reserved -1: %v", err)
	}
}

// TestReservedPersist: the engine's lanes with the changelog on (a shared worker, a reserved
// Upload and a reserved Persist worker): a persist starts while the shared worker runs a
// compaction and the Upload worker a long materialization upload — it never queues behind
// either (issue 22).
func TestReservedPersist(t *testing.T) {
	var opts scheduler.Options
	opts.Workers = 1
	opts.Reserved[scheduler.Upload] = 1
	opts.Reserved[scheduler.Persist] = 1
	s := newScheduler(t, opts)
	release := make(chan struct{})
	started := make(chan string, 3)
	block := func(name string) func(context.Context) error {
		return func(context.Context) error { started <- name; <-release; return nil }
	}
	c, _ := s.Submit(scheduler.Compaction, "c", block("c"))
	u, _ := s.Submit(scheduler.Upload, "materialization", block("u"))
	for range 2 {
		<-started
	}
	p, _ := s.Submit(scheduler.Persist, "changelog persist", func(context.Context) error { started <- "p"; return nil })
	select {
	case got := <-started:
		if got != "p" {
			t.Fatalf("started %q, want the persist", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the persist did not start beside a running compaction and upload")
	}
	close(release)
	for _, h := range []*scheduler.Handle{c, u, p} {
		if err := waitErr(t, h); err != nil {
			t.Fatal(err)
		}
	}
}
