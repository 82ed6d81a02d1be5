// Command strata-state reads a Strata checkpoint or savepoint offline, without a running job
// (in the spirit of Flink's State Processor API): it lists what one holds, verifies every
// checksum and dumps its logical entries. Checkpoints are read from a local directory
// (checkpoint.DirStorage).
//
// Usage:
//
//	strata-state info   -dir DIR -owner OWNER [-id N]   the manifest, states and objects, as JSON
//	strata-state verify -dir DIR -owner OWNER [-id N]   check every byte; exit 1 on damage
//	strata-state dump   -dir DIR -owner OWNER [-id N] [-kg A-B] [-state NAME]
//	                    the logical entries and timers of key groups A..B, JSON lines
//
// dump reads a canonical savepoint directly (only the blocks of -kg); any other checkpoint or
// savepoint is first restored into a temporary directory and written as a canonical savepoint
// there (the engine reads it, so its files must be intact). Each line is one entry
// {"kg","state","kind","key","namespace","userKey","value","elements","ttl","elementTTLs"} or
// timer {"kg","timer","domain","timestamp","key","namespace"}; byte strings are printed as
// JSON strings when they are valid UTF-8 without control characters, else as
// {"base64": "..."}.
//
// -id 0 (the default) reads the newest checkpoint committed under OWNER. OWNER is the lineage:
// Options.Checkpoint.Owner, or strata.SavepointOwner of it for savepoints. Exit status: 0 when
// all is intact, 1 on a damaged or missing checkpoint (the error names the object and offset),
// 2 on bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage is a bad command line.
var errUsage = errors.New("usage: strata-state info|verify|dump -dir DIR -owner OWNER [-id N] [-kg A-B] [-state NAME]")

// run runs one command and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if err := command(args, stdout); err != nil {
		fmt.Fprintln(stderr, "strata-state:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func command(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	fl := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	dir := fl.String("dir", "", "the checkpoint directory (checkpoint.DirStorage)")
	owner := fl.String("owner", "", "the lineage")
	id := fl.Uint64("id", 0, "the checkpoint id (0: the newest)")
	kgFlag := fl.String("kg", "", "dump: the key groups A-B (default: all)")
	state := fl.String("state", "", "dump: one state or timer service (default: all)")
	if err := fl.Parse(args[1:]); err != nil || *dir == "" || *owner == "" || fl.NArg() != 0 {
		return errUsage
	}
	kgs := checkpoint.KeyGroupRange{Start: 0, End: 1<<16 - 1}
	if *kgFlag != "" {
		if _, err := fmt.Sscanf(*kgFlag, "%d-%d", &kgs.Start, &kgs.End); err != nil || kgs.Start > kgs.End {
			return errUsage
		}
	}
	ctx := context.Background()
	st, err := checkpoint.NewDirStorage(*dir)
	if err != nil {
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
		return dump(ctx, st, *owner, *id, kgs, *state, stdout)
	}
	return errUsage
}
