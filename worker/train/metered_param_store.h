// MeteredParamStore: a ParamStore that times and counts what passes through
// another one, for the worker's metrics: per table, pull and push latency
// histograms (their _count is the operations), keys and bytes (values as
// floats: keys x dim x 4, before any quantization on the wire), and the
// latency of EndStep (the consistency model's waits included).
//
// Per call: two clock reads and a few relaxed atomic adds (no lock, no
// allocation); calls are whole batches, so this is noise next to them.
// Thread-safe as the wrapped store is: training threads call at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "metrics/registry.h"
#include "worker/train/param_store.h"

namespace ps::train {

class MeteredParamStore : public ParamStore {
 public:
  // `tables`: the names to label by (others count under table "other");
  // `labels` go on every metric (e.g. the worker). `registry` must outlive
  // this store.
  static StatusOr<std::unique_ptr<MeteredParamStore>> Create(
      std::unique_ptr<ParamStore> inner, const std::vector<std::string>& tables,
      const metrics::Labels& labels, metrics::Registry* registry);

  ParamStore* inner() const { return inner_.get(); }

  const proto::TableSpec* table(const std::string& name) const override {
    return inner_->table(name);
  }
  Status Pull(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<float> out) override;
  Status Push(uint32_t table_id, std::span<const uint64_t> keys,
              std::span<const float> grads) override;
  Status PullDense(uint32_t table_id, std::span<float> out) override;
  Status PushDense(uint32_t table_id, std::span<const float> grads) override;
  Status EndStep() override;
  Status Flush() override { return inner_->Flush(); }
  Status Barrier() override { return inner_->Barrier(); }

 private:
  struct Direction {
    metrics::Histogram* seconds = nullptr;
    metrics::Counter* keys = nullptr;
    metrics::Counter* bytes = nullptr;
  };
  struct TableMeters {
    Direction pull, push;
  };
  explicit MeteredParamStore(std::unique_ptr<ParamStore> inner)
      : inner_(std::move(inner)) {}
  const TableMeters& MetersOf(uint32_t table_id) const;

  std::unique_ptr<ParamStore> inner_;
  std::vector<std::pair<uint32_t, TableMeters>> tables_;  // by id
  TableMeters other_;
  metrics::Histogram* step_seconds_ = nullptr;
};

}  // namespace ps::train
