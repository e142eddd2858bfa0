#!/usr/bin/env bash
# Rondo beside other transports over real kernel UDP, through paths of different
# rates: a network namespace joined by a veth pair, both of whose ends shape each
# of the server's path ports with its own HTB class (`tc`, no netem needed) and a
# short FIFO, in both directions. The paper's Fig. 9 case on sockets: a sprayer that fills every path
# reaches near the sum of the rates; round robin is held to the slowest path times
# the path count.
#
# usage (as root): tools/scripts/shaped-paths.sh RONDO_BIN [ROUNDS] [TRANSPORTS]
#   RATES="200mbit 100mbit 50mbit 25mbit"  one HTB rate per path (4 by default)
#   LIMIT=64                               packets of each path's FIFO
#   SIZE=1048576 DURATION=3                the perf client's -s and -D
#   ENGINE="KEY=VALUE ..."                 engine settings (`rondo perf --engine`)
#   OP=write                               the perf client's --op (write, read, send)
# Prints one line per run (goodput, OOD, retransmissions, verified) and each
# transport's median goodput against the sum of the rates.
set -euo pipefail
if [ $# -lt 1 ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
bin=$(realpath "$1")
rounds=${2:-3}
transports=${3:-rondo rrps}
rates=${RATES:-200mbit 100mbit 50mbit 25mbit}
limit=${LIMIT:-64}
size=${SIZE:-1048576}
seconds=${DURATION:-3}
engine=()
for kv in ${ENGINE:-}; do
    engine+=(--engine "$kv")
done
ns=rondo-shaped-$$
veth=rsh$(($$ % 100000))
port=4800
ctrl=18900
paths=$(wc -w <<< "$rates")
for cmd in ip tc; do
    command -v "$cmd" > /dev/null || { echo "shaped-paths: needs $cmd (iproute2)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "shaped-paths: needs root (network namespaces, tc)" >&2; exit 1; }
out=$(mktemp)
cleanup() {
    [ -n "${server:-}" ] && kill "$server" 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
    rm -f "$out"
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$veth" type veth peer name "${veth}p"
ip link set "${veth}p" netns "$ns"
ip addr add 10.96.0.1/24 dev "$veth"
ip link set "$veth" up
ip netns exec "$ns" ip addr add 10.96.0.2/24 dev "${veth}p"
ip netns exec "$ns" ip link set "${veth}p" up
ip netns exec "$ns" ip link set lo up
# Each direction of path i gets its own class: on this side by the server's
# port as destination (the client's data and requests), in the namespace by it
# as source (READ responses, ACKs). Everything else (the control connection)
# goes unshaped through class 1:100.
shape() { # shape DEV MATCH [ip netns exec NS]
    local dev=$1 match=$2
    shift 2
    "$@" tc qdisc add dev "$dev" root handle 1: htb default 100 2> /dev/null
    "$@" tc class add dev "$dev" parent 1: classid 1:100 htb rate 10gbit 2> /dev/null
    local i=1
    for r in $rates; do
        "$@" tc class add dev "$dev" parent 1: classid "1:$i" htb rate "$r" ceil "$r" 2> /dev/null
        "$@" tc qdisc add dev "$dev" parent "1:$i" handle "$((10 + i)):" pfifo limit "$limit"
        "$@" tc filter add dev "$dev" parent 1: protocol ip u32 \
            match ip "$match" "$((port + i - 1))" 0xffff flowid "1:$i"
        i=$((i + 1))
    done
}
shape "$veth" dport
shape "${veth}p" sport ip netns exec "$ns"
ip netns exec "$ns" "$bin" perf server --bind 10.96.0.2 --port "$ctrl" \
    --udp-port "$port" --auth none > /dev/null 2>&1 &
server=$!
sleep 1
echo "paths: $rates (FIFO $limit packets each), $size-byte ${OP:-write}s for $seconds s, $rounds rounds${ENGINE:+, engine: $ENGINE}"
for round in $(seq "$rounds"); do
    for t in $transports; do
        "$bin" perf client 10.96.0.2 -p "$ctrl" --paths "$paths" --transport "$t" --auth none --op "${OP:-write}" \
            -s "$size" -D "$seconds" --verify --json "${engine[@]}" 2> /dev/null |
            python3 -c '
import json, sys
r = json.load(sys.stdin)
r = r.get("results", r)
print(sys.argv[1], sys.argv[2], r["BW_average"], r["ood_p99"], r["ood_max"], r["retx_packets"], r["verified"])
' "$round" "$t" | tee -a "$out" || echo "$round $t FAILED" | tee -a "$out"
    done
done
python3 - "$out" "$rates" $transports <<'PY'
import statistics, sys, re
rows = [l.split() for l in open(sys.argv[1]) if "FAILED" not in l]
units = {"kbit": 1e-6, "mbit": 1e-3, "gbit": 1.0}
total = 0.0
for r in sys.argv[2].split():
    m = re.fullmatch(r"([0-9.]+)([kmg]bit)", r.lower())
    total += float(m.group(1)) * units[m.group(2)]
for t in sys.argv[3:]:
    bw = [float(r[2]) for r in rows if r[1] == t]
    if bw:
        med = statistics.median(bw)
        print(f"{t}: median {med:.3f} Gbit/s, {med / total:.2f} of the paths' {total:.3f}")
    else:
        print(f"{t}: no run finished")
PY
