// Command quotashare is the quotashare binary: serve runs the server (AWS Batch API,
// SQLite store, local executor); simulate runs a scenario script through the scheduling
// core and prints every decision with its reason.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/quotashare/quotashare/internal/sched"
	"github.com/quotashare/quotashare/internal/sim"
	"github.com/quotashare/quotashare/internal/supervisor"
)

const usage = `usage: quotashare COMMAND [flags] [ARGS]

  demo        play AWS's three-project example on a temporary server, narrated
  serve       run the server (AWS Batch API, SQLite store, local executor)
  apply       create or update a queue's setup from one file
  export      write a queue's setup as such a file
  queues      the server's job queues, with their policy, environment and shares
  shares      each share's limit, use, borrowing, idle capacity and queue
  watch       the same, redrawn live
  submit      submit a training job to a quota share
  jobs        list a queue's jobs with their state and reason
  describe    show a job, its attempts and preemptions
  explain     say why a job waits, was preempted, or ended
  priority    change a job's priority
  terminate   end a job as FAILED
  logs        print a job's output
  simulate    run a scenario script through the scheduling core
  completion  print a bash or zsh completion script
  backup      copy a data folder's database, consistently, while the server runs
  sagemaker-env  print the environment that points the SageMaker SDK at the server
  version     print the version: the module's, the commit it was built from, Go's

quotashare COMMAND --help shows a command's flags and an example. The client commands talk
to --endpoint (default http://127.0.0.1:8080) and take --output json.
`

const simulateUsage = `usage: quotashare simulate [flags] SCRIPT

Runs SCRIPT (a scenario: capacity, shares, job submissions, scheduling passes; see
examples/three-projects.txt) through the scheduling core and prints each decision:
starts, preemptions with their rule, why every waiting job waits, and each share's usage.

Example:
  quotashare simulate examples/three-projects.txt
`

func main() {
	supervisor.Intercept() // this binary is also the local executor's supervisor
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // the flag set printed the help asked for
		}
		fmt.Fprintln(os.Stderr, "quotashare:", err)
		os.Exit(2)
	}
}

const versionUsage = `usage: quotashare version

Prints the version: the module's (a tag, or (devel) for a build from a checkout), the
commit it was built from where the build recorded it, and Go's.

Example:
  quotashare version
`

// version is what quotashare version prints: the module's version (a tag, or (devel)
// for a build from a checkout), the commit and whether the tree had changes, and Go's.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "quotashare (no build information) " + runtime.Version()
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " commit " + s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return "quotashare " + v + " " + bi.GoVersion
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "logs":
		return logs(args[1:], stdout, stderr)
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	case "apply":
		return applyCmd(args[1:], stdout, stderr)
	case "export":
		return exportCmd(args[1:], stdout, stderr)
	case "completion":
		return completionCmd(args[1:], stdout, stderr)
	case "shares":
		return sharesCmd(args[1:], stdout, stderr)
	case "watch":
		return watchCmd(args[1:], stdout, stderr)
	case "submit":
		return submitCmd(args[1:], stdout, stderr)
	case "jobs":
		return jobsCmd(args[1:], stdout, stderr, time.Now())
	case "describe":
		return describeCmd(args[1:], stdout, stderr)
	case "explain":
		return explainCmd(args[1:], stdout, stderr)
	case "priority":
		return priorityCmd(args[1:], stdout, stderr)
	case "terminate":
		return terminateCmd(args[1:], stdout, stderr)
	case "backup":
		return backupCmd(args[1:], stdout, stderr)
	case "sagemaker-env":
		return sagemakerEnvCmd(args[1:], stdout, stderr)
	case "queues":
		return queuesCmd(args[1:], stdout, stderr)
	case "version", "--version":
		if len(args) > 1 {
			fmt.Fprint(stdout, versionUsage)
			if args[1] == "-h" || args[1] == "--help" || args[1] == "-help" {
				return nil
			}
			return errors.New("version takes no arguments")
		}
		fmt.Fprintln(stdout, version())
		return nil
	}
	if args[0] != "simulate" {
		return fmt.Errorf("unknown command %q: quotashare --help lists the commands", args[0])
	}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simulateUsage); fs.PrintDefaults() }
	hol := fs.Duration("head-of-line-timeout", 0, "how long a blocked head job lets smaller jobs pass before its share holds back (0: never)")
	depth := fs.Int("backfill-depth", 1000, "how many waiting jobs of a share one pass examines per phase")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("simulate takes exactly one script file")
	}
	if *depth < 1 {
		return fmt.Errorf("--backfill-depth: %d must be at least 1", *depth)
	}
	script, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	out, err := sim.Run(sched.New(sched.Config{HeadOfLineTimeout: *hol, BackfillDepth: *depth}), string(script))
	fmt.Fprint(stdout, out)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	return nil
}
