package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	strata "github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/zeebo/xxh3"
)

// Config configures a Runner. Brokers, Group, Job, InputTopic, Storage, LocalDir and Process
// are required; the rest has defaults.
type Config struct {
	// Brokers are the seed brokers (host:port).
	Brokers []string
	// Group is the Kafka consumer group the runners of one job share.
	Group string
	// Job names the job: one checkpoint-owner name segment (checkpoint.ValidateOwner). The
	// checkpoints of input partition p go under owner "<Job>-p<p, five digits>", and the
	// committed offsets carry it, so a restore refuses another job's state.
	Job string
	// InputTopic is read; OutputTopic is where Emit writes (optional if nothing is emitted).
	InputTopic, OutputTopic string
	// MaxParallelism is the number of key groups (strata.Options.MaxParallelism); the input
	// topic's partition count must divide it. Default strata.DefaultMaxParallelism.
	MaxParallelism int
	// Storage holds the checkpoints of every runner of the job (shared).
	Storage checkpoint.Storage
	// LocalDir is this runner's scratch directory for the partitions' Stores.
	LocalDir string
	// StoreOptions is the template of each partition's strata.Options; MaxParallelism,
	// KeyGroups and Checkpoint.{Storage,Owner,Retain,RestoreMode,LazyRestore} are set by the
	// runner (LazyRestore from FullRestore).
	// RestoreMode is always strata.Claim: a partition restores its own lineage (the job owns
	// its checkpoints, as in Flink's failover recovery, where restore modes do not apply), so
	// the new owner's first checkpoint is incremental over the restored objects and GC keeps
	// collecting them; NoClaim would pin the restored checkpoint for ever and make the first
	// checkpoint after every move a copy of the whole state, taken before the partition's
	// first record (BenchmarkRebalance: 3.4 s vs 1.9 s for a 256 MiB partition, linked).
	StoreOptions strata.Options
	// FullRestore makes a partition's restore fetch and check every table before its first
	// record, as strata.Restore does by default. By default (false) the runner restores
	// lazily (strata.CheckpointOptions.LazyRestore): the partition's records flow once the
	// manifest is read, reads of tables not yet local are served by ranged reads of Storage
	// while a prefetch copies them in, so a rebalance does not wait for the state's bytes
	// (BenchmarkRebalance). A Store closed before its prefetch finished is dropped with its
	// directory, as every revoked or lost partition's is: the next owner restores from Storage.
	FullRestore bool
	// CheckpointInterval is how often, in wall time, a checkpoint is taken and the Kafka
	// transaction committed with it. Default 1 s.
	CheckpointInterval time.Duration
	// Retain is how many completed checkpoints each partition keeps (at least 2: the one the
	// committed offset names must survive a checkpoint whose transaction did not commit).
	// Default 2.
	Retain int
	// OutOfOrderness bounds event-time disorder: a partition's watermark is the largest event
	// time it has read minus OutOfOrderness (milliseconds). Default 0.
	OutOfOrderness int64
	// EventTime gives a record's event time in milliseconds. Default the record's timestamp.
	EventTime func(*kgo.Record) int64
	// Clock gives the processing time in milliseconds. Default time.Now().UnixMilli.
	Clock func() int64
	// Setup registers a partition's states after its Store is opened or restored (the same
	// names every time); what it returns is given to Process and OnTimer as Context.State.
	Setup func(*strata.Store) (any, error)
	// Process handles one input record.
	Process func(c *Context, key, value []byte, eventTime int64) error
	// OnTimer handles a fired timer (event time when eventTime is true).
	OnTimer func(c *Context, t strata.Timer[[]byte], eventTime bool) error
	// TransactionTimeout is the Kafka transaction timeout. Default 10 s.
	TransactionTimeout time.Duration
	// SessionTimeout is the consumer group session timeout. Default 10 s.
	SessionTimeout time.Duration
	// Delivery is how output reaches OutputTopic: ExactlyOnce (default) or AtLeastOnce.
	Delivery Delivery
	// ExtraOpts are appended to the kgo client options (logging, TLS, SASL).
	ExtraOpts []kgo.Opt
}

// Delivery is a Runner's output guarantee (Config.Delivery).
type Delivery int

const (
	// ExactlyOnce commits output, input offsets and checkpoint names in one Kafka
	// transaction per checkpoint (package doc, "Exactly once"): read_committed consumers of
	// the output see every record once, after the checkpoint that produced it committed.
	ExactlyOnce Delivery = iota
	// AtLeastOnce produces output without transactions, as it is emitted (idempotent
	// producer; visible at once, also to read_uncommitted consumers). Every checkpoint
	// flushes the output produced so far before the group's offsets and checkpoint names are
	// committed (OffsetCommit with metadata), so no output of a committed checkpoint is lost;
	// a runner that dies, or loses a partition, after emitting and before its next commit
	// has that output emitted again by the partition's next owner, which replays from the
	// committed checkpoint: duplicates, at most the output of one checkpoint interval of the
	// partition per failure. A refused offset commit (a rebalance under way) is counted in
	// Stats.Aborts and not rolled back: the state goes on, the next commit covers it.
	AtLeastOnce
)

// Context is what Process and OnTimer get: the partition's Store and states, its timer
// service, the Key of the record or timer, and Emit. Valid during the call only.
type Context struct {
	Store  *strata.Store
	State  any
	Timers *strata.TimerService[[]byte]
	// Key is the record's key in the Store (void namespace), or the timer's.
	Key       strata.Key
	Partition int32
	r         *Runner
}

// Emit produces key/value to Config.OutputTopic inside the running transaction: it becomes
// visible to read_committed consumers with the next checkpoint, or never if that checkpoint
// fails.
func (c *Context) Emit(key, value []byte) {
	c.r.emit(key, value)
}

// Stats are a runner's counters; safe to read from any goroutine.
type Stats struct {
	Events           int64         // records processed (including replays after an abort)
	Checkpoints      int64         // checkpoints committed with their transaction
	Aborts           int64         // transactions aborted (state rolled back); at least once, offset commits refused
	Restores         int64         // partitions restored from a checkpoint
	Fenced           int64         // checkpoints refused by Strata's writer fencing (strata.ErrFenced: another runner owns the partition now)
	Restarts         int64         // sessions started again after a transaction ended in doubt (Run, "Restarts")
	LastCheckpoint   time.Duration // duration of the last checkpoint + commit
	LastRestore      time.Duration // duration of the last partition restore
	OwnedPartitions  int
	StateBytesByPart map[int32]int64 // memory budget bytes in use per owned partition at the last checkpoint
	// Partitions has the figures of each owned input partition.
	Partitions map[int32]PartitionStats
}

// PartitionStats are the figures of one input partition a runner owns, since it took it (a
// partition restored after an abort starts again).
type PartitionStats struct {
	// Events is the records processed.
	Events int64
	// EventsPerSec is the records processed per second over the last checkpoint interval.
	EventsPerSec float64
	// Offset is the next input offset to read (-1: nothing read and nothing committed).
	Offset int64
	// Lag is the records of the partition not yet read, as of the last fetch: its last stable
	// offset (read_committed) minus Offset; -1 before the first fetch.
	Lag int64
	// Checkpoint is the duration of the partition Store's last Checkpoint call (the
	// synchronous part; the commit of the interval is Stats.LastCheckpoint).
	Checkpoint time.Duration
	// Restore is how long opening the partition's Store took when the runner took the
	// partition (restore from its committed checkpoint, or an empty Store).
	Restore time.Duration
	// StateBytes is the partition Store's memory budget bytes in use at the last checkpoint.
	StateBytes int64
}

// KeyGroupOf is the key group of key bytes, as strata.Store.Key assigns it (xxh3, Flink's
// murmur mix).
func KeyGroupOf(key []byte, maxParallelism int) int {
	return strata.AssignToKeyGroup(int32(uint32(xxh3.Hash(key))), maxParallelism)
}

// PartitionOf is the input partition that must carry key: the one whose key-group range holds
// the key's group. Producers of the input topic must partition with it (KeyGroupPartitioner).
func PartitionOf(key []byte, maxParallelism, partitions int) int32 {
	return int32(strata.ComputeOperatorIndexForKeyGroup(maxParallelism, partitions, KeyGroupOf(key, maxParallelism)))
}

// KeyGroupPartitioner is a kgo.Partitioner that sends each record to PartitionOf(its key).
func KeyGroupPartitioner(maxParallelism int) kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, n int) int { return int(PartitionOf(r.Key, maxParallelism, n)) }
	})
}

type partState struct {
	p       int32
	dir     string
	store   *strata.Store
	state   any
	timers  *strata.TimerService[[]byte]
	offset  int64 // next offset to read; -1 unknown (nothing read, nothing committed)
	maxTs   int64
	nextID  uint64
	pending uint64          // checkpoint id taken for the running End, 0 none
	labels  context.Context // pprof labels of the partition's work
	stats   PartitionStats
	since   int64     // stats.Events at the last checkpoint
	sinceT  time.Time // time of the last checkpoint (or of the restore)
}

// Runner runs a keyed process function over the partitions the consumer group assigns it.
// Run drives it from one goroutine; Stats may be read concurrently.
type Runner struct {
	cfg        Config
	sess       *kgo.GroupTransactSession // ExactlyOnce
	cl         *kgo.Client               // the consumer and producer (the session's, with ExactlyOnce)
	partitions int
	mu         sync.Mutex // guards parts against the group's callbacks
	parts      map[int32]*partState
	moved      bool  // a group callback ran since the last End (guarded by mu)
	fatal      error // from a callback, returned by Run
	emitErr    atomic.Pointer[error]
	ctx        Context
	stats      Stats
	statsMu    sync.Mutex
	crash      atomic.Bool     // test hook: stop without committing
	labels     context.Context // pprof labels of the runner's goroutine (Run's context plus job)
}

// New checks cfg and returns a Runner. Errors: ErrInvalidConfig naming the field.
func New(cfg Config) (*Runner, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, fmt.Errorf("%w: Brokers empty", ErrInvalidConfig)
	case cfg.Group == "" || cfg.InputTopic == "":
		return nil, fmt.Errorf("%w: Group and InputTopic are required", ErrInvalidConfig)
	case cfg.Storage == nil || cfg.LocalDir == "":
		return nil, fmt.Errorf("%w: Storage and LocalDir are required", ErrInvalidConfig)
	case cfg.Process == nil:
		return nil, fmt.Errorf("%w: Process is required", ErrInvalidConfig)
	case cfg.Delivery != ExactlyOnce && cfg.Delivery != AtLeastOnce:
		return nil, fmt.Errorf("%w: Delivery %d", ErrInvalidConfig, cfg.Delivery)
	}
	if err := checkpoint.ValidateOwner(cfg.Job + "-p00000"); err != nil || cfg.Job == "" || strings.Contains(cfg.Job, "/") {
		return nil, fmt.Errorf("%w: Job %q: %v", ErrInvalidConfig, cfg.Job, err)
	}
	if cfg.MaxParallelism == 0 {
		cfg.MaxParallelism = strata.DefaultMaxParallelism
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = time.Second
	}
	if cfg.Retain == 0 {
		cfg.Retain = 2
	}
	if cfg.Retain < 2 {
		return nil, fmt.Errorf("%w: Retain %d: at least 2", ErrInvalidConfig, cfg.Retain)
	}
	if cfg.EventTime == nil {
		cfg.EventTime = func(r *kgo.Record) int64 { return r.Timestamp.UnixMilli() }
	}
	if cfg.Clock == nil {
		cfg.Clock = func() int64 { return time.Now().UnixMilli() }
	}
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = 10 * time.Second
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	return &Runner{cfg: cfg, parts: map[int32]*partState{}}, nil
}

func (r *Runner) owner(p int32) string { return partitionOwner(r.cfg.Job, p) }

// partitionOwner is the checkpoint owner (lineage) of job's Store for input partition p.
func partitionOwner(job string, p int32) string { return fmt.Sprintf("%s-p%05d", job, p) }

// Stats returns a copy of the runner's counters.
func (r *Runner) Stats() Stats {
	r.statsMu.Lock()
	defer r.statsMu.Unlock()
	s := r.stats
	s.StateBytesByPart = make(map[int32]int64, len(r.stats.StateBytesByPart))
	for k, v := range r.stats.StateBytesByPart {
		s.StateBytesByPart[k] = v
	}
	s.Partitions = make(map[int32]PartitionStats, len(r.stats.Partitions))
	for k, v := range r.stats.Partitions {
		s.Partitions[k] = v
	}
	return s
}

// checkTopic reads the input topic's partition count and checks it divides MaxParallelism.
func (r *Runner) checkTopic(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, r.cfg.InputTopic)
	if err != nil {
		return fmt.Errorf("strata/kafka: metadata of %q: %w", r.cfg.InputTopic, err)
	}
	t, ok := td[r.cfg.InputTopic]
	if !ok || t.Err != nil {
		return fmt.Errorf("strata/kafka: topic %q: %v", r.cfg.InputTopic, t.Err)
	}
	n := len(t.Partitions)
	if n == 0 || r.cfg.MaxParallelism%n != 0 {
		return fmt.Errorf("%w: topic %q has %d partitions, MaxParallelism is %d", ErrPartitionCount, r.cfg.InputTopic, n, r.cfg.MaxParallelism)
	}
	r.partitions = n
	return nil
}

// Run joins the group and processes until ctx is done, then takes a last checkpoint, commits
// it and leaves the group (graceful shutdown: cancel ctx on SIGTERM). Errors: ErrPartitionCount,
// ErrForeignCheckpoint, a Store's or Kafka's fatal error.
//
// Restarts: when a transaction ends in doubt — EndTxn failed (PRODUCER_FENCED, the broker's
// transaction timeout) or the heartbeat that must precede the commit did not come within
// Config.TransactionTimeout (the runner stalled past its session and is out of the group) —
// Run drops every partition without committing, leaves the group and joins it again with a
// new transactional producer (Stats.Restarts); the partitions come back restored from what
// was committed. After maxRestarts (5) restarts without a commit in between it returns the
// error.
func (r *Runner) Run(ctx context.Context) error {
	meta, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...)}, r.cfg.ExtraOpts...)...)
	if err != nil {
		return err
	}
	err = r.checkTopic(ctx, meta)
	meta.Close()
	if err != nil {
		return err
	}
	// pprof labels: the job on the Run goroutine, the partition on its records' processing,
	// timers and checkpoint (profiles group by them: go tool pprof -tagfocus).
	r.labels = pprof.WithLabels(ctx, pprof.Labels("strata.kafka.job", r.cfg.Job))
	pprof.SetGoroutineLabels(r.labels)
	defer pprof.SetGoroutineLabels(ctx)
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.ConsumeTopics(r.cfg.InputTopic),
		kgo.SessionTimeout(r.cfg.SessionTimeout),
		// Three heartbeats per session, as Kafka's own default (10 s / 3 s): one late
		// heartbeat must not cost the membership (kgo's default, 3 s, is a whole session
		// of 3 s).
		kgo.HeartbeatInterval(min(3*time.Second, r.cfg.SessionTimeout/3)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(r.onAssigned),
		kgo.OnPartitionsRevoked(r.onRevoked),
		kgo.OnPartitionsLost(r.onLost),
	}
	if r.cfg.OutputTopic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(r.cfg.OutputTopic))
	}
	restarts, commits := 0, int64(0)
	for {
		if r.cfg.Delivery == AtLeastOnce {
			o := append(slices.Clip(opts), kgo.DisableAutoCommit(), kgo.RequiredAcks(kgo.AllISRAcks()))
			if r.cl, err = kgo.NewClient(append(o, r.cfg.ExtraOpts...)...); err != nil {
				return err
			}
		} else {
			// A new transactional id per session: a session that ended in doubt (below) is
			// never resumed, its open transaction is aborted by the broker (or was committed).
			txid := fmt.Sprintf("%s-%s-%d", r.cfg.Job, filepath.Base(r.cfg.LocalDir), time.Now().UnixNano())
			o := append(slices.Clip(opts), kgo.TransactionalID(txid), kgo.TransactionTimeout(r.cfg.TransactionTimeout))
			if r.sess, err = kgo.NewGroupTransactSession(append(o, r.cfg.ExtraOpts...)...); err != nil {
				return err
			}
			r.cl = r.sess.Client()
		}
		err = r.loop(ctx)
		// Leaves the group. After a crash (test hook) the open transaction is never
		// committed, and at least once the output since the last commit may be emitted again.
		r.cl.CloseAllowingRebalance()
		r.dropAll()
		if !errors.Is(err, errRestart) || r.crash.Load() {
			return err
		}
		if ctx.Err() != nil {
			// The last commit of a shutdown ended in doubt: the partitions were no longer
			// this runner's (or its producer was fenced); their next owner restores what
			// was committed, as after a crash. Nothing to report.
			return nil
		}
		// The transaction ended in doubt (a fenced producer, a group membership lost
		// during a stall): drop every partition without committing and join again with a
		// new session; the partitions come back through the group, restored from what was
		// committed (RequireStable waits until the doubtful transaction is resolved).
		if c := r.Stats().Checkpoints; c != commits {
			restarts, commits = 0, c
		}
		if restarts++; restarts > maxRestarts {
			return err
		}
		r.emitErr.Store(nil)
		r.statsMu.Lock()
		r.stats.Restarts++
		r.statsMu.Unlock()
	}
}

// maxRestarts bounds the sessions Run starts again without a commit in between.
const maxRestarts = 5

// errRestart marks an error after which Run starts a new session rather than returning.
var errRestart = errors.New("transaction in doubt")

func (r *Runner) loop(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	last := time.Now()
	for {
		if r.crash.Load() {
			return nil
		}
		stopping := ctx.Err() != nil
		if !stopping {
			pctx, cancel := context.WithTimeout(ctx, max(time.Until(last.Add(r.cfg.CheckpointInterval)), time.Millisecond))
			fs := r.cl.PollFetches(pctx)
			cancel()
			if r.crash.Load() {
				return nil
			}
			if fs.IsClientClosed() {
				return nil
			}
			for _, fe := range fs.Errors() {
				// Errors of the group (an empty topic: joins, heartbeats) and retriable
				// ones are the client's to retry; the session aborts the transaction
				// if the group moved meanwhile.
				if fe.Topic != "" && !kerr.IsRetriable(fe.Err) && !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
					return fmt.Errorf("strata/kafka: fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
				}
			}
			if err := r.process(fs); err != nil {
				return err
			}
		}
		if stopping || time.Since(last) >= r.cfg.CheckpointInterval {
			// The last commit of a shutdown runs on: ctx is already done.
			if err := r.commit(context.WithoutCancel(ctx)); err != nil {
				return err
			}
			last = time.Now()
			r.cl.AllowRebalance()
			if stopping {
				return nil
			}
			if err := r.begin(); err != nil {
				return err
			}
		}
	}
}

func (r *Runner) process(fs kgo.Fetches) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal != nil {
		return r.fatal
	}
	touched := map[int32]*partState{}
	var n int64
	var perr error
	defer pprof.SetGoroutineLabels(r.labels)
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if perr != nil || len(ftp.Records) == 0 {
			return
		}
		ps := r.parts[ftp.Partition]
		if ps == nil {
			perr = fmt.Errorf("strata/kafka: invariant: record of partition %d, not owned", ftp.Partition)
			return
		}
		pprof.SetGoroutineLabels(ps.labels)
		for _, rec := range ftp.Records {
			ts := r.cfg.EventTime(rec)
			c := r.context(ps)
			c.Key = ps.store.Key(rec.Key)
			if !ps.store.KeyGroups().Contains(c.Key.KeyGroup()) {
				perr = fmt.Errorf("strata/kafka: record at %s/%d@%d: key group %d is not in the partition's range %v (produce with KeyGroupPartitioner): %w",
					rec.Topic, rec.Partition, rec.Offset, c.Key.KeyGroup(), ps.store.KeyGroups(), strata.ErrKeyGroupOutOfRange)
				return
			}
			if err := r.cfg.Process(c, rec.Key, rec.Value, ts); err != nil {
				perr = err
				return
			}
			ps.offset = rec.Offset + 1
			if ts > ps.maxTs {
				ps.maxTs = ts
			}
			ps.stats.Events++
			n++
		}
		touched[ps.p] = ps
		end := ftp.LastStableOffset
		if end < 0 {
			end = ftp.HighWatermark
		}
		ps.stats.Lag = max(end-ps.offset, 0)
	})
	if perr != nil {
		return perr
	}
	now := r.cfg.Clock()
	for _, ps := range r.parts {
		pprof.SetGoroutineLabels(ps.labels)
		c := r.context(ps)
		if _, ok := touched[ps.p]; ok && ps.maxTs != minTs {
			if err := ps.timers.AdvanceWatermark(ps.maxTs-r.cfg.OutOfOrderness, func(t strata.Timer[[]byte]) error { return r.fire(c, t, true) }); err != nil {
				return err
			}
		}
		if err := ps.timers.AdvanceProcessingTime(now, func(t strata.Timer[[]byte]) error { return r.fire(c, t, false) }); err != nil {
			return err
		}
	}
	r.statsMu.Lock()
	r.stats.Events += n
	for p := range touched {
		r.publish(r.parts[p])
	}
	r.statsMu.Unlock()
	return nil
}

// publish copies ps's figures into Stats. Called with r.mu and r.statsMu held.
func (r *Runner) publish(ps *partState) {
	if r.stats.Partitions == nil {
		r.stats.Partitions = map[int32]PartitionStats{}
	}
	ps.stats.Offset = ps.offset
	r.stats.Partitions[ps.p] = ps.stats
}

const minTs = -1 << 63

// begin starts the transaction of the next checkpoint interval (ExactlyOnce).
func (r *Runner) begin() error {
	if r.sess == nil {
		return nil
	}
	return r.sess.Begin()
}

func (r *Runner) fire(c *Context, t strata.Timer[[]byte], ev bool) error {
	if r.cfg.OnTimer == nil {
		return nil
	}
	c.Key = t.Key
	return r.cfg.OnTimer(c, t, ev)
}

func (r *Runner) context(ps *partState) *Context {
	r.ctx = Context{Store: ps.store, State: ps.state, Timers: ps.timers, Partition: ps.p, r: r}
	return &r.ctx
}

func (r *Runner) emit(key, value []byte) {
	rec := &kgo.Record{Key: append([]byte(nil), key...), Value: append([]byte(nil), value...)}
	r.cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		if err != nil {
			r.emitErr.CompareAndSwap(nil, &err)
		}
	})
}

// commit checkpoints every owned partition and commits the transaction with the offsets and
// the checkpoint ids; on an abort it rolls every partition back to its committed checkpoint.
func (r *Runner) commit(ctx context.Context) error {
	start := time.Now()
	r.mu.Lock()
	cks := map[int32]ck{}
	var ckErr error
	for _, ps := range r.parts {
		if ps.offset < 0 {
			continue
		}
		pos := Position{Job: r.cfg.Job, Topic: r.cfg.InputTopic, Partition: ps.p, Offset: ps.offset}.Append(nil)
		pprof.SetGoroutineLabels(ps.labels)
		t := time.Now()
		_, err := ps.store.Checkpoint(ctx, ps.nextID, pos)
		ps.stats.Checkpoint = time.Since(t)
		if err != nil {
			ckErr = err
			break
		}
		ps.pending = ps.nextID
		cks[ps.p] = ck{ps.nextID, ps.offset}
	}
	pprof.SetGoroutineLabels(r.labels)
	r.mu.Unlock()
	if r.sess == nil {
		return r.commitAtLeastOnce(ctx, start, cks, ckErr)
	}
	want := kgo.TryCommit
	if ckErr != nil || r.emitErr.Load() != nil {
		want = kgo.TryAbort
	}
	// End waits for a heartbeat that proves the group generation still holds (KIP-447). A
	// runner stalled past its session (a long GC, a starved process) is out of the group and
	// the client's group management waits for AllowRebalance, which only follows End: without
	// a bound End would wait forever. The bound is the transaction timeout, after which the
	// broker aborts the transaction anyway; End then aborts and the state is rolled back.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.TransactionTimeout)
	defer cancel()
	ectx := kgo.PreTxnCommitFnContext(tctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		var topic *kmsg.TxnOffsetCommitRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == r.cfg.InputTopic {
				topic = &req.Topics[i]
			}
		}
		if topic == nil {
			req.Topics = append(req.Topics, kmsg.NewTxnOffsetCommitRequestTopic())
			topic = &req.Topics[len(req.Topics)-1]
			topic.Topic = r.cfg.InputTopic
		}
		seen := map[int32]bool{}
		for i := range topic.Partitions {
			p := &topic.Partitions[i]
			if c, ok := cks[p.Partition]; ok {
				p.Offset, p.LeaderEpoch = c.offset, -1
				md := r.metadata(c.id)
				p.Metadata = &md
				seen[p.Partition] = true
			}
		}
		for p, c := range cks {
			if !seen[p] {
				tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				tp.Partition, tp.Offset, tp.LeaderEpoch = p, c.offset, -1
				md := r.metadata(c.id)
				tp.Metadata = &md
				topic.Partitions = append(topic.Partitions, tp)
			}
		}
		return nil
	})
	committed, err := r.sess.End(ectx, want)
	if err != nil {
		return fmt.Errorf("strata/kafka: end transaction: %w (%w)", err, errRestart)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	moved := r.moved
	r.moved = false
	for _, ps := range r.parts {
		if ps.pending == 0 {
			continue
		}
		if committed {
			if err := ps.store.NotifyCheckpointComplete(ps.pending); err != nil {
				return err
			}
		}
		ps.nextID = ps.pending + 1
		ps.pending = 0
	}
	if errors.Is(ckErr, strata.ErrFenced) {
		r.statsMu.Lock()
		r.stats.Fenced++
		r.statsMu.Unlock()
	}
	if !committed {
		if ckErr != nil && !errors.Is(ckErr, strata.ErrFenced) && !errors.Is(ckErr, strata.ErrCheckpointExists) {
			return ckErr
		}
		r.emitErr.Store(nil)
		r.statsMu.Lock()
		r.stats.Aborts++
		r.statsMu.Unlock()
		if !moved || errors.Is(ckErr, strata.ErrFenced) {
			// Aborted with no rebalance seen (the group refused the commit) or with a
			// checkpoint refused by Strata's fencing: this runner may be a zombie whose
			// client has not learnt it yet. Restoring its partitions in place would claim
			// their lineages (the restored Stores' first checkpoint writes a fence) and
			// fence the checkpoints their real owners have committed since: drop them
			// without restoring and join the group again (Run), which restores what the
			// group assigns.
			return fmt.Errorf("strata/kafka: transaction aborted without a rebalance (checkpoint: %v): %w", ckErr, errRestart)
		}
		// A rebalance ran during the transaction (the session aborted it): the group told
		// the client what it owns, and the client went back to the committed offsets of
		// those partitions: so does the state.
		ps := make([]int32, 0, len(r.parts))
		for p := range r.parts {
			ps = append(ps, p)
		}
		for _, p := range ps {
			r.drop(p)
			if err := r.restore(ctx, r.cl, p); err != nil {
				return err
			}
		}
		return nil
	}
	r.committed(start)
	return nil
}

// ck is a partition's checkpoint of a commit: its id and the input offset it holds.
type ck struct {
	id     uint64
	offset int64
}

// committed records a commit in Stats. Called with r.mu held.
func (r *Runner) committed(start time.Time) {
	r.statsMu.Lock()
	r.stats.Checkpoints++
	r.stats.LastCheckpoint = time.Since(start)
	if r.stats.StateBytesByPart == nil {
		r.stats.StateBytesByPart = map[int32]int64{}
	}
	now := time.Now()
	for p, ps := range r.parts {
		b := ps.store.Stats().Budget.Used
		r.stats.StateBytesByPart[p] = b
		ps.stats.StateBytes = b
		if d := now.Sub(ps.sinceT).Seconds(); d > 0 {
			ps.stats.EventsPerSec = float64(ps.stats.Events-ps.since) / d
		}
		ps.since, ps.sinceT = ps.stats.Events, now
		r.publish(ps)
	}
	r.statsMu.Unlock()
}

// commitAtLeastOnce ends a checkpoint interval at least once (Delivery): the output emitted so
// far is flushed, then the offsets and checkpoint names of cks are committed. A checkpoint or
// produce that failed stops the runner (the output of the interval may be lost otherwise; a
// new runner replays it from the last commit); a refused commit does not.
func (r *Runner) commitAtLeastOnce(ctx context.Context, start time.Time, cks map[int32]ck, ckErr error) error {
	if errors.Is(ckErr, strata.ErrFenced) {
		// Another runner restored a partition of this one: a zombie. Start again (Run).
		r.statsMu.Lock()
		r.stats.Fenced++
		r.statsMu.Unlock()
		return fmt.Errorf("strata/kafka: checkpoint: %w (%w)", ckErr, errRestart)
	}
	if ckErr != nil {
		return fmt.Errorf("strata/kafka: checkpoint: %w", ckErr)
	}
	if err := r.cl.Flush(ctx); err != nil {
		return fmt.Errorf("strata/kafka: flush output: %w", err)
	}
	if e := r.emitErr.Load(); e != nil {
		return fmt.Errorf("strata/kafka: produce output: %w", *e)
	}
	var cerr error
	if len(cks) > 0 {
		offs := map[int32]kgo.EpochOffset{}
		for p, c := range cks {
			offs[p] = kgo.EpochOffset{Epoch: -1, Offset: c.offset}
		}
		cctx := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
			for i := range req.Topics {
				t := &req.Topics[i]
				if t.Topic != r.cfg.InputTopic {
					continue
				}
				for j := range t.Partitions {
					if c, ok := cks[t.Partitions[j].Partition]; ok {
						md := r.metadata(c.id)
						t.Partitions[j].Metadata = &md
					}
				}
			}
			return nil
		})
		r.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{r.cfg.InputTopic: offs},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				if err != nil {
					cerr = err
					return
				}
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
							cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
						}
					}
				}
			})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ps := range r.parts {
		if ps.pending == 0 {
			continue
		}
		if cerr == nil {
			if err := ps.store.NotifyCheckpointComplete(ps.pending); err != nil {
				return err
			}
		}
		ps.nextID = ps.pending + 1
		ps.pending = 0
	}
	if cerr != nil {
		r.statsMu.Lock()
		r.stats.Aborts++
		r.statsMu.Unlock()
		return nil
	}
	r.committed(start)
	return nil
}

func (r *Runner) metadata(id uint64) string {
	return "strata/" + r.cfg.Job + "/" + strconv.FormatUint(id, 10)
}

func fetchCommitted(ctx context.Context, cl *kgo.Client, group, topic string, p int32) (int64, string, error) {
	for {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		req.RequireStable = true
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic = topic
		t.Partitions = []int32{p}
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, "", err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnstableOffsetCommit) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return 0, "", err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition != p {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					if errors.Is(err, kerr.UnstableOffsetCommit) {
						time.Sleep(50 * time.Millisecond)
						goto again
					}
					return 0, "", err
				}
				md := ""
				if rp.Metadata != nil {
					md = *rp.Metadata
				}
				return rp.Offset, md, nil
			}
		}
		return -1, "", nil
	again:
	}
}

// committedCheckpoint loads the handle of the checkpoint that committed offset off with
// metadata md names for partition p, and checks that it is this job's, of this partition, at
// that offset (ErrForeignCheckpoint otherwise).
func committedCheckpoint(ctx context.Context, cfg *Config, owner string, p int32, off int64, md string) (strata.CheckpointHandle, error) {
	prefix := "strata/" + cfg.Job + "/"
	if !strings.HasPrefix(md, prefix) {
		return strata.CheckpointHandle{}, fmt.Errorf("%w: group %q committed %s/%d with metadata %q, not of job %q", ErrForeignCheckpoint, cfg.Group, cfg.InputTopic, p, md, cfg.Job)
	}
	id, perr := strconv.ParseUint(md[len(prefix):], 10, 64)
	if perr != nil {
		return strata.CheckpointHandle{}, fmt.Errorf("%w: metadata %q: %v", ErrForeignCheckpoint, md, perr)
	}
	h, lerr := strata.LoadCheckpoint(ctx, cfg.Storage, owner, id)
	if lerr != nil {
		return strata.CheckpointHandle{}, fmt.Errorf("strata/kafka: checkpoint %d of %s (committed for %s/%d at %d): %w", id, owner, cfg.InputTopic, p, off, lerr)
	}
	pos, derr := DecodePosition(h.InputPosition)
	if derr != nil {
		return strata.CheckpointHandle{}, fmt.Errorf("%w: checkpoint %d of %s: %w", ErrForeignCheckpoint, id, owner, derr)
	}
	if pos.Job != cfg.Job || pos.Topic != cfg.InputTopic || pos.Partition != p || pos.Offset != off {
		return strata.CheckpointHandle{}, fmt.Errorf("%w: checkpoint %d of %s holds %+v, the group committed %s/%d at %d", ErrForeignCheckpoint, id, owner, pos, cfg.InputTopic, p, off)
	}
	return h, nil
}

// CommittedCheckpoint returns the checkpoint of input partition p that the job's consumer
// group has committed (the one a runner taking p over restores) and the committed offset,
// the next input offset to read; ok is false when the group committed nothing for p. It is
// for tools that inspect a job's state from outside (restore h with strata.Restore and
// read it): cl is any client of the cluster; cfg needs Group, Job, InputTopic and Storage.
// It waits out a transaction in flight (RequireStable). Errors: ErrForeignCheckpoint (an
// offset without a checkpoint, or another job's), Kafka's, the storage's.
func CommittedCheckpoint(ctx context.Context, cl *kgo.Client, cfg Config, p int32) (h strata.CheckpointHandle, offset int64, ok bool, err error) {
	off, md, err := fetchCommitted(ctx, cl, cfg.Group, cfg.InputTopic, p)
	if err != nil {
		return h, 0, false, fmt.Errorf("strata/kafka: committed offset of %s/%d: %w", cfg.InputTopic, p, err)
	}
	if off < 0 {
		return h, -1, false, nil
	}
	if md == "" {
		return h, off, false, fmt.Errorf("%w: group %q committed offset %d of %s/%d without a checkpoint", ErrForeignCheckpoint, cfg.Group, off, cfg.InputTopic, p)
	}
	h, err = committedCheckpoint(ctx, &cfg, partitionOwner(cfg.Job, p), p, off, md)
	return h, off, err == nil, err
}

// restore opens partition p's Store: from the checkpoint the committed offset's metadata
// names, or empty when nothing was committed; cl asks for the committed offset (waiting out
// transactions in flight, KIP-447 RequireStable). Called with r.mu held.
//
// cl is the client of the callback that asks, never r.cl: the group's first assignment can
// reach onAssigned before Run has stored the new client in r.cl (CI saw a nil client so).
func (r *Runner) restore(ctx context.Context, cl *kgo.Client, p int32) error {
	start := time.Now()
	off, md, err := fetchCommitted(ctx, cl, r.cfg.Group, r.cfg.InputTopic, p)
	if err != nil {
		return fmt.Errorf("strata/kafka: committed offset of %s/%d: %w", r.cfg.InputTopic, p, err)
	}
	kg := strata.ComputeKeyGroupRangeForOperatorIndex(r.cfg.MaxParallelism, r.partitions, int(p))
	opts := r.cfg.StoreOptions
	opts.MaxParallelism = r.cfg.MaxParallelism
	opts.KeyGroups = &kg
	opts.Parallelism, opts.SubtaskIndex = r.partitions, int(p)
	opts.Checkpoint.Storage = r.cfg.Storage
	opts.Checkpoint.Owner = r.owner(p)
	opts.Checkpoint.Retain = r.cfg.Retain
	opts.Checkpoint.RestoreMode = strata.Claim // its own lineage (Config.StoreOptions)
	opts.Checkpoint.LazyRestore = !r.cfg.FullRestore
	if err := os.MkdirAll(r.cfg.LocalDir, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(r.cfg.LocalDir, fmt.Sprintf("p%05d-", p))
	if err != nil {
		return err
	}
	ids, err := checkpoint.ListCheckpoints(ctx, r.cfg.Storage, r.owner(p))
	if err != nil {
		return err
	}
	var next uint64 = 1
	if len(ids) > 0 {
		next = ids[len(ids)-1] + 1
	}
	var st *strata.Store
	restored := false
	if off < 0 || md == "" {
		if off >= 0 {
			return fmt.Errorf("%w: group %q committed offset %d of %s/%d without a checkpoint", ErrForeignCheckpoint, r.cfg.Group, off, r.cfg.InputTopic, p)
		}
		st, err = strata.Open(dir, opts)
		off = -1
	} else {
		h, cerr := committedCheckpoint(ctx, &r.cfg, r.owner(p), p, off, md)
		if cerr != nil {
			return cerr
		}
		st, err = strata.Restore(dir, opts, r.cfg.Storage, h)
		restored = true
	}
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("strata/kafka: partition %d: %w", p, err)
	}
	ps := &partState{p: p, dir: dir, store: st, offset: off, maxTs: minTs, nextID: next, sinceT: time.Now(),
		labels: pprof.WithLabels(r.labels, pprof.Labels("strata.kafka.partition", strconv.Itoa(int(p))))}
	ps.stats.Lag = -1
	if r.cfg.Setup != nil {
		if ps.state, err = r.cfg.Setup(st); err != nil {
			st.Close()
			os.RemoveAll(dir)
			return err
		}
	}
	if ps.timers, err = strata.NewTimerService(st, strata.TimerServiceDescriptor[[]byte]{Name: "kafka.timers", NamespaceCodec: strata.Bytes}); err != nil {
		st.Close()
		os.RemoveAll(dir)
		return err
	}
	r.parts[p] = ps
	r.statsMu.Lock()
	if restored {
		r.stats.Restores++
		r.stats.LastRestore = time.Since(start)
	}
	r.stats.OwnedPartitions = len(r.parts)
	ps.stats.Restore = time.Since(start)
	r.publish(ps)
	r.statsMu.Unlock()
	return nil
}

// drop closes partition p's Store and removes its directory (its state lives on in its
// checkpoints). Called with r.mu held.
func (r *Runner) drop(p int32) {
	ps := r.parts[p]
	if ps == nil {
		return
	}
	delete(r.parts, p)
	ps.store.Close()
	os.RemoveAll(ps.dir)
	r.statsMu.Lock()
	r.stats.OwnedPartitions = len(r.parts)
	delete(r.stats.StateBytesByPart, p)
	delete(r.stats.Partitions, p)
	r.statsMu.Unlock()
}

func (r *Runner) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.parts {
		r.drop(p)
	}
}

func (r *Runner) onAssigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moved = true
	for _, p := range m[r.cfg.InputTopic] {
		if r.fatal != nil {
			return
		}
		r.drop(p)
		if err := r.restore(ctx, cl, p); err != nil {
			r.fatal = err
		}
	}
}

// onRevoked runs only between transactions (BlockRebalanceOnPoll, and AllowRebalance right
// after each commit), so every revoked partition's state is in the checkpoint just
// committed: release it.
func (r *Runner) onRevoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moved = true
	for _, p := range m[r.cfg.InputTopic] {
		r.drop(p)
	}
}

// onLost drops the lost partitions' state without committing anything.
func (r *Runner) onLost(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	r.onRevoked(ctx, cl, m)
}
