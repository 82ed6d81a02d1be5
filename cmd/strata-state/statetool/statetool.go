// Package statetool is the offline state reader and writer behind the strata-state command (in
// the spirit of Flink's State Processor API): it lists what a checkpoint or savepoint holds,
// verifies every checksum, dumps its logical entries as JSON lines and writes a new canonical
// savepoint from such lines. The commands are thin: cmd/strata-state (the core module, local
// directories) and checkpoint/s3/cmd/strata-state (the S3 module: the same commands, and
// s3://bucket/prefix?endpoint=… sources) both call Run with their own Opener, so the core
// module never imports the AWS SDK.
//
// Usage:
//
//	strata-state info   -dir SRC -owner OWNER [-id N]   the manifest, states and objects, as JSON
//	strata-state verify -dir SRC -owner OWNER [-id N]   check every byte; exit 1 on damage
//	strata-state dump   -dir SRC -owner OWNER [-id N] [-kg A-B] [-state NAME]
//	                    the logical entries and timers of key groups A..B, JSON lines
//	strata-state write  -dir SRC -owner OWNER -id N [-in FILE]
//	                    a canonical savepoint from JSON lines (stdin by default)
//
// Exit status: 0, 1 on any failure (damage, a missing checkpoint, a -state the checkpoint does
// not register: ErrNoState), 2 on a bad command line (ErrUsage, followed by every flag's help);
// `strata-state CMD -h` prints the usage and every flag's help and exits 0.
//
// SRC is a directory (checkpoint.DirStorage) or, with the S3-enabled build, an S3-compatible
// bucket "s3://bucket/prefix?endpoint=http://…" (package checkpoint/s3; credentials from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
//
// # Dump
//
// dump reads a canonical savepoint directly (only the blocks of -kg); any other checkpoint or
// savepoint is first restored into a temporary directory and written as a canonical savepoint
// there (the engine reads it, so its files must be intact). The first line is the meta:
//
//	{"meta":{"maxParallelism":128,"keyGroups":[0,127],"states":[{"name","kind","ttl","codecs"}],
//	         "inputPosition":…,"operatorState":…}}
//
// (keyGroups: those dumped; states: every state of the savepoint, whatever -state says;
// codecs: the registry's codec ids, the root package's codecID). Each following line is one
// entry {"kg","state","kind","key","namespace","userKey","value","elements","ttl","elementTTLs"}
// or timer {"kg","timer","domain","timestamp","keyHash","key","namespace"}. Byte strings are
// printed as JSON strings when they are valid UTF-8 without control characters, else as
// {"base64": "..."}. Values, list elements and map user keys are decoded by the state's codec
// where the registry names a built-in one (strata.Int64, Uint64, Float64: a JSON number;
// String, Bytes: text as above); any other codec's bytes are printed as text or base64 as they
// are (a numeric codec's bytes that are not 8 long, or a NaN or infinite float, as base64).
//
// # Write
//
// write reads lines of the shape dump prints — so that `dump | jq … | write` transforms a
// savepoint — and writes them as canonical savepoint N of OWNER (Write). The meta line comes
// first; "kg" and "keyHash" may be left out (computed from the key as strata.Store.Key does:
// the low 32 bits of xxh3 of the key bytes, AssignToKeyGroup), "kind" is checked when present,
// codecs may be given by the short names "bytes", "string", "int64", "uint64" and "float64".
// Values are encoded by the state's codec where dump decodes them: a JSON number for a numeric
// codec, a string for text, {"base64": …} for raw bytes under any codec. A bad line is a
// *LineError naming its line (errors.Is ErrBadLine).
//
// -id 0 (the default) reads the newest checkpoint committed under OWNER (write needs an id).
// OWNER is the lineage: Options.Checkpoint.Owner, or strata.SavepointOwner of it for
// savepoints. Exit status: 0 when all is intact, 1 on a damaged or missing checkpoint (the
// error names the object and offset) or a bad input line, 2 on bad usage.
package statetool

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// Opener opens the checkpoint storage a -dir argument names.
type Opener func(where string) (checkpoint.Storage, error)

// ErrNeedS3 is OpenDir's error for an s3:// source: the core module's command does not link
// the S3 client (checkpoint/s3/cmd/strata-state does).
var ErrNeedS3 = errors.New("strata-state: s3:// sources need the S3-enabled build (go run ./cmd/strata-state in the checkpoint/s3 module)")

// OpenDir opens a local directory as a checkpoint.DirStorage; an s3:// URL is ErrNeedS3.
func OpenDir(where string) (checkpoint.Storage, error) {
	if strings.HasPrefix(where, "s3://") {
		return nil, ErrNeedS3
	}
	return checkpoint.NewDirStorage(where)
}

// ErrUsage is a bad command line (exit status 2).
var ErrUsage = errors.New("usage: strata-state info|verify|dump|write -dir SRC -owner OWNER [-id N] [-kg A-B] [-state NAME] [-in FILE]")

// Run runs one command (args without the program name), reading write's lines from stdin
// unless -in names a file, and returns the exit status (package doc). Errors are printed to
// stderr.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, open Opener) int {
	if err := command(args, stdin, stdout, open); err != nil {
		fmt.Fprintln(stderr, "strata-state:", err)
		if errors.Is(err, ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func command(args []string, stdin io.Reader, stdout io.Writer, open Opener) error {
	if len(args) == 0 {
		return ErrUsage
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var help strings.Builder // the flag package's message and the flags' help
	fl.SetOutput(&help)
	dir := fl.String("dir", "", "the checkpoint storage: a directory, or s3://bucket/prefix?endpoint=… (S3-enabled build)")
	owner := fl.String("owner", "", "the lineage")
	id := fl.Uint64("id", 0, "the checkpoint id (0: the newest; write: required)")
	kgFlag := fl.String("kg", "", "dump: the key groups A-B (default: all)")
	state := fl.String("state", "", "dump: one state or timer service (default: all)")
	in := fl.String("in", "", "write: the file of JSON lines (default: standard input)")
	if err := fl.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		// -h: the usage and every flag's help on standard output, exit 0.
		_, err := fmt.Fprintf(stdout, "%v\n%s", ErrUsage, help.String())
		return err
	} else if err != nil {
		return fmt.Errorf("%w\n%s", ErrUsage, strings.TrimRight(help.String(), "\n"))
	}
	if *dir == "" || *owner == "" || fl.NArg() != 0 {
		return ErrUsage
	}
	kgs := checkpoint.KeyGroupRange{Start: 0, End: 1<<16 - 1}
	if *kgFlag != "" {
		if _, err := fmt.Sscanf(*kgFlag, "%d-%d", &kgs.Start, &kgs.End); err != nil || kgs.Start > kgs.End {
			return ErrUsage
		}
	}
	ctx := context.Background()
	st, err := open(*dir)
	if err != nil {
		return err
	}
	if args[0] == "write" {
		if *id == 0 {
			return ErrUsage
		}
		r := stdin
		if *in != "" {
			f, err := os.Open(*in)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		h, err := Write(ctx, r, st, *owner, *id)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "canonical savepoint %d of %q: max parallelism %d, key groups %v\n", h.ID, h.Owner, h.MaxParallelism, h.KeyGroups)
		return err
	}
	if *id == 0 {
		h, err := strata.LatestCheckpoint(ctx, st, *owner)
		if err != nil {
			return err
		}
		*id = h.ID
	}
	switch args[0] {
	case "info":
		info, err := strata.InspectCheckpoint(ctx, st, *owner, *id)
		if err != nil {
			return err
		}
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		return e.Encode(info)
	case "verify":
		m, err := checkpoint.Verify(ctx, st, *owner, *id)
		if err != nil {
			return err
		}
		var bytes int64
		seen := map[string]bool{}
		for _, o := range m.Objects {
			if !seen[o.Name] {
				seen[o.Name], bytes = true, bytes+o.Size
			}
		}
		_, err = fmt.Fprintf(stdout, "checkpoint %d of %q: %d objects, %d bytes: intact\n", *id, *owner, len(seen), bytes)
		return err
	case "dump":
		return Dump(ctx, st, *owner, *id, kgs, *state, stdout)
	}
	return ErrUsage
}
