#!/usr/bin/env bash
# Configures and builds the project. Usage:
#   scripts/build.sh [--sanitize=address,undefined|thread] [--build-dir=DIR]
#                    [--type=Release|Debug|RelWithDebInfo] [--target=T ...]
# Prints the build directory on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize="" build_dir="" type=Release targets=()
for arg in "$@"; do
  case "$arg" in
    --sanitize=*) sanitize=${arg#*=} ;;
    --build-dir=*) build_dir=${arg#*=} ;;
    --type=*) type=${arg#*=} ;;
    --target=*) targets+=(--target "${arg#*=}") ;;  # only these (default: all)
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "build: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if [ -z "$build_dir" ]; then
  build_dir="$root/build"
  [ -n "$sanitize" ] && build_dir="$root/build-${sanitize//,/-}"
fi
[ -n "$sanitize" ] && [ "$type" = Release ] && type=RelWithDebInfo
jobs=$(nproc)
# Sanitizer builds exist to run the tests: benchmarks and fuzzers stay out.
extra=()
[ -n "$sanitize" ] && extra=(-DPS_BUILD_BENCH=OFF -DPS_BUILD_FUZZ=OFF)
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$type" \
  -DPS_SANITIZE="$sanitize" "${extra[@]}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; exit 1; }
grep -E '^-- ps:' "$build_dir/configure.log" >&2 || true
cmake --build "$build_dir" -j "$jobs" "${targets[@]}" >&2
echo "$build_dir"
