package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/quotashare/quotashare/internal/sqlite"
)

const backupUsage = `usage: quotashare backup [flags] OUT

Writes a consistent copy of a data folder's database to the new file OUT, while the server
runs: every accepted job and decision up to that moment. To restore, put OUT as
quotashare.db in an empty data folder and start the server on it. (Copying the folder's
files by hand needs the database and its -wal file together, taken at one instant.)

Example:
  quotashare backup --data ./quotashare-data backup-2026-12-04.db
`

func backupCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, backupUsage); fs.PrintDefaults() }
	data := fs.String("data", "./quotashare-data", "the server's data folder")
	if err := fs.Parse(reorder(fs, args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("backup takes exactly one file to write")
	}
	if err := sqlite.Backup(*data, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s\n", *data, fs.Arg(0))
	return nil
}
