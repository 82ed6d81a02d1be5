// Package kafka runs a keyed process function over a Kafka topic on several processes, with
// its keyed state in Strata Stores restored per input partition from checkpoints (issue 25).
// Membership, failure detection and partition assignment are Kafka's consumer-group protocol
// (franz-go's kgo); the checkpoints (a checkpoint.Storage every runner shares: a directory or
// S3) hold the state; the group's committed offsets say which checkpoint is current.
//
// # Model
//
// The input topic has P partitions and the job MaxParallelism key groups; P must divide
// MaxParallelism (ErrPartitionCount, checked when Run starts). Input partition p owns the fixed
// key-group range strata.ComputeKeyGroupRangeForOperatorIndex(MaxParallelism, P, p), so its
// producers must send each key to PartitionOf(key) (KeyGroupPartitioner); a record outside its
// partition's range fails with strata.ErrKeyGroupOutOfRange. Each assigned partition has its
// own Store (Options.KeyGroups its range, Checkpoint.Owner "<Job>-p<p>", five digits), its
// states (Config.Setup) and one timer service with []byte namespaces. A runner processes its
// partitions from one goroutine (Run): Process per record, then per partition the watermark
// (largest event time read minus Config.OutOfOrderness) and the processing time
// (Config.Clock) advance, firing OnTimer. Context.Emit produces to Config.OutputTopic.
//
// # Exactly once: a checkpoint per transaction
//
// Output is transactional (kgo.GroupTransactSession, KIP-447). Every CheckpointInterval the
// runner, between polls:
//
//  1. checkpoints each owned partition's Store with id n_p and input position
//     Position{Job, Topic, p, offset} (the next offset to read; position.go has its bytes);
//  2. ends the transaction with a commit whose TxnOffsetCommit (PreTxnCommitFnContext) sets,
//     for each partition, the offset to the checkpoint's and the offset metadata to
//     "strata/<Job>/<n_p>" — output, offsets and the checkpoint pointer commit atomically;
//  3. on commit, NotifyCheckpointComplete(n_p); on abort after a rebalance during the
//     transaction every owned partition is dropped and restored from the committed state, to
//     which the client has also reset its positions; on abort without a rebalance seen (the
//     group refused the commit), or with a checkpoint Strata's fencing refused, the runner may
//     be a zombie: it drops every partition without restoring and joins the group again
//     (restoring in place would claim the lineages and fence checkpoints the real owners
//     committed since); a transaction in doubt (EndTxn failed, or the heartbeat the commit
//     waits for did not come within TransactionTimeout) does the same (Stats.Restarts);
//  4. allows the group to rebalance (BlockRebalanceOnPoll: the callbacks run only here).
//
// On partitions assigned, a partition's committed offset is fetched with RequireStable (a
// transaction in flight is waited out); its metadata names the checkpoint to restore
// (strata.LoadCheckpoint + strata.Restore) and the checkpoint's Position must agree (job, topic,
// partition, offset), else ErrForeignCheckpoint; the client resumes at the committed offset,
// which is the checkpoint's. Nothing committed: an empty Store, read from the start. A
// checkpoint whose transaction aborted is never restored: the committed metadata names the one
// before it, which Retain >= 2 keeps. On revoke (only between transactions) the state was just
// committed: the Store is closed and its directory removed. On lost: the same, committing
// nothing (the session aborts the transaction).
//
// Fencing: a runner that lost its partitions but still runs (a zombie) cannot commit output:
// Kafka refuses its TxnOffsetCommit (the group generation, KIP-447) or its producer epoch; a
// checkpoint it still writes is not named by any committed offset, so it is never restored,
// and Strata's own writer fencing (strata.ErrFenced) refuses its later checkpoints once the
// new owner checkpointed the lineage. New checkpoint ids continue above every id in the
// lineage (checkpoint.ListCheckpoints), so a zombie's orphaned ids are skipped.
//
// # At least once
//
// With Config.Delivery AtLeastOnce there is no transaction: output is produced as it is
// emitted; every CheckpointInterval the runner checkpoints each partition, flushes the output,
// then commits the offsets with the checkpoint names (OffsetCommit metadata). Nothing a
// commit covers is lost; a failure re-emits what the partition emitted since its last commit
// (at most one interval per failure).
//
// # Operations
//
// Stats has the runner's counters and, per owned partition (PartitionStats), events, events/s
// over the last interval, offset, lag (last stable offset minus offset), the duration of the
// last Store checkpoint and of the restore, and the state's memory bytes. Run's goroutine
// carries the pprof label strata.kafka.job; the processing, timers and checkpoint of a
// partition also strata.kafka.partition (go tool pprof -tagfocus).
//
// # Shutdown
//
// Run returns when its context is done, after a last checkpoint and commit, and leaves the
// group: wire SIGTERM with signal.NotifyContext (bench/cmd/flightkafka does).
//
// # Benchmarks
//
// bench_test.go, on kfake in the benchmark's process (cd kafka && go test -run '^$' -bench .
// -benchtime 1x; bench/cmd/results -only kafka tables them in bench/RESULTS.md):
// BenchmarkEndToEndLatency, a record's produce call to its output read by a read_committed
// consumer, exactly once at three checkpoint intervals and at least once beside; and
// BenchmarkRebalance, a partition's move to a runner that restores its whole Store
// (-kafka.state bytes of state, 256 MiB by default) from checkpoints linked or copied. Its
// restore modes are one table (rebalanceRestores), both RestoreMode Claim (a partition
// restores its own lineage, so the new owner's first checkpoint is incremental): lazy-claim,
// the runner's default (Config.FullRestore false), and full-claim.
//
// # Not yet
//
//   - A real cluster has not been tried: the tests and bench/cmd/flightkafka run on kfake.
package kafka
