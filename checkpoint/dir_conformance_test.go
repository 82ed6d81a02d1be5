package checkpoint_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/storagetest"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// TestDirStorageConformance runs the Storage conformance suite (package storagetest) on
// DirStorage over MemFS and over the operating system's file system. On the latter, Created is
// the file's time, which the kernel takes from its coarse clock (up to a tick, 1–10 ms, behind
// time.Now), hence the ClockSkew.
func TestDirStorageConformance(t *testing.T) {
	t.Run("fs=mem", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			d, err := checkpointfs.NewDirStorage(vfs.NewMem(), "/ckpt")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, storagetest.Options{Short: testing.Short()})
	})
	t.Run("fs=os", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			d, err := checkpoint.NewDirStorage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, storagetest.Options{Short: testing.Short(), ClockSkew: 20 * time.Millisecond})
	})
}

// TestPutFile: from outside the module's internal packages, a local file is stored by
// path (hard-linked into a DirStorage on the same device), and a missing one is fs.ErrNotExist.
func TestPutFileLocal(t *testing.T) {
	ctx := context.Background()
	d, err := checkpoint.NewDirStorage(filepath.Join(t.TempDir(), "ck"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "000001.sst")
	if err := os.WriteFile(src, []byte("table bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.PutFile(ctx, d, "o/shared/t.sst", src); err != nil {
		t.Fatal(err)
	}
	if b, err := d.Get(ctx, "o/shared/t.sst"); err != nil || string(b) != "table bytes" {
		t.Fatalf("Get after PutFile = %q, %v", b, err)
	}
	if err := checkpoint.PutFile(ctx, d, "o/shared/u.sst", src+".missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("PutLocalFile of a missing file = %v; want fs.ErrNotExist", err)
	}
	if err := checkpoint.ValidatePrefix("o/sha"); err != nil {
		t.Fatalf("ValidatePrefix(o/sha) = %v", err)
	}
	if err := checkpoint.ValidatePrefix("o//x"); !errors.Is(err, checkpoint.ErrInvalidName) {
		t.Fatalf("ValidatePrefix(o//x) = %v; want ErrInvalidName", err)
	}
}
