#include "server/shard.h"

#include <algorithm>
#include <cstdio>

#include "protocol/shard_map.h"
#include "protocol/table_config.h"
#include "server/initializer.h"

namespace ps::server {
namespace {

const char* KindName(proto::TableKind kind) {
  switch (kind) {
    case proto::HASHED:
      return "hashed";
    case proto::EXACT:
      return "exact";
    case proto::DENSE:
      return "dense";
    default:
      return "unknown kind";
  }
}

std::string Megabytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

Status TableShard::ApplyRows(std::span<const uint32_t> rows,
                             std::span<float> grads,
                             kernels::AccumulateMode mode) {
  kernels::DenseRows table{data_, rows_, spec_.dim()};
  if (sgd_scale_ != 0.0f) {
    if (sgd_scale_ != 1.0f) {
      for (float& g : grads) g *= sgd_scale_;
    }
    return kernels::AccumulateRows(rows, grads, table, mode);
  }
  kernels::OptimizerTable t;
  t.params = data_;
  for (int k = 0; k < kernels::kMaxOptimizerStates; ++k) {
    t.state[k] = state_[k].empty() ? nullptr : state_[k].data();
  }
  t.num_rows = rows_;
  t.dim = spec_.dim();
  std::lock_guard<std::mutex> lock(optimizer_mu_);
  return kernels::ApplyOptimizerToRows(*optimizer_, ++optimizer_steps_, t, rows,
                                       grads);
}

std::string TableShard::Describe() const {
  std::string s = "table " + spec_.name() + " (id " +
                  std::to_string(spec_.id()) + ", " + KindName(spec_.kind()) +
                  ", dim " + std::to_string(spec_.dim()) + "): ";
  const std::string opt =
      spec_.optimizer().name().empty() ? "sum" : spec_.optimizer().name();
  if (exact()) {
    s += "up to " + std::to_string(spec_.capacity()) +
         " keys on this shard, admit after " +
         std::to_string(spec_.admit_after_pushes()) + " pushes, evict after " +
         (spec_.evict_after_steps() == 0
              ? std::string("never")
              : std::to_string(spec_.evict_after_steps()) + " steps") +
         ", " + opt + ", at most " +
         Megabytes(spec_.capacity() * spec_.dim() * 4ull);
    return s;
  }
  s += "rows [" + std::to_string(first_row_) + ", " +
       std::to_string(first_row_ + rows_) + ") of " +
       std::to_string(spec_.capacity()) + ", " + opt;
  if (opt != "sum") {
    char lr[32];
    std::snprintf(lr, sizeof(lr), " lr %g", spec_.optimizer().learning_rate());
    if (spec_.optimizer().learning_rate() != 0.0f) s += lr;
  }
  uint64_t bytes = rows_ * spec_.dim() * 4ull;
  for (const auto& st : state_) bytes += st.size() * 4ull;
  s += ", " + Megabytes(bytes);
  return s;
}

StatusOr<std::unique_ptr<Shard>> Shard::Create(xfer::Context* context,
                                               const proto::TableConfig& config,
                                               uint32_t shard_id,
                                               uint32_t num_shards) {
  if (num_shards == 0 || shard_id >= num_shards) {
    return InvalidArgument("shard " + std::to_string(shard_id) + " of " +
                           std::to_string(num_shards) + " shards");
  }
  std::unique_ptr<Shard> shard(new Shard);
  shard->shard_id_ = shard_id;
  shard->num_shards_ = num_shards;
  shard->config_ = config;
  for (const proto::TableSpec& spec : config.table()) {
    const std::string where =
        "table '" + spec.name() + "' (id " + std::to_string(spec.id()) + ")";
    PS_RETURN_IF_ERROR(protocol::ValidateTableSpec(spec));
    Status init = ValidateInitializer(spec.initializer());
    if (!init.ok()) return init.WithContext(where);
    if (shard->Find(spec.id()) != nullptr) {
      return InvalidArgument("table id " + std::to_string(spec.id()) +
                             " is used twice");
    }
    std::unique_ptr<TableShard> t(new TableShard);
    t->spec_ = spec;
    if (spec.kind() == proto::EXACT) {
      PS_ASSIGN_OR_RETURN(t->exact_, ExactTable::Create(spec));
      shard->tables_.push_back(std::move(t));
      continue;
    }
    auto map = protocol::ShardMap::ForTable(spec, num_shards);
    t->first_row_ = map.FirstRow(shard_id);
    t->rows_ = map.RowsOf(shard_id);
    if (t->rows_ > UINT32_MAX) {
      return InvalidArgument(where + ": " + std::to_string(t->rows_) +
                             " rows on one shard exceed 2^32 (use more "
                             "shards or a smaller capacity)");
    }
    if (t->rows_ == 0) {
      return InvalidArgument(where + ": capacity " +
                             std::to_string(spec.capacity()) +
                             " leaves shard " + std::to_string(shard_id) +
                             " without rows (fewer rows than shards)");
    }
    const uint64_t bytes = t->rows_ * spec.dim() * sizeof(float);
    auto region = context->Allocate(bytes, xfer::kRemoteRead);
    if (!region.ok()) {
      return ResourceExhausted(where + ": cannot allocate " + Megabytes(bytes) +
                               " of rows: " + region.status().ToString());
    }
    t->rows_region_ = std::move(*region);
    t->data_ = static_cast<float*>(t->rows_region_->data());
    // Fault every page in now (the memory is zero already): otherwise the
    // first pushes pay a page fault per 1024 fresh floats, which takes the
    // first 10M-key push from ~0.1 s to seconds.
    volatile uint8_t* page = static_cast<uint8_t*>(t->rows_region_->data());
    for (uint64_t off = 0; off < bytes; off += 4096) page[off] = 0;
    InitializeRows(spec.initializer(), t->first_row_, t->rows_, spec.dim(),
                   t->data_);

    auto opt = protocol::OptimizerFromSpec(spec.optimizer());
    if (!opt.ok()) {
      t->sgd_scale_ = 1.0f;  // "sum" (ValidateTableSpec refused the rest)
    } else if (auto* sgd = std::get_if<kernels::SgdConfig>(&*opt)) {
      t->sgd_scale_ = -sgd->learning_rate;
    } else {
      t->optimizer_ = *opt;
      const int states = kernels::StateFloatsPerParameter(*opt);
      float state0 = 0.0f;
      if (auto* a = std::get_if<kernels::AdagradConfig>(&*opt)) {
        state0 = a->initial_accumulator;
      }
      try {
        for (int k = 0; k < states; ++k) {
          t->state_[k].assign(t->rows_ * spec.dim(), k == 0 ? state0 : 0.0f);
        }
      } catch (const std::bad_alloc&) {
        return ResourceExhausted(where + ": cannot allocate optimizer state");
      }
    }
    shard->tables_.push_back(std::move(t));
  }
  return shard;
}

}  // namespace ps::server
