//go:build !linux

package checkpoint

import (
	"io/fs"
	"time"
)

// ctimeOf returns the zero time: on this platform DirStorage does not read the status-change
// time, so an object PutFile hard-linked carries its source's modification time, which may be
// older than the object; the in-flight set (InFlight), not the grace period, must protect it.
func ctimeOf(fs.FileInfo) time.Time { return time.Time{} }
