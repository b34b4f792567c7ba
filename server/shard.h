// Shard: this server's part of every table.
//
// HASHED and DENSE tables: the shard owns global rows [first_row, first_row +
// rows) (protocol/shard_map.h), stored row-major as floats in one registered
// region that workers read one-sidedly (pulls). Optimizer state, which only
// the server touches, stays in local memory. EXACT tables keep their own key
// index (server/exact_table.h) and are reached through the server.
//
// With a device (ps_server --device=cuda:N) the HASHED and DENSE tables live
// in that GPU's memory instead (table::DeviceParamTable): rows and optimizer
// state there, and packets decoded, checked and applied on the device
// (table::DeviceParamTable::ApplyPacket: the host only copies the packet,
// checks its header and checksum, and uploads the payload). The rows are a
// region from xfer::Context::AllocateDevice that the table writes
// (CreateWithRows): same-host workers pull them over CUDA IPC without this
// process's CPU; others (tcp, or where IPC cannot be had) through its
// connection threads, which stage them through host memory. EXACT tables stay
// in host memory.
//
// Applying a host-decoded packet to a table (ApplyRows: host tables, and
// device tables only where the device cannot decode) is the table's
// table::ParamTable apply: lock-free atomic adds for "sum" and "sgd", a
// per-table mutex around the stateful optimizers. With a single apply thread
// the adds need no atomicity: kExclusive mode (plain SIMD adds) is chosen by
// the caller then.
//
// Thread-safety: ApplyRows as table::ParamTable::Apply says; the rest is
// fixed once Create returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "kernels/sparse_accumulate.h"
#include "protocol/ps.pb.h"
#include "server/exact_table.h"
#include "table/device_param_table.h"
#include "table/param_table.h"

namespace ps::server {

class TableShard {
 public:
  const proto::TableSpec& spec() const { return spec_; }
  uint32_t id() const { return spec_.id(); }
  uint32_t dim() const { return spec_.dim(); }
  bool exact() const { return spec_.kind() == proto::EXACT; }
  // HASHED/DENSE: the global rows this shard owns.
  uint64_t first_row() const {
    return params_          ? params_->first_row()
           : device_params_ ? device_params_->first_row()
                            : 0;
  }
  uint64_t rows() const {
    return params_          ? params_->num_rows()
           : device_params_ ? device_params_->num_rows()
                            : 0;
  }
  // HASHED/DENSE: rows() * dim() floats, remote-readable; null for EXACT.
  const std::shared_ptr<xfer::MemoryRegion>& rows_region() const {
    return rows_region_;
  }
  // HASHED/DENSE in host memory: the rows; null for EXACT and on a device.
  float* data() const { return params_ ? params_->data() : nullptr; }
  // HASHED/DENSE in host memory: the rows with their optimizer; null for
  // EXACT and on a device.
  table::ParamTable* params() const { return params_.get(); }
  // HASHED/DENSE on a device: the same there; null otherwise.
  table::DeviceParamTable* device_params() const {
    return device_params_.get();
  }
  // EXACT tables only; null otherwise.
  ExactTable* exact_table() const { return exact_.get(); }

  // Applies a decoded packet: local rows (each < rows()) and their gradients
  // (rows.size() * dim floats). `grads` is scratch: it may be scaled in
  // place. `mode` kAtomic when other threads may apply to this table at the
  // same time. kOutOfRange for a bad row (nothing applied then).
  // `step` is the push's training step (its packet's).
  Status ApplyRows(uint64_t step, std::span<const uint32_t> rows,
                   std::span<float> grads, kernels::AccumulateMode mode) {
    if (device_params_ != nullptr) return device_params_->Apply(rows, grads);
    return params_->ApplyPush(step, rows, grads, mode);
  }

  // Rows and packets applied from the inboxes (any apply thread counts,
  // any thread reads: relaxed atomics, one add each per packet).
  void CountApplied(uint64_t rows) const {
    rows_applied_.fetch_add(rows, std::memory_order_relaxed);
    packets_applied_.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t rows_applied() const {
    return rows_applied_.load(std::memory_order_relaxed);
  }
  uint64_t packets_applied() const {
    return packets_applied_.load(std::memory_order_relaxed);
  }

  // "table emb (id 1, hashed, dim 16): rows [0, 500000) of 1000000, sgd lr
  // 0.1, 32 MB"; with several workers, how their pushes make a step ("adam
  // lr 0.0015, each step's pushes folded into one update", or "adam lr
  // 0.0015 per step, 0.00075 per push").
  std::string Describe() const;

 private:
  friend class Shard;
  TableShard() = default;

  proto::TableSpec spec_;
  // The learning rate pushes are applied with (protocol::SpecPerPush).
  float push_learning_rate_ = 0;
  // The rows fold each step's pushes (table::ParamTable).
  bool folds_steps_ = false;
  // params_'s rows, or device_params_'s: declared before the tables, so
  // that it outlives them (a device table writes the region's memory).
  std::shared_ptr<xfer::MemoryRegion> rows_region_;
  std::unique_ptr<table::ParamTable> params_;
  std::unique_ptr<table::DeviceParamTable> device_params_;
  std::unique_ptr<ExactTable> exact_;
  mutable std::atomic<uint64_t> rows_applied_{0};
  mutable std::atomic<uint64_t> packets_applied_{0};
};

// How the job's workers push: each pushes its share of every step.
struct StepPushes {
  uint32_t workers = 1;
  // bsp: every push of a step is applied before any of the next is sent.
  bool bsp = false;
};

class Shard {
 public:
  // Allocates and initializes every table of `config` for shard `shard_id`
  // of `num_shards`, the HASHED and DENSE ones on CUDA device `device` when
  // given. kInvalidArgument for a bad spec or layout (e.g. a shard with more
  // than 2^32 rows of a table), kResourceExhausted when memory cannot be
  // had, kNotSupported when the device cannot be used (saying why).
  //
  // With several workers, a step's pushes make the update --local makes of
  // the step where that can be had: host HASHED and DENSE tables of a bsp
  // job fold each step's pushes into one optimizer step on their sum
  // (table::ParamTable::FoldPushesOfEachStep). Elsewhere (async and ssp,
  // device and EXACT tables) pushes apply one by one, as
  // protocol::SpecPerPush says. config() and each table's spec() stay as
  // given.
  static StatusOr<std::unique_ptr<Shard>> Create(
      xfer::Context* context, const proto::TableConfig& config,
      uint32_t shard_id, uint32_t num_shards,
      std::optional<int> device = std::nullopt, StepPushes pushes = {});

  uint32_t shard_id() const { return shard_id_; }
  uint32_t num_shards() const { return num_shards_; }
  const proto::TableConfig& config() const { return config_; }
  // The table with this id, or null.
  TableShard* Find(uint32_t table_id) const {
    for (const auto& t : tables_) {
      if (t->id() == table_id) return t.get();
    }
    return nullptr;
  }
  const std::vector<std::unique_ptr<TableShard>>& tables() const {
    return tables_;
  }

 private:
  Shard() = default;
  uint32_t shard_id_ = 0;
  uint32_t num_shards_ = 1;
  proto::TableConfig config_;
  std::vector<std::unique_ptr<TableShard>> tables_;
};

}  // namespace ps::server
