#!/usr/bin/env bash
# Push and pull throughput of the parameter server on loopback: ps_launch
# starts ps_server processes on 127.0.0.1 (free ports) with a bench table
# config (HASHED, sgd) and runs bench/ps_bench as their one worker, against
# 1 and 2 servers over shm and tcp; prints one table.
#
#   10M keys (uint64, one float each), table bench1: 16M rows x dim 1
#   1M keys x dim 16, table bench16: 2M rows x dim 16
#
# A push is timed until the servers applied it (Push + WaitApplied); a pull
# until the rows are in the caller's buffer. The peer figures are those of
# the issue (ps-lite with a no-op server on this machine kind: push 42.6,
# pull 29.7 M keys/s); ratio = ours / peer.
#
# Usage: scripts/bench_ps.sh [--json FILE] [--quick] [--build-dir=DIR]
#   --json FILE  also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --quick      fewer iterations and 1M keys instead of 10M (smoke test)
#   --build-dir=DIR  use ps_server/ps_bench of an existing build
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
quick=0
bench_option() { case "$1" in --quick) quick=1 ;; *) return 1 ;; esac; }
bench_parse bench_ps 2,18 "$@"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bench_tools ps_server ps_bench ps_launch bench_report
for b in server/ps_server bench/ps_bench launch/ps_launch; do
  [ -x "$build_dir/$b" ] || { echo "bench_ps: $build_dir/$b was not built" >&2; exit 1; }
done

cat >"$work/bench.tables" <<'TABLES'
table { id: 1 name: "bench1" kind: HASHED dim: 1 capacity: 16777216
        optimizer { name: "sgd" learning_rate: 0.01 } }
table { id: 2 name: "bench16" kind: HASHED dim: 16 capacity: 2097152
        optimizer { name: "sgd" learning_rate: 0.01 } }
TABLES

keys=10000000 keys16=1000000 iters=5
[ "$quick" = 1 ] && { keys=1000000 keys16=200000 iters=2; }

# run NAME SERVERS TRANSPORT TABLE DIM KEYS: one cluster of SERVERS shards
# with ps_bench as its worker; appends its figures to $work/results as
# samples push_NAME, pull_NAME (M keys/s) and push_gbs_NAME, pull_gbs_NAME.
run() {
  local name=$1 n=$2 transport=$3 table=$4 dim=$5 keys=$6 dir="$work/$1"
  "$build_dir/launch/ps_launch" --servers="$n" --workers=1 \
    --tables="$work/bench.tables" --transport="$transport" \
    --server_bin="$build_dir/server/ps_server" \
    --worker_bin="$build_dir/bench/ps_bench" \
    --worker_args="--table=$table --dim=$dim --keys=$keys --iterations=$iters --mode=both" \
    --run_dir="$dir" >/dev/null 2>"$work/launch.err" || {
    echo "bench_ps: ps_bench failed ($name):" >&2
    cat "$work/launch.err" "$dir/worker-0.log" >&2
    exit 1
  }
  sed -nE "s/^RESULT mode=(push|pull) .*mkeys_per_s=([0-9.]+) gb_per_s=([0-9.]+).*/\\1_$name \\2 M keys\/s\\n\\1_gbs_$name \\3 GB\/s/p" \
    "$dir/worker-0.log" >>"$work/results"
}

: >"$work/results"
label=$((keys / 1000000))M
label16=$((keys16 / 1000000))M
[ "$keys16" -lt 1000000 ] && label16=$((keys16 / 1000))K
rows=""
for transport in shm tcp; do
  for n in 1 2; do
    name="${label}_dim1_${n}srv_${transport}" name16="${label16}_dim16_${n}srv_${transport}"
    run "$name" "$n" "$transport" bench1 1 "$keys"
    run "$name16" "$n" "$transport" bench16 16 "$keys16"
    for c in "$name" "$name16"; do
      rows+="row push_$c \"M keys/s\" push_$c - -"$'\n'"row pull_$c \"M keys/s\" pull_$c - -"$'\n'
    done
  done
done

peer="ps-lite no-op server (issue figure)"
{
  cat "$work/results"
  for t in shm tcp; do
    echo "row push_10M_$t \"M keys/s\" push_${label}_dim1_1srv_$t 42.6 higher $peer"
    echo "row pull_10M_$t \"M keys/s\" pull_${label}_dim1_1srv_$t 29.7 higher $peer"
  done
  echo "row push_1M_dim16_shm GB/s push_gbs_${label16}_dim16_1srv_shm - -"
  echo "row pull_1M_dim16_shm GB/s pull_gbs_${label16}_dim16_1srv_shm - -"
  echo "$rows"
} | bench_report ${json:+--json="$json"}
echo "(push = Push + WaitApplied; GB/s counts keys x dim x 4 bytes of values;"
echo " issue's peer, ps-lite with a no-op server: push 42.6, pull 29.7 M keys/s)"
