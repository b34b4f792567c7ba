#!/usr/bin/env bash
# Runs the kernel benchmarks and prints their headline figures next to their
# references. Usage:
#   scripts/bench_kernels.sh [--json FILE] [--build-dir=DIR] [--repetitions=N]
# Builds detect_bench, codec_bench and accumulate_bench (Release) if needed,
# runs each N times (default 5) and reports medians. With --json, writes
#   {"results": [{"name", "value", "unit", "peer", "peer_value", "ratio"}]}
# A figure whose benchmark is missing is printed as such and written as null.
# Rates are per CPU second (Google Benchmark's default), except the
# decode+accumulate figures, which accumulate_bench measures by the wall clock.
# decode_accumulate_1t is the atomic path (what each of several apply threads
# sharing a table runs), decode_accumulate_1t_exclusive the single-owner one
# (what a server with one apply thread per table runs).
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
reps=5
bench_option() { case "$1" in --repetitions=*) reps=${1#*=} ;; *) return 1 ;; esac; }
bench_parse bench_kernels "$@"
[ -n "$build_dir" ] || build_dir="$root/build"
bench_tools detect_bench codec_bench accumulate_bench bench_report
[ -x "$build_dir/bench/report/bench_report" ] ||
  { echo "bench_kernels: could not build bench_report" >&2; exit 1; }

out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
run() {  # $1: binary name; $2: benchmark filter; $3...: more flags
  local bin="$build_dir/bench/$1"
  if [ ! -x "$bin" ]; then
    echo "bench_kernels: $1 is not built; its figures are null" >&2
    return 0
  fi
  echo "== $1" >&2
  "$bin" --benchmark_filter="$2" --benchmark_repetitions="$reps" "${@:3}" \
    --benchmark_report_aggregates_only=true --benchmark_format=json \
    --benchmark_out="$out_dir/$1.json" --benchmark_out_format=json >/dev/null ||
    echo "bench_kernels: $1 failed" >&2
  # Its medians as samples RUN_NAME:FIELD VALUE.
  bench_report --gbench="$out_dir/$1.json" >>"$out_dir/samples" ||
    echo "bench_kernels: no report from $1" >&2
}
: >"$out_dir/samples"
# Detection and its read reference take turns (random interleaving), so a
# neighbour's burst on this shared machine hits both alike.
run detect_bench 'BM_ReadBandwidth_64MiB|BM_DetectThreshold_64MiB(_Density|_Values)?(/|$)|BM_TopK' \
  --benchmark_enable_random_interleaving=true
run codec_bench 'BM_Encode/1|BM_Decode/1'
run accumulate_bench 'BM_DecodeAccumulate|BM_Decode$'

# The figures (bench/report/report.h). Rates of Google Benchmark are per
# CPU second; decode+accumulate counts its own wall-clock rate.
{
  cat "$out_dir/samples"
  cat <<'ROWS'
row detect_threshold_64MiB GB/s BM_DetectThreshold_64MiB:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
row detect_threshold_64MiB_10pct GB/s BM_DetectThreshold_64MiB_Density/pct:10:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
row topk_10M ms BM_TopK/10000000:cpu_ms - - -
row wire_bytes_per_nnz_fp16_1pct bytes BM_Encode/1:wire_bytes_per_nnz 6.0 lower uint32+fp16 COO
row decode_accumulate_1t "M nnz/s" BM_DecodeAccumulate/threads:1:items_per_second*1e-6 - - -
row decode_accumulate_1t_exclusive "M nnz/s" BM_DecodeAccumulateExclusive:items_per_second*1e-6 - - -
row decode_accumulate_2t "M nnz/s" BM_DecodeAccumulate/threads:2:items_per_second*1e-6 - - -
extra detect_threshold_64MiB_1pct_kept fraction BM_DetectThreshold_64MiB:kept_fraction - - -
extra detect_threshold_64MiB_5pct GB/s BM_DetectThreshold_64MiB_Density/pct:5:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
extra detect_threshold_64MiB_10pct_kept fraction BM_DetectThreshold_64MiB_Density/pct:10:kept_fraction - - -
extra detect_values_64MiB_1pct GB/s BM_DetectThreshold_64MiB_Values/pct:1:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
extra detect_values_64MiB_10pct GB/s BM_DetectThreshold_64MiB_Values/pct:10:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
extra read_prefetched_64MiB GB/s BM_ReadBandwidth_64MiB_Prefetch:bytes_per_second*1e-9 BM_ReadBandwidth_64MiB:bytes_per_second*1e-9 higher read bandwidth
extra decode_1pct_fp16 "M nnz/s" BM_Decode:items_per_second*1e-6 - - -
extra topk_1M ms BM_TopK/1000000:cpu_ms - - -
extra encode_fp16_1pct "M nnz/s" BM_Encode/1:items_per_second*1e-6 - - -
extra decode_fp16_1pct "M nnz/s" BM_Decode/1:items_per_second*1e-6 - - -
ROWS
} | bench_report ${json:+--json="$json"}
