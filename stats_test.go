package strata

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/strata-db/strata/checkpoint"
)

// TestStatsCost: a small job — puts, gets, timers, with the changelog on and checkpoints —
// shows up in Stats' cost accounting: each kind of background work it caused has jobs, CPU
// and bytes in its class; the task's sampled parts are non-zero and add up to no more than
// its API time; Written.Changed is exactly the logical bytes of the changes applied.
func TestStatsCost(t *testing.T) {
	dir := t.TempDir()
	st, err := checkpoint.NewDirStorage(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "s"), Options{MaxParallelism: 128, MemoryBudget: 64 << 20,
		SegmentSize: 4 << 20, Checkpoint: CheckpointOptions{Storage: st, Grace: checkpoint.NoGrace,
			Changelog: &ChangelogOptions{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	ts := must(NewTimerService(s, TimerServiceDescriptor[int64]{Name: "t", NamespaceCodec: Int64}))
	val := make([]byte, 100)
	const n = 60000
	var changed int64
	for i := range n {
		k := s.Key(fmt.Appendf(nil, "key-%08d", i%20000))
		if err := v.Put(k, val); err != nil {
			t.Fatal(err)
		}
		key, _ := s.compose(k, v.id) // what the engine is given: the composite key
		changed += int64(len(key) + len(val))
		if _, _, err := v.Get(k); err != nil {
			t.Fatal(err)
		}
		if err := ts.RegisterEventTimeTimer(k, 0, int64(i)); err != nil {
			t.Fatal(err)
		}
		if i%20000 == 19999 {
			if _, err := s.Checkpoint(context.Background(), uint64(i/20000+1), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	c := s.Stats()
	t.Logf("task %+v", c.Task)
	t.Logf("background %+v", c.Background)
	t.Logf("written %+v", c.Written)
	if c.Written.Changed != changed || c.Task.Changes != n {
		t.Fatalf("Written.Changed %d, Task.Changes %d: want %d bytes of %d changes", c.Written.Changed, c.Task.Changes, changed, n)
	}
	if ops := c.Task.Ops; ops < 3*n || c.Task.SampledOps < ops/64-1 || c.Task.SampledOps > ops/64+1 {
		t.Fatalf("Task.Ops %d, SampledOps %d: want at least %d calls, one in 64 sampled", ops, c.Task.SampledOps, 3*n)
	}
	task := c.Task
	for name, ns := range map[string]int64{"OpNanos": task.OpNanos, "ReadNanos": task.ReadNanos,
		"WriteNanos": task.WriteNanos, "ChangelogNanos": task.ChangelogNanos, "TimerNanos": task.TimerNanos,
		"APINanos": task.APINanos, "CPUNanos": task.CPUNanos} {
		if ns <= 0 {
			t.Errorf("Task.%s = %d, want > 0", name, ns)
		}
	}
	if parts := task.APINanos + task.ReadNanos + task.WriteNanos + task.ChangelogNanos + task.TimerNanos; parts != task.OpNanos {
		t.Errorf("the task's parts add up to %d ns, its API calls to %d", parts, task.OpNanos)
	}
	b := c.Background
	for name, cc := range map[string]ClassCost{"Transform": b.Transform, "Checkpoint": b.Checkpoint} {
		if cc.Jobs == 0 || cc.BytesOut == 0 || cc.RunNanos == 0 {
			t.Errorf("Background.%s = %+v: want jobs, bytes out and running time", name, cc)
		}
		if runtime.GOOS == "linux" && (cc.CPUNanos <= 0 || cc.CPUNanos > cc.RunNanos+int64(5e6)) {
			t.Errorf("Background.%s: CPU %d ns for %d ns of running: want some, at most the running time", name, cc.CPUNanos, cc.RunNanos)
		}
	}
	if b.Transform.BytesIn == 0 || b.Transform.BytesIn != c.Slices.TransformedBytes {
		t.Errorf("Background.Transform.BytesIn %d, want the transformed segments' %d bytes", b.Transform.BytesIn, c.Slices.TransformedBytes)
	}
	if w := c.Written; w.CheckpointStorage < b.Checkpoint.BytesOut || w.Slices != b.Transform.BytesOut {
		t.Errorf("Written %+v does not match the classes' bytes out", w)
	}
	if bg := b.CPUNanos(); runtime.GOOS == "linux" && bg <= 0 {
		t.Errorf("Background.CPUNanos() = %d, want > 0", bg)
	}
}
