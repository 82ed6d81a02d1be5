package statetool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// roundTripJob is a Store's states for the write tests: a value (Int64), a map with
// namespaces (String → Float64), a list (Uint64), a value of raw bytes (Bytes, some not UTF-8)
// and an event-time timer service.
type roundTripJob struct {
	v  *strata.ValueState[int64]
	m  *strata.MapState[string, float64]
	l  *strata.ListState[uint64]
	b  *strata.ValueState[[]byte]
	tm *strata.TimerService[string]
}

const roundTripKeys = 600

func newRoundTripJob(t *testing.T, s *strata.Store) *roundTripJob {
	t.Helper()
	var j roundTripJob
	var err error
	if j.v, err = strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64}); err != nil {
		t.Fatal(err)
	}
	if j.m, err = strata.NewMapState(s, strata.MapDescriptor[string, float64]{Name: "prices", KeyCodec: strata.String, ValueCodec: strata.Float64}); err != nil {
		t.Fatal(err)
	}
	if j.l, err = strata.NewListState(s, strata.ListDescriptor[uint64]{Name: "seen", Codec: strata.Uint64}); err != nil {
		t.Fatal(err)
	}
	if j.b, err = strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "blob", Codec: strata.Bytes}); err != nil {
		t.Fatal(err)
	}
	if j.tm, err = strata.NewTimerService(s, strata.TimerServiceDescriptor[string]{Name: "windows", NamespaceCodec: strata.String}); err != nil {
		t.Fatal(err)
	}
	return &j
}

func rtKey(i int) []byte { return fmt.Appendf(nil, "user-%d", i) }

// fill writes the model's state: every key a count, 2 map entries in namespace "w1", a list of
// i%4+1 elements, a blob with a control byte and an invalid UTF-8 byte, and a timer.
func (j *roundTripJob) fill(t *testing.T, s *strata.Store) {
	t.Helper()
	for i := range roundTripKeys {
		k := s.Key(rtKey(i))
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(j.v.Put(k, int64(i)-300))
		must(j.m.Put(k.In([]byte("w1")), "a", float64(i)/3))
		must(j.m.Put(k.In([]byte("w1")), fmt.Sprint("b", i), -float64(i)))
		for e := range i%4 + 1 {
			must(j.l.Add(k, uint64(i*10+e)))
		}
		must(j.b.Put(k, []byte{byte(i), 0xff, '\n', 'x'}))
		must(j.tm.RegisterEventTimeTimer(k, "w1", int64(1000+i)))
	}
}

// check compares every read of the keys of s's key groups with the model of fill.
func (j *roundTripJob) check(t *testing.T, s *strata.Store, kgs strata.KeyGroupRange) (keys int) {
	t.Helper()
	for i := range roundTripKeys {
		k := s.Key(rtKey(i))
		if !kgs.Contains(k.KeyGroup()) {
			continue
		}
		keys++
		if v, ok, err := j.v.Get(k); err != nil || !ok || v != int64(i)-300 {
			t.Fatalf("count of key %d: %v %v %v", i, v, ok, err)
		}
		if v, ok, err := j.m.Get(k.In([]byte("w1")), "a"); err != nil || !ok || v != float64(i)/3 {
			t.Fatalf("prices[a] of key %d: %v %v %v", i, v, ok, err)
		}
		if v, ok, err := j.m.Get(k.In([]byte("w1")), fmt.Sprint("b", i)); err != nil || !ok || v != -float64(i) {
			t.Fatalf("prices[b] of key %d: %v %v %v", i, v, ok, err)
		}
		if _, ok, err := j.m.Get(k, "a"); err != nil || ok {
			t.Fatalf("prices[a] of key %d in the void namespace: %v %v", i, ok, err)
		}
		var got []uint64
		it := j.l.Get(k)
		for it.Next() {
			got = append(got, it.Value())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		var want []uint64
		for e := range i%4 + 1 {
			want = append(want, uint64(i*10+e))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seen of key %d: %v, want %v", i, got, want)
		}
		if v, ok, err := j.b.Get(k); err != nil || !ok || !bytes.Equal(v, []byte{byte(i), 0xff, '\n', 'x'}) {
			t.Fatalf("blob of key %d: %x %v %v", i, v, ok, err)
		}
	}
	return keys
}

// dumpLines runs dump and returns its lines sorted (entry order within a key group differs
// between a Store's savepoint, in scan order, and write's, in key order).
func dumpLines(t *testing.T, dir, owner string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := run([]string{"dump", "-dir", dir, "-owner", owner}, &out, &errb); rc != 0 {
		t.Fatalf("dump %s %s: exit %d: %s", dir, owner, rc, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	return lines
}

// TestWriteRoundTrip: a checkpoint dumped and written back as a canonical savepoint (dump |
// write) dumps the same lines, and restores into 1 and 2 Stores with the same reads and timers
// as the Store it came from; the lines shuffled write the same savepoint.
func TestWriteRoundTrip(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "checkpoints")
	st, err := checkpoint.NewDirStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	const maxP = 128
	s, err := strata.Open(filepath.Join(root, "store"), strata.Options{MaxParallelism: maxP, MemoryBudget: 64 << 20,
		SegmentSize: 16 << 20, Checkpoint: strata.CheckpointOptions{Storage: st, Owner: "job-0"}})
	if err != nil {
		t.Fatal(err)
	}
	j := newRoundTripJob(t, s)
	j.fill(t, s)
	ctx := context.Background()
	if _, err := s.Checkpoint(ctx, 1, []byte("offset-17")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var dumped, errb bytes.Buffer
	if rc := run([]string{"dump", "-dir", dir, "-owner", "job-0", "-id", "1"}, &dumped, &errb); rc != 0 {
		t.Fatalf("dump: exit %d: %s", rc, errb.String())
	}
	if !strings.Contains(dumped.String(), `"value":-300`) || !strings.Contains(dumped.String(), `"elements":[0]`) {
		t.Fatalf("dump does not decode the codecs' values:\n%.600s", dumped.String())
	}
	var out bytes.Buffer
	if rc := Run([]string{"write", "-dir", dir, "-owner", "boot", "-id", "1"}, bytes.NewReader(dumped.Bytes()), &out, &errb, OpenDir); rc != 0 {
		t.Fatalf("write: exit %d: %s", rc, errb.String())
	}
	if a, b := dumpLines(t, dir, "job-0"), dumpLines(t, dir, "boot"); !slices.Equal(a, b) {
		t.Fatalf("the written savepoint dumps %d lines, the checkpoint %d (or they differ)", len(b), len(a))
	}
	// Shuffled input (reversed entry lines): the same savepoint.
	lines := strings.Split(strings.TrimSpace(dumped.String()), "\n")
	slices.Reverse(lines[1:])
	if rc := Run([]string{"write", "-dir", dir, "-owner", "boot", "-id", "2"}, strings.NewReader(strings.Join(lines, "\n")), &out, &errb, OpenDir); rc != 0 {
		t.Fatalf("write reversed: exit %d: %s", rc, errb.String())
	}
	if a, b := dumpLines(t, dir, "boot"), dumpLines(t, dir, "job-0"); !slices.Equal(a, b) {
		t.Fatal("the savepoint written from reversed lines dumps otherwise")
	}

	h, err := strata.LoadCheckpoint(ctx, st, "boot", 1)
	if err != nil {
		t.Fatal(err)
	}
	if string(h.InputPosition) != "offset-17" {
		t.Fatalf("input position %q", h.InputPosition)
	}
	for _, par := range []int{1, 2} {
		keys, timers := 0, 0
		for i := range par {
			kg := strata.ComputeKeyGroupRangeForOperatorIndex(maxP, par, i)
			r, err := strata.Restore(filepath.Join(root, fmt.Sprintf("r%d-%d", par, i)), strata.Options{MaxParallelism: maxP, KeyGroups: &kg,
				MemoryBudget: 64 << 20, SegmentSize: 16 << 20, Checkpoint: strata.CheckpointOptions{Owner: fmt.Sprintf("r%d-%d", par, i)}}, st, h)
			if err != nil {
				t.Fatal(err)
			}
			rj := newRoundTripJob(t, r)
			keys += rj.check(t, r, kg)
			timers += rj.tm.NumEventTimeTimers()
			if err := rj.tm.AdvanceWatermark(1<<40, func(tm strata.Timer[string]) error {
				if tm.Namespace != "w1" || tm.Timestamp < 1000 || tm.Timestamp >= 1000+roundTripKeys {
					return fmt.Errorf("timer %+v", tm)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := r.Discard(); err != nil {
				t.Fatal(err)
			}
		}
		if keys != roundTripKeys || timers != roundTripKeys {
			t.Fatalf("restored into %d Stores: %d keys, %d timers", par, keys, timers)
		}
	}
}

// TestWriteBadLines: every bad line is a *LineError naming its line (ErrBadLine), and nothing
// is committed.
func TestWriteBadLines(t *testing.T) {
	meta := `{"meta":{"maxParallelism":8,"states":[{"name":"c","kind":"value","codecs":["int64",""]},` +
		`{"name":"m","kind":"map","ttl":true,"codecs":["string","bytes"]},{"name":"l","kind":"list","codecs":["uint64",""]},` +
		`{"name":"tm","kind":"timer service","codecs":["string",""]}]}}`
	good := `{"state":"c","key":"k1","value":5}`
	for _, c := range []struct {
		name, input string
		line        int
	}{
		{"not JSON", meta + "\n" + good + "\n{oops\n", 3},
		{"no meta", good + "\n", 1},
		{"empty", "", 1},
		{"second meta", meta + "\n" + meta + "\n", 2},
		{"bad kind in meta", `{"meta":{"maxParallelism":8,"states":[{"name":"c","kind":"tree"}]}}`, 1},
		{"maxP", `{"meta":{"maxParallelism":0,"states":[]}}`, 1},
		{"unknown field", meta + "\n" + `{"state":"c","key":"k","value":1,"colour":"red"}` + "\n", 2},
		{"unknown state", meta + "\n\n" + `{"state":"x","key":"k","value":1}` + "\n", 3},
		{"string for int64", meta + "\n" + `{"state":"c","key":"k","value":"5"}` + "\n", 2},
		{"int64 overflow", meta + "\n" + `{"state":"c","key":"k","value":9223372036854775808}` + "\n", 2},
		{"number for bytes", meta + "\n" + `{"state":"m","key":"k","userKey":"u","value":5,"ttl":1}` + "\n", 2},
		{"bad base64", meta + "\n" + `{"state":"c","key":{"base64":"!!"},"value":5}` + "\n", 2},
		{"no key", meta + "\n" + `{"state":"c","value":5}` + "\n", 2},
		{"wrong kind", meta + "\n" + `{"state":"c","kind":"map","key":"k","value":5}` + "\n", 2},
		{"map without ttl", meta + "\n" + `{"state":"m","key":"k","userKey":"u","value":"v"}` + "\n", 2},
		{"map without userKey", meta + "\n" + `{"state":"m","key":"k","value":"v","ttl":1}` + "\n", 2},
		{"elements on a value", meta + "\n" + `{"state":"c","key":"k","elements":[1]}` + "\n", 2},
		{"empty list", meta + "\n" + `{"state":"l","key":"k","elements":[]}` + "\n", 2},
		{"ttl without TTL", meta + "\n" + `{"state":"c","key":"k","value":1,"ttl":5}` + "\n", 2},
		{"kg outside", meta + "\n" + `{"state":"c","kg":8,"key":"k","value":1}` + "\n", 2},
		{"kg not the hash's", meta + "\n" + `{"state":"c","kg":1,"keyHash":0,"key":"k","value":1}` + "\n", 2},
		{"duplicate", meta + "\n" + good + "\n" + `{"state":"l","key":"k","elements":[1]}` + "\n" + good + "\n", 4},
		{"timer of a state", meta + "\n" + `{"timer":"c","domain":"event","timestamp":1,"key":"k"}` + "\n", 2},
		{"timer domain", meta + "\n" + `{"timer":"tm","domain":"wall","timestamp":1,"key":"k"}` + "\n", 2},
		{"timer kg", meta + "\n" + `{"timer":"tm","domain":"event","timestamp":1,"key":"k","kg":9}` + "\n", 2},
		{"entry of a timer service", meta + "\n" + `{"state":"tm","key":"k","value":1}` + "\n", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := checkpoint.NewDirStorage(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			_, err = Write(context.Background(), strings.NewReader(c.input), st, "boot", 1)
			var le *LineError
			t.Log(err)
			if !errors.As(err, &le) || le.Line != c.line || !errors.Is(err, ErrBadLine) {
				t.Fatalf("Write: %v, want a LineError of line %d", err, c.line)
			}
			if l, err := st.List(context.Background(), ""); err != nil || len(l) != 0 {
				t.Fatalf("after a bad line: %d objects (%v)", len(l), err)
			}
		})
	}
	// The good lines alone are written, and write refuses to overwrite a committed id.
	st, err := checkpoint.NewDirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := meta + "\n" + good + "\n" + `{"state":"m","key":"k","namespace":{"base64":"AAE="},"userKey":"u","value":{"base64":"AP8="},"ttl":7}` + "\n" +
		`{"timer":"tm","domain":"processing","timestamp":3,"key":"k"}`
	if _, err := Write(context.Background(), strings.NewReader(in), st, "boot", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(context.Background(), strings.NewReader(in), st, "boot", 1); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("write over savepoint 1: %v", err)
	}
	var out, errb bytes.Buffer
	if rc := Run([]string{"write", "-dir", "x", "-owner", "boot"}, strings.NewReader(in), &out, &errb, OpenDir); rc != 2 {
		t.Fatalf("write without -id: exit %d", rc)
	}
	if rc := Run([]string{"dump", "-dir", "s3://b/p", "-owner", "boot"}, strings.NewReader(in), &out, &errb, OpenDir); rc != 1 ||
		!strings.Contains(errb.String(), "S3-enabled build") {
		t.Fatalf("s3:// in the core build: exit %d: %s", rc, errb.String())
	}
}

// FuzzWrite: any input is written or refused with a *LineError; nothing panics.
func FuzzWrite(f *testing.F) {
	meta := `{"meta":{"maxParallelism":8,"states":[{"name":"c","kind":"value","codecs":["int64",""]},` +
		`{"name":"m","kind":"map","ttl":true,"codecs":["string","float64"]},{"name":"l","kind":"list","ttl":true,"codecs":["uint64",""]},` +
		`{"name":"tm","kind":"timer service","codecs":["string",""]}]}}`
	f.Add(meta + "\n" + `{"state":"c","key":"k1","value":5}`)
	f.Add(meta + "\n" + `{"state":"m","key":"k","namespace":{"base64":"AAE="},"userKey":"u","value":1.5,"ttl":7}`)
	f.Add(meta + "\n" + `{"state":"l","kg":3,"key":"k","elements":[1,{"base64":"AP8="}],"elementTTLs":[1,2]}`)
	f.Add(meta + "\n" + `{"timer":"tm","domain":"processing","timestamp":3,"key":"k","keyHash":5}`)
	f.Fuzz(func(t *testing.T, in string) {
		st, err := checkpointfs.NewDirStorage(vfs.NewMem(), "sp")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Write(context.Background(), strings.NewReader(in), st, "boot", 1); err != nil && !errors.Is(err, ErrBadLine) {
			t.Fatalf("Write: %v is not a LineError", err)
		}
	})
}
