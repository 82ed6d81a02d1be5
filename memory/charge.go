package memory

import "fmt"

// Charge accounts n bytes that live outside any mapping — a buffer on the Go heap, such as the
// changelog's record buffers — to purpose p, under the same limit and reserve rules as Map
// (invariants 1 and 8): it fails with ErrMemoryBudget, charging nothing, if the bytes would take
// the budget above its limit (or, for a writer's purpose, into the reserve). n is not rounded to
// pages: the caller decides its granularity (charge in chunks, not per record, to keep the
// shared counter off the hot path). Every successful Charge is undone by a Refund of the same
// purpose and bytes.
//
// Errors: ErrInvalidPurpose for p >= NumPurposes, ErrInvalidSize for n <= 0, ErrMemoryBudget.
// The ErrMemoryBudget error is one preallocated value (no allocation on refusal, so a caller
// retrying under backpressure allocates nothing). Safe for concurrent use; one compare-and-swap
// loop, no syscall.
func (b *Budget) Charge(n int64, p Purpose) error {
	if !p.valid() {
		return fmt.Errorf("%w: %d (charging %d bytes)", ErrInvalidPurpose, p, n)
	}
	if n <= 0 {
		return fmt.Errorf("%w: charge of %d bytes for %s", ErrInvalidSize, n, p)
	}
	if n > b.limit || !b.reserve(n, p) {
		if n > b.limit {
			b.denied.Add(1)
		}
		return errChargeRefused
	}
	b.byPurpose[p].Add(n)
	return nil
}

// errChargeRefused is Charge's refusal; preallocated (see Charge).
var errChargeRefused = fmt.Errorf("%w: charge refused", ErrMemoryBudget)

// Refund returns n bytes a Charge of purpose p accounted. Refunding more than was charged is a
// broken invariant and panics, as does an invalid purpose or a negative n; n == 0 does nothing.
// Safe for concurrent use.
func (b *Budget) Refund(n int64, p Purpose) {
	if n == 0 {
		return
	}
	if !p.valid() || n < 0 {
		panic(fmt.Sprintf("strata: invariant: memory refund of %d bytes for %s", n, p))
	}
	if b.byPurpose[p].Add(-n) < 0 {
		panic(fmt.Sprintf("strata: invariant: memory refund of %d bytes for %s: more than charged", n, p))
	}
	b.used.Add(-n)
}
