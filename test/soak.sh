#!/usr/bin/env bash
# Runs every rapid property test of the scheduling core and of the control state for a
# while, with fresh seeds, and says how many cases and events ran and what failed.
#
#   test/soak.sh [MINUTES]        (default 10)
#
# Each round runs each package's property tests once with CHECKS random cases each
# (default 2000; rapid picks a new seed every run) until MINUTES have passed. A failure
# stops the soak: its log and the rapid failure file (copied to $QUOTASHARE_FAILDIR,
# default /tmp/quotashare-rapid) are named at the end; replay it with the command printed
# there, shrink it into a golden scenario (internal/sched/testdata/scenarios) and fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
checks="${CHECKS:-2000}"
out="${SOAK_DIR:-$(mktemp -d /tmp/quotashare-soak.XXXXXX)}"
mkdir -p "$out"
stats="$out/stats.jsonl"
: >"$stats"
# package@tests: the core's properties (invariants against the ledger and the reference
# scheduler, with and without head-of-line timeouts and shallow backfill; victim-set
# minimality against the oracle; the environment shrink; the queue) and the control
# state's (random event sequences through control.State, rebuilt from its store).
suites=(
  "./internal/sched@^(TestInvariants|TestInvariantsHeadOfLine|TestInvariantsShallowBackfill|TestVictimsMinimal|TestShrinkVictimsMinimal|TestQueue)$"
  "./internal/control@^(TestControlInvariants)$"
)
go test -c -o "$out/sched.test" ./internal/sched
go test -c -o "$out/control.test" ./internal/control
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo +changes)"
deadline=$(( $(date +%s) + minutes * 60 ))
round=0
failed=""
while [ "$(date +%s)" -lt "$deadline" ] && [ -z "$failed" ]; do
  round=$((round + 1))
  for s in "${suites[@]}"; do
    pkg="${s%%@*}" run="${s#*@}"
    bin="$out/$(basename "$pkg").test"
    log="$out/round$round-$(basename "$pkg").log"
    if ! (cd "$pkg" && "$bin" -test.run "$run" -test.count=1 -test.timeout=60m \
        -rapid.checks="$checks" -soak.stats="$stats") >"$log" 2>&1; then
      failed="$log"
      break
    fi
  done
done
python3 - "$stats" "$commit" "$round" "$minutes" <<'PY'
import json, sys, collections
path, commit, rounds, minutes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
cases, events = collections.Counter(), collections.Counter()
for line in open(path):
    r = json.loads(line)
    cases[r["test"]] += r["cases"]
    events[r["test"]] += r["events"]
print(f"soak on {commit}: {rounds} round(s) in up to {minutes} min")
for t in sorted(cases):
    print(f"  {t:32} {cases[t]:>9,} cases {events[t]:>12,} events")
print(f"  {'total':32} {sum(cases.values()):>9,} cases {sum(events.values()):>12,} events")
PY
if [ -n "$failed" ]; then
  echo "FAILED: $failed"
  grep -E "rapid failfile|copy kept at|replay:|\[rapid\] failed" "$failed" || tail -40 "$failed"
  exit 1
fi
echo "no failure; logs in $out"
