// LocalParamStore: a model's tables held in this process with the semantics
// of a single ps_server shard, so that --local training is the reference a
// distributed run is compared with:
//   - HASHED: key -> global row by protocol::ShardMap (1 shard); DENSE: the
//     key is the row. EXACT tables are not supported locally (kNotSupported).
//   - Each table is a table::ParamTable of all its rows, the server shard's
//     own type: rows start as table/initializer.h makes them (a row's values
//     depend only on (initializer seed, global row)), and a push sums
//     duplicate keys, then runs the same apply ("sum" adds, "sgd" adds
//     -lr * g, the others the kernels' optimizer with a per-table step count
//     that grows by one per push, as the server's does per packet).
// A copy of every table (rows, optimizer state, step counts) can be kept
// aside and brought back (KeepCopy / RestoreCopy): --early_stop's best
// parameters, held in memory because --local writes no checkpoints (and
// ps_worker links no storage library). It doubles the tables' memory.
//
// Thread-safe: Pull takes a table's lock shared and Push exclusive, so
// concurrent threads see whole updates; KeepCopy takes them shared and
// RestoreCopy exclusive, table by table (call them with no push in flight
// for a copy of one moment).
#pragma once

#include <memory>
#include <shared_mutex>
#include <vector>

#include "base/status_or.h"
#include "protocol/shard_map.h"
#include "table/param_table.h"
#include "worker/train/param_store.h"

namespace ps::train {

class LocalParamStore : public ParamStore {
 public:
  // kInvalidArgument for a bad spec, kNotSupported for EXACT tables,
  // kResourceExhausted when the rows do not fit in memory.
  static StatusOr<std::unique_ptr<LocalParamStore>> Create(
      const proto::TableConfig& config);

  const proto::TableSpec* table(const std::string& name) const override;
  Status Pull(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<float> out) override;
  Status Push(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<const float> grads) override;
  Status PullDense(uint32_t table_id, std::span<float> out) override;
  Status PushDense(uint32_t table_id, std::span<const float> grads) override;
  Status EndStep() override { return Status::OK(); }
  Status Flush() override { return Status::OK(); }
  Status Barrier() override { return Status::OK(); }

  // Replaces the kept copy with the tables as they are now.
  // kResourceExhausted when the copy does not fit in memory.
  Status KeepCopy();
  // The tables as KeepCopy saw them; kNotInitialized without a copy.
  Status RestoreCopy();

  // The current values of a key's row (tests).
  StatusOr<std::vector<float>> Row(uint32_t table_id, uint64_t key) const;

 private:
  struct Table {
    explicit Table(const proto::TableSpec& s) : spec(s), map(ShardMapOf(s)) {}
    static protocol::ShardMap ShardMapOf(const proto::TableSpec& s) {
      return protocol::ShardMap::ForTable(s, 1);
    }
    proto::TableSpec spec;
    protocol::ShardMap map;
    std::unique_ptr<table::ParamTable> params;  // capacity rows
    mutable std::shared_mutex mu;
    // KeepCopy's copy (table::Table::Snapshot), which RestoreCopy loads as
    // a checkpoint restore would.
    table::TableSnapshot kept;
  };

  LocalParamStore() = default;
  StatusOr<Table*> Find(uint32_t table_id) const;

  std::vector<std::unique_ptr<Table>> tables_;
  bool has_copy_ = false;
};

}  // namespace ps::train
