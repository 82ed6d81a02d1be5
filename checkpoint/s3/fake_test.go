package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/storagetest"
)

// fake is a gofakes3 server (in-memory back-end) behind an HTTP handler that can inject
// faults: gofakes3 v1.2.0 implements If-None-Match: * on PutObject atomically (the check and
// the write happen under its back-end's lock), so Create runs against the fake as it is.
type fake struct {
	srv    *httptest.Server
	s3     http.Handler
	bucket string

	mu     sync.Mutex
	faults []fault // consumed in order by matching requests
	seen   atomic.Int64
}

// fault answers a matching request with status (and an S3 error code) instead of the fake,
// or, with after set, lets the fake handle it and then answers status — a write whose
// success the client never hears of. With reset set it answers nothing: it resets the
// connection (RST), before reading the request's body, or with after set once the fake has
// handled the request.
type fault struct {
	method string // "" any
	query  string // a query parameter the request must have ("uploadId", "partNumber"), "" any
	status int
	code   string
	after  bool
	reset  bool
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{bucket: "ckpt"}
	f.s3 = gofakes3.New(s3mem.New(), gofakes3.WithIntegrityCheck(true)).Server()
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	c := f.client(t)
	if _, err := c.client.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(f.bucket)}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fake) inject(fs ...fault) {
	f.mu.Lock()
	f.faults = append(f.faults, fs...)
	f.mu.Unlock()
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	f.seen.Add(1)
	f.mu.Lock()
	var hit *fault
	for i, ft := range f.faults {
		if (ft.method == "" || ft.method == r.Method) && (ft.query == "" || r.URL.Query().Has(ft.query)) {
			hit = &ft
			f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	if hit == nil {
		f.s3.ServeHTTP(w, r)
		return
	}
	if hit.after {
		f.s3.ServeHTTP(httptest.NewRecorder(), r)
	} else if !hit.reset {
		io.Copy(io.Discard, r.Body)
	}
	if hit.reset {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.(*net.TCPConn).SetLinger(0) // Close sends RST
		conn.Close()
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(hit.status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, hit.code)
}

func (f *fake) options(prefix string) Options {
	return Options{
		Bucket: f.bucket, Prefix: prefix, Endpoint: f.srv.URL,
		AccessKeyID: "test", SecretAccessKey: "test",
		PartSize: 5 << 20, ListPageSize: 100,
		BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	}
}

func (f *fake) client(t *testing.T) *Storage {
	t.Helper()
	s, err := New(f.options("t"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformanceFake runs the Storage conformance suite against gofakes3, each subtest under
// a prefix of its own, with and without the spread segment, with a small part size and list
// page so multipart uploads and continuation tokens are exercised.
func TestConformanceFake(t *testing.T) {
	f := newFake(t)
	n := 0
	for _, spread := range []bool{true, false} {
		t.Run(fmt.Sprintf("spread=%v", spread), func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
				n++
				o := f.options(fmt.Sprintf("run/t%03d", n))
				o.NoSpread = !spread
				s, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}, storagetest.Options{LargeSize: 12<<20 + 3, ManyObjects: 250, Short: testing.Short()})
		})
	}
}

// TestKeyLayout pins doc.go's key layout: the spread segment is CRC32C's high 16 bits of the
// owner, and a key that does not decode (a foreign object, a wrong spread) is never listed.
func TestKeyLayout(t *testing.T) {
	f := newFake(t)
	s := f.client(t)
	if got := Spread("job-7"); got != "7dd9" {
		t.Fatalf("Spread(job-7) = %s (the layout of existing buckets would change)", got)
	}
	if k := s.Key("job-7/chk-1/MANIFEST"); k != "t/7dd9/job-7/chk-1/MANIFEST" {
		t.Fatalf("Key = %s", k)
	}
	ctx := context.Background()
	for _, key := range []string{"t/0000/job-7/x", "t/7dd9", "t/7dd9/job-7/.tmp", "t/README", "u/7dd9/job-7/y"} {
		if _, err := s.client.PutObject(ctx, &awss3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "job-7/y", []byte("1")); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "job-7/", "j"} {
		l, err := s.List(ctx, prefix)
		if err != nil || len(l) != 1 || l[0].Name != "job-7/y" {
			t.Errorf("List(%q) = %+v, %v; want only job-7/y", prefix, l, err)
		}
	}
}

// TestRetries: transient answers (503, SlowDown, 500) are retried until success; a 403 is not
// retried; a done context stops the retries.
func TestRetries(t *testing.T) {
	f := newFake(t)
	s := f.client(t)
	ctx := context.Background()
	f.inject(fault{method: "PUT", status: 503, code: "SlowDown"}, fault{method: "PUT", status: 500, code: "InternalError"})
	if err := s.Put(ctx, "o/x", []byte("hello")); err != nil {
		t.Fatalf("Put through two transient failures: %v", err)
	}
	f.inject(fault{method: "GET", status: 503, code: "ServiceUnavailable"})
	if b, err := s.Get(ctx, "o/x"); err != nil || string(b) != "hello" {
		t.Fatalf("Get through a transient failure = %q, %v", b, err)
	}
	f.inject(fault{method: "PUT", status: 403, code: "AccessDenied"})
	before := f.seen.Load()
	if err := s.Put(ctx, "o/y", []byte("x")); err == nil || statusOf(err) != 403 {
		t.Fatalf("Put with a 403 = %v", err)
	}
	if n := f.seen.Load() - before; n != 1 {
		t.Fatalf("a 403 was sent %d times, want once", n)
	}
	for range 200 { // more than 100 ms of backoffs of up to 20 ms can consume
		f.inject(fault{method: "PUT", status: 503, code: "SlowDown"})
	}
	o := f.options("t")
	o.MaxAttempts = 1000
	o.BaseBackoff, o.MaxBackoff = 20*time.Millisecond, 20*time.Millisecond
	slow, _ := New(o)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := slow.Put(cctx, "o/z", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put retried past its context: %v", err)
	}
	f.mu.Lock()
	f.faults = nil
	f.mu.Unlock()
	if _, err := s.Get(ctx, "o/z"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Get of a Put that never succeeded: %v", err)
	}
}

// TestCreateRetries: a 409 (a concurrent conditional write) is retried; a Create whose first
// attempt stored the object but whose answer was lost (a 500 after the write) succeeds on its
// retry's 412 because the bytes are its own, and fails with ErrExists if they are not.
func TestCreateRetries(t *testing.T) {
	f := newFake(t)
	s := f.client(t)
	ctx := context.Background()
	f.inject(fault{method: "PUT", status: 409, code: "ConditionalRequestConflict"})
	if err := s.Create(ctx, "o/chk-1/MANIFEST", []byte("m1")); err != nil {
		t.Fatalf("Create through a 409: %v", err)
	}
	f.inject(fault{method: "PUT", status: 500, code: "InternalError", after: true})
	if err := s.Create(ctx, "o/chk-2/MANIFEST", []byte("m2")); err != nil {
		t.Fatalf("Create whose first answer was lost: %v", err)
	}
	if err := s.Create(ctx, "o/chk-2/MANIFEST", []byte("m2")); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("a second Create of the same bytes, with no uncertain attempt = %v; want ErrExists", err)
	}
	if err := s.Put(ctx, "o/chk-3/MANIFEST", []byte("theirs")); err != nil {
		t.Fatal(err)
	}
	f.inject(fault{method: "PUT", status: 503, code: "SlowDown"})
	if err := s.Create(ctx, "o/chk-3/MANIFEST", []byte("ours")); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("Create over another writer's object after a retry = %v; want ErrExists", err)
	}
}

// TestCreateResets: a connection reset while the request is still being sent (as versitygw
// answers 412 to a conditional PutObject of an existing key before reading the body, and
// resets) proves the attempt stored nothing, so the retry's 412 is another writer's object —
// even one of the same bytes — and Create fails with ErrExists; a reset after the server
// stored the object leaves the outcome unknown, and the retry's 412 on our own bytes is a
// success (doc.go, invariant 2).
func TestCreateResets(t *testing.T) {
	f := newFake(t)
	s := f.client(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("m"), 32<<20) // more than loopback's socket buffers hold
	if err := s.Create(ctx, "o/chk-1/MANIFEST", data); err != nil {
		t.Fatal(err)
	}
	f.inject(fault{method: "PUT", reset: true})
	if err := s.Create(ctx, "o/chk-1/MANIFEST", data); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("a second Create of the same bytes whose first attempt was reset mid-body = %v; want ErrExists", err)
	}
	f.inject(fault{method: "PUT", reset: true, after: true})
	if err := s.Create(ctx, "o/chk-2/MANIFEST", []byte("m2")); err != nil {
		t.Fatalf("Create whose first attempt stored the object and was then reset: %v", err)
	}
	if got, err := s.Get(ctx, "o/chk-2/MANIFEST"); err != nil || string(got) != "m2" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

// TestMultipartFailures: a part that fails for good aborts the upload (nothing visible, no
// upload left); a transient part failure is retried; a done context mid-upload aborts.
func TestMultipartFailures(t *testing.T) {
	f := newFake(t)
	s := f.client(t)
	ctx := context.Background()
	data := storagetest.Pattern(3, 11<<20)
	f.inject(fault{method: "PUT", query: "partNumber", status: 503, code: "SlowDown"})
	if err := s.Put(ctx, "o/retried", data); err != nil {
		t.Fatalf("multipart Put through a transient part failure: %v", err)
	}
	if b, err := s.Get(ctx, "o/retried"); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Get after a retried part: %d bytes, %v", len(b), err)
	}
	f.inject(fault{method: "PUT", query: "partNumber", status: 400, code: "InvalidDigest"})
	if err := s.Put(ctx, "o/failed", data); err == nil {
		t.Fatal("multipart Put with a failed part succeeded")
	}
	if _, err := s.Get(ctx, "o/failed"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a failed multipart upload is visible: %v", err)
	}
	ups, err := s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &f.bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left after a failure (want them aborted)", len(ups.Uploads))
	}
	// A done context after the first part.
	cctx, cancel := context.WithCancel(ctx)
	r := &cancelAfter{r: bytes.NewReader(data), n: 6 << 20, cancel: cancel}
	if err := s.PutReader(cctx, "o/cancelled", r, int64(len(data))); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutReader with a context done mid-upload = %v; want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "o/cancelled"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a cancelled multipart upload is visible: %v", err)
	}
}

// cancelAfter cancels a context once n bytes were read from it.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	if c.n -= m; c.n <= 0 {
		c.cancel()
	}
	return m, err
}

// TestParseURL: the -checkpoints URL form, and its errors.
func TestParseURL(t *testing.T) {
	o, err := ParseURL("s3://ckpt/jobs/fraud/?endpoint=http://127.0.0.1:7070&region=eu-west-1&spread=false")
	if err != nil {
		t.Fatal(err)
	}
	if o.Bucket != "ckpt" || o.Prefix != "jobs/fraud" || o.Endpoint != "http://127.0.0.1:7070" || o.Region != "eu-west-1" || !o.NoSpread || o.VirtualHosted {
		t.Fatalf("ParseURL = %+v", o)
	}
	for _, bad := range []string{"file:///x", "s3:///x", "s3://b/x?colour=red", "s3://b/x?spread=maybe", "s3://b/../x", "s3://b?endpoint=ftp://h", "s3://user:pw@b/x"} {
		_, err := ParseURL(bad)
		if !errors.Is(err, ErrInvalidURL) && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("ParseURL(%q) = %v; want ErrInvalidURL or ErrInvalidOptions", bad, err)
		}
	}
	if err := (Options{Bucket: "b", PartSize: 1 << 20}).Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "PartSize") {
		t.Errorf("Validate of a 1 MiB part = %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	if _, err := New(Options{Bucket: "b"}); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("New without credentials = %v; want ErrNoCredentials", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if _, err := New(Options{Bucket: "b"}); err != nil {
		t.Errorf("New with credentials from the environment = %v", err)
	}
}
