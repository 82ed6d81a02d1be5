// Command flightkafka runs the flight job on Kafka (issue 25 item 4): it produces the flights
// of bench/testdata/flights-3m.parquet into an input topic of -partitions partitions (8),
// keyed by route and partitioned by key group (kafka.KeyGroupPartitioner), runs -runners
// runners (3) of package kafka as child processes (this executable again), SIGKILLs one of
// them mid-run — its partitions move to the others, which restore them from the checkpoints
// the group's committed offsets name — stops the others with SIGTERM once every input offset
// is committed (graceful shutdown: a last checkpoint and commit, leave the group), and checks
// the job against the plain Go computation (package bench/internal/flightjob):
//
//   - the committed output (read_committed), one record per route and event-time day window
//     fired, equals the model's: no window lost, none emitted twice;
//   - each route's delay statistics and last 10 delays, in the state the group committed
//     last (each partition's checkpoint restored from the shared checkpoint directory),
//     equal the model's.
//
// It prints `check: OK`, or the differences and exits non-zero. The job is a subset of the
// single-process demo's (bench/cmd/flightdemo): per route, the delay statistics, the last
// delays and a tumbling day window on event time (flightjob's package doc says what is left
// out and why).
//
// By default the cluster is kfake, franz-go's in-process Kafka (real protocol: groups,
// rebalances, transactions), listening on 127.0.0.1 for the children. -brokers runs against a
// real cluster instead: the command creates the topics "<-topic>" and "<-topic>-out" (unique
// per run by default), with the given partition count and replication factor 1 (-replication).
//
// Usage (from bench/):
//
//	go run ./cmd/flightkafka                       # all 3M flights, kfake, 3 runners, one killed
//	go run ./cmd/flightkafka -rows 200000          # a short run (the test command's)
//	go run ./cmd/flightkafka -kill-after 0         # no kill
//	go run ./cmd/flightkafka -brokers host:9092 -checkpoints /shared/dir
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/internal/flightjob"
	"github.com/strata-db/strata/bench/internal/trace"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/kafka"
	"github.com/strata-db/strata/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runnerEnv marks a child process: its value is the runner's name.
const runnerEnv = "FLIGHTKAFKA_RUNNER"

// maxParallelism is the job's key-group count; -partitions must divide it.
const maxParallelism = 128

// job is the job name in checkpoints and committed offsets.
const job = "flights"

type config struct {
	data        string
	rows        int
	partitions  int
	runners     int
	killAfter   int64
	brokers     string
	replication int
	topic       string
	checkpoints string
	local       string
	interval    time.Duration
	budget      int64
	session     time.Duration
	txnTimeout  time.Duration
	timeout     time.Duration
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.data, "data", "", "flights parquet file (default: bench/testdata/flights-3m.parquet of the repository)")
	fs.IntVar(&c.rows, "rows", 0, "flights to read, 0 = all")
	fs.IntVar(&c.partitions, "partitions", 8, "input topic partitions (must divide 128, the job's MaxParallelism)")
	fs.IntVar(&c.runners, "runners", 3, "runner processes")
	fs.Int64Var(&c.killAfter, "kill-after", -1, "SIGKILL a runner (one that owns partitions and committed a checkpoint) once the runners processed this many events together; -1 = 40% of the flights, 0 = no kill")
	fs.StringVar(&c.brokers, "brokers", "", "seed brokers of a real cluster, comma separated (default: an in-process kfake cluster)")
	fs.IntVar(&c.replication, "replication", 1, "replication factor of the topics created on -brokers")
	fs.StringVar(&c.topic, "topic", "", "input topic; the output is <topic>-out and the consumer group <topic> (default: flights-<unix nanoseconds>)")
	fs.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint directory every runner shares (default: a temporary directory)")
	fs.StringVar(&c.local, "local", "", "runners' scratch directory (default: a temporary directory)")
	fs.DurationVar(&c.interval, "interval", time.Second, "checkpoint (and transaction) interval")
	fs.Int64Var(&c.budget, "budget", 64<<20, "memory budget of each partition's Store in bytes")
	fs.DurationVar(&c.session, "session-timeout", 6*time.Second, "consumer group session timeout (how soon a killed runner's partitions move)")
	fs.DurationVar(&c.txnTimeout, "txn-timeout", 10*time.Second, "Kafka transaction timeout (how soon a killed runner's open transaction is aborted)")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "give up when the job has not committed every input offset by then")
}

// args are the flags a child needs, resolved.
func (c *config) args() []string {
	return []string{"-brokers", c.brokers, "-topic", c.topic, "-checkpoints", c.checkpoints, "-local", c.local,
		"-interval", c.interval.String(), "-budget", fmt.Sprint(c.budget), "-session-timeout", c.session.String(),
		"-txn-timeout", c.txnTimeout.String()}
}

func main() {
	var c config
	fs := flag.NewFlagSet("flightkafka", flag.ExitOnError)
	c.flags(fs)
	fs.Parse(os.Args[1:])
	var err error
	if name := os.Getenv(runnerEnv); name != "" {
		err = runRunner(&c, name, os.Stdout)
	} else {
		err = run(&c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flightkafka:", err)
		os.Exit(1)
	}
}

// runnerConfig is the kafka.Config of the job.
func runnerConfig(c *config, storage checkpoint.Storage, localDir string) kafka.Config {
	return kafka.Config{
		Brokers: strings.Split(c.brokers, ","), Group: c.topic, Job: job,
		InputTopic: c.topic, OutputTopic: c.topic + "-out",
		MaxParallelism: maxParallelism, Storage: storage, LocalDir: localDir,
		StoreOptions:       strata.Options{MemoryBudget: c.budget},
		CheckpointInterval: c.interval,
		TransactionTimeout: c.txnTimeout,
		SessionTimeout:     c.session,
		EventTime:          func(r *kgo.Record) int64 { return flightjob.EventTime(r.Value) },
		Setup:              func(s *strata.Store) (any, error) { return flightjob.Setup(s) },
		Process: func(x *kafka.Context, _, value []byte, _ int64) error {
			return x.State.(*flightjob.States).Process(x.Key, value, x.Timers)
		},
		OnTimer: func(x *kafka.Context, t strata.Timer[[]byte], _ bool) error {
			k, v, err := x.State.(*flightjob.States).OnTimer(t)
			if err == nil && v != nil {
				x.Emit(k, v)
			}
			return err
		},
	}
}

// statsLine is what a runner prints every 200 ms and when it ends.
const statsLine = "stats events=%d checkpoints=%d aborts=%d restores=%d owned=%d\n"

type runnerStats struct {
	events, checkpoints, aborts, restores int64
	owned                                 int
}

// runRunner is a child: one kafka.Runner until SIGTERM (graceful) or SIGKILL.
func runRunner(c *config, name string, out io.Writer) error {
	storage, err := checkpoint.NewDirStorage(c.checkpoints)
	if err != nil {
		return err
	}
	r, err := kafka.New(runnerConfig(c, storage, filepath.Join(c.local, name)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	print := func() {
		s := r.Stats()
		fmt.Fprintf(out, statsLine, s.Events, s.Checkpoints, s.Aborts, s.Restores, s.OwnedPartitions)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			print()
			return err
		case <-tick.C:
			print()
		}
	}
}

// child is a runner process seen from the parent.
type child struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	stats  runnerStats
	done   chan struct{}
	err    error
	killed bool
}

func (ch *child) read() runnerStats {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.stats
}

func startChild(c *config, name string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ch := &child{name: name, done: make(chan struct{})}
	ch.cmd = exec.Command(exe, c.args()...)
	ch.cmd.Env = append(os.Environ(), runnerEnv+"="+name)
	ch.cmd.Stderr = os.Stderr
	stdout, err := ch.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := ch.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var s runnerStats
			if _, err := fmt.Sscanf(sc.Text(), strings.TrimSuffix(statsLine, "\n"), &s.events, &s.checkpoints, &s.aborts, &s.restores, &s.owned); err == nil {
				ch.mu.Lock()
				ch.stats = s
				ch.mu.Unlock()
			}
		}
		ch.err = ch.cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

func run(c *config, out io.Writer) error {
	path := c.data
	if path == "" {
		var err error
		if path, err = flightjob.FindData("flights-3m.parquet"); err != nil {
			return err
		}
	}
	t0 := time.Now()
	tr, err := trace.LoadParquet(path, c.rows)
	if err != nil {
		return err
	}
	n := len(tr.Rows)
	if c.killAfter < 0 {
		c.killAfter = int64(n) * 2 / 5
	}
	if c.topic == "" {
		c.topic = fmt.Sprintf("flights-%d", time.Now().UnixNano())
	}
	if c.partitions <= 0 || maxParallelism%c.partitions != 0 {
		return fmt.Errorf("-partitions %d does not divide %d", c.partitions, maxParallelism)
	}
	for _, d := range []*string{&c.checkpoints, &c.local} {
		if *d == "" {
			tmp, err := os.MkdirTemp("", "flightkafka-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*d = tmp
		}
	}
	ctx := context.Background()
	real := c.brokers != ""
	if !real {
		cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond),
			kfake.SeedTopics(int32(c.partitions), c.topic), kfake.SeedTopics(int32(c.partitions), c.topic+"-out"))
		if err != nil {
			return err
		}
		defer cl.Close()
		c.brokers = strings.Join(cl.ListenAddrs(), ",")
		fmt.Fprintf(out, "cluster: kfake (in process) at %s\n", c.brokers)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.brokers, ",")...), kgo.DefaultProduceTopic(c.topic),
		kgo.RecordPartitioner(kafka.KeyGroupPartitioner(maxParallelism)), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if real {
		// kfake seeded the topics; on a real cluster, create them (an existing topic, from
		// -topic, is used as it is).
		rs, err := adm.CreateTopics(ctx, int32(c.partitions), int16(c.replication), nil, c.topic, c.topic+"-out")
		if err == nil {
			for _, r := range rs {
				if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
					return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
				}
			}
		}
	}
	fmt.Fprintf(out, "flights: %d from %s (loaded in %v); topic %s, %d partitions, MaxParallelism %d, %d runners\n",
		n, path, time.Since(t0).Round(time.Millisecond), c.topic, c.partitions, maxParallelism, c.runners)

	produce := func(rows []trace.Row) error {
		const chunk = 20_000
		for len(rows) > 0 {
			m := min(chunk, len(rows))
			rs := make([]*kgo.Record, m)
			for i, r := range rows[:m] {
				rs[i] = &kgo.Record{Key: []byte(tr.RouteName(r.Route)), Value: flightjob.EncodeFlight(nil, r)}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			rows = rows[m:]
		}
		return nil
	}
	first := n / 3
	if err := produce(tr.Rows[:first]); err != nil {
		return err
	}
	start := time.Now()
	var kids []*child
	defer func() {
		for _, ch := range kids {
			select {
			case <-ch.done:
			default:
				ch.cmd.Process.Kill()
				<-ch.done
			}
		}
	}()
	for i := range c.runners {
		ch, err := startChild(c, fmt.Sprintf("runner-%c", 'a'+i))
		if err != nil {
			return err
		}
		kids = append(kids, ch)
	}
	prodErr := make(chan error, 1)
	go func() { prodErr <- produce(tr.Rows[first:]) }()
	produced := false

	var victim *child
	var killedAt time.Time
	moved := false
	survivorsOwn := func() (n int) {
		for _, ch := range kids {
			if !ch.killed {
				n += ch.read().owned
			}
		}
		return n
	}
	deadline := time.Now().Add(c.timeout)
	for {
		if !produced {
			select {
			case err := <-prodErr:
				if err != nil {
					return err
				}
				produced = true
			default:
			}
		}
		var sum int64
		for _, ch := range kids {
			select {
			case <-ch.done:
				if !ch.killed {
					return fmt.Errorf("%s ended before the job did: %v", ch.name, ch.err)
				}
			default:
			}
			sum += ch.read().events
		}
		if victim == nil && c.killAfter > 0 && sum >= c.killAfter {
			for _, ch := range kids {
				if s := ch.read(); s.owned > 0 && s.checkpoints > 0 {
					victim = ch
					break
				}
			}
			if victim != nil {
				s := victim.read()
				victim.killed = true
				victim.cmd.Process.Kill()
				<-victim.done
				killedAt = time.Now()
				fmt.Fprintf(out, "killed %s (SIGKILL) after %d events of %d, it owned %d partitions and had committed %d checkpoints: they move to the others\n",
					victim.name, sum, n, s.owned, s.checkpoints)
			}
		}
		if victim != nil && !moved && survivorsOwn() == c.partitions {
			moved = true
			fmt.Fprintf(out, "rebalance: every partition owned (restored) by the others %v after the kill, to within 200 ms (the session timeout, %v, is most of it)\n",
				time.Since(killedAt).Round(10*time.Millisecond), c.session)
		}
		if produced && (victim != nil || c.killAfter == 0 || c.killAfter > int64(n)) {
			if ok, err := allCommitted(ctx, adm, c); err != nil {
				return err
			} else if ok {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the job did not commit every input offset within %v", c.timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	for _, ch := range kids {
		if ch.killed {
			continue
		}
		ch.cmd.Process.Signal(syscall.SIGTERM)
		<-ch.done
		if ch.err != nil {
			return fmt.Errorf("%s after SIGTERM: %v", ch.name, ch.err)
		}
		s := ch.read()
		fmt.Fprintf(out, "%s: %d events processed, replays included (%.0f events/s over the job), %d checkpoints committed, %d aborted, %d partitions restored; stopped by SIGTERM\n",
			ch.name, s.events, float64(s.events)/elapsed.Seconds(), s.checkpoints, s.aborts, s.restores)
	}
	fmt.Fprintf(out, "job: every input offset committed after %v: %d flights (%.0f flights/s, %d runners, one killed)\n",
		elapsed.Round(time.Millisecond), n, float64(n)/elapsed.Seconds(), c.runners)

	exp := flightjob.Model(tr, func(route string) int32 { return kafka.PartitionOf([]byte(route), maxParallelism, c.partitions) })
	bad, err := check(ctx, c, cl, exp)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(out, "  ", b)
		}
		return errors.New("check: FAILED: the job on Kafka disagrees with the plain Go computation")
	}
	fmt.Fprintf(out, "check: OK (%d windows emitted exactly once; %d routes' statistics and last %d delays in the committed state)\n",
		exp.WindowCount(), len(exp.Stats), flightjob.LastN)
	return nil
}

// allCommitted reports whether the group committed every partition's end offset.
func allCommitted(ctx context.Context, adm *kadm.Client, c *config) (bool, error) {
	ends, err := adm.ListEndOffsets(ctx, c.topic)
	if err != nil {
		return false, err
	}
	com, err := adm.FetchOffsets(ctx, c.topic)
	if err != nil {
		return false, err
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		r, found := com.Lookup(c.topic, o.Partition)
		if !found || r.At < o.Offset {
			ok = false
		}
	})
	return ok, nil
}

// check compares the committed output and the committed state with exp.
func check(ctx context.Context, c *config, cl *kgo.Client, exp *flightjob.Expected) ([]string, error) {
	const limit = 20
	got, err := readOutput(c, exp.WindowCount())
	if err != nil {
		return nil, err
	}
	bad := exp.CheckOutput(got, limit)
	storage, err := checkpoint.NewDirStorage(c.checkpoints)
	if err != nil {
		return nil, err
	}
	kcfg := runnerConfig(c, storage, c.local)
	byPart := map[int32][]string{}
	for _, r := range exp.Routes() {
		p := kafka.PartitionOf([]byte(r), maxParallelism, c.partitions)
		byPart[p] = append(byPart[p], r)
	}
	for p := range int32(c.partitions) {
		h, _, ok, err := kafka.CommittedCheckpoint(ctx, cl, kcfg, p)
		if err != nil {
			return nil, err
		}
		if !ok {
			if len(byPart[p]) > 0 {
				bad = append(bad, fmt.Sprintf("partition %d: nothing committed, %d routes", p, len(byPart[p])))
			}
			continue
		}
		d, err := checkPartition(c, storage, h, p, byPart[p], exp)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		bad = append(bad, d...)
	}
	return bad[:min(len(bad), limit)], nil
}

// checkPartition restores partition p's committed checkpoint into a scratch Store and
// compares its routes' states with exp.
func checkPartition(c *config, storage checkpoint.Storage, h strata.CheckpointHandle, p int32, routes []string, exp *flightjob.Expected) ([]string, error) {
	dir, err := os.MkdirTemp(c.local, "check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	kg := strata.ComputeKeyGroupRangeForOperatorIndex(maxParallelism, c.partitions, int(p))
	s, err := strata.Restore(dir, strata.Options{MaxParallelism: maxParallelism, KeyGroups: &kg, Parallelism: c.partitions,
		SubtaskIndex: int(p), MemoryBudget: c.budget}, storage, h)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, err := flightjob.Setup(s)
	if err != nil {
		return nil, err
	}
	keys := make(map[string]strata.Key, len(routes))
	for _, r := range routes {
		keys[r] = s.Key([]byte(r))
	}
	return exp.CheckState(st, keys, 20)
}

// readOutput reads the committed output until it holds want records (then 500 ms more, to
// catch duplicates). A killed runner's open transaction holds read_committed readers back
// until the broker aborts it (-txn-timeout).
func readOutput(c *config, want int) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.txnTimeout+time.Minute)
	defer cancel()
	return kafkatest.Output(ctx, strings.Split(c.brokers, ","), c.topic+"-out", want, 500*time.Millisecond)
}
