package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// goldenFence is the fixed content of testdata/FENCE-v1.
func goldenFence() *Fence {
	return &Fence{Epoch: 7, Point: 41, Writer: 0x0123456789abcdef, CreatedUnixMilli: 1_700_000_000_123}
}

// TestGoldenFenceV1: testdata/FENCE-v1 decodes to goldenFence and Encode writes its bytes
// (run with -update to create it; a change of the format needs a new version and file).
func TestGoldenFenceV1(t *testing.T) {
	path := filepath.Join("testdata", "FENCE-v1")
	if *updateGolden {
		if err := os.WriteFile(path, goldenFence().Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFence("FENCE-v1", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, goldenFence()) {
		t.Errorf("decoded %+v, want %+v", got, goldenFence())
	}
	if enc := goldenFence().Encode(); !bytes.Equal(enc, b) {
		t.Errorf("Encode:\n got %x\nwant %x", enc, b)
	}
}

// TestFenceDecodeDamage: every damage of a fence is a *base.CorruptionError with its cause,
// checked in the documented order.
func TestFenceDecodeDamage(t *testing.T) {
	good := goldenFence().Encode()
	for _, c := range []struct {
		name  string
		b     func([]byte) []byte
		cause error
	}{
		{"short magic", func(b []byte) []byte { return b[:5] }, base.ErrTruncated},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, base.ErrBadMagic},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, base.ErrTruncated},
		{"version", func(b []byte) []byte { b[8] = 2; return b }, base.ErrFormatVersion},
		{"checksum type", func(b []byte) []byte { b[10] = 2; return b }, base.ErrChecksumType},
		{"crc", func(b []byte) []byte { b[20] ^= 1; return b }, base.ErrChecksum},
		{"crc-created", func(b []byte) []byte { b[40] ^= 1; return b }, base.ErrChecksum},
		{"long", func(b []byte) []byte { return append(b, 0) }, base.ErrCorruption},
	} {
		_, err := DecodeFence("f", c.b(slices.Clone(good)))
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, c.cause) || ce.File != "f" {
			t.Errorf("%s: %v, want a CorruptionError of f with %v", c.name, err, c.cause)
		}
	}
	zero := (&Fence{}).Encode()
	if _, err := DecodeFence("f", zero); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("epoch 0: %v, want ErrCorruption", err)
	}
}

// TestCommitFenced: the SlateDB writer-epoch protocol on create-if-absent alone. A writer of
// epoch 1 commits checkpoint 1; a restore of it fences epoch 1 from checkpoint 1 on (epoch
// 2). The zombie's commits above 1 fail with ErrFenced — refused before its Create, or, when
// its manifest landed before the fence was seen, after it, the manifest then fenced for every
// reader and replaced by the new writer's commit of that id. The same writer claiming its
// epoch again gets its fence back; of two writers claiming one epoch the second is fenced,
// as is one claiming an epoch below a fence. GC never deletes a fence.
func TestCommitFenced(t *testing.T) {
	ctx := context.Background()
	d, _ := newMemStorage(t)
	commit := func(epoch, id uint64) error {
		m := &Manifest{ID: id, Epoch: epoch, MaxParallelism: 128, KeyGroups: KeyGroupRange{Start: 0, End: 127}}
		return Commit(ctx, d, "o", m)
	}
	if err := commit(1, 1); err != nil {
		t.Fatal(err)
	}
	// The zombie's manifest 2 lands just before the fence (written as its Create would).
	raw, _ := (&Manifest{ID: 2, Epoch: 1, MaxParallelism: 128, KeyGroups: KeyGroupRange{End: 127}}).Encode()
	if err := d.Create(ctx, ManifestName("o", 2), raw); err != nil {
		t.Fatal(err)
	}
	f, err := WriteFence(ctx, d, "o", 2, 1, 22, time.Unix(1, 0))
	if err != nil || f.Epoch != 2 || f.Point != 1 || f.Writer != 22 {
		t.Fatalf("WriteFence = %+v, %v", f, err)
	}
	if again, err := WriteFence(ctx, d, "o", 2, 1, 22, time.Unix(9, 0)); err != nil || again != f {
		t.Fatalf("WriteFence again by the same writer (reopened) = %+v, %v; want %+v", again, err, f)
	}
	if err := commit(1, 3); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie commit of 3 after the fence: %v, want ErrFenced", err)
	}
	if _, err := ReadManifest(ctx, d, "o", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the zombie's refused manifest 3 is stored: %v", err)
	}
	if err := CheckFenced(ctx, d, "o", 1, 2); !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's manifest 2: CheckFenced = %v, want ErrFenced", err)
	}
	if err := CheckFenced(ctx, d, "o", 1, 1); err != nil {
		t.Fatalf("manifest 1, at the fence point: %v", err)
	}
	if err := commit(2, 2); err != nil {
		t.Fatalf("the new writer's commit of 2 over the zombie's fenced manifest 2: %v", err)
	}
	if m, err := ReadManifest(ctx, d, "o", 2); err != nil || m.Epoch != 2 {
		t.Fatalf("manifest 2 after the new writer's commit: %+v, %v", m, err)
	}
	if err := commit(2, 2); !errors.Is(err, ErrExists) {
		t.Fatalf("a second commit of 2 by the same epoch: %v, want ErrExists", err)
	}
	// Two restores race for epoch 3: the first to claim it wins, the other is fenced; a
	// writer that restored before a fence of a later epoch is fenced too.
	f3, err := WriteFence(ctx, d, "o", 3, 2, 33, time.Unix(2, 0))
	if err != nil || f3.Epoch != 3 {
		t.Fatalf("WriteFence(3) = %+v, %v", f3, err)
	}
	if f, err := WriteFence(ctx, d, "o", 3, 2, 34, time.Unix(3, 0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("a second writer's WriteFence(3) = %+v, %v; want ErrFenced", f, err)
	}
	f4, err := WriteFence(ctx, d, "o", 4, 2, 44, time.Unix(3, 0))
	if err != nil || f4.Epoch != 4 {
		t.Fatalf("WriteFence(4) = %+v, %v", f4, err)
	}
	if f, err := WriteFence(ctx, d, "o", 4, 2, 45, time.Unix(3, 0)); !errors.Is(err, ErrFenced) {
		t.Fatalf("WriteFence(4) after epoch 4 was claimed = %+v, %v; want ErrFenced", f, err)
	}
	if err := commit(3, 5); !errors.Is(err, ErrFenced) {
		t.Fatalf("epoch 3 after epoch 4's fence: %v, want ErrFenced", err)
	}
	if err := commit(4, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := GC(ctx, d, GCOptions{Owner: "o", LastCompleted: 5, Grace: NoGrace}); err != nil {
		t.Fatal(err)
	}
	fs, err := ReadFences(ctx, d, "o", 0)
	if err != nil || len(fs) != 3 {
		t.Fatalf("fences after GC: %+v, %v; want all 3", fs, err)
	}
}

// fenceWorkload: a writer of epoch 1 commits checkpoint 1, a restored writer (id 7) claims
// epoch 2 from checkpoint 1 and commits checkpoint 2.
func fenceWorkload(fsys vfs.FS) error {
	ctx := context.Background()
	d, err := newDirStorage(fsys, "/ckpt")
	if err != nil {
		return err
	}
	m := func(epoch, id uint64) *Manifest {
		return &Manifest{ID: id, Epoch: epoch, MaxParallelism: 128, KeyGroups: KeyGroupRange{End: 127}}
	}
	if err := Commit(ctx, d, "o", m(1, 1)); err != nil {
		return err
	}
	if _, err := WriteFence(ctx, d, "o", 2, 1, 7, time.Unix(1, 0)); err != nil {
		return err
	}
	return Commit(ctx, d, "o", m(2, 2))
}

// TestCrashFence crashes fenceWorkload at each of its writes: on what the crash kept, the
// restored writer claiming its epoch again gets its fence (found or made), a zombie of epoch
// 1 is then fenced above checkpoint 1, and the restored writer's checkpoint 2 commits (or is
// there already, of epoch 2).
func TestCrashFence(t *testing.T) {
	ctx := context.Background()
	ffs := vfs.NewFaultFS(vfs.NewMem())
	if err := fenceWorkload(ffs); err != nil {
		t.Fatal(err)
	}
	total := ffs.Count(vfs.WriteOps)
	t.Logf("workload: %d write operations", total)
	for n := int64(1); n <= total; n++ {
		mem := vfs.NewMem()
		ffs := vfs.NewFaultFS(mem)
		ffs.CrashAt(n)
		if err := fenceWorkload(ffs); err != nil && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: workload stopped by %v", n, err)
		}
		d, err := newDirStorage(mem.CrashClone(), "/ckpt")
		if err != nil {
			t.Fatalf("crash at %d: %v", n, err)
		}
		f, err := WriteFence(ctx, d, "o", 2, 1, 7, time.Unix(2, 0))
		if err != nil || f.Epoch != 2 || f.Writer != 7 {
			t.Fatalf("crash at %d: the restored writer's fence: %+v, %v", n, f, err)
		}
		zombie := &Manifest{ID: 3, Epoch: 1, MaxParallelism: 128, KeyGroups: KeyGroupRange{End: 127}}
		if err := Commit(ctx, d, "o", zombie); !errors.Is(err, ErrFenced) {
			t.Fatalf("crash at %d: zombie commit: %v, want ErrFenced", n, err)
		}
		m2 := &Manifest{ID: 2, Epoch: 2, MaxParallelism: 128, KeyGroups: KeyGroupRange{End: 127}}
		if err := Commit(ctx, d, "o", m2); err != nil && !errors.Is(err, ErrExists) {
			t.Fatalf("crash at %d: checkpoint 2: %v", n, err)
		}
		if got, err := ReadManifest(ctx, d, "o", 2); err != nil || got.Epoch != 2 {
			t.Fatalf("crash at %d: checkpoint 2: %+v, %v", n, got, err)
		}
	}
}
