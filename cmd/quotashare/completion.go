package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// completionFlags lists each command's flags for shell completion; TestCompletion checks
// it against every command's --help.
var completionFlags = map[string][]string{
	"serve":         {"--addr", "--data", "--region", "--account-id", "--preemption-grace", "--retain-finished", "--instance-types", "--max-log-bytes", "--metrics-token", "--no-metrics", "--log-format", "--gpus", "--gpu-table", "--example", "--quiet", "--credentials", "--insecure-no-auth", "--pass-env", "--init", "--accept-data-loss", "--job-uids", "--shared-job-user", "--object-store", "--checkpoint-every", "--unstaged-channels", "--containment", "--store", "--lease-ttl", "--advertise-addr", "--allowed-hosts", "--dashboard-streams", "--executor", "--kubeconfig", "--namespace", "--kube-options"},
	"demo":          {"--endpoint", "--fast"},
	"apply":         {"-f", "--dry-run", "--endpoint", "--output"},
	"export":        {"--queue", "--endpoint", "--output"},
	"shares":        {"--queue", "--endpoint", "--output"},
	"watch":         {"--queue", "--interval", "--times", "--endpoint", "--output"},
	"submit":        {"--queue", "--share", "--name", "--priority", "--instance-type", "--count", "--file", "--retries", "--preemption-retries", "--timeout", "--checkpoint", "--endpoint", "--output"},
	"jobs":          {"--queue", "--share", "--state", "--limit", "--endpoint", "--output"},
	"describe":      {"--endpoint", "--output"},
	"explain":       {"--endpoint", "--output"},
	"priority":      {"--endpoint", "--output"},
	"terminate":     {"--reason", "--endpoint", "--output"},
	"logs":          {"--endpoint", "--attempt", "--host", "--stderr", "--follow"},
	"simulate":      {"--head-of-line-timeout", "--backfill-depth"},
	"completion":    {},
	"backup":        {"--data"},
	"sagemaker-env": {"--bucket", "--config", "--endpoint", "--output"},
	"version":       {},
	"queues":        {"--endpoint", "--output"},
}

// fileFlags take a file name.
var fileFlags = []string{"-f", "--file", "--credentials", "--gpu-table", "--data", "--kubeconfig", "--kube-options", "--config"}

const completionUsage = `usage: quotashare completion bash|zsh

Prints a completion script for the shell: commands, their flags, file names after
-f/--file/--credentials/--gpu-table/--data, states after --state, outputs after --output.

Example:
  source <(quotashare completion bash)              # bash, for this shell
  quotashare completion zsh > "${fpath[1]}/_quotashare"   # zsh
`

func completionCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
		fmt.Fprint(stdout, completionUsage)
		return nil
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		fmt.Fprint(stderr, completionUsage)
		return fmt.Errorf("completion takes bash or zsh")
	}
	var b strings.Builder
	if args[0] == "zsh" {
		b.WriteString("#compdef quotashare\nautoload -U +X bashcompinit && bashcompinit\n")
	}
	cmds := slices.Sorted(func(yield func(string) bool) {
		for c := range completionFlags {
			if !yield(c) {
				return
			}
		}
	})
	b.WriteString("_quotashare() {\n\tlocal cur prev opts\n\tcur=\"${COMP_WORDS[COMP_CWORD]}\"\n\tprev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=( $(compgen -W %q -- \"$cur\") )\n\t\treturn\n\tfi\n", strings.Join(cmds, " "))
	fmt.Fprintf(&b, "\tcase \"$prev\" in\n\t\t%s) COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;;\n", strings.Join(fileFlags, "|"))
	b.WriteString("\t\t--output) COMPREPLY=( $(compgen -W \"table json\" -- \"$cur\") ); return ;;\n")
	b.WriteString("\t\t--executor) COMPREPLY=( $(compgen -W \"local kubernetes\" -- \"$cur\") ); return ;;\n")
	b.WriteString("\t\t--state) COMPREPLY=( $(compgen -W \"RUNNABLE SCHEDULED STARTING RUNNING SUCCEEDED FAILED\" -- \"$cur\") ); return ;;\n")
	b.WriteString("\tesac\n\tcase \"${COMP_WORDS[1]}\" in\n")
	for _, c := range cmds {
		if c == "completion" {
			fmt.Fprintf(&b, "\t\t%s) opts=\"bash zsh\" ;;\n", c)
			continue
		}
		fmt.Fprintf(&b, "\t\t%s) opts=%q ;;\n", c, strings.Join(append(slices.Clone(completionFlags[c]), "--help"), " "))
	}
	b.WriteString("\t\t*) opts=\"\" ;;\n\tesac\n\tCOMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") )\n}\ncomplete -F _quotashare quotashare\n")
	_, err := io.WriteString(stdout, b.String())
	return err
}
