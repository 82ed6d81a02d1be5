package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// timerKG is the tests' key-group assignment of a key hash (a stand-in for the root's Flink
// assignment): the hash mod 128.
func timerKG(h int32) int { return int(uint32(h) % 128) }

// testTimer returns timer i: key "k<i>", a key hash whose key group is i mod 128, namespace
// "n<i mod 3>", timestamp 1000-i.
func testTimer(i int) Timer {
	return Timer{KeyGroup: i % 128, KeyHash: int32(i % 128), Key: fmt.Appendf(nil, "k%d", i),
		Namespace: fmt.Appendf(nil, "n%d", i%3), Timestamp: int64(1000 - i)}
}

// popAll pops every timer of d from c, copied, in firing order.
func popAll(t *testing.T, c *TimerQueues, d TimerDomain) []Timer {
	t.Helper()
	var out []Timer
	var buf []byte
	for {
		tm, b, ok, err := c.Queue(d).Pop(1<<62, buf)
		buf = b
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		tm.Key, tm.Namespace = slices.Clone(tm.Key), slices.Clone(tm.Namespace)
		out = append(out, tm)
	}
}

// TestTimerQueuesPersistLoad: timers of two services and both domains survive PersistAll and a
// reopen (LoadTimerFile) exactly, in firing order; the persist point's metadata names the file;
// a stray timer file is removed at load, and a Store without timers writes no file.
func TestTimerQueuesPersistLoad(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, KeyGroups: checkpoint.KeyGroupRange{Start: 0, End: 127}, KeyGroupOfHash: timerKG}
	e := openTest(t, o)
	add := func(c *TimerQueues, d TimerDomain, tm Timer) {
		t.Helper()
		added, err := c.Add(d, tm.KeyGroup, base.HashKey(tm.Key), tm.KeyHash, tm.Key, tm.Namespace, tm.Timestamp)
		if err != nil || !added {
			t.Fatalf("Add %v: %v, %v", tm, added, err)
		}
	}
	a, b := e.TimerQueues("a"), e.TimerQueues("b")
	if e.TimerQueues("a") != a {
		t.Fatal("TimerQueues made a second queue set for one name")
	}
	for i := range 300 {
		add(a, EventTime, testTimer(i))
		add(b, ProcessingTime, testTimer(i+1000))
	}
	if added, err := a.Add(EventTime, 5, base.HashKey(testTimer(5).Key), 5, testTimer(5).Key, testTimer(5).Namespace, testTimer(5).Timestamp); err != nil || added {
		t.Fatalf("Add of a pending timer: %v, %v (want false, nil)", added, err)
	}
	del := testTimer(7)
	if err := a.Delete(EventTime, del.KeyGroup, base.HashKey(del.Key), del.Key, del.Namespace, del.Timestamp); err != nil {
		t.Fatal(err)
	}
	if a.Len(EventTime) != 299 || b.Len(ProcessingTime) != 300 || a.Len(ProcessingTime) != 0 {
		t.Fatalf("lengths %d %d %d", a.Len(EventTime), b.Len(ProcessingTime), a.Len(ProcessingTime))
	}
	var ref TimerFileRef
	if err := e.PersistAll(func(r TimerFileRef) []byte { ref = r; return []byte(r.Name) }); err != nil {
		t.Fatal(err)
	}
	if !ValidTimerFile(ref.Name) || ref.Size == 0 {
		t.Fatalf("persisted timer file %+v", ref)
	}
	wantA, wantB := popAll(t, a, EventTime), popAll(t, b, ProcessingTime)
	if len(wantA) != 299 || wantA[0].Timestamp != 1000-299 {
		t.Fatalf("popped %d event-time timers, first %v", len(wantA), wantA[0])
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, TimerFilePrefix+"0123456789abcdef")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	o.Budget, o.SegmentSize, o.MaxParallelism, o.FS = memory.NewBudget(256<<20), 16<<20, 128, vfs.Default()
	o.BackpressureTimeout, o.L0StopWrites = 10e9, 12
	e2, rec, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	if !rec.OK || string(rec.Meta) != ref.Name {
		t.Fatalf("reopened: persist point %v with metadata %q, want %q", rec.OK, rec.Meta, ref.Name)
	}
	a2, b2 := e2.TimerQueues("a"), e2.TimerQueues("b")
	if err := e2.LoadTimerFile(ref); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.Default().Stat(stray); err == nil {
		t.Error("the stray timer file is still there after LoadTimerFile")
	}
	if got := popAll(t, a2, EventTime); !slices.EqualFunc(got, wantA, timerEqual) {
		t.Errorf("service a after reopen: %d timers, want %d (or other timers)", len(got), len(wantA))
	}
	if got := popAll(t, b2, ProcessingTime); !slices.EqualFunc(got, wantB, timerEqual) {
		t.Errorf("service b after reopen: %d timers, want %d (or other timers)", len(got), len(wantB))
	}
	// No timers left: the next persist point names no file, and the old one goes.
	if err := e2.PersistAll(func(r TimerFileRef) []byte { ref = r; return nil }); err != nil {
		t.Fatal(err)
	}
	names, _ := vfs.Default().List(dir)
	if ref.Name != "" || slices.ContainsFunc(names, ValidTimerFile) {
		t.Errorf("without timers: persisted %+v, directory %v", ref, names)
	}
}

// timerEqual reports whether a and b are the same timer.
func timerEqual(a, b Timer) bool {
	return a.KeyGroup == b.KeyGroup && a.KeyHash == b.KeyHash && a.Timestamp == b.Timestamp &&
		string(a.Key) == string(b.Key) && string(a.Namespace) == string(b.Namespace)
}

// TestTimerLoadChecks: a restored timer (AddTimer, as read from a file or a checkpoint) is
// refused with ErrCorruption naming the file when its service has no queues, its key group is
// outside the Store's, its key hash gives another key group, or it is there already.
func TestTimerLoadChecks(t *testing.T) {
	e := openTest(t, Options{KeyGroups: checkpoint.KeyGroupRange{Start: 0, End: 63}, KeyGroupOfHash: timerKG})
	e.TimerQueues("svc")
	ok := testTimer(3)
	if err := e.AddTimer("f", "svc", EventTime, ok); err != nil {
		t.Fatal(err)
	}
	wrongHash := testTimer(4)
	wrongHash.KeyHash = 5
	for _, tc := range []struct {
		name, service string
		tm            Timer
		want          string
	}{
		{"unknown service", "nope", testTimer(1), "does not name"},
		{"key group outside", "svc", testTimer(100), "outside"},
		{"hash of another key group", "svc", wrongHash, "gives key group"},
		{"twice", "svc", ok, "twice"},
	} {
		err := e.AddTimer("f", tc.service, EventTime, tc.tm)
		if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "f") {
			t.Errorf("%s: %v, want ErrCorruption saying %q", tc.name, err, tc.want)
		}
	}
	if n := e.TimerQueues("svc").Len(EventTime); n != 1 {
		t.Errorf("%d timers after the refused ones, want 1", n)
	}
}
