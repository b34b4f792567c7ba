#!/usr/bin/env bash
# Starts a parameter-server cluster on 127.0.0.1: N ps_server processes and
# M worker processes, each in the background with its log and pid file under
# a run folder. Prints the run folder and the servers' addresses; stop the
# cluster with scripts/stop_cluster.sh RUN_FOLDER.
#
# Usage:
#   scripts/start_cluster.sh [--flagfile=FILE] [--OPTION=VALUE ...]
#
# Options (a flagfile holds the same --OPTION=VALUE lines, one per line, '#'
# starts a comment; options on the command line win over the flagfile):
#   --servers=N          ps_server processes (shards), default 2
#   --workers=M          worker processes, default 2 (0: servers only)
#   --tables=FILE        text-format TableConfig, default
#                        configs/tables_example.tables
#   --consistency=MODE   async | bsp | ssp, default async
#   --staleness=S        ssp bound, default 2
#   --transport=T        auto | shm | tcp (servers and workers), default auto
#   --apply_threads=K    apply threads per server, default 1
#   --server_args=ARGS   more ps_server flags (split on spaces), e.g.
#                        "--checkpoint_dir=ckpt --checkpoint_every_steps=100"
#   --restore=WHAT       every server starts with --restore_from=WHAT
#                        ('latest' or a checkpoint path; needs
#                        --checkpoint_dir in --server_args for 'latest')
#   --worker_bin=PATH    the worker program, default the build's
#                        tests/ps/ps_test_worker
#   --worker_args=ARGS   more worker flags (split on spaces), default
#                        "--steps=100"
#   --build_dir=DIR      where ps_server and the worker were built, default
#                        ./build (see scripts/build.sh)
#   --run_dir=DIR        default ./run/cluster-<timestamp>
#   --ready_timeout=SECS how long a server may take to publish its address,
#                        default 30
#
# The worker program: for now tests/ps/ps_test_worker, a synthetic worker
# (pull a random batch, push a random gradient, Clock(), --steps times; see
# its --help). The real trainer, ps_worker (a later issue), takes the same
# --worker_id/--num_workers/--servers flags: pass it with --worker_bin and
# its own flags (data, model) with --worker_args. Every worker gets
# --worker_id, --num_workers and --servers (and --transport unless auto).
#
# Files under the run folder: server-<i>.log/.pid/.addr, worker-<j>.log/.pid,
# cluster.env (SERVERS=..., the addresses in shard order).
#
# After a crash (a server killed; ps_worker then exits with status 3): stop
# what is left (scripts/stop_cluster.sh RUN_FOLDER; with checkpoints pass
# --checkpoint_on_exit=false in --server_args, or the surviving servers
# wait for the dead shard's part of their final checkpoint), then start the
# cluster again with the same options plus --restore=latest: every shard
# returns to the newest complete checkpoint and the ps_worker processes
# resume at its step and data position.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

servers=2 workers=2 tables="$root/configs/tables_example.tables"
consistency=async staleness=2 transport=auto apply_threads=1
server_args="" restore="" worker_bin="" worker_args="--steps=100"
build_dir="$root/build" run_dir="" ready_timeout=30

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

apply_option() {  # $1: --name=value
  local arg=$1 name value
  case "$arg" in
    --*=*) name=${arg%%=*}; name=${name#--}; value=${arg#*=} ;;
    *) echo "start_cluster: expected --OPTION=VALUE, got '$arg'" >&2; exit 2 ;;
  esac
  case "$name" in
    servers) servers=$value ;;
    workers) workers=$value ;;
    tables) tables=$value ;;
    consistency) consistency=$value ;;
    staleness) staleness=$value ;;
    transport) transport=$value ;;
    apply_threads) apply_threads=$value ;;
    server_args) server_args=$value ;;
    restore) restore=$value ;;
    worker_bin) worker_bin=$value ;;
    worker_args) worker_args=$value ;;
    build_dir) build_dir=$value ;;
    run_dir) run_dir=$value ;;
    ready_timeout) ready_timeout=$value ;;
    *) echo "start_cluster: unknown option --$name (see --help)" >&2; exit 2 ;;
  esac
}

# The flagfile first, then the command line on top.
cli=()
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --flagfile=*)
      flagfile=${arg#*=}
      [ -r "$flagfile" ] || { echo "start_cluster: cannot read $flagfile" >&2; exit 2; }
      while IFS= read -r line || [ -n "$line" ]; do
        line=${line%%#*}
        line=$(echo "$line" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
        [ -n "$line" ] && apply_option "$line"
      done <"$flagfile"
      ;;
    *) cli+=("$arg") ;;
  esac
done
for arg in "${cli[@]+"${cli[@]}"}"; do apply_option "$arg"; done

is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_count "$servers" && [ "$servers" -ge 1 ] || { echo "start_cluster: --servers must be >= 1" >&2; exit 2; }
is_count "$workers" || { echo "start_cluster: --workers must be a number" >&2; exit 2; }
is_count "$ready_timeout" || { echo "start_cluster: --ready_timeout must be a number" >&2; exit 2; }
case "$consistency" in async|bsp|ssp) ;; *) echo "start_cluster: --consistency is async, bsp or ssp" >&2; exit 2 ;; esac
case "$transport" in auto|shm|tcp) ;; *) echo "start_cluster: --transport is auto, shm or tcp" >&2; exit 2 ;; esac
# A relative --tables that is not there from here is taken from the repository.
if [ ! -r "$tables" ] && [ "${tables#/}" = "$tables" ] && [ -r "$root/$tables" ]; then
  tables="$root/$tables"
fi
[ -r "$tables" ] || { echo "start_cluster: cannot read tables $tables" >&2; exit 2; }
tables=$(cd "$(dirname "$tables")" && pwd)/$(basename "$tables")

server_bin="$build_dir/server/ps_server"
[ -n "$worker_bin" ] || worker_bin="$build_dir/tests/ps/ps_test_worker"
[ -x "$server_bin" ] || { echo "start_cluster: no $server_bin (build it: scripts/build.sh, or pass --build_dir)" >&2; exit 2; }
if [ "$workers" -gt 0 ] && [ ! -x "$worker_bin" ]; then
  echo "start_cluster: no worker program $worker_bin (build ps_test_worker or pass --worker_bin)" >&2; exit 2
fi

[ -n "$run_dir" ] || run_dir="$PWD/run/cluster-$(date +%Y%m%d-%H%M%S)"
if [ -e "$run_dir" ] && [ -n "$(ls -A "$run_dir" 2>/dev/null)" ]; then
  echo "start_cluster: run folder $run_dir exists and is not empty" >&2; exit 2
fi
mkdir -p "$run_dir"
run_dir=$(cd "$run_dir" && pwd)

# On any failure below, stop what was started.
started=0
fail() {
  echo "start_cluster: $*" >&2
  if [ $started = 1 ]; then "$root/scripts/stop_cluster.sh" --timeout=5 "$run_dir" >&2 || true; fi
  exit 1
}

export GLOG_logtostderr=1
transport_flag=()
[ "$transport" = auto ] || transport_flag=("--transport=$transport")
read -r -a extra_server <<<"$server_args"
[ -z "$restore" ] || extra_server+=("--restore_from=$restore")
for ((s = 0; s < servers; s++)); do
  started=1
  "$server_bin" --shard_id=$s --num_shards="$servers" --num_workers="$workers" \
    --port=0 --port_file="$run_dir/server-$s.addr" --tables="$tables" \
    --consistency="$consistency" --staleness="$staleness" \
    --apply_threads="$apply_threads" --transport="$transport" \
    "${extra_server[@]+"${extra_server[@]}"}" \
    </dev/null >"$run_dir/server-$s.log" 2>&1 &
  echo $! >"$run_dir/server-$s.pid"
done

addresses=()
for ((s = 0; s < servers; s++)); do
  deadline=$((SECONDS + ready_timeout))
  until [ -s "$run_dir/server-$s.addr" ] && grep -q ':[0-9]' "$run_dir/server-$s.addr"; do
    if ! kill -0 "$(cat "$run_dir/server-$s.pid")" 2>/dev/null; then
      tail -n 20 "$run_dir/server-$s.log" >&2 || true
      fail "server $s exited before it was ready (log: $run_dir/server-$s.log)"
    fi
    [ $SECONDS -lt $deadline ] || fail "server $s not ready after ${ready_timeout}s (log: $run_dir/server-$s.log)"
    sleep 0.05
  done
  sleep 0.05  # let a half-written port file finish
  addresses+=("$(tr -d '[:space:]' <"$run_dir/server-$s.addr")")
done
server_list=$(IFS=,; echo "${addresses[*]}")
echo "SERVERS=$server_list" >"$run_dir/cluster.env"

read -r -a extra_worker <<<"$worker_args"
for ((w = 0; w < workers; w++)); do
  "$worker_bin" --worker_id=$w --num_workers="$workers" --servers="$server_list" \
    "${transport_flag[@]+"${transport_flag[@]}"}" \
    "${extra_worker[@]+"${extra_worker[@]}"}" \
    </dev/null >"$run_dir/worker-$w.log" 2>&1 &
  echo $! >"$run_dir/worker-$w.pid"
done

echo "cluster: $servers server(s) at $server_list, $workers worker(s) ($(basename "$worker_bin")), consistency $consistency, transport $transport"
echo "logs and pid files: $run_dir"
echo "stop with: $root/scripts/stop_cluster.sh $run_dir"
echo "$run_dir"
