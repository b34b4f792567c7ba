#!/usr/bin/env bash
# One task of ps_job.sbatch (srun runs it once per task): task K < PS_SERVERS
# is the ps_server of shard K, the others are ps_workers. The job script sets
# the PS_* variables it reads (see there); Slurm sets SLURM_PROCID and
# SLURM_NTASKS. The task's exit status is its program's.
set -euo pipefail
rank=$SLURM_PROCID
servers=$PS_SERVERS
workers=$((SLURM_NTASKS - servers))
run=$PS_RUN_DIR
secret=(--cluster_secret_file="$PS_CLUSTER_SECRET_FILE")
read -r -a server_args <<<"${PS_SERVER_ARGS:-}"
read -r -a worker_args <<<"${PS_WORKER_ARGS:-}"

if [ "$rank" -lt "$servers" ]; then
  # --port_file: the advertised address, written once the server accepts
  # connections.
  # No final checkpoint on stop: it would record no data positions, and
  # after a crash the surviving shards would wait for the dead one's part.
  "$PS_SERVER_BIN" --shard_id="$rank" --num_shards="$servers" \
    --num_workers="$workers" --listen_host="${PS_LISTEN_HOST:-0.0.0.0}" \
    ${PS_ADVERTISE_HOST:+--advertise_host="$PS_ADVERTISE_HOST"} --port=0 \
    --port_file="$run/server-$rank.addr" --tables="$PS_TABLES" "${secret[@]}" \
    --checkpoint_dir="$PS_CHECKPOINT_DIR" --checkpoint_on_exit=false \
    ${PS_RESTORE:+--restore_from="$PS_RESTORE"} "${server_args[@]}" \
    >>"$run/server-$rank.log" 2>&1 &
  pid=$!
  # The workers mark their end (worker-I.done): then this shard stops
  # (SIGTERM, a clean exit 0). If the server dies first, wait says how.
  while kill -0 "$pid" 2>/dev/null; do
    done_files=("$run"/worker-*.done)
    if [ -e "${done_files[0]}" ] && [ ${#done_files[@]} -ge "$workers" ]; then
      kill -TERM "$pid"
      break
    fi
    sleep 0.2
  done
  wait "$pid"
  exit
fi

id=$((rank - servers))
list=""
deadline=$((SECONDS + ${PS_READY_TIMEOUT:-120}))
for ((k = 0; k < servers; k++)); do
  until [ -s "$run/server-$k.addr" ]; do
    if [ $SECONDS -ge $deadline ]; then
      echo "ps_task: worker $id: server $k wrote no $run/server-$k.addr in ${PS_READY_TIMEOUT:-120} s" >&2
      exit 1
    fi
    sleep 0.1
  done
  list+=${list:+,}$(cat "$run/server-$k.addr")
done
"$PS_WORKER_BIN" --worker_id="$id" --num_workers="$workers" --servers="$list" \
  "${secret[@]}" --metrics_json="$run/worker-$id.json" "${worker_args[@]}" \
  >>"$run/worker-$id.log" 2>&1
touch "$run/worker-$id.done"
