package tests

import (
	"github.com/strata-db/strata"

	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shapeAllowance is the process memory TestMemoryShapes allows beyond MemoryBudget (see
// strata.Options.MemoryBudget for what the budget covers): the Go runtime and test binary, the Go heap
// of the LsmStore (table indexes and bloom filters, read and compaction buffers, one block per
// open iterator), the sort buffer of the segment being flushed (mapped outside the heap), and
// heap the garbage collector has not returned to the OS yet.
const shapeAllowance = 96 << 20

const shapeEnv = "STRATA_MEMSHAPE"

// memShape is one shape of state that must stay inside the budget: it writes its state into s
// and reads it all back, checking every element.
type memShape struct {
	name   string
	budget int64
	run    func(t *testing.T, s *strata.Store, scale float64)
}

var memShapes = []memShape{
	{"list-1GiB", 128 << 20, shapeList},
	{"map-5M", 64 << 20, shapeMap},
	{"namespaces-2M", 64 << 20, shapeNamespaces},
}

// TestMemoryShapes (issue "Nothing lost to a passing fault", item 2): for each shape of state —
// one list of 1 GiB under a 128 MiB budget, one map of 5 M entries, 2 M namespaces of one key —
// a child process writes it on a directory and reads it back, and its peak resident memory
// (VmHWM) must stay within the budget plus shapeAllowance. Not under -race (its shadow memory
// is not the store's) nor -short; CI runs it in the bounded-memory step. STRATA_MEMSHAPE_SCALE
// scales the sizes (a quick look: 0.1).
func TestMemoryShapes(t *testing.T) {
	if name := os.Getenv(shapeEnv); name != "" {
		runShapeChild(t, name)
		return
	}
	if testing.Short() || raceEnabled {
		t.Skip("peak process memory is measured without -race and -short (scripts/test.sh runs it)")
	}
	if os.Getenv("STRATA_EMULATED") != "" {
		t.Skip("under qemu-user the child's VmHWM is the emulator's")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range memShapes {
		t.Run(sh.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^TestMemoryShapes$", "-test.v")
			cmd.Env = append(os.Environ(), shapeEnv+"="+sh.name)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var hwm, heap int64 = -1, -1
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 5 && f[0] == "MEMSHAPE" {
					hwm, _ = strconv.ParseInt(f[2], 10, 64)
					heap, _ = strconv.ParseInt(f[4], 10, 64)
				}
			}
			if hwm < 0 {
				t.Fatalf("child printed no figures:\n%s", out)
			}
			t.Logf("%s: VmHWM %d MiB, peak Go heap %d MiB, budget %d MiB + allowance %d MiB (%v)",
				sh.name, hwm>>20, heap>>20, sh.budget>>20, shapeAllowance>>20, time.Since(start).Round(time.Second))
			if hwm > sh.budget+shapeAllowance {
				t.Errorf("%s: peak process memory %d MiB > budget %d MiB + %d MiB", sh.name, hwm>>20, sh.budget>>20, shapeAllowance>>20)
			}
		})
	}
}

// shapeHeap is the peak Go heap (HeapInuse) a shape's child saw, sampled by shapeSample.
var shapeHeap int64

func shapeSample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	shapeHeap = max(shapeHeap, int64(ms.HeapInuse))
}

func runShapeChild(t *testing.T, name string) {
	scale := 1.0
	if v, err := strconv.ParseFloat(os.Getenv(shapeEnv+"_SCALE"), 64); err == nil && v > 0 {
		scale = v
	}
	for _, sh := range memShapes {
		if sh.name != name {
			continue
		}
		s, err := strata.Open(t.TempDir(), strata.Options{MemoryBudget: sh.budget, SegmentSize: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		sh.run(t, s, scale)
		shapeSample()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("MEMSHAPE VmHWM %d HEAP %d\n", procStatus("VmHWM"), shapeHeap)
		return
	}
	t.Fatalf("no shape %q", name)
}

// shapeList appends 1 GiB (× scale) of 1000-byte elements to one list, then reads it back.
func shapeList(t *testing.T, s *strata.Store, scale float64) {
	l := must(strata.NewListState(s, strata.ListDescriptor[[]byte]{Name: "l", Codec: strata.Bytes}))
	k := s.Key([]byte("the-list"))
	n := int(float64(1<<30)*scale) / 1000
	elem := make([]byte, 1000)
	for i := range n {
		binary.BigEndian.PutUint64(elem, uint64(i))
		if err := l.Add(k, elem); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		if i%100000 == 0 {
			shapeSample()
		}
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	it := l.Get(k)
	i := 0
	for it.Next() {
		if v := it.Value(); len(v) != 1000 || binary.BigEndian.Uint64(v) != uint64(i) {
			t.Fatalf("element %d: %d bytes, number %d", i, len(v), binary.BigEndian.Uint64(v))
		}
		if i%100000 == 0 {
			shapeSample()
		}
		i++
	}
	if err := it.Err(); err != nil || i != n {
		t.Fatalf("read %d of %d elements: %v", i, n, err)
	}
}

// shapeMap puts 5 M (× scale) entries (8-byte user keys and values) into one map, then iterates
// it.
func shapeMap(t *testing.T, s *strata.Store, scale float64) {
	m := must(strata.NewMapState(s, strata.MapDescriptor[uint64, uint64]{Name: "m", KeyCodec: strata.Uint64, ValueCodec: strata.Uint64}))
	k := s.Key([]byte("the-map"))
	n := int(5e6 * scale)
	for i := range n {
		if err := m.Put(k, uint64(i), uint64(i)*3); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if i%200000 == 0 {
			shapeSample()
		}
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	seq, errf := m.Entries(k)
	got := 0
	for uk, uv := range seq {
		if uv != uk*3 {
			t.Fatalf("entry %d = %d", uk, uv)
		}
		if got++; got%200000 == 0 {
			shapeSample()
		}
	}
	if err := errf(); err != nil || got != n {
		t.Fatalf("iterated %d of %d entries: %v", got, n, err)
	}
}

// shapeNamespaces puts a value in 2 M (× scale) namespaces of one key, then reads each back.
func shapeNamespaces(t *testing.T, s *strata.Store, scale float64) {
	v := must(strata.NewValueState(s, strata.ValueDescriptor[uint64]{Name: "v", Codec: strata.Uint64}))
	k := s.Key([]byte("the-key"))
	n := int(2e6 * scale)
	var ns [8]byte
	for i := range n {
		binary.BigEndian.PutUint64(ns[:], uint64(i))
		if err := v.Put(k.In(ns[:]), uint64(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if i%200000 == 0 {
			shapeSample()
		}
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		binary.BigEndian.PutUint64(ns[:], uint64(i))
		x, ok, err := v.Get(k.In(ns[:]))
		if err != nil || !ok || x != uint64(i) {
			t.Fatalf("namespace %d: %d %v %v", i, x, ok, err)
		}
		if i%200000 == 0 {
			shapeSample()
		}
	}
}
