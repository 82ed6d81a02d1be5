package main

import (
	"context"
	"strings"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/s3"
)

// openStorage returns the checkpoint storage -checkpoints names: an S3-compatible bucket for
// "s3://bucket/prefix?endpoint=…" (package checkpoint/s3; credentials from AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY), a local directory otherwise.
func openStorage(where string) (checkpoint.Storage, error) {
	if isURL(where) {
		return s3.Open(where)
	}
	return checkpoint.NewDirStorage(where)
}

func isURL(where string) bool { return strings.HasPrefix(where, "s3://") }

// storageBytes is the size in bytes of every object in the storage at where.
func storageBytes(s checkpoint.Storage, where string) int64 {
	if !isURL(where) {
		return dirBytes(where)
	}
	l, err := s.List(context.Background(), "")
	if err != nil {
		return -1
	}
	var n int64
	for _, o := range l {
		n += o.Size
	}
	return n
}
