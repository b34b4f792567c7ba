#!/usr/bin/env bash
# The GPU code's tests and benchmark on a machine that has a GPU but none of
# this project's packages (a bare CUDA machine, such as the device tool's).
#
#   scripts/gpu_tests.sh pack [--build-dir=DIR] TARBALL
#     Here: builds the GPU tests (the ctest names below), the programs they
#     start, device_bench and bench_report, and packs them with their CTest
#     files and the shared libraries they need that a bare machine lacks
#     (gflags, glog, RocksDB, protobuf, ibverbs, ...; not glibc, libstdc++
#     or the CUDA driver) into TARBALL (xz).
#   scripts/gpu_tests.sh run TARBALL OUTDIR
#     There, from the repository root: unpacks the build where it was packed
#     (the test binaries and CTest files name ps_server and each other by
#     absolute path; a symbolic link puts the unpacked copy there), runs the
#     GPU tests with ctest and then scripts/bench_device.sh --json. Writes
#     OUTDIR/ctest.log, OUTDIR/bench_device.json and OUTDIR/bench_device.txt.
#     Exits 1 when a test fails or skips: ctest counts a skipped GoogleTest
#     as passed, and on a GPU machine none of these may skip.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
tests='device|cuda|ps_bsp_test|server_process_test'
programs=(ps_server ps_test_worker device_bench bench_report)

usage() { script_help; exit 2; }

pack() {
  local build_dir="$root/build" tarball
  case "${1:-}" in --build-dir=*) build_dir=${1#*=}; shift ;; esac
  [ $# = 1 ] || usage
  tarball=$(realpath -m "$1")
  build_dir=$("$root/scripts/build.sh" --build-dir="$build_dir" \
    --tests="-R $tests" $(printf -- '--target=%s ' "${programs[@]}") | tail -n 1)
  # The binaries of the selected tests, from the CTest files' commands.
  local bins
  bins=$(cd "$build_dir" && ctest -N -V -R "$tests" |
    sed -n 's/^[0-9]*: Test command: \([^ ]*\).*/\1/p' | sort -u |
    sed "s|^$build_dir/|./|")
  [ -n "$bins" ] || { echo "gpu_tests: ctest lists no GPU tests" >&2; exit 1; }
  bins+=$'\n'"$(cd "$build_dir" && for p in "${programs[@]}"; do
    find . -name "$p" -type f -perm -u+x | head -n 1; done)"
  stage=$(mktemp -d)  # global: the EXIT trap reads it
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/lib"
  # Libraries a bare machine lacks: everything ldd resolves, except the C
  # and C++ runtimes (the machine's own are newer) and the CUDA driver.
  echo "$bins" | while read -r b; do
    [ -n "$b" ] || continue
    (cd "$build_dir" && ldd "$b") | awk '/=> \//{print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda)\.so' |
    xargs -r cp -L -t "$stage/lib"
  echo "$build_dir" >"$stage/build_dir"
  (cd "$build_dir" &&
    { echo "$bins"; echo CMakeCache.txt; find . -name CTestTestfile.cmake; } |
    sed 's|^\./||' | sort -u |
    tar -cf "$stage/build.tar" --transform 's|^|build/|' -T -)
  XZ_OPT=-6T0 tar -cJf "$tarball" -C "$stage" build_dir lib build.tar
  echo "gpu_tests: packed $(echo "$bins" | grep -c .) binaries and" \
    "$(ls "$stage/lib" | wc -l) libraries into $tarball ($(du -h "$tarball" | cut -f1))"
}

run() {
  [ $# = 2 ] || usage
  local tarball out unpack build_dir rc=0
  tarball=$(realpath "$1") out=$(realpath -m "$2")
  mkdir -p "$out"
  unpack=$(mktemp -d)
  tar -xJf "$tarball" -C "$unpack"
  tar -xf "$unpack/build.tar" -C "$unpack"
  build_dir=$(cat "$unpack/build_dir")
  if [ ! -e "$build_dir" ]; then
    mkdir -p "$(dirname "$build_dir")"
    ln -s "$unpack/build" "$build_dir"
  fi
  export LD_LIBRARY_PATH="$unpack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi -L || true
  (cd "$build_dir" && ctest -V -j 4 --timeout 600 -R "$tests") >"$out/ctest.log" 2>&1 || rc=1
  grep -E '^[0-9]+/[0-9]+ Test|tests passed|SKIPPED \]|FAILED' "$out/ctest.log" || true
  # Cases that skip by design here: verbs cases (no RDMA device) and those
  # that check what happens without a usable GPU.
  if grep -E '\[  SKIPPED \] [A-Za-z]' "$out/ctest.log" |
       grep -vE '/verbs|listed below|WithoutADevice|UnusableDevice' | grep -q .; then
    echo "gpu_tests: a GPU test skipped on this machine" >&2
    rc=1
  fi
  "$root/scripts/bench_device.sh" --build-dir="$build_dir" \
    --json "$out/bench_device.json" >"$out/bench_device.txt" 2>&1 || rc=1
  cat "$out/bench_device.txt"
  return $rc
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
