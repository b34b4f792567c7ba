#!/usr/bin/env bash
# Measures the KV cache hand-off of examples/kv_transfer (a prefill process
# sends its KV cache, layer by layer, to a decode process that holds half the
# heads: per layer WriteVs of one contiguous head range per K/V and token,
# 1 KiB each, 1024 to an operation, a WriteFence, a put-with-notify) over shm
# and tcp on 127.0.0.1, next to its peers measured in the same run:
#   shm hand-off GB/s  vs one single-threaded memcpy of the same bytes in one
#                      process (bench/memcpy_bw); goal ratio >= 0.8; and vs
#                      the same bytes copied in the hand-off's pattern in one
#                      process (1 KiB pieces every 2 KiB, a memcpy each), to
#                      tell the pattern's cost from the transport's
#   tcp hand-off GB/s  vs our own tcp put bandwidth (bench/xfer_perf put_bw,
#                      1 MiB puts, the size of one WriteV here); goal >= 0.8
#   either             vs ucx_perftest ucp_put_bw (1 MiB; UCX_TLS
#                      $UCX_SHM_TLS (default posix,self) or tcp)
#   first layer        time from prefill's start to layer 0 complete at
#                      decode, over the whole transfer: goal < 5% (the peer
#                      column holds the goal, 0.05; ratio = goal / ours)
# Rows *_gbps have decode check every byte of each layer while later layers
# are in flight (the example as it runs); *_nocheck_gbps the same transfer
# with --noverify (on two cores the check takes CPU from the transfer).
# Rows *_2lanes_* run prefill with --copy_threads=2 (two threads copy each
# WriteV, core/shm/copy_lanes.h), also against a memcpy on two threads.
# Shapes (fp16, 32 layers x 2 x tokens x 8 KV heads x 128; decode holds
# heads [0, 4), so half the cache moves):
#   2GiB    16384 tokens: a 2 GiB cache, 1 GiB moved
#   7B_32k  32768 tokens: a 7B-class GQA model's cache at 32k tokens, 4 GiB,
#           2 GiB moved
# Each run fills the cache first, sends it once untimed (the first transfer
# maps and faults in the pages) and 3 times timed; figures are medians of
# the 3 (memcpy: of 3 copies). GB/s = 1e9 bytes/s of decode's share.
#
# Usage: scripts/bench_kv.sh [--json FILE] [--quick] [--build-dir=DIR]
#   --json FILE      also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --quick          1/8 of the tokens (256 MiB and 512 MiB caches; CI smoke)
#   --build-dir=DIR  use the binaries of an existing build instead of building
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
quick=0
bench_option() {
  case "$1" in
    --quick) quick=1 ;;
    *) return 1 ;;
  esac
}
bench_parse bench_kv "$@"
bench_require bench_kv ucx_perftest python3

bench_scratch

bench_tools kv_transfer memcpy_bw xfer_perf bench_report
kv="$build_dir/examples/kv_transfer/kv_transfer"
for bin in "$kv" "$build_dir/bench/memcpy_bw" "$build_dir/bench/xfer_perf"; do
  [ -x "$bin" ] || { echo "bench_kv: $bin was not built" >&2; exit 1; }
done

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

if [ $quick = 1 ]; then
  shapes=("2GiB 2048" "7B_32k 4096") ucx_iters=2000 perf_args=(--quick)
else
  shapes=("2GiB 16384" "7B_32k 32768") ucx_iters=10000 perf_args=()
fi

# results: lines "name value unit" (bench/report/report.h)
results="$work/results"
: >"$results"

# kv_run NAME TRANSPORT TOKENS COPY_THREADS [DECODE FLAGS...]: one decode /
# prefill pair; records the decode's RESULT lines as NAME_<figure>.
kv_run() {
  local name=$1 transport=$2 tokens=$3 lanes=$4
  shift 4
  local handoff="$work/$name.handoff" shape
  shape=(--layers=32 --tokens="$tokens" --heads=8 --head_dim=128
         --transport="$transport" --timeout_ms=120000)
  GLOG_minloglevel=1 "$kv" --role=decode --peer_file="$handoff" "${shape[@]}" \
    --heads_begin=0 --heads_end=4 --warmup=1 --iterations=3 "$@" \
    >"$work/$name.decode" 2>&1 &
  local decode=$!
  background+=("$decode")
  local prefill_ok=1
  GLOG_minloglevel=1 "$kv" --role=prefill --peer_file="$handoff" "${shape[@]}" \
    --nofill_per_layer --segments_per_op=1024 --copy_threads="$lanes" >"$work/$name.prefill" 2>&1 ||
    prefill_ok=0
  local decode_ok=1
  wait "$decode" || decode_ok=0
  cat "$work/$name.prefill" "$work/$name.decode" | grep -v '^RESULT' >&2
  if [ $prefill_ok = 0 ] || [ $decode_ok = 0 ]; then
    echo "bench_kv: the $name hand-off failed (see above)" >&2
    return 0
  fi
  grep '^RESULT ' "$work/$name.decode" |
    awk -v n="$name" '{print n "_" substr($2, 4), $3, $4}' >>"$results"
}

# ucx_put_bw NAME TLS ITERS: ucx_perftest ucp_put_bw of 1 MiB messages.
ucx_put_bw() {
  local name=$1 tls=$2 iters=$3 port pid out="$work/ucx_$1.txt" ok=0 line
  port=$(free_port)
  UCX_TLS=$tls ucx_perftest -p "$port" >"$work/ucx_server_$name.txt" 2>&1 &
  pid=$!
  background+=("$pid")
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    if UCX_TLS=$tls timeout 300 ucx_perftest 127.0.0.1 -p "$port" \
        -t ucp_put_bw -s 1048576 -n "$iters" -w 20 -f -v >"$out" 2>&1; then
      ok=1; break
    fi
    kill -0 "$pid" 2>/dev/null || break
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  line=$(grep -E '^ *[0-9]+,' "$out" | tail -n 1 | tr -d ' ' || true)
  if [ $ok = 0 ] || [ -z "$line" ]; then
    echo "bench_kv: ucx_perftest ucp_put_bw (UCX_TLS=$tls) failed:" >&2
    tail -5 "$out" >&2
    return 0
  fi
  # overall_bw (column 6) is in MB/s with MB = 2^20 bytes.
  echo "$line" | awk -F, -v n="$name" '{printf "%s %.4f GB/s\n", n, $6*1048576/1e9}' >>"$results"
  echo "== ucx_perftest -t ucp_put_bw -s 1048576 (UCX_TLS=$tls): $line" >&2
}

for s in "${shapes[@]}"; do
  read -r shape tokens <<<"$s"
  moved=$((32 * 2 * tokens * 4 * 128 * 2))
  echo "== $shape: memcpy of $moved bytes" >&2
  "$build_dir/bench/memcpy_bw" --bytes="$moved" --reps=3 | tee "$work/memcpy_$shape" >&2
  grep '^RESULT ' "$work/memcpy_$shape" |
    awk -v n="$shape" '{print "memcpy_" n, $3, $4}' >>"$results"
  echo "== $shape: memcpy of $moved bytes on 2 threads" >&2
  "$build_dir/bench/memcpy_bw" --bytes="$moved" --reps=3 --threads=2 |
    tee "$work/memcpy2_$shape" >&2
  grep '^RESULT ' "$work/memcpy2_$shape" |
    awk -v n="$shape" '{print "memcpy2_" n, $3, $4}' >>"$results"
  echo "== $shape: the same bytes in 1 KiB pieces every 2 KiB" >&2
  "$build_dir/bench/memcpy_bw" --bytes="$moved" --reps=3 --piece_bytes=1024 \
    --source_stride=2048 | tee "$work/scatter_$shape" >&2
  grep '^RESULT ' "$work/scatter_$shape" |
    awk -v n="$shape" '{print "scatter_memcpy_" n, $3, $4}' >>"$results"
  for transport in shm tcp; do
    echo "== $shape over $transport" >&2
    kv_run "kv_${shape}_$transport" "$transport" "$tokens" 1
    echo "== $shape over $transport, decode not checking" >&2
    kv_run "kv_${shape}_${transport}_nocheck" "$transport" "$tokens" 1 \
      --noverify
  done
  echo "== $shape over shm, 2 copy lanes" >&2
  kv_run "kv_${shape}_shm_2lanes" shm "$tokens" 2
  echo "== $shape over shm, 2 copy lanes, decode not checking" >&2
  kv_run "kv_${shape}_shm_nocheck_2lanes" shm "$tokens" 2 --noverify
done

echo "== xfer_perf --transports=tcp --tests=put_bw ${perf_args[*]}" >&2
GLOG_minloglevel=1 "$build_dir/bench/xfer_perf" --transports=tcp --tests=put_bw \
  --min_size=1048576 --max_size=16777216 --size_step=16 "${perf_args[@]}" |
  tee "$work/perf.txt" >&2
# The table's rows: "tcp put_bw 16MiB median min max GB/s".
awk '$1 == "tcp" && $2 == "put_bw" {print "ours_tcp_put_bw_" $3, $4, $7}' \
  "$work/perf.txt" >>"$results"

ucx_put_bw ucx_shm_put_bw_1MiB "${UCX_SHM_TLS:-posix,self}" "$ucx_iters"
ucx_put_bw ucx_tcp_put_bw_1MiB tcp $((ucx_iters / 5))

{
  cat "$results"
  echo "goal_first_layer_fraction 0.05"
  for s in "${shapes[@]}"; do
    read -r shape _ <<<"$s"
    k="kv_${shape}"
    cat <<ROWS
row ${k}_shm_gbps GB/s ${k}_shm_gbps memcpy_${shape} higher memcpy (1 thread, same bytes)
row ${k}_shm_nocheck_gbps GB/s ${k}_shm_nocheck_gbps memcpy_${shape} higher memcpy (1 thread, same bytes)
row ${k}_shm_2lanes_gbps GB/s ${k}_shm_2lanes_gbps memcpy_${shape} higher memcpy (1 thread, same bytes)
row ${k}_shm_nocheck_2lanes_gbps GB/s ${k}_shm_nocheck_2lanes_gbps memcpy_${shape} higher memcpy (1 thread, same bytes)
row ${k}_shm_nocheck_2lanes_vs_2threads_gbps GB/s ${k}_shm_nocheck_2lanes_gbps memcpy2_${shape} higher memcpy (2 threads, same bytes)
row ${k}_shm_vs_pattern_gbps GB/s ${k}_shm_gbps scatter_memcpy_${shape} higher memcpy in 1 KiB pieces (the hand-off's pattern, 1 process)
row ${k}_shm_vs_ucx_gbps GB/s ${k}_shm_gbps ucx_shm_put_bw_1MiB higher ucx_perftest ucp_put_bw 1 MiB (shm)
row ${k}_tcp_gbps GB/s ${k}_tcp_gbps ours_tcp_put_bw_1MiB higher our tcp put bandwidth (xfer_perf, 1 MiB)
row ${k}_tcp_nocheck_gbps GB/s ${k}_tcp_nocheck_gbps ours_tcp_put_bw_1MiB higher our tcp put bandwidth (xfer_perf, 1 MiB)
row ${k}_tcp_vs_ucx_gbps GB/s ${k}_tcp_gbps ucx_tcp_put_bw_1MiB higher ucx_perftest ucp_put_bw 1 MiB (tcp)
row ${k}_shm_first_layer_ms ms ${k}_shm_first_layer_ms ${k}_shm_all_layers_ms - whole transfer (ms)
row ${k}_tcp_first_layer_ms ms ${k}_tcp_first_layer_ms ${k}_tcp_all_layers_ms - whole transfer (ms)
row ${k}_shm_first_layer_fraction fraction ${k}_shm_first_layer_fraction goal_first_layer_fraction lower goal: under 5% of the transfer
row ${k}_tcp_first_layer_fraction fraction ${k}_tcp_first_layer_fraction goal_first_layer_fraction lower goal: under 5% of the transfer
ROWS
  done
  # Shown for context, not part of --json.
  echo "extra tcp_put_bw_1MiB GB/s ours_tcp_put_bw_1MiB ucx_tcp_put_bw_1MiB higher ucx_perftest ucp_put_bw 1 MiB (tcp)"
  echo "extra tcp_put_bw_16MiB GB/s ours_tcp_put_bw_16MiB ucx_tcp_put_bw_1MiB higher ucx_perftest ucp_put_bw 1 MiB (tcp)"
} | bench_report ${json:+--json="$json"}
echo "ratio: ours/peer for GB/s, goal/ours for the first-layer fraction; above 1.0 = goal met or ahead"
