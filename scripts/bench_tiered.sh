#!/usr/bin/env bash
# Training on an EXACT table larger than its memory bound (a disk tier:
# when_full: WHEN_FULL_MOVE_TO_DISK, ps_server --disk_tier_dir), next to its
# peer in the same run: the same key stream on the same table held entirely
# in memory.
#
# Both runs: ps_launch, 1 server, 1 worker (bench/ps_bench --mode=train,
# shm), an EXACT table of dim 16 with Adagrad; a fill pass pushes every one
# of --keys ids once (timed), then --warmup_steps untimed and --steps timed
# steps, each a Pull then a Push (+ WaitApplied) of 1,000 examples x 39
# keys, each example's keys from the 39 fields of ps_datagen --vocab=criteo,
# their vocabularies scaled (--vocab_scale) to total --keys ids (ps_bench
# --key_law=criteo, bench/criteo_keys.h: the Kaggle log's cardinalities and
# per-field exponents, 0.66 to 1.0 for the large fields), or with --zipf
# from one power law over all ids (bench/zipf_keys.h). The tiered table
# keeps 1/8 of the ids' rows in memory. Where the v1 memory controller is
# mounted (/sys/fs/cgroup/memory) and we are root, its server runs in a
# memory cgroup of that 1/8 (rows and Adagrad state) + 1 GiB, so that the
# page cache cannot hold the rows on disk; else the run says it had none.
#
# The warm-up is long (800 steps) because the fill leaves memory holding
# the rows it wrote last, not the hot ones: on the 2x10^7 ids, a replay of
# this key stream through an LRU of 1/8 of the rows misses about 3,500
# rows a step over steps 20-120 and settles at about 2,400 from step 800
# on, where it stays. The timed steps measure that steady state, which is
# what hours of training see; --warmup_steps=20 measures the first steps
# after a fill or a restore instead.
#
# Rows:
#   tiered_steps_per_s: steps / time pulling and pushing; peer: the table in
#       memory; ratio = tiered / memory (the issue's goal: >= 0.7).
#   tiered_{pull,push}_{p50,p99}_ms: latency of a step's pull and push;
#       peer: in memory; lower is better.
#   tiered_fill_s: the fill pass; peer: in memory; lower is better.
#   tiered_store_us_per_miss, tiered_store_cpu_us_per_miss: the disk store
#       alone (bench/cold_store_bench, in a cgroup as the tiered server,
#       on as many records as the tiered table has on disk): the wall and
#       CPU time of a miss (a record read, a row moved out, one moved in);
#       peer: raw direct reads (io_uring) and appends of the same records
#       on the same disk, the least a store could do; lower is better.
#   tiered_server_read_mib: what the tiered server read from storage
#       (read_bytes of /proc/PID/io); peer: the server in memory.
#   tiered_server_peak_mib: the servers' peak RSS (VmHWM).
#   tiered_ckpt_{mb,linked_mb,pause_ms,write_s}: the checkpoint each server
#       writes as it stops (--checkpoint_on_exit: every row): its size, how
#       much of it is the disk tier's files linked (not written), how long
#       applying paused for its cut, how long writing it took.
#   tiered_restore_s, tiered_restore_server_peak_mib: a cluster restored
#       from that checkpoint (--restore_from=latest): the restore's time
#       and its server's peak RSS (the tiered one in the same cgroup).
#
# With --large[=N] (N ids, default 2x10^8: more rows and state than this
# machine's memory), a third run after those two, tiered only: rows in
# memory for a budget of --large_budget_mib (default 4096) at the row's
# values and Adagrad state plus 64 bytes of index and bookkeeping each
# (what issue 39 measured), the server in a memory cgroup of budget +
# 1 GiB; a timed fill, then --large_seconds (default 600) of steps, then
# its checkpoint and a restore of it, as above:
#   large_steps_per_s: peer: the table of --keys ids in memory (the second
#       run); large_fill_s, large_server_peak_mib (with the budget + 1 GiB
#       as its peer: must stay below), large_store_gib (the disk store's
#       largest size, du; peer: this machine's memory: must exceed it),
#       large_ckpt_{mb,linked_mb,pause_ms,write_s}, large_restore_s,
#       large_restore_server_peak_mib.
#
# Usage: scripts/bench_tiered.sh [--json FILE] [--keys=N] [--steps=N]
#                                [--zipf=S] [--quick] [--build-dir=DIR]
#                                [--large[=N]] [--large_budget_mib=M]
#                                [--large_seconds=S] [--warmup_steps=N]
#   --json FILE  also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --keys=N     ids in the table (default 20000000, the issue's 2x10^7)
#   --steps=N    timed steps (default 100)
#   --warmup_steps=N  untimed steps before them (default 800; 20 with
#                --quick; the --large run's are 20: it times 10 minutes)
#   --zipf=S     keys from one power law of exponent S over the ids instead
#   --quick      1M ids, 20 warm-up and 20 timed steps (smoke test)
#   --build-dir=DIR  use ps_server/ps_bench/ps_launch of an existing build
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
keys=20000000 steps=100 warmup_steps=800 zipf="" quick=0
large=0 large_budget_mib=4096 large_seconds=600
bench_option() {
  case "$1" in
    --large) large=200000000 ;;
    --large=*) large=${1#*=} ;;
    --large_budget_mib=*) large_budget_mib=${1#*=} ;;
    --large_seconds=*) large_seconds=${1#*=} ;;
    --keys=*) keys=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --warmup_steps=*) warmup_steps=${1#*=} ;;
    --zipf=*) zipf=${1#*=} ;;
    --quick) quick=1 ;;
    *) return 1 ;;
  esac
}
bench_parse bench_tiered "$@"
[ "$quick" = 1 ] && { keys=1000000 steps=20 warmup_steps=20; }
[[ "$keys" =~ ^[0-9]+$ && "$keys" -ge 8 ]] ||
  { echo "bench_tiered: --keys must be a whole number >= 8" >&2; exit 2; }
[[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 1 ]] ||
  { echo "bench_tiered: --steps must be a whole number >= 1" >&2; exit 2; }
for v in warmup_steps large large_budget_mib large_seconds; do
  [[ "${!v}" =~ ^[0-9]+$ ]] ||
    { echo "bench_tiered: --$v must be a whole number" >&2; exit 2; }
done

bench_scratch
bench_tools ps_server ps_bench ps_launch bench_report cold_store_bench
for b in server/ps_server bench/ps_bench launch/ps_launch bench/cold_store_bench; do
  [ -x "$build_dir/$b" ] || { echo "bench_tiered: $build_dir/$b was not built" >&2; exit 1; }
done

key_law="--key_law=criteo" law="ps_datagen --vocab=criteo fields"
if [ -n "$zipf" ]; then
  key_law="--key_law=zipf --zipf=$zipf" law="zipf $zipf"
fi
dim=16
in_memory=$((keys / 8))
# Rows and Adagrad state of the rows in memory, + 1 GiB.
limit=$((in_memory * dim * 4 * 2 + (1 << 30)))

# tables FILE CAPACITY WHEN_FULL
tables() {
  cat >"$1" <<TABLES
table { id: 1 name: "ids" kind: EXACT dim: $dim capacity: $2
        admit_after_pushes: 1 when_full: $3
        optimizer { kind: OPTIMIZER_ADAGRAD learning_rate: 0.05 } }
TABLES
}
tables "$work/memory.tables" "$((keys + keys / 64))" WHEN_FULL_EVICT_LEAST_RECENT
tables "$work/tiered.tables" "$in_memory" WHEN_FULL_MOVE_TO_DISK

# in_cgroup NAME LIMIT [BIN]: sets $wrapped to a wrapper that ps_launch
# starts in ps_server's place (or that runs BIN): it joins a memory cgroup
# of LIMIT bytes, then becomes ps_server (BIN); plain ps_server (BIN) where
# there is no v1 memory controller or we are not root, as it says.
cgroups=()
in_cgroup() {
  local bin=${3:-$build_dir/server/ps_server}
  if [ "$(id -u)" != 0 ] || [ ! -w /sys/fs/cgroup/memory ]; then
    echo "$1: no memory cgroup (needs root and /sys/fs/cgroup/memory): the page cache may hold the rows on disk"
    wrapped=$bin
    return
  fi
  local group=/sys/fs/cgroup/memory/ps_bench_tiered_$$_$1
  mkdir "$group"
  cgroups+=("$group")
  echo "$2" >"$group/memory.limit_in_bytes"
  cat >"$work/in_cgroup_$1.sh" <<WRAP
#!/bin/sh
echo \$\$ >"$group/cgroup.procs"
exec "$bin" "\$@"
WRAP
  chmod +x "$work/in_cgroup_$1.sh"
  echo "$1: memory cgroup of $(($2 >> 20)) MiB"
  wrapped="$work/in_cgroup_$1.sh"
}
remove_cgroups() {
  for group in ${cgroups[@]+"${cgroups[@]}"}; do
    rmdir "$group" 2>/dev/null || true
  done
}
trap 'remove_cgroups; bench_cleanup' EXIT INT TERM
in_cgroup tiered "$limit"
server_bin=$wrapped

# launch NAME TABLES SERVER_BIN SERVER_ARGS WORKER_ARGS: one cluster (its
# logs in $work/NAME); appends worker 0's RESULT figures to $work/results
# as MODE_FIELD_NAME samples.
: >"$work/results"
launch() {
  local name=$1 tables=$2 bin=$3 args=$4 worker_args=$5 dir="$work/$1"
  "$build_dir/launch/ps_launch" --servers=1 --workers=1 --tables="$tables" \
    --transport=shm --server_args="$args" --server_bin="$bin" \
    --ready_timeout=3600 --stop_timeout=3600 --worker_bin="$build_dir/bench/ps_bench" \
    --worker_args="--table=ids --dim=$dim --mode=train --batch_examples=1000 --example_keys=39 --key_space=${run_keys:-$keys} $key_law --server_pid_files=$dir/server-0.pid $worker_args" \
    --run_dir="$dir" >/dev/null 2>"$work/launch.err" || {
    echo "bench_tiered: ps_bench failed ($name):" >&2
    cat "$work/launch.err" "$dir"/worker-*.log >&2
    tail -n 20 "$dir"/server-*.log >&2
    exit 1
  }
  awk -v run="$name" '$1 == "RESULT" {
      mode = substr($2, 6)
      for (i = 3; i <= NF; i++) { split($i, kv, "="); print mode "_" kv[1] "_" run, kv[2] }
    }' "$dir/worker-0.log" >>"$work/results"
  grep -h 'final stats' "$dir"/server-*.log | sed "s/^.*final stats:/$name server:/" || true
}

# run NAME TABLES SERVER_BIN SERVER_ARGS: the fill, the timed steps and, as
# the server stops, a checkpoint of every row (its cut pause and write
# time from the server's log); then a cluster restored from it (the
# restore's time from the log, its server's peak RSS) for a few steps.
run() {
  local name=$1 tables=$2 bin=$3 args="$4 --checkpoint_dir=$work/$1-ckpt"
  launch "$name" "$tables" "$bin" "$args" \
    "--batches=$steps --warmup_batches=$warmup_steps --fill ${train_args:-}"
  sed -n 's/^.*checkpoint step [0-9]* shard 0: .*, \([0-9.]*\) MB (\([0-9.]*\) MB of it linked[^,]*, cut pause \([0-9.]*\) ms, write \([0-9.]*\) ms.*$/\1 \2 \3 \4/p' \
    "$work/$name"/server-0.log | tail -n 1 |
    awk -v run="$name" '{ print "ckpt_mb_" run, $1; print "ckpt_linked_mb_" run, $2;
                          print "ckpt_pause_ms_" run, $3;
                          print "ckpt_write_s_" run, $4 / 1000 }' >>"$work/results"
  launch "$name-restore" "$tables" "$bin" \
    "$args --restore_from=latest --checkpoint_on_exit=false" "--batches=1"
  sed -n 's/^.*restored shard 0 of .* in \([0-9.]*\) s.*$/\1/p' \
    "$work/$name-restore"/server-0.log | tail -n 1 |
    awk -v run="$name" '{ print "restore_s_" run, $1 }' >>"$work/results"
}

echo "$keys ids ($law), dim $dim, Adagrad; $in_memory rows in memory when tiered"

# The tiered table's disk store alone, in a cgroup as the tiered server's:
# a step's misses (~2,400 once they settle) read, and as many rows moved
# out, against raw direct reads and appends of the same records
# (bench/cold_store_bench.cc).
in_cgroup store "$limit" "$build_dir/bench/cold_store_bench"
"$wrapped" --dir="$work/cold-store" --rows=$((keys - in_memory)) \
  --misses=2500 --steps=$((quick ? 10 : 100)) |
  tee "$work/cold_store.out" | grep -v '^RESULT'
sed -n 's/^RESULT \([^ ]*\) \([^ ]*\) .*$/\1 \2/p' "$work/cold_store.out" >>"$work/results"

run memory "$work/memory.tables" "$build_dir/server/ps_server" ""
run tiered "$work/tiered.tables" "$server_bin" "--disk_tier_dir=$work/tier"

if [ "$large" -gt 0 ]; then
  # Rows and Adagrad state, + 64 bytes of index and bookkeeping, per row.
  large_rows=$(((large_budget_mib << 20) / (dim * 4 * 2 + 64)))
  tables "$work/large.tables" "$large_rows" WHEN_FULL_MOVE_TO_DISK
  echo "$large ids, dim 16, Adagrad; $large_rows rows in memory (a budget of $large_budget_mib MiB)"
  in_cgroup large $(((large_budget_mib + 1024) << 20))
  large_bin=$wrapped
  # The store's largest size, sampled while the runs go on. du fails when
  # a compaction deletes a file it is about to read: without errexit, that
  # sample still counts what du read, and the next one counts all (with it,
  # the first such failure ended the sampling: 8 GiB reported for a store
  # that reached 29).
  echo 0 >"$work/large_store_bytes"
  (
    set +e +o pipefail
    max=0
    while sleep 5; do
      now=$(du -sb "$work/large-tier" 2>/dev/null | cut -f1)
      if [ "${now:-0}" -gt "$max" ]; then
        max=$now
        echo "$max" >"$work/large_store_bytes"
      fi
    done
  ) &
  du_sampler=$!
  background+=("$du_sampler")
  run_keys=$large warmup_steps=20 \
    train_args="--batches=1000000 --train_seconds=$large_seconds" \
    run large "$work/large.tables" "$large_bin" "--disk_tier_dir=$work/large-tier"
  kill "$du_sampler" 2>/dev/null || true
  echo "large_store_gib $(awk '{ print $1 / 2^30 }' "$work/large_store_bytes")" >>"$work/results"
  echo "large_budget_peak_mib $((large_budget_mib + 1024))" >>"$work/results"
  echo "machine_memory_gib $(awk '$1 == "MemTotal:" { print $2 / 2^20 }' /proc/meminfo)" >>"$work/results"
fi

peer="same table in memory, same run"
{
  cat "$work/results"
  echo "row tiered_steps_per_s steps/s train_steps_per_s_tiered train_steps_per_s_memory higher $peer"
  for f in pull_p50 pull_p99 push_p50 push_p99; do
    echo "row tiered_${f}_ms ms train_${f}_ms_tiered train_${f}_ms_memory lower $peer"
  done
  echo "row tiered_fill_s s fill_seconds_tiered fill_seconds_memory lower $peer"
  raw="raw direct reads and appends, same run"
  echo "row tiered_store_us_per_miss us cold_store_us_per_miss_store cold_store_us_per_miss_raw lower $raw"
  echo "row tiered_store_cpu_us_per_miss us cold_store_cpu_us_per_miss_store cold_store_cpu_us_per_miss_raw lower $raw"
  echo "row tiered_server_read_mib MiB rss_server_read_mib_tiered rss_server_read_mib_memory - $peer"
  echo "row tiered_server_peak_mib MiB rss_server_peak_mib_tiered rss_server_peak_mib_memory - $peer"
  echo "row tiered_ckpt_mb MB ckpt_mb_tiered ckpt_mb_memory - $peer"
  echo "row tiered_ckpt_linked_mb MB ckpt_linked_mb_tiered ckpt_linked_mb_memory - $peer"
  echo "row tiered_ckpt_pause_ms ms ckpt_pause_ms_tiered ckpt_pause_ms_memory lower $peer"
  echo "row tiered_ckpt_write_s s ckpt_write_s_tiered ckpt_write_s_memory lower $peer"
  echo "row tiered_restore_s s restore_s_tiered restore_s_memory lower $peer"
  echo "row tiered_restore_server_peak_mib MiB rss_server_peak_mib_tiered-restore rss_server_peak_mib_memory-restore - $peer"
  if [ "$large" -gt 0 ]; then
    echo "row large_steps_per_s steps/s train_steps_per_s_large train_steps_per_s_memory higher $keys ids in memory, same run"
    echo "row large_steps - train_steps_large - -"
    echo "row large_fill_s s fill_seconds_large - -"
    echo "row large_server_peak_mib MiB rss_server_peak_mib_large large_budget_peak_mib - budget + 1 GiB"
    echo "row large_store_gib GiB large_store_gib machine_memory_gib - this machine's memory"
    echo "row large_ckpt_mb MB ckpt_mb_large - -"
    echo "row large_ckpt_linked_mb MB ckpt_linked_mb_large - -"
    echo "row large_ckpt_pause_ms ms ckpt_pause_ms_large - -"
    echo "row large_ckpt_write_s s ckpt_write_s_large - -"
    echo "row large_restore_s s restore_s_large - -"
    echo "row large_restore_server_peak_mib MiB rss_server_peak_mib_large-restore large_budget_peak_mib - budget + 1 GiB"
  fi
} | bench_report ${json:+--json="$json"}
echo "(ratio = tiered / in memory for steps/s; in memory / tiered for times)"
