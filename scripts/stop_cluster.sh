#!/usr/bin/env bash
# Stops a cluster started by scripts/start_cluster.sh (or a running
# ps_launch): workers first, then servers, each with SIGTERM (servers drain
# their inboxes and exit), then SIGKILL for any process still alive after
# the timeout. (ps_launch --stop does it.)
#
# Usage:
#   scripts/stop_cluster.sh [--timeout=SECS] [--build_dir=DIR] [RUN_FOLDER]
#     RUN_FOLDER   default: the newest ./run/cluster-* folder
#     --timeout    seconds to wait after SIGTERM before SIGKILL (default 20)
#     --build_dir  where ps_launch was built, default ./build
#
# A pid file whose process is gone, or now runs another program, is only
# removed. Exit code 0 when everything stopped on SIGTERM, 1 if something
# had to be killed.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
timeout=20 run_dir="" build_dir="$root/build"
for arg in "$@"; do
  case "$arg" in
    --timeout=*) timeout=${arg#*=} ;;
    --build_dir=*) build_dir=${arg#*=} ;;
    -h|--help) script_help; exit 0 ;;
    -*) echo "stop_cluster: unknown option '$arg'" >&2; exit 2 ;;
    *) run_dir=$arg ;;
  esac
done
launcher="$build_dir/launch/ps_launch"
[ -x "$launcher" ] || { echo "stop_cluster: no $launcher (pass --build_dir)" >&2; exit 2; }
exec "$launcher" --stop --stop_timeout="$timeout" ${run_dir:+--run_dir="$run_dir"}
