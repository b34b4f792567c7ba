#!/usr/bin/env bash
# Runs the verbs (RDMA) transport's tests where this machine has no RDMA: in a
# QEMU guest with a soft-RoCE device (rdma_rxe), through scripts/rxe_vm.sh.
# The host's / is shared read-only with the guest, so host-built binaries run
# there as they are. Usage:
#   scripts/verbs_vm.sh [--build-dir=DIR]        the cross-process suites on
#                                                verbs, two processes in one guest
#   scripts/verbs_vm.sh --ci                     the same for scripts/test.sh:
#                                                the stress suite only when the
#                                                guest runs under KVM (under
#                                                TCG emulation it takes ~11 min,
#                                                more than CI's time budget)
#   scripts/verbs_vm.sh --two-guests             put/get/atomic subset across
#                                                two guests on a virtual link
#   scripts/verbs_vm.sh --bench [--rounds=N] [--json=FILE] [--results=FILE]
#                                                xfer_perf on verbs next to
#                                                ib_write_bw / ib_read_bw in
#                                                N rounds (default 3): medians
#                                                (--results: "name value unit"
#                                                lines for scripts/bench_core.sh)
#   scripts/verbs_vm.sh --check                  exit 0 if a guest can be run
# Exit status: the tests' (0 = pass); 125/124 = the VM failed / timed out.
set -euo pipefail
source "$(dirname "$0")/help_lib.sh"  # script_help
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$root/build mode=suite json="" results="" filter='*/verbs' ci=0
bench_rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir=*) build_dir=${1#*=} ;;
    --two-guests) mode=two ;;
    --bench) mode=bench ;;
    --json=*) json=${1#*=} ;;
    --results=*) results=${1#*=} ;;
    --check) mode=check ;;
    --ci) ci=1 ;;
    --filter=*) filter=${1#*=} ;;
    --rounds=*) bench_rounds=${1#*=} ;;
    -h|--help) script_help; exit 0 ;;
    *) echo "verbs_vm: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
vm=$root/scripts/rxe_vm.sh
export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900}
# soft-RoCE on one host loops its packets through the backlog queue of the
# loopback device (1000 packets by default): bursts of 64 KiB messages
# overflow it, and every drop costs a 67 ms retransmission timeout.
guest_tuning='sysctl -qw net.core.netdev_max_backlog=100000 2>/dev/null || true'

can_run_vm() {  # QEMU present, or installable (root with apt)
  command -v qemu-system-x86_64 >/dev/null && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && return 0
  return 1
}

case $mode in
check)
  can_run_vm
  ;;

suite)
  bins=(core_xfer_ops_test core_xfer_errors_test core_xfer_events_test)
  accel=$(RXE_VM_ACCEL=${RXE_VM_ACCEL:-auto} "$vm" --accel 2>/dev/null || echo tcg)
  if [ $ci = 0 ] || [ "$accel" = kvm ]; then
    bins+=(core_xfer_stress_test)
  else
    echo "verbs_vm: stress suite SKIPPED in CI: the guest would run under TCG emulation (no usable KVM), where it takes ~11 min; run scripts/verbs_vm.sh without --ci for it"
  fi
  for b in "${bins[@]}"; do
    [ -x "$build_dir/tests/core/$b" ] || { echo "verbs_vm: $build_dir/tests/core/$b not built" >&2; exit 2; }
  done
  # One guest boot runs all the binaries, forced onto verbs (the filter
  # picks the verbs instantiation; both processes share the guest).
  guest=$(mktemp /tmp/verbs_vm_guest.XXXXXX.sh)
  trap 'rm -f "$guest"' EXIT
  cat > "$guest" <<EOF
#!/bin/bash
# XFER_IB_DEV: for the binaries that hand their environment to the core
# (xfer_perf, verbs_target_test); the rest pick the guest's only device.
export XFER_IB_DEV=rxe0 GLOG_minloglevel=1
$guest_tuning
rc=0
for b in ${bins[*]}; do
  start=\$(date +%s.%N)
  "$build_dir/tests/core/\$b" --gtest_filter='$filter' --gtest_brief=1 || rc=1
  echo "verbs_vm: \$b took \$(echo "\$(date +%s.%N) - \$start" | bc) s in the guest"
done
exit \$rc
EOF
  chmod +x "$guest"
  start=$(date +%s)
  set +e
  "$vm" "$guest"
  rc=$?
  set -e
  echo "verbs_vm: ${bins[*]} in one guest (accel=$accel): exit $rc, $(( $(date +%s) - start )) s including boot"
  exit $rc
  ;;

two)
  bin=$build_dir/tests/core/verbs_two_hosts
  [ -x "$bin" ] || { echo "verbs_vm: $bin not built" >&2; exit 2; }
  dir=$(mktemp -d /tmp/verbs_vm_two.XXXXXX)
  trap 'rm -rf "$dir"' EXIT
  port=$(( 20000 + RANDOM % 20000 ))
  start=$(date +%s)
  RXE_VM_NET="socket,listen=127.0.0.1:$port" RXE_VM_IP=10.11.12.1 RXE_VM_RW_DIR=$dir \
    GLOG_minloglevel=1 RXE_VM_PASSENV=GLOG_minloglevel \
    "$vm" "$bin" target 10.11.12.1:7700 "$dir" > "$dir/../$(basename "$dir").target.log" 2>&1 &
  target_pid=$!
  # The listening QEMU must be up before the connecting one starts.
  for _ in $(seq 240); do
    grep -q booting "$dir/../$(basename "$dir").target.log" 2>/dev/null && break
    sleep 0.5
  done
  sleep 2
  set +e
  RXE_VM_NET="socket,connect=127.0.0.1:$port" RXE_VM_IP=10.11.12.2 RXE_VM_RW_DIR=$dir \
    GLOG_minloglevel=1 RXE_VM_PASSENV=GLOG_minloglevel \
    "$vm" "$bin" origin "$dir"
  rc=$?
  touch "$dir/done"
  wait $target_pid
  trc=$?
  set -e
  echo "verbs_vm: target guest:"; sed 's/^/  /' "$dir/../$(basename "$dir").target.log"
  rm -f "$dir/../$(basename "$dir").target.log"
  echo "verbs_vm: two guests: origin exit $rc, target exit $trc, $(( $(date +%s) - start )) s"
  [ $rc = 0 ] && [ $trc = 0 ]
  ;;

bench)
  bin=$build_dir/bench/xfer_perf
  [ -x "$bin" ] || { echo "verbs_vm: $bin not built" >&2; exit 2; }
  out=$(mktemp -d /tmp/verbs_vm_bench.XXXXXX)
  trap 'rm -rf "$out"' EXIT
  cat > "$out/guest.sh" <<EOF
#!/bin/bash
$guest_tuning
# perftest's peers: server and client of each test in this guest, 64 KiB,
# each bounded in time so a stalled run cannot hang the guest. A fixed count
# (-n), not a duration (-D): with 128 outstanding 64 KiB reads (8 MiB) on a
# link this slow, ib_read_bw -D counted only the few reads that completed
# inside its window and printed ~0 or nothing.
pt() {
  timeout 90 \$1 -d rxe0 -x 1 -s 65536 -n 200 -F >/dev/null 2>&1 &
  sleep 3
  timeout 80 \$1 -d rxe0 -x 1 -s 65536 -n 200 -F 10.11.12.1 > "$out/\$1.log" 2>&1
  wait
  awk '/^ *65536/ {print \$4}' "$out/\$1.log"
}
# The guest runs under emulation on a shared host: figures swing 2x from one
# minute to the next, so each round measures the peers and ours back to back
# and the host reports medians over the rounds.
for round in \$(seq $bench_rounds); do
  echo "ib_write_bw \$(pt ib_write_bw)" > "$out/peer.\$round.txt"
  echo "ib_read_bw \$(pt ib_read_bw)" >> "$out/peer.\$round.txt"
  GLOG_minloglevel=1 XFER_IB_DEV=rxe0 timeout 300 "$bin" --transports=verbs --min_size=65536 \\
    --max_size=65536 --reps=3 --rep_seconds=1 --lat_iters=200 --warmup=20 \\
    > "$out/xfer.\$round.txt" 2>&1
done
EOF
  chmod +x "$out/guest.sh"
  RXE_VM_RW_DIR=$out "$vm" "$out/guest.sh"
  # perftest prints MB/sec with MB = 2^20 bytes (its BW average column); our
  # GB/s is 1e9 bytes/s. The windows differ: perftest keeps up to 128 writes
  # or reads in flight (its -t/-o defaults), xfer_perf posts --window=16 and
  # then waits for all of them.
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.3f", a / b; else print "null"}'; }
  median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }
  puts="" gets="" wbw="" rbw="" put_ratios="" get_ratios=""
  echo "verbs_vm: $bench_rounds round(s) of ib_write_bw, ib_read_bw, xfer_perf (verbs, 64 KiB)"
  printf '%-6s %10s %10s %7s %10s %10s %7s\n' round put write ratio get read ratio
  for round in $(seq "$bench_rounds"); do
    p=$(awk '$1=="verbs" && $2=="put_bw" {print $4}' "$out/xfer.$round.txt" 2>/dev/null || true)
    g=$(awk '$1=="verbs" && $2=="get_bw" {print $4}' "$out/xfer.$round.txt" 2>/dev/null || true)
    w=$(awk '$1=="ib_write_bw" && $2 != "" {printf "%.4f", $2*1048576/1e9}' "$out/peer.$round.txt" 2>/dev/null || true)
    r=$(awk '$1=="ib_read_bw" && $2 != "" {printf "%.4f", $2*1048576/1e9}' "$out/peer.$round.txt" 2>/dev/null || true)
    for pp in ib_write_bw ib_read_bw; do
      grep -q "^$pp [0-9]" "$out/peer.$round.txt" 2>/dev/null ||
        { echo "verbs_vm: round $round: $pp gave no figure:"; tail -5 "$out/$pp.log" 2>/dev/null || true; }
    done
    p=${p:-0} g=${g:-0} w=${w:-0} r=${r:-0}
    pr=$(ratio "$p" "$w") gr=$(ratio "$g" "$r")
    printf '%-6s %10s %10s %7s %10s %10s %7s\n' "$round" "$p" "$w" "$pr" "$g" "$r" "$gr"
    puts+=" $p" gets+=" $g" wbw+=" $w" rbw+=" $r"
    [ "$pr" = null ] || put_ratios+=" $pr"
    [ "$gr" = null ] || get_ratios+=" $gr"
  done
  cat "$out/xfer.$bench_rounds.txt" 2>/dev/null || true
  ours_put=$(echo "$puts" | median) ours_get=$(echo "$gets" | median)
  peer_put=$(echo "$wbw" | median) peer_get=$(echo "$rbw" | median)
  # The headline ratio is the median of the per-round ratios (each round's
  # two figures were taken under the same host load), not the ratio of the
  # medians.
  put_ratio=null get_ratio=null
  [ -z "${put_ratios// /}" ] || put_ratio=$(echo "$put_ratios" | median)
  [ -z "${get_ratios// /}" ] || get_ratio=$(echo "$get_ratios" | median)
  printf '%-20s %10s %10s %7s  (medians of %s rounds)\n' figure ours peer ratio "$bench_rounds"
  printf '%-20s %10s %10s %7s\n' verbs_put_bw_64KiB "$ours_put" "$peer_put" "$put_ratio"
  printf '%-20s %10s %10s %7s\n' verbs_get_bw_64KiB "$ours_get" "$peer_get" "$get_ratio"
  if [ -n "$results" ]; then
    { echo "ours_verbs_put_bw_64KiB $ours_put GB/s"; echo "ours_verbs_get_bw_64KiB $ours_get GB/s"
      echo "ib_write_bw_64KiB $peer_put GB/s"; echo "ib_read_bw_64KiB $peer_get GB/s"; } >> "$results"
  fi
  if [ -n "$json" ]; then
    cat > "$json" <<EOF
{
  "verbs_put_bw_64KiB": {"value": $ours_put, "unit": "GB/s", "peer": "ib_write_bw", "peer_value": $peer_put, "ratio": $put_ratio},
  "verbs_get_bw_64KiB": {"value": $ours_get, "unit": "GB/s", "peer": "ib_read_bw", "peer_value": $peer_get, "ratio": $get_ratio}
}
EOF
    echo "verbs_vm: wrote $json"
  fi
  ;;
esac
