#!/usr/bin/env bash
# The demo: on a fresh machine, sets up and builds, generates Criteo-shaped
# click logs from a planted model, starts 2 parameter servers and 2 workers
# on 127.0.0.1, trains, and prints eval AUC, logloss and throughput next to
# the planted model's own AUC (the best any model can do on the data); the
# servers checkpoint as they train and on stop, restart from the checkpoint,
# and the restored model is scored again (it must score the same).
# Usage:
#   scripts/demo.sh [--quick] [--model=lr|fm|deepfm] [--rows=N] [--keep]
#     --quick   200k training rows instead of 1M (a faster look)
#     --keep    keep the data and logs (their folder is printed)
#   PS_BUILD_DIR=DIR builds there instead of build/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=fm rows=1000000 keep=0
for arg in "$@"; do
  case "$arg" in
    --quick) rows=200000 ;;
    --model=*) model=${arg#*=} ;;
    --rows=*) rows=${arg#*=} ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "demo: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
case "$model" in lr|fm|deepfm) ;; *) echo "demo: --model is lr, fm or deepfm" >&2; exit 2 ;; esac
planted=$model; [ "$model" = deepfm ] && planted=fm

work=$(mktemp -d "${TMPDIR:-/tmp}/ps-demo.XXXXXX")
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ $keep = 1 ] || [ $rc != 0 ]; then
    echo "demo: data and logs are in $work" >&2
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
  --target=ps_datagen --target=ps_ckpt | tail -n 1)
t_built=$(date +%s)
echo "== built in $((t_built - t0)) s ($bd)"

echo "== generating $rows training rows from a planted $planted model"
"$bd/worker/datagen/ps_datagen" --model="$planted" --rows="$rows" \
  --eval_rows=$((rows / 5)) --seed=1 --output="$work/train.tsv" \
  --eval_output="$work/eval.tsv" | tee "$work/datagen.log"
optimum=$(sed -n 's/^planted optimum AUC \([0-9.]*\).*/\1/p' "$work/datagen.log")

# start_servers [EXTRA FLAGS]: 2 servers in the background, their addresses
# in $servers.
start_servers() {
  pids=()
  for s in 0 1; do
    rm -f "$work/server$s.addr"
    # bsp: each step's pushes are applied before the next step reads. Async
    # lets the servers' apply lag (hence how stale the workers' reads are)
    # follow the machine's load; on 2 busy cores it cost FM up to 0.015 AUC.
    "$bd/server/ps_server" --shard_id=$s --num_shards=2 --num_workers=2 \
      --consistency=bsp --port=0 --port_file="$work/server$s.addr" \
      --tables="$root/configs/$model.tables" \
      --checkpoint_dir="$work/ckpt" "$@" >>"$work/server$s.log" 2>&1 &
    pids+=($!)
  done
  for s in 0 1; do
    for _ in $(seq 300); do
      [ -s "$work/server$s.addr" ] && break
      kill -0 "${pids[$s]}" 2>/dev/null ||
        { echo "demo: server $s exited:" >&2; cat "$work/server$s.log" >&2; exit 1; }
      sleep 0.1
    done
    [ -s "$work/server$s.addr" ] || { echo "demo: server $s did not start" >&2; exit 1; }
  done
  servers="$(cat "$work/server0.addr"),$(cat "$work/server1.addr")"
  echo "   servers at $servers"
}

# stop_servers: SIGTERM, on which each server writes a final checkpoint.
stop_servers() {
  for p in "${pids[@]}"; do kill -TERM "$p"; done
  for s in 0 1; do
    wait "${pids[$s]}" ||
      { echo "demo: server $s failed on stop:" >&2; tail "$work/server$s.log" >&2; exit 1; }
  done
  pids=()
}

echo "== starting 2 servers (a checkpoint every 500 steps, and on stop)"
start_servers --checkpoint_every_steps=500
echo "== training $model with 2 workers"
t_train=$(date +%s)
worker_pids=()
for w in 0 1; do
  # Worker 0 shows its progress here; worker 1 logs to a file.
  # (Through fd 3, not a reopened /dev/stderr, which would truncate a log
  # file the demo's own stderr goes to.)
  if [ $w = 0 ]; then exec 3>&2; else exec 3>"$work/worker$w.log"; fi
  "$bd/worker/train/ps_worker" --flagfile="$root/configs/$model.flags" \
    --train_data="$work/train.tsv" --eval_data="$work/eval.tsv" \
    --servers="$servers" --worker_id=$w --num_workers=2 \
    --metrics_json="$work/worker$w.json" >"$work/worker$w.out" 2>&3 3>&- &
  exec 3>&-
  worker_pids+=($!)
done
for w in 0 1; do
  wait "${worker_pids[$w]}" ||
    { echo "demo: worker $w failed:" >&2; cat "$work/worker$w.out" >&2;
      [ $w = 1 ] && cat "$work/worker1.log" >&2; exit 1; }
done
t_done=$(date +%s)

echo "== stopping the servers (final checkpoint), restarting them from it"
stop_servers
"$bd/checkpoint/ps_ckpt" list --dir="$work/ckpt"
"$bd/checkpoint/ps_ckpt" verify --dir="$work/ckpt" >"$work/verify.log" ||
  { echo "demo: checkpoint verification failed:" >&2; cat "$work/verify.log" >&2; exit 1; }
start_servers --restore_from=latest
grep -h "restor" "$work/server0.log" | tail -n 1
"$bd/worker/train/ps_worker" --flagfile="$root/configs/$model.flags" \
  --train_data="$work/train.tsv" --eval_data="$work/eval.tsv" \
  --servers="$servers" --num_workers=2 --eval_only --progress_secs=0 \
  >"$work/restored.out" 2>"$work/restored.log" ||
  { echo "demo: evaluating the restored model failed:" >&2; cat "$work/restored.log" >&2; exit 1; }
stop_servers
restored=$(grep '^eval AUC' "$work/restored.out")
echo "   restored model: $restored"

throughput=$(python3 - "$work/worker0.json" "$work/worker1.json" <<'PY'
import json, sys
print(round(sum(json.load(open(f))["samples_per_sec"] for f in sys.argv[1:])))
PY
)
line=$(grep '^eval AUC' "$work/worker0.out")
echo "== done: setup+build $((t_built - t0)) s, training $((t_done - t_train)) s, total $(($(date +%s) - t0)) s (with the restore)"
trained=$(sed 's/^eval AUC \([0-9.]*\) logloss \([0-9.]*\).*/\1 \2/' <<<"$line")
if [ "$trained" != "$(sed 's/^eval AUC \([0-9.]*\) logloss \([0-9.]*\).*/\1 \2/' <<<"$restored")" ]; then
  echo "demo: the restored model scores differently ($restored) from the trained one ($line)" >&2
  exit 1
fi
echo "$line (planted optimum AUC $optimum), $throughput samples/s over 2 workers; restored from the checkpoint: same AUC"
