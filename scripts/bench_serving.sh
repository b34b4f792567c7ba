#!/usr/bin/env bash
# Lookups on a serving replica (ps_serve) next to Redis, measured in the
# same run. Usage:
#   scripts/bench_serving.sh [--json FILE] [--build-dir=DIR] [--seconds=S]
#                            [--repetitions=N]
# Builds serving_bench and ps_serve (Release) if needed. Each of N runs
# (default 1; medians reported):
#  - bench/serving_bench writes a checkpoint of an EXACT table of 10^6 keys
#    of dim 16, starts ps_serve on it (--poll_ms=5), and looks up 1,000 keys
#    (a 64 KB answer) from one client, one lookup after the other, for S
#    seconds (default 10) over shm, then over tcp, while it commits an
#    incremental checkpoint of 10^5 changed rows every second. It times
#    each increment from its commit to the first lookup that names it, and
#    ps_ckpt verify's read of the same increment (checkpoint::
#    VerifyCheckpoint: scan, checksums) right after it. Then it commits one
#    full checkpoint (which the replica reads whole and compares), timed the
#    same way, and reads ps_serve's RSS: once it served the first
#    checkpoint, and its peak (VmHWM, reset after that load) over every
#    switch since.
#  - a table larger than the replica's memory: the same bench on a table
#    of 10^7 keys, tcp only, each lookup's 1,000 keys drawn from a Zipf law
#    (exponent 0.9, as the Criteo log's large fields), once with the table
#    tiered (when_full: WHEN_FULL_MOVE_TO_DISK, 1/8 of its rows in the
#    replica's memory, the others in its disk tier) and once all in memory
#    (the peer). The disk tier's files sit in the page cache here (no memory
#    cgroup): this times the tier's code, not the disk.
#  - redis-server on a free loopback port (no persistence) holds the same
#    1,000 rows as 64-byte binary values; redis-benchmark with one client
#    and one request in flight (-c 1 -P 1) sends MGET of the 1,000 keys.
# Rows (ratio: above 1 means ahead):
#   serving_lookups_per_s_{shm,tcp}  peer: Redis MGETs/s (goal, tcp: 5)
#   serving_p50_ms_{shm,tcp}         peer: Redis p50
#   serving_p99_ms_{shm,tcp}         peer: Redis p50 (goal, tcp: above 1,
#                                    our p99 below Redis's p50)
#   serving_fresh_ms                 commit to served, median; peer: the
#                                    verify read (goal: under 1,000 ms and
#                                    ratio >= 0.5, within 2x of the read)
#   serving_fresh_full_ms            the same for the full checkpoint
#   serving_switch_peak_rss_mib      peak RSS over the switches; peer: the
#                                    RSS once loaded (goal: ratio >= 0.8,
#                                    at most 1.25x)
#   serving_tiered_lookups_per_s_tcp  Zipf lookups on the tiered table; peer:
#                                    the same on the table in memory
#   serving_tiered_p99_ms_tcp        their p99s
#   serving_tiered_loaded_rss_mib    the replica's RSS once loaded; peer:
#                                    the replica holding it all in memory
#   serving_tiered_switch_peak_rss_mib  its peak RSS over the switches (the
#                                    increments and the full checkpoint,
#                                    which writes a new disk store); peer:
#                                    its RSS once loaded
# With --json, writes
#   {"results": [{"name", "value", "unit", "peer", "peer_value", "ratio"}]}
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
reps=1 seconds=10
bench_option() {
  case "$1" in
    --seconds=*) seconds=${1#*=} ;;
    --repetitions=*) reps=${1#*=} ;;
    *) return 1 ;;
  esac
}
bench_parse bench_serving "$@"
bench_require bench_serving redis-server redis-cli redis-benchmark python3
bench_tools serving_bench ps_serve bench_report
for b in bench/serving_bench serving/ps_serve bench/report/bench_report; do
  [ -x "$build_dir/$b" ] || { echo "bench_serving: could not build $b" >&2; exit 1; }
done
bench_scratch  # $work, $background

results="$work/results"
: >"$results"
for i in $(seq "$reps"); do
  echo "== run $i/$reps: ps_serve lookups (shm, tcp) for ${seconds}s each" >&2
  "$build_dir/bench/serving_bench" --dir="$work/serving" \
    --serve_bin="$build_dir/serving/ps_serve" --seconds="$seconds" \
    --poll_ms=5 --redis_load="$work/redis.resp" \
    --redis_keys="$work/redis.keys" | tee -a "$results" >&2

  for tier in memory tiered; do
    echo "== run $i/$reps: Zipf lookups, 10^7 keys, table $tier (tcp) for ${seconds}s" >&2
    fraction=0
    [ "$tier" = tiered ] && fraction=0.125
    "$build_dir/bench/serving_bench" --dir="$work/serving" \
      --serve_bin="$build_dir/serving/ps_serve" --seconds="$seconds" \
      --rows=10000000 --poll_ms=5 --transports=tcp --zipf=0.9 \
      --tier_fraction="$fraction" --label="$tier" |
      grep -v '^fresh\|^verify' | tee -a "$results" >&2
  done

  echo "== run $i/$reps: Redis MGET of the same 1,000 rows" >&2
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
  background+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
  redis-cli -p "$port" --pipe <"$work/redis.resp" >/dev/null
  n=$(( seconds * 3000 ))
  # CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",
  # "p95_latency_ms","p99_latency_ms","max_latency_ms"
  line=$(redis-benchmark -p "$port" -c 1 -P 1 -n "$n" --csv MGET \
           $(cat "$work/redis.keys") | tail -n 1)
  awk -F'","' '{ printf "redis_per_s %s /s\nredis_p50_ms %s ms\nredis_p99_ms %s ms\n",
                 $2, $5, $7 }' <<<"$line" | tee -a "$results" >&2
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
done

{
  cat "$results"
  echo "row serving_lookups_per_s_shm lookups/s lookups_per_s_shm redis_per_s higher Redis MGET/s (tcp, loopback)"
  echo "row serving_lookups_per_s_tcp lookups/s lookups_per_s_tcp redis_per_s higher Redis MGET/s (tcp, loopback)"
  echo "row serving_p50_ms_shm ms p50_ms_shm redis_p50_ms lower Redis p50"
  echo "row serving_p50_ms_tcp ms p50_ms_tcp redis_p50_ms lower Redis p50"
  echo "row serving_p99_ms_shm ms p99_ms_shm redis_p50_ms lower Redis p50"
  echo "row serving_p99_ms_tcp ms p99_ms_tcp redis_p50_ms lower Redis p50"
  echo "row serving_fresh_ms ms fresh_ms verify_ms lower ps_ckpt verify of the increment"
  echo "row serving_fresh_full_ms ms fresh_full_ms verify_full_ms lower ps_ckpt verify of the full checkpoint"
  echo "row serving_switch_peak_rss_mib MiB peak_rss_mib loaded_rss_mib lower RSS once the first checkpoint is served"
  echo "row serving_tiered_lookups_per_s_tcp lookups/s lookups_per_s_tcp_tiered lookups_per_s_tcp_memory higher the table in memory"
  echo "row serving_tiered_p99_ms_tcp ms p99_ms_tcp_tiered p99_ms_tcp_memory lower the table in memory"
  echo "row serving_tiered_loaded_rss_mib MiB loaded_rss_mib_tiered loaded_rss_mib_memory lower the table in memory"
  echo "row serving_tiered_switch_peak_rss_mib MiB peak_rss_mib_tiered loaded_rss_mib_tiered lower its RSS once loaded"
  echo "extra redis_p99_ms ms redis_p99_ms - - -"
} | bench_report ${json:+--json="$json"}
