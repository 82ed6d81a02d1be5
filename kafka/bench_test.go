package kafka

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	strata "github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/kafka/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The benchmarks of issue 25 on kfake, in this process: the broker shares the machine (and
// its cores) with the runners and the clients, so the figures bound what a real cluster's
// network adds from below, not from above. Run them alone, one iteration each:
//
//	cd kafka && go test -run '^$' -bench 'BenchmarkEndToEndLatency|BenchmarkRebalance' -benchtime 1x .
var (
	benchRate    = flag.Int("kafka.rate", 2000, "BenchmarkEndToEndLatency: input records per second")
	benchSeconds = flag.Duration("kafka.duration", 5*time.Second, "BenchmarkEndToEndLatency: how long each iteration produces")
	benchState   = flag.Int64("kafka.state", 256<<20, "BenchmarkRebalance: bytes of state in the partition that moves (values; keys besides)")
)

// latencyParts is BenchmarkEndToEndLatency's input partition count.
const latencyParts = 4

// BenchmarkEndToEndLatency measures the end-to-end latency of a job on Kafka: from the call
// that produces an input record (its value holds the time) to its output record read by a
// read_committed consumer that polls all along. One runner owns the 4 input partitions; the
// job keeps a count per key (a Get and a Put) and emits the input's value. Input is paced
// at -kafka.rate records/s for -kafka.duration. With exactly-once the output becomes
// visible when the transaction of its checkpoint interval commits, so the latency is about
// half an interval on average plus the checkpoint and the commit; at-least-once output is
// visible as produced (the producer's linger, 10 ms by default, is in both). Metrics over
// every record of every iteration: p50-ms, p99-ms, max-ms, and events/s, the records read
// per second from the first produce to the last read; at the end of each iteration, the
// last interval's commit (Stats.LastCheckpoint: the Stores' checkpoints, the flush, the
// offsets, the heartbeat and EndTxn), commit-ms, and the sum of the 4 partitions' Store
// checkpoints in it (synchronous part), store-checkpoints-ms.
func BenchmarkEndToEndLatency(b *testing.B) {
	for _, c := range []struct {
		delivery Delivery
		interval time.Duration
	}{
		{ExactlyOnce, 100 * time.Millisecond},
		{ExactlyOnce, 300 * time.Millisecond},
		{ExactlyOnce, time.Second},
		{AtLeastOnce, 100 * time.Millisecond},
		{AtLeastOnce, time.Second},
	} {
		name := "delivery=exactly-once"
		if c.delivery == AtLeastOnce {
			name = "delivery=at-least-once"
		}
		b.Run(fmt.Sprintf("%s/interval=%v", name, c.interval), func(b *testing.B) {
			b.ReportAllocs()
			var lat []time.Duration
			var events int
			var elapsed, commit, stores time.Duration
			for range b.N {
				l, d, s := latencyRun(b, c.delivery, c.interval)
				lat = append(lat, l...)
				events += len(l)
				elapsed += d
				commit += s.LastCheckpoint
				for _, p := range s.Partitions {
					stores += p.Checkpoint
				}
			}
			slices.Sort(lat)
			q := func(f float64) float64 {
				return float64(lat[min(len(lat)-1, int(f*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(1), "max-ms")
			b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(commit)/float64(time.Millisecond)/float64(b.N), "commit-ms")
			b.ReportMetric(float64(stores)/float64(time.Millisecond)/float64(b.N), "store-checkpoints-ms")
		})
	}
}

// latencyRun is one iteration of BenchmarkEndToEndLatency: the latency of every record, the
// time from the first produce to the last read, and the runner's Stats at the end.
func latencyRun(b *testing.B, delivery Delivery, interval time.Duration) ([]time.Duration, time.Duration, Stats) {
	b.StopTimer()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(latencyParts, "in"), kfake.SeedTopics(latencyParts, "out"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	storage, err := checkpoint.NewDirStorage(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	brokers := c.ListenAddrs()
	r, err := New(Config{
		Brokers: brokers, Group: "g", Job: "latency", InputTopic: "in", OutputTopic: "out",
		MaxParallelism: testMaxP, Storage: storage, LocalDir: b.TempDir(),
		StoreOptions:       strata.Options{MemoryBudget: 16 << 20},
		CheckpointInterval: interval,
		Delivery:           delivery,
		Setup: func(s *strata.Store) (any, error) {
			return strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
		},
		Process: func(x *Context, key, value []byte, _ int64) error {
			st := x.State.(*strata.ValueState[int64])
			n, _, err := st.Get(x.Key)
			if err != nil {
				return err
			}
			if err := st.Put(x.Key, n+1); err != nil {
				return err
			}
			x.Emit(key, value)
			return nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	for end := time.Now().Add(20 * time.Second); r.Stats().OwnedPartitions != latencyParts; {
		if time.Now().After(end) {
			b.Fatalf("the runner did not take the partitions: %+v", r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := int(float64(*benchRate) * benchSeconds.Seconds())
	lat := make([]time.Duration, 0, n)
	var last time.Time
	read := make(chan error, 1)
	rctx, rcancel := context.WithTimeout(context.Background(), *benchSeconds+10*interval+30*time.Second)
	defer rcancel()
	go func() {
		_, err := kafkatest.Read(rctx, brokers, "out", n, 0, func(rec *kgo.Record) {
			now := time.Now()
			lat = append(lat, now.Sub(time.Unix(0, int64(binary.LittleEndian.Uint64(rec.Value)))))
			last = now
		})
		read <- err
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(KeyGroupPartitioner(testMaxP)))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	b.StartTimer()
	// Paced: a tick every 10 ms produces the records due by then.
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; i < n; {
		due := min(n, int(time.Since(start).Seconds()*float64(*benchRate))+1)
		for ; i < due; i++ {
			v := binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
			cl.Produce(context.Background(), &kgo.Record{Key: testKey(i), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		<-tick.C
	}
	tick.Stop()
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if len(lat) < n {
		b.Fatalf("read %d output records of %d", len(lat), n)
	}
	return lat, last.Sub(start), r.Stats()
}

// rebalanceRestores are the restore modes BenchmarkRebalance compares (its restore= level):
// how the new owner opens the moved partition's Store, always with RestoreMode Claim (set by
// the runner: Config.StoreOptions), whose first checkpoint is incremental over the restored
// objects. lazy-claim: the runner's default, a lazy restore (strata's LazyRestore: records
// flow once the manifest is read, tables are fetched behind them); full-claim:
// Config.FullRestore, every table fetched and checked first. (Before the runner set Claim,
// its NoClaim restore's first checkpoint stored the whole state again before the
// partition's first record: 3.4 s vs 1.9 s for a 256 MiB partition, linked.)
var rebalanceRestores = []struct {
	name string
	edit func(*Config)
}{
	{"full-claim", func(c *Config) { c.FullRestore = true }},
	{"lazy-claim", nil},
}

// BenchmarkRebalance measures a partition's move between runners: from the request to the
// old owner to let it go (its graceful shutdown: a last checkpoint, the commit, LeaveGroup)
// to its first record processed on the new owner, which was waiting in the group with no
// partition, got it in the rebalance, restored its Store from the committed checkpoint and
// fetched from the committed offset. The checkpoints are in a DirStorage on the local disk:
// storage=link hard-links the Store's files into it and back (the fastest a restore gets),
// storage=copy hides the DirStorage's type so that every file is streamed both ways (as
// from another file system; an object store adds its network to that). The input topic has
// one partition, holding -kafka.state bytes of state (1 KiB values under 16-byte keys,
// incompressible, written by the old owner before the timer starts; MemoryBudget 64 MiB, so
// most of it is in LSM files). Metrics, means over the iterations: rebalance-ms (the whole
// move) = handover-ms (the old owner's shutdown) + group-ms (the group's rebalance until
// the new owner's restore begins; the new owner learns of the rebalance from a heartbeat,
// a third of the 3 s session) + restore-ms (the new owner's restore of the Store,
// PartitionStats.Restore) + fetch-ms (from the partition showing in the new owner's Stats,
// polled every 5 ms, to its first record processed); state-MiB; and checkpoint-MiB, the
// bytes in the shared checkpoint storage at the end (every retained checkpoint; they share
// files).
func BenchmarkRebalance(b *testing.B) {
	mib := *benchState >> 20
	for _, m := range rebalanceRestores {
		for _, copied := range []bool{false, true} {
			storage := "link"
			if copied {
				storage = "copy"
			}
			b.Run(fmt.Sprintf("restore=%s/storage=%s/state=%dMiB", m.name, storage, mib), func(b *testing.B) {
				b.ReportAllocs()
				var total, restore, handover, fetch time.Duration
				var stored int64
				for range b.N {
					t, r, h, f, n := rebalanceRun(b, m.edit, copied)
					fetch += f
					total += t
					restore += r
					handover += h
					stored += n
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
				b.ReportMetric(ms(total), "rebalance-ms")
				b.ReportMetric(ms(restore), "restore-ms")
				b.ReportMetric(ms(handover), "handover-ms")
				b.ReportMetric(ms(fetch), "fetch-ms")
				b.ReportMetric(ms(total-restore-handover-fetch), "group-ms")
				b.ReportMetric(float64(mib), "state-MiB")
				b.ReportMetric(float64(stored)/float64(b.N)/(1<<20), "checkpoint-MiB")
			})
		}
	}
}

// copyStorage hides a DirStorage's type: checkpoints and restores then stream every file
// through PutReader and Get instead of hard-linking it (checkpoint's putFile and GetFile), as
// with a storage on another file system or an object store (without its network).
type copyStorage struct{ checkpoint.Storage }

// fillEntries and fillValue: each input record of BenchmarkRebalance's fill writes
// fillEntries values of fillValue bytes.
const (
	fillEntries = 1024
	fillValue   = 1024
)

// rebalanceRun is one iteration of BenchmarkRebalance: its times, and the bytes in the
// checkpoint storage.
func rebalanceRun(b *testing.B, edit func(*Config), copied bool) (total, restore, handover, fetch time.Duration, stored int64) {
	b.StopTimer()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.SeedTopics(1, "in"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sdir := b.TempDir()
	var storage checkpoint.Storage
	storage, err = checkpoint.NewDirStorage(sdir)
	if err != nil {
		b.Fatal(err)
	}
	if copied {
		storage = copyStorage{storage}
	}
	brokers := c.ListenAddrs()
	var first atomic.Int64 // UnixNano of the new owner's first record
	config := func(name string, newOwner bool) Config {
		cfg := Config{
			Brokers: brokers, Group: "g", Job: "rebalance", InputTopic: "in",
			MaxParallelism: testMaxP, Storage: storage, LocalDir: b.TempDir() + "/" + name,
			StoreOptions:       strata.Options{MemoryBudget: 64 << 20},
			CheckpointInterval: time.Second,
			SessionTimeout:     3 * time.Second,
			Setup: func(s *strata.Store) (any, error) {
				return strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "blob", Codec: strata.Bytes})
			},
			Process: func(x *Context, key, value []byte, _ int64) error {
				if newOwner {
					first.CompareAndSwap(0, time.Now().UnixNano())
					return nil
				}
				st := x.State.(*strata.ValueState[[]byte])
				seed, _ := strconv.ParseUint(string(value), 10, 64)
				rng := rand.New(rand.NewPCG(seed, 1))
				v := make([]byte, fillValue)
				k := make([]byte, 0, 16)
				for i := range fillEntries {
					for j := 0; j < len(v); j += 8 {
						binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
					}
					k = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(k[:0], seed), uint64(i))
					if err := st.Put(x.Store.Key(k), v); err != nil {
						return err
					}
				}
				return nil
			},
		}
		if edit != nil {
			edit(&cfg)
		}
		return cfg
	}
	start := func(cfg Config) (*Runner, context.CancelFunc, chan error) {
		r, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		return r, cancel, done
	}
	wait := func(what string, limit time.Duration, ok func() bool) {
		for end := time.Now().Add(limit); !ok(); {
			if time.Now().After(end) {
				b.Fatalf("waited %v: %s", limit, what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// The old owner fills the state and commits it.
	fills := int(*benchState / (fillEntries * fillValue))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	rs := make([]*kgo.Record, fills)
	for i := range rs {
		rs[i] = &kgo.Record{Key: []byte("fill"), Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	a, stopA, doneA := start(config("a", false))
	defer stopA()
	wait("the old owner fills the state and commits it", 30*time.Minute, func() bool {
		p, ok := a.Stats().Partitions[0]
		return ok && p.Offset == int64(fills)
	})
	c0 := a.Stats().Checkpoints
	wait("the old owner commits the filled state", time.Minute, func() bool { return a.Stats().Checkpoints > c0 })

	// The new owner joins the group and gets nothing (one partition, sticky assignment).
	nb, stopB, doneB := start(config("b", true))
	defer stopB()
	adm := kadm.NewClient(cl)
	wait("the new owner joins the group", time.Minute, func() bool {
		gs, err := adm.DescribeGroups(context.Background(), "g")
		if err != nil {
			return false
		}
		g := gs["g"]
		return g.State == "Stable" && len(g.Members) == 2
	})
	if nb.Stats().OwnedPartitions != 0 || a.Stats().OwnedPartitions != 1 {
		b.Fatalf("the partition moved when the new owner joined: %+v, %+v", a.Stats(), nb.Stats())
	}

	// The move: the old owner lets the partition go; a record waits for the new one.
	b.StartTimer()
	t0 := time.Now()
	stopA()
	if err := <-doneA; err != nil {
		b.Fatal(err)
	}
	handover = time.Since(t0)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("probe"), Value: []byte("0")}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	var owned time.Time // when the new owner's Stats first show the partition (restored), to 5 ms
	wait("the new owner processes a record", 5*time.Minute, func() bool {
		if owned.IsZero() && nb.Stats().OwnedPartitions == 1 {
			owned = time.Now()
		}
		return first.Load() != 0
	})
	b.StopTimer()
	total = time.Unix(0, first.Load()).Sub(t0)
	if owned.IsZero() || owned.After(time.Unix(0, first.Load())) {
		owned = time.Unix(0, first.Load())
	}
	fetch = time.Unix(0, first.Load()).Sub(owned)
	restore = nb.Stats().Partitions[0].Restore
	stopB()
	if err := <-doneB; err != nil {
		b.Fatal(err)
	}
	err = filepath.WalkDir(sdir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				stored += i.Size()
			}
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return total, restore, handover, fetch, stored
}
