package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDocsCommands reads every fenced command in the README and docs/ and checks that it
// still means something: a quotashare command exists with each of its flags (the
// completion table, itself checked against each command's --help by TestCompletion), a
// `go test` command names packages that exist and -run and -bench patterns that match
// some test or benchmark in them, and a script is there. Links between the pages resolve.
// The two commands at the top of the README run in CI and in TestDemo.
func TestDocsCommands(t *testing.T) {
	root := "../.."
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"))
	if len(pages) < 2 {
		t.Fatal("no docs/ pages")
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, m := range regexp.MustCompile(`\]\(([^)#]+\.md)\)`).FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(page), m[1])); err != nil {
				t.Errorf("%s: link to %s: %v", name, m[1], err)
			}
		}
		for _, c := range append(fencedCommands(string(b)), inlineCommands(string(b))...) {
			for _, seg := range regexp.MustCompile(`\s*(?:&&|\|\||;|\||&|\$\(|<\()\s*`).Split(c.text, -1) {
				seg = strings.TrimRight(seg, `)"' `) // the end of a $(...) or <(...) in quotes
				if why := checkCommand(root, seg); why != "" {
					t.Errorf("%s:%d: %s\n\t%s", name, c.line, why, seg)
				}
				checked++
			}
		}
	}
	t.Logf("%d commands checked in %d pages", checked, len(pages))
}

// inlineCommands returns the commands quoted in a page's text (`quotashare ...`,
// `go test ...`, `test/....sh ...`), outside its fenced blocks.
func inlineCommands(page string) []fenced {
	var out []fenced
	in := false
	span := regexp.MustCompile("`((?:quotashare|go test|go run \\./cmd/quotashare|test/)[^`]*)`")
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if in {
			continue
		}
		for _, m := range span.FindAllStringSubmatch(l, -1) {
			out = append(out, fenced{i + 1, m[1]})
		}
	}
	return out
}

type fenced struct {
	line int
	text string
}

// fencedCommands returns the commands of a page's fenced blocks: lines joined where they
// end in a backslash, without comments and prompts.
func fencedCommands(page string) []fenced {
	var out []fenced
	in, cont := false, ""
	lang := ""
	for i, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "```") {
			in, lang = !in, strings.TrimPrefix(l, "```")
			continue
		}
		if !in || (lang != "sh" && lang != "bash" && lang != "console" && lang != "") {
			continue
		}
		l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		if j := strings.Index(l, "  #"); j >= 0 {
			l = l[:j]
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cont += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		if l = strings.TrimSpace(cont + l); l != "" {
			out = append(out, fenced{i + 1, l})
		}
		cont = ""
	}
	return out
}

// checkCommand says what is wrong with one command ("" if nothing, or if it is not one
// of ours).
func checkCommand(root, seg string) string {
	f := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(seg))
	for len(f) > 0 && strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-") { // VAR=value cmd
		f = f[1:]
	}
	switch {
	case len(f) == 0:
		return ""
	case f[0] == "quotashare":
		return checkQuotashare(f[1:])
	case len(f) > 2 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/quotashare":
		return checkQuotashare(f[3:])
	case len(f) > 1 && f[0] == "go" && f[1] == "test":
		return checkGoTest(root, f[2:])
	case strings.HasPrefix(f[0], "test/") || strings.HasPrefix(f[0], "./test/"):
		if _, err := os.Stat(filepath.Join(root, f[0])); err != nil {
			return "no such script"
		}
	}
	return ""
}

func checkQuotashare(args []string) string {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return ""
	}
	cmd := args[0]
	if cmd == strings.ToUpper(cmd) || cmd == "listening" {
		return "" // a placeholder (COMMAND), or the server's own line quoted
	}
	flags, ok := completionFlags[cmd]
	if !ok {
		return "no quotashare command " + strconv.Quote(cmd)
	}
	for _, a := range args[1:] {
		if a == "--" {
			break // the job's own command line follows
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !slices.Contains(flags, name) {
			return "quotashare " + cmd + " has no flag " + name
		}
	}
	return ""
}

// checkGoTest checks a go test command's packages and its -run and -bench patterns.
func checkGoTest(root string, args []string) string {
	var pkgs, patterns []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-run" || a == "-bench":
			if i+1 < len(args) {
				patterns = append(patterns, strings.Trim(args[i+1], `'"`))
				i++
			}
		case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "-bench="):
			_, v, _ := strings.Cut(a, "=")
			patterns = append(patterns, strings.Trim(v, `'"`))
		case strings.HasPrefix(a, "./") || a == ".":
			pkgs = append(pkgs, a)
		}
	}
	var names []string
	for _, p := range pkgs {
		if strings.HasSuffix(p, "/...") {
			continue
		}
		dir := filepath.Join(root, p)
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if len(files) == 0 {
			return "no tests in " + p
		}
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)\w*)\(`).FindAllStringSubmatch(string(b), -1) {
				names = append(names, m[1])
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	for _, pat := range patterns {
		top, _, _ := strings.Cut(pat, "/")
		if top == "^$" || top == "" || top == "." {
			continue
		}
		re, err := regexp.Compile(top)
		if err != nil {
			return "pattern " + pat + ": " + err.Error()
		}
		if !slices.ContainsFunc(names, re.MatchString) {
			return "pattern " + pat + " matches no test or benchmark of " + strings.Join(pkgs, " ")
		}
	}
	return ""
}
