#!/bin/bash
# Harbor's verifier entry (/tests/test.sh in the harbor-verifier image).
# Grades $VERIFIER_CASE against $VERIFIER_CONFIG into $VERIFIER_OUT
# (/logs/verifier), where Harbor reads reward.json. Harbor captures this
# script's output as /logs/verifier/test-stdout.txt and ignores its exit code;
# the exit code is the verifier's: 0 reward written, 2 bad eval.yaml,
# 3 case missing/unreadable/empty, 4 output dir not writable, 1 internal error.
# No `set -e`: whatever happens, the verifier's result and exit code are reported.
set -u

config="${VERIFIER_CONFIG:-/tests/eval.yaml}"
case_dir="${VERIFIER_CASE:-/case}"
out="${VERIFIER_OUT:-/logs/verifier}"

echo "== harbor-verifier $(/opt/verifier/bin/verifier version 2>/dev/null || echo '?'): $(date -u +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) as $(id 2>/dev/null)"
echo "config: ${config}$([ -f "$config" ] || echo '  (missing)')"
if [ -d "$case_dir" ]; then
    nfiles=$(find "$case_dir" -type f 2>/dev/null | wc -l)
    echo "case:   ${case_dir}  (${nfiles} files)"
    find "$case_dir" -type f 2>/dev/null | sort | head -n 20 | sed 's/^/  /'
    [ "$nfiles" -le 20 ] || echo "  ... and $((nfiles - 20)) more"
else
    echo "case:   ${case_dir}  (missing)"
fi
echo "out:    ${out}"
echo "--"

/opt/verifier/bin/verifier grade --config "$config" --case "$case_dir" --out "$out"
rc=$?

echo "--"
if [ "$rc" -eq 0 ] && [ -f "$out/reward.json" ]; then
    echo "reward.json: $(cat "$out/reward.json")"
fi
echo "verifier exit code: $rc"
exit "$rc"
