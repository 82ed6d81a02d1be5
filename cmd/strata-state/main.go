// Command strata-state reads a Strata checkpoint or savepoint offline, without a running job
// (in the spirit of Flink's State Processor API): it lists what one holds, verifies every
// checksum, dumps its logical entries as JSON lines and writes a new canonical savepoint from
// such lines. The commands and their output are package statetool's (its doc).
//
// This build reads local directories (checkpoint.DirStorage) only, so that the core module
// does not link the AWS SDK; the S3-enabled build of the same commands, which also opens
// s3://bucket/prefix?endpoint=… sources, is checkpoint/s3/cmd/strata-state in the checkpoint/s3
// module (cd checkpoint/s3 && go run ./cmd/strata-state …).
//
// Usage:
//
//	strata-state info   -dir DIR -owner OWNER [-id N]
//	strata-state verify -dir DIR -owner OWNER [-id N]
//	strata-state dump   -dir DIR -owner OWNER [-id N] [-kg A-B] [-state NAME]
//	strata-state write  -dir DIR -owner OWNER -id N [-in FILE]
//
// Exit status: 0 when all is intact, 1 on a damaged or missing checkpoint or a bad input line,
// 2 on bad usage.
package main

import (
	"os"

	"github.com/strata-db/strata/cmd/strata-state/statetool"
)

func main() {
	os.Exit(statetool.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, statetool.OpenDir))
}
