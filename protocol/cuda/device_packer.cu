// CUDA implementation of protocol/cuda/device_packer.h: row measures,
// selection, index/value/header bytes on the device; packet cuts and
// checksums on the host (see the header for why).
//
// Float arithmetic is spelled with __fadd_rn/__fmul_rn/__fsqrt_rn so nvcc
// cannot contract it into FMAs: the L2 norms must round exactly like the
// CPU's separate multiply and add.
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <string>
#include <vector>

#include "kernels/varint_index.h"
#include "protocol/cuda/device_packer.h"
#include "protocol/internal/sparse_packet_layout.h"

namespace ps::protocol::gpu {
namespace {

namespace layout = internal;
using kernels::Int8BlockCount;
using kernels::kMaxDetectEntries;
using kernels::RowNorm;
using kernels::VarintBytes;
using kernels::gpu::DeviceAvailable;
using kernels::gpu::DeviceBuffer;

constexpr int kThreads = 256;

Status CudaError(const char* what, cudaError_t err) {
  return Internal(std::string(what) + ": " + cudaGetErrorString(err));
}

Status Check(const char* what, cudaError_t err) {
  return err == cudaSuccess ? Status::OK() : CudaError(what, err);
}

// Checks the launch and waits for the kernel, turning errors into Status.
Status Sync(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  return Check(what, err);
}

// Grid for a grid-stride loop over n items (capped: the loop covers the
// rest).
unsigned GridFor(uint64_t n) {
  const uint64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, 65535u * 8u));
}

// Makes `buffer` hold at least `bytes`; its contents are not kept.
Status Reserve(DeviceBuffer* buffer, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (buffer->data() != nullptr && buffer->size() >= bytes) {
    return Status::OK();
  }
  *buffer = DeviceBuffer();  // free first: the peak stays one buffer
  StatusOr<DeviceBuffer> fresh = DeviceBuffer::Allocate(bytes);
  if (!fresh.ok()) return fresh.status();
  *buffer = std::move(fresh).value();
  return Status::OK();
}

// One packet as the device kernels see it.
struct PacketSlot {
  uint64_t offset;     // where it starts in the packet buffer
  uint64_t first_row;  // position of its first row among the selected rows
  uint32_t row_count;
  uint32_t index_bytes;
  uint32_t payload_bytes;
  uint32_t unused;
};

// The header fields every packet shares.
struct HeaderFields {
  uint64_t step;
  uint32_t table_id, shard_id, sender_id, row_dim, int8_block;
  uint8_t value_type, index_encoding;
};

// ---- Row measures and selection ----

// The order key of |v| as in kernels/sparse_detect_internal.h MagnitudeKey:
// the bits of |v| (which order non-negative floats), NaN mapped to 0.
__device__ uint32_t MagnitudeKey(float v) {
  const uint32_t key = __float_as_uint(v) & 0x7fffffffu;
  return key > 0x7f800000u ? 0u : key;
}

// Eight lanes per row, as ComputeRowNorms' eight accumulators: lane l adds
// values l, l + 8, l + 16, ... in order, then the group combines the lanes
// as ((0+4) + (2+6)) + ((1+5) + (3+7)) with xor shuffles 4, 2, 1 (float
// addition is commutative, so lane 4 computing 4+0 changes no bit). Max-abs
// keeps the CPU's `a > m ? a : m`, which skips NaN; its result does not
// depend on the order.
constexpr unsigned kLanesPerRow = 8;

__global__ void RowNormsKernel(const float* grad, uint64_t rows, uint32_t dim,
                               bool l2, float* norms) {
  const uint64_t t = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t row = t / kLanesPerRow;
  const uint32_t lane = static_cast<uint32_t>(t % kLanesPerRow);
  float acc = 0.0f;
  if (row < rows) {
    const float* v = grad + row * dim;
    for (uint32_t j = lane; j < dim; j += kLanesPerRow) {
      const float x = v[j];
      if (l2) {
        acc = __fadd_rn(acc, __fmul_rn(x, x));
      } else {
        const float a = fabsf(x);
        acc = a > acc ? a : acc;
      }
    }
  }
  // Every lane of the warp gets here (no early return), as the full mask
  // requires; xor offsets below 8 stay inside the row's group.
  for (unsigned offset = kLanesPerRow / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, acc, offset);
    acc = l2 ? __fadd_rn(acc, other) : (other > acc ? other : acc);
  }
  if (row < rows && lane == 0) norms[row] = l2 ? __fsqrt_rn(acc) : acc;
}

// keys[i] = MagnitudeKey(measure[i]) and ids[i] = i; `keys` may alias
// `measure` (each element is read before it is written, by one thread).
__global__ void TopKKeysKernel(const float* measure, uint64_t n, uint32_t* keys,
                               uint32_t* ids) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    keys[i] = MagnitudeKey(measure[i]);
    ids[i] = static_cast<uint32_t>(i);
  }
}

__global__ void IotaKernel(uint64_t n, uint32_t* out) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<uint32_t>(i);
  }
}

// values[r * dim + j] = grad[rows[r] * dim + j].
__global__ void GatherKernel(const float* grad, const uint32_t* rows,
                             uint64_t count, uint32_t dim, float* values) {
  const uint64_t total = count * dim;
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < total;
       k += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = k / dim;
    values[k] = grad[uint64_t{rows[r]} * dim + (k - r * dim)];
  }
}

// ---- Packet bytes ----

// The slot holding selected row i: the last one with first_row <= i.
__device__ const PacketSlot& SlotOf(const PacketSlot* slots, uint32_t count,
                                    uint64_t i) {
  uint32_t lo = 0, hi = count;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (slots[mid].first_row <= i) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return slots[lo];
}

// What row i stores: the index itself first in its packet, else the delta.
__device__ uint32_t IndexValue(const uint32_t* rows, const PacketSlot& slot,
                               uint64_t i) {
  return i == slot.first_row ? rows[i] : rows[i] - rows[i - 1];
}

// As kernels::VarintBytes.
__device__ uint64_t VarintLength(uint32_t v) {
  const int bits = 32 - __clz(static_cast<int>(v | 1u));
  return static_cast<uint64_t>((bits + 6) / 7);
}

__global__ void VarintLengthsKernel(const uint32_t* rows, uint64_t count,
                                    const PacketSlot* slots,
                                    uint32_t slot_count, uint64_t* lengths) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    lengths[i] =
        VarintLength(IndexValue(rows, SlotOf(slots, slot_count, i), i));
  }
}

// `starts` is the exclusive prefix sum of the varint lengths over all rows,
// so a row's place in its packet is its start minus its packet's first.
__global__ void WriteVarintsKernel(const uint32_t* rows, uint64_t count,
                                   const PacketSlot* slots, uint32_t slot_count,
                                   const uint64_t* starts, uint8_t* packets) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const PacketSlot& slot = SlotOf(slots, slot_count, i);
    uint8_t* p = packets + slot.offset + kSparsePacketHeaderBytes +
                 (starts[i] - starts[slot.first_row]);
    uint32_t v = IndexValue(rows, slot, i);
    while (v >= 0x80u) {
      *p++ = static_cast<uint8_t>(v | 0x80u);
      v >>= 7;
    }
    *p = static_cast<uint8_t>(v);
  }
}

// Packets start at multiples of 4 (their sizes are) and the header is 56
// bytes, so the uint32 stores are aligned; the device is little-endian.
__global__ void WriteRawIndexKernel(const uint32_t* rows, uint64_t count,
                                    const PacketSlot* slots,
                                    uint32_t slot_count, uint8_t* packets) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const PacketSlot& slot = SlotOf(slots, slot_count, i);
    uint8_t* p = packets + slot.offset + kSparsePacketHeaderBytes +
                 4 * (i - slot.first_row);
    *reinterpret_cast<uint32_t*>(p) = rows[i];
  }
}

__device__ void StoreLe(uint8_t* p, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) p[b] = static_cast<uint8_t>(v >> (8 * b));
}

// One thread per packet; the checksum field stays zero for the host.
__global__ void WriteHeadersKernel(const PacketSlot* slots, uint32_t slot_count,
                                   HeaderFields h, uint8_t* packets) {
  const uint64_t s = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (s >= slot_count) return;
  const PacketSlot& slot = slots[s];
  uint8_t* p = packets + slot.offset;
  StoreLe(p + layout::kOffMagic, protocol::kSparsePacketMagic, 4);
  p[layout::kOffVersion] = protocol::kSparsePacketVersion;
  p[layout::kOffValueType] = h.value_type;
  p[layout::kOffIndexEncoding] = h.index_encoding;
  p[layout::kOffFlags] = 0;
  StoreLe(p + layout::kOffTable, h.table_id, 4);
  StoreLe(p + layout::kOffShard, h.shard_id, 4);
  StoreLe(p + layout::kOffSender, h.sender_id, 4);
  StoreLe(p + layout::kOffRowDim, h.row_dim, 4);
  StoreLe(p + layout::kOffStep, h.step, 8);
  StoreLe(p + layout::kOffRowCount, slot.row_count, 4);
  StoreLe(p + layout::kOffIndexBytes, slot.index_bytes, 4);
  StoreLe(p + layout::kOffPayloadBytes, slot.payload_bytes, 4);
  StoreLe(p + layout::kOffInt8Block, h.int8_block, 4);
}

// ---- Host planning ----

// Where packets end: the host encoder's own cut (CutPackets), so the device
// packets are the host encoder's packets; each slot adds what the device
// kernels need of its packet.
Status PlanPackets(const SparsePacketMeta& meta, std::span<const uint32_t> rows,
                   size_t max_packet_bytes, std::vector<PacketSlot>* slots,
                   std::vector<EncodedPacket>* packets, size_t* total_bytes) {
  slots->clear();
  packets->clear();
  PS_ASSIGN_OR_RETURN(*total_bytes, protocol::internal::CutPackets(
                                        meta, rows, max_packet_bytes, packets));
  const bool varint = meta.index_encoding == IndexEncoding::kDeltaVarint;
  for (const EncodedPacket& p : *packets) {
    uint64_t index_bytes = 4 * uint64_t{p.row_count};
    if (varint) {
      index_bytes = VarintBytes(rows[p.first_row]);
      for (size_t i = p.first_row + 1; i < p.first_row + p.row_count; ++i) {
        index_bytes += VarintBytes(rows[i] - rows[i - 1]);
      }
    }
    slots->push_back(PacketSlot{
        p.offset, p.first_row, p.row_count, static_cast<uint32_t>(index_bytes),
        static_cast<uint32_t>(p.size - kSparsePacketHeaderBytes), 0});
  }
  return Status::OK();
}

Status CheckOptions(const float* gradient, uint64_t num_rows,
                    const DevicePackOptions& options) {
  PS_RETURN_IF_ERROR(layout::CheckMeta(options.meta, PacketIndex::kRows));
  if (num_rows > kMaxDetectEntries) {
    return OutOfRange(std::to_string(num_rows) +
                      " rows exceed the 2^32 a uint32 row index addresses");
  }
  if (num_rows > 0 && gradient == nullptr) {
    return InvalidArgument("device packer: null gradient");
  }
  switch (options.selection) {
    case RowSelection::kThreshold:
      if (!(options.epsilon >= 0.0f)) {
        return InvalidArgument("threshold epsilon must be >= 0, got " +
                               std::to_string(options.epsilon));
      }
      break;
    case RowSelection::kTopK:
      break;
    default:
      return InvalidArgument("unknown row selection");
  }
  if (options.meta.row_dim > 1 && options.norm != RowNorm::kL2 &&
      options.norm != RowNorm::kMaxAbs) {
    return InvalidArgument("unknown row norm");
  }
  return Status::OK();
}

}  // namespace

Status DevicePacker::Select(const float* gradient, uint64_t num_rows,
                            const DevicePackOptions& options, size_t* count) {
  *count = 0;
  if (num_rows == 0) return Status::OK();
  const uint32_t dim = options.meta.row_dim;
  const bool top_k = options.selection == RowSelection::kTopK;
  if (top_k && options.k == 0) return Status::OK();
  PS_RETURN_IF_ERROR(Reserve(&rows_, num_rows * sizeof(uint32_t)));
  if (top_k && options.k >= num_rows) {  // every row, as DetectTopK
    IotaKernel<<<GridFor(num_rows), kThreads>>>(num_rows, rows_.as<uint32_t>());
    PS_RETURN_IF_ERROR(Sync("device packer: all rows"));
    *count = num_rows;
    return Status::OK();
  }

  // What is compared: |g| itself for one value per row (as ErrorFeedback),
  // else the row norms.
  // norms_ holds the row norms and, for top-k, the radix keys made from
  // them in place (both 4 bytes per row).
  if (dim > 1 || top_k) {
    PS_RETURN_IF_ERROR(Reserve(&norms_, num_rows * sizeof(uint32_t)));
  }
  const float* measure = gradient;
  if (dim > 1) {
    const uint64_t threads = num_rows * kLanesPerRow;
    RowNormsKernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads),
                     kThreads>>>(gradient, num_rows, dim,
                                 options.norm == RowNorm::kL2,
                                 norms_.as<float>());
    PS_RETURN_IF_ERROR(Sync("device packer: row norms"));
    measure = norms_.as<float>();
  }

  if (!top_k) {
    // The existing threshold kernel keeps the rows in increasing order; the
    // measures it also writes out are not needed (sort_a_ is scratch).
    PS_RETURN_IF_ERROR(Reserve(&sort_a_, num_rows * sizeof(float)));
    return kernels::gpu::DetectThreshold(measure, num_rows, options.epsilon,
                                         rows_.as<uint32_t>(),
                                         sort_a_.as<float>(), num_rows, count);
  }

  // Top-k: a stable descending radix sort of (key, row) keeps equal keys in
  // row order, so the first k are the k largest with ties to the lower row;
  // then those k rows are sorted into increasing order.
  PS_RETURN_IF_ERROR(Reserve(&sort_a_, num_rows * sizeof(uint32_t)));
  PS_RETURN_IF_ERROR(Reserve(&sort_b_, num_rows * sizeof(uint32_t)));
  uint32_t* keys = norms_.as<uint32_t>();
  uint32_t* ids = rows_.as<uint32_t>();
  uint32_t* sorted_keys = sort_a_.as<uint32_t>();
  uint32_t* sorted_ids = sort_b_.as<uint32_t>();
  TopKKeysKernel<<<GridFor(num_rows), kThreads>>>(measure, num_rows, keys, ids);
  PS_RETURN_IF_ERROR(Sync("device packer: top-k keys"));
  const uint64_t k = options.k;
  // Keys are at most 0x7f800000: bits [0, 31) order them.
  constexpr int kKeyBits = 31;
  size_t sort_bytes = 0, row_sort_bytes = 0;
  PS_RETURN_IF_ERROR(Check("cub SortPairsDescending (size)",
                           cub::DeviceRadixSort::SortPairsDescending(
                               nullptr, sort_bytes, keys, sorted_keys, ids,
                               sorted_ids, num_rows, 0, kKeyBits)));
  PS_RETURN_IF_ERROR(Check("cub SortKeys (size)",
                           cub::DeviceRadixSort::SortKeys(
                               nullptr, row_sort_bytes, sorted_ids, ids, k)));
  PS_RETURN_IF_ERROR(Reserve(&cub_temp_, std::max(sort_bytes, row_sort_bytes)));
  sort_bytes = cub_temp_.size();
  PS_RETURN_IF_ERROR(Check("cub SortPairsDescending",
                           cub::DeviceRadixSort::SortPairsDescending(
                               cub_temp_.data(), sort_bytes, keys, sorted_keys,
                               ids, sorted_ids, num_rows, 0, kKeyBits)));
  PS_RETURN_IF_ERROR(Sync("device packer: top-k sort"));
  row_sort_bytes = cub_temp_.size();
  PS_RETURN_IF_ERROR(Check("cub SortKeys", cub::DeviceRadixSort::SortKeys(
                                               cub_temp_.data(), row_sort_bytes,
                                               sorted_ids, ids, k)));
  PS_RETURN_IF_ERROR(Sync("device packer: top-k rows"));
  *count = k;
  return Status::OK();
}

Status DevicePacker::Build(const float* gradient, uint64_t num_rows,
                           const DevicePackOptions& options,
                           DevicePackResult* result) {
  result->rows.clear();
  result->packets.clear();
  result->bytes = 0;
  PS_RETURN_IF_ERROR(CheckOptions(gradient, num_rows, options));
  if (num_rows == 0) return Status::OK();
  PS_RETURN_IF_ERROR(DeviceAvailable());
  // Sync reads cudaGetLastError, which also holds the error of an earlier
  // failed call on this thread (a cudaMalloc of the last Pack, reported
  // then): cleared, so it does not fail this pack after its work ran.
  (void)cudaGetLastError();
  size_t count = 0;
  PS_RETURN_IF_ERROR(Select(gradient, num_rows, options, &count));
  if (count == 0) return Status::OK();  // no packet, as the host encoder

  result->rows.resize(count);
  PS_RETURN_IF_ERROR(
      Check("cudaMemcpy selected rows D2H",
            cudaMemcpy(result->rows.data(), rows_.data(),
                       count * sizeof(uint32_t), cudaMemcpyDeviceToHost)));
  const SparsePacketMeta& meta = options.meta;
  std::vector<PacketSlot> slots;
  PS_RETURN_IF_ERROR(PlanPackets(meta, result->rows, options.max_packet_bytes,
                                 &slots, &result->packets, &result->bytes));
  const uint32_t slot_count = static_cast<uint32_t>(slots.size());
  PS_RETURN_IF_ERROR(Reserve(&slots_, slots.size() * sizeof(PacketSlot)));
  PS_RETURN_IF_ERROR(
      slots_.CopyFromHost(slots.data(), slots.size() * sizeof(PacketSlot)));
  const PacketSlot* device_slots = slots_.as<PacketSlot>();

  // Zeroed first: the padding after the index and after the values, and the
  // checksum the host fills in, are the bytes nobody writes below.
  PS_RETURN_IF_ERROR(Reserve(&packets_, result->bytes));
  uint8_t* packets = packets_.as<uint8_t>();
  PS_RETURN_IF_ERROR(
      Check("cudaMemset packets", cudaMemset(packets, 0, result->bytes)));
  const uint32_t* rows = rows_.as<uint32_t>();

  // Index sections.
  if (meta.index_encoding == IndexEncoding::kDeltaVarint) {
    PS_RETURN_IF_ERROR(Reserve(&offsets_, 2 * count * sizeof(uint64_t)));
    uint64_t* lengths = offsets_.as<uint64_t>();
    uint64_t* starts = lengths + count;
    VarintLengthsKernel<<<GridFor(count), kThreads>>>(rows, count, device_slots,
                                                      slot_count, lengths);
    PS_RETURN_IF_ERROR(Sync("device packer: varint lengths"));
    size_t scan_bytes = 0;
    PS_RETURN_IF_ERROR(
        Check("cub ExclusiveSum (size)",
              cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, lengths,
                                            starts, uint64_t{count})));
    PS_RETURN_IF_ERROR(Reserve(&cub_temp_, scan_bytes));
    scan_bytes = cub_temp_.size();
    PS_RETURN_IF_ERROR(
        Check("cub ExclusiveSum",
              cub::DeviceScan::ExclusiveSum(cub_temp_.data(), scan_bytes,
                                            lengths, starts, uint64_t{count})));
    WriteVarintsKernel<<<GridFor(count), kThreads>>>(
        rows, count, device_slots, slot_count, starts, packets);
    PS_RETURN_IF_ERROR(Sync("device packer: varint index"));
  } else {
    WriteRawIndexKernel<<<GridFor(count), kThreads>>>(rows, count, device_slots,
                                                      slot_count, packets);
    PS_RETURN_IF_ERROR(Sync("device packer: raw index"));
  }

  // Values: gather the selected rows, then quantize each packet's share in
  // place. int8 packets are cut on block borders, so a packet's blocks are
  // the blocks of the whole push, as in the host encoder.
  const uint32_t dim = meta.row_dim;
  PS_RETURN_IF_ERROR(Reserve(&values_, count * dim * sizeof(float)));
  float* values = values_.as<float>();
  GatherKernel<<<GridFor(uint64_t{count} * dim), kThreads>>>(
      gradient, rows, count, dim, values);
  PS_RETURN_IF_ERROR(Sync("device packer: gather"));
  for (const PacketSlot& slot : slots) {
    const uint64_t n = uint64_t{slot.row_count} * dim;
    const float* in = values + slot.first_row * dim;
    uint8_t* section = packets + slot.offset + kSparsePacketHeaderBytes +
                       layout::Align4(slot.index_bytes);
    switch (meta.value_type) {
      case ValueType::kFp32:
        PS_RETURN_IF_ERROR(Check("cudaMemcpy fp32 values D2D",
                                 cudaMemcpy(section, in, n * sizeof(float),
                                            cudaMemcpyDeviceToDevice)));
        break;
      case ValueType::kFp16:
        PS_RETURN_IF_ERROR(kernels::gpu::QuantizeFp16(
            in, n, reinterpret_cast<uint16_t*>(section)));
        break;
      case ValueType::kBf16:
        PS_RETURN_IF_ERROR(kernels::gpu::QuantizeBf16(
            in, n, reinterpret_cast<uint16_t*>(section)));
        break;
      case ValueType::kInt8: {
        const uint64_t scales = Int8BlockCount(n, meta.int8_block);
        PS_RETURN_IF_ERROR(kernels::gpu::QuantizeInt8(
            in, n, meta.int8_block,
            reinterpret_cast<int8_t*>(section + 4 * scales),
            reinterpret_cast<float*>(section)));
        break;
      }
    }
  }

  HeaderFields h{};
  h.step = meta.step;
  h.table_id = meta.table_id;
  h.shard_id = meta.shard_id;
  h.sender_id = meta.sender_id;
  h.row_dim = meta.row_dim;
  h.int8_block = meta.value_type == ValueType::kInt8 ? meta.int8_block : 0;
  h.value_type = static_cast<uint8_t>(meta.value_type);
  h.index_encoding = static_cast<uint8_t>(meta.index_encoding);
  WriteHeadersKernel<<<(slot_count + kThreads - 1) / kThreads, kThreads>>>(
      device_slots, slot_count, h, packets);
  return Sync("device packer: headers");
}

Status DevicePacker::Finish(const DevicePackResult& result, uint8_t* out) {
  if (result.bytes == 0) return Status::OK();
  PS_RETURN_IF_ERROR(Check(
      "cudaMemcpy packets D2H",
      cudaMemcpy(out, packets_.data(), result.bytes, cudaMemcpyDeviceToHost)));
  // The checksum covers the finished bytes, so it is computed here, with
  // the function the host encoder uses.
  for (const EncodedPacket& pk : result.packets) {
    uint8_t* p = out + pk.offset;
    layout::StoreU64(p + layout::kOffChecksum, layout::ChecksumOf(p, pk.size));
  }
  return Status::OK();
}

Status DevicePacker::Pack(const float* gradient, uint64_t num_rows,
                          const DevicePackOptions& options,
                          std::span<uint8_t> out, DevicePackResult* result) {
  PS_RETURN_IF_ERROR(Build(gradient, num_rows, options, result));
  if (out.size() < result->bytes) {
    return OutOfRange("device packer: the packets take " +
                      std::to_string(result->bytes) +
                      " bytes, the output holds " + std::to_string(out.size()));
  }
  return Finish(*result, out.data());
}

Status DevicePacker::Pack(const float* gradient, uint64_t num_rows,
                          const DevicePackOptions& options,
                          std::vector<uint8_t>* out, DevicePackResult* result) {
  out->clear();
  PS_RETURN_IF_ERROR(Build(gradient, num_rows, options, result));
  out->resize(result->bytes);
  Status status = Finish(*result, out->data());
  if (!status.ok()) out->clear();
  return status;
}

}  // namespace ps::protocol::gpu
