package strata

import (
	"errors"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	shared := NewBudget(128 << 20)
	small := NewBudget(1 << 20)
	for _, tc := range []struct {
		name  string
		opts  Options
		field string // "" = valid
	}{
		{"zero", Options{}, ""},
		{"full", Options{MaxParallelism: 10, KeyGroups: &KeyGroupRange{Start: 3, End: 5}, MemoryBudget: 64 << 20, SegmentSize: 16 << 20}, ""},
		{"keygroup0", Options{MaxParallelism: 10, KeyGroups: &KeyGroupRange{Start: 0, End: 0}}, ""},
		{"shared", Options{SharedBudget: shared}, ""},
		{"maxP negative", Options{MaxParallelism: -1}, "MaxParallelism"},
		{"maxP too large", Options{MaxParallelism: 1<<15 + 1}, "MaxParallelism"},
		{"maxP upper bound", Options{MaxParallelism: 1 << 15}, ""},
		{"range beyond maxP", Options{MaxParallelism: 10, KeyGroups: &KeyGroupRange{Start: 5, End: 10}}, "KeyGroups"},
		{"range beyond default maxP", Options{KeyGroups: &KeyGroupRange{Start: 0, End: 128}}, "KeyGroups"},
		{"range inverted", Options{KeyGroups: &KeyGroupRange{Start: 5, End: 4}}, "KeyGroups"},
		{"range negative", Options{KeyGroups: &KeyGroupRange{Start: -1, End: 4}}, "KeyGroups"},
		{"budget negative", Options{MemoryBudget: -1}, "MemoryBudget"},
		{"budget below segment", Options{MemoryBudget: 2 << 20}, "MemoryBudget"},
		{"budget above the smallest segment", Options{MemoryBudget: 4 << 20}, ""},
		{"segment 2 MiB", Options{MemoryBudget: 64 << 20, SegmentSize: 2 << 20}, ""},
		{"budget below explicit segment", Options{MemoryBudget: 64 << 20, SegmentSize: 64 << 20}, "MemoryBudget"},
		{"small budget, default segment", Options{MemoryBudget: 32 << 20}, ""},
		{"budget and shared", Options{MemoryBudget: 1 << 30, SharedBudget: shared}, "MemoryBudget"},
		{"shared too small", Options{SharedBudget: small}, "SharedBudget"},
		{"segment odd", Options{SegmentSize: 1 << 20}, "SegmentSize"},
		{"open files negative", Options{MaxOpenFiles: -1}, "MaxOpenFiles"},
		{"open files few", Options{MaxOpenFiles: 8}, ""},
		{"segment negative", Options{SegmentSize: -1}, "SegmentSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("Validate() = %v, want ErrInvalidOptions", err)
			}
			if !strings.Contains(err.Error(), "Options."+tc.field) {
				t.Fatalf("Validate() = %q, does not name Options.%s", err, tc.field)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.MaxParallelism != 128 || *o.KeyGroups != (KeyGroupRange{Start: 0, End: 127}) || o.MemoryBudget != 1<<30 ||
		o.SegmentSize != 32<<20 {
		t.Fatalf("defaults: %+v", o)
	}
	// The default segment size follows the budget: 1/32 of its limit, 2 to 64 MiB.
	for _, tc := range []struct {
		budget int64
		seg    int
	}{{3 << 20, 2 << 20}, {64 << 20, 2 << 20}, {127 << 20, 2 << 20}, {128 << 20, 4 << 20}, {255 << 20, 4 << 20}, {256 << 20, 8 << 20}, {511 << 20, 8 << 20}, {512 << 20, 16 << 20},
		{1<<30 - 1, 16 << 20}, {1 << 30, 32 << 20}, {2 << 30, 64 << 20}, {8 << 30, 64 << 20}} {
		if got := (Options{MemoryBudget: tc.budget}).withDefaults().SegmentSize; got != tc.seg {
			t.Errorf("MemoryBudget %d: default SegmentSize %d, want %d", tc.budget, got, tc.seg)
		}
		if got := (Options{SharedBudget: NewBudget(tc.budget)}).withDefaults().SegmentSize; got != tc.seg {
			t.Errorf("SharedBudget %d: default SegmentSize %d, want %d", tc.budget, got, tc.seg)
		}
	}
	if got := (Options{MemoryBudget: 256 << 20, SegmentSize: 64 << 20}).withDefaults().SegmentSize; got != 64<<20 {
		t.Errorf("explicit SegmentSize changed to %d", got)
	}
	r := KeyGroupRange{Start: 1, End: 2}
	o = Options{MaxParallelism: 4, KeyGroups: &r}.withDefaults()
	r.End = 3
	if o.KeyGroups.End != 2 {
		t.Fatal("withDefaults must copy KeyGroups")
	}
}
