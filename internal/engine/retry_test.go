package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
)

// TestTransient: the one decision between a background failure that is retried and one that
// stops the engine, on the errors the tiers really return (wrapped as they wrap them).
func TestTransient(t *testing.T) {
	pathErr := func(op string, errno error) error { return &fs.PathError{Op: op, Path: "lsm/000012.sst", Err: errno} }
	injected := func(errno error) error {
		return &fs.PathError{Op: "open", Path: "lsm/000012.sst", Err: &vfs.InjectedError{Err: errno}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"EMFILE on open", fmt.Errorf("open lsm/000012.sst: %w", pathErr("open", syscall.EMFILE)), true},
		{"ENFILE", pathErr("open", syscall.ENFILE), true},
		{"EIO on read", fmt.Errorf("read lsm/000012.sst: 4096 bytes at offset 0: %w", pathErr("read", syscall.EIO)), true},
		{"EIO injected", injected(syscall.EIO), true},
		{"EMFILE injected", injected(syscall.EMFILE), true},
		{"ENOSPC", fmt.Errorf("write: %w: %w", ErrNoSpace, pathErr("write", syscall.ENOSPC)), true},
		{"EAGAIN", pathErr("read", syscall.EAGAIN), true},
		{"EINTR", pathErr("read", syscall.EINTR), true},
		{"ETIMEDOUT", pathErr("read", syscall.ETIMEDOUT), true},
		{"deadline", fmt.Errorf("upload: %w", context.DeadlineExceeded), true},
		{"os deadline", pathErr("read", os.ErrDeadlineExceeded), true},
		{"EACCES (its cause may fix it)", pathErr("create", syscall.EACCES), true},
		{"an error of unknown cause", errors.New("remote storage said no"), true},
		{"corruption", base.Corrupt("lsm/000012.sst", 4096, base.ErrChecksum, "block checksum"), false},
		{"corruption found by a read that also saw EIO", base.Corrupt("lsm/000012.sst", 0, syscall.EIO, "short"), false},
		{"corruption wrapped", fmt.Errorf("compaction: %w", base.ErrCorruption), false},
		{"a task panicked", fmt.Errorf("%w: eviction task panicked: boom", errInvariant), false},
		{"entries out of order", fmt.Errorf("write lsm/000013.sst: %w", sstable.ErrOutOfOrder), false},
		{"closed", fmt.Errorf("install: %w", ErrClosed), false},
		{"registry too large", fmt.Errorf("%w: 20 MiB", lsm.ErrMetaTooLarge), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if Transient(tc.err) != tc.want {
				t.Fatal("Transient differs from transient")
			}
		})
	}
}

// TestRetryDelay: 10 ms doubling to 1 s; a full disk waits NoSpaceRetry from the start.
func TestRetryDelay(t *testing.T) {
	eio := &fs.PathError{Op: "read", Path: "x", Err: syscall.EIO}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := retryDelay(i+1, eio); got != w*time.Millisecond {
			t.Errorf("retryDelay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := retryDelay(1000, eio); got != MaxRetryDelay {
		t.Errorf("retryDelay(1000) = %v", got)
	}
	nospace := fmt.Errorf("%w: %w", ErrNoSpace, syscall.ENOSPC)
	for _, n := range []int{1, 2, 50} {
		if got := retryDelay(n, nospace); got != NoSpaceRetry {
			t.Errorf("retryDelay(%d, ENOSPC) = %v, want NoSpaceRetry", n, got)
		}
	}
}
