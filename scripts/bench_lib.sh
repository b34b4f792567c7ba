# Sourced by scripts/bench_*.sh: their shared command line and tools. Sets
# $root, the source tree.
#
# bench_parse NAME "$@"
#   handles --json FILE, --json=FILE, --build-dir=DIR and -h/--help (prints
#   the script's opening comment, its rows and usage: all of it, so that it
#   cannot fall behind the header as line numbers did); any other argument
#   goes to the script's bench_option function (return 1: not an option of
#   its own). Sets $json and $build_dir ("" unless given).
# bench_tools TARGET...
#   with no --build-dir, builds TARGETs with scripts/build.sh into build/;
#   else brings them up to date in that build (configured if new). Sets
#   $build_dir.
# bench_report [ARGS...]
#   runs bench_report (bench/report/): the table and the --json file of
#   every bench script (input format in bench/report/report.h).
# bench_require NAME TOOL...
#   exits 1, naming the first TOOL that is not installed.
# bench_scratch
#   sets $work, a temporary folder, and $background, an array the script
#   adds the pids of its background processes to: at exit (or on INT/TERM)
#   they are killed and the folder removed.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/help_lib.sh"

bench_parse() {
  local name=$1
  shift
  json="" build_dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --json) json=$2; shift ;;
      --json=*) json=${1#*=} ;;
      --build-dir=*) build_dir=${1#*=} ;;
      -h|--help) script_help; exit 0 ;;
      *) bench_option "$1" ||
           { echo "$name: unknown argument '$1'" >&2; exit 2; } ;;
    esac
    shift
  done
}

bench_tools() {
  local t targets=()
  if [ -z "$build_dir" ]; then
    for t in "$@"; do targets+=(--target="$t"); done
    build_dir=$("$root/scripts/build.sh" "${targets[@]}" | tail -n 1)
    return
  fi
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  local jobs=$(( $(nproc) < 2 ? $(nproc) : 2 ))
  for t in "$@"; do
    cmake --build "$build_dir" -j "$jobs" --target "$t" >/dev/null 2>&1 ||
      echo "bench: could not build $t" >&2
  done
}

bench_report() {
  "$build_dir/bench/report/bench_report" "$@"
}

bench_require() {
  local name=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null ||
      { echo "$name: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
  done
}

bench_scratch() {
  work=$(mktemp -d)
  background=()
  trap bench_cleanup EXIT INT TERM
}

bench_cleanup() {
  local pid
  for pid in "${background[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${background[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
