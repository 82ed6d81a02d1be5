package vfs

import (
	"errors"
	"io"
)

// SyncDir makes the entries of directory dir of fsys durable: it opens dir, syncs it and
// closes it, returning the first error of the three. It is the one copy of the step "fsync the
// directory" of the rename protocol (write a new file, fsync it, rename, fsync the directory)
// that the root, the engine, checkpoint's DirStorage and the LSM manifest all follow.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile reads the whole file at path of fsys, as os.ReadFile: the size comes from Stat and
// one ReadAt fills it. An empty file returns an empty, non-nil slice. Errors are those of
// Open, Stat and ReadAt, unwrapped.
func ReadFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return nil, err
	}
	return b, nil
}

// SyncClose ends the writing of file f: unless err (the writing's error) is already set, it
// syncs f, then closes f in every case, and returns the first error of the three — the "fsync
// the file, close it" step of the rename protocol (SyncDir) that every durable file write of
// the module takes. f is closed when SyncClose returns.
func SyncClose(f File, err error) error {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
