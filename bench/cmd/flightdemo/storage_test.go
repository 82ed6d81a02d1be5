package main

import (
	"errors"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/s3"
)

// TestOpenStorage: -checkpoints takes a directory or an s3:// URL (checkpoint/s3, credentials
// from the environment); a bad URL is refused rather than taken for a directory named "s3:".
func TestOpenStorage(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	st, err := openStorage("s3://ckpt/demo?endpoint=http://127.0.0.1:7070")
	if err != nil {
		t.Fatal(err)
	}
	s, ok := st.(*s3.Storage)
	if !ok || s.Options().Bucket != "ckpt" || s.Options().Prefix != "demo" || s.Options().Endpoint != "http://127.0.0.1:7070" {
		t.Fatalf("openStorage(s3://…) = %T %+v", st, st)
	}
	if _, err := openStorage("s3://ckpt/demo?colour=red"); !errors.Is(err, s3.ErrInvalidURL) {
		t.Fatalf("openStorage of a bad URL = %v; want s3.ErrInvalidURL", err)
	}
	dir := t.TempDir()
	if st, err := openStorage(dir); err != nil {
		t.Fatal(err)
	} else if d, ok := st.(*checkpoint.DirStorage); !ok || d.Dir() != dir {
		t.Fatalf("openStorage(dir) = %T", st)
	}
}
