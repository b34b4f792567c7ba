#include "server/shard.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>

#include "protocol/shard_map.h"
#include "protocol/spec_choices.h"
#include "protocol/table_config.h"
#include "table/device_param_table.h"
#include "table/exact_table.h"
#include "table/initializer.h"
#include "table/optimizer_state.h"
#include "table/param_table.h"
#include "table/rocksdb_cold_row_store.h"

namespace ps::server {
namespace {

std::string Megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

// "1000 steps or 3600 s idle", "never".
std::string EvictionText(const proto::TableSpec& spec) {
  std::string s;
  if (spec.evict_after_steps() != 0) {
    s = std::to_string(spec.evict_after_steps()) + " steps";
  }
  if (spec.evict_after_seconds() != 0) {
    s += (s.empty() ? "" : " or ") +
         std::to_string(spec.evict_after_seconds()) + " s";
  }
  return s.empty() ? "never" : s + " idle";
}

}  // namespace

std::string TableShard::Describe() const {
  std::string s = "table " + spec_.name() + " (id " +
                  std::to_string(spec_.id()) + ", " +
                  std::string(protocol::TableKindName(spec_.kind())) +
                  ", dim " + std::to_string(spec_.dim()) + "): ";
  auto kind = protocol::OptimizerKindOf(spec_.optimizer());  // validated
  const bool sum = !kind.ok() || *kind == proto::OPTIMIZER_SUM;
  const std::string opt(
      protocol::OptimizerKindName(sum ? proto::OPTIMIZER_SUM : *kind));
  if (table_->access() == table::RowAccess::kThroughServer) {
    const char* when_full =
        spec_.when_full() == proto::WHEN_FULL_REFUSE
            ? ", refuse new keys when full"
        : spec_.when_full() == proto::WHEN_FULL_MOVE_TO_DISK
            ? ", the least recently used rows move to disk when full"
            : ", new keys take the least recently used rows when full";
    // The table's own bound: --disk_tier_memory_mib may have lowered it.
    s += "up to " + std::to_string(table_->spec().capacity()) +
         " keys on this shard, admit after " +
         std::to_string(spec_.admit_after_pushes()) + " pushes, evict after " +
         EvictionText(spec_) + when_full + ", " + opt + ", " +
         table_->Placement();
    return s;
  }
  s += "rows [" + std::to_string(first_row()) + ", " +
       std::to_string(first_row() + rows()) + ") of " +
       std::to_string(spec_.capacity()) + ", " + opt;
  if (!sum) {
    char lr[48];
    std::snprintf(lr, sizeof(lr), " lr %g", spec_.optimizer().learning_rate());
    if (spec_.optimizer().learning_rate() != 0.0f) s += lr;
    if (folds_steps_) {
      s += ", each step's pushes folded into one update";
    } else if (push_learning_rate_ != spec_.optimizer().learning_rate()) {
      std::snprintf(lr, sizeof(lr), " per step, %g per push",
                    push_learning_rate_);
      s += lr;
    }
  }
  return s + ", " + table_->Placement();
}

Status Shard::CheckKeysAreMine(const proto::TableSpec& spec,
                               std::span<const uint64_t> keys) const {
  // A lone shard owns every key: no hash and division per key.
  if (num_shards_ == 1 && shard_id_ == 0) return Status::OK();
  const auto map = protocol::ShardMap::ForTable(spec, num_shards_);
  for (uint64_t key : keys) {
    const uint32_t owner = map.ShardOfKey(key);
    if (owner != shard_id_) {
      return InvalidArgument("key " + std::to_string(key) + " of table " +
                             spec.name() + " belongs to shard " +
                             std::to_string(owner) + ", not " +
                             std::to_string(shard_id_));
    }
  }
  return Status::OK();
}

namespace {

// Bytes a row of a tiered EXACT table takes in memory: values and state.
uint64_t TierRowBytes(const proto::TableSpec& spec) {
  return uint64_t{spec.dim()} * sizeof(float) *
         (1 + table::OptimizerState(spec).arrays());
}

}  // namespace

StatusOr<std::map<uint32_t, uint64_t>> TierCapacities(
    const proto::TableConfig& config, uint64_t budget_bytes) {
  std::map<uint32_t, uint64_t> capacity;
  if (budget_bytes == 0) return capacity;
  double asked = 0;
  for (const proto::TableSpec& spec : config.table()) {
    if (spec.kind() == proto::EXACT &&
        spec.when_full() == proto::WHEN_FULL_MOVE_TO_DISK) {
      PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
      asked += static_cast<double>(spec.capacity()) * TierRowBytes(spec);
    }
  }
  if (asked <= static_cast<double>(budget_bytes)) return capacity;
  const double scale = budget_bytes / asked;
  for (const proto::TableSpec& spec : config.table()) {
    if (spec.kind() != proto::EXACT ||
        spec.when_full() != proto::WHEN_FULL_MOVE_TO_DISK) {
      continue;
    }
    const uint64_t rows =
        static_cast<uint64_t>(static_cast<double>(spec.capacity()) * scale);
    if (rows == 0) {
      return InvalidArgument(
          "a disk tier memory budget of " + std::to_string(budget_bytes) +
          " bytes leaves table '" + spec.name() +
          "' no row in memory: its tables ask for " +
          std::to_string(static_cast<uint64_t>(asked)) + " bytes");
    }
    LOG(INFO) << "table '" << spec.name() << "': " << rows
              << " rows in memory, not its capacity of " << spec.capacity()
              << ": the disk tier memory budget (" << budget_bytes
              << " bytes) is " << scale << " of what the tiered tables ask";
    capacity[spec.id()] = rows;
  }
  return capacity;
}

StatusOr<std::unique_ptr<Shard>> Shard::Create(
    xfer::Context* context, const proto::TableConfig& config, uint32_t shard_id,
    uint32_t num_shards, std::optional<int> device, StepPushes pushes,
    const DiskTierOptions& disk_tier) {
  if (num_shards == 0 || shard_id >= num_shards) {
    return InvalidArgument("shard " + std::to_string(shard_id) + " of " +
                           std::to_string(num_shards) + " shards");
  }
  PS_ASSIGN_OR_RETURN(const auto tier_capacity,
                      TierCapacities(config, disk_tier.memory_budget_bytes));
  std::unique_ptr<Shard> shard(new Shard);
  shard->shard_id_ = shard_id;
  shard->num_shards_ = num_shards;
  shard->config_ = config;
  for (const proto::TableSpec& spec : config.table()) {
    const std::string where =
        "table '" + spec.name() + "' (id " + std::to_string(spec.id()) + ")";
    PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
    Status init = table::ValidateInitializer(spec.initializer());
    if (!init.ok()) return init.WithContext(where);
    if (shard->Find(spec.id()) != nullptr) {
      return InvalidArgument("table id " + std::to_string(spec.id()) +
                             " is used twice");
    }
    std::unique_ptr<TableShard> t(new TableShard);
    t->spec_ = spec;
    // Host rows of a bsp job fold each step's pushes (below); the rest
    // apply them one by one.
    const bool fold = pushes.bsp && pushes.workers > 1 &&
                      spec.kind() != proto::EXACT && !device.has_value();
    proto::TableSpec applied =
        fold ? spec : protocol::SpecPerPush(spec, pushes.workers);
    if (auto it = tier_capacity.find(spec.id()); it != tier_capacity.end()) {
      applied.set_capacity(it->second);
    }
    t->push_learning_rate_ = applied.optimizer().learning_rate();
    if (spec.kind() == proto::EXACT) {
      // One folder per table: each table's store is emptied when it opens.
      table::ExactTable::Options options;
      if (!disk_tier.dir.empty()) {
        const std::string dir = disk_tier.dir + "/shard-" +
                                std::to_string(shard_id) + "/table-" +
                                std::to_string(spec.id());
        options.open_disk_tier = [dir, threads = disk_tier.read_threads](
                                     size_t record_bytes) {
          return table::RocksDbColdRowStore::Open(dir, record_bytes, threads);
        };
      }
      PS_ASSIGN_OR_RETURN(t->table_,
                          table::ExactTable::Create(applied, options));
      shard->tables_.push_back(std::move(t));
      continue;
    }
    auto map = protocol::ShardMap::ForTable(spec, num_shards);
    const uint64_t first_row = map.FirstRow(shard_id);
    const uint64_t rows = map.RowsOf(shard_id);
    if (rows > UINT32_MAX) {
      return InvalidArgument(where + ": " + std::to_string(rows) +
                             " rows on one shard exceed 2^32 (use more "
                             "shards or a smaller capacity)");
    }
    if (rows == 0) {
      return InvalidArgument(where + ": capacity " +
                             std::to_string(spec.capacity()) +
                             " leaves shard " + std::to_string(shard_id) +
                             " without rows (fewer rows than shards)");
    }
    const uint64_t bytes = rows * spec.dim() * sizeof(float);
    if (device.has_value()) {
      // The device first, so that a missing one reads as the table says
      // (the CUDA runtime's reason), not as the core's driver does.
      Status usable = table::DeviceParamTable::CheckDevice(*device);
      if (!usable.ok()) return usable.WithContext(where);
      // The rows in the context's device memory: the core exports that
      // to same-host workers over CUDA IPC (pulls without this process's
      // CPU), and frees it only once they closed it, after the table.
      auto region = context->AllocateDevice(bytes, xfer::kRemoteRead, *device);
      if (!region.ok()) {
        if (region.status().code() == StatusCode::kNotSupported) {
          return region.status().WithContext(where);
        }
        return ResourceExhausted(where + ": cannot allocate " +
                                 Megabytes(bytes) +
                                 " of rows on cuda:" + std::to_string(*device) +
                                 ": " + region.status().ToString());
      }
      auto table = table::DeviceParamTable::CreateWithRows(
          applied, first_row, rows, *device,
          std::span<float>(static_cast<float*>((*region)->data()),
                           rows * spec.dim()));
      if (!table.ok()) {
        // Nothing reads the rows yet; returning the memory is best effort
        // (the process is about to report the error and exit).
        (void)context->Deregister(**region);
        return table.status().WithContext(where);
      }
      t->rows_region_ = std::move(*region);
      t->table_ = std::move(*table);
      shard->tables_.push_back(std::move(t));
      continue;
    }
    auto region = context->Allocate(bytes, xfer::kRemoteRead);
    if (!region.ok()) {
      return ResourceExhausted(where + ": cannot allocate " + Megabytes(bytes) +
                               " of rows: " + region.status().ToString());
    }
    t->rows_region_ = std::move(*region);
    // Fault every page in now (the memory is zero already): otherwise the
    // first pushes pay a page fault per 1024 fresh floats, which takes the
    // first 10M-key push from ~0.1 s to seconds.
    volatile uint8_t* page = static_cast<uint8_t*>(t->rows_region_->data());
    for (uint64_t off = 0; off < bytes; off += 4096) page[off] = 0;
    auto params = table::ParamTable::Create(
        applied, first_row, rows,
        std::span<float>(static_cast<float*>(t->rows_region_->data()),
                         rows * spec.dim()));
    if (!params.ok()) return params.status().WithContext(where);
    if (fold) t->folds_steps_ = (*params)->FoldPushesOfEachStep();
    t->table_ = std::move(*params);
    shard->tables_.push_back(std::move(t));
  }
  return shard;
}

}  // namespace ps::server
