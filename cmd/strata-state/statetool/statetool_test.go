package statetool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// testJob writes a value and a map state of a Store, takes checkpoint 1 and a native
// savepoint 2, and returns the checkpoint and savepoint directories and the lineage.
func testJob(t *testing.T) (ckDir, spDir, owner string) {
	t.Helper()
	root := t.TempDir()
	ckDir, spDir = filepath.Join(root, "checkpoints"), filepath.Join(root, "savepoints")
	ck, err := checkpoint.NewDirStorage(ckDir)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := checkpoint.NewDirStorage(spDir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := strata.Open(filepath.Join(root, "store"), strata.Options{MaxParallelism: 128, MemoryBudget: 64 << 20,
		SegmentSize: 16 << 20, Checkpoint: strata.CheckpointOptions{Storage: ck, Owner: "job-0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	counts, err := strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := counts.Put(s.Key(fmt.Appendf(nil, "user-%d", i)), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Savepoint(ctx, sp, strata.SavepointNative, 2, nil); err != nil {
		t.Fatal(err)
	}
	return ckDir, spDir, "job-0"
}

// TestInfoVerify: info lists the states and objects of a real checkpoint and savepoint, verify
// passes on both, and a flipped byte in any object makes verify exit 1 naming it.
func TestInfoVerify(t *testing.T) {
	ckDir, spDir, owner := testJob(t)
	for _, c := range []struct{ dir, owner, id string }{
		{ckDir, owner, "1"}, {spDir, strata.SavepointOwner(owner), "0"},
	} {
		var out, errb bytes.Buffer
		if rc := run([]string{"info", "-dir", c.dir, "-owner", c.owner, "-id", c.id}, &out, &errb); rc != 0 {
			t.Fatalf("info %s: exit %d: %s", c.dir, rc, errb.String())
		}
		var info strata.CheckpointInfo
		if err := json.Unmarshal(out.Bytes(), &info); err != nil {
			t.Fatal(err)
		}
		if len(info.States) != 1 || info.States[0].Name != "count" || info.States[0].Kind != "value" || len(info.Objects) == 0 ||
			info.Handle.MaxParallelism != 128 {
			t.Fatalf("info %s: %s", c.dir, out.String())
		}
		out.Reset()
		if rc := run([]string{"verify", "-dir", c.dir, "-owner", c.owner, "-id", c.id}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "intact") {
			t.Fatalf("verify %s: exit %d: %s%s", c.dir, rc, out.String(), errb.String())
		}
		for _, o := range info.Objects {
			path := filepath.Join(c.dir, filepath.FromSlash(o.Name))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x10
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			errb.Reset()
			if rc := run([]string{"verify", "-dir", c.dir, "-owner", c.owner, "-id", c.id}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), o.Name) {
				t.Fatalf("verify with %s damaged: exit %d: %s", o.Name, rc, errb.String())
			}
			b[len(b)/2] ^= 0x10
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"list"}, &out, &errb); rc != 2 {
		t.Fatalf("bad usage: exit %d", rc)
	}
	// -h prints every flag's help on standard output and exits 0; an unknown flag exits 2
	// with the flags' help after the usage line.
	out.Reset()
	if rc := run([]string{"dump", "-h"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "-state") ||
		!strings.Contains(out.String(), "one state or timer service") {
		t.Fatalf("dump -h: exit %d: %q", rc, out.String())
	}
	errb.Reset()
	if rc := run([]string{"info", "-nosuch"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "-nosuch") ||
		!strings.Contains(errb.String(), "-owner") {
		t.Fatalf("unknown flag: exit %d: %q", rc, errb.String())
	}
	if rc := run([]string{"info", "-dir", ckDir, "-owner", "nobody"}, &out, &errb); rc != 1 {
		t.Fatalf("missing lineage: exit %d", rc)
	}
}

// TestDump: dump prints every entry of a checkpoint and of a native savepoint (through the
// engine: restored, then written canonical) once, a key-group range its part only, one
// state's filter, and the lines carry the decoded fields.
func TestDump(t *testing.T) {
	ckDir, spDir, owner := testJob(t)
	count := func(dir, owner string, extra ...string) []map[string]any {
		t.Helper()
		var out, errb bytes.Buffer
		args := append([]string{"dump", "-dir", dir, "-owner", owner}, extra...)
		if rc := run(args, &out, &errb); rc != 0 {
			t.Fatalf("%v: exit %d: %s", args, rc, errb.String())
		}
		var lines []map[string]any
		dec := json.NewDecoder(&out)
		for dec.More() {
			var l map[string]any
			if err := dec.Decode(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		return lines
	}
	all := count(ckDir, owner, "-id", "1")
	if len(all) != 1001 || all[0]["meta"] == nil || all[1]["state"] != "count" || all[1]["kind"] != "value" {
		t.Fatalf("dump of checkpoint 1: %d lines, first %v", len(all), all[1])
	}
	lo, hi := count(ckDir, owner, "-id", "1", "-kg", "0-63"), count(spDir, strata.SavepointOwner(owner), "-kg", "64-127")
	if len(lo)+len(hi) != 1002 || len(lo) == 0 || len(hi) == 0 {
		t.Fatalf("dump by halves: %d + %d lines", len(lo), len(hi))
	}
	for _, l := range hi {
		if kg, ok := l["kg"].(float64); ok && kg < 64 {
			t.Fatalf("key group %v in dump of 64-127", kg)
		}
	}
	if n := len(count(ckDir, owner, "-state", "count")); n != 1001 {
		t.Fatalf("dump of state count: %d lines", n)
	}
	// A state the checkpoint does not register fails, naming the ones it does, instead of
	// printing the meta line alone.
	var out, errb bytes.Buffer
	if rc := run([]string{"dump", "-dir", ckDir, "-owner", owner, "-state", "nothing"}, &out, &errb); rc != 1 ||
		!strings.Contains(errb.String(), ErrNoState.Error()) || !strings.Contains(errb.String(), `"count"`) {
		t.Fatalf("dump of an unknown state: exit %d: %q", rc, errb.String())
	}
	if rc := run([]string{"dump", "-dir", ckDir, "-owner", owner, "-kg", "9"}, &out, &errb); rc != 2 {
		t.Fatalf("bad -kg: exit %d", rc)
	}
}

// run runs the command with no standard input and local directories.
func run(args []string, stdout, stderr io.Writer) int {
	return Run(args, strings.NewReader(""), stdout, stderr, OpenDir)
}
