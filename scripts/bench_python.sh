#!/usr/bin/env bash
# The Python package against plain PyTorch: FM and DeepFM on one generated
# Criteo-format file, batch 1000, trained (a) in plain PyTorch
# (nn.EmbeddingBag(sparse=True), torch's Adagrad), (b) in PyTorch with the
# embeddings on 1 ps_server (ps.torch.Embedding), (c) by ps_worker; and (b)
# with 2 workers x 2 servers against 1 x 1 (samples/s, samples per CPU-second
# of the whole job), next to plain PyTorch run twice side by side against
# once (the machine's ceiling for that ratio). Medians of alternating
# rounds. Usage:
#   scripts/bench_python.sh [--rows=N] [--scale-rows=N] [--rounds=N] [--threads=N]
#                           [--json FILE] [--build-dir=DIR]
# The logic is bench/python/ctr_bench.py.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
opts=()
bench_option() {
  case "$1" in
    --rows=*|--scale-rows=*|--rounds=*|--threads=*) opts+=("$1") ;;
    *) return 1 ;;
  esac
}
bench_parse bench_python "$@"
bench_tools ps_python_native ps_server ps_worker ps_datagen
PYTHONPATH="$build_dir/python" PS_BUILD_DIR="$build_dir" \
  /usr/bin/python3 "$root/bench/python/ctr_bench.py" "${opts[@]}" \
  ${json:+--json "$json"}
