//go:build linux

package checkpoint

import (
	"io/fs"
	"syscall"
	"time"
)

// ctimeOf returns the file's status-change time (st_ctim), which link(2) and rename(2)
// update; the zero time if fi does not come from the operating system.
func ctimeOf(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(int64(st.Ctim.Sec), int64(st.Ctim.Nsec))
	}
	return time.Time{}
}
