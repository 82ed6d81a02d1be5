package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that remembers, for every file, the contents as of its last Sync
// and, for every directory, the entries as of its last Sync, so that CrashClone can show what a
// power loss or a killed process would leave behind (invariants 1–6 in doc.go).
//
// Names are resolved against a virtual root "/": "a/b", "/a/b" and "/x/../a/b" name the same
// file. Errors match the operating system's (invariant 7). ModTime is always the zero time.
//
// A MemFS is safe for concurrent use by multiple goroutines; every operation takes one lock, so
// operations are linearizable. The zero value is not usable; call NewMem.
type MemFS struct {
	mu   sync.RWMutex
	root *memNode
	// locked holds the file nodes locked by Lock (an in-process lock table, like flock(2) a
	// property of the running process, not of the disk: CrashClone starts with none).
	locked map[*memNode]bool
}

// memNode is an inode: a file or a directory. Directory entries point at nodes, so Rename moves
// a node and Link shares one, and a file's synced contents follow it under any name.
type memNode struct {
	dir  bool
	mode fs.FileMode // permission bits; fs.ModeDir is added by Stat for directories

	// Files. synced holds the bytes as of the last Sync. Because files are appended to,
	// Sync usually only copies data[len(synced):]; stale records that a byte below
	// len(synced) changed (Create's truncation, a write after a concurrent truncation), which
	// forces a full copy.
	data   []byte
	synced []byte
	stale  bool

	// Directories: the live entries and the entries as of the last Sync of the directory.
	children       map[string]*memNode
	syncedChildren map[string]*memNode
}

func newDirNode(perm fs.FileMode) *memNode {
	return &memNode{
		dir:            true,
		mode:           perm.Perm(),
		children:       make(map[string]*memNode),
		syncedChildren: make(map[string]*memNode),
	}
}

// NewMem returns an empty MemFS holding only its root directory "/", which always exists and
// survives every crash.
func NewMem() *MemFS { return &MemFS{root: newDirNode(0o755)} }

// CrashClone returns a new MemFS holding only what was synced in m, modelling a power loss or a
// process kill at this instant (invariants 3–5 in doc.go): starting from the root, a directory
// keeps the entries it had at its last Sync, and a file keeps the bytes it had at its last Sync.
// Unsynced writes, creations, renames, links and removals are all undone. Everything in the
// clone counts as synced, so CrashClone of the clone equals the clone. m and its open files are
// not changed and stay usable.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.RLock()
	defer m.mu.RUnlock()
	seen := make(map[*memNode]*memNode)
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c // a hard link, or a rename whose two sides were both synced
		}
		c := &memNode{dir: n.dir, mode: n.mode}
		seen[n] = c
		if !n.dir {
			c.data = slices.Clone(n.synced)
			c.synced = slices.Clone(n.synced)
			return c
		}
		c.children = make(map[string]*memNode, len(n.syncedChildren))
		for name, child := range n.syncedChildren {
			c.children[name] = clone(child)
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	return &MemFS{root: clone(m.root)}
}

// split cleans name into its path components below the root; the root itself is nil.
func split(name string) []string {
	clean := filepath.ToSlash(filepath.Clean("/" + filepath.ToSlash(name)))
	if clean == "/" {
		return nil
	}
	return strings.Split(clean[1:], "/")
}

// walk returns the directory holding the last component of parts. Callers hold m.mu.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		child, ok := n.children[p]
		if !ok {
			return nil, syscall.ENOENT
		}
		if !child.dir {
			return nil, syscall.ENOTDIR
		}
		n = child
	}
	return n, nil
}

// lookup returns the node named by name. Callers hold m.mu.
func (m *MemFS) lookup(name string) (*memNode, error) {
	parts := split(name)
	if len(parts) == 0 {
		return m.root, nil
	}
	dir, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[parts[len(parts)-1]]
	if !ok {
		return nil, syscall.ENOENT
	}
	return n, nil
}

// parent returns the directory holding name and name's last component; the root has no parent
// (syscall.EBUSY, as rmdir("/") and rename of "/" give). Callers hold m.mu.
func (m *MemFS) parent(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", syscall.EBUSY
	}
	dir, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	return dir, parts[len(parts)-1], nil
}

// Create implements FS.Create: a new empty file, or the existing file truncated in place (same
// node), whose truncation is undone by a crash until the file is synced (invariant 4).
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err == syscall.EBUSY {
		err = syscall.EISDIR
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case ok:
		if len(n.synced) > 0 {
			n.stale = true
		}
		n.data = n.data[:0] // synced is a separate copy, so the array can be reused
	default:
		n = &memNode{mode: 0o644}
		dir.children[base] = n
	}
	return &memFile{fs: m, n: n, name: name, writable: true}, nil
}

// Lock implements FS.Lock with an in-process lock table: the named file is created if missing
// (never truncated) and its node locked until the returned Close; a second Lock of the same node
// (under any name) fails with EWOULDBLOCK meanwhile. A crash clone holds no locks, as a process
// that died holds no flock(2).
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err == syscall.EBUSY {
		err = syscall.EISDIR
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	case !ok:
		n = &memNode{mode: 0o644}
		dir.children[base] = n
	}
	if m.locked[n] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: syscall.EWOULDBLOCK}
	}
	if m.locked == nil {
		m.locked = make(map[*memNode]bool)
	}
	m.locked[n] = true
	return &memLock{fs: m, n: n}, nil
}

// memLock is a lock of MemFS.Lock; Close releases it once.
type memLock struct {
	fs       *MemFS
	n        *memNode
	released bool
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.released {
		return fs.ErrClosed
	}
	l.released = true
	delete(l.fs.locked, l.n)
	return nil
}

// Open implements FS.Open. Opening a directory gives a read-only handle whose Sync syncs the
// directory, as with the operating system.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &memFile{fs: m, n: n, name: name}, nil
}

// OpenDir implements FS.OpenDir.
func (m *MemFS) OpenDir(name string) (File, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(name)
	if err == nil && !n.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return &memFile{fs: m, n: n, name: name}, nil
}

// Remove implements FS.Remove. Open handles of a removed file keep working, as after unlink(2).
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent(name)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOENT}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(dir.children, base)
	return nil
}

// Rename implements FS.Rename, with os.Rename's rules: a file replaces a file, nothing replaces
// a directory (syscall.EEXIST), and a directory cannot move below itself (syscall.EINVAL).
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	odir, obase, err := m.parent(oldname)
	if err != nil {
		return fail(err)
	}
	n, ok := odir.children[obase]
	if !ok {
		return fail(syscall.ENOENT)
	}
	ndir, nbase, err := m.parent(newname)
	if err != nil {
		return fail(err)
	}
	if old, ok := ndir.children[nbase]; ok {
		if old == n {
			return nil // same file under both names: rename(2) does nothing
		}
		if old.dir {
			return fail(syscall.EEXIST)
		}
		if n.dir {
			return fail(syscall.ENOTDIR)
		}
	}
	if n.dir {
		op, np := split(oldname), split(newname)
		if len(np) > len(op) && slices.Equal(np[:len(op)], op) {
			return fail(syscall.EINVAL)
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// Link implements FS.Link: newname becomes a second entry for oldname's node.
func (m *MemFS) Link(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	n, err := m.lookup(oldname)
	if err != nil {
		return fail(err)
	}
	if n.dir {
		return fail(syscall.EPERM)
	}
	ndir, nbase, err := m.parent(newname)
	if err == syscall.EBUSY {
		err = syscall.EEXIST
	}
	if err != nil {
		return fail(err)
	}
	if _, ok := ndir.children[nbase]; ok {
		return fail(syscall.EEXIST)
	}
	ndir.children[nbase] = n
	return nil
}

// MkdirAll implements FS.MkdirAll.
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	parts := split(dir)
	for i, p := range parts {
		child, ok := n.children[p]
		if !ok {
			child = newDirNode(perm)
			n.children[p] = child
		} else if !child.dir {
			return &fs.PathError{Op: "mkdir", Path: "/" + strings.Join(parts[:i+1], "/"), Err: syscall.ENOTDIR}
		}
		n = child
	}
	return nil
}

// List implements FS.List.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(dir)
	if err == nil && !n.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat implements FS.Stat.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return n.info(name), nil
}

// info describes n under name. Callers hold m.mu.
func (n *memNode) info(name string) memFileInfo {
	base := "/"
	if parts := split(name); len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	fi := memFileInfo{name: base, size: int64(len(n.data)), mode: n.mode}
	if n.dir {
		fi.size = 0
		fi.mode |= fs.ModeDir
	}
	return fi
}

// sync records n's current contents or entries as durable. Callers hold m.mu for writing.
func (n *memNode) sync() {
	if n.dir {
		n.syncedChildren = maps.Clone(n.children)
		return
	}
	if n.stale || len(n.synced) > len(n.data) {
		n.synced = slices.Clone(n.data)
		n.stale = false
		return
	}
	n.synced = append(n.synced, n.data[len(n.synced):]...)
}

type memFileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi memFileInfo) Name() string       { return fi.name }
func (fi memFileInfo) Size() int64        { return fi.size }
func (fi memFileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi memFileInfo) ModTime() time.Time { return time.Time{} }
func (fi memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memFileInfo) Sys() any           { return nil }

// memFile is a handle on a memNode. off and closed are guarded by fs.mu.
type memFile struct {
	fs       *MemFS
	n        *memNode
	name     string
	writable bool
	off      int64
	closed   bool
}

var errNegativeOffset = errors.New("negative offset")

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	n, err := f.readAt(p, f.off, "read")
	f.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil // io.Reader: a partial read at the end reports EOF on the next call
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: errNegativeOffset}
	}
	return f.readAt(p, off, "read")
}

// readAt copies from the node at off. Callers hold fs.mu and have checked f.
func (f *memFile) readAt(p []byte, off int64, op string) (int, error) {
	if f.n.dir {
		return 0, &fs.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.writable {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	nd := f.n
	end := f.off + int64(len(p))
	if f.off < int64(len(nd.synced)) {
		nd.stale = true // only after another handle's Create truncated the file below us
	}
	if end > int64(len(nd.data)) {
		// Past the end: grow, zero-filling a hole left by a truncation under this handle.
		nd.data = append(nd.data, make([]byte, end-int64(len(nd.data)))...)
	}
	copy(nd.data[f.off:end], p)
	f.off = end
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	f.n.sync()
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.RLock()
	defer f.fs.mu.RUnlock()
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	return f.n.info(f.name), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// check reports fs.ErrClosed after Close, as *os.File does. Callers hold fs.mu.
func (f *memFile) check(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}
