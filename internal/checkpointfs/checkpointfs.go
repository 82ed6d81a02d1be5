// Package checkpointfs is package checkpoint's file-system-parameterised entry points for the
// code of this module: the engine (which works on the Store's vfs.FS, a fault-injecting FS in
// tests) and the tests that open a DirStorage over vfs.MemFS or vfs.FaultFS. The public
// package offers the same operations on the operating system's file system only
// (checkpoint.NewDirStorage(dir), checkpoint.PutFile(ctx, s, name, path)), because vfs is
// internal and a caller outside the module could not name a vfs.FS.
package checkpointfs

import (
	"context"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs/hook"
	"github.com/strata-db/strata/internal/vfs"
)

// NewDirStorage is checkpoint.NewDirStorage on fsys.
func NewDirStorage(fsys vfs.FS, dir string) (*checkpoint.DirStorage, error) {
	d, err := hook.NewDirStorage(fsys, dir)
	if err != nil {
		return nil, err
	}
	return d.(*checkpoint.DirStorage), nil
}

// PutFile is checkpoint.PutFile from fsys: a hard link when s is a *checkpoint.DirStorage on
// the same fsys, a copy otherwise.
func PutFile(ctx context.Context, s checkpoint.Storage, name string, fsys vfs.FS, path string) error {
	return hook.PutFile(ctx, s, name, fsys, path)
}

// GetFile stores the object o of s as the file path on fsys, the inverse of PutFile: a hard
// link when s is a *checkpoint.DirStorage on fsys, a copy checked against o's size and CRC32C
// otherwise; it reports whether it linked. Errors: checkpoint.ErrNotFound, a
// *base.CorruptionError when the size or CRC32C differs, ctx's, s's and fsys's errors.
func GetFile(ctx context.Context, s checkpoint.Storage, o checkpoint.Object, fsys vfs.FS, path string) (linked bool, err error) {
	return hook.GetFile(ctx, s, o, fsys, path)
}

// LinkFile is GetFile's hard link without the CRC32C check, for a lazy restore that checks
// it in the background: when s is a *checkpoint.DirStorage on fsys and the file system allows
// the link, path becomes a link to o (its size checked) and LinkFile reports true; otherwise it
// reports false with a nil error and writes nothing. Errors: checkpoint.ErrNotFound, a
// *base.CorruptionError for a size that differs from o's, ctx's and fsys's errors.
func LinkFile(ctx context.Context, s checkpoint.Storage, o checkpoint.Object, fsys vfs.FS, path string) (linked bool, err error) {
	return hook.LinkFile(ctx, s, o, fsys, path)
}

// FileCRC returns the CRC32C (base.CRC32C) and size of the file at path on fsys, the figures a
// checkpoint.Object records.
func FileCRC(fsys vfs.FS, path string) (crc uint32, size int64, err error) {
	return hook.FileCRC(fsys, path)
}
