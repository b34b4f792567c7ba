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
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir="$root/build" json="" reps=3 scratch="${TMPDIR:-/tmp}/bench_ckpt.$$"
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$2; shift ;;
    --json=*) json=${1#*=} ;;
    --build-dir=*) build_dir=${1#*=} ;;
    --dir=*) scratch=${1#*=} ;;
    --repetitions=*) reps=${1#*=} ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench_ckpt: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
command -v python3 >/dev/null || { echo "bench_ckpt: needs python3" >&2; exit 1; }
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
jobs=$(( $(nproc) < 2 ? $(nproc) : 2 ))
cmake --build "$build_dir" -j "$jobs" --target ckpt_bench >/dev/null ||
  { echo "bench_ckpt: could not build ckpt_bench" >&2; exit 1; }
bin="$build_dir/bench/ckpt_bench"

mkdir -p "$scratch"
results=$(mktemp)
trap 'rm -rf "$scratch" "$results"' EXIT
for i in $(seq "$reps"); do
  echo "== run $i/$reps: dd" >&2
  # dd prints "... bytes (...) copied, S s, R MB/s" on stderr; take bytes/s.
  dd_line=$(dd if=/dev/zero of="$scratch/dd.out" bs=1M count=1024 \
              conv=fdatasync 2>&1 | tail -1)
  rm -f "$scratch/dd.out"
  echo "   $dd_line" >&2
  echo "dd $dd_line" >>"$results"
  echo "== run $i/$reps: ckpt_bench" >&2
  line=$("$bin" --dir="$scratch/ckpt" --bytes=1073741824 --dim=64)
  echo "   $line" >&2
  echo "ck $line" >>"$results"
done

python3 - "$results" "$json" <<'PY'
import json, re, statistics, sys
path, json_path = sys.argv[1], sys.argv[2]
dd, write, restore = [], [], []
for line in open(path):
    kind, rest = line.split(" ", 1)
    if kind == "dd":
        m = re.match(r"(\d+) bytes.*copied, ([\d.]+) s", rest)
        if m:
            dd.append(int(m.group(1)) / float(m.group(2)) / 1e6)
    else:
        r = json.loads(rest)
        write.append(r["write_mb_s"])
        restore.append(r["restore_mb_s"])
def med(v):
    return statistics.median(v) if v else None
peer = med(dd)
rows = []
for name, v in (("ckpt_write_1GiB", med(write)), ("ckpt_restore_1GiB", med(restore))):
    ratio = (v / peer) if (v and peer) else None
    rows.append({"name": name, "value": v, "unit": "MB/s", "peer": "dd",
                 "peer_value": peer, "ratio": ratio})
    print(f"{name:20s} {v if v is None else round(v, 1)} MB/s   "
          f"dd {peer if peer is None else round(peer, 1)} MB/s   "
          f"ratio {ratio if ratio is None else round(ratio, 2)}")
if json_path:
    with open(json_path, "w") as f:
        json.dump({"results": rows}, f, indent=2)
        f.write("\n")
PY
