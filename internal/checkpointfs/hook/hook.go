// Package hook carries checkpoint's file-system entry points to internal/checkpointfs. Package
// checkpoint sets the variables in its init; they are typed with any where a checkpoint type
// would be, because this package cannot import checkpoint (checkpoint imports it). Nothing
// but internal/checkpointfs reads them.
package hook

import (
	"context"

	"github.com/strata-db/strata/internal/vfs"
)

// Set by package checkpoint's init; see internal/checkpointfs for their meaning.
var (
	NewDirStorage func(fsys vfs.FS, dir string) (any, error)
	PutFile       func(ctx context.Context, s any, name string, fsys vfs.FS, path string) error
	GetFile       func(ctx context.Context, s, o any, fsys vfs.FS, path string) (bool, error)
	LinkFile      func(ctx context.Context, s, o any, fsys vfs.FS, path string) (bool, error)
	FileCRC       func(fsys vfs.FS, path string) (uint32, int64, error)
)
