// Command quotashare-supervisor is what each instance of quotashare's local executor runs
// under (see internal/supervisor). Installed beside the quotashare binary (go install
// ./cmd/...), it is used instead of quotashare itself: a binary this small starts in a
// fraction of the time, and a supervisor starts with every instance.
package main

import (
	"os"

	"github.com/quotashare/quotashare/internal/supervisor"
)

func main() { os.Exit(supervisor.Main(os.Args[1:])) }
