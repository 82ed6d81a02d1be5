package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	strata "github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	testMaxP  = 16
	testParts = 4
	testKeys  = 40
)

type testEnv struct {
	t       *testing.T
	c       *kfake.Cluster
	brokers []string
	storage checkpoint.Storage
	job     string
	// delivery is the runners' Config.Delivery.
	delivery Delivery
	// edit, when set, changes every runner's config (before startWith's own edit).
	edit func(*Config)
}

func newEnv(t *testing.T, parts int32) *testEnv {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.SeedTopics(parts, "in"), kfake.SeedTopics(4, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st, err := checkpoint.NewDirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, c: c, brokers: c.ListenAddrs(), storage: st, job: "count"}
}

// produce writes records [from, to) of the test input: key i%testKeys, event time 10 ms * i
// (monotone per partition).
func (e *testEnv) produce(from, to int) {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(KeyGroupPartitioner(testMaxP)), kgo.DefaultProduceTopic("in"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Key: testKey(i), Value: []byte(strconv.Itoa(i)), Timestamp: time.UnixMilli(int64(10 * i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func testKey(i int) []byte { return []byte(fmt.Sprintf("k%03d", i%testKeys)) }

type testStates struct {
	count, window *strata.ValueState[int64]
}

// config is the test job: a running count per key (emitted at every record) and a count per
// key and 1-second event-time window (emitted when the watermark passes the window).
func (e *testEnv) config(name string) Config {
	return Config{
		Brokers: e.brokers, Group: "g", Job: e.job, InputTopic: "in", OutputTopic: "out",
		MaxParallelism: testMaxP, Storage: e.storage, LocalDir: e.t.TempDir() + "/" + name,
		StoreOptions:       strata.Options{MemoryBudget: 16 << 20},
		CheckpointInterval: 100 * time.Millisecond,
		Delivery:           e.delivery,
		TransactionTimeout: 10 * time.Second,
		SessionTimeout:     3 * time.Second,
		Setup: func(s *strata.Store) (any, error) {
			c, err := strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
			if err != nil {
				return nil, err
			}
			w, err := strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "window", Codec: strata.Int64})
			return &testStates{c, w}, err
		},
		Process: func(c *Context, key, value []byte, ts int64) error {
			st := c.State.(*testStates)
			n, _, err := st.count.Get(c.Key)
			if err != nil {
				return err
			}
			if err := st.count.Put(c.Key, n+1); err != nil {
				return err
			}
			c.Emit(key, []byte("c:"+strconv.FormatInt(n+1, 10)))
			win := []byte(strconv.FormatInt(ts/1000, 10))
			wk := c.Key.In(win)
			m, _, err := st.window.Get(wk)
			if err != nil {
				return err
			}
			if err := st.window.Put(wk, m+1); err != nil {
				return err
			}
			return c.Timers.RegisterEventTimeTimer(c.Key, win, (ts/1000+1)*1000-1)
		},
		OnTimer: func(c *Context, t strata.Timer[[]byte], ev bool) error {
			st := c.State.(*testStates)
			m, _, err := st.window.Get(t.Key)
			if err != nil {
				return err
			}
			c.Emit(t.Key.Bytes(), []byte("w:"+string(t.Namespace)+":"+strconv.FormatInt(m, 10)))
			return st.window.Clear(t.Key)
		},
	}
}

// model is the plain Go computation of the job's output for records [0, n): a multiset of
// "key=value" strings.
func model(n int) map[string]int {
	out := map[string]int{}
	counts := map[string]int64{}
	windows := map[string]map[int64]int64{}
	maxTs := map[int32]int64{}
	for i := range n {
		k := string(testKey(i))
		ts := int64(10 * i)
		counts[k]++
		out[k+"=c:"+strconv.FormatInt(counts[k], 10)]++
		if windows[k] == nil {
			windows[k] = map[int64]int64{}
		}
		windows[k][ts/1000]++
		p := PartitionOf([]byte(k), testMaxP, testParts)
		maxTs[p] = max(maxTs[p], ts)
	}
	for k, ws := range windows {
		wm := maxTs[PartitionOf([]byte(k), testMaxP, testParts)]
		for w, m := range ws {
			if (w+1)*1000-1 <= wm {
				out[k+"=w:"+strconv.FormatInt(w, 10)+":"+strconv.FormatInt(m, 10)]++
			}
		}
	}
	return out
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// readOutput reads the committed output until it holds want records (then 300 ms more, to
// catch duplicates) or the deadline passes.
func (e *testEnv) readOutput(want int, deadline time.Duration) map[string]int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	got, err := kafkatest.Output(ctx, e.brokers, "out", want, 300*time.Millisecond)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func diff(t *testing.T, got, want map[string]int) {
	t.Helper()
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s: got %d, want %d", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: got %d, want 0", k, v))
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], "...")
		}
		t.Fatalf("output differs from the model (%d records, want %d):\n%v", total(got), total(want), bad)
	}
}

type running struct {
	r      *Runner
	cancel context.CancelFunc
	done   chan error
}

func (e *testEnv) start(name string) *running {
	e.t.Helper()
	return e.startWith(name, nil)
}

// startWith starts a runner whose config edit changed (nil: none).
func (e *testEnv) startWith(name string, edit func(*Config)) *running {
	e.t.Helper()
	cfg := e.config(name)
	if e.edit != nil {
		e.edit(&cfg)
	}
	if edit != nil {
		edit(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &running{r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { x.done <- r.Run(ctx) }()
	return x
}

// stop shuts the runner down gracefully (checkpoint, commit, leave) and checks its error.
func (x *running) stop(t *testing.T) {
	t.Helper()
	x.cancel()
	if err := <-x.done; err != nil {
		t.Fatalf("runner: %v", err)
	}
}

// kill stops the runner without committing its open transaction or checkpoint.
func (x *running) kill(t *testing.T) {
	t.Helper()
	x.r.crash.Store(true)
	x.cancel()
	<-x.done
}

// waitEvents waits until the runners processed n events together.
func waitEvents(t *testing.T, xs []*running, n int64) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		var sum int64
		for _, x := range xs {
			sum += x.r.Stats().Events
		}
		if sum >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("runners processed %d events, waited for %d", sum, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSingleRunner(t *testing.T) {
	e := newEnv(t, testParts)
	const n = 2000
	e.produce(0, n)
	x := e.start("a")
	want := model(n)
	got := e.readOutput(total(want), 20*time.Second)
	s := x.r.Stats()
	x.stop(t)
	diff(t, got, want)
	// Per-partition figures: every partition owned, read to its end.
	if len(s.Partitions) != testParts {
		t.Fatalf("Stats.Partitions has %d partitions, want %d: %+v", len(s.Partitions), testParts, s.Partitions)
	}
	var events, offsets int64
	for p, ps := range s.Partitions {
		if ps.Lag != 0 || ps.Restore <= 0 || ps.Offset <= 0 || ps.StateBytes <= 0 {
			t.Errorf("partition %d: %+v: want lag 0 and a restore time, an offset and state bytes", p, ps)
		}
		events += ps.Events
		offsets += ps.Offset
	}
	if offsets != n || events < n {
		t.Errorf("partitions: offsets sum to %d, events to %d; want %d and at least %d", offsets, events, n, n)
	}
}

// killOne runs the kill scenario on n records: three runners share the input; once one of
// them has committed a checkpoint (and processed some records) it is killed mid-stream
// without committing, while the second half of the input is produced around the kill; the
// others go on. It returns the committed output, the model's, and the partitions the killed
// runner owned.
func (e *testEnv) killOne(n int) (got, want map[string]int, owned map[int32]bool) {
	e.t.Helper()
	e.produce(0, n/2)
	xs := []*running{e.start("a"), e.start("b"), e.start("c")}
	var victim *running
	end := time.Now().Add(20 * time.Second)
	for victim == nil {
		for _, x := range xs {
			if x.r.Stats().Checkpoints > 0 && x.r.Stats().Events > 100 {
				victim = x
				break
			}
		}
		if time.Now().After(end) {
			e.t.Fatal("no runner checkpointed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.produce(n/2, 3*n/4)
	owned = map[int32]bool{}
	for p := range victim.r.Stats().Partitions {
		owned[p] = true
	}
	victim.kill(e.t)
	e.produce(3*n/4, n)
	want = model(n)
	got = e.readOutput(total(want), 30*time.Second)
	for _, x := range xs {
		if x != victim {
			x.stop(e.t)
		}
	}
	return got, want, owned
}

// TestKillMidStream: three runners share the input; one is killed mid-stream without
// committing; its partitions move to the others, which restore them from the checkpoints the
// committed offsets name. The committed output equals the model's: no loss, no duplicates.
func TestKillMidStream(t *testing.T) {
	e := newEnv(t, testParts)
	got, want, _ := e.killOne(6000)
	diff(t, got, want)
}

// TestScaleOutAndIn: 2 runners, then 4 (one partition each), then 1 (all four), while input
// flows: each stage gets a third of the input once the group has settled on its runners.
func TestScaleOutAndIn(t *testing.T) {
	e := newEnv(t, testParts)
	const n = 6000
	settle := func(xs []*running, each int) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); ; {
			ok := true
			for _, x := range xs {
				ok = ok && x.r.Stats().OwnedPartitions == each
			}
			if ok {
				return
			}
			if time.Now().After(end) {
				var owned []int
				for _, x := range xs {
					owned = append(owned, x.r.Stats().OwnedPartitions)
				}
				t.Fatalf("%d runners own %v partitions, want %d each", len(xs), owned, each)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	xs := []*running{e.start("a"), e.start("b")}
	e.produce(0, n/3)
	waitEvents(t, xs, 1)
	settle(xs, testParts/2)
	xs = append(xs, e.start("c"), e.start("d"))
	settle(xs, testParts/4)
	e.produce(n/3, 2*n/3)
	waitEvents(t, xs[2:], 1) // the new runners process input
	for _, x := range xs[1:] {
		x.stop(t)
	}
	e.produce(2*n/3, n)
	want := model(n)
	got := e.readOutput(total(want), 30*time.Second)
	settle(xs[:1], testParts)
	xs[0].stop(t)
	diff(t, got, want)
}

func TestPartitionCountError(t *testing.T) {
	e := newEnv(t, 3) // 3 does not divide 16
	r, err := New(e.config("a"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, ErrPartitionCount) {
		t.Fatalf("Run = %v, want ErrPartitionCount", err)
	}
}

// TestForeignCheckpoint: a group whose committed offsets name another job's checkpoints.
func TestForeignCheckpoint(t *testing.T) {
	e := newEnv(t, testParts)
	e.produce(0, 200)
	x := e.start("a")
	want := model(200)
	e.readOutput(total(want), 20*time.Second)
	x.stop(t)
	e.job = "other"
	r, err := New(e.config("b"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, ErrForeignCheckpoint) {
		t.Fatalf("Run = %v, want ErrForeignCheckpoint", err)
	}
}

// TestAtLeastOnceKill: the kill of TestKillMidStream with Delivery AtLeastOnce. No output is
// lost; the extra records are duplicates (a record at most twice, one kill) of keys whose
// partition the killed runner owned: its output since its last commit, emitted again by the
// new owner replaying from the committed checkpoint.
func TestAtLeastOnceKill(t *testing.T) {
	e := newEnv(t, testParts)
	e.delivery = AtLeastOnce
	got, want, owned := e.killOne(6000)
	dups := 0
	for k, w := range want {
		g := got[k]
		key := []byte(k[:strings.IndexByte(k, '=')])
		switch {
		case g < w:
			t.Errorf("%s: got %d, want %d: lost", k, g, w)
		case g > 2*w:
			t.Errorf("%s: got %d, want %d: more than one duplicate after one kill", k, g, w)
		case g > w && !owned[PartitionOf(key, testMaxP, testParts)]:
			t.Errorf("%s: got %d, want %d: a duplicate of a partition the killed runner did not own (it owned %v)", k, g, w, owned)
		}
		dups += g - w
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: got %d, want 0", k, g)
		}
	}
	t.Logf("at least once: %d records, %d duplicates after the kill (partitions %v)", total(want), dups, owned)
}

// TestZombieFenced: runner a stalls in Process (a long GC pause, a starved process) while
// runner c joins: the group rebalances, a cannot rejoin within the rebalance timeout (its
// client blocks rebalances while it processes, as Kafka's max.poll.interval.ms), so the group
// gives a's partitions to b and c, which restore them from the committed checkpoints and
// checkpoint them (claiming their lineages). When a wakes it is a zombie: Strata refuses its
// checkpoints (ErrFenced) and Kafka its transaction (the group generation, KIP-447; or the
// heartbeat before the commit never comes, the transaction ends in doubt and a starts a new
// session). The committed output is still exactly the model's, and a goes on without error.
func TestZombieFenced(t *testing.T) {
	e := newEnv(t, testParts)
	const n = 4000
	e.produce(0, n/2)
	var stall atomic.Bool
	short := func(c *Config) {
		c.SessionTimeout = time.Second
		c.TransactionTimeout = 3 * time.Second
		c.ExtraOpts = append(c.ExtraOpts, kgo.RebalanceTimeout(time.Second))
	}
	a := e.startWith("a", func(c *Config) {
		short(c)
		process := c.Process
		c.Process = func(x *Context, key, value []byte, ts int64) error {
			if stall.CompareAndSwap(true, false) {
				time.Sleep(4 * time.Second)
			}
			return process(x, key, value, ts)
		}
	})
	waitEvents(t, []*running{a}, n/4)
	b := e.startWith("b", short)
	end := time.Now().Add(20 * time.Second)
	for a.r.Stats().OwnedPartitions == 0 || b.r.Stats().OwnedPartitions == 0 || b.r.Stats().Checkpoints == 0 {
		if time.Now().After(end) {
			t.Fatalf("no rebalance to a and b: %+v, %+v", a.r.Stats(), b.r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	zombie := func() int64 { s := a.r.Stats(); return s.Fenced + s.Aborts + s.Restarts }
	before := zombie()
	stall.Store(true)
	e.produce(n/2, 3*n/4)
	c := e.startWith("c", short)
	e.produce(3*n/4, n)
	want := model(n)
	got := e.readOutput(total(want), 30*time.Second)
	for end := time.Now().Add(15 * time.Second); zombie() == before && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	sa := a.r.Stats()
	got2 := e.readOutput(total(want), 10*time.Second) // whatever the zombie did meanwhile
	for _, x := range []*running{a, b, c} {
		x.stop(t)
	}
	diff(t, got, want)
	diff(t, got2, want)
	if zombie() == before {
		t.Errorf("the zombie was neither fenced nor aborted nor restarted: %+v", sa)
	}
	// Fenced, or aborted with no rebalance seen, it drops its partitions without committing
	// and joins again with a new session (Restarts); aborted after its client saw the
	// partitions revoked, it only drops them.
	sa = a.r.Stats()
	if sa.Fenced > 0 && sa.Restarts == 0 {
		t.Errorf("the zombie was fenced but did not start a new session: %+v", sa)
	}
	t.Logf("zombie: %d checkpoints fenced, %d transactions aborted, %d sessions restarted", sa.Fenced, sa.Aborts, sa.Restarts)
}

// slowStorage delays one Create (a checkpoint's manifest) when slow is set, and reports its
// start on started.
type slowStorage struct {
	checkpoint.Storage
	slow    atomic.Bool
	started chan struct{}
}

func (s *slowStorage) Create(ctx context.Context, name string, data []byte) error {
	if s.slow.CompareAndSwap(true, false) {
		close(s.started)
		time.Sleep(time.Second)
	}
	return s.Storage.Create(ctx, name, data)
}

// TestRebalanceDuringCheckpoint: runner b joins while runner a is inside a slow checkpoint
// (its manifest's Create takes a second). a's client holds the rebalance until the
// transaction ends (BlockRebalanceOnPoll), then the partitions b gets are revoked from a
// between transactions and restored by b from what a committed: the output is still
// exactly the model's.
func TestRebalanceDuringCheckpoint(t *testing.T) {
	e := newEnv(t, testParts)
	slow := &slowStorage{Storage: e.storage, started: make(chan struct{})}
	e.storage = slow
	const n = 4000
	e.produce(0, n/2)
	a := e.start("a")
	for end := time.Now().Add(20 * time.Second); a.r.Stats().Checkpoints == 0; {
		if time.Now().After(end) {
			t.Fatal("a did not checkpoint")
		}
		time.Sleep(10 * time.Millisecond)
	}
	slow.slow.Store(true)
	select {
	case <-slow.started:
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint started")
	}
	b := e.start("b")
	// The second half goes in once the rebalance gave b its partitions: produced earlier, a
	// may process all of it before the group moves anything (seen once in CI: b got nothing).
	for end := time.Now().Add(30 * time.Second); b.r.Stats().Restores == 0; {
		if time.Now().After(end) {
			t.Fatal("the rebalance gave b no partition in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.produce(n/2, n)
	want := model(n)
	got := e.readOutput(total(want), 30*time.Second)
	sb := b.r.Stats()
	a.stop(t)
	b.stop(t)
	diff(t, got, want)
	if sb.Restores == 0 || sb.Events == 0 {
		t.Errorf("b restored %d partitions and processed %d events: the rebalance gave it nothing", sb.Restores, sb.Events)
	}
}
