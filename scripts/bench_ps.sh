#!/usr/bin/env bash
# Push and pull throughput of the parameter server on loopback, next to its
# peer measured in the same run: ps_launch starts ps_server processes on
# 127.0.0.1 (free ports) with bench tables (HASHED, sgd) and runs
# bench/ps_bench as their workers; prints one table.
#
# Every timed iteration pushes / pulls keys and gradients drawn new for it
# (uniform random uint64 ids, one float per dim). A push is timed until the
# servers applied it (Push + WaitApplied); a pull until the rows are in the
# caller's buffer. Medians of 5 iterations per run.
#
# Rows (M keys/s unless said):
#   push_10M_shm, pull_10M_shm, push_10M_tcp, pull_10M_tcp
#       10M keys, 1 server, 1 worker, table bench1 (16M rows x dim 1), over
#       shm / tcp. Peer: dmlc/ps-lite's own 10M-key benchmark with a no-op
#       server (../shared/tools/pslite-bench.sh, median of 3 runs, in this
#       run). ps-lite has only zmq over tcp on loopback, so the same peer
#       figure stands against our shm and our tcp rows. ratio = ours / peer.
#       Ours counts keys applied with SGD; the peer's server does nothing.
#   push_1M_dim16_shm, pull_1M_dim16_shm (GB/s of values, keys x 16 x 4 B)
#       1M keys into bench16 (2M rows x dim 16), 1 server.
#   exact_{push,pull}_1M_{shm,tcp}: 1M keys into an EXACT table (dim 1,
#       sgd, every key admitted at its first push: keyed packets through the
#       inboxes, pulls through the server), 1 server. Peer: the same on a
#       HASHED table in this run; ratio = EXACT / HASHED.
#   exact_insert_10M_{shm,tcp}, exact_pull_10M_{shm,tcp},
#   exact_push_resident_10M_{shm,tcp}: ps_bench --mode=resident, 10M keys,
#       1 server: one push of 10M fresh keys (each gets a row), then pulls
#       and pushes of the same keys (medians of 5). Peer: the same on the
#       HASHED table bench1 in this run; ratio = EXACT / HASHED. The EXACT
#       run must read back what was pushed for at least 99% of the keys
#       (exact_pull_hit_10M_*; a HASHED table's colliding keys share rows).
#   exact_{insert,pull,push_resident}_10M_dim16_shm: the same with rows of
#       16 floats (sgd), against a HASHED table of 16M rows of 16 floats in
#       this run: the widths recommenders train.
#   exact_{pull,push_resident}_10M_shm_vs_pslite: the EXACT figures against
#       the ps-lite peer of the push_10M rows.
#   exact_train_{push,pull}_{p50,p99}_ms (shm): 500 steps of 1,000 examples
#       x 39 fresh keys (a Pull, then a Push + WaitApplied) into exact1
#       against the same into bench1; lower is better.
#   exact_train_criteo_{push,pull}_{p50,p99}_ms: the same steps with keys as
#       a click log has them (ps_bench --key_law=criteo: the fields of
#       ps_datagen --vocab=criteo over the 10M ids of the rows above, all
#       pushed once first).
#   exact_push_at_bound_10M_shm: ps_bench --mode=push (a warm-up and 5
#       timed pushes of 10M fresh keys) into an EXACT table bound at 1.5x
#       the keys of one push: from the second push on, each new key takes
#       the row of an old one (when_full's approximate LRU). Peer: the
#       HASHED push_10M_shm of this run; ratio = EXACT / HASHED.
#   exact_growth_{insert,rss,bytes_per_row}_100M: bench/exact_growth_bench,
#       in one process each: an EXACT table (dim 8, sgd) growing to 10^8
#       distinct keys (batches of 2^20 in hash order) against a HASHED
#       table of 10^8 rows taking the same batches; M keys/s and peak RSS
#       (MiB, lower is better) against HASHED, and the EXACT table's bytes
#       a row beyond its 32 bytes of values (goal of issue 39: 24). --quick:
#       10^6 keys.
#   rss_worker_10M_shm, rss_server_10M_shm (MiB): peak RSS (VmHWM) of the
#       worker and the server of the push_10M_shm run. It counts the shared
#       memory a process touched: the server's table region, and the rows a
#       shm worker read out of it.
#   {push,pull}_<K>_dim<D>_<S>srv_<T>: every run of the matrix (keys, dim,
#       servers 1|2, transport shm|tcp).
# With --scaling, also (shm, 10M keys per worker, medians of 3 iterations,
# tables of 1M / 10M / 100M rows x dim 1, 400 MB of floats at 100M):
#   scale_{push,pull}_<R>rows_<S>srv_<W>wrk: the cluster's M keys/s for S
#       servers and W workers (W workers push / pull W x 10M keys at once,
#       lined up by a Barrier; M keys/s = W x 10M / time).
#   scale_rss_{worker,server}_<R>rows_<S>srv_<W>wrk (MiB): peak RSS of
#       worker 0 and of the largest server.
#   train_<S>srv_{pushes_per_s, push_p50_ms, push_p99_ms, pull_p50_ms,
#       pull_p99_ms}: 500 steps of CTR-training shape into the 100M-row
#       table, 1 worker: a Pull then a Push (+ WaitApplied) of 1,000 examples
#       x 39 keys; pushes/s = steps / time spent pushing.
# With --metrics, also what the Prometheus metrics cost (goal: within 5%):
#   metrics_{push,pull}_10M_{shm,tcp}: the 10M-key, 1-server runs with
#       --metrics_port=0 on the server and the worker while a scraper GETs
#       every /metrics once a second; peer: the same runs with metrics off,
#       interleaved with them in this run (3 of each, medians).
#
# Usage: scripts/bench_ps.sh [--json FILE] [--quick] [--scaling] [--metrics] [--build-dir=DIR]
#   --json FILE  also write {"results":[{name,value,unit,peer,peer_value,ratio}]}
#   --quick      fewer iterations, 1M keys instead of 10M, no peer (smoke test)
#   --scaling    also the scaling table and the training-shaped case (above)
#   --metrics    also metrics on against metrics off (above)
#   --build-dir=DIR  use ps_server/ps_bench of an existing build
# The peer: $PSLITE_BENCH, else ../shared/tools/pslite-bench.sh next to the
# source tree. When it cannot build or run, one "peer skipped: ..." line
# and the peer rows with peer value 0 (no ratio).
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"  # sets $root
quick=0 scaling=0 metrics=0
bench_option() {
  case "$1" in
    --quick) quick=1 ;;
    --scaling) scaling=1 ;;
    --metrics) metrics=1 ;;
    *) return 1 ;;
  esac
}
bench_parse bench_ps "$@"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bench_tools ps_server ps_bench ps_launch bench_report exact_growth_bench
for b in server/ps_server bench/ps_bench launch/ps_launch bench/exact_growth_bench; do
  [ -x "$build_dir/$b" ] || { echo "bench_ps: $build_dir/$b was not built" >&2; exit 1; }
done

keys=10000000 keys16=1000000 iters=5 scale_iters=3 batches=500
[ "$quick" = 1 ] && { keys=1000000 keys16=200000 iters=2 scale_iters=1 batches=50; }

# table FILE NAME ROWS DIM: a tables file holding one HASHED sgd table.
table() {
  cat >"$1" <<TABLES
table { id: 1 name: "$2" kind: HASHED dim: $4 capacity: $3
        optimizer { name: "sgd" learning_rate: 0.01 } }
TABLES
}
table "$work/bench1.tables" bench1 16777216 1
table "$work/bench16.tables" bench16 2097152 16
# exact_table FILE NAME ROWS DIM: a tables file holding one EXACT sgd table
# as the issue that brought keyed pushes measured it: every key admitted at
# its first push, room for ROWS rows.
exact_table() {
  cat >"$1" <<TABLES
table { id: 1 name: "$2" kind: EXACT dim: $4 capacity: $3
        admit_after_pushes: 1
        optimizer { name: "sgd" learning_rate: 0.01 } }
TABLES
}
# Room for every fresh key of the run.
exact_table "$work/exact1.tables" exact1 16777216 1

# check_hit RUN WHAT: exits unless the EXACT resident run RUN read back what
# was pushed for at least 99% of its keys.
check_hit() {
  local hit
  hit=$(awk -v s="verify_hit_fraction_$1" '$1 == s { print $2 }' "$work/results")
  if ! awk -v h="$hit" 'BEGIN { exit !(h >= 0.99) }'; then
    echo "bench_ps: the EXACT table read back what was pushed for only $hit of the keys ($2); want >= 0.99" >&2
    exit 1
  fi
}

# run NAME SERVERS WORKERS TRANSPORT TABLES TABLE DIM ARGS...: one cluster
# with ps_bench as its workers (ARGS are more ps_bench flags); appends
# worker 0's RESULT figures to $work/results as samples MODE_FIELD_NAME
# (push_mkeys_per_s_NAME, train_push_p99_ms_NAME, rss_server_peak_mib_NAME...).
run() {
  local name=$1 n=$2 w=$3 transport=$4 tables=$5 tab=$6 dim=$7 dir="$work/$1" i pids=""
  shift 7
  for ((i = 0; i < n; i++)); do pids+="${pids:+,}$dir/server-$i.pid"; done
  "$build_dir/launch/ps_launch" --servers="$n" --workers="$w" \
    --tables="$tables" --transport="$transport" --server_args="$server_args" \
    --server_bin="$build_dir/server/ps_server" \
    --worker_bin="$build_dir/bench/ps_bench" \
    --worker_args="--table=$tab --dim=$dim --server_pid_files=$pids $*" \
    --run_dir="$dir" >/dev/null 2>"$work/launch.err" || {
    echo "bench_ps: ps_bench failed ($name):" >&2
    cat "$work/launch.err" "$dir"/worker-*.log >&2
    exit 1
  }
  awk -v run="$name" '$1 == "RESULT" {
      mode = substr($2, 6)
      for (i = 3; i <= NF; i++) { split($i, kv, "="); print mode "_" kv[1] "_" run, kv[2] }
    }' "$dir/worker-0.log" >>"$work/results"
}

server_args=""

# scrape DIR: GETs every /metrics URL the logs under DIR name, once a second,
# until killed (what a Prometheus would cost the processes).
scrape() {
  local url
  while sleep 1; do
    for url in $(grep -ho 'metrics: http://[^ ]*/metrics' "$1"/*.log 2>/dev/null |
                 cut -d' ' -f2); do
      curl -s -o /dev/null --max-time 2 "$url" || true
    done
  done
}

# The peer first, on a machine the runs below have not warmed.
peer_push=0 peer_pull=0
peer_label="ps-lite, no-op server, zmq/tcp loopback (this run)"
peer=${PSLITE_BENCH:-$root/../shared/tools/pslite-bench.sh}
if [ "$quick" = 1 ]; then
  echo "peer skipped: --quick measures ${keys} keys, the peer 10M"
elif [ ! -f "$peer" ]; then
  echo "peer skipped: no $peer (set PSLITE_BENCH to shared/tools/pslite-bench.sh)"
elif ! line=$(bash "$peer" 3 2>"$work/peer.err" | tail -n 1) ||
     ! [[ "$line" =~ ^[0-9.]+\ [0-9.]+$ ]]; then
  echo "peer skipped: $peer failed: $(tail -n 1 "$work/peer.err")"
else
  # The peer prints the medians in ms for 10M keys: M keys/s = 10 / s.
  read -r push_ms pull_ms <<<"$line"
  peer_push=$(awk -v ms="$push_ms" 'BEGIN { printf "%.2f", 10 / (ms / 1000) }')
  peer_pull=$(awk -v ms="$pull_ms" 'BEGIN { printf "%.2f", 10 / (ms / 1000) }')
  echo "peer: $(tail -n 1 "$work/peer.err")"
fi
[ "$peer_push" = 0 ] && peer_label="ps-lite skipped (see above)"

: >"$work/results"
label=$((keys / 1000000))M
label16=$((keys16 / 1000000))M
[ "$keys16" -lt 1000000 ] && label16=$((keys16 / 1000))K
both="--mode=both --iterations=$iters"
rows=""
for transport in shm tcp; do
  for n in 1 2; do
    name="${label}_dim1_${n}srv_${transport}" name16="${label16}_dim16_${n}srv_${transport}"
    run "$name" "$n" 1 "$transport" "$work/bench1.tables" bench1 1 $both --keys="$keys"
    run "$name16" "$n" 1 "$transport" "$work/bench16.tables" bench16 16 $both --keys="$keys16"
    for c in "$name" "$name16"; do
      for m in push pull; do
        rows+="row ${m}_$c \"M keys/s\" ${m}_mkeys_per_s_$c - -"$'\n'
      done
    done
  done
done

# EXACT against HASHED, both dim 1, 1 server, the same key count and runs.
for transport in shm tcp; do
  for kind in exact hashed; do
    tables="$work/exact1.tables" tab=exact1
    [ "$kind" = hashed ] && tables="$work/bench1.tables" tab=bench1
    run "${kind}_${label16}_$transport" 1 1 "$transport" "$tables" "$tab" 1 \
      $both --keys="$keys16"
  done
  for m in push pull; do
    c="${label16}_$transport"
    rows+="row exact_${m}_$c \"M keys/s\" ${m}_mkeys_per_s_exact_$c ${m}_mkeys_per_s_hashed_$c higher HASHED table, same run"$'\n'
  done
done

# EXACT against HASHED at 10M keys, keys that have rows (see above).
for transport in shm tcp; do
  for kind in exact hashed; do
    tables="$work/exact1.tables" tab=exact1
    [ "$kind" = hashed ] && tables="$work/bench1.tables" tab=bench1
    run "${kind}_resident_${label}_$transport" 1 1 "$transport" "$tables" \
      "$tab" 1 --mode=resident --iterations="$iters" --keys="$keys"
  done
  c="${label}_$transport"
  check_hit "exact_resident_$c" "$transport"
  rows+="row exact_pull_hit_$c fraction verify_hit_fraction_exact_resident_$c verify_hit_fraction_hashed_resident_$c higher HASHED table, same run"$'\n'
  rows+="row exact_insert_$c \"M keys/s\" insert_mkeys_per_s_exact_resident_$c insert_mkeys_per_s_hashed_resident_$c higher HASHED table, same run"$'\n'
  for m in pull push; do
    row=exact_pull_$c
    [ "$m" = push ] && row=exact_push_resident_$c
    rows+="row $row \"M keys/s\" ${m}_resident_mkeys_per_s_exact_resident_$c ${m}_resident_mkeys_per_s_hashed_resident_$c higher HASHED table, same run"$'\n'
  done
done
# The same at 16 floats a row, shm.
table "$work/hashed16.tables" hashed16 16777216 16
exact_table "$work/exact16.tables" exact16 16777216 16
for kind in exact hashed; do
  run "${kind}16_resident_$label" 1 1 shm "$work/${kind}16.tables" \
    "${kind}16" 16 --mode=resident --iterations="$iters" --keys="$keys"
done
check_hit "exact16_resident_$label" "16 floats a row"
c="${label}_dim16_shm"
rows+="row exact_insert_$c \"M keys/s\" insert_mkeys_per_s_exact16_resident_$label insert_mkeys_per_s_hashed16_resident_$label higher HASHED table, same run"$'\n'
rows+="row exact_pull_$c \"M keys/s\" pull_resident_mkeys_per_s_exact16_resident_$label pull_resident_mkeys_per_s_hashed16_resident_$label higher HASHED table, same run"$'\n'
rows+="row exact_push_resident_$c \"M keys/s\" push_resident_mkeys_per_s_exact16_resident_$label push_resident_mkeys_per_s_hashed16_resident_$label higher HASHED table, same run"$'\n'
# Fresh keys into an EXACT table at its memory bound, each taking an old
# key's row, against the HASHED push of the same key count above.
exact_table "$work/exact_bound.tables" exact1 $((keys * 3 / 2)) 1
run "exact_bound_$label" 1 1 shm "$work/exact_bound.tables" exact1 1 \
  --mode=push --iterations="$iters" --keys="$keys"
rows+="row exact_push_at_bound_${label}_shm \"M keys/s\" push_mkeys_per_s_exact_bound_$label push_mkeys_per_s_${label}_dim1_1srv_shm higher HASHED table, same run"$'\n'
# An EXACT table growing to 10^8 keys against a HASHED table of as many
# rows, one process each (bench/exact_growth_bench).
growth_keys=100000000 glabel=100M
[ "$quick" = 1 ] && { growth_keys=1000000 glabel=1M; }
for kind in exact hashed; do
  "$build_dir/bench/exact_growth_bench" --kind="$kind" --keys="$growth_keys" \
    >"$work/growth-$kind.out" || {
    echo "bench_ps: exact_growth_bench --kind=$kind failed" >&2
    exit 1
  }
  awk -v run="$kind" '$1 == "RESULT" {
      for (i = 3; i <= NF; i++) { split($i, kv, "="); print "growth_" kv[1] "_" run, kv[2] }
    }' "$work/growth-$kind.out" >>"$work/results"
done
rows+="row exact_growth_insert_$glabel \"M keys/s\" growth_insert_mkeys_per_s_exact growth_insert_mkeys_per_s_hashed higher HASHED table, same run"$'\n'
rows+="row exact_growth_rss_$glabel MiB growth_peak_rss_mib_exact growth_peak_rss_mib_hashed lower HASHED table, same run"$'\n'
rows+="row exact_growth_bytes_per_row_$glabel B growth_bytes_per_row_exact - -"$'\n'
# Fresh random keys every step (each EXACT push inserts 39,000 rows), and
# keys as a click log has them (ps_datagen --vocab=criteo's fields over
# $keys ids, every id pushed once first: most of a step's keys have rows).
for kind in exact hashed; do
  tables="$work/exact1.tables" tab=exact1
  [ "$kind" = hashed ] && tables="$work/bench1.tables" tab=bench1
  run "${kind}_train" 1 1 shm "$tables" "$tab" 1 --mode=train \
    --batches="$batches" --batch_examples=1000 --example_keys=39
  run "${kind}_train_criteo" 1 1 shm "$tables" "$tab" 1 --mode=train \
    --batches="$batches" --batch_examples=1000 --example_keys=39 \
    --key_space="$keys" --key_law=criteo --fill
done
for f in push_p50 push_p99 pull_p50 pull_p99; do
  for keys_of in train train_criteo; do
    rows+="row exact_${keys_of}_${f}_ms ms train_${f}_ms_exact_${keys_of} train_${f}_ms_hashed_${keys_of} lower HASHED table, same run"$'\n'
  done
done

if [ "$scaling" = 1 ]; then
  scale="--mode=both --iterations=$scale_iters --keys=$keys"
  for r in 1 10 100; do
    table "$work/rows${r}M.tables" "rows${r}M" $((r * 1000000)) 1
    for n in 1 2; do
      for w in 1 2; do
        c="${r}Mrows_${n}srv_${w}wrk"
        run "scale_$c" "$n" "$w" shm "$work/rows${r}M.tables" "rows${r}M" 1 $scale
        for m in push pull; do
          rows+="row scale_${m}_$c \"M keys/s\" ${m}_mkeys_per_s_scale_$c - -"$'\n'
        done
        for p in worker server; do
          rows+="row scale_rss_${p}_$c MiB rss_${p}_peak_mib_scale_$c - -"$'\n'
        done
      done
    done
  done
  for n in 1 2; do
    run "train_${n}srv" "$n" 1 shm "$work/rows100M.tables" rows100M 1 \
      --mode=train --batches="$batches" --batch_examples=1000 --example_keys=39
    rows+="row train_${n}srv_pushes_per_s pushes/s train_pushes_per_s_train_${n}srv - -"$'\n'
    for f in push_p50 push_p99 pull_p50 pull_p99; do
      rows+="row train_${n}srv_${f}_ms ms train_${f}_ms_train_${n}srv - -"$'\n'
    done
  done
fi

metric_rows=""
if [ "$metrics" = 1 ]; then
  # Off and on interleaved, so that a slower phase of the machine hits both.
  for rep in 1 2 3; do
    for transport in shm tcp; do
      for on in 0 1; do
        name="metrics${on}_${label}_${transport}_$rep"
        sample="metrics${on}_${label}_${transport}"
        if [ "$on" = 1 ]; then
          server_args="--metrics_port=0"
          mkdir -p "$work/$name"
          scrape "$work/$name" &
          scraper=$!
          run "$name" 1 1 "$transport" "$work/bench1.tables" bench1 1 $both \
            --keys="$keys" --metrics_port=0
          kill "$scraper" 2>/dev/null || true
          wait "$scraper" 2>/dev/null || true
          server_args=""
        else
          run "$name" 1 1 "$transport" "$work/bench1.tables" bench1 1 $both \
            --keys="$keys"
        fi
        # One sample name for the three repetitions: the report takes the median.
        sed -i "s/_${name}\$/_${sample}/; s/_${name} /_${sample} /" "$work/results"
      done
    done
  done
  for transport in shm tcp; do
    for m in push pull; do
      metric_rows+="row metrics_${m}_${label}_$transport \"M keys/s\" ${m}_mkeys_per_s_metrics1_${label}_$transport ${m}_mkeys_per_s_metrics0_${label}_$transport higher metrics off (this run)"$'\n'
    done
  done
fi

{
  cat "$work/results"
  echo "$metric_rows"
  for t in shm tcp; do
    echo "row push_10M_$t \"M keys/s\" push_mkeys_per_s_${label}_dim1_1srv_$t $peer_push higher $peer_label"
    echo "row pull_10M_$t \"M keys/s\" pull_mkeys_per_s_${label}_dim1_1srv_$t $peer_pull higher $peer_label"
  done
  echo "row exact_pull_${label}_shm_vs_pslite \"M keys/s\" pull_resident_mkeys_per_s_exact_resident_${label}_shm $peer_pull higher $peer_label"
  echo "row exact_push_resident_${label}_shm_vs_pslite \"M keys/s\" push_resident_mkeys_per_s_exact_resident_${label}_shm $peer_push higher $peer_label"
  echo "row push_1M_dim16_shm GB/s push_gb_per_s_${label16}_dim16_1srv_shm - -"
  echo "row pull_1M_dim16_shm GB/s pull_gb_per_s_${label16}_dim16_1srv_shm - -"
  echo "row rss_worker_10M_shm MiB rss_worker_peak_mib_${label}_dim1_1srv_shm - -"
  echo "row rss_server_10M_shm MiB rss_server_peak_mib_${label}_dim1_1srv_shm - -"
  echo "$rows"
} | bench_report ${json:+--json="$json"}
echo "(push = Push + WaitApplied of fresh keys, counted as applied with SGD;"
echo " the peer is ps-lite over zmq/tcp on loopback for both our shm and tcp rows;"
echo " GB/s counts keys x dim x 4 bytes of values; ratio = ours / peer)"
