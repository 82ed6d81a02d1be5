package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProducerFenced forces PRODUCER_FENCED directly: a second session opens with runner a's
// transactional id (fixed through Config.ExtraOpts, which come after the runner's own options:
// the runner draws a new id per session otherwise) and produces in a transaction of its own.
// Its InitProducerID bumps the producer epoch and aborts a's open transaction, so a's next
// produce or EndTxn is refused (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH): a's commit fails,
// the transaction ends in doubt, and a must drop every partition without committing and
// join the group again with a new session (Stats.Restarts), restoring its partitions from
// what was committed — as TestZombieFenced does for a zombie that Strata's checkpoint
// fencing refuses. The committed output is exactly the model's, without the second
// session's aborted record.
func TestProducerFenced(t *testing.T) {
	e := newEnv(t, testParts)
	const n = 4000
	const txid = "count-a-fixed"
	e.produce(0, n/2)
	a := e.startWith("a", func(c *Config) { c.ExtraOpts = append(c.ExtraOpts, kgo.TransactionalID(txid)) })
	// Every partition read and its offset committed with a checkpoint: the restart restores.
	waitEvents(t, []*running{a}, n/2)
	for c0, end := a.r.Stats().Checkpoints, time.Now().Add(20*time.Second); a.r.Stats().Checkpoints < c0+2 || a.r.Stats().OwnedPartitions != testParts; {
		if time.Now().After(end) {
			t.Fatalf("a did not take every partition and commit: %+v", a.r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := a.r.Stats()

	// The other session: same transactional id, one record in a transaction it aborts.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	z, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.TransactionalID(txid), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := z.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := z.ProduceSync(ctx, &kgo.Record{Key: []byte("fencer"), Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatalf("the second session's produce: %v", err)
	}
	if err := z.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("the second session's abort: %v", err)
	}
	z.Close()

	// a emits again (the second half of the input), with its fenced epoch.
	e.produce(n/2, n)
	for end := time.Now().Add(20 * time.Second); a.r.Stats().Restarts == before.Restarts; {
		if time.Now().After(end) {
			t.Fatalf("a's fenced producer did not end its session: %+v", a.r.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	restarted := a.r.Stats()
	want := model(n)
	got := e.readOutput(total(want), 30*time.Second)
	// After the restart a owns every partition again, restored, and commits.
	for end := time.Now().Add(20 * time.Second); ; {
		s := a.r.Stats()
		if s.OwnedPartitions == testParts && s.Checkpoints > restarted.Checkpoints {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a did not rejoin, restore its partitions and commit after the restart: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	sa := a.r.Stats()
	a.stop(t)
	diff(t, got, want)
	if sa.Restores < before.Restores+testParts {
		t.Errorf("a restored %d partitions after the restart (%d before it), want all %d from the committed checkpoints", sa.Restores-before.Restores, before.Restores, testParts)
	}
	t.Logf("fenced: %d restarts, %d aborts, %d partitions restored after it", sa.Restarts, sa.Aborts, sa.Restores-before.Restores)
}
