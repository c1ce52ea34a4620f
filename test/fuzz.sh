#!/usr/bin/env bash
# Runs every fuzz target for a short fixed time (default 10s each; FUZZTIME=30s for
# longer), after the suite has run their committed seeds and corpora (testdata/fuzz). A
# failing input is written to the package's testdata/fuzz/<Target>/ by go test: commit it
# with the fix, and it becomes a regression test of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${FUZZTIME:-10s}"
for target in \
  ./internal/batchapi:FuzzRequest \
  ./internal/batchapi:FuzzLoadCredentials \
  ./internal/trainingjob:FuzzParse \
  ./internal/sched:FuzzScenario \
  ./cmd/quotashare:FuzzParseSetup; do
  pkg="${target%%:*}" name="${target##*:}"
  echo "fuzz $name ($pkg) for $t"
  if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "$pkg" 2>&1); then
    echo "$out"
    exit 1
  fi
done
