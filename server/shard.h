// Shard: this server's part of every table.
//
// Each table of the shard is a TableShard: the table itself, of whichever
// kind (table::Table, table/table.h), with what the server adds around it:
// the spec as configured, the region workers read its rows from, and
// counters. Nothing below chooses between kinds; the table answers.
//
// HASHED and DENSE tables: the shard owns global rows [first_row, first_row +
// rows) (protocol/shard_map.h), stored row-major as floats in one registered
// region that workers read one-sidedly (pulls): a table::ParamTable over
// that region, or with a device (ps_server --device=cuda:N) a
// table::DeviceParamTable whose rows are a region from
// xfer::Context::AllocateDevice (same-host workers pull them over CUDA IPC
// without this process's CPU; others through its connection threads, which
// stage them through host memory). Optimizer state, which only the server
// touches, stays in local (or device) memory. EXACT tables
// (table::ExactTable) keep their own key index and are reached through the
// server (RowAccess::kThroughServer: no region).
//
// Thread-safety: the tables' own (table/table.h); the rest is fixed once
// Create returns, except the applied counters (relaxed atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "protocol/ps.pb.h"
#include "table/rocksdb_cold_row_store.h"
#include "table/table.h"

namespace ps::server {

class TableShard {
 public:
  // The spec as configured (the table's own, table().spec(), may differ in
  // the learning rate of each push: protocol::SpecPerPush).
  const proto::TableSpec& spec() const { return spec_; }
  uint32_t id() const { return spec_.id(); }
  uint32_t dim() const { return spec_.dim(); }
  table::Table& table() const { return *table_; }
  // RowAccess::kRegion tables: the global rows this shard owns, and the
  // region holding them (rows() * dim() floats, remote-readable); 0 and
  // null for the others.
  uint64_t first_row() const { return table_->first_row(); }
  uint64_t rows() const { return table_->num_rows(); }
  const std::shared_ptr<xfer::MemoryRegion>& rows_region() const {
    return rows_region_;
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
  // The table's rows where workers read them: declared before the table,
  // so that it outlives it (the table writes the region's memory).
  std::shared_ptr<xfer::MemoryRegion> rows_region_;
  std::unique_ptr<table::Table> table_;
  mutable std::atomic<uint64_t> rows_applied_{0};
  mutable std::atomic<uint64_t> packets_applied_{0};
};

// How the job's workers push: each pushes its share of every step.
struct StepPushes {
  uint32_t workers = 1;
  // bsp: every push of a step is applied before any of the next is sent.
  bool bsp = false;
};

// Where and how EXACT tables with when_full: WHEN_FULL_MOVE_TO_DISK keep
// the rows beyond their memory bound (table/rocksdb_cold_row_store.h).
struct DiskTierOptions {
  std::string dir;  // empty: no disk tier
  // Reads a pull keeps in flight to each table's store.
  int read_threads = table::RocksDbColdRowStore::kDefaultReadThreads;
  // The most bytes the rows in memory (values and optimizer state) of all
  // such tables of the shard may take: when their capacities ask for more,
  // each is scaled down in proportion (logged). 0: their capacities.
  uint64_t memory_budget_bytes = 0;
};

// With disk_tier.memory_budget_bytes (not 0): the capacity of each tiered
// EXACT table (by id) when their capacities ask for more than the budget,
// scaled down in proportion; empty when they fit. kInvalidArgument when
// the budget leaves a table no row.
StatusOr<std::map<uint32_t, uint64_t>> TierCapacities(
    const proto::TableConfig& config, uint64_t budget_bytes);

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
  //
  // EXACT tables whose rows move to disk at their bound (when_full:
  // WHEN_FULL_MOVE_TO_DISK) keep them in disk_tier.dir/shard-S/table-ID,
  // emptied first (kIOError when it cannot be written); without a
  // disk_tier.dir such a table is kInvalidArgument.
  static StatusOr<std::unique_ptr<Shard>> Create(
      xfer::Context* context, const proto::TableConfig& config,
      uint32_t shard_id, uint32_t num_shards,
      std::optional<int> device = std::nullopt, StepPushes pushes = {},
      const DiskTierOptions& disk_tier = {});

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
  // OK when every key of an EXACT table's push is this shard's (a row made
  // elsewhere would never be pulled, yet take capacity and go into
  // checkpoints); kInvalidArgument naming the first that is not.
  Status CheckKeysAreMine(const proto::TableSpec& spec,
                          std::span<const uint64_t> keys) const;

 private:
  Shard() = default;
  uint32_t shard_id_ = 0;
  uint32_t num_shards_ = 1;
  proto::TableConfig config_;
  std::vector<std::unique_ptr<TableShard>> tables_;
};

}  // namespace ps::server
