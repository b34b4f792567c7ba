#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Usage:
#   scripts/test.sh                         release build, all tests, short fuzz run
#   scripts/test.sh --sanitize=address,undefined   the suite under ASan+UBSan
#   scripts/test.sh --sanitize=thread       the concurrency tests under TSan
#   scripts/test.sh --all                   all three of the above, one after another
#   scripts/test.sh --acceptance            the training acceptance runs (1M rows
#                                           of generated data per model; slow)
# Extra arguments after -- go to ctest (e.g. -- -R Endpoint).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize="" all=0 acceptance=0 ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize=*) sanitize=${1#*=} ;;
    --all) all=1 ;;
    --acceptance) acceptance=1 ;;
    --) shift; ctest_args=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "test: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

"$root/scripts/setup.sh"

run_suite() {  # $1: sanitizer list or empty
  local san=$1 build_dir label_args=() fuzz=0
  build_dir=$("$root/scripts/build.sh" ${san:+--sanitize=$san} | tail -n 1)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  # The 1M-row training acceptance runs (label acceptance) take minutes per
  # model on 2 cores: they run only when asked for (--acceptance).
  case "$san" in
    thread) label_args=(-L concurrency -LE acceptance) ;;
    "") fuzz=1 label_args=(-LE acceptance) ;;
    *) label_args=(-LE acceptance) ;;
  esac
  if [ $acceptance = 1 ]; then label_args=(-L acceptance) fuzz=0; fi
  echo "== tests${san:+ under $san} in $build_dir"
  (cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600 \
    "${label_args[@]}" "${ctest_args[@]}")
  if [ $fuzz = 1 ]; then
    "$root/scripts/fuzz.sh" --build-dir="$build_dir" --seconds=30
    run_verbs_vm "$build_dir"
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
