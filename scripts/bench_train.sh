#!/usr/bin/env bash
# Training throughput: samples/s of ps_worker with the parameters in-process
# (--local) and with 1 server + 1 worker on 127.0.0.1, same data, same flags,
# for LR and FM. Usage:
#   scripts/bench_train.sh [--rows=N] [--json FILE] [--build-dir=DIR]
# JSON: {"results": [{"name": "train_lr_1s1w", "value": x, "unit": "samples/s",
#        "peer": "lr --local", "peer_value": y, "ratio": x / y}, train_fm_1s1w]}
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rows=300000 json="" bd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rows=*) rows=${1#*=} ;;
    --json) json=$2; shift ;;
    --json=*) json=${1#*=} ;;
    --build-dir=*) bd=${1#*=} ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "bench_train: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$bd" ]; then
  bd=$("$root/scripts/build.sh" --target=ps_server --target=ps_worker \
    --target=ps_datagen | tail -n 1)
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ps-bench-train.XXXXXX")
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && { kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
  rm -rf "$work"
}
trap cleanup EXIT

"$bd/worker/datagen/ps_datagen" --model=fm --rows="$rows" --eval_rows=20000 \
  --output="$work/train.tsv" --eval_output="$work/eval.tsv" >/dev/null

run_worker() {  # model, extra flags...; prints samples/s
  local model=$1; shift
  "$bd/worker/train/ps_worker" --flagfile="$root/configs/$model.flags" \
    --epochs=1 --train_data="$work/train.tsv" --eval_data="$work/eval.tsv" \
    --progress_secs=0 --metrics_json="$work/m.json" "$@" >/dev/null
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$work/m.json"
}

declare -A ours peer
for model in lr fm; do
  peer[$model]=$(run_worker $model --local --tables="$root/configs/$model.tables")
  rm -f "$work/addr"
  "$bd/server/ps_server" --num_shards=1 --num_workers=1 --port=0 \
    --port_file="$work/addr" --tables="$root/configs/$model.tables" \
    >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 300); do [ -s "$work/addr" ] && break; sleep 0.1; done
  [ -s "$work/addr" ] || { cat "$work/server.log" >&2; exit 1; }
  ours[$model]=$(run_worker $model --servers="$(cat "$work/addr")")
  kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""
  printf '%-4s --local %10.0f samples/s   1 server + 1 worker %10.0f samples/s   ratio %.2f\n' \
    "$model" "${peer[$model]}" "${ours[$model]}" \
    "$(python3 -c "print(${ours[$model]} / ${peer[$model]})")"
done

if [ -n "$json" ]; then
  python3 - "$json" "${ours[lr]}" "${peer[lr]}" "${ours[fm]}" "${peer[fm]}" "$rows" <<'PY'
import json, sys
path, lr, lr_peer, fm, fm_peer, rows = sys.argv[1:]
def entry(model, x, y):
    x, y = float(x), float(y)
    return {"name": "train_%s_1s1w" % model, "value": round(x),
            "unit": "samples/s", "peer": model + " --local (%s rows)" % rows,
            "peer_value": round(y), "ratio": round(x / y, 3)}
json.dump({"results": [entry("lr", lr, lr_peer), entry("fm", fm, fm_peer)]},
          open(path, "w"), indent=2)
print("bench_train: wrote", path)
PY
fi
