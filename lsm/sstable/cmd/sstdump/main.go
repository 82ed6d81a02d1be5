// Command sstdump prints the contents of Strata sstables (lsm/sstable.Dump):
// header, footer properties, filter, file index and every entry. It verifies
// every checksum as it reads and exits with status 1 at the first damaged
// structure, after printing the error (file and offset).
//
// Usage:
//
//	go run ./lsm/sstable/cmd/sstdump FILE.sst...
package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sstdump FILE.sst...")
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	status := 0
	for _, name := range os.Args[1:] {
		if err := dump(out, name); err != nil {
			out.Flush()
			fmt.Fprintf(os.Stderr, "sstdump: %s: %v\n", name, err)
			status = 1
		}
	}
	out.Flush()
	os.Exit(status)
}

func dump(out *bufio.Writer, name string) error {
	f, err := vfs.Default().Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "== %s\n", name)
	return sstable.Dump(out, f, st.Size())
}
