package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/cmd/strata-state/statetool"
)

// fakeURL starts a gofakes3 server (in-memory back-end, in-process) with bucket "ckpt" and
// returns the storage URL of prefix "jobs" on it, with credentials in the environment.
func fakeURL(t *testing.T) string {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("ckpt"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be, gofakes3.WithIntegrityCheck(true)).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	return "s3://ckpt/jobs?endpoint=" + srv.URL
}

func run(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := statetool.Run(args, strings.NewReader(stdin), &out, &errb, open); rc != 0 {
		t.Fatalf("%v: exit %d: %s", args, rc, errb.String())
	}
	return out.String()
}

// TestS3Source: a Store checkpoints to S3 (gofakes3); strata-state's info, verify and dump
// read it through the s3:// URL, write puts a canonical savepoint from the dump back to the
// bucket, and that savepoint restores with the checkpoint's reads. A flipped byte in the
// bucket makes verify fail naming the object; a bad URL is an error.
func TestS3Source(t *testing.T) {
	url := fakeURL(t)
	st, err := open(url)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	s, err := strata.Open(filepath.Join(root, "store"), strata.Options{MaxParallelism: 64, MemoryBudget: 64 << 20,
		SegmentSize: 16 << 20, Checkpoint: strata.CheckpointOptions{Storage: st, Owner: "job-0"}})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if err := counts.Put(s.Key(fmt.Appendf(nil, "user-%d", i)), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var info strata.CheckpointInfo
	if err := json.Unmarshal([]byte(run(t, "", "info", "-dir", url, "-owner", "job-0")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Handle.ID != 1 || len(info.States) != 1 || info.States[0].Name != "count" || len(info.Objects) == 0 {
		t.Fatalf("info: %+v", info)
	}
	if out := run(t, "", "verify", "-dir", url, "-owner", "job-0"); !strings.Contains(out, "intact") {
		t.Fatalf("verify: %s", out)
	}
	dump := run(t, "", "dump", "-dir", url, "-owner", "job-0", "-id", "1")
	if n := strings.Count(dump, "\n"); n != 501 {
		t.Fatalf("dump: %d lines", n)
	}
	run(t, dump, "write", "-dir", url, "-owner", "boot", "-id", "7")
	if again := run(t, "", "dump", "-dir", url, "-owner", "boot"); strings.Count(again, "\n") != 501 {
		t.Fatalf("dump of the written savepoint: %d lines", strings.Count(again, "\n"))
	}
	h, err := strata.LoadCheckpoint(ctx, st, "boot", 7)
	if err != nil {
		t.Fatal(err)
	}
	r, err := strata.Restore(filepath.Join(root, "restored"), strata.Options{MaxParallelism: 64, MemoryBudget: 64 << 20,
		SegmentSize: 16 << 20, Checkpoint: strata.CheckpointOptions{Owner: "r"}}, st, h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Discard()
	rc, err := strata.NewValueState(r, strata.ValueDescriptor[int64]{Name: "count", Codec: strata.Int64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if v, ok, err := rc.Get(r.Key(fmt.Appendf(nil, "user-%d", i))); err != nil || !ok || v != int64(i) {
			t.Fatalf("restored count of user-%d: %v %v %v", i, v, ok, err)
		}
	}

	// Damage: one object rewritten with a flipped byte.
	o := info.Objects[0]
	b, err := st.Get(ctx, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := st.Delete(ctx, o.Name); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, o.Name, b); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := statetool.Run([]string{"verify", "-dir", url, "-owner", "job-0"}, nil, &out, &errb, open); rc != 1 || !strings.Contains(errb.String(), o.Name) {
		t.Fatalf("verify with %s damaged: exit %d: %s", o.Name, rc, errb.String())
	}
	errb.Reset()
	if rc := statetool.Run([]string{"info", "-dir", "s3://ckpt/jobs?colour=red", "-owner", "job-0"}, nil, &out, &errb, open); rc != 1 ||
		!strings.Contains(errb.String(), "colour") {
		t.Fatalf("bad URL: exit %d: %s", rc, errb.String())
	}
}
