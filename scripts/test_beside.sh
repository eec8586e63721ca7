#!/usr/bin/env bash
# `make test`'s run: the Harbor trials (real Harbor jobs, which keep about one core of
# two busy and spend the rest waiting on containers) in a pytest of their own, beside
# the pytest of every other lane, so that the suite takes about the longer of the two
# rather than their sum. Each pytest prints its own summary: the trials' after the rest.
# The exit code is the first failure's. HARBOR_BESIDE=0 (make) runs them in line.
#
# Usage: scripts/test_beside.sh PYTEST [PYTEST ARGUMENTS...]
set -uo pipefail

pytest=$1
shift
mkdir -p .cache
log=.cache/harbor-lane.log
basetemp="${TMPDIR:-/tmp}/pytest-harbor-lane-$(id -u)"

# No cache plugin in the trials' pytest: the two would write .pytest_cache at once.
"$pytest" tests -m harbor -p no:cacheprovider --basetemp="$basetemp" "$@" >"$log" 2>&1 &
trials_pid=$!
trap 'kill "$trials_pid" 2>/dev/null' INT TERM

"$pytest" tests -m "not harbor" "$@"
rest=$?
wait "$trials_pid"
trials=$?
echo
echo "=== the Harbor trials (pytest tests -m harbor), run beside the tests above: exit $trials"
cat "$log"
if [[ $rest -ne 0 ]]; then
    exit "$rest"
fi
exit "$trials"
