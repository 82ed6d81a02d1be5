package strata

// Faults that do not pass, and the put workload ("Nothing lost to a passing fault"):
// a table damaged on disk stops the Store and its Close. That faults which pass (EMFILE, EIO)
// are retried while writes go on, and that a Persist during them persists everything, is
// tested in internal/engine (internal/engine/retry_faults_test.go) with byte keys; the RLIMIT_NOFILE child
// (openfiles_linux_test.go) runs this file's putLoad.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

func transientOptions(fs vfs.FS) (Options, func(*engine.Options)) {
	return Options{MaxParallelism: 128, MemoryBudget: 48 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BackpressureTimeout: 10 * time.Second, MaxOpenFiles: 8, fs: fs},
		func(o *engine.Options) { o.TableSize = 1 << 20 }
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
