#!/usr/bin/env bash
# Runs a command COUNT times in a row while a load generator keeps every CPU busy, and
# stops at the first failure: how a test is shown not to depend on an idle machine.
#
#   test/stress.sh COUNT COMMAND [ARG...]
#   test/stress.sh 20 go test ./cmd/quotashare -run 'TestReplicasKubernetes$' -count=1
#
# The load is one busy process per CPU (nproc), at the same priority as the test. Each
# run's output goes to $STRESS_DIR (default a new folder under /tmp), named by its
# number; the last line says how many runs passed and how long each took.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 COUNT COMMAND [ARG...]" >&2
  exit 2
fi
count="$1"
shift
out="${STRESS_DIR:-$(mktemp -d /tmp/quotashare-stress.XXXXXX)}"
mkdir -p "$out"
load=()
for _ in $(seq "$(nproc)"); do
  (exec yes >/dev/null) &
  load+=($!)
done
trap 'kill "${load[@]}" 2>/dev/null' EXIT
times=()
for i in $(seq "$count"); do
  began=$(date +%s)
  if ! "$@" >"$out/run$i.log" 2>&1; then
    echo "run $i of $count FAILED after $(( $(date +%s) - began )) s under load: $out/run$i.log" >&2
    tail -30 "$out/run$i.log" >&2
    exit 1
  fi
  times+=("$(( $(date +%s) - began ))")
  echo "run $i of $count passed in ${times[-1]} s"
done
echo "all $count runs passed under a load of $(nproc) busy processes; seconds per run: ${times[*]}; logs in $out"
