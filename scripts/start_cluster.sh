#!/usr/bin/env bash
# Starts a parameter-server cluster on 127.0.0.1 in the background: N
# ps_server processes and M ps_worker processes, each with its log and pid
# file under a run folder. Prints the run folder and the servers' addresses;
# stop the cluster with scripts/stop_cluster.sh RUN_FOLDER.
#
# Usage:
#   scripts/start_cluster.sh [--flagfile=FILE] [--OPTION=VALUE ...]
#
# The options are ps_launch's (build/launch/ps_launch --help lists them all;
# this script runs it with --detach), and a flagfile holds the same
# --OPTION=VALUE lines, read by gflags ('#' starts a comment; options after
# --flagfile on the command line win). The main ones:
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
#   --worker_bin=PATH    the worker program, default the build's ps_worker
#   --worker_args=ARGS   more worker flags (split on spaces; {i} is the
#                        worker id), e.g. "--flagfile=configs/fm.flags
#                        --train_data=run/train.tsv"
#   --build_dir=DIR      where ps_server and ps_worker were built, default
#                        ./build (see scripts/build.sh)
#   --run_dir=DIR        default ./run/cluster-<timestamp>
#   --ready_timeout=SECS how long a server may take to publish its address,
#                        default 30
#   --server_prefix=WORDS, --worker_prefix=WORDS  run before each command
#                        ({i}: its index), e.g. 'ip netns exec ns{i}'
#   --server_listen_host=H[,H...]  each server's bind address
#
# Every worker gets --worker_id, --num_workers and --servers (and
# --transport unless auto); ps_worker's own flags (data, model) go in
# --worker_args. configs/cluster_example.flags is an example.
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
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
usage() { script_help; }

# Only --build_dir is looked at here: it says where ps_launch is.
build_dir="$root/build"
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --build_dir=*) build_dir=${arg#*=} ;;
  esac
done
launcher="$build_dir/launch/ps_launch"
[ -x "$launcher" ] || { echo "start_cluster: no $launcher (build it: scripts/build.sh, or pass --build_dir)" >&2; exit 2; }

out=$("$launcher" --detach --build_dir="$build_dir" "$@")
run_dir=$(tail -n 1 <<<"$out")
sed '$d' <<<"$out"
echo "stop with: $root/scripts/stop_cluster.sh $run_dir"
echo "$run_dir"
