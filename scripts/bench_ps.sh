#!/usr/bin/env bash
# Push and pull throughput of the parameter server on loopback: starts
# ps_server processes on 127.0.0.1 (free ports) with a bench table config
# (HASHED, sgd), runs bench/ps_bench against 1 and 2 servers over shm and
# tcp, prints one table, and kills every server on exit.
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
root=$(cd "$(dirname "$0")/.." && pwd)
json="" quick=0 build_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$2; shift ;;
    --json=*) json=${1#*=} ;;
    --quick) quick=1 ;;
    --build-dir=*) build_dir=${1#*=} ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench_ps: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

work=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${servers[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [ -z "$build_dir" ]; then
  build_dir=$("$root/scripts/build.sh" --target=ps_server --target=ps_bench |
    tail -n 1)
fi
server_bin="$build_dir/server/ps_server"
bench_bin="$build_dir/bench/ps_bench"
for b in "$server_bin" "$bench_bin"; do
  [ -x "$b" ] || { echo "bench_ps: $b was not built" >&2; exit 1; }
done

cat >"$work/bench.tables" <<'TABLES'
table { id: 1 name: "bench1" kind: HASHED dim: 1 capacity: 16777216
        optimizer { name: "sgd" learning_rate: 0.01 } }
table { id: 2 name: "bench16" kind: HASHED dim: 16 capacity: 2097152
        optimizer { name: "sgd" learning_rate: 0.01 } }
TABLES

keys=10000000 keys16=1000000 iters=5
[ "$quick" = 1 ] && { keys=1000000 keys16=200000 iters=2; }

# start_servers N TRANSPORT: starts N shards, sets $addresses.
start_servers() {
  local n=$1 transport=$2 i
  addresses=""
  servers=()
  for ((i = 0; i < n; i++)); do
    rm -f "$work/port$i"
    XFER_TRANSPORT=$transport "$server_bin" --shard_id=$i --num_shards=$n \
      --num_workers=1 --port=0 --port_file="$work/port$i" \
      --tables="$work/bench.tables" --transport="$transport" \
      >"$work/server$i.log" 2>&1 &
    servers+=($!)
  done
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 300); do [ -s "$work/port$i" ] && break; sleep 0.1; done
    [ -s "$work/port$i" ] || {
      echo "bench_ps: server $i did not start:" >&2
      cat "$work/server$i.log" >&2
      exit 1
    }
    addresses+="${addresses:+,}$(cat "$work/port$i")"
  done
}
stop_servers() {
  local pid
  for pid in "${servers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
  servers=()
}

# run NAME TRANSPORT TABLE DIM KEYS: appends "name push_mkeys push_gbs
# pull_mkeys pull_gbs" to $work/results.
run() {
  local name=$1 transport=$2 table=$3 dim=$4 n=$5 out
  out=$(XFER_TRANSPORT=$transport "$bench_bin" --servers="$addresses" \
    --table="$table" --dim="$dim" --keys="$n" --iterations="$iters" \
    --mode=both --transport="$transport" 2>"$work/bench.err") || {
    echo "bench_ps: ps_bench failed ($name):" >&2
    cat "$work/bench.err" >&2
    exit 1
  }
  local push pull
  push=$(grep '^RESULT mode=push' <<<"$out")
  pull=$(grep '^RESULT mode=pull' <<<"$out")
  echo "$name $(sed -E 's/.*mkeys_per_s=([0-9.]+) gb_per_s=([0-9.]+).*/\1 \2/' <<<"$push") $(sed -E 's/.*mkeys_per_s=([0-9.]+) gb_per_s=([0-9.]+).*/\1 \2/' <<<"$pull")" >>"$work/results"
}

: >"$work/results"
label=$((keys / 1000000))M
label16=$((keys16 / 1000000))M
[ "$keys16" -lt 1000000 ] && label16=$((keys16 / 1000))K
for transport in shm tcp; do
  for n in 1 2; do
    start_servers "$n" "$transport"
    run "${label}_dim1_${n}srv_${transport}" "$transport" bench1 1 "$keys"
    run "${label16}_dim16_${n}srv_${transport}" "$transport" bench16 16 "$keys16"
    stop_servers
  done
done

printf '%-26s %14s %10s %14s %10s\n' case "push Mkeys/s" "push GB/s" \
  "pull Mkeys/s" "pull GB/s"
while read -r name pk pg lk lg; do
  printf '%-26s %14s %10s %14s %10s\n' "$name" "$pk" "$pg" "$lk" "$lg"
done <"$work/results"
echo "(push = Push + WaitApplied; GB/s counts keys x dim x 4 bytes of values;"
echo " issue's peer, ps-lite with a no-op server: push 42.6, pull 29.7 M keys/s)"

if [ -n "$json" ]; then
  python3 - "$work/results" "$json" "$label" "$label16" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    name, pk, pg, lk, lg = line.split()
    rows[name] = (float(pk), float(pg), float(lk), float(lg))
label, label16 = sys.argv[3], sys.argv[4]
peer = "ps-lite no-op server (issue figure)"
out = []
def add(name, value, unit, peer_value=None):
    r = {"name": name, "value": value, "unit": unit}
    if peer_value is not None:
        r.update(peer=peer, peer_value=peer_value,
                 ratio=round(value / peer_value, 3))
    out.append(r)
for t in ("shm", "tcp"):
    r = rows[f"{label}_dim1_1srv_{t}"]
    add(f"push_10M_{t}", r[0], "M keys/s", 42.6)
    add(f"pull_10M_{t}", r[2], "M keys/s", 29.7)
r = rows[f"{label16}_dim16_1srv_shm"]
add("push_1M_dim16_shm", r[1], "GB/s")
add("pull_1M_dim16_shm", r[3], "GB/s")
for name, r in rows.items():
    add(f"push_{name}", r[0], "M keys/s")
    add(f"pull_{name}", r[2], "M keys/s")
json.dump({"results": out}, open(sys.argv[2], "w"), indent=1)
PY
  echo "wrote $json"
fi
