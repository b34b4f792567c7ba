#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Usage:
#   scripts/test.sh                         release build, all tests, short fuzz run
#   scripts/test.sh --sanitize=address,undefined   the suite under ASan+UBSan
#   scripts/test.sh --sanitize=thread       the concurrency tests under TSan
#   scripts/test.sh --all                   all three of the above, one after another
#   scripts/test.sh --acceptance            the training acceptance runs (1M rows
#                                           of generated data per model; slow)
# Extra arguments after -- go to ctest (e.g. -- -R Endpoint).
# Each stage (setup, then build / tests / fuzz / guest per suite) prints its
# wall and CPU time (user+sys of everything it ran) as it ends; a table of
# all stages and the total closes the run, also when a stage fails.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize="" all=0 acceptance=0 ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize=*) sanitize=${1#*=} ;;
    --all) all=1 ;;
    --acceptance) acceptance=1 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

# Stage timing: wall from date, CPU from this shell's cutime + cstime in
# /proc (user+sys of every finished child process and their descendants;
# $$ is this shell also inside $(...)).
stage_rows=() stage_name="" stage_wall0=0 stage_cpu0=0 run_wall0=$(date +%s.%N)
clk_tck=$(getconf CLK_TCK)
child_cpu() {  # user+sys seconds of finished children, e.g. 12.34
  awk -v hz="$clk_tck" '{ printf "%.2f", ($16 + $17) / hz }' "/proc/$$/stat"
}
stage_begin() {  # $1: stage name, e.g. "asan build"
  stage_name=$1 stage_wall0=$(date +%s.%N) stage_cpu0=$(child_cpu)
}
stage_end() {
  local wall cpu
  wall=$(awk -v a="$stage_wall0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  cpu=$(awk -v a="$stage_cpu0" -v b="$(child_cpu)" 'BEGIN { printf "%.0f", b - a }')
  stage_rows+=("$(printf '%-22s %6s s wall %7s s cpu' "$stage_name" "$wall" "$cpu")")
  echo "== time: $stage_name ${wall} s wall, ${cpu} s cpu"
  stage_name=""
}
print_times() {
  local rc=$?
  [ -n "$stage_name" ] && stage_end && stage_rows[-1]+="  (failed)"
  echo "== stage times"
  local row
  for row in "${stage_rows[@]}"; do echo "   $row"; done
  printf '   %-22s %6.0f s wall %7.0f s cpu\n' total \
    "$(awk -v a="$run_wall0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" "$(child_cpu)"
  return $rc
}
trap print_times EXIT

stage_begin setup
"$root/scripts/setup.sh"
stage_end

run_suite() {  # $1: sanitizer list or empty
  local san=$1 build_dir label_args=() fuzz=0 suite=${1:-release} build_args=()
  [ "$san" = address,undefined ] && suite=asan
  [ "$san" = thread ] && suite=tsan
  # intercept_send=0: ASan checks a send*() buffer after the call returned
  # (google/sanitizers#1498). A test that owns and reads a region in one
  # process frees the region's memory as soon as its get completed, and the
  # serving thread's late check then reports a use-after-free that never
  # happened (the kernel had copied the bytes before the reply arrived).
  # Our own reads of those buffers stay checked.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:intercept_send=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # tests/tsan.supp: what TSan cannot judge in RocksDB, which is not built
  # with it (the file says why).
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp}
  # The 1M-row training acceptance runs (label acceptance) take minutes per
  # model on 2 cores: they run only when asked for (--acceptance).
  # The deployment checks (labels deploy, multihost, slurm) and the metrics
  # scraped by a real Prometheus (label prometheus) test manifests, scrapers,
  # namespaces and schedulers around the programs, and the README's code
  # blocks (label readme) the README, not the programs' memory:
  # the release suite runs them once. So does the Python package's pytest
  # suite (label python): sanitizer builds leave the extension out, since an
  # instrumented module needs the sanitizer runtime preloaded into the
  # interpreter (python/CMakeLists.txt).
  # The checks of the shipped configs' AUC (label quality) judge numbers no
  # sanitizer changes: the release suite runs them.
  case "$san" in
    thread) label_args=(-L concurrency -LE 'acceptance|deploy|multihost|slurm|prometheus') ;;
    "") fuzz=1 label_args=(-LE acceptance) ;;
    *) label_args=(-LE 'acceptance|deploy|multihost|slurm|prometheus|readme|quality') ;;
  esac
  if [ $acceptance = 1 ]; then label_args=(-L acceptance) fuzz=0; fi
  # Sanitizer suites build only the test binaries they run (and the programs
  # those start); the release suite builds everything (benchmarks, fuzzers,
  # tools), so that all of it keeps compiling.
  [ -n "$san" ] && build_args=(--tests="${label_args[*]}")
  stage_begin "$suite build"
  build_dir=$("$root/scripts/build.sh" ${san:+--sanitize=$san} "${build_args[@]}" | tail -n 1)
  stage_end
  echo "== tests${san:+ under $san} in $build_dir"
  stage_begin "$suite tests"
  (cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600 \
    "${label_args[@]}" "${ctest_args[@]}")
  stage_end
  if [ $fuzz = 1 ]; then
    stage_begin "$suite fuzz"
    "$root/scripts/fuzz.sh" --build-dir="$build_dir" --seconds=30
    stage_end
    stage_begin "$suite verbs guest"
    run_verbs_vm "$build_dir"
    stage_end
  fi
}

# The verbs transport's suites need an RDMA device: they run in a QEMU guest
# with soft-RoCE (scripts/verbs_vm.sh) when QEMU is there or can be installed.
# XFER_VERBS_VM=0 skips them.
run_verbs_vm() {  # $1: the release build directory
  local rc=0
  if [ "${XFER_VERBS_VM:-1}" = 0 ]; then
    echo "== verbs tests SKIPPED (XFER_VERBS_VM=0)"; return 0
  fi
  local tests
  tests=$("$1/tests/core/core_xfer_ops_test" --gtest_list_tests 2>/dev/null || true)
  if [[ $tests != *verbs* ]]; then
    echo "== verbs tests SKIPPED: built without libibverbs"; return 0
  fi
  if ! "$root/scripts/verbs_vm.sh" --check; then
    echo "== verbs tests SKIPPED: no qemu-system-x86_64, and it cannot be installed here (needs root and apt-get)"
    return 0
  fi
  echo "== verbs tests in a soft-RoCE guest (scripts/verbs_vm.sh)"
  "$root/scripts/verbs_vm.sh" --ci --build-dir="$1" || rc=$?
  if [ $rc = 125 ]; then
    echo "== verbs tests SKIPPED: the guest could not start (scripts/rxe_vm.sh exit 125; see above)"
    return 0
  fi
  return $rc
}

if [ $all = 1 ]; then
  run_suite ""
  run_suite address,undefined
  run_suite thread
else
  run_suite "$sanitize"
fi
