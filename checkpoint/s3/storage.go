package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/strata-db/strata/checkpoint"
)

// Storage is a checkpoint.Storage over one bucket (and key prefix) of an S3-compatible store.
// Its protocol and key layout are doc.go's. It is safe for concurrent use by multiple
// goroutines; the goroutines a multipart upload starts have all ended when the call returns.
type Storage struct {
	client *awss3.Client
	opts   Options
	root   string // Prefix + "/", or ""
}

var _ checkpoint.Storage = (*Storage)(nil)

// New returns a Storage for opts (validated, defaults filled). It sends no request: a missing
// bucket or bad credentials show at the first operation. Errors: ErrInvalidOptions,
// ErrNoCredentials.
func New(opts Options) (*Storage, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.defaults()
	creds, err := credentialsOf(opts)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 64
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr}
	}
	cfg := awss3.Options{
		Region:       opts.Region,
		Credentials:  creds,
		UsePathStyle: !opts.VirtualHosted,
		HTTPClient:   hc,
		// One retry policy, ours (retry.go), bounded by the caller's context.
		Retryer: aws.NopRetryer{},
		// Many S3-compatible servers do not accept the aws-chunked trailing checksums the SDK
		// sends by default since 2025; Content-MD5 (set by us) is understood everywhere.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if opts.Endpoint != "" {
		cfg.BaseEndpoint = aws.String(opts.Endpoint)
	}
	s := &Storage{client: awss3.New(cfg), opts: opts}
	if opts.Prefix != "" {
		s.root = opts.Prefix + "/"
	}
	return s, nil
}

// Open is New(ParseURL(url)): the storage a URL such as
// "s3://ckpt/jobs/fraud?endpoint=http://127.0.0.1:7070" names, with credentials from the
// environment. Errors: those of ParseURL and New.
func Open(url string) (*Storage, error) {
	o, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	return New(o)
}

func credentialsOf(o Options) (aws.CredentialsProvider, error) {
	id, secret, token := o.AccessKeyID, o.SecretAccessKey, o.SessionToken
	if id == "" {
		id, secret, token = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%w: set Options.AccessKeyID and SecretAccessKey, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", ErrNoCredentials)
		}
	}
	return credentials.NewStaticCredentialsProvider(id, secret, token), nil
}

// Options returns the options the storage uses, defaults filled in.
func (s *Storage) Options() Options { return s.opts }

// Spread returns the spread segment of doc.go ("Key layout") for an owner: the high 16 bits of
// its CRC32C as 4 lower-case hex digits.
func Spread(owner string) string {
	const hex = "0123456789abcdef"
	h := crc32.Checksum([]byte(owner), crc32.MakeTable(crc32.Castagnoli)) >> 16
	return string([]byte{hex[h>>12&15], hex[h>>8&15], hex[h>>4&15], hex[h&15]})
}

// Key returns the S3 key of a valid object name (doc.go, "Key layout").
func (s *Storage) Key(name string) string {
	if s.opts.NoSpread {
		return s.root + name
	}
	owner, _, _ := strings.Cut(name, "/")
	return s.root + Spread(owner) + "/" + name
}

// nameOf decodes a key listed under s.root back to its name; ok is false for a key that is
// not one of ours.
func (s *Storage) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.root)
	if !ok {
		return "", false
	}
	if !s.opts.NoSpread {
		spread, name, ok := strings.Cut(rest, "/")
		if !ok {
			return "", false
		}
		owner, _, _ := strings.Cut(name, "/")
		if spread != Spread(owner) {
			return "", false
		}
		rest = name
	}
	if checkpoint.ValidateName(rest) != nil {
		return "", false
	}
	return rest, true
}

// Put implements checkpoint.Storage.Put: one PutObject, or a multipart upload from
// MultipartThreshold bytes on.
func (s *Storage) Put(ctx context.Context, name string, data []byte) error {
	if err := begin(ctx, "put", name); err != nil {
		return err
	}
	if int64(len(data)) >= s.opts.MultipartThreshold && len(data) > 0 {
		return s.multipart(ctx, name, bytes.NewReader(data), int64(len(data)))
	}
	return s.putObject(ctx, "put", name, data, false)
}

// PutReader implements checkpoint.Storage.PutReader: below MultipartThreshold the bytes are
// read into one buffer and sent with one PutObject; from it on, a multipart upload holds at
// most Concurrency parts in memory.
func (s *Storage) PutReader(ctx context.Context, name string, r io.Reader, size int64) error {
	if err := begin(ctx, "put", name); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("checkpoint/s3: put %s: negative size %d", name, size)
	}
	if size >= s.opts.MultipartThreshold && size > 0 {
		return s.multipart(ctx, name, r, size)
	}
	buf := make([]byte, size)
	if err := readFull(r, buf, size); err != nil {
		return fmt.Errorf("checkpoint/s3: put %s: %w", name, err)
	}
	return s.putObject(ctx, "put", name, buf, false)
}

// readFull fills buf from r; a reader that ends early is io.ErrUnexpectedEOF with the number
// of bytes missing from the object of size total.
func readFull(r io.Reader, buf []byte, total int64) error {
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the reader ended %d bytes short of %d", io.ErrUnexpectedEOF, int64(len(buf)-n), total)
	}
	return err
}

// Create implements checkpoint.Storage.Create: a PutObject with If-None-Match: * (doc.go,
// invariant 2). Errors: checkpoint.ErrExists.
func (s *Storage) Create(ctx context.Context, name string, data []byte) error {
	if err := begin(ctx, "create", name); err != nil {
		return err
	}
	return s.putObject(ctx, "create", name, data, true)
}

func (s *Storage) putObject(ctx context.Context, op, name string, data []byte, ifAbsent bool) error {
	key := s.Key(name)
	md := contentMD5(data)
	uncertain := false // an earlier attempt may have stored the object
	err := s.retry(ctx, func(ctx context.Context) (bool, error) {
		in := &awss3.PutObjectInput{
			Bucket:        &s.opts.Bucket,
			Key:           &key,
			Body:          bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))),
			ContentMD5:    &md,
		}
		if ifAbsent {
			in.IfNoneMatch = aws.String("*")
		}
		_, err := s.client.PutObject(ctx, in)
		if err == nil {
			return false, nil
		}
		switch status := statusOf(err); {
		case ifAbsent && status == http.StatusPreconditionFailed:
			if uncertain && s.holds(ctx, key, data) {
				return false, nil // our own earlier attempt stored it
			}
			return false, checkpoint.ErrExists
		case ifAbsent && status == http.StatusConflict:
			return true, err // a concurrent conditional write of the key: S3 asks to retry
		}
		retry := transient(err)
		uncertain = uncertain || (retry && !unsent(err))
		return retry, err
	})
	if errors.Is(err, checkpoint.ErrExists) {
		return fmt.Errorf("%w: %s", checkpoint.ErrExists, name)
	}
	return wrap(op, name, err)
}

// holds reports whether the object at key has exactly data (one attempt: a false answer
// leaves the caller's ErrExists).
func (s *Storage) holds(ctx context.Context, key string, data []byte) bool {
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.opts.Bucket, Key: &key})
	if err != nil {
		return false
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, int64(len(data))+1))
	return err == nil && bytes.Equal(b, data)
}

func contentMD5(b []byte) string {
	sum := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// multipart uploads size bytes of r in parts (doc.go, "Protocol"): the parts are read in
// order by this goroutine and sent by up to Concurrency goroutines; the upload is completed
// only when every part succeeded, and aborted otherwise.
func (s *Storage) multipart(ctx context.Context, name string, r io.Reader, size int64) (err error) {
	key := s.Key(name)
	partSize := max(s.opts.PartSize, (size+maxParts-1)/maxParts)
	var uploadID string
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		out, err := s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &s.opts.Bucket, Key: &key})
		if err != nil {
			return transient(err), err
		}
		if out.UploadId == nil || *out.UploadId == "" {
			return false, fmt.Errorf("%w: CreateMultipartUpload without an upload id", ErrBadResponse)
		}
		uploadID = *out.UploadId
		return false, nil
	})
	if err != nil {
		return wrap("put", name, err)
	}
	defer func() {
		if err != nil {
			s.abort(key, uploadID)
		}
	}()

	nparts := int((size + partSize - 1) / partSize)
	parts := make([]types.CompletedPart, nparts)
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
			cancel()
		}
		mu.Unlock()
	}
	// Buffers circulate through free: at most Concurrency parts are read and not yet sent.
	free := make(chan []byte, s.opts.Concurrency)
	for range s.opts.Concurrency {
		free <- nil
	}
	for i := range nparts {
		var buf []byte
		select {
		case buf = <-free:
		case <-upCtx.Done():
		}
		if upCtx.Err() != nil {
			break
		}
		n := min(partSize, size-int64(i)*partSize)
		if int64(cap(buf)) < n {
			buf = make([]byte, partSize)
		}
		buf = buf[:n]
		if err := readFull(r, buf, size); err != nil {
			fail(err)
			break
		}
		wg.Add(1)
		go func(i int, buf []byte) {
			defer wg.Done()
			etag, err := s.uploadPart(upCtx, key, uploadID, int32(i+1), buf)
			if err != nil {
				fail(fmt.Errorf("part %d of %d: %w", i+1, nparts, err))
			} else {
				parts[i] = types.CompletedPart{ETag: &etag, PartNumber: aws.Int32(int32(i + 1))}
			}
			free <- buf
		}(i, buf)
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(firstErr, cerr) {
			firstErr = fmt.Errorf("%w (%v)", cerr, firstErr)
		}
		return wrap("put", name, firstErr)
	}
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket: &s.opts.Bucket, Key: &key, UploadId: &uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		if err != nil && statusOf(err) == http.StatusNotFound && s.exists(ctx, key, size) {
			// NoSuchUpload after an attempt whose answer was lost: the upload completed.
			return false, nil
		}
		return transient(err), err
	})
	return wrap("put", name, err)
}

// exists reports whether key is an object of size bytes.
func (s *Storage) exists(ctx context.Context, key string, size int64) bool {
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.opts.Bucket, Key: &key})
	return err == nil && out.ContentLength != nil && *out.ContentLength == size
}

func (s *Storage) uploadPart(ctx context.Context, key, uploadID string, n int32, buf []byte) (string, error) {
	md := contentMD5(buf)
	var etag string
	err := s.retry(ctx, func(ctx context.Context) (bool, error) {
		out, err := s.client.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: &s.opts.Bucket, Key: &key, UploadId: &uploadID, PartNumber: &n,
			Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))), ContentMD5: &md,
		})
		if err != nil {
			return transient(err), err
		}
		if out.ETag == nil {
			return false, fmt.Errorf("%w: UploadPart without an ETag", ErrBadResponse)
		}
		etag = *out.ETag
		return false, nil
	})
	return etag, err
}

// abort ends a failed multipart upload so that its parts stop costing storage: best effort,
// on a context of its own (the caller's may be done), one attempt; what it misses a
// lifecycle rule expires (doc.go, "What is not promised").
func (s *Storage) abort(key, uploadID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.opts.Bucket, Key: &key, UploadId: &uploadID})
}

// Get implements checkpoint.Storage.Get. Errors: checkpoint.ErrNotFound.
func (s *Storage) Get(ctx context.Context, name string) ([]byte, error) {
	if err := begin(ctx, "get", name); err != nil {
		return nil, err
	}
	b, err := s.get(ctx, name, -1, -1)
	return b, wrap("get", name, err)
}

// GetRange implements checkpoint.Storage.GetRange with a ranged GetObject. Errors:
// checkpoint.ErrNotFound, checkpoint.ErrRange (also for a range that only partly fits, which
// S3 would answer with the part that does).
func (s *Storage) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	if err := begin(ctx, "get", name); err != nil {
		return nil, err
	}
	if off < 0 || length < 0 {
		return nil, fmt.Errorf("%w: %s: bytes [%d, %d+%d)", checkpoint.ErrRange, name, off, off, length)
	}
	if length == 0 { // no Range header can ask for nothing: check the bounds with a HEAD
		key := s.Key(name)
		var size int64
		err := s.retry(ctx, func(ctx context.Context) (bool, error) {
			out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.opts.Bucket, Key: &key})
			if err != nil {
				return transient(err), err
			}
			size = aws.ToInt64(out.ContentLength)
			return false, nil
		})
		if err == nil && off > size {
			err = fmt.Errorf("%w: bytes [%d, %d+0) of %d", checkpoint.ErrRange, off, off, size)
		}
		if err != nil {
			return nil, wrap("get", name, err)
		}
		return []byte{}, nil
	}
	b, err := s.get(ctx, name, off, length)
	return b, wrap("get", name, err)
}

// get reads the object (off < 0) or length > 0 bytes of it from off, retrying a body cut
// short like any transient failure.
func (s *Storage) get(ctx context.Context, name string, off, length int64) ([]byte, error) {
	key := s.Key(name)
	var out []byte
	err := s.retry(ctx, func(ctx context.Context) (bool, error) {
		in := &awss3.GetObjectInput{Bucket: &s.opts.Bucket, Key: &key}
		if off >= 0 {
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
		}
		resp, err := s.client.GetObject(ctx, in)
		if err != nil {
			if statusOf(err) == http.StatusRequestedRangeNotSatisfiable {
				return false, fmt.Errorf("%w: bytes [%d, %d+%d)", checkpoint.ErrRange, off, off, length)
			}
			return transient(err), err
		}
		defer resp.Body.Close()
		want := aws.ToInt64(resp.ContentLength)
		if off >= 0 {
			start, end, total, ok := contentRange(aws.ToString(resp.ContentRange))
			if !ok || start != off || end-start+1 != want {
				return false, fmt.Errorf("%w: Content-Range %q, Content-Length %d for bytes=%d-%d",
					ErrBadResponse, aws.ToString(resp.ContentRange), want, off, off+length-1)
			}
			if want != length {
				return false, fmt.Errorf("%w: bytes [%d, %d+%d) of %d", checkpoint.ErrRange, off, off, length, total)
			}
		}
		if resp.ContentLength == nil || want < 0 {
			return false, fmt.Errorf("%w: no Content-Length", ErrBadResponse)
		}
		b := make([]byte, want)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return true, fmt.Errorf("reading the body: %w", err) // cut short: read again
		}
		out = b
		return false, nil
	})
	return out, err
}

// contentRange parses "bytes <start>-<end>/<total>" (total may be "*").
func contentRange(s string) (start, end, total int64, ok bool) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, 0, false
	}
	r, t, ok := strings.Cut(rest, "/")
	a, b, ok2 := strings.Cut(r, "-")
	if !ok || !ok2 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(a, 10, 64)
	end, err2 = strconv.ParseInt(b, 10, 64)
	total = -1
	if t != "*" {
		total, err3 = strconv.ParseInt(t, 10, 64)
	}
	return start, end, total, err1 == nil && err2 == nil && err3 == nil && start <= end
}

// List implements checkpoint.Storage.List with ListObjectsV2, following continuation tokens.
// A prefix that contains a whole owner (a "/") lists one key prefix; a shorter one lists the
// whole storage and filters (doc.go, "Key layout").
func (s *Storage) List(ctx context.Context, prefix string) ([]checkpoint.ObjectInfo, error) {
	if err := checkpoint.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkpoint/s3: list %q: %w", prefix, err)
	}
	keyPrefix := s.root + prefix
	if !s.opts.NoSpread {
		keyPrefix = s.root
		if owner, _, ok := strings.Cut(prefix, "/"); ok {
			keyPrefix = s.Key(owner + "/")
			keyPrefix += prefix[len(owner)+1:]
		}
	}
	var out []checkpoint.ObjectInfo
	var token *string
	for {
		var page *awss3.ListObjectsV2Output
		err := s.retry(ctx, func(ctx context.Context) (bool, error) {
			var err error
			page, err = s.client.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{
				Bucket: &s.opts.Bucket, Prefix: aws.String(keyPrefix),
				ContinuationToken: token, MaxKeys: aws.Int32(int32(s.opts.ListPageSize)),
			})
			return transient(err), err
		})
		if err != nil {
			return nil, fmt.Errorf("checkpoint/s3: list %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			name, ok := s.nameOf(aws.ToString(o.Key))
			if !ok || !strings.HasPrefix(name, prefix) {
				continue
			}
			info := checkpoint.ObjectInfo{Name: name, Size: aws.ToInt64(o.Size)}
			if o.LastModified != nil {
				// Invariant 3: rounded up to the next second, never earlier than the store.
				info.Created = o.LastModified.Truncate(time.Second).Add(time.Second)
			}
			out = append(out, info)
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		if page.NextContinuationToken == nil || *page.NextContinuationToken == "" {
			return nil, fmt.Errorf("checkpoint/s3: list %q: %w: truncated page without a continuation token", prefix, ErrBadResponse)
		}
		token = page.NextContinuationToken
	}
	slices.SortFunc(out, func(a, b checkpoint.ObjectInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete implements checkpoint.Storage.Delete with DeleteObject; a missing object is no error
// (S3 answers 204, some compatible stores 404).
func (s *Storage) Delete(ctx context.Context, name string) error {
	if err := begin(ctx, "delete", name); err != nil {
		return err
	}
	key := s.Key(name)
	err := s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.opts.Bucket, Key: &key})
		if err != nil && statusOf(err) == http.StatusNotFound && !isNoSuchBucket(err) {
			return false, nil
		}
		return transient(err), err
	})
	return wrap("delete", name, err)
}

// begin validates the name and looks at the context before any request.
func begin(ctx context.Context, op, name string) error {
	if err := checkpoint.ValidateName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("checkpoint/s3: %s %s: %w", op, name, err)
	}
	return nil
}

// wrap adds the operation and name to err, mapping a 404 to checkpoint.ErrNotFound.
func wrap(op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, checkpoint.ErrRange), errors.Is(err, checkpoint.ErrExists):
		return fmt.Errorf("%w: %s", err, name)
	case statusOf(err) == http.StatusNotFound && !isNoSuchBucket(err):
		return fmt.Errorf("%w: %s: %w", checkpoint.ErrNotFound, name, err)
	}
	return fmt.Errorf("checkpoint/s3: %s %s: %w", op, name, err)
}
