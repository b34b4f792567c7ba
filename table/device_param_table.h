// DeviceParamTable: the GPU twin of ParamTable (table/param_table.h). A
// shard's rows and optimizer state live in device memory and sparse pushes
// are applied there by the kernels of kernels/cuda/device_optimizers.h:
//   "sum"  rows += g            atomicAdd, lock-free across host threads
//   "sgd"  rows += -lr * g      the same atomic adds
//   others (momentum, adagrad, adam, ftrl): under the table's optimizer
//          mutex, repeated rows of a packet applied one after the other,
//          the step count growing by one per successful Apply.
// Rows start exactly as ParamTable's do (table/initializer.h fills a host
// buffer that is uploaded), so the two tables agree from the first step.
//
// The rows' memory is the table's own (Create), or the caller's
// (CreateWithRows): a server passes memory from xfer::Context::
// AllocateDevice, which the core exports to same-host peers over CUDA IPC
// because it frees that memory only after every importer is gone; memory
// the table cudaMallocs and frees itself could only be staged through the
// server's CPU (core/context.h, RegisterDevice). Optimizer state, which
// only this process touches, is always the table's own.
//
// ApplyPacket takes a packet as it arrived (protocol/sparse_packet.h), not
// decoded: the host copies it into the lane's page-locked buffer first (the
// sender may still write the inbox slot it came from: everything below reads
// the copy only), parses the header and verifies the checksum and padding
// on that copy, uploads the payload (compressed: fewer bytes than decoded
// rows + fp32 values), and the device decodes it (kernels/cuda/
// device_decoder.h), validates every row and value, and applies it, all on
// the lane's stream. The apply kernel runs only if the decode found the
// packet valid, so a bad packet leaves the table and the step count
// untouched, and ApplyPacket returns the status the host decoder
// (protocol::DecodeSparsePacket) gives for it.
//
// Apply takes host memory (a decoded packet): it checks every row first
// (kOutOfRange naming the first bad one, nothing uploaded, the table and
// the step count untouched), copies rows and gradients through pinned
// staging buffers (or straight from the caller's memory when that is
// already page-locked) with cudaMemcpyAsync on a stream of the table's own,
// launches the kernel on that stream and waits for it: the update is
// complete when Apply returns.
//
// Builds without CUDA (no nvcc at configure time, or a sanitizer build,
// which leaves nvcc code out) get the same class from
// device_param_table_stub.cc: Available() and Create() return
// kNotSupported("built without CUDA ..."), so callers compile either way.
// With CUDA but no usable device, Create returns kNotSupported with the
// CUDA runtime's reason.
//
// DeviceParamTable is a Table (table/table.h): workers read its rows from
// the shard's region (RowAccess::kRegion), over CUDA IPC or staged.
//
// Thread-safety: Apply and ApplyPacket may run on any number of host threads
// at once. Each
// call leases a "lane" (a stream plus staging buffers; lanes are made on
// demand and reused), so "sum"/"sgd" packets from many senders copy and add
// concurrently; stateful optimizers hold the optimizer mutex for the whole
// call. CopyTo and RestoreFrom take the optimizer mutex; for "sum"/"sgd"
// the caller keeps applies out of a checkpoint copy, as with ParamTable.
// Every call makes the table's device the calling thread's current CUDA
// device (cudaSetDevice). data()/state() are device pointers: reading
// them is for device code that orders itself after Apply's return.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/optimizers.h"
#include "protocol/ps.pb.h"
#include "protocol/sparse_packet.h"
#include "table/optimizer_state.h"
#include "table/table.h"

namespace ps::table {

class DeviceParamTable final : public Table {
 public:
  // OK when device tables can be made here; otherwise kNotSupported with
  // the reason (built without CUDA, or the CUDA runtime's "no device").
  static Status Available();

  // Sets up `spec`'s optimizer and global rows [first_row, first_row +
  // num_rows) in the memory of CUDA device `device`. The spec is expected
  // valid, as for ParamTable::Create. kNotSupported without CUDA or a
  // device, kInvalidArgument for a device ordinal that does not exist,
  // kResourceExhausted when device memory cannot be had.
  static StatusOr<std::unique_ptr<DeviceParamTable>> Create(
      const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
      int device = 0);

  // The same with the rows in `rows`: num_rows * dim floats of device
  // memory on `device` that the caller owns, keeps for longer than the
  // table and frees itself (the table never does). Its contents are
  // overwritten with the initial rows. kInvalidArgument when `rows` does
  // not hold exactly num_rows * dim floats or is not memory of `device`;
  // otherwise Create's errors.
  static StatusOr<std::unique_ptr<DeviceParamTable>> CreateWithRows(
      const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
      int device, std::span<float> rows);

  // Available(), and kInvalidArgument for a device ordinal that does not
  // exist: what Create checks before it allocates anything, for a caller
  // that allocates the rows first (CreateWithRows).
  static Status CheckDevice(int device);

  ~DeviceParamTable();
  DeviceParamTable(const DeviceParamTable&) = delete;
  DeviceParamTable& operator=(const DeviceParamTable&) = delete;

  RowAccess access() const override { return RowAccess::kRegion; }
  uint64_t first_row() const override { return first_row_; }
  uint64_t num_rows() const override { return num_rows_; }
  int device() const { return device_; }
  // The rows in device memory (num_rows * dim floats, row-major).
  float* data() const { return data_; }
  // How many optimizer state arrays there are, and state array k (device
  // memory, num_rows * dim floats).
  int state_arrays() const { return optimizer_.arrays(); }
  float* state(int k) const { return state_[k]; }
  // Rows and state in device memory.
  uint64_t bytes() const override;
  // "32.0 MB on cuda:0".
  std::string Placement() const override;

  // Applies gradients of local rows (each < num_rows(); grads holds
  // rows.size() * dim floats, else kInvalidArgument) from host memory.
  // kOutOfRange for a bad row (nothing applied); kInternal naming the CUDA
  // error if a copy or the kernel fails.
  Status Apply(std::span<const uint32_t> rows, std::span<const float> grads);
  // Table: Apply (every push applies on its own; the adds are atomic).
  Status ApplyRows(uint64_t step, std::span<const uint32_t> rows,
                   std::span<float> grads,
                   kernels::AccumulateMode mode) override;

  // Decodes `packet` (a whole sparse packet, host memory that may change
  // under the call: it is copied before it is read) on the device and
  // applies it. The header is parsed from the copy against `expect`, with
  // row_dim and table_rows replaced by this table's (the other fields as
  // the caller sets them: table_id, shard_id, max_row_count). On success
  // *header_out (if not null) is the packet's header. Errors: those of
  // protocol::DecodeSparsePacket for a bad packet (Corruption,
  // InvalidArgument, OutOfRange; nothing applied), kInternal naming the
  // CUDA error (a staging buffer that cannot be allocated included),
  // kNotSupported in a build without CUDA.
  Status ApplyPacket(std::span<const uint8_t> packet,
                     const protocol::SparsePacketExpectations& expect,
                     protocol::SparsePacketHeader* header_out) override;
  bool DecodesPackets() const override { return true; }

  // A host copy of the rows, the state arrays (state[0 .. state_arrays()))
  // and the step count, for a checkpoint.
  Status CopyTo(std::vector<float>* values, std::vector<float>* state,
                uint64_t* optimizer_steps) const;
  // The reverse, for a restore: values and each state[k], k <
  // state_arrays(), hold num_rows * dim floats (kInvalidArgument else).
  Status RestoreFrom(std::span<const float> values,
                     const std::vector<float>* state, uint64_t optimizer_steps);
  uint64_t optimizer_steps() const;

  // Table: host copies of the rows and state (CopyTo); a restore reads
  // into the target's staged buffers and uploads them (RestoreFrom).
  Status Snapshot(TableSnapshot* out) const override;
  Status PrepareRestore(TableTarget* target) override;
  Status FinishRestore(TableTarget* target) override;

 private:
  struct Lane;  // a stream and its staging buffers (defined with the code)
  // Defined beside Lane (a member's cleanup needs its size).
  explicit DeviceParamTable(const proto::TableSpec& spec);
  // CreateWithRows' size check, before anything else (both builds).
  static Status CheckRowsSize(const proto::TableSpec& spec, uint64_t num_rows,
                              std::span<const float> rows);
  // Create and CreateWithRows, once they checked the device: `rows` null
  // means the table allocates them.
  static StatusOr<std::unique_ptr<DeviceParamTable>> Make(
      const proto::TableSpec& spec, uint64_t first_row, uint64_t num_rows,
      int device, float* rows);
  StatusOr<Lane*> TakeLane();
  void ReturnLane(Lane* lane);
  Status ApplyOnLane(Lane& lane, std::span<const uint32_t> rows,
                     std::span<const float> grads);
  // ApplyPacket's host part: the copy into the lane's page-locked buffer,
  // its header and checksum. Then its device part: upload, decode, apply.
  Status StagePacket(Lane& lane, std::span<const uint8_t> packet,
                     const protocol::SparsePacketExpectations& expect,
                     protocol::SparsePacketHeader* header);
  Status ApplyPacketOnLane(Lane& lane,
                           const protocol::SparsePacketHeader& header);

  const uint32_t dim_;
  uint64_t first_row_ = 0;
  uint64_t num_rows_ = 0;
  int device_ = 0;
  float* data_ = nullptr;  // device memory
  // Create's rows; CreateWithRows' are the caller's. [[maybe_unused]]: the
  // stub build (no CUDA) never reads it.
  [[maybe_unused]] bool owns_data_ = false;
  // The rule, the array count and the step count (steps guarded by
  // optimizer_mu_); its host arrays stay empty: state_ is on the device.
  OptimizerState optimizer_;
  float* state_[kernels::kMaxOptimizerStates] = {nullptr, nullptr};

  std::mutex lanes_mu_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // guarded by lanes_mu_
  std::vector<Lane*> free_lanes_;             // guarded by lanes_mu_

  mutable std::mutex optimizer_mu_;  // stateful applies; copies; restores
};

// Inline: the CUDA build and the stub (device_param_table_stub.cc) check
// alike, so a caller's bad size reads the same with or without CUDA.
inline Status DeviceParamTable::CheckRowsSize(const proto::TableSpec& spec,
                                              uint64_t num_rows,
                                              std::span<const float> rows) {
  const uint64_t want = num_rows * spec.dim();
  if (rows.size() != want) {
    return InvalidArgument(
        "the rows' memory holds " + std::to_string(rows.size()) + " floats; " +
        std::to_string(num_rows) + " rows of dim " +
        std::to_string(spec.dim()) + " need " + std::to_string(want));
  }
  return Status::OK();
}

}  // namespace ps::table
