package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"syscall"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// getChunk is the byte range GetFile reads per GetRange call when it copies.
const getChunk = 4 << 20

// getFile stores the object name as the file path on fsys, the inverse of PutFile: when s is a
// *DirStorage on the same file system, path becomes a hard link to the object (restore of a
// local checkpoint costs a link per file, as Pebble's checkpoints are opened in place),
// falling back to a copy where the link is refused (EXDEV, EPERM, …); otherwise the object is
// read in ranges of 4 MiB through s.GetRange. A copy is checked against want — size and
// CRC32C (base.CRC32C) of the whole object — and synced; a link is checked likewise (one
// sequential read of the file). path must not exist; its directory entry is durable only once the caller syncs the
// directory. On error path is removed.
//
// Errors: ErrNotFound, a *base.CorruptionError naming the object when its size or CRC32C
// differs from want (base.ErrTruncated for a short object, base.ErrChecksum), ctx's error, the
// storage's and fsys's errors.
func getFile(ctx context.Context, s Storage, o Object, fsys vfs.FS, path string) (linked bool, err error) {
	linked, refused, err := getLinked(ctx, s, o, fsys, path, true)
	if err != nil || !refused {
		return linked, err
	}
	f, err := fsys.Create(path)
	if err != nil {
		return false, fmt.Errorf("checkpoint: get %s: %w", o.Name, err)
	}
	err = copyObject(ctx, s, o, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fsys.Remove(path)
		return false, err
	}
	return false, nil
}

// linkFile is getFile's hard-link half without the CRC32C check (a lazy restore checks it in
// the background, internal/engine "Lazy restore"): when s is a *DirStorage on fsys and the
// link is allowed, path becomes a link to the object, its size checked against o; otherwise
// it reports false with a nil error and path does not exist. Errors: as getFile's, but never
// base.ErrChecksum.
func linkFile(ctx context.Context, s Storage, o Object, fsys vfs.FS, path string) (linked bool, err error) {
	linked, _, err = getLinked(ctx, s, o, fsys, path, false)
	return linked, err
}

// getLinked tries getFile's hard link: it reports linked when path is now a checked link to
// the object (its size, and its CRC32C when verify), refused when the caller should copy
// instead (s is not a *DirStorage on fsys, or the file system refused the link).
func getLinked(ctx context.Context, s Storage, o Object, fsys vfs.FS, path string, verify bool) (linked, refused bool, err error) {
	if err := ValidateName(o.Name); err != nil {
		return false, false, err
	}
	if d, ok := s.(*DirStorage); ok && sameFS(fsys, d.fs) {
		if err := ctxErr(ctx, "get", o.Name); err != nil {
			return false, false, err
		}
		src := d.path(o.Name)
		err := fsys.Link(src, path)
		if err == nil {
			f, err := fsys.Open(path)
			if err == nil {
				var st fs.FileInfo
				st, err = f.Stat()
				f.Close()
				if err == nil && st.Size() != o.Size {
					err = sizeError(o, st.Size())
				}
			}
			if err == nil && verify {
				// The object's bytes, checked as a copy's are: a damaged local checkpoint must
				// fail the restore naming the object, not a later read or compaction of the
				// restored Store naming its file — nor be uploaded again, with a CRC32C of the
				// damaged bytes, by that Store's next checkpoint.
				var crc uint32
				if crc, _, err = fileCRC(fsys, path); err == nil && crc != o.CRC {
					err = base.Corrupt(o.Name, 0, base.ErrChecksum, "crc32c %#08x, the manifest records %#08x", crc, o.CRC)
				}
			}
			if err != nil {
				fsys.Remove(path)
				return false, false, err
			}
			return true, false, nil
		}
		if errors.Is(err, syscall.ENOENT) {
			return false, false, fmt.Errorf("checkpoint: get %s: %w", o.Name, ErrNotFound)
		}
		refused := false
		for _, r := range []error{syscall.EXDEV, syscall.EPERM, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP} {
			refused = refused || errors.Is(err, r)
		}
		if !refused {
			return false, false, fmt.Errorf("checkpoint: get %s: %w", o.Name, err)
		}
	}
	return false, true, nil
}

// copyObject copies o into w in ranges, checking its size and CRC32C.
func copyObject(ctx context.Context, s Storage, o Object, w vfs.File) error {
	var crc uint32
	var off int64
	for off < o.Size {
		n := min(int64(getChunk), o.Size-off)
		b, err := s.GetRange(ctx, o.Name, off, n)
		if errors.Is(err, ErrRange) {
			return base.Corrupt(o.Name, off, base.ErrTruncated, "object ends before the %d bytes its manifest records", o.Size)
		}
		if err != nil {
			return err
		}
		if int64(len(b)) != n {
			return base.Corrupt(o.Name, off, base.ErrTruncated, "range of %d bytes read as %d", n, len(b))
		}
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("checkpoint: get %s: %w", o.Name, err)
		}
		crc = crc32.Update(crc, base.CRC32C, b)
		off += n
	}
	if crc != o.CRC {
		return base.Corrupt(o.Name, 0, base.ErrChecksum, "crc32c %#08x, the manifest records %#08x", crc, o.CRC)
	}
	return nil
}

// sizeError is the error for an object whose size is not the manifest's.
func sizeError(o Object, size int64) error {
	var cause error
	if size < o.Size {
		cause = base.ErrTruncated
	}
	return base.Corrupt(o.Name, min(size, o.Size), cause, "object is %d bytes, the manifest records %d", size, o.Size)
}

// fileCRC returns the CRC32C (base.CRC32C) and size of the file at path, the figures an Object
// records; it reads the file once in 1 MiB pieces.
func fileCRC(fsys vfs.FS, path string) (crc uint32, size int64, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.ReadAt(buf, size)
		crc = crc32.Update(crc, base.CRC32C, buf[:n])
		size += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return crc, size, nil
			}
			return 0, 0, err
		}
		if n == 0 {
			return crc, size, nil
		}
	}
}

// RangeReaderInto is implemented by a Storage that can read a byte range of an object into
// memory the caller owns (DirStorage, changelog.CacheReader), so that a reader of many ranges
// — a changelog replay — fills one buffer of its own (huge pages, off the Go heap) instead of a
// fresh Go slice per range, whose first touch of every page is a fault. ReadRangeInto(ctx,
// name, off, p) reads len(p) bytes at off into p, with Storage.GetRange's semantics and
// errors; p is not retained. Safe for concurrent use, as Storage.
type RangeReaderInto interface {
	ReadRangeInto(ctx context.Context, name string, off int64, p []byte) error
}

// ReadObjectRange is GetObjectRange into p (len(p) bytes at off), through s's ReadRangeInto.
// Errors: GetObjectRange's.
func ReadObjectRange(ctx context.Context, s RangeReaderInto, name string, size, off int64, p []byte) error {
	return objectRangeErr(name, size, off, int64(len(p)), s.ReadRangeInto(ctx, name, off, p))
}

// objectRangeErr is GetObjectRange's reading of a ranged read's error (nil stays nil).
func objectRangeErr(name string, size, off, length int64, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrRange) && off >= 0 && length >= 0 && off+length <= size {
		return base.Corrupt(name, off, fmt.Errorf("%w: %w", base.ErrTruncated, err),
			"the object is shorter than the %d bytes its manifest records", size)
	}
	return fmt.Errorf("checkpoint: read %s [%d, %d): %w", name, off, off+length, err)
}

// GetObjectRange reads length bytes at off of the object name that a manifest lists with size
// bytes, as Storage.GetRange. A range inside size that the stored object does not hold (the
// storage's ErrRange: the object was truncated, or replaced by a shorter one) is damage, not
// a bad request: a *base.CorruptionError naming the object (base.ErrTruncated, also matching
// ErrRange), so a restore reports every kind of object a manifest lists alike — tables,
// changelog and timer objects. Errors: that, and the storage's errors wrapped with the name.
func GetObjectRange(ctx context.Context, s Storage, name string, size, off, length int64) ([]byte, error) {
	b, err := s.GetRange(ctx, name, off, length)
	if err != nil {
		return nil, objectRangeErr(name, size, off, length, err)
	}
	return b, nil
}
