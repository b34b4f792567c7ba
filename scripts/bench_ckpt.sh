#!/usr/bin/env bash
# Checkpoint throughput of a 1 GiB shard next to the disk's sequential write
# speed, measured in the same run on the same file system. Usage:
#   scripts/bench_ckpt.sh [--json FILE] [--build-dir=DIR] [--dir=SCRATCH]
#                         [--repetitions=N]
# Builds ckpt_bench (Release) if needed. Peer: dd if=/dev/zero bs=1M
# count=1024 conv=fdatasync into the scratch directory (its MB/s, 10^6
# bytes). ckpt_bench writes a full checkpoint of one 1 GiB shard (dim-64
# float rows; SST files, ingest, fsyncs, MANIFEST) and restores it after
# dropping its files from the page cache (block and entry checksums checked,
# rows compared bit for bit). N runs each (default 3); medians reported.
# With --json, writes
#   {"results": [{"name", "value", "unit", "peer", "peer_value", "ratio"}]}
# with names ckpt_write_1GiB and ckpt_restore_1GiB (ratio = ours / dd).
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
reps=3 scratch="${TMPDIR:-/tmp}/bench_ckpt.$$"
bench_option() {
  case "$1" in
    --dir=*) scratch=${1#*=} ;;
    --repetitions=*) reps=${1#*=} ;;
    *) return 1 ;;
  esac
}
bench_parse bench_ckpt 2,13 "$@"
[ -n "$build_dir" ] || build_dir="$root/build"
bench_tools ckpt_bench bench_report
for b in bench/ckpt_bench bench/report/bench_report; do
  [ -x "$build_dir/$b" ] || { echo "bench_ckpt: could not build $b" >&2; exit 1; }
done
bin="$build_dir/bench/ckpt_bench"

mkdir -p "$scratch"
results=$(mktemp)
trap 'rm -rf "$scratch" "$results"' EXIT
for i in $(seq "$reps"); do
  echo "== run $i/$reps: dd" >&2
  dd_line=$(dd if=/dev/zero of="$scratch/dd.out" bs=1M count=1024 \
              conv=fdatasync 2>&1 | tail -1)
  rm -f "$scratch/dd.out"
  echo "   $dd_line" >&2
  # dd prints "N bytes (...) copied, S s, R MB/s" on stderr: N / S in MB/s.
  awk '/bytes.*copied/ { for (i = 1; i < NF; i++) if ($(i + 1) == "s,") s = $i;
                          printf "dd %.6g MB/s\n", $1 / s / 1e6 }' <<<"$dd_line" >>"$results"
  echo "== run $i/$reps: ckpt_bench" >&2
  line=$("$bin" --dir="$scratch/ckpt" --bytes=1073741824 --dim=64)
  echo "   $line" >&2
  for field in write_mb_s restore_mb_s; do
    echo "$field $(bench_report --json_number=$field <<<"$line") MB/s" >>"$results"
  done
done

{
  cat "$results"
  echo "row ckpt_write_1GiB MB/s write_mb_s dd higher dd"
  echo "row ckpt_restore_1GiB MB/s restore_mb_s dd higher dd"
} | bench_report ${json:+--json="$json"}
