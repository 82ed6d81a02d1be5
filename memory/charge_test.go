package memory

import (
	"errors"
	"sync"
	"testing"
)

// TestCharge: charged bytes count in Used and UsedBy, are refused past the limit (and, for the
// changelog, a writer's purpose, past Limit − Reserve) without changing anything, and Refund
// gives them back.
func TestCharge(t *testing.T) {
	b := NewBudget(1000)
	if err := b.Charge(600, PurposeChangelog); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 600 || b.UsedBy(PurposeChangelog) != 600 || b.Stats().Mappings != 0 {
		t.Fatalf("used %d, by changelog %d, stats %+v", b.Used(), b.UsedBy(PurposeChangelog), b.Stats())
	}
	if err := b.Charge(401, PurposeOther); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("charge past the limit: %v, want ErrMemoryBudget", err)
	}
	if b.Used() != 600 || b.Stats().Denied != 1 {
		t.Fatalf("a refused charge changed the budget: %+v", b.Stats())
	}
	if err := b.Charge(2000, PurposeOther); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("charge larger than the limit: %v", err)
	}
	b.AddReserve(300)
	if err := b.Charge(200, PurposeChangelog); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("changelog charge into the reserve: %v, want ErrMemoryBudget", err)
	}
	if err := b.Charge(400, PurposeOther); err != nil {
		t.Fatalf("background purpose may take the reserve: %v", err)
	}
	b.Refund(400, PurposeOther)
	b.Refund(600, PurposeChangelog)
	if st := b.Stats(); st.Used != 0 || st.ByPurpose != [NumPurposes]int64{} {
		t.Fatalf("after refunds: %+v", st)
	}
	if err := b.Charge(0, PurposeOther); !errors.Is(err, ErrInvalidSize) {
		t.Fatalf("Charge(0): %v", err)
	}
	if err := b.Charge(1, NumPurposes); !errors.Is(err, ErrInvalidPurpose) {
		t.Fatalf("Charge(bad purpose): %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("refund of more than charged did not panic")
			}
		}()
		b.Refund(1, PurposeChangelog)
	}()
}

// TestChargeConcurrent: concurrent charges never exceed the limit together, and a refused
// charge allocates nothing.
func TestChargeConcurrent(t *testing.T) {
	b := NewBudget(1 << 20)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held int64
			for range 2000 {
				if b.Charge(4096, PurposeChangelog) == nil {
					held += 4096
				}
				if u := b.Used(); u > b.Limit() {
					t.Errorf("used %d > limit", u)
				}
				if held > 64<<10 {
					b.Refund(held, PurposeChangelog)
					held = 0
				}
			}
			b.Refund(held, PurposeChangelog)
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Fatalf("used %d after every refund", b.Used())
	}
	full := NewBudget(10)
	if n := testing.AllocsPerRun(100, func() { _ = full.Charge(100, PurposeChangelog) }); n != 0 {
		t.Fatalf("a refused Charge allocates %v times", n)
	}
}
