// CUDA implementation of protocol/cuda/device_decoder.h: the varint index
// section through two CUB scans, raw indices and values one thread per
// element, every rule the CPU decoder checks reported into one guard word.
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/device/device_scan.cuh>
#include <string>

#include "kernels/cuda/gpu_kernels.h"
#include "kernels/quantize.h"
#include "protocol/cuda/device_decoder.h"
#include "protocol/internal/sparse_packet_layout.h"

namespace ps::protocol::gpu {
namespace {

using kernels::gpu::DeviceAvailable;
using kernels::gpu::DeviceBuffer;

constexpr int kThreads = 256;
// Scratch sections start on cudaMalloc's alignment, so every section is
// aligned for any element type and for CUB.
constexpr size_t kAlign = 256;
size_t Aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The rules, in the order the CPU decoder checks them: the guard word keeps
// the smallest (rule << 56 | position), so the rule the CPU would report
// first wins, and within a rule the first position.
enum Rule : uint32_t {
  kVarintTooLong = 0,  // Corruption: a varint over 32 bits
  kIndexLength = 1,    // Corruption: not exactly row_count varints in
                       // exactly index_bytes
  kNotIncreasing = 2,  // InvalidArgument
  kRowOutOfRange = 3,  // OutOfRange
  kBadScale = 4,       // Corruption: int8 scale not finite and >= 0
  kInt8Minus128 = 5,   // Corruption
  kNonFinite = 6,      // Corruption
};
constexpr int kRuleShift = 56;

// Grid for a grid-stride loop over n items (capped: the loop covers the
// rest), as device_packer.cu.
unsigned GridFor(uint64_t n) {
  const uint64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, 65535u * 8u));
}

Status LaunchError(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Status::OK();
  return Internal(std::string("device decode: ") + what + ": " +
                  cudaGetErrorString(err));
}

Status Check(const char* what, cudaError_t err) {
  if (err == cudaSuccess) return Status::OK();
  return Internal(std::string("device decode: ") + what + ": " +
                  cudaGetErrorString(err));
}

__device__ void Report(uint64_t* error, Rule rule, uint64_t position) {
  atomicMin(reinterpret_cast<unsigned long long*>(error),
            static_cast<unsigned long long>((uint64_t{rule} << kRuleShift) |
                                            position));
}

// The rows a packet may name: < table_rows and < 2^32 (a row index is a
// uint32 in the table).
uint64_t RowLimit(uint64_t table_rows) {
  return std::min<uint64_t>(table_rows, uint64_t{1} << 32);
}

// ---- Indices ----

// ends[p] = 1 where byte p ends a varint (high bit clear).
__global__ void VarintEndsKernel(const uint8_t* section, uint32_t bytes,
                                 uint32_t* ends) {
  for (uint64_t p = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; p < bytes;
       p += uint64_t{gridDim.x} * blockDim.x) {
    ends[p] = section[p] < 0x80u ? 1u : 0u;
  }
}

// `counts` is the inclusive scan of the ends: the byte p that ends a varint
// ends varint counts[p] - 1. Its own start is found by looking back over the
// continuation bytes before it (at most five are legal); the section is
// whole when the last byte ends varint row_count - 1.
__global__ void VarintDeltasKernel(const uint8_t* section, uint32_t bytes,
                                   const uint32_t* counts, uint32_t n,
                                   uint64_t* deltas, uint64_t* error) {
  for (uint64_t p = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; p < bytes;
       p += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t b = section[p];
    if (p == bytes - 1 && (b >= 0x80u || counts[p] != n)) {
      // Ends inside an index, or bytes (or whole varints) after the last.
      Report(error, kIndexLength, counts[p]);
    }
    if (b >= 0x80u) continue;
    const uint64_t i = counts[p] - 1;
    if (i >= n) continue;  // past the last index: reported above
    // Bytes of this varint: this one and the continuation bytes before it.
    uint32_t length = 1;
    while (length <= 5 && p >= length && section[p - length] >= 0x80u) {
      ++length;
    }
    // Over five bytes: its fifth byte has the high bit set, so it is > 0x0f,
    // which the CPU reader refuses as "does not fit in 32 bits"; so is a
    // fifth and last byte above 0x0f.
    if (length > 5 || (length == 5 && b > 0x0fu)) {
      Report(error, kVarintTooLong, i);
      continue;
    }
    const uint8_t* v = section + (p + 1 - length);
    uint32_t delta = 0;
    for (uint32_t k = 0; k < length; ++k) {
      delta |= (static_cast<uint32_t>(v[k]) & 0x7fu) << (7 * k);
    }
    deltas[i] = delta;
  }
}

// rows from the inclusive scan of the deltas (64-bit: a sum past 2^32 is a
// row out of range, not a wrapped one).
__global__ void VarintRowsKernel(const uint64_t* deltas, const uint64_t* sums,
                                 uint32_t n, uint64_t limit, uint32_t* rows,
                                 uint64_t* error) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    if (i > 0 && deltas[i] == 0) Report(error, kNotIncreasing, i);
    const uint64_t row = sums[i];
    if (row >= limit) Report(error, kRowOutOfRange, i);
    rows[i] = static_cast<uint32_t>(row);
  }
}

// Raw little-endian uint32 indices (4-byte aligned: the payload is, and the
// index section starts it).
__global__ void RawRowsKernel(const uint32_t* section, uint32_t n,
                              uint64_t limit, uint32_t* rows, uint64_t* error) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t row = section[i];
    if (i > 0 && row <= section[i - 1]) Report(error, kNotIncreasing, i);
    if (row >= limit) Report(error, kRowOutOfRange, i);
    rows[i] = row;
  }
}

// ---- Values ----

// As kernels::Fp16ToFloat, bit for bit.
__device__ float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // mant * 2^-24 is exact (mant < 2^10).
    const float mag = __fmul_rn(static_cast<float>(mant), 0x1p-24f);
    return __uint_as_float(sign | __float_as_uint(mag));
  }
  if (exp == 31) {
    const uint32_t quiet = mant != 0 ? 0x400000u : 0u;
    return __uint_as_float(sign | 0x7f800000u | quiet | (mant << 13));
  }
  return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
}

__device__ bool Finite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

template <ValueType kType>
__global__ void ValuesKernel(const uint8_t* section, uint64_t total,
                             uint32_t int8_block, float* out, uint64_t* error) {
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < total;
       k += uint64_t{gridDim.x} * blockDim.x) {
    float v;
    if constexpr (kType == ValueType::kFp32) {
      v = reinterpret_cast<const float*>(section)[k];
    } else if constexpr (kType == ValueType::kFp16) {
      v = Fp16ToFloat(reinterpret_cast<const uint16_t*>(section)[k]);
    } else if constexpr (kType == ValueType::kBf16) {
      v = __uint_as_float(
          static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(section)[k])
          << 16);
    } else {
      const uint64_t blocks = (total + int8_block - 1) / int8_block;
      const uint64_t b = k / int8_block;
      const float scale = reinterpret_cast<const float*>(section)[b];
      // One thread per block checks its scale (each block has a first
      // value), as CheckInt8Section: finite and >= 0.
      if (k == b * int8_block && !(scale >= 0.0f && Finite(scale))) {
        Report(error, kBadScale, b);
      }
      const int8_t q = reinterpret_cast<const int8_t*>(section + 4 * blocks)[k];
      if (q == -128) Report(error, kInt8Minus128, k);
      v = __fmul_rn(static_cast<float>(q), scale);
    }
    if (!Finite(v)) Report(error, kNonFinite, k);
    out[k] = v;
  }
}

// ---- Scratch layout ----

struct Layout {
  size_t error = 0, rows = 0, values = 0;                      // results
  size_t ends = 0, counts = 0, deltas = 0, sums = 0, cub = 0;  // varint only
  size_t cub_bytes = 0;
  size_t total = 0;
};

Status PlanLayout(const SparsePacketHeader& h, Layout* l) {
  const uint64_t n = h.row_count;
  const uint64_t values = n * h.meta.row_dim;
  switch (h.meta.value_type) {
    case ValueType::kFp32:
    case ValueType::kFp16:
    case ValueType::kBf16:
    case ValueType::kInt8:
      break;
    default:
      return InvalidArgument(
          "device decode: unknown value type " +
          std::to_string(static_cast<int>(h.meta.value_type)));
  }
  size_t at = 0;
  l->error = at;
  at += Aligned(sizeof(uint64_t));
  l->rows = at;
  at += Aligned(n * sizeof(uint32_t));
  l->values = at;
  at += Aligned(values * sizeof(float));
  if (h.meta.index_encoding == IndexEncoding::kRawU32) {
    l->total = at;
    return Status::OK();
  }
  if (h.meta.index_encoding != IndexEncoding::kDeltaVarint) {
    return InvalidArgument(
        "device decode: unknown index encoding " +
        std::to_string(static_cast<int>(h.meta.index_encoding)));
  }
  const uint64_t bytes = h.index_bytes;
  l->ends = at;
  at += Aligned(bytes * sizeof(uint32_t));
  l->counts = at;
  at += Aligned(bytes * sizeof(uint32_t));
  l->deltas = at;
  at += Aligned(n * sizeof(uint64_t));
  l->sums = at;
  at += Aligned(n * sizeof(uint64_t));
  // CUB sizes its temporary storage from the types and the count alone.
  size_t ends_scan = 0, rows_scan = 0;
  PS_RETURN_IF_ERROR(Check(
      "cub InclusiveSum (size)",
      cub::DeviceScan::InclusiveSum(nullptr, ends_scan,
                                    static_cast<const uint32_t*>(nullptr),
                                    static_cast<uint32_t*>(nullptr), bytes)));
  PS_RETURN_IF_ERROR(
      Check("cub InclusiveSum (size)",
            cub::DeviceScan::InclusiveSum(nullptr, rows_scan,
                                          static_cast<const uint64_t*>(nullptr),
                                          static_cast<uint64_t*>(nullptr), n)));
  l->cub = at;
  l->cub_bytes = std::max<size_t>(std::max(ends_scan, rows_scan), 1);
  at += Aligned(l->cub_bytes);
  l->total = at;
  return Status::OK();
}

Status LaunchValues(ValueType type, const uint8_t* section, uint64_t total,
                    uint32_t int8_block, float* out, uint64_t* error,
                    cudaStream_t stream) {
  const unsigned grid = GridFor(total);
  switch (type) {
    case ValueType::kFp32:
      ValuesKernel<ValueType::kFp32>
          <<<grid, kThreads, 0, stream>>>(section, total, 0, out, error);
      break;
    case ValueType::kFp16:
      ValuesKernel<ValueType::kFp16>
          <<<grid, kThreads, 0, stream>>>(section, total, 0, out, error);
      break;
    case ValueType::kBf16:
      ValuesKernel<ValueType::kBf16>
          <<<grid, kThreads, 0, stream>>>(section, total, 0, out, error);
      break;
    case ValueType::kInt8:
      if (int8_block == 0) {
        return InvalidArgument("device decode: int8_block is 0");
      }
      ValuesKernel<ValueType::kInt8><<<grid, kThreads, 0, stream>>>(
          section, total, int8_block, out, error);
      break;
  }
  return LaunchError("values");
}

}  // namespace

Status DecodeScratchBytes(const SparsePacketHeader& header, size_t* bytes) {
  Layout l;
  PS_RETURN_IF_ERROR(PlanLayout(header, &l));
  *bytes = l.total;
  return Status::OK();
}

Status LaunchDecodePacket(const SparsePacketHeader& header,
                          const uint8_t* payload, uint64_t table_rows,
                          void* scratch, size_t scratch_bytes,
                          DecodedPacket* out, void* stream_ptr) {
  Layout l;
  PS_RETURN_IF_ERROR(PlanLayout(header, &l));
  if (scratch_bytes < l.total || scratch == nullptr || payload == nullptr) {
    return InvalidArgument("device decode: scratch of " +
                           std::to_string(scratch_bytes) + " bytes, need " +
                           std::to_string(l.total));
  }
  if (header.row_count == 0) {
    return InvalidArgument("device decode: row_count is 0 (empty packet)");
  }
  auto* base = static_cast<char*>(scratch);
  out->error = reinterpret_cast<uint64_t*>(base + l.error);
  out->rows = reinterpret_cast<uint32_t*>(base + l.rows);
  out->values = reinterpret_cast<float*>(base + l.values);
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const uint32_t n = header.row_count;
  const uint64_t limit = RowLimit(table_rows);
  // A stale error of an earlier call on this thread would otherwise be
  // reported as this launch's.
  (void)cudaGetLastError();
  PS_RETURN_IF_ERROR(
      Check("cudaMemsetAsync guard",
            cudaMemsetAsync(out->error, 0xff, sizeof(uint64_t), stream)));

  if (header.meta.index_encoding == IndexEncoding::kRawU32) {
    RawRowsKernel<<<GridFor(n), kThreads, 0, stream>>>(
        reinterpret_cast<const uint32_t*>(payload), n, limit, out->rows,
        out->error);
    PS_RETURN_IF_ERROR(LaunchError("raw indices"));
  } else {
    const uint32_t bytes = header.index_bytes;
    auto* ends = reinterpret_cast<uint32_t*>(base + l.ends);
    auto* counts = reinterpret_cast<uint32_t*>(base + l.counts);
    auto* deltas = reinterpret_cast<uint64_t*>(base + l.deltas);
    auto* sums = reinterpret_cast<uint64_t*>(base + l.sums);
    void* cub_temp = base + l.cub;
    size_t cub_bytes = l.cub_bytes;
    VarintEndsKernel<<<GridFor(bytes), kThreads, 0, stream>>>(payload, bytes,
                                                              ends);
    PS_RETURN_IF_ERROR(LaunchError("varint ends"));
    PS_RETURN_IF_ERROR(
        Check("cub InclusiveSum (varint ends)",
              cub::DeviceScan::InclusiveSum(cub_temp, cub_bytes,
                                            static_cast<const uint32_t*>(ends),
                                            counts, uint64_t{bytes}, stream)));
    // Deltas no varint writes (a section with too few) stay as they were;
    // the guard holds kIndexLength then, which outranks what they cause.
    VarintDeltasKernel<<<GridFor(bytes), kThreads, 0, stream>>>(
        payload, bytes, counts, n, deltas, out->error);
    PS_RETURN_IF_ERROR(LaunchError("varint deltas"));
    cub_bytes = l.cub_bytes;
    PS_RETURN_IF_ERROR(Check(
        "cub InclusiveSum (rows)",
        cub::DeviceScan::InclusiveSum(cub_temp, cub_bytes,
                                      static_cast<const uint64_t*>(deltas),
                                      sums, uint64_t{n}, stream)));
    VarintRowsKernel<<<GridFor(n), kThreads, 0, stream>>>(
        deltas, sums, n, limit, out->rows, out->error);
    PS_RETURN_IF_ERROR(LaunchError("varint rows"));
  }

  const uint64_t total = uint64_t{n} * header.meta.row_dim;
  const uint8_t* values =
      payload + protocol::internal::Align4(header.index_bytes);
  return LaunchValues(header.meta.value_type, values, total,
                      header.meta.int8_block, out->values, out->error, stream);
}

Status DecodeStatus(uint64_t error, const SparsePacketHeader& header,
                    uint64_t table_rows) {
  if (error == kDecodeClear) return Status::OK();
  const uint64_t rule = error >> kRuleShift;
  const std::string at =
      std::to_string(error & ((uint64_t{1} << kRuleShift) - 1));
  switch (rule) {
    case kVarintTooLong:
      return Corruption("varint index " + at + " does not fit in 32 bits");
    case kIndexLength:
      return Corruption("index section (" + std::to_string(header.index_bytes) +
                        " bytes) holds " + at +
                        " complete varints, not exactly " +
                        std::to_string(header.row_count) +
                        " (it ends inside an index or has bytes left after "
                        "the last)");
    case kNotIncreasing:
      return InvalidArgument("row indices not strictly increasing at " + at);
    case kRowOutOfRange:
      return OutOfRange("row index " + at +
                        " of the packet is outside the table's " +
                        std::to_string(table_rows) + " rows");
    case kBadScale:
      return Corruption("int8 scale " + at + " is not finite and >= 0");
    case kInt8Minus128:
      return Corruption("int8 value -128 (the encoder uses [-127, 127])");
    case kNonFinite:
      return Corruption("packet carries a non-finite value (value " + at + ")");
    default:
      return Internal("device decode: unknown guard word " +
                      std::to_string(error));
  }
}

StatusOr<SparsePacketHeader> CheckPacketOnHost(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect) {
  // The device decodes rows only: a keyed packet is refused here, whatever
  // the caller admits.
  SparsePacketExpectations rows_only = expect;
  rows_only.index = PacketIndex::kRows;
  PS_ASSIGN_OR_RETURN(SparsePacketHeader header,
                      ParseSparsePacketHeader(packet, rows_only));
  PS_RETURN_IF_ERROR(internal::CheckChecksumAndPadding(packet, header));
  return header;
}

Status DecodePacketToHost(std::span<const uint8_t> packet,
                          const protocol::SparsePacketExpectations& expect,
                          std::vector<uint32_t>* rows,
                          std::vector<float>* values,
                          SparsePacketHeader* header_out) {
  PS_RETURN_IF_ERROR(DeviceAvailable());
  PS_ASSIGN_OR_RETURN(SparsePacketHeader header,
                      CheckPacketOnHost(packet, expect));
  size_t scratch_bytes = 0;
  PS_RETURN_IF_ERROR(DecodeScratchBytes(header, &scratch_bytes));
  PS_ASSIGN_OR_RETURN(DeviceBuffer payload,
                      DeviceBuffer::Allocate(header.payload_bytes));
  PS_ASSIGN_OR_RETURN(DeviceBuffer scratch,
                      DeviceBuffer::Allocate(scratch_bytes));
  PS_RETURN_IF_ERROR(
      payload.CopyFromHost(packet.data() + protocol::kSparsePacketHeaderBytes,
                           header.payload_bytes));
  DecodedPacket decoded;
  PS_RETURN_IF_ERROR(LaunchDecodePacket(header, payload.as<uint8_t>(),
                                        expect.table_rows, scratch.data(),
                                        scratch_bytes, &decoded, nullptr));
  uint64_t error = 0;
  PS_RETURN_IF_ERROR(Check(
      "cudaMemcpy guard D2H",
      cudaMemcpy(&error, decoded.error, sizeof error, cudaMemcpyDeviceToHost)));
  PS_RETURN_IF_ERROR(DecodeStatus(error, header, expect.table_rows));
  const uint64_t n = header.row_count;
  rows->resize(n);
  values->resize(n * header.meta.row_dim);
  PS_RETURN_IF_ERROR(Check(
      "cudaMemcpy rows D2H",
      cudaMemcpy(rows->data(), decoded.rows, rows->size() * sizeof(uint32_t),
                 cudaMemcpyDeviceToHost)));
  PS_RETURN_IF_ERROR(Check(
      "cudaMemcpy values D2H",
      cudaMemcpy(values->data(), decoded.values, values->size() * sizeof(float),
                 cudaMemcpyDeviceToHost)));
  if (header_out != nullptr) *header_out = header;
  return Status::OK();
}

}  // namespace ps::protocol::gpu
