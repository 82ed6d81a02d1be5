package vfs

import "errors"

// Sentinel errors of package vfs. Only FaultFS returns them, always inside an *InjectedError that
// is itself wrapped in an *fs.PathError (or an *os.LinkError for Rename and Link), so that
// errors.Is sees the sentinel, the injected errno and fs.ErrNotExist-style identities alike.
// Errors from the OS and from MemFS carry syscall.Errno values instead (invariant 7 in doc.go).
var (
	// ErrInjected matches every error that FaultFS made up, whatever errno it carries:
	// errors.Is(err, ErrInjected) tells a test's own faults from real ones.
	ErrInjected = errors.New("vfs: injected fault")

	// ErrCrashed is the cause carried by every operation that FaultFS refuses after its crash
	// point (FaultFS.CrashAt, FaultFS.Crash): the process is modelled as dead, so nothing reaches
	// the inner FS any more. errors.Is(err, ErrInjected) holds for these errors too.
	ErrCrashed = errors.New("vfs: crashed (injected)")
)
