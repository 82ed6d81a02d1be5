// Command strata-state is the S3-enabled build of cmd/strata-state: the same commands (info,
// verify, dump, write; package cmd/strata-state/statetool's doc), whose -dir also takes an
// S3-compatible bucket as s3://bucket/prefix?endpoint=http://… (package checkpoint/s3's
// ParseURL: region, virtual-hosted and spread parameters; credentials from AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, never from the URL), as bench/cmd/flightdemo's -checkpoints does.
// It lives in the checkpoint/s3 module so that the core module never links the AWS SDK; a
// directory still opens as a checkpoint.DirStorage.
//
//	cd checkpoint/s3 && go run ./cmd/strata-state dump -dir 's3://ckpt/demo?endpoint=http://127.0.0.1:7070' -owner job-0
package main

import (
	"os"
	"strings"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/checkpoint/s3"
	"github.com/strata-db/strata/cmd/strata-state/statetool"
)

func main() {
	os.Exit(statetool.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, open))
}

// open opens an s3:// URL as an S3 storage (s3.Open), anything else as a directory.
func open(where string) (checkpoint.Storage, error) {
	if strings.HasPrefix(where, "s3://") {
		return s3.Open(where)
	}
	return checkpoint.NewDirStorage(where)
}
