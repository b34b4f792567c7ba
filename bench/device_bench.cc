// device_bench: sparse applies to a table in GPU memory (issue 19), next to
// the copies that bound them, all in one run on device 0:
//   apply_<opt>_d<dim>   the apply kernel alone on a packet already in device
//                        memory: --count distinct rows of a --rows-row table,
//                        GB/s of table, optimizer state and gradient bytes
//                        touched (each table/state float read and written,
//                        each gradient and row index read). opt is sum
//                        (atomicAdd) or adam (the stateful kernel).
//   d2d                  cudaMemcpy device to device of --copy_bytes, GB/s
//                        of bytes read + written: the kernel's peer.
//   e2e_sum_d<dim>       DeviceParamTable::Apply from a packet in pinned host
//                        memory (H2D copies + kernel + sync), GB/s of packet
//                        bytes (row indices + gradients).
//   e2e_pageable_sum_d<dim>  the same from a packet in pageable memory (a
//                        std::vector, as the server's decode scratch is):
//                        Apply then memcpys it into its pinned staging
//                        first, 4 bytes per row index and per gradient
//                        (server/inboxes.h says why that copy is the one a
//                        page-locked scratch would save).
//   e2e_ddecode_<type>_sum_d<dim>  DeviceParamTable::ApplyPacket over the
//                        packet encoded (protocol::EncodeSparsePackets, type
//                        fp32 or fp16, delta varints, --packet_bytes each)
//                        from pageable host memory, as the server hands
//                        over an inbox slot: copy to pinned, checksum,
//                        upload, decode + apply on the device. GB/s of
//                        packet bytes.
//   e2e_hdecode_<type>_sum_d<dim>  the same packets decoded on the host
//                        (protocol::DecodeSparsePacket) and applied with
//                        Apply: the path the server took before; GB/s of
//                        packet bytes.
//   h2d_pinned           cudaMemcpy host to device of a pinned buffer as big
//                        as the largest packet: the end-to-end peer.
// Each figure is the median of --reps timed runs after one untimed. Prints
// "RESULT name value unit" lines for scripts/bench_device.sh, or "SKIPPED
// <reason>" (exit 0) when no CUDA device is usable.
//
// Thread-safety: a single-threaded program.
#include <cuda_runtime_api.h>
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "kernels/cuda/device_optimizers.h"
#include "protocol/sparse_packet.h"
#include "protocol/table_config.h"
#include "table/device_param_table.h"

DEFINE_uint64(rows, 10'000'000, "table rows");
DEFINE_uint64(count, uint64_t{1} << 22, "rows in a packet (distinct)");
DEFINE_string(dims, "16,32,64,128", "row widths, comma separated");
DEFINE_uint64(copy_bytes, uint64_t{2} << 30, "bytes of the d2d peer copy");
DEFINE_uint64(packet_bytes, uint64_t{4} << 20,
              "size limit of the encoded packets (an inbox slot)");
DEFINE_int32(reps, 7, "timed runs per figure (the median is reported)");

namespace {

using ps::Status;
namespace gpu = ps::kernels::gpu;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::OK();
  return ps::Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

// Device or pinned host memory, freed on scope exit.
struct DeviceMemory {
  void* p = nullptr;
  ~DeviceMemory() {
    if (p != nullptr) cudaFree(p);
  }
};
struct PinnedMemory {
  void* p = nullptr;
  ~PinnedMemory() {
    if (p != nullptr) cudaFreeHost(p);
  }
};

// Seconds of `run` (enqueueing work on `stream`) by CUDA events, median
// of --reps after one untimed run.
template <typename Run>
ps::StatusOr<double> TimeOnStream(cudaStream_t stream, Run run) {
  cudaEvent_t start, stop;
  PS_RETURN_IF_ERROR(Check(cudaEventCreate(&start), "cudaEventCreate"));
  PS_RETURN_IF_ERROR(Check(cudaEventCreate(&stop), "cudaEventCreate"));
  std::vector<double> seconds;
  Status status;
  for (int r = -1; r < FLAGS_reps && status.ok(); ++r) {
    cudaEventRecord(start, stream);
    status = run(r + 2);  // 1-based step count, 1 for the untimed run
    cudaEventRecord(stop, stream);
    if (status.ok()) {
      status = Check(cudaEventSynchronize(stop), "kernel");
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    if (r >= 0) seconds.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  PS_RETURN_IF_ERROR(status);
  return Median(seconds);
}

// Seconds of `run` (complete on return) by the wall clock, as above.
template <typename Run>
ps::StatusOr<double> TimeOnHost(Run run) {
  std::vector<double> seconds;
  for (int r = -1; r < FLAGS_reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    PS_RETURN_IF_ERROR(run());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (r >= 0) seconds.push_back(s);
  }
  return Median(seconds);
}

void Result(const std::string& name, double gbps) {
  std::printf("RESULT %s %.4f GB/s\n", name.c_str(), gbps);
  std::fflush(stdout);
}

ps::proto::TableSpec SpecFor(const std::string& optimizer, uint32_t dim) {
  const std::string rate =
      optimizer == "sum" ? "" : " learning_rate: 0.001";  // sum has none
  const std::string text =
      "table { id: 1 name: \"bench\" dim: " + std::to_string(dim) +
      " capacity: " + std::to_string(FLAGS_rows) + " optimizer { name: \"" +
      optimizer + "\"" + rate + " } }";
  return ps::protocol::ParseTableConfig(text).value().table(0);
}

Status Peers(size_t max_packet_bytes) {
  DeviceMemory a, b;
  const size_t n = FLAGS_copy_bytes;
  PS_RETURN_IF_ERROR(Check(cudaMalloc(&a.p, n), "cudaMalloc"));
  // b also takes the h2d copy below, which may be larger than n.
  PS_RETURN_IF_ERROR(
      Check(cudaMalloc(&b.p, std::max(n, max_packet_bytes)), "cudaMalloc"));
  PS_RETURN_IF_ERROR(Check(cudaMemset(a.p, 1, n), "cudaMemset"));
  PS_ASSIGN_OR_RETURN(
      const double d2d, TimeOnStream(nullptr, [&](uint64_t) {
        return Check(
            cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice, nullptr),
            "cudaMemcpy D2D");
      }));
  Result("d2d", 2.0 * n / d2d / 1e9);

  PinnedMemory host;
  PS_RETURN_IF_ERROR(
      Check(cudaMallocHost(&host.p, max_packet_bytes), "cudaMallocHost"));
  std::fill_n(static_cast<char*>(host.p), max_packet_bytes, 1);
  PS_ASSIGN_OR_RETURN(const double h2d, TimeOnHost([&] {
                        return Check(cudaMemcpy(b.p, host.p, max_packet_bytes,
                                                cudaMemcpyHostToDevice),
                                     "cudaMemcpy H2D");
                      }));
  Result("h2d_pinned", max_packet_bytes / h2d / 1e9);
  return Status::OK();
}

// ApplyPacket (device decode) and host decode + Apply over the packet
// encoded as `type`: the e2e_ddecode_/e2e_hdecode_ rows.
Status BenchPackets(ps::table::DeviceParamTable& table,
                    const std::vector<uint32_t>& sorted_rows,
                    const float* grads, uint32_t dim,
                    ps::kernels::ValueType type) {
  namespace protocol = ps::protocol;
  protocol::SparsePacketMeta meta;
  meta.table_id = 1;
  meta.row_dim = dim;
  meta.value_type = type;
  std::vector<uint8_t> bytes;
  std::vector<protocol::EncodedPacket> packets;
  PS_RETURN_IF_ERROR(protocol::EncodeSparsePackets(
      meta, sorted_rows,
      std::span<const float>(grads, sorted_rows.size() * dim),
      FLAGS_packet_bytes, &bytes, &packets));
  protocol::SparsePacketExpectations expect;
  expect.table_rows = table.num_rows();
  expect.row_dim = dim;
  expect.table_id = 1;
  const std::string suffix = std::string(ps::kernels::ValueTypeName(type)) +
                             "_sum_d" + std::to_string(dim);
  PS_ASSIGN_OR_RETURN(
      const double device, TimeOnHost([&] {
        for (const auto& pk : packets) {
          PS_RETURN_IF_ERROR(table.ApplyPacket(
              std::span<const uint8_t>(bytes.data() + pk.offset, pk.size),
              expect, nullptr));
        }
        return Status::OK();
      }));
  Result("e2e_ddecode_" + suffix, bytes.size() / device / 1e9);
  uint32_t most = 0;
  for (const auto& pk : packets) most = std::max(most, pk.row_count);
  std::vector<uint32_t> rows(most);
  std::vector<float> values(size_t{most} * dim);
  PS_ASSIGN_OR_RETURN(
      const double host, TimeOnHost([&] {
        for (const auto& pk : packets) {
          PS_RETURN_IF_ERROR(protocol::DecodeSparsePacket(
              std::span<const uint8_t>(bytes.data() + pk.offset, pk.size),
              expect, rows, values, nullptr));
          PS_RETURN_IF_ERROR(
              table.Apply(std::span<const uint32_t>(rows.data(), pk.row_count),
                          std::span<const float>(values.data(),
                                                 size_t{pk.row_count} * dim)));
        }
        return Status::OK();
      }));
  Result("e2e_hdecode_" + suffix, bytes.size() / host / 1e9);
  return Status::OK();
}

Status Bench(const std::vector<uint32_t>& dims) {
  const size_t count = FLAGS_count;
  const uint32_t max_dim = *std::max_element(dims.begin(), dims.end());
  // The packet: distinct rows (the first `count` of a shuffle), small
  // gradients in a pattern (their values do not change the timing).
  std::vector<uint32_t> rows(FLAGS_rows);
  std::iota(rows.begin(), rows.end(), 0u);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<size_t> pick(i, rows.size() - 1);
    std::swap(rows[i], rows[pick(rng)]);
  }
  rows.resize(count);
  // The encoder wants increasing rows; the values' order does not matter.
  std::vector<uint32_t> sorted_rows = rows;
  std::sort(sorted_rows.begin(), sorted_rows.end());
  const size_t max_grad_bytes = count * max_dim * sizeof(float);
  PinnedMemory host_rows, host_grads;
  PS_RETURN_IF_ERROR(Check(cudaMallocHost(&host_rows.p, count * 4), "pinned"));
  PS_RETURN_IF_ERROR(
      Check(cudaMallocHost(&host_grads.p, max_grad_bytes), "pinned"));
  std::copy(rows.begin(), rows.end(), static_cast<uint32_t*>(host_rows.p));
  auto* grads = static_cast<float*>(host_grads.p);
  for (size_t i = 0; i < count * max_dim; ++i) {
    grads[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * 1e-3f;
  }
  DeviceMemory device_rows, device_grads;
  PS_RETURN_IF_ERROR(Check(cudaMalloc(&device_rows.p, count * 4), "malloc"));
  PS_RETURN_IF_ERROR(Check(cudaMalloc(&device_grads.p, max_grad_bytes), "m"));
  PS_RETURN_IF_ERROR(Check(
      cudaMemcpy(device_rows.p, host_rows.p, count * 4, cudaMemcpyHostToDevice),
      "H2D"));
  PS_RETURN_IF_ERROR(Check(cudaMemcpy(device_grads.p, host_grads.p,
                                      max_grad_bytes, cudaMemcpyHostToDevice),
                           "H2D"));
  PS_RETURN_IF_ERROR(Peers(count * 4 + max_grad_bytes));
  cudaStream_t stream;
  PS_RETURN_IF_ERROR(Check(cudaStreamCreate(&stream), "cudaStreamCreate"));

  for (uint32_t dim : dims) {
    const double grad_bytes = double(count) * dim * sizeof(float);
    for (const std::string optimizer : {"sum", "adam"}) {
      PS_ASSIGN_OR_RETURN(auto table,
                          ps::table::DeviceParamTable::Create(
                              SpecFor(optimizer, dim), 0, FLAGS_rows, 0));
      gpu::DeviceTable t;
      t.params = table->data();
      t.state[0] = table->state(0);
      t.state[1] = table->state(1);
      t.num_rows = table->num_rows();
      t.dim = dim;
      const auto* d_rows = static_cast<const uint32_t*>(device_rows.p);
      const auto* d_grads = static_cast<const float*>(device_grads.p);
      const bool sum = optimizer == "sum";
      PS_ASSIGN_OR_RETURN(
          const double kernel, TimeOnStream(stream, [&](uint64_t step) {
            if (sum) {
              return gpu::LaunchAddRows(t, d_rows, d_grads, count, 1.0f,
                                        stream);
            }
            return gpu::LaunchOptimizerRows(ps::kernels::AdamConfig{}, step, t,
                                            d_rows, d_grads, count, nullptr,
                                            nullptr, count, stream);
          }));
      // Every parameter and state float read and written, every gradient
      // and row index read.
      const double touched = 2.0 * grad_bytes * (1 + table->state_arrays()) +
                             grad_bytes + count * 4.0;
      Result("apply_" + optimizer + "_d" + std::to_string(dim),
             touched / kernel / 1e9);
      if (sum) {
        const std::span<const uint32_t> packet_rows(
            static_cast<const uint32_t*>(host_rows.p), count);
        const std::span<const float> packet_grads(grads, count * dim);
        PS_ASSIGN_OR_RETURN(const double e2e, TimeOnHost([&] {
                              return table->Apply(packet_rows, packet_grads);
                            }));
        Result("e2e_sum_d" + std::to_string(dim),
               (count * 4.0 + grad_bytes) / e2e / 1e9);
        const std::vector<uint32_t> pageable_rows(packet_rows.begin(),
                                                  packet_rows.end());
        const std::vector<float> pageable_grads(packet_grads.begin(),
                                                packet_grads.end());
        PS_ASSIGN_OR_RETURN(const double pageable, TimeOnHost([&] {
                              return table->Apply(pageable_rows,
                                                  pageable_grads);
                            }));
        Result("e2e_pageable_sum_d" + std::to_string(dim),
               (count * 4.0 + grad_bytes) / pageable / 1e9);
        for (ps::kernels::ValueType type :
             {ps::kernels::ValueType::kFp32, ps::kernels::ValueType::kFp16}) {
          PS_RETURN_IF_ERROR(
              BenchPackets(*table, sorted_rows, grads, dim, type));
        }
      }
    }
  }
  cudaStreamDestroy(stream);
  return Status::OK();
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "sparse applies to a GPU table next to device and host copies; the "
      "figures of scripts/bench_device.sh");
  if (Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "device_bench: %s\n", s.message().c_str());
    return 2;
  }
  std::vector<uint32_t> dims;
  std::stringstream list(FLAGS_dims);
  for (std::string item; std::getline(list, item, ',');) {
    const unsigned long dim = std::strtoul(item.c_str(), nullptr, 10);
    if (dim == 0 || dim > 4096) {
      std::fprintf(stderr, "device_bench: bad --dims entry '%s'\n",
                   item.c_str());
      return 2;
    }
    dims.push_back(static_cast<uint32_t>(dim));
  }
  Status s =
      dims.empty() ? ps::InvalidArgument("--dims is empty") : Status::OK();
  if (s.ok()) s = ps::cli::CheckIntFlag("reps", FLAGS_reps, 1, 1000);
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("rows", FLAGS_rows, 1, uint64_t{1} << 32);
  }
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("count", FLAGS_count, 1, FLAGS_rows,
                               "from 1 to --rows (the rows are distinct)");
  }
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("packet_bytes", FLAGS_packet_bytes, 4096,
                               uint64_t{1} << 31);
  }
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("copy_bytes", FLAGS_copy_bytes, 1 << 20,
                               uint64_t{64} << 30);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "device_bench: %s\n", s.message().c_str());
    return 2;
  }
  if (Status available = ps::table::DeviceParamTable::Available();
      !available.ok()) {
    std::printf("SKIPPED %s\n", available.message().c_str());
    return 0;
  }
  if (Status bench = Bench(dims); !bench.ok()) {
    std::fprintf(stderr, "device_bench: %s\n", bench.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
