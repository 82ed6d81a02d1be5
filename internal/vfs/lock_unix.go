//go:build unix

package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Lock implements FS.Lock with flock(2) (LOCK_EX|LOCK_NB) on the named file, opened (created if
// missing, never truncated) for the lock's lifetime. flock locks belong to the open file
// description, so a second Lock of the same file fails with EWOULDBLOCK whether it comes from
// this process or another one; the kernel drops the lock when the descriptor is closed, so a
// killed process never leaves a stale lock behind.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		ferr = err
	}
	if ferr != nil {
		f.Close()
		if errors.Is(ferr, syscall.EAGAIN) {
			ferr = syscall.EWOULDBLOCK
		}
		return nil, &fs.PathError{Op: "lock", Path: name, Err: ferr}
	}
	return &osLock{f: f}, nil
}

// osLock releases its flock by closing the descriptor that holds it.
type osLock struct{ f *os.File }

func (l *osLock) Close() error { return l.f.Close() }
