package checkpoint

import (
	"context"

	"github.com/strata-db/strata/internal/checkpointfs/hook"
	"github.com/strata-db/strata/internal/vfs"
)

// The file-system-parameterised entry points, for the engine and this module's tests through
// internal/checkpointfs (vfs is internal, so they cannot be exported here).
func init() {
	hook.NewDirStorage = func(fsys vfs.FS, dir string) (any, error) { return newDirStorage(fsys, dir) }
	hook.PutFile = func(ctx context.Context, s any, name string, fsys vfs.FS, path string) error {
		return putFile(ctx, s.(Storage), name, fsys, path)
	}
	hook.GetFile = func(ctx context.Context, s, o any, fsys vfs.FS, path string) (bool, error) {
		return getFile(ctx, s.(Storage), o.(Object), fsys, path)
	}
	hook.LinkFile = func(ctx context.Context, s, o any, fsys vfs.FS, path string) (bool, error) {
		return linkFile(ctx, s.(Storage), o.(Object), fsys, path)
	}
	hook.FileCRC = fileCRC
}
