package scheduler_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/strata-db/strata/scheduler"
)

// TestMeterCPU: a task that spins for 30 ms of CPU is charged about 30 ms of thread CPU in its
// Meter and its class's CPUNanos, and one that sleeps 30 ms is charged (almost) none — the
// scheduler measures the CPU of the worker's own locked thread, not wall time.
func TestMeterCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread CPU time is read on linux only (CLOCK_THREAD_CPUTIME_ID)")
	}
	s, err := scheduler.New(scheduler.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var spin, sleep scheduler.Meter
	h, err := s.SubmitMetered(scheduler.Compaction, "spin", &spin, func(context.Context) error {
		burn(30 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	h, err = s.SubmitMetered(scheduler.Upload, "sleep", &sleep, func(context.Context) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Wait()
	sp, sl := spin.Load(), sleep.Load()
	if sp.Jobs != 1 || sl.Jobs != 1 {
		t.Fatalf("jobs: spin %d, sleep %d, want 1 each", sp.Jobs, sl.Jobs)
	}
	// A shared machine may give the spinning thread only part of the 30 ms: ask for a
	// quarter, at most its running time, and well above what sleeping costs.
	if sp.CPUNanos < int64(7*time.Millisecond) || sp.CPUNanos > sp.RunNanos+int64(2*time.Millisecond) {
		t.Fatalf("spin: CPU %v, run %v: want most of 30 ms of CPU, at most its run time", time.Duration(sp.CPUNanos), time.Duration(sp.RunNanos))
	}
	if sl.CPUNanos > sp.CPUNanos/3 || sl.RunNanos < int64(25*time.Millisecond) {
		t.Fatalf("sleep: CPU %v, run %v (spin: CPU %v): want (almost) no CPU in 30 ms", time.Duration(sl.CPUNanos), time.Duration(sl.RunNanos), time.Duration(sp.CPUNanos))
	}
	st := s.Stats()
	if c := st.Classes[scheduler.Compaction].CPUNanos; c != sp.CPUNanos {
		t.Fatalf("class Compaction CPUNanos %d, want the spin task's %d", c, sp.CPUNanos)
	}
	if c := st.Classes[scheduler.Upload].CPUNanos; c != sl.CPUNanos {
		t.Fatalf("class Upload CPUNanos %d, want the sleep task's %d", c, sl.CPUNanos)
	}
}

// burn spins on the CPU until d of wall time has passed.
func burn(d time.Duration) {
	x := 0
	for start := time.Now(); time.Since(start) < d; {
		for i := range 1000 {
			x += i * x
		}
	}
	runtime.KeepAlive(x)
}
