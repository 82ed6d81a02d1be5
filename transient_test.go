package strata

// Faults that pass (the issue "Nothing lost to a passing fault"): background work that fails
// with EMFILE or EIO is retried while the Store keeps taking writes, WaitBackground and Close
// succeed once the fault is gone, and a Close while an LSM compaction keeps failing persists
// everything.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// putLoad is the workload: values of valueSize bytes put under keys 0..len(ver)-1 in a
// fixed order, each put a new version of its key. ver is the model: the last acknowledged
// version of every key (0: never written); a value is a function of its key and version.
type putLoad struct {
	s      *Store
	st     *ValueState[[]byte]
	ver    []uint32
	n      int // puts made (acknowledged or not)
	kb, vb []byte
}

const putValueSize = 1000

func newPutLoad(keys int) *putLoad { return &putLoad{ver: make([]uint32, keys)} }

// attach registers the load's state on s.
func (p *putLoad) attach(s *Store) error {
	st, err := NewValueState(s, ValueDescriptor[[]byte]{Name: "put-load", Codec: Bytes})
	if err != nil {
		return err
	}
	p.s, p.st = s, st
	return nil
}

func (p *putLoad) key(k int) Key {
	p.kb = fmt.Appendf(p.kb[:0], "put-load-%08d", k)
	return p.s.Key(p.kb)
}

func putValue(dst []byte, k int, v uint32) []byte {
	dst = binary.LittleEndian.AppendUint64(dst[:0], uint64(k))
	dst = binary.LittleEndian.AppendUint32(dst, v)
	for len(dst) < putValueSize {
		dst = append(dst, byte(k)^byte(v)^byte(len(dst)))
	}
	return dst
}

// next is the key of the n-th put: a stride through the keys, so consecutive puts spread over
// key groups and every key is rewritten once per len(ver) puts.
func (p *putLoad) next() int { return int(uint64(p.n) * 7919 % uint64(len(p.ver))) }

// put makes the next put; the model advances only if it is acknowledged (a store nil: always).
func (p *putLoad) put() error {
	k := p.next()
	p.n++
	if p.s == nil {
		p.ver[k]++
		return nil
	}
	p.vb = putValue(p.vb, k, p.ver[k]+1)
	if err := p.st.Put(p.key(k), p.vb); err != nil {
		return err
	}
	p.ver[k]++
	return nil
}

// run makes n puts, each of which must be acknowledged.
func (p *putLoad) run(n int) error {
	for range n {
		if err := p.put(); err != nil {
			return fmt.Errorf("put %d: %w", p.n-1, err)
		}
	}
	return nil
}

// check reads every key and compares it with the model.
func (p *putLoad) check() error {
	for k, v := range p.ver {
		got, ok, err := p.st.Get(p.key(k))
		if err != nil {
			return fmt.Errorf("key %d: %w", k, err)
		}
		if v == 0 {
			if ok {
				return fmt.Errorf("key %d: never written, read %d bytes", k, len(got))
			}
			continue
		}
		if !ok {
			return fmt.Errorf("key %d: version %d acknowledged, read nothing", k, v)
		}
		if p.vb = putValue(p.vb, k, v); !bytes.Equal(got, p.vb) {
			return fmt.Errorf("key %d: read version %d, want %d", k, binary.LittleEndian.Uint32(got[8:]), v)
		}
	}
	return nil
}

// tableNumber returns the file number of a table path (0: not a table).
func tableNumber(path string) uint64 {
	name := filepath.Base(path)
	num, ok := strings.CutSuffix(name, ".sst")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseUint(num, 10, 64)
	return n
}

// tablesUpTo matches the tables numbered at most max: the tables on disk when a fault is
// injected, which every LSM compaction that touches L1 or below reads, while new flushes
// and evictions (higher numbers) go through.
func tablesUpTo(max uint64) vfs.PathMatcher {
	return func(path string) bool {
		n := tableNumber(path)
		return n != 0 && n <= max
	}
}

// maxTable returns the largest table number in dir.
func maxTable(t *testing.T, dir string) uint64 {
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m uint64
	for _, e := range names {
		m = max(m, tableNumber(e.Name()))
	}
	return m
}

func transientOptions(fs vfs.FS) (Options, func(*engine.Options)) {
	return Options{MaxParallelism: 128, MemoryBudget: 48 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BackpressureTimeout: 10 * time.Second, MaxOpenFiles: 8, fs: fs},
		func(o *engine.Options) { o.TableSize = 1 << 20 }
}

// TestTransientFault: the tables on disk become unreadable — EMFILE when opened, or EIO when
// read — while the Store takes writes, so every LSM compaction that reaches them fails. Every
// put is acknowledged meanwhile (the compactions are retried, counted in Stats), and once the
// fault is lifted WaitBackground and Close succeed and the reopened directory holds every
// acknowledged put. In the close-during-fault cases, Close runs while the compactions still
// fail and must persist everything all the same. Before the retries, the first failed
// compaction stopped the Store: every later put, WaitBackground and Close returned its error,
// and Close closed the Store without persisting.
func TestTransientFault(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops        vfs.OpSet
		errno      syscall.Errno
		closeFirst bool // Close while the fault lasts
	}{
		{"emfile-lifted", vfs.Ops(vfs.OpOpen, vfs.OpRead), syscall.EMFILE, false},
		{"eio-lifted", vfs.Ops(vfs.OpRead), syscall.EIO, false},
		{"eio-close-during-fault", vfs.Ops(vfs.OpRead), syscall.EIO, true},
		{"emfile-close-during-fault", vfs.Ops(vfs.OpOpen, vfs.OpRead), syscall.EMFILE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			dir := filepath.Join(t.TempDir(), "db")
			fault := vfs.NewFaultFS(vfs.Default())
			opts, adjust := transientOptions(fault)
			s, err := open(dir, opts, adjust)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					s.Close()
				}
			}()
			p := newPutLoad(60_000)
			if err := p.attach(s); err != nil {
				t.Fatal(err)
			}
			if err := p.run(120_000); err != nil {
				t.Fatal(err)
			}
			if err := s.WaitBackground(); err != nil {
				t.Fatal(err)
			}
			old := maxTable(t, filepath.Join(dir, "lsm"))
			before := s.Stats()
			if before.LSM.Files < 8 {
				t.Fatalf("only %d tables before the fault", before.LSM.Files)
			}
			fault.Inject(vfs.Fault{Ops: tc.ops, Path: tablesUpTo(old), Err: tc.errno, Sticky: true})
			for range 120_000 {
				if err := p.put(); err != nil {
					t.Fatalf("a write while background work fails with %v: put %d: %v", tc.errno, p.n-1, err)
				}
				if tc.closeFirst && s.Stats().Background.Errors > 0 {
					break // Close as soon as a compaction has failed
				}
			}
			during := s.Stats()
			t.Logf("during the fault: injected %d, background errors %d, retries %d, retrying %d, L0 %d, LSM compactions %d→%d, last error %q",
				fault.Injected(), during.Background.Errors, during.Background.Retries, during.Background.Retrying,
				during.LSM.L0Files, before.LSM.Compactions, during.LSM.Compactions, during.Background.LastError)
			if tc.closeFirst {
				if err := s.Close(); err != nil {
					t.Fatalf("Close while LSM compactions fail with %v: %v", tc.errno, err)
				}
				closed = true
			}
			if fault.Injected() == 0 || during.Background.Retries == 0 {
				t.Fatalf("no background work met the fault (injected %d, retries %d)", fault.Injected(), during.Background.Retries)
			}
			if during.Background.Errors != during.Background.Retries {
				t.Fatalf("%d background errors, %d retried: a %v stopped the Store", during.Background.Errors, during.Background.Retries, tc.errno)
			}
			if !strings.Contains(during.Background.LastError, tc.errno.Error()) {
				t.Fatalf("LastBackgroundError %q does not name %v", during.Background.LastError, tc.errno)
			}
			if !tc.closeFirst {
				fault.ClearFaults()
				if err := s.WaitBackground(); err != nil {
					t.Fatalf("WaitBackground once the fault is lifted: %v", err)
				}
				after := s.Stats()
				if after.Background.Retrying != 0 || after.LSM.Compactions == during.LSM.Compactions {
					t.Fatalf("after the fault: %d kinds still retrying, LSM compactions %d→%d",
						after.Background.Retrying, during.LSM.Compactions, after.LSM.Compactions)
				}
				if err := p.check(); err != nil {
					t.Fatalf("read once the fault is lifted: %v", err)
				}
				if err := p.run(10_000); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatalf("Close once the fault is lifted: %v", err)
				}
				closed = true
			}
			opts.fs = vfs.Default()
			if s, err = open(dir, opts, adjust); err != nil {
				t.Fatal(err)
			}
			closed = false
			if err := p.attach(s); err != nil {
				t.Fatal(err)
			}
			if err := p.check(); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
			t.Logf("%v", time.Since(start))
		})
	}
}

// TestTransientWaitBackground: a background failure that does not pass within
// BackpressureTimeout is what WaitBackground returns, puts after it still succeed, and once
// the fault is lifted WaitBackground returns nil and Close persists everything.
func TestTransientWaitBackground(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	fault := vfs.NewFaultFS(vfs.Default())
	opts, adjust := transientOptions(fault)
	opts.BackpressureTimeout = 500 * time.Millisecond
	s, err := open(dir, opts, adjust)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newPutLoad(40_000)
	if err := p.attach(s); err != nil {
		t.Fatal(err)
	}
	if err := p.run(40_000); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	old := maxTable(t, filepath.Join(dir, "lsm"))
	fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpRead), Path: tablesUpTo(old), Err: syscall.EIO, Sticky: true})
	var werr error
	for range 20 {
		if err := p.run(5_000); err != nil {
			t.Fatal(err)
		}
		if werr = s.WaitBackground(); werr != nil {
			break
		}
	}
	if !errors.Is(werr, syscall.EIO) {
		t.Fatalf("WaitBackground while every LSM compaction fails: %v, want the EIO", werr)
	}
	if err := p.run(1_000); err != nil {
		t.Fatalf("a put after WaitBackground reported the failure: %v", err)
	}
	fault.ClearFaults()
	if err := s.WaitBackground(); err != nil {
		t.Fatalf("WaitBackground once the fault is lifted: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	opts.fs = vfs.Default()
	if s, err = open(dir, opts, adjust); err != nil {
		t.Fatal(err)
	}
	if err := p.attach(s); err != nil {
		t.Fatal(err)
	}
	if err := p.check(); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if st := s.Stats(); st.Background.Errors != 0 || st.Background.LastError != "" {
		t.Fatalf("a new session starts with failures: %d, %q", st.Background.Errors, st.Background.LastError)
	}
}

// TestTransientCorruptionSticks: the other side of the line — a table damaged on disk (a byte
// flipped in a data block) that an LSM compaction reads stops the Store: the next write
// reports ErrCorruption, the failure is counted but not retried, and Close returns it and
// closes the Store.
func TestTransientCorruptionSticks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	opts, adjust := transientOptions(vfs.Default())
	s, err := open(dir, opts, adjust)
	if err != nil {
		t.Fatal(err)
	}
	p := newPutLoad(60_000)
	if err := p.attach(s); err != nil {
		t.Fatal(err)
	}
	if err := p.run(120_000); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	lsmDir := filepath.Join(dir, "lsm")
	names, _ := os.ReadDir(lsmDir)
	damaged := 0
	for _, e := range names {
		if tableNumber(e.Name()) == 0 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(lsmDir, e.Name()), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := f.ReadAt(b[:], 100); err != nil { // inside the first data block
			t.Fatal(err)
		}
		b[0] ^= 0x40
		if _, err := f.WriteAt(b[:], 100); err != nil {
			t.Fatal(err)
		}
		f.Close()
		damaged++
	}
	if damaged == 0 {
		t.Fatal("no table to damage")
	}
	var werr error
	for range 200_000 {
		if werr = p.put(); werr != nil {
			break
		}
	}
	if !errors.Is(werr, ErrCorruption) {
		t.Fatalf("a write after a compaction read a damaged table: %v, want ErrCorruption", werr)
	}
	st := s.Stats()
	if st.Background.Errors != st.Background.Retries+1 || !strings.Contains(st.Background.LastError, "checksum") {
		t.Fatalf("background errors %d, retries %d, last %q: want the damage counted once and not retried",
			st.Background.Errors, st.Background.Retries, st.Background.LastError)
	}
	if err := s.Close(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Close after damage: %v, want ErrCorruption", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("the Store stays open after a Close that failed for damage: %v", err)
	}
}
