package kafkatest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pollTimeout bounds one poll, so that Read notices the end of its linger and ctx promptly.
const pollTimeout = 100 * time.Millisecond

// Read consumes topic on brokers from its start as a read_committed consumer (the output a job
// committed: with Delivery ExactlyOnce, nothing of a transaction that has not committed, and
// nothing after an open transaction's first record until it ends) and calls fn, from Read's
// goroutine, for each record, in partition order. It returns once it has read want records
// and then linger more (what duplicates would add), or when ctx is done; n is the records
// read. A short read is not an error: the caller judges n. Errors: the client's (brokers it
// cannot use). extra are appended to the client's options (TLS, SASL).
func Read(ctx context.Context, brokers []string, topic string, want int, linger time.Duration, fn func(*kgo.Record), extra ...kgo.Opt) (n int, err error) {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var end time.Time // zero until want records are read
	for ctx.Err() == nil && (end.IsZero() || time.Now().Before(end)) {
		pctx, cancel := context.WithTimeout(ctx, pollTimeout)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			fn(r)
			n++
		})
		if n >= want && end.IsZero() {
			end = time.Now().Add(linger)
		}
	}
	return n, nil
}

// Output is Read collecting the records as a multiset: the count of each "key=value" string
// (key and value as bytes, unquoted).
func Output(ctx context.Context, brokers []string, topic string, want int, linger time.Duration, extra ...kgo.Opt) (map[string]int, error) {
	got := map[string]int{}
	_, err := Read(ctx, brokers, topic, want, linger, func(r *kgo.Record) { got[string(r.Key)+"="+string(r.Value)]++ }, extra...)
	return got, err
}
