//go:build !unix

package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// osLocks is the in-process lock table of Default where flock(2) does not exist: it excludes
// other Locks of this process only.
var osLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

// Lock implements FS.Lock where flock(2) is missing: the file is created if missing, and the
// lock excludes other Locks of the same absolute path in this process only.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	osLocks.mu.Lock()
	defer osLocks.mu.Unlock()
	if osLocks.held[abs] {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: name, Err: syscall.EWOULDBLOCK}
	}
	if osLocks.held == nil {
		osLocks.held = make(map[string]bool)
	}
	osLocks.held[abs] = true
	return &otherLock{f: f, abs: abs}, nil
}

type otherLock struct {
	f    *os.File
	abs  string
	once sync.Once
}

func (l *otherLock) Close() error {
	err := error(fs.ErrClosed)
	l.once.Do(func() {
		osLocks.mu.Lock()
		delete(osLocks.held, l.abs)
		osLocks.mu.Unlock()
		err = l.f.Close()
	})
	return err
}
