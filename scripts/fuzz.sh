#!/usr/bin/env bash
# Runs every libFuzzer target the build produced for a short time each.
#   scripts/fuzz.sh [--build-dir=DIR] [--seconds=N]
# Targets are built only when clang is present; without them this says so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build" seconds=30
for arg in "$@"; do
  case "$arg" in
    --build-dir=*) build_dir=${arg#*=} ;;
    --seconds=*) seconds=${arg#*=} ;;
    *) echo "fuzz: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
shopt -s nullglob
targets=("$build_dir"/fuzz/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets built (clang not found?); skipping the fuzz run"
  exit 0
fi
for t in "${targets[@]}"; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  corpus="$build_dir/fuzz-corpus/$name"
  mkdir -p "$corpus"
  echo "== fuzz: $name for ${seconds}s"
  "$t" -max_total_time="$seconds" -print_final_stats=1 "$corpus" \
    >"$build_dir/$name.log" 2>&1 || { tail -n 40 "$build_dir/$name.log"; exit 1; }
  grep -E 'stat::number_of_executed_units|Done ' "$build_dir/$name.log" | tail -n 2
done
