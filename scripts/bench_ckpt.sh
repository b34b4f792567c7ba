#!/usr/bin/env bash
# Checkpoint throughput of a 1 GiB shard next to dd on the same file system,
# measured in the same run. Usage:
#   scripts/bench_ckpt.sh [--json FILE] [--build-dir=DIR] [--dir=SCRATCH]
#                         [--repetitions=N]
# Builds ckpt_bench (Release) if needed. Each of N runs (default 3; medians
# reported):
#  - write: dd if=/dev/zero bs=1M count=1024 conv=fdatasync into the scratch
#    directory, then ckpt_bench --phase=write (a full checkpoint of one 1 GiB
#    shard of dim-64 float rows: SST files, ingest, fsyncs, MANIFEST).
#  - restore, cold: the checkpoint's SST files dropped from the page cache
#    (dd iflag=nocache count=0, posix_fadvise DONTNEED: the call ckpt_bench
#    makes too), dd reads them (bs=1M, of=/dev/null); dropped again,
#    ckpt_bench --phase=restore --cache=cold restores them (block and entry
#    checksums checked, rows compared bit for bit).
#  - restore, hot: the same with the files in the page cache (ckpt_bench
#    --cache=hot reads them first; dd then reads them hot too).
#  - export: ckpt_bench --phase=write leaves a full checkpoint of a
#    10M-row, dim-16 table (640 MB of rows); dd copies its SST files into
#    one file (bs=1M, appended, the last with conv=fdatasync), and
#    `ps_ckpt export` writes the table as .npy (reads the same files,
#    writes the rows, fsyncs); which goes first alternates from run to run. Both read the files from the
#    page cache (just written).
# MB/s are 10^6 bytes per second: of row data for ckpt_bench and ps_ckpt
# export, of the SST files (about 5% more: keys, block trailers, index)
# for dd.
# With --json, writes
#   {"results": [{"name", "value", "unit", "peer", "peer_value", "ratio"}]}
# with names ckpt_write_1GiB, ckpt_restore_1GiB (cold),
# ckpt_restore_1GiB_hot and ckpt_export_10M_dim16 (ratio = ours / dd).
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
bench_parse bench_ckpt "$@"
[ -n "$build_dir" ] || build_dir="$root/build"
bench_tools ckpt_bench bench_report ps_ckpt
for b in bench/ckpt_bench bench/report/bench_report checkpoint/ps_ckpt; do
  [ -x "$build_dir/$b" ] || { echo "bench_ckpt: could not build $b" >&2; exit 1; }
done
bin="$build_dir/bench/ckpt_bench"

mkdir -p "$scratch"
results=$(mktemp)
trap 'rm -rf "$scratch" "$results"' EXIT

# dd's "N bytes (...) copied, S s, R MB/s" lines (stdin) as one sample
# "NAME MB/s": the bytes over the seconds, summed.
dd_sample() {
  awk -v name="$1" '/bytes.*copied/ {
      for (i = 1; i < NF; i++) if ($(i + 1) == "s,") s += $i; b += $1 }
    END { if (s > 0) printf "%s %.6g MB/s\n", name, b / s / 1e6 }'
}
# dd_read NAME cold|hot: dd reads the checkpoint's SST files.
dd_read() {
  local f files=("$scratch"/ckpt/ckpt-*/shard-0/*.sst)
  if [ "$2" = cold ]; then
    for f in "${files[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
  fi
  for f in "${files[@]}"; do dd if="$f" of=/dev/null bs=1M 2>&1; done |
    dd_sample "$1" | tee -a "$results" >&2
}

# dd copies the checkpoint's SST files one after another into one file
# (the last copy fdatasyncs it); ps_ckpt exports them. (Not cat | dd: the
# pipe, not the disk, bounds that at a third of the speed here.)
dd_copy() {
  local f files=("$scratch"/ckpt/ckpt-*/shard-0/*.sst) sync=""
  for f in "${files[@]}"; do
    [ "$f" = "${files[-1]}" ] && sync=,fdatasync
    dd if="$f" of="$scratch/dd.out" bs=1M oflag=append conv=notrunc$sync 2>&1
  done | dd_sample dd_copy | tee -a "$results" >&2
  rm -f "$scratch/dd.out"
}
export_rows() {
  local out
  out=$("$build_dir/checkpoint/ps_ckpt" export --dir="$scratch/ckpt" \
          --out="$scratch/export")
  echo "$out" >&2
  sed -n 's/^.*(\([0-9.]*\) MB\/s written).*$/export_mb_s \1 MB\/s/p' \
    <<<"$out" >>"$results"
  rm -rf "$scratch/export"
}

for i in $(seq "$reps"); do
  echo "== run $i/$reps: dd write, ckpt_bench write" >&2
  dd if=/dev/zero of="$scratch/dd.out" bs=1M count=1024 conv=fdatasync 2>&1 |
    dd_sample dd_write | tee -a "$results" >&2
  rm -f "$scratch/dd.out"
  line=$("$bin" --dir="$scratch/ckpt" --bytes=1073741824 --dim=64 --phase=write)
  echo "   $line" >&2
  echo "write_mb_s $(bench_report --json_number=write_mb_s <<<"$line") MB/s" >>"$results"
  for cache in cold hot; do
    echo "== run $i/$reps: restore, page cache $cache: dd, ckpt_bench" >&2
    [ "$cache" = hot ] || dd_read "dd_read_$cache" cold
    line=$("$bin" --dir="$scratch/ckpt" --bytes=1073741824 --dim=64 \
             --phase=restore --cache="$cache")
    echo "   $line" >&2
    for field in restore_mb_s restore_cpu_s; do
      echo "${field}_$cache $(bench_report --json_number=$field <<<"$line")" >>"$results"
    done
    # Hot: after ckpt_bench read the files into the page cache.
    [ "$cache" = cold ] || dd_read "dd_read_$cache" hot
  done
  rm -rf "$scratch/ckpt"

  echo "== run $i/$reps: export of 10M rows x dim 16: dd, ps_ckpt export" >&2
  "$bin" --dir="$scratch/ckpt" --bytes=640000000 --dim=16 --phase=write >/dev/null
  # Which goes first alternates: the first to claim page cache pays for
  # reclaiming it.
  if (( i % 2 )); then dd_copy; export_rows; else export_rows; dd_copy; fi
  rm -rf "$scratch/ckpt" "$scratch/export"
done

{
  cat "$results"
  echo "row ckpt_write_1GiB MB/s write_mb_s dd_write higher dd write (fdatasync)"
  echo "row ckpt_restore_1GiB MB/s restore_mb_s_cold dd_read_cold higher dd read (page cache dropped)"
  echo "row ckpt_restore_1GiB_hot MB/s restore_mb_s_hot dd_read_hot higher dd read (page cache hot)"
  echo "row ckpt_export_10M_dim16 MB/s export_mb_s dd_copy higher dd copy of the checkpoint's files (fdatasync)"
  echo "extra ckpt_restore_cpu_s s restore_cpu_s_cold - - -"
  echo "extra ckpt_restore_hot_cpu_s s restore_cpu_s_hot - - -"
} | bench_report ${json:+--json="$json"}
