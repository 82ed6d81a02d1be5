package asm_arm64

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestDispatch asserts which implementation dispatch picked. CI runs it under
// qemu with STRATA_EXPECT_IMPL (generic, neon or sve) and STRATA_EXPECT_VL (the
// SVE vector length in bits) set for each emulated CPU; without them it checks
// the rules that hold everywhere.
func TestDispatch(t *testing.T) {
	f, got := CPU(), Impl()
	t.Logf("GOARCH=%s impl=%s features=%+v", runtime.GOARCH, got, f)
	if runtime.GOARCH != "arm64" && got != ImplGeneric {
		t.Fatalf("impl on %s = %s, want %s", runtime.GOARCH, got, ImplGeneric)
	}
	if runtime.GOARCH == "arm64" && got != ImplGeneric && !f.ASIMD {
		t.Fatalf("arm64 without ASIMD reported: %+v", f)
	}
	if f.SVE2 && !f.SVE {
		t.Fatalf("SVE2 without SVE: %+v", f)
	}
	if f.SVE && (f.VectorBits < 128 || f.VectorBits > 2048 || f.VectorBits%128 != 0) {
		t.Fatalf("SVE vector length %d bits is not a multiple of 128 in 128..2048", f.VectorBits)
	}
	if want := os.Getenv("STRATA_EXPECT_IMPL"); want != "" && string(got) != want {
		t.Fatalf("impl = %s, want %s (features %+v)", got, want, f)
	}
	if want := os.Getenv("STRATA_EXPECT_VL"); want != "" {
		n, err := strconv.Atoi(want)
		if err != nil {
			t.Fatalf("STRATA_EXPECT_VL=%q: %v", want, err)
		}
		if f.VectorBits != n {
			t.Fatalf("SVE vector length = %d bits, want %d", f.VectorBits, n)
		}
	}
}
