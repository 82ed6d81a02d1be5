package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/storagetest"
)

// The tests named TestReal* run against a real S3-compatible server that scripts/s3-real.sh
// starts (versitygw, posix back-end on a temporary directory, on 127.0.0.1) and passes in the
// environment:
//
//	STRATA_S3_TEST_ENDPOINT  the server's URL; unset: the TestReal* tests skip
//	STRATA_S3_TEST_BUCKET    a bucket the tests may fill (created if missing)
//	STRATA_S3_TEST_RUN       a prefix of this run's keys
//	STRATA_S3_TEST_PHASE     for TestRealKill: "before" (checkpoint, then an upload the
//	                         script kills the server under) or "after" (server restarted)
//	STRATA_S3_TEST_MARKER    TestRealKill's file: created once the upload is under way
//	AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  the server's credentials

func realOptions(t *testing.T, sub string) Options {
	t.Helper()
	ep := os.Getenv("STRATA_S3_TEST_ENDPOINT")
	if ep == "" {
		t.Skip("no real S3-compatible server: scripts/s3-real.sh starts one and sets STRATA_S3_TEST_ENDPOINT")
	}
	o := Options{Bucket: os.Getenv("STRATA_S3_TEST_BUCKET"), Endpoint: ep, Prefix: os.Getenv("STRATA_S3_TEST_RUN") + "/" + sub,
		BaseBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &o.Bucket})
	if err != nil && errorCode(err) != "BucketAlreadyOwnedByYou" && errorCode(err) != "BucketAlreadyExists" {
		t.Fatalf("CreateBucket: %v", err)
	}
	return o
}

func newReal(t *testing.T, o Options) *Storage {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRealConformance: the conformance suite at its default sizes (a 24 MiB object in two
// 16 MiB parts, 1100 objects listed across two pages).
func TestRealConformance(t *testing.T) {
	realOptions(t, "probe")
	n := 0
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		n++
		return newReal(t, realOptions(t, fmt.Sprintf("conf%02d", n)))
	}, storagetest.Options{ClockSkew: 20 * time.Millisecond}) // the server stamps with a file's mtime (doc.go, invariant 3)
}

// TestRealCreateRace: two writers — two Storages with connection pools of their own, as two
// processes — race a conditional create of one manifest name, 30 times: exactly one wins each
// time and the object is the winner's.
func TestRealCreateRace(t *testing.T) {
	o := realOptions(t, "race")
	a, b := newReal(t, o), newReal(t, o)
	ctx := context.Background()
	wins := [2]int{}
	for round := range 30 {
		name := checkpoint.ManifestName("job", uint64(round+1))
		var wg sync.WaitGroup
		var errs [2]error
		start := make(chan struct{})
		for w, s := range []*Storage{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[w] = s.Create(ctx, name, bytes.Repeat([]byte{byte('a' + w)}, 4096))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: both writers created %s", round, name)
			case err == nil:
				winner = w
			case !errors.Is(err, checkpoint.ErrExists):
				t.Fatalf("round %d: writer %d: %v", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: neither writer won", round)
		}
		wins[winner]++
		got, err := a.Get(ctx, name)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte('a' + winner)}, 4096)) {
			t.Fatalf("round %d: the object is not the winner's: %v", round, err)
		}
	}
	t.Logf("wins: writer a %d, writer b %d", wins[0], wins[1])
}

// TestRealStoreRoundTrip: a Store checkpoints into the server (tables of more than one part)
// and a new Store restores from it and reads every value back.
func TestRealStoreRoundTrip(t *testing.T) {
	s := newReal(t, realOptions(t, "store"))
	h := checkpointStore(t, s, "rt", 1)
	restoreAndCheck(t, s, h)
}

const (
	storeKeys  = 30000
	storeValue = 1000 // bytes: 30 MB of state, tables past one 16 MiB part
)

func valueOf(i int) []byte {
	v := bytes.Repeat([]byte{byte(i)}, storeValue)
	copy(v, fmt.Sprintf("value-%08d", i))
	return v
}

// checkpointStore fills a Store with storeKeys values and checkpoints it (id) into s under
// owner, returning the handle.
func checkpointStore(t *testing.T, s *Storage, owner string, id uint64) strata.CheckpointHandle {
	t.Helper()
	o := strata.Options{MemoryBudget: 64 << 20, Checkpoint: strata.CheckpointOptions{Storage: s, Owner: owner}}
	st, err := strata.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := strata.NewValueState(st, strata.ValueDescriptor[[]byte]{Name: "v", Codec: strata.Bytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range storeKeys {
		if err := v.Put(st.Key(fmt.Appendf(nil, "key-%06d", i)), valueOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := st.Checkpoint(ctx, id, []byte("pos"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint %d of %s: %+v", id, owner, h.Stats)
	return h
}

func restoreAndCheck(t *testing.T, s *Storage, h strata.CheckpointHandle) {
	t.Helper()
	st, err := strata.Restore(t.TempDir(), strata.Options{MemoryBudget: 64 << 20}, s, h)
	if err != nil {
		t.Fatalf("Restore from the server: %v", err)
	}
	defer st.Close()
	v, err := strata.NewValueState(st, strata.ValueDescriptor[[]byte]{Name: "v", Codec: strata.Bytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range storeKeys {
		got, ok, err := v.Get(st.Key(fmt.Appendf(nil, "key-%06d", i)))
		if err != nil || !ok || !bytes.Equal(got, valueOf(i)) {
			t.Fatalf("after Restore, key %d: %.20q, %v, %v", i, got, ok, err)
		}
	}
}

// TestRealKill runs in two phases around a server the script kills (SIGKILL, by PID) in the
// middle of an upload. Before: a Store checkpoints (id 1), then a 64 MiB PutReader starts,
// reading slowly; once 20 MiB were read it creates the marker file, on which the script
// kills the server; the upload must fail (not hang, not report success). After (the server
// restarted on the same directory): the half-uploaded object is invisible (Get: ErrNotFound,
// List: absent), the same upload succeeds, and the checkpoint written before the kill
// restores.
func TestRealKill(t *testing.T) {
	o := realOptions(t, "kill")
	phase := os.Getenv("STRATA_S3_TEST_PHASE")
	ctx := context.Background()
	const name, size = "kill/shared/big.sst", 64 << 20
	data := storagetest.Pattern(9, size)
	switch phase {
	case "before":
		s := newReal(t, o)
		checkpointStore(t, s, "killed", 1)
		marker := os.Getenv("STRATA_S3_TEST_MARKER")
		r := &slowReader{r: bytes.NewReader(data), markAt: 20 << 20, marker: marker}
		o.MaxAttempts, o.MaxBackoff = 4, 200*time.Millisecond
		s = newReal(t, o)
		uctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		start := time.Now()
		err := s.PutReader(uctx, name, r, size)
		if err == nil {
			t.Fatalf("the upload succeeded although the server was killed (read %d bytes)", r.n)
		}
		if r.markAt > 0 {
			t.Fatalf("the upload failed before the kill: %v", err)
		}
		t.Logf("the upload failed %v after it began, as it should: %v", time.Since(start).Round(time.Millisecond), err)
	case "after":
		s := newReal(t, o)
		if _, err := s.Get(ctx, name); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("after the kill, the cut upload: Get = %v; want ErrNotFound", err)
		}
		l, err := s.List(ctx, "kill/")
		if err != nil || len(l) != 0 {
			t.Fatalf("after the kill, List(kill/) = %+v, %v; want nothing", l, err)
		}
		ups, err := s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &o.Bucket, Prefix: aws.String(s.Key(name))})
		if err == nil {
			t.Logf("multipart uploads the kill left (invisible; a lifecycle rule expires them): %d", len(ups.Uploads))
		}
		if err := s.PutReader(ctx, name, bytes.NewReader(data), size); err != nil {
			t.Fatalf("the upload again after the restart: %v", err)
		}
		if got, err := s.GetRange(ctx, name, size-(1<<20), 1<<20); err != nil || !bytes.Equal(got, data[size-(1<<20):]) {
			t.Fatalf("GetRange of the uploaded object: %v", err)
		}
		h, err := strata.LoadCheckpoint(ctx, s, "killed", 1)
		if err != nil {
			t.Fatalf("LoadCheckpoint after the restart: %v", err)
		}
		restoreAndCheck(t, s, h)
	default:
		t.Skip("STRATA_S3_TEST_PHASE is neither before nor after: scripts/s3-real.sh runs the phases around a kill of the server")
	}
}

// slowReader reads r at about 8 MiB/s and creates marker once markAt bytes were read (then
// sets markAt to 0).
type slowReader struct {
	r      io.Reader
	n      int64
	markAt int64
	marker string
}

func (s *slowReader) Read(p []byte) (int, error) {
	p = p[:min(len(p), 256<<10)]
	time.Sleep(30 * time.Millisecond)
	m, err := s.r.Read(p)
	s.n += int64(m)
	if s.markAt > 0 && s.n >= s.markAt {
		s.markAt = 0
		if s.marker != "" {
			if err := os.WriteFile(s.marker, nil, 0o644); err != nil {
				return m, err
			}
		}
	}
	return m, err
}
