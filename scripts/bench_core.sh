#!/usr/bin/env bash
# Measures the xfer core (bench/xfer_perf) side by side with its peers on this
# machine, in the same run, over 127.0.0.1:
#   shm figures  vs ucx_perftest over shared memory (UCX_TLS=$UCX_SHM_TLS,
#                default posix,self): ucp_put_bw, ucp_get, ucp_put_lat,
#                ucp_fadd (UCX 1.13 has no ucp_atomic_add; ucp_fadd is the
#                fetching add, a round trip like our FetchAdd64)
#   tcp bandwidth vs iperf3, one stream; tcp latency vs ucx_perftest
#                ucp_put_lat with UCX_TLS=tcp (ucx tcp bandwidth is shown too)
#   tcp atomics  FetchAdd64 and CompareSwap64 round trips vs our own tcp put
#                latency of the same run (tcp_put_lat_8B, the ping-pong
#                one-way time): the goal is an atomic within 1.5x of a put,
#                a ratio (put / atomic) of at least 0.67; FetchAdd64 also vs
#                ucx_perftest ucp_fadd with UCX_TLS=tcp
#   the same two atomics with idle CPUs polling (--cpu_wakeup_latency_us=0,
#                as root): *_idle_polling, against the put latency of that run
# and prints one table. Ratios are ours/peer for bandwidth and peer/ours for
# latency: above 1.0 means we are ahead.
#
# Usage: scripts/bench_core.sh [--json FILE] [--quick] [--build-dir=DIR] [--verbs-vm]
#   --json FILE  also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --quick      shorter runs (CI smoke test; the figures are noisier)
#   --build-dir=DIR  use xfer_perf from an existing build instead of building
#   --verbs-vm   also verbs put/get bandwidth at 64 KiB in a soft-RoCE guest
#                next to ib_write_bw / ib_read_bw (scripts/verbs_vm.sh --bench):
#                verbs_put_bw_64KiB, verbs_get_bw_64KiB
# UCX reports MB/s with MB = 2^20 bytes; this script converts to GB/s = 1e9 B/s.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
quick=0 verbs_vm=0
bench_option() {
  case "$1" in
    --quick) quick=1 ;;
    --verbs-vm) verbs_vm=1 ;;
    *) return 1 ;;
  esac
}
bench_parse bench_core "$@"
bench_require bench_core ucx_perftest iperf3 python3

bench_scratch

if [ -z "$build_dir" ]; then
  build_dir=$("$root/scripts/build.sh" | tail -n 1)
fi
bench_tools xfer_perf bench_report
perf="$build_dir/bench/xfer_perf"
[ -x "$perf" ] || { echo "bench_core: $perf was not built" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

if [ $quick = 1 ]; then
  perf_args=(--quick) bw_iters=2000 lat_iters=20000 iperf_seconds=2
else
  perf_args=() bw_iters=10000 lat_iters=200000 iperf_seconds=5
fi

# results: lines "name value unit"
results="$work/results"
: >"$results"

echo "== xfer_perf ${perf_args[*]}" >&2
GLOG_minloglevel=1 "$perf" "${perf_args[@]}" | tee "$work/perf.txt" >&2
grep '^RESULT ' "$work/perf.txt" | awk '{print "ours_" $2, $3, $4}' >>"$results"

# The tcp round trips again with idle CPUs polling (ContextOptions::
# cpu_wakeup_latency_us=0): an atomic to an otherwise idle target waits for
# its halted vCPU to wake, while the put ping-pong keeps both CPUs spinning.
if [ -w /dev/cpu_dma_latency ]; then
  echo "== xfer_perf tcp round trips, idle CPUs polling" >&2
  GLOG_minloglevel=1 "$perf" "${perf_args[@]}" --transports=tcp \
    --tests=put_lat,fetch_add_lat,compare_swap_lat --max_size=8 \
    --cpu_wakeup_latency_us=0 | tee "$work/perf_polling.txt" >&2
  grep '^RESULT ' "$work/perf_polling.txt" |
    awk '{print "polling_" $2, $3, $4}' >>"$results"
else
  echo "bench_core: /dev/cpu_dma_latency is not writable (not root?):" \
    "no rows with idle CPUs polling" >&2
fi

# ucx_run NAME TLS TEST ARGS...: one ucx_perftest server/client pair. Records
# the bandwidth (GB/s) for *_bw tests and ucp_get, else the median latency (us).
ucx_run() {
  local name=$1 tls=$2 test=$3
  shift 3
  local port out pid
  port=$(free_port)
  UCX_TLS=$tls ucx_perftest -p "$port" >"$work/ucx_server_$name.txt" 2>&1 &
  pid=$!
  background+=("$pid")
  out="$work/ucx_$name.txt"
  local ok=0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    if UCX_TLS=$tls timeout 300 ucx_perftest 127.0.0.1 -p "$port" -t "$test" \
        -f -v "$@" >"$out" 2>&1; then ok=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ $ok = 0 ]; then
    echo "bench_core: ucx_perftest $test (UCX_TLS=$tls) failed:" >&2
    tail -5 "$out" >&2
    return 0
  fi
  # Last line: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,...
  local line
  line=$(grep -E '^ *[0-9]+,' "$out" | tail -n 1 | tr -d ' ' || true)
  if [ -z "$line" ]; then
    echo "bench_core: no result line from ucx_perftest $test (UCX_TLS=$tls)" >&2
    return 0
  fi
  case "$name" in
    *_bw_*) echo "$line" | awk -F, -v n="$name" '{printf "%s %.4f GB/s\n", n, $6*1048576/1e9}' >>"$results" ;;
    *) echo "$line" | awk -F, -v n="$name" '{printf "%s %.4f us\n", n, $2}' >>"$results" ;;
  esac
  echo "== ucx_perftest -t $test $* (UCX_TLS=$tls): $line" >&2
}

shm_tls=${UCX_SHM_TLS:-posix,self}
ucx_run ucx_shm_put_bw_1MiB "$shm_tls" ucp_put_bw -s 1048576 -n "$bw_iters" -w 100
ucx_run ucx_shm_get_bw_1MiB "$shm_tls" ucp_get -s 1048576 -n "$bw_iters" -w 100
ucx_run ucx_shm_put_lat_8B "$shm_tls" ucp_put_lat -s 8 -n "$lat_iters" -w 1000
ucx_run ucx_shm_fadd_lat "$shm_tls" ucp_fadd -n "$lat_iters" -w 1000
ucx_run ucx_tcp_put_bw_1MiB tcp ucp_put_bw -s 1048576 -n $((bw_iters / 5)) -w 20
ucx_run ucx_tcp_get_bw_1MiB tcp ucp_get -s 1048576 -n $((bw_iters / 5)) -w 20
ucx_run ucx_tcp_put_lat_8B tcp ucp_put_lat -s 8 -n $((lat_iters / 10)) -w 100
ucx_run ucx_tcp_fadd_lat tcp ucp_fadd -n $((lat_iters / 10)) -w 100

# iperf3: one stream over loopback.
port=$(free_port)
iperf3 -s -1 -p "$port" >"$work/iperf_server.txt" 2>&1 &
pid=$!
background+=("$pid")
iperf_ok=0
for _ in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.3
  if iperf3 -c 127.0.0.1 -p "$port" -t "$iperf_seconds" -J >"$work/iperf.json" 2>&1; then
    iperf_ok=1; break
  fi
done
if [ $iperf_ok = 1 ]; then
  echo "iperf3_bw $(bench_report --json_number=end.sum_received.bits_per_second "$work/iperf.json") bits/s" >>"$results"
  echo "== iperf3 -c 127.0.0.1 -t $iperf_seconds: $(grep iperf3_bw "$results")" >&2
else
  echo "bench_core: iperf3 failed:" >&2
  tail -5 "$work/iperf.json" >&2
fi

if [ $verbs_vm = 1 ]; then
  "$root/scripts/verbs_vm.sh" --bench --build-dir="$build_dir" --results="$results" >&2 ||
    echo "bench_core: the verbs guest run failed (see above)" >&2
fi

# The figures (bench/report/report.h): ratio ours/peer for bandwidth
# ("higher"), peer/ours for latency ("lower").
{
  cat "$results"
  cat <<'ROWS'
row shm_put_bw_1MiB GB/s ours_shm_put_bw_1MiB ucx_shm_put_bw_1MiB higher ucx_perftest ucp_put_bw (shm)
row shm_get_bw_1MiB GB/s ours_shm_get_bw_1MiB ucx_shm_get_bw_1MiB higher ucx_perftest ucp_get (shm)
row shm_put_lat_8B us ours_shm_put_lat_8B ucx_shm_put_lat_8B lower ucx_perftest ucp_put_lat (shm)
row shm_fetch_add_lat us ours_shm_fetch_add_lat ucx_shm_fadd_lat lower ucx_perftest ucp_fadd (shm)
row tcp_put_bw_1MiB GB/s ours_tcp_put_bw_1MiB iperf3_bw*1.25e-10 higher iperf3 (1 stream)
row tcp_get_bw_1MiB GB/s ours_tcp_get_bw_1MiB iperf3_bw*1.25e-10 higher iperf3 (1 stream)
row tcp_put_lat_8B us ours_tcp_put_lat_8B ucx_tcp_put_lat_8B lower ucx_perftest ucp_put_lat (tcp)
row tcp_fetch_add_lat us ours_tcp_fetch_add_lat ours_tcp_put_lat_8B lower our tcp put latency (8 B)
row tcp_compare_swap_lat us ours_tcp_compare_swap_lat ours_tcp_put_lat_8B lower our tcp put latency (8 B)
row tcp_fetch_add_lat_vs_ucx us ours_tcp_fetch_add_lat ucx_tcp_fadd_lat lower ucx_perftest ucp_fadd (tcp)
row tcp_fetch_add_lat_idle_polling us polling_tcp_fetch_add_lat polling_tcp_put_lat_8B lower our tcp put latency (8 B, idle CPUs polling)
row tcp_compare_swap_lat_idle_polling us polling_tcp_compare_swap_lat polling_tcp_put_lat_8B lower our tcp put latency (8 B, idle CPUs polling)
ROWS
  if grep -q '^ours_verbs_put_bw_64KiB ' "$results"; then  # --verbs-vm
    echo "row verbs_put_bw_64KiB GB/s ours_verbs_put_bw_64KiB ib_write_bw_64KiB higher ib_write_bw (rxe guest)"
    echo "row verbs_get_bw_64KiB GB/s ours_verbs_get_bw_64KiB ib_read_bw_64KiB higher ib_read_bw (rxe guest)"
  fi
  # Shown for context, not part of --json.
  cat <<'ROWS'
extra tcp_put_bw_1MiB GB/s ours_tcp_put_bw_1MiB ucx_tcp_put_bw_1MiB higher ucx_perftest ucp_put_bw (tcp)
extra tcp_get_bw_1MiB GB/s ours_tcp_get_bw_1MiB ucx_tcp_get_bw_1MiB higher ucx_perftest ucp_get (tcp)
extra shm_compare_swap_lat us ours_shm_compare_swap_lat - - -
ROWS
} | bench_report ${json:+--json="$json"}
echo "ratio: ours/peer for bandwidth, peer/ours for latency; above 1.0 = we are ahead"
