package suite

import (
	"encoding/binary"
	"slices"
	"testing"
)

func TestSizeLabel(t *testing.T) {
	for n, want := range map[int]string{500_000: "500K", 1_000_000: "1M", 10_000_000: "10M", 123: "123"} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPermIsPermutation(t *testing.T) {
	p := Perm(10, 1000, 1)
	s := slices.Clone(p)
	slices.Sort(s)
	for i, x := range s {
		if x != int32(10+i) {
			t.Fatalf("sorted perm[%d] = %d", i, x)
		}
	}
	if slices.Equal(p, s) {
		t.Fatal("not shuffled")
	}
	if !slices.Equal(p, Perm(10, 1000, 1)) {
		t.Fatal("not deterministic")
	}
}

// TestZipfSkew checks the head of the distribution: with theta = 1 over n
// keys the hottest key takes 1/H(n) of the draws (about 7 % for n = 1M).
func TestZipfSkew(t *testing.T) {
	const n, count = 1_000_000, 200_000
	s := Zipf(n, 1, count, 7)
	freq := map[int32]int{}
	for _, x := range s {
		if x < 0 || x >= n {
			t.Fatalf("id %d out of range", x)
		}
		freq[x]++
	}
	top := 0
	for _, c := range freq {
		top = max(top, c)
	}
	share := float64(top) / count
	if share < 0.06 || share > 0.085 {
		t.Fatalf("hottest key share %.4f, want about 0.069", share)
	}
	u := Uniform(n, count, 7)
	freq = map[int32]int{}
	for _, x := range u {
		freq[x]++
	}
	if len(freq) < count*9/10 {
		t.Fatalf("uniform draws hit only %d distinct keys", len(freq))
	}
}

func TestGadgetEvents(t *testing.T) {
	e := GadgetEvents(1000, 1, 10, 5, 10_000, 3)
	if !slices.IsSorted(e.Windows) {
		t.Fatal("windows not in event-time order")
	}
	per := float64(len(e.Windows)) / float64(e.Windows[len(e.Windows)-1]+1)
	if per < 40 || per > 60 {
		t.Fatalf("%.1f events per window, want about 50", per)
	}
}

func TestPercentile(t *testing.T) {
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(100 - i)
	}
	if p := Percentile(xs, 0.99); p != 99 {
		t.Fatalf("p99 = %d", p)
	}
	if Percentile(nil, 0.99) != 0 {
		t.Fatal("empty")
	}
}

// TestKeyer checks both key shapes: their widths, that distinct ids give distinct keys, and
// that the wide shape is the windowed larger-than-memory row's layout (hash prefix, id, window).
func TestKeyer(t *testing.T) {
	for _, s := range Shapes {
		kr := NewKeyer(s)
		wantK, wantNS := 8, 0
		if s.Wide {
			wantK, wantNS = 16, 8
		}
		seen := map[string]bool{}
		for id := range int64(1000) {
			k := kr.Key(id)
			if len(k.K) != wantK || len(k.NS) != wantNS {
				t.Fatalf("%s: key %d has %d B key, %d B namespace; want %d, %d", s.Name, id, len(k.K), len(k.NS), wantK, wantNS)
			}
			seen[string(k.K)+"/"+string(k.NS)] = true
		}
		if len(seen) != 1000 {
			t.Fatalf("%s: %d distinct keys for 1000 ids", s.Name, len(seen))
		}
		if got := testing.AllocsPerRun(100, func() { kr.Key(7) }); got != 0 {
			t.Fatalf("%s: Key allocates %v times", s.Name, got)
		}
	}
	id := uint64(3)
	k := NewKeyer(Shapes[1]).Key(int64(id))
	if binary.BigEndian.Uint64(k.K[8:]) != id || binary.BigEndian.Uint64(k.K[:8]) != id*0x9e3779b97f4a7c15 ||
		binary.BigEndian.Uint64(k.NS) != 1_700_000_000_000 {
		t.Fatalf("wide key layout %x / %x", k.K, k.NS)
	}
}
