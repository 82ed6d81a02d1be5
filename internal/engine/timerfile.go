package engine

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"path/filepath"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/timer"
)

// The timer file: a Store directory's timers at Close, "TIMERS-<16 hex digits>", the sections
// of package timer (timer.Snapshot.WriteTo) in one file, written and synced with its
// directory entry before the persist point that names it (Registry.TimerFile: name, size and
// CRC32C of the whole file), so a crash reopens to the timers of the last Close with its
// keyed state. The file of the previous Close is removed after the persist point, stray ones
// (of a Close that failed or crashed after writing one) at Open. PersistAll writes it and
// LoadTimerFile reads it into the queues (timers.go).

// writeTimerFile writes the timers of srcs (timer.Capture's: the queues must not change during
// the call, and hold at least one timer; it panics otherwise) as a new timer file of dir on fsys, synced with its directory entry, and returns
// its reference. Errors: the file system's (ErrNoSpace for a full disk); nothing is left
// behind then. Owner goroutine only.
func writeTimerFile(fsys vfs.FS, dir string, srcs []timer.Source) (ref TimerFileRef, err error) {
	name := fmt.Sprintf("%s%016x", TimerFilePrefix, rand.Uint64())
	path := filepath.Join(dir, name)
	f, err := fsys.Create(path)
	if err != nil {
		return TimerFileRef{}, lowerError(err)
	}
	defer func() {
		if err != nil {
			fsys.Remove(path)
		}
	}()
	// A snapshot that freezes nothing (timer.Capture), so a checkpoint still uploading keeps
	// its own.
	snap := timer.Capture(srcs)
	cw := &crcWriter{w: f}
	secs, err := snap.WriteTo(context.Background(), cw)
	snap.Release()
	err = vfs.SyncClose(f, err)
	if err == nil {
		err = vfs.SyncDir(fsys, dir)
	}
	if err != nil {
		return TimerFileRef{}, lowerError(fmt.Errorf("writing the timer file %s: %w", name, err))
	}
	if len(secs) == 0 {
		panic("strata: invariant: a timer file without sections (writeTimerFile of no timers)")
	}
	last := secs[len(secs)-1]
	return TimerFileRef{Name: name, Size: last.Offset + last.Length, CRC: cw.crc}, nil
}

// readTimerFile returns the bytes of the timer file ref of dir on fsys, checked against ref's
// size and CRC32C (its sections are the caller's to decode: timer.DecodeSections). Errors:
// ErrCorruption naming the file (missing, of another size or CRC32C).
func readTimerFile(fsys vfs.FS, dir string, ref TimerFileRef) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, ref.Name))
	if err != nil {
		return nil, base.Corrupt(ref.Name, -1, err, "the timer file the persist point names")
	}
	if int64(len(b)) != ref.Size {
		return nil, base.Corrupt(ref.Name, int64(len(b)), base.ErrTruncated, "%d bytes, the persist point says %d", len(b), ref.Size)
	}
	if crc := crc32.Checksum(b, base.CRC32C); crc != ref.CRC {
		return nil, base.Corrupt(ref.Name, 0, base.ErrChecksum, "crc32c %#08x, the persist point says %#08x", crc, ref.CRC)
	}
	return b, nil
}

// removeStrayTimerFiles removes the timer files of dir on fsys other than keep (the one the
// persist point names). Best effort: errors are ignored (Open, after a clean recovery; Close,
// after its persist point).
func removeStrayTimerFiles(fsys vfs.FS, dir, keep string) {
	names, err := fsys.List(dir)
	if err != nil {
		return
	}
	for _, n := range names {
		if n != keep && ValidTimerFile(n) {
			fsys.Remove(filepath.Join(dir, n))
		}
	}
}

// crcWriter passes writes on, keeping their CRC32C.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

// Write writes p to the underlying writer and adds what it took to the CRC.
func (w *crcWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.crc = crc32.Update(w.crc, base.CRC32C, p[:n])
	return n, err
}
