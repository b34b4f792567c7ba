#!/usr/bin/env bash
# The demo: on a fresh machine, sets up and builds, generates Criteo-shaped
# click logs from a planted model, starts 2 parameter servers and 2 workers
# on 127.0.0.1, trains, and prints eval AUC, logloss and throughput next to
# the planted model's own AUC (the best any model can do on the data); the
# servers checkpoint as they train and on stop, restart from the checkpoint,
# and the restored model is scored again (it must score the same).
# The screen shows the progress lines and the result (and glog's warnings);
# every program's full log goes to the files it names (DIR/logs), and the
# training curves (ps_worker --metrics_out) are drawn into DIR/curves.png by
# scripts/plot_metrics.sh, where DIR is $PS_DEMO_OUT or <build dir>/demo.
# Usage:
#   scripts/demo.sh [--quick] [--model=lr|fm|deepfm] [--rows=N] [--keep]
#     --quick   200k training rows instead of 1M (a faster look)
#     --keep    keep the data and logs (their folder is printed)
#   PS_BUILD_DIR=DIR builds there instead of build/.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
model=fm rows=1000000 keep=0
for arg in "$@"; do
  case "$arg" in
    --quick) rows=200000 ;;
    --model=*) model=${arg#*=} ;;
    --rows=*) rows=${arg#*=} ;;
    --keep) keep=1 ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "demo: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
case "$model" in lr|fm|deepfm) ;; *) echo "demo: --model is lr, fm or deepfm" >&2; exit 2 ;; esac
planted=$model; [ "$model" = deepfm ] && planted=fm

work=$(mktemp -d "${TMPDIR:-/tmp}/ps-demo.XXXXXX")
follower=""
cleanup() {
  local rc=$?
  [ -z "$follower" ] || kill "$follower" 2>/dev/null || true
  if [ $keep = 1 ] || [ $rc != 0 ]; then
    echo "demo: data in $work, logs in ${logs:-$work}" >&2
  else
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
"$root/scripts/setup.sh"
bd=$("$root/scripts/build.sh" ${PS_BUILD_DIR:+--build-dir="$PS_BUILD_DIR"} --target=ps_server --target=ps_worker \
  --target=ps_datagen --target=ps_ckpt --target=ps_launch | tail -n 1)
t_built=$(date +%s)
echo "== built in $((t_built - t0)) s ($bd)"
# What outlives the run: the logs and the training curves.
out=${PS_DEMO_OUT:-$bd/demo}
logs=$out/logs
rm -rf "$logs" "$out"/curves.* "$out/metrics.jsonl"
mkdir -p "$logs"

echo "== generating $rows training rows from a planted $planted model"
"$bd/worker/datagen/ps_datagen" --model="$planted" --rows="$rows" \
  --eval_rows=$((rows / 5)) --seed=1 --output="$work/train.tsv" \
  --eval_output="$work/eval.tsv" | tee "$work/datagen.log"
optimum=$(sed -n 's/^planted optimum AUC \([0-9.]*\).*/\1/p' "$work/datagen.log")

# cluster NAME WORKERS SERVER_FLAGS WORKER_FLAGS: 2 servers (bsp: each
# step's pushes are applied before the next step reads; async lets the
# servers' apply lag, hence how stale the workers' reads are, follow the
# machine's load: on 2 busy cores it cost FM up to 0.015 AUC) and WORKERS
# ps_workers (the servers expect 2) under ps_launch, which stops the
# servers once the workers are done (SIGTERM: each writes a final
# checkpoint) and fails if any process does. Logs in $work/NAME.
cluster() {
  local name=$1 workers=$2 server_flags=$3 worker_flags=$4
  "$bd/launch/ps_launch" --servers=2 --workers="$workers" --expected_workers=2 \
    --consistency=bsp \
    --tables="$root/configs/$model.tables" --build_dir="$bd" \
    --server_args="--checkpoint_dir=$work/ckpt $server_flags" \
    --worker_args="--flagfile=$root/configs/$model.flags --train_data=$work/train.tsv --eval_data=$work/eval.tsv $worker_flags" \
    --run_dir="$logs/$name" >"$work/$name.out" 2>"$work/$name.launch.log" || {
    echo "demo: the $name cluster failed:" >&2
    cat "$work/$name.launch.log" >&2
    for log in "$logs/$name"/*.log; do echo "== $log" >&2; tail -n 20 "$log" >&2; done
    exit 1
  }
}
servers_of() { echo "   servers at $(sed -n 's/^SERVERS=//p' "$logs/$1/cluster.env")"; }

echo "== training $model with 2 workers on 2 servers (a checkpoint every 500 steps, and on stop)"
t_train=$(date +%s)
echo "   logs: $logs/train/{server,worker}-{0,1}.log"
# Worker 0 shows its progress here: its log, followed while it runs, less
# glog's INFO lines (WARNING and above stay, as on a terminal without
# GLOG_logtostderr).
tail -n +1 -F --pid=$$ "$logs/train/worker-0.log" 2>/dev/null |
  grep --line-buffered -v '^I[0-9]\{8\} ' >&2 &
follower=$!
# Both workers append their curves to one file (each line names its worker):
# a point every 5 s and at each eval.
cluster train 2 --checkpoint_every_steps=500 \
  "--metrics_json=$work/worker{i}.json --metrics_out=$out/metrics.jsonl --progress_secs=5"
sleep 1  # the last lines of the log
kill "$follower" 2>/dev/null || true
follower=""
servers_of train
t_done=$(date +%s)
curves=$("$root/scripts/plot_metrics.sh" "$out/metrics.jsonl" "$out/curves.png" | tail -n 1)

echo "== restarting the servers from the final checkpoint"
"$bd/checkpoint/ps_ckpt" list --dir="$work/ckpt"
"$bd/checkpoint/ps_ckpt" verify --dir="$work/ckpt" >"$work/verify.log" ||
  { echo "demo: checkpoint verification failed:" >&2; cat "$work/verify.log" >&2; exit 1; }
cluster restore 1 --restore_from=latest "--eval_only --progress_secs=0"
servers_of restore
# The server's word on the restore, without glog's prefix.
grep -h "restor" "$logs/restore/server-0.log" | tail -n 1 |
  sed 's/^[IWEF][0-9]\{8\} [0-9:.]* *[0-9]* [^]]*\] /   /'
restored=$(grep '^eval AUC' "$logs/restore/worker-0.log")
echo "   restored model: $restored"

throughput=$(python3 - "$work/worker0.json" "$work/worker1.json" <<'PY'
import json, sys
print(round(sum(json.load(open(f))["samples_per_sec"] for f in sys.argv[1:])))
PY
)
line=$(grep '^eval AUC' "$logs/train/worker-0.log")
echo "== done: setup+build $((t_built - t0)) s, training $((t_done - t_train)) s, total $(($(date +%s) - t0)) s (with the restore)"
trained=$(sed 's/^eval AUC \([0-9.]*\) logloss \([0-9.]*\).*/\1 \2/' <<<"$line")
if [ "$trained" != "$(sed 's/^eval AUC \([0-9.]*\) logloss \([0-9.]*\).*/\1 \2/' <<<"$restored")" ]; then
  echo "demo: the restored model scores differently ($restored) from the trained one ($line)" >&2
  exit 1
fi
echo "$line (planted optimum AUC $optimum), $throughput samples/s over 2 workers; restored from the checkpoint: same AUC"
echo "== training curves (train loss, eval AUC, eval NE, samples/s): $curves"
echo "   logs of every server and worker: $logs"
