// Package s3 is a checkpoint.Storage over an S3-compatible object store (Amazon S3, or any
// service that speaks its API: versitygw, MinIO, Ceph RGW, …), through aws-sdk-go-v2's S3
// client. It is its own Go module, github.com/strata-db/strata/checkpoint/s3, so that the core
// module's dependencies stay the standard library and a few small packages (DESIGN §4a); it
// passes the same conformance suite as checkpoint.DirStorage (package checkpoint/storagetest).
//
// # Terms
//
//   - Name: a checkpoint object name (checkpoint.ValidateName), "<owner>/…".
//   - Key: the S3 object key a name is stored under (below).
//   - Attempt: one HTTP request; an operation is one or more attempts (Options.MaxAttempts).
//
// # Key layout
//
//	<prefix>/<spread>/<owner>/<rest of the name>    the default
//	<prefix>/<owner>/<rest of the name>             Options.NoSpread
//
//	prefix   Options.Prefix, "" for none (then no leading "/")
//	spread   4 lower-case hex digits: the high 16 bits of CRC32C (Castagnoli) of the owner,
//	         the name's first segment (part of the layout; do not change)
//
// S3 partitions a bucket's key space by key prefix and scales each partition to about 3,500
// writes and 5,500 reads per second; the owners of a job (one per subtask) share the start of
// their names, so without the spread segment every subtask of every job would load one
// partition. With it, owners scatter over 65,536 prefixes, and one owner — one List of
// "<owner>/", as GC makes — is still one key prefix. A List of a prefix that does not contain a
// whole owner ("" or a part of the first segment) lists everything under <prefix>/ and filters
// (the spread cannot be computed from part of an owner); nothing in Strata makes such a List but
// tools and tests.
//
// Keys under <prefix>/ that do not decode to a valid name in this layout (a foreign object, a
// spread segment that does not match its owner) are not listed and never touched.
//
// # Protocol
//
//	Put, PutReader < MultipartThreshold   one PutObject with Content-MD5
//	Put, PutReader >= MultipartThreshold  CreateMultipartUpload, UploadPart × n (Content-MD5
//	                                      each, Concurrency in flight), CompleteMultipartUpload;
//	                                      on any failure AbortMultipartUpload (best effort)
//	Create                                one PutObject with If-None-Match: * and Content-MD5:
//	                                      412 → checkpoint.ErrExists; 409 (a concurrent
//	                                      conditional write in progress) → retried
//	Get, GetRange                         GetObject (Range: bytes=off-end); a zero-length range
//	                                      is a HeadObject; 404 → ErrNotFound; 416 or a short
//	                                      206 → ErrRange
//	List                                  ListObjectsV2 pages, following the continuation token
//	Delete                                DeleteObject (S3 answers 204 for a missing key)
//
// Every attempt runs under Options.AttemptTimeout; a failed attempt is retried after an
// exponential backoff with full jitter (Options.BaseBackoff doubling up to MaxBackoff) when it
// is transient — HTTP 5xx, 429, SlowDown, RequestTimeout, a transport error (connection
// refused or reset, a body cut short), an attempt timeout — up to Options.MaxAttempts attempts
// and never past the caller's context. The SDK's own retryer is off, so there is one retry
// policy and the context bounds it.
//
// # Invariants
//
//  1. An object is visible whole or not at all: a PutObject is atomic in S3, and a multipart
//     upload is invisible (never listed, never read) until CompleteMultipartUpload, which is
//     sent only after every part succeeded; a reader short of its size, a failed part or a
//     done context aborts the upload instead.
//  2. Create is decided by the store: of concurrent Creates of one name exactly one gets a 2xx,
//     the others 412 (S3's conditional writes, 2024). A Create retried after an attempt whose
//     outcome is unknown (a timeout, a cut connection, a 5xx) may meet its own earlier,
//     successful write as a 412; it then reads the object and reports success only if the
//     bytes are its own. Two writers of identical bytes cannot be told apart — which is
//     harmless, since the object then holds what each of them meant to commit. An attempt
//     whose request could not be written whole (the connection failed mid-body: a server may
//     answer 412 early and reset, as versitygw does) stored nothing and adds no doubt.
//  3. ObjectInfo.Created is LastModified rounded up to the next whole second: S3 stamps at the
//     start of the request and many stores keep whole seconds, so the rounding makes Created
//     never earlier than the moment the object was stored by the store's clock, as
//     checkpoint.ObjectInfo promises. A store's clock may run behind ours: versitygw's posix
//     back-end stamps with the file's mtime, which Linux takes from a coarse clock up to a
//     tick (1–10 ms) behind the real time, as for checkpoint.DirStorage; a remote store's
//     clock may be off by seconds. The GC grace (minutes) is what absorbs such skew.
//  4. Names are validated before any request; a key is built only from a valid name, so no key
//     outside <prefix>/ is ever written, read or deleted.
//
// # Tests
//
// fake_test.go runs the conformance suite (package checkpoint/storagetest) in-process against
// gofakes3 v1.2.0, whose in-memory back-end implements If-None-Match: * on PutObject
// atomically (checked under its lock), behind a handler that injects faults (5xx, SlowDown,
// 409, a 500 after the write succeeded, a failed part). real_test.go runs it against a real
// server: scripts/s3-real.sh starts versitygw v1.8.0 (posix back-end, 127.0.0.1), runs the
// suite, two writers racing conditional creates and a Store checkpointed and restored, then
// kills the server by PID in the middle of a multipart upload, restarts it, and checks the cut
// upload is invisible and the checkpoint written before the kill restores.
//
// # What is not promised
//
// An upload cut short by a crash of this process leaves its parts on the store, invisible,
// until a lifecycle rule (AbortIncompleteMultipartUpload) expires them; Storage does not
// implement checkpoint.Cleaner. A store without conditional writes (If-None-Match on PUT)
// ignores the header: Create then overwrites, and zombie fencing is lost — the conformance
// suite's Create tests fail on such a store, which is how to find out. Payload integrity in
// transit rests on Content-MD5; the manifest's CRC32C, checked at restore, covers the rest.
package s3
