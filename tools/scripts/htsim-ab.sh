#!/usr/bin/env bash
# The simulator against htsim on `clos320-permutation` (issue 16 asks for 3x), in
# one sitting: ROUNDS rounds, each running htsim's UEC edition once and then every
# `rondo` binary once, so that a noisy machine's drift falls on all of them alike.
# Prints each run's wall time and peak RSS, then per binary the median wall time
# and htsim's wall time over it, round by round.
#
# htsim is built outside this repository from its public source (nothing of it
# is vendored; docs/perf.md "Against htsim"):
#   git clone https://github.com/spcl/HTSIM && cd HTSIM/htsim/sim   # at 8a33f33
#   mkdir build && cd build && cmake .. -DCMAKE_BUILD_TYPE=Release && make htsim_uec
#
# usage: tools/scripts/htsim-ab.sh HTSIM_SIM_DIR ROUNDS BIN...
#   HTSIM_SIM_DIR: the checkout's htsim/sim directory (with build/datacenter/htsim_uec)
set -euo pipefail
if [ $# -lt 3 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
if [ ! -d "$1" ]; then
    echo "htsim-ab: $1 is not a directory (the htsim/sim directory of an HTSIM checkout)" >&2
    exit 1
fi
sim_dir=$(cd "$1" && pwd)
rounds=$2
shift 2
htsim="$sim_dir/build/datacenter/htsim_uec"
gen="$sim_dir/datacenter/connection_matrices/gen_permutation.py"
for f in "$htsim" "$gen"; do
    if [ ! -e "$f" ]; then
        echo "htsim-ab: $f is missing: build htsim_uec as this script's header says" >&2
        exit 1
    fi
done
for bin in "$@"; do
    if [ ! -x "$bin" ]; then
        echo "htsim-ab: $bin is not an executable rondo binary" >&2
        exit 1
    fi
done
cd "$(dirname "$0")/../.."
scenario=$PWD/sim/scenarios/clos320-permutation.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The topology `rondo sim` builds for clos3: 320 hosts, 5 pods of 4 ToRs with 16
# hosts each, 4 aggregation switches per pod, 16 cores, 1 us per link; each
# 400 Gbit/s fabric link is a bundle of four 100 Gbit/s links.
cat > "$work/clos320.topo" <<'EOF'
Nodes 320
Tiers 3
Podsize 64

Tier 0
Oversubscribed 1
Downlink_speed_Gbps 100
Radix_Down 16
Radix_Up 16
Downlink_Latency_ns 1000
Switch_Latency_ns 0

Tier 1
Oversubscribed 1
Downlink_speed_Gbps 100
Radix_Down 16
Radix_Up 16
Downlink_Latency_ns 1000
Switch_Latency_ns 0
Bundle 4

Tier 2
Downlink_speed_Gbps 100
Radix_Down 20
Downlink_Latency_ns 1000
Switch_Latency_ns 0
Bundle 4
EOF
(cd "$work" && python3 "$gen" perm320.cm 320 320 2000000 0 1 > /dev/null)

# run NAME COMMAND...: appends "NAME round wall_s rss_kb" to $work/times.
run() {
    local name=$1 round=$2
    shift 2
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" > "$work/out" 2> "$work/err" || {
        echo "htsim-ab: $name failed:" >&2
        tail -5 "$work/err" >&2
        exit 1
    }
    read -r wall rss < "$work/time"
    echo "$name $round $wall $rss" | tee -a "$work/times"
}
for r in $(seq "$rounds"); do
    (cd "$work" && run htsim "$r" "$htsim" -topo clos320.topo -tm perm320.cm -mtu 1000 -end 1000 -seed 1)
    for bin in "$@"; do
        run "$bin" "$r" "$bin" sim "$scenario" --json
    done
done
python3 - "$work/times" "$@" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
htsim = {r[1]: float(r[2]) for r in rows if r[0] == "htsim"}
print(f"htsim: median {statistics.median(htsim.values()):.2f} s, "
      f"peak RSS {max(int(r[3]) for r in rows if r[0] == 'htsim') // 1024} MB")
for b in sys.argv[2:]:
    mine = {r[1]: float(r[2]) for r in rows if r[0] == b}
    ratios = [htsim[k] / mine[k] for k in sorted(mine, key=int)]
    print(f"{b}: median {statistics.median(mine.values()):.2f} s, "
          f"peak RSS {max(int(r[3]) for r in rows if r[0] == b) // 1024} MB, "
          f"htsim / rondo {' / '.join(f'{x:.2f}' for x in ratios)} "
          f"(median {statistics.median(ratios):.2f})")
PY
