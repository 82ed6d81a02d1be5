package s3

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/aws/smithy-go"
)

// retry runs attempt until it succeeds, fails for good, or the attempts or the context run
// out (doc.go, "Protocol"). attempt reports whether its error is transient; each attempt gets
// a context bounded by AttemptTimeout. The error returned wraps the last attempt's, and the
// context's error when the context ended the retries.
func (s *Storage) retry(ctx context.Context, attempt func(ctx context.Context) (retry bool, err error)) error {
	var last error
	for i := range s.opts.MaxAttempts {
		if i > 0 {
			if err := s.sleep(ctx, i); err != nil {
				return fmt.Errorf("%w after %d attempts (last: %w)", err, i, last)
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
		again, err := attempt(actx)
		timedOut := actx.Err() != nil && ctx.Err() == nil // the attempt's own deadline
		cancel()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			if errors.Is(err, cerr) {
				return err
			}
			return fmt.Errorf("%w (%w)", cerr, err)
		}
		if !again && !timedOut {
			return err
		}
		last = err
	}
	return fmt.Errorf("%d attempts: %w", s.opts.MaxAttempts, last)
}

// sleep waits the backoff before retry i (1-based): full jitter over BaseBackoff·2^(i-1),
// capped at MaxBackoff (as the AWS SDKs' standard retryer).
func (s *Storage) sleep(ctx context.Context, i int) error {
	ceil := s.opts.MaxBackoff
	if i-1 < 30 {
		ceil = min(ceil, s.opts.BaseBackoff<<(i-1))
	}
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statusOf returns the HTTP status of a response error, 0 for an error without a response
// (transport, context, ours).
func statusOf(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNoSuchBucket(err error) bool { return errorCode(err) == "NoSuchBucket" }

// transient reports whether a failed attempt may succeed if sent again: a 5xx, 429 or the
// throttling and timeout codes of S3, or a failure with no response at all (connection
// refused or reset, a body cut short) — unless it is the context's.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	switch errorCode(err) {
	case "SlowDown", "RequestTimeout", "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "Throttling", "ThrottlingException", "OperationAborted":
		return true
	}
	switch st := statusOf(err); {
	case st == 0:
		return true
	case st >= 500, st == http.StatusTooManyRequests, st == http.StatusRequestTimeout:
		return true
	}
	return false
}

// unsent reports whether a failed attempt certainly did not store anything because its
// request never reached the server whole: the connection failed while the request was being
// written (a *net.OpError of op "write", or "readfrom" when the body is copied into the
// socket). The server then holds fewer bytes than the Content-Length and cannot have stored
// the object. A server may answer early and reset the connection while the body is still
// being sent — versitygw answers a conditional PutObject of an existing key with 412 so — and
// such an attempt must not make a later 412 look like our own earlier write (doc.go,
// invariant 2). Any other failure without a response (a timeout, a reset while the response
// was awaited) leaves the outcome unknown.
func unsent(err error) bool {
	for e := err; e != nil; {
		var op *net.OpError
		if !errors.As(e, &op) {
			return false
		}
		if op.Op == "write" || op.Op == "readfrom" {
			return true
		}
		e = op.Err
	}
	return false
}
