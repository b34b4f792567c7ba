// Sparse gradient packets built on the GPU: from the dense gradient of one
// table shard held in device memory (num_rows x row_dim floats, row-major),
// select the rows to send, quantize their values and write the packet bytes
// on the device, then copy the finished packets to a caller's host buffer.
//
// The result is byte for byte what protocol::EncodeSparsePackets writes for
// the same rows and values (same packet cuts, header, index section, int8
// scales, values and zero padding), so the server's decoder cannot tell the
// two apart. The selection is the one the worker's error feedback makes on
// the CPU (kernels/error_feedback.cc over kernels/sparse_detect.h):
//   - row_dim == 1: each row is one value, measured by |g| (RowNorm ignored);
//   - row_dim > 1: the row's norm, kL2 (the worker's default) or kMaxAbs,
//     computed in the same order as ComputeRowNorms, so the same bits;
//   - kThreshold: rows with measure >= epsilon; NaN never passes;
//   - kTopK: the k rows of largest measure, ties to the lower row, NaN
//     ranked like zero (so with k large enough a NaN row is sent, as on the
//     CPU); k >= num_rows sends every row.
// Quantization uses the device kernels of gpu_kernels.h, bit-identical to
// kernels/quantize.h. Error feedback (the residual of what was not sent) is
// not part of this: the caller keeps the dense gradient.
//
// Where the work happens: row norms, selection (CUB radix sort for top-k),
// the varint lengths and their prefix sum, the index, value and header
// bytes are computed on the device. The host copies the selected row
// indices back (they are part of the result and decide where packets are
// cut, exactly as the host encoder's greedy cut does), and computes each
// packet's XXH3 checksum after the final copy (protocol's ChecksumOf), since
// a device XXH3 would be a second implementation to keep in step.
//
// No CUDA headers here. Everything runs on the default stream and Pack
// returns after the device has finished (as gpu_kernels.h).
//
// Thread-safety: a DevicePacker keeps device scratch buffers between calls,
// so one packer serves one thread at a time; separate packers are
// independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/gpu_kernels.h"
#include "kernels/sparse_detect.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol::gpu {

// How the rows to send are chosen.
enum class RowSelection : uint8_t {
  kThreshold = 0,  // measure >= epsilon
  kTopK = 1,       // the k largest measures
};

struct DevicePackOptions {
  // Written into every packet; row_dim is the gradient's row width.
  protocol::SparsePacketMeta meta;
  RowSelection selection = RowSelection::kThreshold;
  float epsilon = 0.0f;  // kThreshold; >= 0 and not NaN
  size_t k = 0;          // kTopK
  kernels::RowNorm norm = kernels::RowNorm::kL2;  // row_dim > 1 only
  // Each packet's size limit, as for EncodeSparsePackets (an inbox slot).
  size_t max_packet_bytes = 0;
};

struct DevicePackResult {
  std::vector<uint32_t> rows;  // the selected rows, increasing
  // The packets inside the caller's buffer (first_row indexes `rows`).
  std::vector<protocol::EncodedPacket> packets;
  size_t bytes = 0;  // total size of all packets
};

class DevicePacker {
 public:
  DevicePacker() = default;
  DevicePacker(const DevicePacker&) = delete;
  DevicePacker& operator=(const DevicePacker&) = delete;

  // Packs `gradient` (device memory, num_rows * meta.row_dim floats) into
  // `out` (host memory, pinned or not). No selected row: no packet, OK,
  // result->bytes 0. If `out` is too small: OutOfRange, with result->rows,
  // ->packets and ->bytes (the size needed) filled and nothing copied.
  // Other errors: InvalidArgument (bad meta or options, max_packet_bytes
  // too small for one row, null gradient), OutOfRange (more than 2^32
  // rows), NotSupported (no device), Internal (a CUDA error, named).
  Status Pack(const float* gradient, uint64_t num_rows,
              const DevicePackOptions& options, std::span<uint8_t> out,
              DevicePackResult* result);

  // The same into a vector resized to the packets' total size (cleared when
  // there is none).
  Status Pack(const float* gradient, uint64_t num_rows,
              const DevicePackOptions& options, std::vector<uint8_t>* out,
              DevicePackResult* result);

 private:
  // Selects rows into rows_ and returns how many, or an error.
  Status Select(const float* gradient, uint64_t num_rows,
                const DevicePackOptions& options, size_t* count);
  // Selection, planning and the packet bytes in packets_; result filled.
  Status Build(const float* gradient, uint64_t num_rows,
               const DevicePackOptions& options, DevicePackResult* result);
  // Copies the packets to `out` (result->bytes of room) and checksums them.
  Status Finish(const DevicePackResult& result, uint8_t* out);

  // Scratch, grown as needed and kept for the next call.
  kernels::gpu::DeviceBuffer
      norms_;  // row measures (float) or radix keys (uint32)
  kernels::gpu::DeviceBuffer rows_;      // selected rows (uint32)
  kernels::gpu::DeviceBuffer sort_a_;    // top-k: sorted keys, then row ids
  kernels::gpu::DeviceBuffer sort_b_;    // top-k: row ids
  kernels::gpu::DeviceBuffer cub_temp_;  // CUB temporary storage
  kernels::gpu::DeviceBuffer values_;    // gathered row values (float)
  kernels::gpu::DeviceBuffer
      offsets_;  // varint lengths, then their prefix sums (u64)
  kernels::gpu::DeviceBuffer slots_;    // per-packet descriptors
  kernels::gpu::DeviceBuffer packets_;  // the packet bytes
};

}  // namespace ps::protocol::gpu
