#include "worker/train/metered_param_store.h"

#include <chrono>

#include "metrics/histogram.h"

namespace ps::train {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// 10 us to ~20 s.
std::vector<double> LatencyBounds() {
  return metrics::ExponentialBounds(1e-5, 2, 22);
}

}  // namespace

StatusOr<std::unique_ptr<MeteredParamStore>> MeteredParamStore::Create(
    std::unique_ptr<ParamStore> inner, const std::vector<std::string>& tables,
    const metrics::Labels& labels, metrics::Registry* registry) {
  std::unique_ptr<MeteredParamStore> m(new MeteredParamStore(std::move(inner)));
  auto meters = [&](const std::string& table) -> StatusOr<TableMeters> {
    metrics::Labels l = labels;
    l.emplace_back("table", table);
    TableMeters t;
    for (auto [dir, d] : {std::pair{"pull", &t.pull}, {"push", &t.push}}) {
      const std::string n = std::string("ps_worker_") + dir;
      PS_ASSIGN_OR_RETURN(
          d->seconds,
          registry->AddHistogram(n + "_seconds",
                                 std::string("Latency of one ") + dir +
                                     " call of a batch's rows, in seconds "
                                     "(_count: the " +
                                     dir + " operations).",
                                 LatencyBounds(), l));
      PS_ASSIGN_OR_RETURN(
          d->keys, registry->AddCounter(n + "_keys_total",
                                        std::string("Keys (rows) of ") + dir +
                                            " calls (sparse tables).",
                                        l));
      PS_ASSIGN_OR_RETURN(
          d->bytes, registry->AddCounter(n + "_bytes_total",
                                         std::string("Bytes of values of ") +
                                             dir + " calls, as 4-byte floats.",
                                         l));
    }
    return t;
  };
  for (const std::string& name : tables) {
    const proto::TableSpec* spec = m->inner_->table(name);
    if (spec == nullptr) continue;
    PS_ASSIGN_OR_RETURN(TableMeters t, meters(name));
    m->tables_.emplace_back(spec->id(), t);
  }
  PS_ASSIGN_OR_RETURN(m->other_, meters("other"));
  PS_ASSIGN_OR_RETURN(
      m->step_seconds_,
      registry->AddHistogram("ps_worker_end_step_seconds",
                             "Latency of ending a step (the clock), waits of "
                             "the consistency model included, in seconds.",
                             LatencyBounds(), labels));
  return m;
}

const MeteredParamStore::TableMeters& MeteredParamStore::MetersOf(
    uint32_t table_id) const {
  for (const auto& [id, t] : tables_) {
    if (id == table_id) return t;
  }
  return other_;
}

Status MeteredParamStore::Pull(uint32_t table_id,
                               std::span<const uint64_t> keys,
                               std::span<float> out) {
  const auto start = Clock::now();
  Status s = inner_->Pull(table_id, keys, out);
  const Direction& d = MetersOf(table_id).pull;
  d.seconds->Observe(Since(start));
  d.keys->Increment(keys.size());
  d.bytes->Increment(out.size() * sizeof(float));
  return s;
}

Status MeteredParamStore::Push(uint32_t table_id,
                               std::span<const uint64_t> keys,
                               std::span<const float> grads) {
  const auto start = Clock::now();
  Status s = inner_->Push(table_id, keys, grads);
  const Direction& d = MetersOf(table_id).push;
  d.seconds->Observe(Since(start));
  d.keys->Increment(keys.size());
  d.bytes->Increment(grads.size() * sizeof(float));
  return s;
}

Status MeteredParamStore::PullDense(uint32_t table_id, std::span<float> out) {
  const auto start = Clock::now();
  Status s = inner_->PullDense(table_id, out);
  const TableMeters& t = MetersOf(table_id);
  t.pull.seconds->Observe(Since(start));
  t.pull.bytes->Increment(out.size() * sizeof(float));
  return s;
}

Status MeteredParamStore::PushDense(uint32_t table_id,
                                    std::span<const float> grads) {
  const auto start = Clock::now();
  Status s = inner_->PushDense(table_id, grads);
  const TableMeters& t = MetersOf(table_id);
  t.push.seconds->Observe(Since(start));
  t.push.bytes->Increment(grads.size() * sizeof(float));
  return s;
}

Status MeteredParamStore::EndStep() {
  const auto start = Clock::now();
  Status s = inner_->EndStep();
  step_seconds_->Observe(Since(start));
  return s;
}

}  // namespace ps::train
