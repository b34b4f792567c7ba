#!/usr/bin/env bash
# Training throughput: samples/s of ps_worker with the parameters in-process
# (--local) and with 1 server + 1 worker on 127.0.0.1, same data, same flags,
# for LR and FM. Usage:
#   scripts/bench_train.sh [--rows=N] [--json FILE] [--build-dir=DIR]
# JSON: {"results": [{"name": "train_lr_1s1w", "value": x, "unit": "samples/s",
#        "peer": "lr --local", "peer_value": y, "ratio": x / y}, train_fm_1s1w]}
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
rows=300000
bench_option() { case "$1" in --rows=*) rows=${1#*=} ;; *) return 1 ;; esac; }
bench_parse bench_train "$@"
bench_tools ps_server ps_worker ps_datagen ps_launch bench_report
bd=$build_dir
work=$(mktemp -d "${TMPDIR:-/tmp}/ps-bench-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$bd/worker/datagen/ps_datagen" --model=fm --rows="$rows" --eval_rows=20000 \
  --output="$work/train.tsv" --eval_output="$work/eval.tsv" >/dev/null

flags() {  # the worker flags of MODEL, the same with and without servers
  echo "--flagfile=$root/configs/$1.flags --epochs=1 --train_data=$work/train.tsv" \
    "--eval_data=$work/eval.tsv --progress_secs=0 --metrics_json=$work/m.json"
}
samples_per_sec() { bench_report --json_number=samples_per_sec "$work/m.json"; }

for model in lr fm; do
  # shellcheck disable=SC2046  # flags() is split into words on purpose
  "$bd/worker/train/ps_worker" $(flags $model) --local \
    --tables="$root/configs/$model.tables" >/dev/null
  echo "local_$model $(samples_per_sec) samples/s" >>"$work/results"
  "$bd/launch/ps_launch" --servers=1 --workers=1 --build_dir="$bd" \
    --tables="$root/configs/$model.tables" --worker_args="$(flags $model)" \
    --run_dir="$work/$model" >/dev/null 2>"$work/launch.err" ||
    { cat "$work/launch.err" "$work/$model"/*.log >&2; exit 1; }
  echo "ps_$model $(samples_per_sec) samples/s" >>"$work/results"
done

{
  cat "$work/results"
  for model in lr fm; do
    echo "row train_${model}_1s1w samples/s ps_$model local_$model higher $model --local ($rows rows)"
  done
} | bench_report ${json:+--json="$json"}
