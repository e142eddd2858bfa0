#!/usr/bin/env bash
# Events per second of clos320-permutation and clos320-alltoall for one or more
# `rondo` binaries, run alternately (permutation then all-to-all, each binary in
# turn, ROUNDS rounds) so that a noisy machine's drift falls on every binary
# alike. Prints each binary's events/s per run, the all-to-all's wall time (the
# figure to compare when a change alters the number of events), and the median
# all-to-all / permutation ratio of its rounds (issue 10 asks for at most 2).
#
# usage: tools/scripts/sim-speed-ab.sh ROUNDS BIN...
set -euo pipefail
rounds=$1
shift
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        for s in clos320-permutation clos320-alltoall; do
            "$bin" sim "sim/scenarios/$s.toml" --json | python3 -c '
import json, sys
r = json.load(sys.stdin)["sim"]
print(sys.argv[1], sys.argv[2], r["events_per_s"], r["wall_s"])' "$bin" "$s" >> "$out"
        done
    done
done
python3 - "$out" "$@" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for b in sys.argv[2:]:
    perm = [float(r[2]) for r in rows if r[0] == b and r[1].endswith("permutation")]
    a2a = [float(r[2]) for r in rows if r[0] == b and r[1].endswith("alltoall")]
    walls = [float(r[3]) for r in rows if r[0] == b and r[1].endswith("alltoall")]
    ratios = [p / a for p, a in zip(perm, a2a)]
    print(f"{b}: permutation {' / '.join(f'{p / 1e6:.2f}' for p in perm)} M events/s, "
          f"all-to-all {' / '.join(f'{a / 1e3:.0f}' for a in a2a)} k "
          f"({' / '.join(f'{w:.1f}' for w in walls)} s), "
          f"ratios {' / '.join(f'{r:.2f}' for r in ratios)}, median {statistics.median(ratios):.2f}")
PY
