#!/usr/bin/env bash
# Runs every built-in (`rondo sim --list`) and every sim/scenarios/*.toml with two
# `rondo` binaries and compares their JSON reports field by field, ignoring the
# wall-clock fields (wall_s, events_per_s). For speed work: the reports must be
# identical. Scenarios whose name starts with clos320 are skipped (minutes each).
#
# usage: tools/scripts/compare-sim-reports.sh BEFORE_BIN AFTER_BIN OUT_DIR [NAME...]
#   NAME: built-in names or scenario paths to run instead of all of them.
# The reports are kept in OUT_DIR/{before,after}/; a before report that exists is
# reused (the before binary does not change between calls).
set -euo pipefail
before=$1 after=$2 out=$3
shift 3
cd "$(dirname "$0")/../.."
mkdir -p "$out/before" "$out/after"

if [[ $# -gt 0 ]]; then
    names=("$@")
else
    mapfile -t names < <("$before" sim --list | awk 'NF > 1 && $1 !~ /^run$/ { print $1 }' | grep -v '^clos320')
    for f in sim/scenarios/*.toml; do
        [[ $(basename "$f") == clos320* ]] || names+=("$f")
    done
fi

# Normalises a report: drops wall_s and events_per_s at any depth, sorts keys.
normalise() {
    python3 -c '
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in ("wall_s", "events_per_s")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(open(sys.argv[1]))), sort_keys=True, indent=1))
' "$1"
}

run() { # BIN NAME FILE
    if [[ $2 == *.toml ]]; then
        timeout 1200 "$1" sim "$2" --json >"$3"
    else
        timeout 1200 "$1" sim --builtin "$2" --json >"$3"
    fi
}

fail=0
for n in "${names[@]}"; do
    key=$(basename "$n" .toml)
    [[ $n == *.toml ]] && key="scenario-$key"
    b="$out/before/$key.json" a="$out/after/$key.json"
    [[ -s $b ]] || run "$before" "$n" "$b"
    t0=$SECONDS
    run "$after" "$n" "$a"
    if diff <(normalise "$b") <(normalise "$a") >"$out/$key.diff"; then
        printf 'same      %-40s (%ds)\n' "$key" "$((SECONDS - t0))"
        rm -f "$out/$key.diff"
    else
        printf 'DIFFERENT %-40s see %s\n' "$key" "$out/$key.diff"
        fail=1
    fi
done
exit $fail
