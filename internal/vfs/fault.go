package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Op is a kind of FS or File operation, as FaultFS counts and matches them. Op values are not
// persisted anywhere.
type Op uint8

// The operation kinds. Each FS and File method is exactly one Op.
const (
	OpCreate   Op = iota // FS.Create
	OpOpen               // FS.Open
	OpOpenDir            // FS.OpenDir
	OpRemove             // FS.Remove
	OpRename             // FS.Rename
	OpLink               // FS.Link
	OpMkdirAll           // FS.MkdirAll
	OpList               // FS.List
	OpStat               // FS.Stat
	OpRead               // File.Read and File.ReadAt
	OpWrite              // File.Write
	OpSync               // File.Sync, on files and on directories
	OpFileStat           // File.Stat
	OpClose              // File.Close, and Close of a lock from FS.Lock
	OpLock               // FS.Lock
	numOps
)

var opNames = [numOps]string{
	OpCreate: "create", OpOpen: "open", OpOpenDir: "opendir", OpRemove: "remove",
	OpRename: "rename", OpLink: "link", OpMkdirAll: "mkdirall", OpList: "list", OpStat: "stat",
	OpRead: "read", OpWrite: "write", OpSync: "sync", OpFileStat: "fstat", OpClose: "close",
	OpLock: "lock",
}

// String returns the operation's name, which is also the Op of the *fs.PathError that carries
// an injected error ("create", "write", "sync", …).
func (op Op) String() string {
	if op < numOps {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// OpSet is a set of operation kinds, one bit per Op.
type OpSet uint32

// Ops returns the set holding ops.
func Ops(ops ...Op) OpSet {
	var s OpSet
	for _, op := range ops {
		s |= 1 << op
	}
	return s
}

// Has reports whether op is in s.
func (s OpSet) Has(op Op) bool { return s&(1<<op) != 0 }

// Predefined operation sets.
const (
	// WriteOps are the operations that change what a crash would keep: file contents,
	// directory entries, or what is synced. FaultFS.CrashAt counts these.
	WriteOps OpSet = 1<<OpCreate | 1<<OpRemove | 1<<OpRename | 1<<OpLink | 1<<OpMkdirAll |
		1<<OpWrite | 1<<OpSync
	// ReadOps are the operations that only observe.
	ReadOps OpSet = 1<<OpOpen | 1<<OpOpenDir | 1<<OpList | 1<<OpStat | 1<<OpRead | 1<<OpFileStat
	// AllOps is every operation kind: WriteOps, ReadOps, OpClose and OpLock. OpLock is in
	// neither WriteOps nor ReadOps: a lock is process state, which a crash drops, and the
	// lock file it may create is an empty file nothing reads.
	AllOps OpSet = WriteOps | ReadOps | 1<<OpClose | 1<<OpLock
)

// PathMatcher selects operations by path. It receives the path as the caller passed it to the
// FS, cleaned with filepath.Clean; for operations on an open File, the path it was opened with.
type PathMatcher func(path string) bool

// PathPrefix matches paths that start with prefix (compared after cleaning both), for example
// every file below a directory: PathPrefix("/db/wal/").
func PathPrefix(prefix string) PathMatcher {
	p := filepath.Clean(prefix)
	if strings.HasSuffix(prefix, "/") && p != "/" {
		p += "/" // keep "dir/" from matching "dir2"
	}
	return func(path string) bool { return strings.HasPrefix(path, p) }
}

// PathGlob matches with filepath.Match: against the whole path if pattern contains a
// separator, otherwise against the last element, so PathGlob("*.sst") matches every table file
// in every directory. It panics if pattern is malformed, like regexp.MustCompile: patterns are
// constants in tests.
func PathGlob(pattern string) PathMatcher {
	if _, err := filepath.Match(pattern, ""); err != nil {
		panic(fmt.Sprintf("vfs: PathGlob(%q): %v", pattern, err))
	}
	whole := strings.ContainsRune(pattern, filepath.Separator)
	return func(path string) bool {
		if !whole {
			path = filepath.Base(path)
		}
		ok, _ := filepath.Match(pattern, path)
		return ok
	}
}

// Fault describes errors that FaultFS injects: which operations, on which paths, and when.
type Fault struct {
	// Ops are the operation kinds affected; zero means AllOps.
	Ops OpSet
	// Path selects the affected paths; nil means every path. Rename and Link match if
	// either name matches.
	Path PathMatcher
	// Nth is the 1-based index, among the operations matching Ops and Path since the fault
	// was injected, of the operation that fails; zero means 1 (the next matching operation).
	Nth int64
	// Sticky makes every matching operation after the Nth fail as well: a full disk or a
	// dead device rather than a one-off error.
	Sticky bool
	// Err is the cause to report: syscall.ENOSPC, syscall.EIO, io.ErrShortWrite or any error.
	// Zero means syscall.EIO. It is wrapped in an *InjectedError inside an *fs.PathError (an
	// *os.LinkError for Rename and Link), so errors.Is(err, Err) holds.
	Err error
	// ShortWrite makes an injected OpWrite write the first len(p)/2 bytes to the inner file
	// before returning them with the error, as a disk that fills up mid-write does. It has no
	// effect on other operations.
	ShortWrite bool
}

// InjectedError is the cause inside every error that FaultFS makes up. errors.Is(err,
// ErrInjected) holds for it, and it unwraps to Err, so errors.Is(err, syscall.ENOSPC) holds when
// ENOSPC was injected.
type InjectedError struct {
	Op  Op    // the operation that failed
	Err error // the injected cause: Fault.Err, or ErrCrashed
}

// Error returns the cause's message marked as injected.
func (e *InjectedError) Error() string {
	if e.Err == ErrCrashed {
		return e.Err.Error()
	}
	return e.Err.Error() + " (injected)"
}

// Unwrap returns the injected cause.
func (e *InjectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected; errors.Is then goes on to the cause.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// FaultFS wraps an FS and makes chosen operations fail, for tests: by operation kind, path and
// count (Inject), and by crashing after a number of write operations (CrashAt), after which the
// test looks at what the inner MemFS kept with MemFS.CrashClone. Apart from short writes and
// Close, a failed operation never reaches the inner FS (invariant 8 in doc.go).
//
// A FaultFS is safe for concurrent use; matching and counting take one lock per operation, which
// orders concurrent operations, so Nth counts are only deterministic for a single goroutine.
type FaultFS struct {
	inner FS

	mu        sync.Mutex
	faults    []*faultState
	counts    [numOps]int64
	injected  int64
	crashAt   int64 // the crashSeen value at which to crash; 0 means never
	crashSeen int64 // WriteOps seen since CrashAt
	crashed   bool
}

type faultState struct {
	Fault
	seen int64 // matching operations seen since Inject
}

// NewFaultFS returns a FaultFS over inner that injects faults, each as by Inject.
func NewFaultFS(inner FS, faults ...Fault) *FaultFS {
	f := &FaultFS{inner: inner}
	f.Inject(faults...)
	return f
}

// Inner returns the wrapped FS.
func (f *FaultFS) Inner() FS { return f.inner }

// Inject adds faults. Their counts start now. When several faults fire on one operation, the
// one injected first decides the error; every matching fault counts the operation either way.
func (f *FaultFS) Inject(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ft := range faults {
		if ft.Ops == 0 {
			ft.Ops = AllOps
		}
		if ft.Nth <= 0 {
			ft.Nth = 1
		}
		if ft.Err == nil {
			ft.Err = syscall.EIO
		}
		f.faults = append(f.faults, &faultState{Fault: ft})
	}
}

// ClearFaults removes every fault added by Inject. It does not undo a crash.
func (f *FaultFS) ClearFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// CrashAt arranges for the n-th operation in WriteOps from now (1-based) to fail, and with it
// every later operation except Close, each with an error wrapping ErrCrashed: the process is
// modelled as killed just before that write reached the file system. n <= 0 cancels a pending
// crash point but does not undo a crash that happened.
//
// A crash test runs a workload once to learn its write count W = Count(WriteOps), then for every
// n in 1..W runs it again over a fresh MemFS with CrashAt(n), takes MemFS.CrashClone, and checks
// that the store reopens to its last completed checkpoint.
func (f *FaultFS) CrashAt(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashAt, f.crashSeen = max(n, 0), 0
}

// Crash crashes now: every later operation except Close fails with an error wrapping ErrCrashed.
func (f *FaultFS) Crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
}

// Crashed reports whether the crash point was reached (or Crash called).
func (f *FaultFS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Count returns how many operations of the kinds in ops were attempted through f since it was
// made, failed and injected ones included.
func (f *FaultFS) Count(ops OpSet) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for op := range numOps {
		if ops.Has(op) {
			n += f.counts[op]
		}
	}
	return n
}

// Injected returns how many operations failed because of f (faults and crash) since it was made.
func (f *FaultFS) Injected() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// check counts one operation on paths and decides whether it fails; short asks a Write to
// write half of its buffer first.
func (f *FaultFS) check(op Op, paths ...string) (ie *InjectedError, short bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[op]++
	if f.crashed {
		if op == OpClose {
			return nil, false // let handles go: the inner FS may hold real descriptors
		}
		f.injected++
		return &InjectedError{Op: op, Err: ErrCrashed}, false
	}
	if f.crashAt > 0 && WriteOps.Has(op) {
		f.crashSeen++
		if f.crashSeen >= f.crashAt {
			f.crashed = true
			f.injected++
			return &InjectedError{Op: op, Err: ErrCrashed}, false
		}
	}
	var hit *faultState
	for _, st := range f.faults {
		if !st.Ops.Has(op) || !matchAny(st.Path, paths) {
			continue
		}
		st.seen++
		if hit == nil && (st.seen == st.Nth || st.Sticky && st.seen > st.Nth) {
			hit = st
		}
	}
	if hit == nil {
		return nil, false
	}
	f.injected++
	return &InjectedError{Op: op, Err: hit.Err}, hit.ShortWrite && op == OpWrite
}

func matchAny(m PathMatcher, paths []string) bool {
	if m == nil {
		return true
	}
	for _, p := range paths {
		if m(filepath.Clean(p)) {
			return true
		}
	}
	return false
}

func pathErr(op Op, path string, ie *InjectedError) error {
	return &fs.PathError{Op: op.String(), Path: path, Err: ie}
}

// Create implements FS.Create.
func (f *FaultFS) Create(name string) (File, error) {
	if ie, _ := f.check(OpCreate, name); ie != nil {
		return nil, pathErr(OpCreate, name, ie)
	}
	file, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, name: name}, nil
}

// Open implements FS.Open.
func (f *FaultFS) Open(name string) (File, error) {
	if ie, _ := f.check(OpOpen, name); ie != nil {
		return nil, pathErr(OpOpen, name, ie)
	}
	file, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, name: name}, nil
}

// OpenDir implements FS.OpenDir.
func (f *FaultFS) OpenDir(name string) (File, error) {
	if ie, _ := f.check(OpOpenDir, name); ie != nil {
		return nil, pathErr(OpOpenDir, name, ie)
	}
	file, err := f.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, name: name}, nil
}

// Remove implements FS.Remove.
func (f *FaultFS) Remove(name string) error {
	if ie, _ := f.check(OpRemove, name); ie != nil {
		return pathErr(OpRemove, name, ie)
	}
	return f.inner.Remove(name)
}

// Rename implements FS.Rename.
func (f *FaultFS) Rename(oldname, newname string) error {
	if ie, _ := f.check(OpRename, oldname, newname); ie != nil {
		return &os.LinkError{Op: OpRename.String(), Old: oldname, New: newname, Err: ie}
	}
	return f.inner.Rename(oldname, newname)
}

// Link implements FS.Link.
func (f *FaultFS) Link(oldname, newname string) error {
	if ie, _ := f.check(OpLink, oldname, newname); ie != nil {
		return &os.LinkError{Op: OpLink.String(), Old: oldname, New: newname, Err: ie}
	}
	return f.inner.Link(oldname, newname)
}

// MkdirAll implements FS.MkdirAll.
func (f *FaultFS) MkdirAll(dir string, perm fs.FileMode) error {
	if ie, _ := f.check(OpMkdirAll, dir); ie != nil {
		return pathErr(OpMkdirAll, dir, ie)
	}
	return f.inner.MkdirAll(dir, perm)
}

// List implements FS.List.
func (f *FaultFS) List(dir string) ([]string, error) {
	if ie, _ := f.check(OpList, dir); ie != nil {
		return nil, pathErr(OpList, dir, ie)
	}
	return f.inner.List(dir)
}

// Stat implements FS.Stat.
func (f *FaultFS) Stat(name string) (fs.FileInfo, error) {
	if ie, _ := f.check(OpStat, name); ie != nil {
		return nil, pathErr(OpStat, name, ie)
	}
	return f.inner.Stat(name)
}

// Lock implements FS.Lock by passing it to the inner FS, as OpLock (injectable like any other
// operation; refused after a crash). Closing the returned lock counts as OpClose on name and
// always releases the inner lock, even after a crash or with an injected error.
func (f *FaultFS) Lock(name string) (io.Closer, error) {
	if ie, _ := f.check(OpLock, name); ie != nil {
		return nil, pathErr(OpLock, name, ie)
	}
	l, err := f.inner.Lock(name)
	if err != nil {
		return nil, err
	}
	return &faultLock{fs: f, l: l, name: name}, nil
}

// faultLock wraps a lock of the inner FS.
type faultLock struct {
	fs   *FaultFS
	l    io.Closer
	name string
}

func (fl *faultLock) Close() error {
	ie, _ := fl.fs.check(OpClose, fl.name)
	err := fl.l.Close()
	if ie != nil {
		return pathErr(OpClose, fl.name, ie)
	}
	return err
}

// faultFile wraps a File of the inner FS; name is the path it was opened with.
type faultFile struct {
	fs   *FaultFS
	f    File
	name string
}

func (ff *faultFile) Read(p []byte) (int, error) {
	if ie, _ := ff.fs.check(OpRead, ff.name); ie != nil {
		return 0, pathErr(OpRead, ff.name, ie)
	}
	return ff.f.Read(p)
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if ie, _ := ff.fs.check(OpRead, ff.name); ie != nil {
		return 0, pathErr(OpRead, ff.name, ie)
	}
	return ff.f.ReadAt(p, off)
}

func (ff *faultFile) Write(p []byte) (int, error) {
	ie, short := ff.fs.check(OpWrite, ff.name)
	if ie == nil {
		return ff.f.Write(p)
	}
	if !short {
		return 0, pathErr(OpWrite, ff.name, ie)
	}
	n, err := ff.f.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	return n, pathErr(OpWrite, ff.name, ie)
}

func (ff *faultFile) Sync() error {
	if ie, _ := ff.fs.check(OpSync, ff.name); ie != nil {
		return pathErr(OpSync, ff.name, ie)
	}
	return ff.f.Sync()
}

func (ff *faultFile) Stat() (fs.FileInfo, error) {
	if ie, _ := ff.fs.check(OpFileStat, ff.name); ie != nil {
		return nil, pathErr(OpFileStat, ff.name, ie)
	}
	return ff.f.Stat()
}

// Close closes the inner file even when it injects an error, so that no descriptor leaks.
func (ff *faultFile) Close() error {
	ie, _ := ff.fs.check(OpClose, ff.name)
	err := ff.f.Close()
	if ie != nil {
		return pathErr(OpClose, ff.name, ie)
	}
	return err
}
