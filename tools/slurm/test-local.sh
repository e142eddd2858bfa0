#!/usr/bin/env bash
# Tests tools/slurm/ against a real single-node Slurm on this host: munge, a
# controller and one node (every core), started from a private configuration in a
# temporary directory and stopped at exit. Submits a small sweep as a job array of
# 3 slices plus its merge job, waits for them, and checks that the merged sweep
# has every run with the same numbers as the same sweep run without Slurm.
#
#   sudo tools/slurm/test-local.sh [RONDO]
#
# Needs root and the Debian packages slurm-wlm and munge. RONDO defaults to
# target/release/rondo. Exits 0 on success; fails within 5 minutes otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rondo=$(realpath "${1:-$root/target/release/rondo}")
for tool in munged slurmctld slurmd sbatch sinfo squeue sacct; do
    command -v "$tool" >/dev/null || {
        echo "FAIL: $tool not found: apt-get install slurm-wlm munge" >&2
        exit 1
    }
done
[[ -x $rondo ]] || { echo "FAIL: no rondo binary at $rondo" >&2; exit 1; }
((EUID == 0)) || { echo "FAIL: run as root (it starts munged and slurmd)" >&2; exit 1; }

work=$(mktemp -d /tmp/rondo-slurm.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ ${KEEP:-0} != 1 ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# munge: a private key and socket.
mkdir -p "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 700 "$work/munge"
chmod 400 "$work/munge/munge.key"
socket=$work/munge/munge.socket
munged --force --key-file="$work/munge/munge.key" --socket="$socket" \
    --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
    --seed-file="$work/munge/munge.seed"
pids+=("$(cat "$work/munge/munged.pid")")

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$work/state" "$work/spool" "$work/out"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=rondo-test
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/slurmd.out" 2>&1 &
pids+=($!)

deadline=$((SECONDS + 60))
until sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; do
    if ((SECONDS > deadline)); then
        echo "FAIL: the Slurm node did not come up within 60 s" >&2
        tail -n 20 "$work"/slurmctld.log "$work"/slurmd.log "$work"/*.out >&2 || true
        exit 1
    fi
    sleep 1
done
echo "slurm is up: $(sinfo -h -o '%P %D %t %c')"

scenario=$work/two-paths.toml
cat >"$scenario" <<'TOML'
seed = 1
duration_us = 600
warmup_us = 200
[topology]
kind = "parallel"
host_gbps = 100
paths = [{ gbps = 25, delay_us = 2.0 }, { gbps = 10, delay_us = 8.0 }]
[workload]
kind = "long_flows"
flows = 1
TOML
sweep=("$scenario" --key transport.reorder_buffer_kb --values 8,64,600 --transports rondo,rrps)

merge_job=$(RONDO=$rondo "$here/submit.sh" 3 "$work/out" "${sweep[@]}")
echo "submitted; merge job $merge_job"
deadline=$((SECONDS + 240))
while squeue -h 2>/dev/null | grep -q .; do
    if ((SECONDS > deadline)); then
        echo "FAIL: the jobs did not finish within 240 s" >&2
        squeue >&2 || true
        exit 1
    fi
    sleep 2
done
if [[ ! -s $work/out/sweep.json ]]; then
    echo "FAIL: the merge job wrote no sweep.json" >&2
    cat "$work"/out/*.out >&2 || true
    tail -n 20 "$work"/slurmctld.log >&2 || true
    exit 1
fi
runs=$(ls "$work"/out/run-*.json | wc -l)
"$rondo" sweep "${sweep[@]}" --json 2>/dev/null >"$work/direct.json"
python3 - "$work/out/sweep.json" "$work/direct.json" <<'PY'
import json, sys
def runs(f):
    d = json.load(open(f))
    return [(r["transport"], r["value"], r["report"]["goodput_gbps"], r["report"]["ood"])
            for r in sorted(d["runs"], key=lambda r: r["index"])]
merged, direct = runs(sys.argv[1]), runs(sys.argv[2])
assert len(merged) == 6, f"{len(merged)} runs merged, expected 6"
assert merged == direct, f"merged {merged} != direct {direct}"
print(f"merged sweep: {len(merged)} runs, identical to the direct run")
PY
cat "$work/out/sweep.txt"
echo "PASS: $runs run files from 3 array tasks, merged by a dependent job"
