// Command strata-state reads a Strata checkpoint or native savepoint offline, without a running
// job (in the spirit of Flink's State Processor API): it lists what one holds and verifies
// every checksum. Checkpoints are read from a local directory (checkpoint.DirStorage).
//
// Usage:
//
//	strata-state info   -dir DIR -owner OWNER [-id N]   the manifest, states and objects, as JSON
//	strata-state verify -dir DIR -owner OWNER [-id N]   check every byte; exit 1 on damage
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
var errUsage = errors.New("usage: strata-state info|verify -dir DIR -owner OWNER [-id N]")

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
	if err := fl.Parse(args[1:]); err != nil || *dir == "" || *owner == "" || fl.NArg() != 0 {
		return errUsage
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
	}
	return errUsage
}
