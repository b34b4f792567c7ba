#!/usr/bin/env bash
# Stops a cluster started by scripts/start_cluster.sh: workers first, then
# servers, each with SIGTERM (servers drain their inboxes and exit), then
# SIGKILL for any process still alive after the timeout.
#
# Usage:
#   scripts/stop_cluster.sh [--timeout=SECS] [RUN_FOLDER]
#     RUN_FOLDER  default: the newest ./run/cluster-* folder
#     --timeout   seconds to wait after SIGTERM before SIGKILL (default 20)
#
# A pid file whose process is gone, or now runs another program, is only
# removed. Exit code 0 when everything stopped on SIGTERM, 1 if something
# had to be killed.
set -euo pipefail
timeout=20 run_dir=""
for arg in "$@"; do
  case "$arg" in
    --timeout=*) timeout=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "stop_cluster: unknown option '$arg'" >&2; exit 2 ;;
    *) run_dir=$arg ;;
  esac
done
[[ "$timeout" =~ ^[0-9]+$ ]] || { echo "stop_cluster: --timeout must be a number of seconds" >&2; exit 2; }
if [ -z "$run_dir" ]; then
  run_dir=$(ls -1d "$PWD"/run/cluster-* 2>/dev/null | sort | tail -n 1 || true)
  [ -n "$run_dir" ] || { echo "stop_cluster: no run folder given and none under ./run" >&2; exit 2; }
fi
[ -d "$run_dir" ] || { echo "stop_cluster: no folder $run_dir" >&2; exit 2; }

# Prints the pid of pid file $1 if that process still runs and is one we
# started (not a recycled pid).
alive_pid() {
  local pid_file=$1 pid
  pid=$(cat "$pid_file" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # A recycled pid runs another program: our processes have --num_workers
  # (servers and workers alike) on their command line.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- '--num_workers=' || return 1
  echo "$pid"
}

killed=0
stop_group() {  # $1: glob of pid files
  local files=() pids=() f pid
  for f in $run_dir/$1; do
    [ -e "$f" ] || continue
    if pid=$(alive_pid "$f"); then
      files+=("$f") pids+=("$pid")
      kill -TERM "$pid" 2>/dev/null || true
    else
      rm -f "$f"
    fi
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  local deadline=$((SECONDS + timeout)) i
  while :; do
    local left=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ $left = 1 ] || break
    if [ $SECONDS -ge $deadline ]; then
      for i in "${!pids[@]}"; do
        if kill -0 "${pids[$i]}" 2>/dev/null; then
          echo "stop_cluster: $(basename "${files[$i]}" .pid) (pid ${pids[$i]}) ignored SIGTERM for ${timeout}s: SIGKILL" >&2
          kill -KILL "${pids[$i]}" 2>/dev/null || true
          killed=1
        fi
      done
      break
    fi
    sleep 0.05
  done
  for i in "${!pids[@]}"; do
    echo "stopped $(basename "${files[$i]}" .pid) (pid ${pids[$i]})"
    rm -f "${files[$i]}"
  done
}

stop_group 'worker-*.pid'
stop_group 'server-*.pid'
echo "cluster in $run_dir stopped; logs kept there"
exit $killed
