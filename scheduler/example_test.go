package scheduler_test

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/scheduler"
)

func Example() {
	s, err := scheduler.New(scheduler.Options{Workers: 2})
	if err != nil {
		panic(err)
	}
	defer s.Close() // waits for every worker

	h, err := s.Submit(scheduler.Compaction, "slice-bucket-7", func(ctx context.Context) error {
		// Long loops check ctx so that Cancel and Close take effect promptly.
		return ctx.Err()
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Wait(), s.Stats().Classes[scheduler.Compaction].Completed)
	// Output: <nil> 1
}
