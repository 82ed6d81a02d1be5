package s3

import "errors"

// Errors of package s3. The Storage's methods also return checkpoint's sentinels
// (checkpoint.ErrExists, ErrNotFound, ErrRange, ErrInvalidName), wrapped with the object's name.
var (
	// ErrInvalidOptions: Options.Validate (and so New) refused a field; the error names it.
	ErrInvalidOptions = errors.New("checkpoint/s3: invalid options")

	// ErrInvalidURL: ParseURL could not read a storage URL (s3://bucket/prefix?…).
	ErrInvalidURL = errors.New("checkpoint/s3: invalid storage URL")

	// ErrNoCredentials: neither Options nor the environment (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY) gave credentials.
	ErrNoCredentials = errors.New("checkpoint/s3: no credentials")

	// ErrBadResponse: the store answered with something the protocol does not allow (a ranged
	// GET whose Content-Range or length does not match the request, a multipart upload without
	// an id). Not retried.
	ErrBadResponse = errors.New("checkpoint/s3: unexpected response from the store")
)
