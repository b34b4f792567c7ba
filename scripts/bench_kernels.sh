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
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build" json="" reps=5
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$2; shift ;;
    --json=*) json=${1#*=} ;;
    --build-dir=*) build_dir=${1#*=} ;;
    --repetitions=*) reps=${1#*=} ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "bench_kernels: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
command -v python3 >/dev/null || { echo "bench_kernels: needs python3" >&2; exit 1; }

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
jobs=$(( $(nproc) < 2 ? $(nproc) : 2 ))
for t in detect_bench codec_bench accumulate_bench; do
  cmake --build "$build_dir" -j "$jobs" --target "$t" >/dev/null 2>&1 ||
    echo "bench_kernels: could not build $t" >&2
done

out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
run() {  # $1: binary name; $2: benchmark filter
  local bin="$build_dir/bench/$1"
  if [ ! -x "$bin" ]; then
    echo "bench_kernels: $1 is not built; its figures are null" >&2
    return 0
  fi
  echo "== $1" >&2
  "$bin" --benchmark_filter="$2" --benchmark_repetitions="$reps" \
    --benchmark_report_aggregates_only=true --benchmark_format=json \
    --benchmark_out="$out_dir/$1.json" --benchmark_out_format=json >/dev/null ||
    echo "bench_kernels: $1 failed" >&2
}
run detect_bench 'BM_ReadBandwidth_64MiB|BM_DetectThreshold_64MiB$|BM_TopK'
run codec_bench 'BM_Encode/1|BM_Decode/1'
run accumulate_bench 'BM_DecodeAccumulate/threads'

python3 - "$out_dir" "$json" <<'PY'
import json, os, sys
out_dir, json_path = sys.argv[1], sys.argv[2]

def medians(binary):
    path = os.path.join(out_dir, binary + ".json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    return {b["run_name"]: b for b in data.get("benchmarks", [])
            if b.get("aggregate_name") == "median"}

detect, codec, accum = medians("detect_bench"), medians("codec_bench"), medians("accumulate_bench")

def get(table, name, field, scale=1.0):
    b = table.get(name)
    if b is None or field not in b:
        return None
    return b[field] * scale

def ms(table, name):
    b = table.get(name)
    if b is None:
        return None
    unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
    return b["cpu_time"] * unit

def accum_rate(threads):
    for name, b in accum.items():
        if name.startswith("BM_DecodeAccumulate/") and f"threads:{threads}" in name.split("/"):
            return b.get("items_per_second", 0) / 1e6
    return None

read_bw = get(detect, "BM_ReadBandwidth_64MiB", "bytes_per_second", 1e-9)
detect_bw = get(detect, "BM_DetectThreshold_64MiB", "bytes_per_second", 1e-9)
wire = get(codec, "BM_Encode/1", "wire_bytes_per_nnz")
results = [
    dict(name="detect_threshold_64MiB", value=detect_bw, unit="GB/s",
         peer="read bandwidth", peer_value=read_bw,
         ratio=detect_bw / read_bw if detect_bw and read_bw else None),
    dict(name="topk_10M", value=ms(detect, "BM_TopK/10000000"), unit="ms",
         peer=None, peer_value=None, ratio=None),
    dict(name="wire_bytes_per_nnz_fp16_1pct", value=wire, unit="bytes",
         peer="uint32+fp16 COO", peer_value=6.0,
         ratio=6.0 / wire if wire else None),
    dict(name="decode_accumulate_1t", value=accum_rate(1), unit="M nnz/s",
         peer=None, peer_value=None, ratio=None),
    dict(name="decode_accumulate_2t", value=accum_rate(2), unit="M nnz/s",
         peer=None, peer_value=None, ratio=None),
]
extra = [
    ("topk_1M", ms(detect, "BM_TopK/1000000"), "ms"),
    ("encode_fp16_1pct", get(codec, "BM_Encode/1", "items_per_second", 1e-6), "M nnz/s"),
    ("decode_fp16_1pct", get(codec, "BM_Decode/1", "items_per_second", 1e-6), "M nnz/s"),
]

def fmt(v, digits=3):
    return "null" if v is None else f"{v:.{digits}g}"

print(f"{'figure':32} {'value':>10} {'unit':8} {'peer':18} {'peer value':>10} {'ratio':>7}")
for r in results:
    print(f"{r['name']:32} {fmt(r['value']):>10} {r['unit']:8} {str(r['peer'] or '-'):18} "
          f"{fmt(r['peer_value']):>10} {fmt(r['ratio']):>7}")
for name, v, unit in extra:
    print(f"{name:32} {fmt(v):>10} {unit:8}")
if json_path:
    with open(json_path, "w") as f:
        json.dump({"results": results}, f, indent=2)
        f.write("\n")
    print(f"wrote {json_path}")
PY
