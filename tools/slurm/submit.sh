#!/usr/bin/env bash
# Submits a `rondo sweep` to Slurm as a job array of SHARDS slices, and a merge job
# that runs when every slice has succeeded: OUT_DIR/sweep.json (every run),
# OUT_DIR/sweep.txt (the table) and OUT_DIR/sweep.svg (the plot).
#
#   tools/slurm/submit.sh SHARDS OUT_DIR [rondo sweep arguments]
#   tools/slurm/submit.sh 16 /shared/fig14 --builtin fig9 \
#       --key transport.reorder_buffer_kb --values 32,64,128,256,512,1200 \
#       --transports rondo,rrps --seeds 1,2,3
#
# RONDO (default: `rondo` on PATH, else target/release/rondo) must be reachable at
# the same path on every node, and OUT_DIR must be a directory they share.
# Prints the merge job's id.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if (($# < 3)); then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
shards=$1
out=$2
shift 2
if ! [[ $shards =~ ^[1-9][0-9]*$ ]]; then
    echo "SHARDS must be a positive integer, got '$shards'" >&2
    exit 2
fi
rondo=${RONDO:-$(command -v rondo || echo "$here/../../target/release/rondo")}
rondo=$(realpath "$rondo")
if [[ ! -x $rondo ]]; then
    echo "no rondo binary at $rondo: build it (cargo build --release -p rondo-tools) or set RONDO" >&2
    exit 2
fi
mkdir -p "$out"
out=$(realpath "$out")
array=$(sbatch --parsable --array="1-$shards" --chdir="$out" \
    "$here/sweep.sbatch" "$out" "$rondo" "$@")
array=${array%%;*}
sbatch --parsable --dependency="afterok:$array" --chdir="$out" \
    --job-name=rondo-sweep-merge --output="$out/merge-%j.out" \
    --wrap="'$rondo' sweep --merge '$out' --json > '$out/sweep.json' && '$rondo' sweep --merge '$out' --svg '$out/sweep.svg' > '$out/sweep.txt'"
