package engine

// Faults that pass (the issue "Nothing lost to a passing fault") through a whole Engine, with
// byte keys (harness_test.go): background work that fails with EMFILE or EIO is retried (retry.go)
// while the Engine keeps taking writes, WaitBackground and Persist succeed once the fault is
// gone, and a Persist while an LSM compaction keeps failing persists everything. Moved from the
// root package (issue 26); the root keeps the other side of the line, a damaged table that
// stops the Store and its Close (TestTransientCorruptionSticks), and the RLIMIT_NOFILE child
// (TestOpenFilesLimit).

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

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// putLoad is the workload: values of putValueSize bytes put under keys 0..len(ver)-1
// in a fixed order, each put a new version of its key. ver is the model: the last acknowledged
// version of every key (0: never written); a value is a function of its key and version.
type putLoad struct {
	e      *Engine
	ver    []uint32
	n      int // puts made (acknowledged or not)
	kb, vb []byte
}

const (
	putValueSize = 1000
	putLoadState = 1 // the state id of the load's keys
)

func newPutLoad(e *Engine, keys int) *putLoad { return &putLoad{e: e, ver: make([]uint32, keys)} }

func (p *putLoad) key(k int) ([]byte, uint64) {
	p.kb = fmt.Appendf(p.kb[:0], "put-load-%08d", k)
	return testKey(putLoadState, p.kb)
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

// put makes the next put; the model advances only if it is acknowledged.
func (p *putLoad) put() error {
	k := p.next()
	p.n++
	p.vb = putValue(p.vb, k, p.ver[k]+1)
	ck, h := p.key(k)
	if err := p.e.Apply(opPut(ck, h, p.vb)); err != nil {
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
		ck, h := p.key(k)
		got, st := p.e.Get(h, ck)
		if st == failed {
			return fmt.Errorf("key %d: %w", k, p.e.TakeErr())
		}
		if v == 0 {
			if st == found {
				return fmt.Errorf("key %d: never written, read %d bytes", k, len(got))
			}
			continue
		}
		if st != found {
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
	num, ok := strings.CutSuffix(filepath.Base(path), ".sst")
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

// transientOptions are the options of the fault tests on dir through fs, as the root's Options
// (MemoryBudget 48 MiB, SegmentSize 16 MiB, BackgroundWorkers 2, MaxOpenFiles 8) give them,
// with 1 MiB tables: many tables, few open at once.
func transientOptions(dir string, fs vfs.FS) Options {
	return Options{Dir: dir, FS: fs, Budget: memory.NewBudget(48 << 20), SegmentSize: 16 << 20, Workers: 2,
		BackpressureTimeout: 10 * time.Second, MaxOpenFiles: 8, TableSize: 1 << 20,
		BlockCacheSize: 1536 << 10, RowCacheSize: 4608 << 10, EvictionRoom: 20 << 20}
}

// TestTransientFault: the tables on disk become unreadable — EMFILE when opened, or EIO when
// read — while the Engine takes writes, so every LSM compaction that reaches them fails. Every
// put is acknowledged meanwhile (the compactions are retried, counted in Stats), and once the
// fault is lifted WaitBackground, Persist and Close succeed and the reopened directory holds
// every acknowledged put. In the persist-during-fault cases, Persist runs while the
// compactions still fail and must persist everything all the same. Before the retries, the
// first failed compaction stopped the Engine: every later write and WaitBackground returned
// its error, and the root's Close closed the Store without persisting.
func TestTransientFault(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops        vfs.OpSet
		errno      syscall.Errno
		closeFirst bool // Persist and Close while the fault lasts
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
			h := newHarness(t, transientOptions(dir, fault))
			p := newPutLoad(h.e, 60_000)
			if err := p.run(120_000); err != nil {
				t.Fatal(err)
			}
			if err := h.e.WaitBackground(); err != nil {
				t.Fatal(err)
			}
			old := maxTable(t, filepath.Join(dir, "lsm"))
			before := h.e.Stats()
			if before.LSMFiles < 8 {
				t.Fatalf("only %d tables before the fault", before.LSMFiles)
			}
			fault.Inject(vfs.Fault{Ops: tc.ops, Path: tablesUpTo(old), Err: tc.errno, Sticky: true})
			for range 120_000 {
				if err := p.put(); err != nil {
					t.Fatalf("a write while background work fails with %v: put %d: %v", tc.errno, p.n-1, err)
				}
				if tc.closeFirst && h.e.Stats().BackgroundErrors > 0 {
					break // Persist as soon as a compaction has failed
				}
			}
			during := h.e.Stats()
			t.Logf("during the fault: injected %d, background errors %d, retries %d, retrying %d, L0 %d, LSM compactions %d→%d, last error %q",
				fault.Injected(), during.BackgroundErrors, during.BackgroundRetries, during.BackgroundRetrying,
				during.L0Files, before.LSMCompactions, during.LSMCompactions, during.LastBackgroundError)
			if tc.closeFirst {
				h.close() // Persist, then Close: both must succeed while LSM compactions fail
			}
			if fault.Injected() == 0 || during.BackgroundRetries == 0 {
				t.Fatalf("no background work met the fault (injected %d, retries %d)", fault.Injected(), during.BackgroundRetries)
			}
			if during.BackgroundErrors != during.BackgroundRetries {
				t.Fatalf("%d background errors, %d retried: a %v stopped the Engine", during.BackgroundErrors, during.BackgroundRetries, tc.errno)
			}
			if !strings.Contains(during.LastBackgroundError, tc.errno.Error()) {
				t.Fatalf("LastBackgroundError %q does not name %v", during.LastBackgroundError, tc.errno)
			}
			if !tc.closeFirst {
				fault.ClearFaults()
				if err := h.e.WaitBackground(); err != nil {
					t.Fatalf("WaitBackground once the fault is lifted: %v", err)
				}
				after := h.e.Stats()
				if after.BackgroundRetrying != 0 || after.LSMCompactions == during.LSMCompactions {
					t.Fatalf("after the fault: %d kinds still retrying, LSM compactions %d→%d",
						after.BackgroundRetrying, during.LSMCompactions, after.LSMCompactions)
				}
				if err := p.check(); err != nil {
					t.Fatalf("read once the fault is lifted: %v", err)
				}
				if err := p.run(10_000); err != nil {
					t.Fatal(err)
				}
				h.close()
			}
			h.o.FS = vfs.Default()
			h.open()
			p.e = h.e
			if err := p.check(); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
			t.Logf("%v", time.Since(start))
		})
	}
}

// TestTransientWaitBackground: a background failure that does not pass within
// BackpressureTimeout is what WaitBackground returns, puts after it still succeed, and once
// the fault is lifted WaitBackground returns nil, Persist persists everything and a reopened
// Engine starts with no failure counted.
func TestTransientWaitBackground(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	fault := vfs.NewFaultFS(vfs.Default())
	o := transientOptions(dir, fault)
	o.BackpressureTimeout = 500 * time.Millisecond
	h := newHarness(t, o)
	p := newPutLoad(h.e, 40_000)
	if err := p.run(40_000); err != nil {
		t.Fatal(err)
	}
	if err := h.e.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	old := maxTable(t, filepath.Join(dir, "lsm"))
	fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpRead), Path: tablesUpTo(old), Err: syscall.EIO, Sticky: true})
	var werr error
	for range 20 {
		if err := p.run(5_000); err != nil {
			t.Fatal(err)
		}
		if werr = h.e.WaitBackground(); werr != nil {
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
	if err := h.e.WaitBackground(); err != nil {
		t.Fatalf("WaitBackground once the fault is lifted: %v", err)
	}
	h.close()
	h.o.FS = vfs.Default()
	h.open()
	p.e = h.e
	if err := p.check(); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if st := h.e.Stats(); st.BackgroundErrors != 0 || st.LastBackgroundError != "" {
		t.Fatalf("a new session starts with failures: %d, %q", st.BackgroundErrors, st.LastBackgroundError)
	}
}
