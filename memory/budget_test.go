package memory

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

var ps = int(pageSize)

func TestPurposeString(t *testing.T) {
	tests := []struct {
		p    Purpose
		want string
	}{
		{PurposeFreshData, "fresh-data"},
		{PurposeFreshIndex, "fresh-index"},
		{PurposeSlice, "slice"},
		{PurposeBlockCache, "block-cache"},
		{PurposeOther, "other"},
		{PurposeChangelog, "changelog"},
		{PurposeOperatorState, "operator-state"},
		{PurposeTimers, "timers"},
		{PurposeHotTier, "hot-tier"},
		{NumPurposes, "purpose(9)"},
		{255, "purpose(255)"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("Purpose(%d).String() = %q, want %q", uint8(tt.p), got, tt.want)
		}
	}
}

func TestNewBudgetRejectsNonPositiveLimit(t *testing.T) {
	for _, limit := range []int64{0, -1, -1 << 40} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatalf("NewBudget(%d) did not panic", limit)
				}
				if s, _ := r.(string); !strings.HasPrefix(s, "strata: invariant: ") {
					t.Fatalf("NewBudget(%d) panic %q lacks invariant prefix", limit, r)
				}
			}()
			NewBudget(limit)
		}()
	}
}

func TestBudgetMapSequence(t *testing.T) {
	type step struct {
		size    int   // > 0: Map(size); < 0: release the -size'th live region (1-based)
		wantErr error // for Map
		wantLen int   // len(Bytes()) for a successful Map
		used    int64 // Used() after the step
	}
	tests := []struct {
		name  string
		limit int64
		steps []step
	}{
		{"exact-fit", int64(3 * ps), []step{
			{size: 1, wantLen: ps, used: int64(ps)},
			{size: ps + 1, wantLen: 2 * ps, used: int64(3 * ps)},
			{size: 1, wantErr: ErrMemoryBudget, used: int64(3 * ps)},
			{size: -1, used: int64(2 * ps)},
			{size: ps, wantLen: ps, used: int64(3 * ps)},
		}},
		{"larger-than-limit", int64(ps), []step{
			{size: ps + 1, wantErr: ErrMemoryBudget, used: 0},
			{size: ps, wantLen: ps, used: int64(ps)},
		}},
		{"limit-not-page-multiple", int64(ps + ps/2), []step{
			{size: ps/2 + 1, wantLen: ps, used: int64(ps)},
			{size: 1, wantErr: ErrMemoryBudget, used: int64(ps)},
		}},
		{"huge-request-no-overflow", 1 << 40, []step{
			{size: int(^uint(0) >> 1), wantErr: ErrMemoryBudget, used: 0},
			{size: int(^uint(0)>>1) - ps + 2, wantErr: ErrMemoryBudget, used: 0},
		}},
		{"zero-size", int64(ps), []step{
			{size: 0, wantErr: ErrInvalidSize},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.limit)
			var live []*Region
			for i, s := range tt.steps {
				if s.size < 0 {
					r := live[-s.size-1]
					live = append(live[:-s.size-1], live[-s.size:]...)
					if err := r.Release(); err != nil {
						t.Fatalf("step %d: Release: %v", i, err)
					}
				} else {
					r, err := b.Map(s.size, PurposeOther)
					if s.wantErr != nil {
						if !errors.Is(err, s.wantErr) || r != nil {
							t.Fatalf("step %d: Map(%d) = %v, %v; want %v", i, s.size, r, err, s.wantErr)
						}
					} else {
						if err != nil {
							t.Fatalf("step %d: Map(%d): %v", i, s.size, err)
						}
						if got := len(r.Bytes()); got != s.wantLen || cap(r.Bytes()) != s.wantLen {
							t.Fatalf("step %d: len/cap = %d/%d, want %d", i, got, cap(r.Bytes()), s.wantLen)
						}
						live = append(live, r)
					}
				}
				if got := b.Used(); got != s.used {
					t.Fatalf("step %d: Used() = %d, want %d", i, got, s.used)
				}
				if b.Used() > b.Limit() {
					t.Fatalf("step %d: Used %d > Limit %d", i, b.Used(), b.Limit())
				}
			}
			for _, r := range live {
				if err := r.Release(); err != nil {
					t.Fatal(err)
				}
			}
			if st := b.Stats(); st.Used != 0 || st.Mappings != 0 {
				t.Fatalf("after releasing all: %+v", st)
			}
		})
	}
}

func TestMapInvalidArguments(t *testing.T) {
	b := NewBudget(1 << 20)
	for _, size := range []int{0, -1, -ps} {
		if _, err := b.Map(size, PurposeOther); !errors.Is(err, ErrInvalidSize) {
			t.Fatalf("Map(%d): err = %v, want ErrInvalidSize", size, err)
		}
	}
	for _, p := range []Purpose{NumPurposes, 200} {
		if _, err := b.Map(ps, p); !errors.Is(err, ErrInvalidPurpose) {
			t.Fatalf("Map purpose %d: err = %v, want ErrInvalidPurpose", p, err)
		}
		if got := b.UsedBy(p); got != 0 {
			t.Fatalf("UsedBy(%d) = %d", p, got)
		}
	}
	if b.Used() != 0 {
		t.Fatalf("Used = %d after invalid requests", b.Used())
	}
}

func TestErrMemoryBudgetWrapped(t *testing.T) {
	b := NewBudget(int64(ps))
	_, err := b.Map(2*ps, PurposeFreshIndex)
	if !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("err = %v, want ErrMemoryBudget", err)
	}
	msg := err.Error()
	for _, want := range []string{"fresh-index", strconv.Itoa(2 * ps), strconv.Itoa(ps)} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if got := b.Stats().Denied; got != 1 {
		t.Fatalf("Denied = %d, want 1", got)
	}
}

func TestRegionZeroedWritableAndRelease(t *testing.T) {
	sizes := []int{1, ps - 1, ps, ps + 1, 3*ps + 7, hugePageSize, hugePageSize + 1}
	for _, size := range sizes {
		b := NewBudget(8 << 20)
		r, err := b.Map(size, PurposeFreshData)
		if err != nil {
			t.Fatalf("Map(%d): %v", size, err)
		}
		mem := r.Bytes()
		want := (size + ps - 1) / ps * ps
		if len(mem) != want || len(mem)%ps != 0 {
			t.Fatalf("Map(%d): len %d, want %d", size, len(mem), want)
		}
		for i, c := range mem {
			if c != 0 {
				t.Fatalf("Map(%d): byte %d = %#x, want zero", size, i, c)
			}
		}
		for i := 0; i < len(mem); i += ps / 2 {
			mem[i] = byte(i)
		}
		mem[len(mem)-1] = 0xAB
		if mem[len(mem)-1] != 0xAB {
			t.Fatal("write did not stick")
		}
		if r.Purpose() != PurposeFreshData || b.UsedBy(PurposeFreshData) != int64(want) {
			t.Fatalf("purpose %v, UsedBy %d", r.Purpose(), b.UsedBy(PurposeFreshData))
		}
		for i := 0; i < 3; i++ {
			if err := r.Release(); err != nil {
				t.Fatalf("Release #%d: %v", i+1, err)
			}
			if r.Bytes() != nil {
				t.Fatalf("Bytes() after Release = len %d, want nil", len(r.Bytes()))
			}
			if st := b.Stats(); st.Used != 0 || st.ByPurpose[PurposeFreshData] != 0 || st.Mappings != 0 {
				t.Fatalf("Release #%d: stats %+v", i+1, st)
			}
		}
	}
}

func TestReleaseNil(t *testing.T) {
	var r *Region
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentRelease(t *testing.T) {
	b := NewBudget(1 << 20)
	for i := 0; i < 100; i++ {
		r, err := b.Map(ps, PurposeOther)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Go(func() {
				if err := r.Release(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if b.Used() != 0 || b.Stats().Mappings != 0 {
			t.Fatalf("after concurrent Release: %+v", b.Stats())
		}
	}
}

func TestAccountingByPurpose(t *testing.T) {
	b := NewBudget(64 << 20)
	var regions []*Region
	for p := Purpose(0); p < NumPurposes; p++ {
		for i := 0; i <= int(p); i++ {
			r, err := b.Map(ps, p)
			if err != nil {
				t.Fatal(err)
			}
			regions = append(regions, r)
		}
	}
	st := b.Stats()
	var sum int64
	for p := Purpose(0); p < NumPurposes; p++ {
		want := int64((int(p) + 1) * ps)
		if got := b.UsedBy(p); got != want || st.ByPurpose[p] != want {
			t.Errorf("UsedBy(%v) = %d, Stats %d, want %d", p, got, st.ByPurpose[p], want)
		}
		sum += st.ByPurpose[p]
	}
	if sum != st.Used || st.Pooled != 0 || st.Mappings != int64(len(regions)) || st.Limit != 64<<20 {
		t.Fatalf("stats %+v, sum %d", st, sum)
	}
	for _, r := range regions {
		r.Release()
	}
	if st := b.Stats(); st.Used != 0 || st.ByPurpose != [NumPurposes]int64{} {
		t.Fatalf("after release: %+v", st)
	}
}

// TestBudgetConcurrentNeverExceeds hammers one budget from many goroutines and checks, with an
// independent counter of bytes held, that the successful mappings never exceed the limit.
func TestBudgetConcurrentNeverExceeds(t *testing.T) {
	const (
		goroutines = 64
		iterations = 200
		limitPages = 10
	)
	b := NewBudget(int64(limitPages * ps))
	var held, maxHeld, refused atomic.Int64
	var stop atomic.Bool
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for !stop.Load() {
			if u := b.Used(); u > b.Limit() {
				t.Errorf("watcher: Used %d > Limit %d", u, b.Limit())
				return
			}
		}
	})
	// Every goroutine holds its first region (if it got one) until all have tried: 64 goroutines
	// wanting at least a page each against a 10-page limit guarantees refusals whatever the
	// scheduling. Afterwards each holds its previous region while mapping the next.
	var arrived sync.WaitGroup
	arrived.Add(goroutines)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Go(func() {
			var prev *Region
			release := func(r *Region) bool {
				if r == nil {
					return true
				}
				held.Add(-int64(len(r.Bytes())))
				if err := r.Release(); err != nil {
					t.Error(err)
					return false
				}
				return true
			}
			defer func() { release(prev) }()
			atBarrier := false
			defer func() { // an early return must not leave the others waiting
				if !atBarrier {
					arrived.Done()
				}
			}()
			for i := 0; i < iterations; i++ {
				if i == 1 {
					atBarrier = true
					arrived.Done()
					arrived.Wait()
				}
				pages := 1 + (g+i)%3
				r, err := b.Map(pages*ps-(g%2), Purpose((g+i)%int(NumPurposes)))
				if err != nil {
					if !errors.Is(err, ErrMemoryBudget) {
						t.Error(err)
						return
					}
					refused.Add(1)
					if !release(prev) {
						return
					}
					prev = nil
					runtime.Gosched()
					continue
				}
				h := held.Add(int64(len(r.Bytes())))
				for {
					m := maxHeld.Load()
					if h <= m || maxHeld.CompareAndSwap(m, h) {
						break
					}
				}
				r.Bytes()[0] = byte(g) // touch: the page must be ours
				if !release(prev) {
					return
				}
				prev = r
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	watcher.Wait()
	if m := maxHeld.Load(); m > b.Limit() {
		t.Fatalf("held %d bytes at once, limit %d", m, b.Limit())
	}
	st := b.Stats()
	if st.Used != 0 || st.Mappings != 0 || st.ByPurpose != [NumPurposes]int64{} {
		t.Fatalf("leaked: %+v", st)
	}
	if refused.Load() == 0 {
		t.Fatal("no request was refused: the test did not reach the limit")
	}
	if st.Denied != refused.Load() {
		t.Fatalf("Denied = %d, refusals seen = %d", st.Denied, refused.Load())
	}
	t.Logf("max held %d of %d bytes; %d refusals", maxHeld.Load(), b.Limit(), refused.Load())
}

// TestHugeMappingsAligned pins the 2 MiB alignment of large mappings (see mapAnon), which lets
// transparent huge pages back every byte of a segment.
func TestHugeMappingsAligned(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("alignment is a property of the Linux mmap path; the fallback uses the Go heap")
	}
	b := NewBudget(256 << 20)
	var live []*Region
	// Small mappings in between perturb the address space so that the kernel's own placement
	// is not always aligned.
	for _, size := range []int{ps, hugePageSize, 3 * ps, hugePageSize + ps, 5 * ps, SegmentSize16M, ps, SegmentSize64M} {
		r, err := b.Map(size, PurposeOther)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, r)
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(r.Bytes())))
		if addr%uintptr(ps) != 0 {
			t.Fatalf("Map(%d) at %#x: not page aligned", size, addr)
		}
		if size >= hugePageSize && addr%hugePageSize != 0 {
			t.Fatalf("Map(%d) at %#x: not 2 MiB aligned", size, addr)
		}
		r.Bytes()[len(r.Bytes())-1] = 1 // the whole range is mapped
	}
	for _, r := range live {
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if b.Used() != 0 {
		t.Fatalf("Used = %d", b.Used())
	}
}

// TestMapScratchAdvisedHuge pins that scratch of at least 2 MiB is advised huge pages like
// Budget.Map's mappings ("Huge pages" in doc.go), and smaller scratch is not: the kernel marks
// an advised mapping "hg" in the VmFlags of /proc/self/smaps.
func TestMapScratchAdvisedHuge(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge page advice is a property of the Linux mmap path; the fallback uses the Go heap")
	}
	if os.Getenv("STRATA_EMULATED") != "" {
		// qemu-user accepts madvise(MADV_HUGEPAGE) without passing it to the host's mapping
		// (scripts/test.sh sets STRATA_EMULATED under it), so no VmFlags show the advice.
		t.Skip("user-mode emulation does not pass huge page advice to the host mapping")
	}
	if mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || bytes.Contains(mode, []byte("[never]")) {
		t.Skipf("transparent huge pages unavailable (%q, %v): madvise refuses the advice", mode, err)
	}
	for _, c := range []struct {
		size int
		huge bool
	}{{hugePageSize, true}, {24 << 20, true}, {hugePageSize - ps, false}} {
		b, err := MapScratch(c.size)
		if err != nil {
			t.Fatal(err)
		}
		flags := vmFlags(t, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		if got := slices.Contains(flags, "hg"); got != c.huge {
			t.Errorf("MapScratch(%d): advised huge = %v, want %v (VmFlags %v)", c.size, got, c.huge, flags)
		}
		if err := UnmapScratch(b); err != nil {
			t.Fatal(err)
		}
	}
}

// vmFlags returns the VmFlags of the mapping of /proc/self/smaps that holds addr.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	in := false
	for line := range strings.Lines(string(smaps)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if in && f[0] == "VmFlags:" {
			return f[1:]
		}
	}
	t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	return nil
}
