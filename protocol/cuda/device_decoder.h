// Sparse packets decoded on the GPU: given the payload of a packet whose
// header and checksum the host has already checked (protocol/sparse_packet.h
// owns the format), decode the row indices and dequantize the values to fp32
// in device memory, and validate on the device what
// protocol::DecodeSparsePacket validates after the checksum:
//   - kDeltaVarint: exactly row_count varints using exactly index_bytes (a
//     varint over 32 bits, a section ending inside an index or bytes left
//     after the last: Corruption), no delta 0 after the first
//     (InvalidArgument, "not strictly increasing");
//   - kRawU32: strictly increasing (InvalidArgument);
//   - every row < table_rows (and < 2^32): OutOfRange;
//   - int8: every scale finite and >= 0, no value -128 (Corruption);
//   - every dequantized value finite (Corruption).
// Where a packet breaks several rules the Status is the one the CPU decoder
// returns (it checks in the order above), so the device path and the host
// path refuse a packet with the same code.
//
// The results are bit-identical to the CPU decoder's: rows are integer
// arithmetic, fp16/bf16 are widened with the bit operations of
// kernels/quantize.cc, int8 is one float multiply (q * scale, no add for nvcc
// to contract).
//
// How: varints are decoded without a sequential walk. One pass flags the
// bytes that end a varint (high bit clear); a CUB inclusive scan of the flags
// numbers the varints; each ending byte looks back at most five bytes to
// read its delta and check its length; a second CUB inclusive scan (uint64,
// so a sum past 2^32 is seen, not wrapped) turns deltas into rows.
//
// Validation result: a word in device memory that the decode kernels lower
// with atomicMin to (rule, position) of the worst violation, all ones when
// there is none (kDecodeClear). The apply kernels of device_optimizers.h take
// it as their guard: launched after the decode on the same stream, they
// touch no row unless it still reads kDecodeClear. The host reads it after
// synchronizing the stream and turns it into a Status (DecodeStatus).
//
// Streams: LaunchDecodePacket only enqueues work on the caller's stream
// (void* cudaStream_t, nullptr = legacy default stream), as
// device_optimizers.h does; it calls no synchronizing CUDA function.
//
// Thread-safety: no state; concurrent calls need separate scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/cuda/device_optimizers.h"
#include "protocol/sparse_packet.h"

namespace ps::protocol::gpu {

// The guard word's value while a packet is valid: the value that lets the
// apply kernels run.
inline constexpr uint64_t kDecodeClear = kernels::gpu::kApplyGuardClear;

// What the host checks of a packet before its payload goes to the device:
// the header against `expect` (protocol::ParseSparsePacketHeader), the
// checksum and the zero padding. The device decode checks the rest.
StatusOr<SparsePacketHeader> CheckPacketOnHost(
    std::span<const uint8_t> packet, const SparsePacketExpectations& expect);

// Where LaunchDecodePacket leaves its results (device memory in the
// caller's scratch; valid after the stream has run the decode).
struct DecodedPacket {
  uint32_t* rows = nullptr;   // row_count local rows, increasing
  float* values = nullptr;    // row_count * row_dim, row-major
  uint64_t* error = nullptr;  // the guard word (kDecodeClear: valid)
};

// Device scratch bytes LaunchDecodePacket needs for a packet with this
// (parsed) header: the results, the scan arrays and CUB's temporary storage.
// InvalidArgument for an unknown value type or index encoding; Internal if
// CUB cannot size its scans.
Status DecodeScratchBytes(const protocol::SparsePacketHeader& header,
                          size_t* bytes);

// Enqueues the decode of `payload` (device memory, 4-byte aligned, the
// header.payload_bytes bytes after the packet header) for a table of
// `table_rows` rows into `scratch` (device memory, 256-byte aligned, at
// least DecodeScratchBytes). Fills `out` with pointers into scratch. The
// header must be one ParseSparsePacketHeader accepted (lengths consistent).
// Returns launch errors only (Internal, naming the CUDA error); what the
// packet itself breaks is in *out->error once the stream has run.
Status LaunchDecodePacket(const protocol::SparsePacketHeader& header,
                          const uint8_t* payload, uint64_t table_rows,
                          void* scratch, size_t scratch_bytes,
                          DecodedPacket* out, void* stream);

// The Status a guard word read back from the device stands for: OK for
// kDecodeClear, else the code the CPU decoder gives for that rule, with a
// message naming the rule and the position.
Status DecodeStatus(uint64_t error, const protocol::SparsePacketHeader& header,
                    uint64_t table_rows);

// The whole decode of one host packet, synchronously on the default stream:
// what protocol::DecodeSparsePacket does, with the payload checks on the
// device (header and checksum on the host, as DeviceParamTable::ApplyPacket
// does them). Allocates device memory per call: for tests and benchmarks,
// not for a server's steady state. `rows` and `values` are resized to the
// packet's rows and values. kNotSupported without a usable device (the CUDA
// runtime's reason); otherwise the statuses of DecodeSparsePacket.
Status DecodePacketToHost(std::span<const uint8_t> packet,
                          const protocol::SparsePacketExpectations& expect,
                          std::vector<uint32_t>* rows,
                          std::vector<float>* values,
                          protocol::SparsePacketHeader* header_out = nullptr);

}  // namespace ps::protocol::gpu
