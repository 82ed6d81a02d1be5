package s3

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// minPartSize is S3's smallest part of a multipart upload (every part but the last).
const minPartSize = 5 << 20

// maxParts is S3's largest number of parts in one multipart upload.
const maxParts = 10000

// Options configure a Storage. Bucket is required; every other field has a default.
type Options struct {
	// Bucket is the S3 bucket holding the objects. It must exist (New does not create it).
	Bucket string
	// Prefix is a key prefix inside the bucket under which every object lives, without
	// leading or trailing "/" ("" for none): "jobs/fraud" stores "o/chk-…/MANIFEST" as
	// "jobs/fraud/<spread>/o/chk-…/MANIFEST". Its segments follow checkpoint.ValidateName.
	Prefix string
	// Endpoint is the service's base URL, e.g. "http://127.0.0.1:7070" for an S3-compatible
	// server; "" means Amazon S3 in Region.
	Endpoint string
	// Region is the signing region; default "us-east-1" (what S3-compatible servers expect).
	Region string
	// VirtualHosted addresses the bucket as a host name (bucket.endpoint) instead of a path
	// (endpoint/bucket). Default false: path-style, which every S3-compatible server accepts
	// and which needs no DNS for the bucket.
	VirtualHosted bool
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials. When AccessKeyID
	// is "", they come from the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	// AWS_SESSION_TOKEN (as the AWS SDKs and CLI read them); none there is ErrNoCredentials.
	AccessKeyID, SecretAccessKey, SessionToken string
	// NoSpread stores names under Prefix as they are, without the spread segment of doc.go
	// ("Key layout"); default false (spread). Part of the layout of a bucket: a storage must
	// be read with the setting it was written with.
	NoSpread bool
	// PartSize is the size in bytes of each part of a multipart upload; default 16 MiB,
	// at least 5 MiB (S3's minimum). It grows for an object of more than 10,000 parts.
	PartSize int64
	// MultipartThreshold is the object size in bytes from which Put and PutReader upload in
	// parts; default PartSize. PutReader buffers up to this many bytes for a single PutObject.
	MultipartThreshold int64
	// Concurrency is how many parts of one upload are in flight at once, each holding a
	// PartSize buffer; default 4.
	Concurrency int
	// MaxAttempts bounds the attempts of one request (the first included); default 8.
	MaxAttempts int
	// BaseBackoff is the wait before the first retry, doubling each retry (with full jitter)
	// up to MaxBackoff; defaults 50 ms and 5 s.
	BaseBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt (a request and its body); default 2 min. A timed-out
	// attempt is retried.
	AttemptTimeout time.Duration
	// ListPageSize is the MaxKeys of each ListObjectsV2 page; default 1000 (S3's maximum).
	ListPageSize int
	// HTTPClient sends the requests; default a client of its own with up to 64 idle
	// connections to the endpoint.
	HTTPClient *http.Client
}

func (o *Options) defaults() {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.PartSize == 0 {
		o.PartSize = 16 << 20
	}
	if o.MultipartThreshold == 0 {
		o.MultipartThreshold = o.PartSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 8
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = 2 * time.Minute
	}
	if o.ListPageSize == 0 {
		o.ListPageSize = 1000
	}
}

// Validate reports the first bad field, as an error wrapping ErrInvalidOptions that names it.
// Zero values are valid (they mean the defaults), except Bucket.
func (o Options) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Bucket == "" || strings.ContainsAny(o.Bucket, "/?#"):
		return bad("Bucket", "%q is not a bucket name", o.Bucket)
	case o.Prefix != "" && checkpoint.ValidateName(o.Prefix) != nil:
		return bad("Prefix", "%v", checkpoint.ValidateName(o.Prefix))
	case o.PartSize != 0 && o.PartSize < minPartSize:
		return bad("PartSize", "%d bytes, below S3's minimum part of %d", o.PartSize, minPartSize)
	case o.MultipartThreshold < 0:
		return bad("MultipartThreshold", "negative (%d)", o.MultipartThreshold)
	case o.Concurrency < 0:
		return bad("Concurrency", "negative (%d)", o.Concurrency)
	case o.MaxAttempts < 0:
		return bad("MaxAttempts", "negative (%d)", o.MaxAttempts)
	case o.BaseBackoff < 0 || o.MaxBackoff < 0:
		return bad("BaseBackoff/MaxBackoff", "negative (%v, %v)", o.BaseBackoff, o.MaxBackoff)
	case o.AttemptTimeout < 0:
		return bad("AttemptTimeout", "negative (%v)", o.AttemptTimeout)
	case o.ListPageSize < 0 || o.ListPageSize > 1000:
		return bad("ListPageSize", "%d, not in 1..1000", o.ListPageSize)
	case o.AccessKeyID != "" && o.SecretAccessKey == "":
		return bad("SecretAccessKey", "empty with AccessKeyID set")
	}
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("Endpoint", "%q is not an http(s) URL", o.Endpoint)
		}
	}
	return nil
}

// ParseURL reads a storage URL into Options:
//
//	s3://<bucket>[/<prefix>][?endpoint=<url>&region=<r>&virtual-hosted=<bool>&spread=<bool>]
//
// e.g. "s3://ckpt/jobs/fraud?endpoint=http://127.0.0.1:7070". Credentials never travel in the
// URL: they come from the environment (Options.AccessKeyID). Errors: ErrInvalidURL for
// another scheme, an unknown parameter or a bad value; then those of Validate.
func ParseURL(s string) (Options, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Options{}, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if u.Scheme != "s3" || u.Host == "" || u.User != nil || u.Fragment != "" {
		return Options{}, fmt.Errorf("%w: %q: want s3://bucket/prefix?endpoint=…", ErrInvalidURL, s)
	}
	o := Options{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			o.Endpoint = v
		case "region":
			o.Region = v
		case "virtual-hosted", "spread":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Options{}, fmt.Errorf("%w: %s=%q is not a boolean", ErrInvalidURL, k, v)
			}
			if k == "spread" {
				o.NoSpread = !b
			} else {
				o.VirtualHosted = b
			}
		default:
			return Options{}, fmt.Errorf("%w: unknown parameter %q", ErrInvalidURL, k)
		}
	}
	return o, o.Validate()
}
