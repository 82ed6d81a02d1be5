package suite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awss3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/s3"
)

// Checkpoints, restores and savepoints on S3-compatible object storage (issue 24,
// "Benchmarks"), beside the same on a local directory, in one run: the state, the updates and
// the figures of checkpoint_test.go, with Strata checkpointing through package checkpoint/s3.
//
//	BenchmarkS3Checkpoint/state=256MiB/impl=strata/storage=local
//	BenchmarkS3Checkpoint/state=256MiB/impl=strata/storage=s3-versitygw
//	BenchmarkS3Restore/state=256MiB/impl=strata/storage=s3-versitygw/mode=plain (scaleout, scalein)
//	BenchmarkSavepoint/state=256MiB/impl=strata/storage=s3-versitygw/kind=canonical (native)
//
// The S3 server is the one in the environment — STRATA_S3_BENCH_ENDPOINT, its credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, its name in STRATA_S3_BENCH_SERVER, as
// `scripts/versitygw.sh run` sets them: versitygw on 127.0.0.1 with a posix back-end on the
// local disk — and, without one, gofakes3 in-process (an in-memory back-end behind an
// httptest server on 127.0.0.1). The row names which it was: storage=s3-versitygw or
// storage=s3-gofakes3. Either way every byte crosses a loopback HTTP connection, signed, with
// Content-MD5, in 16 MiB parts above 16 MiB (checkpoint/s3's defaults); neither adds the
// latency or bandwidth limit of a remote store, so the S3 rows measure the protocol's cost,
// not a network's.
//
// The local and S3 rows have a Store each (storage=local is not the Checkpoint rows' Store),
// loaded the same way and checkpointed once in full before the leaf; the S3 Store's
// Options.Checkpoint.Storage is the S3 storage, so every incremental checkpoint uploads its new
// tables, where the local one links them.
//
//   - S3Checkpoint: benchStrataCheckpoint's figures (sync and async p50/p99, bytes/ckpt, …).
//   - S3Restore: benchRestore's (restore-ms, subtask-max-ms, x-plain) from that storage:
//     a restore from S3 downloads every table it needs into the new directory.
//   - Savepoint: Store.Savepoint of the whole state into the same storage (under the savepoint
//     lineage), then strata.Restore of it into a new directory and a first read, each
//     -sprounds times (at least; b.N if larger); write-ms and restore-ms are medians,
//     write-s/GiB and restore-s/GiB the same over the state's GiB (keys × 116 B), sp-MiB the
//     savepoint's objects. Each savepoint is deleted after its restore (untimed). A native
//     savepoint is a checkpoint of the Store copied object by object (checkpoint.CopyNative:
//     on S3 a download and an upload of every object); a canonical one is the state written as
//     one stream of logical entries, and its restore writes every entry through the Store's
//     write path.
//
// These rows are off by default (-s3): they load two more states of each size and upload
// several times the state; `cd bench && go run ./cmd/results -only s3` runs them under
// scripts/versitygw.sh and writes their section of RESULTS.md.

var (
	flagS3       = flag.Bool("s3", false, "run the S3 and savepoint rows (BenchmarkS3Checkpoint, BenchmarkS3Restore, BenchmarkSavepoint); cmd/results -only s3 runs them")
	flagSpRounds = flag.Int("sprounds", 1, "savepoints written and restored per BenchmarkSavepoint leaf (at least; b.N if larger)")
	flagS3Small  = flag.Bool("s3small", false, "the S3 and savepoint rows at state=16MiB only (a smoke run of the code, not a figure)")
)

// s3Sizes are the sizes of the S3 rows: ckSizes, or 16 MiB alone with -s3small.
func s3Sizes() []ckSize {
	if *flagS3Small {
		return []ckSize{{"16MiB", 16 << 20, false}}
	}
	return ckSizes
}

// s3Bucket is the bucket the S3 rows create and fill.
const s3Bucket = "strata-bench"

// s3Server returns the S3 rows' storage label: "s3-versitygw" (or "s3-" and the first word of
// STRATA_S3_BENCH_SERVER) with a server in the environment, else "s3-gofakes3".
func s3Server() string {
	if os.Getenv("STRATA_S3_BENCH_ENDPOINT") == "" {
		return "s3-gofakes3"
	}
	name := "server"
	if f := firstWord(os.Getenv("STRATA_S3_BENCH_SERVER")); f != "" {
		name = f
	}
	return "s3-" + name
}

func firstWord(s string) string {
	for i, r := range s {
		if r == ' ' {
			return s[:i]
		}
	}
	return s
}

// s3Wheres are the storages of the S3 rows, as the storage= element of their names.
func s3Wheres() []string { return []string{"local", s3Server()} }

var (
	s3Fake     *httptest.Server // the in-process gofakes3, started once
	s3Endpoint string           // the endpoint in use, its bucket created
	s3Run      = fmt.Sprintf("run%d-%d", os.Getpid(), time.Now().Unix())
)

// s3Storage returns a checkpoint/s3 Storage of the endpoint in use (creating the bucket on first
// use) under the prefix <run>/<name>, so that runs on one server do not meet.
func s3Storage(name string) (*s3.Storage, error) {
	ep, key, secret := os.Getenv("STRATA_S3_BENCH_ENDPOINT"), os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if ep == "" {
		if s3Fake == nil {
			s3Fake = httptest.NewServer(gofakes3.New(s3mem.New()).Server())
		}
		ep, key, secret = s3Fake.URL, "bench", "bench-secret"
	}
	if s3Endpoint != ep {
		c := awss3.New(awss3.Options{
			BaseEndpoint: aws.String(ep), UsePathStyle: true, Region: "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
		})
		_, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(s3Bucket)})
		var owned *awss3types.BucketAlreadyOwnedByYou
		var exists *awss3types.BucketAlreadyExists
		if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
			return nil, fmt.Errorf("create bucket %s at %s: %w", s3Bucket, ep, err)
		}
		s3Endpoint = ep
	}
	return s3.New(s3.Options{Bucket: s3Bucket, Prefix: s3Run + "/" + name, Endpoint: ep,
		AccessKeyID: key, SecretAccessKey: secret})
}

func s3Skip(b *testing.B) {
	if !*flagS3 {
		b.Skip("the S3 and savepoint rows are off by default (they load two more states and upload several " +
			"times each): run with -s3, or cd bench && go run ./cmd/results -only s3")
	}
}

func BenchmarkS3Checkpoint(b *testing.B) {
	s3Skip(b)
	for _, c := range s3Sizes() {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			b.Run("impl=strata", func(b *testing.B) {
				for _, where := range s3Wheres() {
					b.Run("storage="+where, func(b *testing.B) { benchStrataCheckpoint(b, ckStrataOn(b, c, where)) })
				}
			})
		})
	}
}

func BenchmarkSavepoint(b *testing.B) {
	s3Skip(b)
	for _, c := range s3Sizes() {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			b.Run("impl=strata", func(b *testing.B) {
				for _, where := range s3Wheres() {
					b.Run("storage="+where, func(b *testing.B) {
						for _, kind := range []strata.SavepointKind{strata.SavepointCanonical, strata.SavepointNative} {
							name := "kind=canonical"
							if kind == strata.SavepointNative {
								name = "kind=native"
							}
							b.Run(name, func(b *testing.B) { benchSavepoint(b, ckStrataOn(b, c, where), kind) })
						}
					})
				}
			})
		})
	}
}

func BenchmarkS3Restore(b *testing.B) {
	s3Skip(b)
	for _, c := range s3Sizes() {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			b.Run("impl=strata", func(b *testing.B) {
				for _, where := range s3Wheres() {
					b.Run("storage="+where, func(b *testing.B) {
						for _, mode := range []string{"plain", "scaleout", "scalein"} {
							b.Run("mode="+mode, func(b *testing.B) {
								st := ckStrataOn(b, c, where)
								st.closeStore(b) // restores run alone, as after a failure
								benchRestore(b, st, mode)
							})
						}
					})
				}
			})
		})
	}
}

// reopen restores the state's Store from its last checkpoint when a Restore row closed it
// (untimed): the Savepoint rows need a running Store.
func (st *ckStrataState) reopen(b *testing.B) {
	if st.s != nil {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	s, err := strata.Restore(filepath.Join(st.dir, "store"), ckOptions(st.storage, nil), st.storage, st.last)
	if err != nil {
		b.Fatal(err)
	}
	v, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes})
	if err != nil {
		b.Fatal(err)
	}
	st.s, st.v = s, v
}

// deleteLineage deletes every object of owner's lineage in storage and returns their bytes.
func deleteLineage(ctx context.Context, storage checkpoint.Storage, owner string) (int64, error) {
	objs, err := storage.List(ctx, owner+"/")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, o := range objs {
		n += o.Size
		if err := storage.Delete(ctx, o.Name); err != nil {
			return n, err
		}
	}
	return n, nil
}

func benchSavepoint(b *testing.B, st *ckStrataState, kind strata.SavepointKind) {
	st.reopen(b)
	ctx := context.Background()
	rounds := max(b.N, *flagSpRounds)
	var write, restore []int64
	var spBytes int64
	var stats strata.RestoreStats
	var m ckMeter
	m.begin(b)
	for range rounds {
		st.taken++ // a native savepoint is a checkpoint of the Store's lineage first
		t0 := time.Now()
		h, err := st.s.Savepoint(ctx, st.storage, kind, st.taken, nil)
		write = append(write, int64(time.Since(t0)))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, dir := st.restoreOne(b, nil, h)
		restore = append(restore, int64(time.Since(t1)))
		b.StopTimer()
		stats = s.RestoreStats()
		discard(b, s, dir)
		n, err := deleteLineage(ctx, st.storage, h.Owner)
		if err != nil {
			b.Fatalf("delete savepoint %d of %q: %v", h.ID, h.Owner, err)
		}
		spBytes = n
		b.StartTimer()
	}
	var sum int64
	for i := range write {
		sum += write[i] + restore[i]
	}
	m.end(b, rounds, time.Duration(sum))
	gib := float64(st.size.keys()*(ckKeySize+ckValueSize)) / (1 << 30)
	w, r := ms(Percentile(write, 0.5)), ms(Percentile(restore, 0.5))
	b.ReportMetric(w, "write-ms")
	b.ReportMetric(r, "restore-ms")
	b.ReportMetric(w/1e3/gib, "write-s/GiB")
	b.ReportMetric(r/1e3/gib, "restore-s/GiB")
	b.ReportMetric(float64(spBytes)/(1<<20), "sp-MiB")
	b.Logf("%v savepoint: write %v, restore %v (%d tables, %d MiB; %d canonical entries), max write %v",
		kind, time.Duration(Percentile(write, 0.5)), time.Duration(Percentile(restore, 0.5)), stats.Tables,
		stats.Bytes>>20, stats.CanonicalEntries, time.Duration(slices.Max(write)))
}
