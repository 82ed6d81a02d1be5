package checkpoint_test

import (
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/storagetest"
	"github.com/strata-db/strata/internal/vfs"
)

// TestDirStorageConformance runs the Storage conformance suite (package storagetest) on
// DirStorage over MemFS and over the operating system's file system. On the latter, Created is
// the file's time, which the kernel takes from its coarse clock (up to a tick, 1–10 ms, behind
// time.Now), hence the ClockSkew.
func TestDirStorageConformance(t *testing.T) {
	t.Run("fs=mem", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			d, err := checkpoint.NewDirStorage(vfs.NewMem(), "/ckpt")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, storagetest.Options{Short: testing.Short()})
	})
	t.Run("fs=os", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			d, err := checkpoint.NewLocalStorage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, storagetest.Options{Short: testing.Short(), ClockSkew: 20 * time.Millisecond})
	})
}
