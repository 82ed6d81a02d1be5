package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

// tempPrefix begins every temporary DirStorage writes. Object name segments never begin with
// '.', so no object is ever mistaken for a temporary, nor a temporary for an object.
const tempPrefix = ".tmp."

// copyChunk is how much PutReader and the copying PutFile move per write, and how often they
// look at the context.
const copyChunk = 1 << 20

// DirStorage is the Storage over a local directory (through vfs.FS), the default checkpoint
// storage. An object "a/b/c" is the file <dir>/a/b/c; each "/" of a name is a subdirectory.
// Writes follow the metadata protocol of doc.go ("DirStorage protocol"): write a uniquely named
// temporary in the object's directory, fsync it, rename it to the object's name (or, for
// Create, hard-link it, which fails if the name exists), fsync the directory and its parents.
// So a crash at any point leaves each object absent or complete; what it can leave behind is
// temporaries (".tmp.<random>"), which List ignores and Cleanup (or GC) removes.
//
// Limits of the file-system mapping: a name cannot be both an object and the directory of
// another object ("a" and "a/b"), which the layout of doc.go never does; directories emptied by
// Delete are removed (best effort, not synced). Times are the file's (ObjectInfo.Created).
//
// A DirStorage is safe for concurrent use by multiple goroutines, and several DirStorages (in
// one or many processes) may share a directory: Create is atomic across them (link(2)), and
// Cleanup spares the temporaries this DirStorage is writing — those of other processes only by
// their age.
type DirStorage struct {
	fs  vfs.FS
	dir string

	mu      sync.Mutex
	writing map[string]struct{} // paths of the temporaries being written by this DirStorage
}

// newDirStorage returns a DirStorage keeping its objects under dir on fsys, creating dir (and
// making its entry durable) if needed. Errors: those of fsys (syscall.ENOTDIR if dir is a file).
func newDirStorage(fsys vfs.FS, dir string) (*DirStorage, error) {
	dir = filepath.Clean(dir)
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &DirStorage{fs: fsys, dir: dir, writing: make(map[string]struct{})}
	// Make dir's own entry (and its parents') durable once, here, so that every put only
	// syncs the directories below dir.
	for p := dir; ; {
		if err := vfs.SyncDir(fsys, p); err != nil {
			return nil, err
		}
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	return d, nil
}

// NewDirStorage returns a DirStorage keeping its objects under dir on the operating system's
// file system, creating dir (and making its entry and its parents' durable) if needed. A Store
// opened without a test file system shares that file system, so its table files reach this
// storage as hard links when both directories are on one device. Errors: those of the file
// system (syscall.ENOTDIR if dir is a file, fs.ErrPermission).
//
// Tests inside this module open a DirStorage over a fault-injecting or in-memory file system
// through internal/checkpointfs, which is why the file system is not a parameter here.
func NewDirStorage(dir string) (*DirStorage, error) { return newDirStorage(vfs.Default(), dir) }

// Dir returns the directory the storage keeps its objects in.
func (d *DirStorage) Dir() string { return d.dir }

func (d *DirStorage) path(name string) string {
	return filepath.Join(d.dir, filepath.FromSlash(name))
}

// syncChain makes the entries of dir and of every directory between it and d.dir durable:
// the object's own entry, and those of directories a MkdirAll may just have created. Another
// put may have created them, and its own syncs may not have happened yet, so every put syncs
// the whole chain (a directory fsync with nothing to write is cheap).
func (d *DirStorage) syncChain(dir string) error {
	for p := dir; ; p = filepath.Dir(p) {
		if err := vfs.SyncDir(d.fs, p); err != nil {
			return err
		}
		if p == d.dir || len(p) <= len(d.dir) {
			return nil
		}
	}
}

// newTemp reserves a unique temporary path in dir; doneTemp releases it.
func (d *DirStorage) newTemp(dir string) string {
	tmp := filepath.Join(dir, fmt.Sprintf("%s%016x", tempPrefix, rand.Uint64()))
	d.mu.Lock()
	d.writing[tmp] = struct{}{}
	d.mu.Unlock()
	return tmp
}

func (d *DirStorage) doneTemp(tmp string) {
	d.mu.Lock()
	delete(d.writing, tmp)
	d.mu.Unlock()
}

// inDir runs op (which creates an entry in dir) after MkdirAll(dir), again if op fails with
// ENOENT because a concurrent Delete removed the emptied directory in between — or if
// MkdirAll itself does: a Delete may remove a parent it just created before it creates the
// child (a native savepoint's upload right after another's, with a GC at NoGrace: "mkdir
// …/chk-…: no such file or directory").
func (d *DirStorage) inDir(dir string, op func() error) error {
	var err error
	for range 4 {
		if err = d.fs.MkdirAll(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if err = op(); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

func ctxErr(ctx context.Context, op, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	return nil
}

// put writes an object: fill writes its bytes into a new temporary, which is synced and then
// renamed to the object's name (create false) or linked to it (create true: EEXIST means the
// object exists).
func (d *DirStorage) put(ctx context.Context, op, name string, create bool, fill func(f vfs.File) error) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctxErr(ctx, op, name); err != nil {
		return err
	}
	final := d.path(name)
	dir := filepath.Dir(final)
	tmp := d.newTemp(dir)
	defer d.doneTemp(tmp)
	var f vfs.File
	if err := d.inDir(dir, func() (err error) { f, err = d.fs.Create(tmp); return err }); err != nil {
		return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	err := vfs.SyncClose(f, fill(f))
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		d.fs.Remove(tmp) // best effort: Cleanup removes what a failure here leaves
		return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	return d.commit(op, name, tmp, final, create)
}

// commit moves the complete, synced temporary tmp to final and makes that durable.
func (d *DirStorage) commit(op, name, tmp, final string, create bool) error {
	if create {
		if err := d.fs.Link(tmp, final); err != nil {
			d.fs.Remove(tmp)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%w: %s", ErrExists, name)
			}
			return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
		}
		// The object is in place (not yet durably); the temporary is a second name for it.
		// If the removal fails the object is still complete, and Cleanup removes the name.
		if err := d.fs.Remove(tmp); err != nil {
			return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
		}
	} else if err := d.fs.Rename(tmp, final); err != nil {
		d.fs.Remove(tmp)
		return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	if err := d.syncChain(filepath.Dir(final)); err != nil {
		return fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	return nil
}

// Put implements Storage.Put: temporary, fsync, rename, fsync of the directories.
func (d *DirStorage) Put(ctx context.Context, name string, data []byte) error {
	return d.put(ctx, "put", name, false, func(f vfs.File) error {
		_, err := f.Write(data)
		return err
	})
}

// PutReader implements Storage.PutReader, copying in chunks of 1 MiB and checking ctx between
// them.
func (d *DirStorage) PutReader(ctx context.Context, name string, r io.Reader, size int64) error {
	if size < 0 {
		return fmt.Errorf("checkpoint: put %s: negative size %d", name, size)
	}
	return d.put(ctx, "put", name, false, func(f vfs.File) error {
		return copyN(ctx, f, r, size)
	})
}

// copyN copies exactly n bytes from r to w, looking at ctx between chunks.
func copyN(ctx context.Context, w io.Writer, r io.Reader, n int64) error {
	buf := make([]byte, min(n, copyChunk))
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := io.ReadFull(r, buf[:min(n, int64(len(buf)))])
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return werr
			}
			n -= int64(m)
		}
		if err != nil {
			if n > 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
				return fmt.Errorf("%w: %d bytes short", io.ErrUnexpectedEOF, n)
			}
			if n > 0 {
				return err
			}
		}
	}
	return nil
}

// Create implements Storage.Create: temporary, fsync, link(2) to the name — which fails with
// EEXIST, reported as ErrExists, if the name exists, atomically even across processes — remove
// the temporary, fsync of the directories.
func (d *DirStorage) Create(ctx context.Context, name string, data []byte) error {
	return d.put(ctx, "create", name, true, func(f vfs.File) error {
		_, err := f.Write(data)
		return err
	})
}

// putFile stores the file at path on fsys as the object name, with Put's semantics. If fsys is
// the storage's own file system, the object becomes a hard link to the file — no bytes are
// copied — after an fsync of the file; where the link is refused (EXDEV: another device,
// EPERM, EMLINK, ENOTSUP) or fsys is another file system, the bytes are copied. The file must
// never change afterwards, since a linked object shares it. Errors: fs.ErrNotExist for a
// missing file, and those of Put.
func (d *DirStorage) putFile(ctx context.Context, name string, fsys vfs.FS, path string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctxErr(ctx, "put", name); err != nil {
		return err
	}
	if sameFS(fsys, d.fs) {
		linked, err := d.linkFile(name, path)
		if linked || err != nil {
			return err
		}
	}
	src, err := fsys.Open(path)
	if err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", name, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("checkpoint: put %s: %w", name, err)
	}
	return d.put(ctx, "put", name, false, func(f vfs.File) error {
		return copyN(ctx, f, io.NewSectionReader(src, 0, fi.Size()), fi.Size())
	})
}

// linkFile tries to store path as the object name by hard link: fsync the file, link it to a
// temporary, rename that to the name, fsync the directories. It reports false with a nil error
// when the file system refuses the link and the caller should copy.
func (d *DirStorage) linkFile(name, path string) (bool, error) {
	src, err := d.fs.Open(path)
	if err != nil {
		return false, fmt.Errorf("checkpoint: put %s: %w", name, err)
	}
	err = src.Sync() // the object must not depend on the caller having synced the file
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("checkpoint: put %s: %w", name, err)
	}
	final := d.path(name)
	dir := filepath.Dir(final)
	tmp := d.newTemp(dir)
	defer d.doneTemp(tmp)
	err = d.inDir(dir, func() error { return d.fs.Link(path, tmp) })
	if err != nil {
		for _, refused := range []error{syscall.EXDEV, syscall.EPERM, syscall.EMLINK, syscall.ENOTSUP, syscall.EOPNOTSUPP} {
			if errors.Is(err, refused) {
				return false, nil
			}
		}
		return false, fmt.Errorf("checkpoint: put %s: %w", name, err)
	}
	return true, d.commit("put", name, tmp, final, false)
}

// sameFS reports whether a and b are the same file system value (so paths of one name files of
// the other), without panicking on an FS of an incomparable type.
func sameFS(a, b vfs.FS) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}

// Get implements Storage.Get.
func (d *DirStorage) Get(ctx context.Context, name string) ([]byte, error) {
	f, size, err := d.open(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("checkpoint: get %s: %w", name, err)
	}
	return b, nil
}

// GetRange implements Storage.GetRange.
func (d *DirStorage) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	var b []byte
	err := d.readRange(ctx, name, off, length, func() []byte { b = make([]byte, length); return b })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ReadRangeInto implements RangeReaderInto: GetRange into p (len(p) bytes at off), for a
// caller that reads into memory of its own. Errors: GetRange's.
func (d *DirStorage) ReadRangeInto(ctx context.Context, name string, off int64, p []byte) error {
	return d.readRange(ctx, name, off, int64(len(p)), func() []byte { return p })
}

// readRange reads length bytes at off of object name into buf(), called only once the range
// is known to lie inside the object (a length from a damaged manifest allocates nothing).
func (d *DirStorage) readRange(ctx context.Context, name string, off, length int64, buf func() []byte) error {
	f, size, err := d.open(ctx, "get", name)
	if err != nil {
		return err
	}
	defer f.Close()
	if off < 0 || length < 0 || off > size || length > size-off {
		return fmt.Errorf("%w: %s: bytes [%d, %d+%d) of %d", ErrRange, name, off, off, length, size)
	}
	if _, err := f.ReadAt(buf(), off); err != nil {
		return fmt.Errorf("checkpoint: get %s: %w", name, err)
	}
	return nil
}

// open opens the object for reading and returns its size.
func (d *DirStorage) open(ctx context.Context, op, name string) (vfs.File, int64, error) {
	if err := ValidateName(name); err != nil {
		return nil, 0, err
	}
	if err := ctxErr(ctx, op, name); err != nil {
		return nil, 0, err
	}
	f, err := d.fs.Open(d.path(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, 0, fmt.Errorf("%w: %s: %w", ErrNotFound, name, err)
		}
		return nil, 0, fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = fmt.Errorf("%w: %s is a directory", ErrNotFound, name)
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("checkpoint: %s %s: %w", op, name, err)
	}
	return f, fi.Size(), nil
}

// Delete implements Storage.Delete: remove the file, fsync its directory, then remove the
// directories the removal emptied, up to the storage's own (best effort and not synced: an
// empty directory a crash brings back is harmless).
func (d *DirStorage) Delete(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ctxErr(ctx, "delete", name); err != nil {
		return err
	}
	p := d.path(name)
	err := d.fs.Remove(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("checkpoint: delete %s: %w", name, err)
	}
	dir := filepath.Dir(p)
	if err := vfs.SyncDir(d.fs, dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // the directory is gone, and the object with it
		}
		return fmt.Errorf("checkpoint: delete %s: %w", name, err)
	}
	for ; len(dir) > len(d.dir); dir = filepath.Dir(dir) {
		if d.fs.Remove(dir) != nil { // ENOTEMPTY (another object, or a temporary being written)
			break
		}
	}
	return nil
}

// List implements Storage.List by walking the directories the prefix can reach.
// Temporaries (and any entry beginning with '.') are skipped.
func (d *DirStorage) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	var out []ObjectInfo
	err := d.walk(ctx, prefix, func(name string, fi fs.FileInfo) error {
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		out = append(out, ObjectInfo{Name: name, Size: fi.Size(), Created: created(fi)})
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// walk visits every file under the directory of prefix (the part up to its last "/") whose
// name may begin with prefix: objects through obj, temporaries (and other dot entries) through
// dot with the name of their directory and their own file name. Directories that vanish
// meanwhile (a concurrent Delete) are skipped.
func (d *DirStorage) walk(ctx context.Context, prefix string, obj func(name string, fi fs.FileInfo) error, dot func(dir, entry string, fi fs.FileInfo) error) error {
	start := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var visit func(rel string) error
	visit = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		names, err := d.fs.List(d.path(rel))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		for _, e := range names {
			child := path.Join(rel, e)
			fi, err := d.fs.Stat(d.path(child))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			switch {
			case strings.HasPrefix(e, "."):
				if dot != nil && !fi.IsDir() {
					if err := dot(rel, e, fi); err != nil {
						return err
					}
				}
			case fi.IsDir():
				if strings.HasPrefix(child+"/", prefix) || strings.HasPrefix(prefix, child+"/") {
					if err := visit(child); err != nil {
						return err
					}
				}
			default:
				if err := obj(child, fi); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return visit(start)
}

// Cleanup implements Cleaner: it removes the temporaries under prefix that are at least minAge
// old and that this DirStorage is not writing. A temporary of another process still being
// written is spared only by its age, so minAge must exceed the longest upload when several
// processes share the directory.
func (d *DirStorage) Cleanup(ctx context.Context, prefix string, now time.Time, minAge time.Duration) (int, error) {
	if err := validatePrefix(prefix); err != nil {
		return 0, err
	}
	removed := 0
	err := d.walk(ctx, prefix, func(string, fs.FileInfo) error { return nil }, func(dir, entry string, fi fs.FileInfo) error {
		if !strings.HasPrefix(entry, tempPrefix) || !strings.HasPrefix(path.Join(dir, entry), prefix) {
			return nil // not ours: a dot file someone else put there
		}
		p := d.path(path.Join(dir, entry))
		d.mu.Lock()
		_, busy := d.writing[p]
		d.mu.Unlock()
		if busy || !oldEnough(created(fi), now, minAge) {
			return nil
		}
		if err := d.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("checkpoint: cleanup %q: %w", prefix, err)
	}
	return removed, nil
}

// oldEnough reports whether something created at t is at least minAge old at now; an unknown
// time (zero) is old enough only for minAge <= 0.
func oldEnough(t, now time.Time, minAge time.Duration) bool {
	if minAge <= 0 {
		return true
	}
	if t.IsZero() {
		return false
	}
	return now.Sub(t) >= minAge
}

// created is the later of a file's modification time and its status-change time where the
// platform reports one (ctimeOf): a hard link made by PutFile keeps the source's mtime but
// updates its ctime, and an object must never look older than the moment it was stored.
func created(fi fs.FileInfo) time.Time {
	t := fi.ModTime()
	if c := ctimeOf(fi); c.After(t) {
		t = c
	}
	return t
}
