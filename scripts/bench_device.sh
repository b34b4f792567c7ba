#!/usr/bin/env bash
# Measures sparse applies to a table shard in GPU memory (issue 19:
# table/device_param_table.h, kernels/cuda/device_optimizers.h) next to its
# peers, all measured in the same run by bench/device_bench on device 0:
#   apply_sum_d<dim>   the atomicAdd apply kernel on a packet already in
#                      device memory (4M distinct rows of a 10M-row table),
#                      GB/s of table + gradient bytes touched (every table
#                      float read and written, every gradient and row index
#                      read), vs a device-to-device cudaMemcpy of 2 GiB
#                      (GB/s of bytes read + written); goal >= 0.5
#   apply_adam_d<dim>  the same for the stateful kernel (Adam: parameters
#                      and two state arrays read and written); same peer
#   e2e_sum_d<dim>     DeviceParamTable::Apply of the packet from pinned
#                      host memory (H2D copies + kernel + sync), GB/s of
#                      packet bytes (indices + gradients), vs a pinned
#                      host-to-device cudaMemcpy of the largest packet;
#                      goal >= 0.7
#   e2e_pageable_sum_d<dim>  the same Apply from pageable host memory (it
#                      memcpys the packet into pinned staging first: the
#                      copy a page-locked decode scratch would save,
#                      server/inboxes.h); same peer, no goal: the gap to
#                      e2e_sum is what page-locking would buy
#   e2e_ddecode_<fp32|fp16>_sum_d<dim>  DeviceParamTable::ApplyPacket over
#                      the same rows encoded as sparse packets (delta
#                      varints, 4 MiB each) from pageable host memory, as
#                      the server applies an inbox slot: the packet is
#                      copied to pinned memory, checksummed, uploaded,
#                      decoded and applied on the device. GB/s of packet
#                      bytes; same peer, no goal
#   e2e_hdecode_<fp32|fp16>_sum_d<dim>  the same packets decoded on the host
#                      and applied with Apply (the server's path before
#                      device decoding); same peer, for comparison
# for dim 16, 32, 64 and 128. Figures are medians of 7 timed runs after one
# untimed. Without a usable GPU (or in a build without CUDA) it prints
# "bench_device: skipped: <reason>" and, with --json, writes
# {"results": []}; it exits 0 then.
#
# Usage: scripts/bench_device.sh [--json FILE] [--quick] [--build-dir=DIR]
#   --json FILE      also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --quick          1M-row table, 256K-row packets, 3 runs (a smoke test)
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
bench_parse bench_device "$@"

skip() {
  echo "bench_device: skipped: $1"
  if [ -n "$json" ]; then echo '{"results": []}' >"$json"; fi
  exit 0
}

bench_scratch
bench_tools device_bench bench_report
[ -x "$build_dir/bench/report/bench_report" ] ||
  { echo "bench_device: could not build bench_report" >&2; exit 1; }
[ -x "$build_dir/bench/device_bench" ] ||
  skip "device_bench was not built (this build has no CUDA: nvcc not found)"

args=()
[ $quick = 1 ] && args=(--rows=1000000 --count=262144 --reps=3 --copy_bytes=268435456)
"$build_dir/bench/device_bench" "${args[@]}" >"$work/out.txt" || {
  cat "$work/out.txt" >&2
  echo "bench_device: device_bench failed" >&2
  exit 1
}
grep -v '^RESULT ' "$work/out.txt" | grep -v '^SKIPPED ' >&2 || true
if grep -q '^SKIPPED ' "$work/out.txt"; then
  skip "$(sed -n 's/^SKIPPED //p' "$work/out.txt" | head -n 1)"
fi

{
  # Samples: "name value unit".
  sed -n 's/^RESULT //p' "$work/out.txt"
  for dim in 16 32 64 128; do
    cat <<ROWS
row apply_sum_d$dim GB/s apply_sum_d$dim d2d higher device-to-device cudaMemcpy (read + write)
row apply_adam_d$dim GB/s apply_adam_d$dim d2d higher device-to-device cudaMemcpy (read + write)
row e2e_sum_d$dim GB/s e2e_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
row e2e_pageable_sum_d$dim GB/s e2e_pageable_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
row e2e_ddecode_fp32_sum_d$dim GB/s e2e_ddecode_fp32_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
row e2e_hdecode_fp32_sum_d$dim GB/s e2e_hdecode_fp32_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
row e2e_ddecode_fp16_sum_d$dim GB/s e2e_ddecode_fp16_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
row e2e_hdecode_fp16_sum_d$dim GB/s e2e_hdecode_fp16_sum_d$dim h2d_pinned higher pinned host-to-device cudaMemcpy
ROWS
  done
} | bench_report ${json:+--json="$json"}
echo "ratio: ours/peer; goals: apply >= 0.5, e2e >= 0.7"
