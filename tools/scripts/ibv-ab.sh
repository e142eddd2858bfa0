#!/usr/bin/env bash
# Alternating A/B of two builds' drop-in and `rondo perf` on loopback: each round
# runs, with BEFORE's and then AFTER's librondo_ibv.so and rondo binary,
# `ib_send_lat -s 64 -n 3000` (round trip: perftest's typical x 2),
# `ib_write_bw -s 65536 -D 3`, `rondo perf client --op send -s 64 -n 3000 --lat
# --progress-thread` (p50 round trip) and `--op write -s 65536 -D 3
# --progress-thread` (docs/ibv.md, "Measured").
#
# usage: tools/scripts/ibv-ab.sh BEFORE_RELEASE_DIR AFTER_RELEASE_DIR [ROUNDS]
#   each dir holds librondo_ibv.so and rondo (cargo build --release -p rondo-ibv
#   -p rondo-tools); needs perftest (apt-get install perftest).
set -euo pipefail
before=$(realpath "$1") after=$(realpath "$2") rounds=${3:-3}
port=18700
for round in $(seq "$rounds"); do
    for side in before after; do
        dir=$before
        [[ $side == after ]] && dir=$after
        lib=$dir/librondo_ibv.so rondo=$dir/rondo
        port=$((port + 1))
        LD_PRELOAD=$lib RONDO_IBV_IP=127.0.0.1 timeout 60 ib_send_lat -d rondo0 -s 64 -n 3000 -p $port >/dev/null 2>&1 &
        server=$!
        sleep 0.5
        lat=$(LD_PRELOAD=$lib RONDO_IBV_IP=127.0.0.1 timeout 60 ib_send_lat -d rondo0 -s 64 -n 3000 -p $port 127.0.0.1 2>&1 |
            grep -A1 t_typical | tail -1 | awk '{ print $5 * 2 }')
        wait $server || true
        port=$((port + 1))
        LD_PRELOAD=$lib RONDO_IBV_IP=127.0.0.1 timeout 60 ib_write_bw -d rondo0 -s 65536 -D 3 --report_gbits -p $port >/dev/null 2>&1 &
        server=$!
        sleep 0.5
        bw=$(LD_PRELOAD=$lib RONDO_IBV_IP=127.0.0.1 timeout 60 ib_write_bw -d rondo0 -s 65536 -D 3 --report_gbits -p $port 127.0.0.1 2>&1 |
            grep -A1 'BW average' | tail -1 | awk '{ print $4 }')
        wait $server || true
        "$rondo" perf server >/dev/null 2>&1 &
        server=$!
        sleep 0.5
        plat=$("$rondo" perf client 127.0.0.1 --op send -s 64 -n 3000 --lat --progress-thread 2>&1 |
            grep -A1 t_min | tail -1 | awk '{ print $6 }')
        pbw=$("$rondo" perf client 127.0.0.1 --op write -s 65536 -D 3 --progress-thread 2>&1 |
            grep -A1 'BW average' | tail -1 | awk '{ print $4 }')
        kill $server
        wait $server 2>/dev/null || true
        echo "round $round $side: drop-in send_lat round trip $lat us, drop-in write_bw $bw Gb/s, rondo perf lat p50 $plat us, rondo perf write $pbw Gb/s"
    done
done
