#!/usr/bin/env bash
# Installs every system package the project needs (Debian 12). Idempotent: a
# second run installs nothing. Without root it prints the command to run.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  protobuf-compiler libprotobuf-dev
  libgflags-dev libgoogle-glog-dev
  librocksdb-dev
  liburing-dev                # the disk tier reads its blocks in io_uring batches
  libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev
  libxxhash-dev
  libsodium-dev               # the cluster secret's HMAC challenge-response
  libeigen3-dev zlib1g-dev
  clang libclang-rt-14-dev    # libFuzzer targets and sanitizer runtimes
  clang-format
  ucx-utils iperf3            # peers the benchmarks compare against
  redis-server                # bench_serving.sh: the lookups' peer (MGET)
  perftest                    # ib_write_bw / ib_read_bw: the verbs bench's peers
  python3                     # free ports (bench_core.sh), the demo's throughput sum
  python3-yaml                # the deploy test reads the Kubernetes manifests
  nftables iproute2           # the multihost test: network namespaces, injected loss and resets
  slurm-wlm munge             # the Slurm job test runs a one-node Slurm (deploy/slurm)
  python3-dev pybind11-dev    # the Python package (python/)
  python3-numpy python3-torch python3-pytest  # its arrays, torch module, tests
  libopenblas0-pthread        # numpy's and torch's BLAS (Debian's default is the 7x slower reference BLAS)
  python3-venv python3-pip python3-setuptools python3-wheel  # its offline install
  gnuplot-nox                 # scripts/plot_metrics.sh: training curves as a PNG (the demo draws one)
  libcpp-httplib-dev          # the metrics tests' HTTP client (tests/metrics)
  prometheus                  # the metrics test scrapes a cluster with a real Prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: run as root:  apt-get update && ${cmd[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup: installing ${missing[*]}"
apt-get -o DPkg::Lock::Timeout=600 update -q
apt-get -o DPkg::Lock::Timeout=600 "${cmd[@]:1}" -q
