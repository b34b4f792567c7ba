#!/usr/bin/env bash
# Configures and builds the project. Usage:
#   scripts/build.sh [--sanitize=address,undefined|thread] [--build-dir=DIR]
#                    [--type=Release|Debug|RelWithDebInfo] [--target=T ...]
#                    [--tests="CTEST SELECTION"]
#   --tests="-L concurrency -LE acceptance"  builds only the test binaries
#     ctest selects with these arguments (and, through their dependencies, the
#     programs they start, e.g. ps_server): what a sanitizer suite runs.
# Uses Ninja when it is installed (scripts/setup.sh installs it); a build
# folder configured earlier keeps its generator. Prints the build directory
# on its last line.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize="" build_dir="" type=Release targets=() tests=""
for arg in "$@"; do
  case "$arg" in
    --sanitize=*) sanitize=${arg#*=} ;;
    --build-dir=*) build_dir=${arg#*=} ;;
    --type=*) type=${arg#*=} ;;
    --target=*) targets+=(--target "${arg#*=}") ;;  # only these (default: all)
    --tests=*) tests=${arg#*=} ;;
    -h|--help) script_help; exit 0 ;;
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
# Sanitizer builds use clang when it is there (scripts/setup.sh installs it)
# and CC / CXX do not say otherwise: clang 14 compiles our instrumented test
# files about 40% faster than GCC 12 (the ASan+UBSan build: 221 s against
# 386 s on 2 cores), and its UBSan checks more (-fsanitize=enum). Release
# builds stay on GCC, which the benchmarks are measured with. A folder
# configured earlier keeps its compiler.
if [ -n "$sanitize" ] && [ ! -f "$build_dir/CMakeCache.txt" ] &&
   [ -z "${CXX:-}" ] && command -v clang++ >/dev/null && command -v clang >/dev/null; then
  extra+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi
# Ninja schedules both cores better than recursive make and has no per-
# directory make overhead; an existing build folder keeps its generator
# (CMake refuses to switch one).
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  extra+=(-G Ninja)
fi
mkdir -p "$build_dir"
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="$type" \
  -DPS_SANITIZE="$sanitize" "${extra[@]}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log" >&2; exit 1; }
grep -E '^-- ps:' "$build_dir/configure.log" >&2 || true
if [ -n "$tests" ]; then
  # ctest picks the tests (by name; before the build it cannot say their
  # commands), the CTestTestfiles say which executable each runs, and each
  # executable is the target of the same name. A test names the programs it
  # starts (ps_server, ...) with add_dependencies, so those come along.
  # shellcheck disable=SC2086  # $tests is a list of ctest arguments
  names=$(ctest --test-dir "$build_dir" -N --show-only=json-v1 $tests |
    python3 -c '
import json, os, re, sys
build = os.path.realpath(sys.argv[1])
wanted = {t["name"] for t in json.load(sys.stdin).get("tests", [])}
exe = {}
for d, _, files in os.walk(build):
    if "CTestTestfile.cmake" in files:
        for m in re.finditer(r"^add_test\(\[=\[(.*?)\]=\] \"([^\"]+)\"",
                             open(os.path.join(d, "CTestTestfile.cmake")).read(), re.M):
            exe[m.group(1)] = m.group(2)
names = set()
for name in wanted:
    path = exe.get(name)
    if path is None:
        sys.exit("build: no executable found for test " + name)
    if os.path.realpath(path).startswith(build + os.sep):
        names.add(os.path.basename(path))
print("\n".join(sorted(names)))' "$build_dir")
  [ -n "$names" ] || { echo "build: no tests match '$tests'" >&2; exit 1; }
  for n in $names; do targets+=(--target "$n"); done
  echo "build: $(echo "$names" | wc -l) test binaries for '$tests'" >&2
fi
cmake --build "$build_dir" -j "$jobs" "${targets[@]}" >&2
echo "$build_dir"
