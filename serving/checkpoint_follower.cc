#include "serving/checkpoint_follower.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/chain_reader.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_scan.h"

namespace ps::serving {
namespace {

using checkpoint::CheckpointInfo;

bool SameCheckpoint(const ServedCheckpoint& a, const ServedCheckpoint& b) {
  return a.name == b.name && a.step == b.step &&
         a.created_unix_ms == b.created_unix_ms;
}

// A whole chain into tables nothing serves yet.
class LoadSink : public checkpoint::ChainRowSink {
 public:
  explicit LoadSink(ServedTables* tables) : tables_(tables) {}
  Status Rows(const ps::proto::TableSpec& spec, uint64_t first, uint64_t rows,
              const char* values) override {
    rows_.fetch_add(rows, std::memory_order_relaxed);
    return tables_->PutRows(spec.id(), first, rows, values);
  }
  Status Key(const ps::proto::TableSpec& spec, uint64_t key,
             const char* values) override {
    rows_.fetch_add(1, std::memory_order_relaxed);
    return tables_->PutKey(spec.id(), key, values);
  }
  uint64_t rows() const { return rows_.load(); }

 private:
  ServedTables* tables_;  // HASHED/DENSE rows come from several threads
  std::atomic<uint64_t> rows_{0};
};

// A whole chain compared with the served rows: the rows that differ are
// staged. A row staged once is staged again whatever it holds (the
// increments' rows come after the base's and replace them). The EXACT keys
// seen are kept, so that the served keys the chain lacks can be erased.
class DiffSink : public checkpoint::ChainRowSink {
 public:
  DiffSink(const ServedTables& tables, ServedChanges* changes)
      : tables_(tables), changes_(changes) {}

  Status Rows(const ps::proto::TableSpec& spec, uint64_t first, uint64_t rows,
              const char* values) override {
    const size_t row_bytes = spec.dim() * sizeof(float);
    auto& staged = staged_rows_[spec.id()];
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t row = first + r;
      const char* v = values + r * row_bytes;
      const float* served = tables_.Row(spec.id(), row);
      if (served == nullptr) {
        return InvalidArgument("table id " + std::to_string(spec.id()) +
                               " row " + std::to_string(row) +
                               " is not held here");
      }
      if (!staged.contains(row) && std::memcmp(served, v, row_bytes) == 0) {
        continue;
      }
      staged.insert(row);
      changes_->AddRows(spec.id(), row, 1, v, spec.dim());
    }
    return Status::OK();
  }
  Status Key(const ps::proto::TableSpec& spec, uint64_t key,
             const char* values) override {
    seen_[spec.id()].push_back(key);
    const float* served = tables_.Row(spec.id(), key);
    if (served == nullptr ||
        std::memcmp(served, values, spec.dim() * sizeof(float)) != 0) {
      changes_->AddKey(spec.id(), key, values, spec.dim());
    }
    return Status::OK();
  }

  // The served EXACT keys the chain did not have: erased.
  void EraseUnseen() {
    for (const auto& spec : tables_.manifest().tables()) {
      if (spec.kind() != ps::proto::EXACT) continue;
      auto& seen = seen_[spec.id()];
      std::sort(seen.begin(), seen.end());
      tables_.ForEachKey(spec.id(), [&](uint64_t key) {
        if (!std::binary_search(seen.begin(), seen.end(), key)) {
          changes_->EraseKey(spec.id(), key);
        }
      });
    }
  }

 private:
  const ServedTables& tables_;
  ServedChanges* changes_;
  std::unordered_map<uint32_t, std::unordered_set<uint64_t>> staged_rows_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> seen_;
};

// The entries of one link's shard database, staged as they are: it holds
// only changed rows (EXACT: with tombstones for keys that lost their row).
class IncrementSink : public checkpoint::EntrySink {
 public:
  explicit IncrementSink(ServedChanges* changes) : changes_(changes) {}
  Status Add(const checkpoint::ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    const uint32_t t = table.spec->id(), dim = table.spec->dim();
    if (!table.exact) {
      // A run's values come first (checkpoint/row_codec.h).
      changes_->AddRows(t, id, rows, value.data(), dim);
    } else if (value.empty()) {
      changes_->EraseKey(t, id);
    } else {
      changes_->AddKey(t, id, value.data(), dim);
    }
    return Status::OK();
  }

 private:
  ServedChanges* changes_;
};

}  // namespace

const char* FollowActionName(FollowAction a) {
  switch (a) {
    case FollowAction::kNone:
      return "none";
    case FollowAction::kLoaded:
      return "loaded";
    case FollowAction::kIncremental:
      return "incremental";
    case FollowAction::kCompared:
      return "compared";
  }
  return "?";
}

ServedCheckpoint ServedCheckpointOf(const CheckpointInfo& c) {
  return {c.name, c.step, c.manifest.created_unix_ms()};
}

CheckpointFollower::CheckpointFollower(Options options)
    : options_(std::move(options)) {}

std::shared_ptr<const ServedTables> CheckpointFollower::tables() const {
  std::lock_guard lock(mu_);
  return tables_;
}

StatusOr<CheckpointFollower::PollResult> CheckpointFollower::Poll() {
  PollResult r;
  std::shared_ptr<ServedTables> tables;
  {
    std::lock_guard lock(mu_);
    tables = tables_;
  }
  if (tables) r.served = tables->checkpoint();
  r.newest = r.served;
  PS_ASSIGN_OR_RETURN(
      std::optional<CheckpointInfo> newest,
      checkpoint::NewestCompleteCheckpoint(
          options_.root,
          tables ? std::optional<uint64_t>(r.served.step) : std::nullopt));
  if (!newest) return r;
  r.newest = ServedCheckpointOf(*newest);
  if (skipped_.contains(newest->name)) return r;
  const auto start = std::chrono::steady_clock::now();
  Status s = Bring(*newest, &r);
  r.apply_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!s.ok()) {
    skipped_.insert(newest->name);
    return Status(s.code(), "skipped " + newest->path + ": " + s.message() +
                                (r.served.name.empty()
                                     ? std::string(" (nothing served yet)")
                                     : "; still serving " + r.served.name));
  }
  return r;
}

Status CheckpointFollower::Bring(const CheckpointInfo& newest, PollResult* r) {
  const ServedCheckpoint to = ServedCheckpointOf(newest);
  std::shared_ptr<ServedTables> tables;
  {
    std::lock_guard lock(mu_);
    tables = tables_;
  }
  if (tables == nullptr || !tables->SameLayout(newest.manifest)) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<ServedTables> loaded,
                        Load(newest, &r->rows_changed));
    loaded->Serve(to);
    std::lock_guard lock(mu_);
    tables_ = std::move(loaded);
    r->action = FollowAction::kLoaded;
    r->served = to;
    return Status::OK();
  }
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> chain,
                      checkpoint::ResolveChain(newest.path));
  // Incremental when the served checkpoint is a link of the chain and every
  // later link holds changed rows only.
  const ServedCheckpoint served = tables->checkpoint();
  size_t at = chain.size();
  for (size_t i = 0; i < chain.size(); ++i) {
    if (SameCheckpoint(ServedCheckpointOf(chain[i]), served)) at = i;
  }
  bool increments_only = at + 1 < chain.size();
  for (size_t j = at + 1; increments_only && j < chain.size(); ++j) {
    for (const auto& shard : chain[j].manifest.shards()) {
      for (const auto& e : shard.tables()) {
        if (e.full()) increments_only = false;
      }
    }
  }
  if (increments_only) {
    std::vector<CheckpointInfo> links(chain.begin() + static_cast<long>(at) + 1,
                                      chain.end());
    PS_RETURN_IF_ERROR(ApplyIncrements(links, to, &r->rows_changed));
    r->action = FollowAction::kIncremental;
  } else {
    PS_RETURN_IF_ERROR(ApplyDifferences(newest, &r->rows_changed));
    r->action = FollowAction::kCompared;
  }
  r->served = to;
  return Status::OK();
}

StatusOr<std::unique_ptr<ServedTables>> CheckpointFollower::Load(
    const CheckpointInfo& c, uint64_t* rows) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ServedTables> tables,
                      ServedTables::Create(c.manifest, options_.shards));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::ChainReader> reader,
                      checkpoint::ChainReader::Open(c.path, {}));
  LoadSink sink(tables.get());
  for (uint32_t shard : tables->shards()) {
    PS_RETURN_IF_ERROR(reader->ReadShard(shard, /*readers=*/2, &sink));
  }
  *rows = sink.rows();
  return tables;
}

Status CheckpointFollower::ApplyIncrements(
    const std::vector<CheckpointInfo>& links, const ServedCheckpoint& to,
    uint64_t* rows) {
  std::shared_ptr<ServedTables> tables;
  {
    std::lock_guard lock(mu_);
    tables = tables_;
  }
  ServedChanges changes;
  IncrementSink sink(&changes);
  uint64_t bytes = 0;
  for (const CheckpointInfo& link : links) {
    for (uint32_t shard : tables->shards()) {
      // One reader: its ranges come in key order, so one sink takes them.
      PS_RETURN_IF_ERROR(checkpoint::ScanShard(
          link.path, link.manifest,
          link.manifest.shards(static_cast<int>(shard)), {.readers = 1},
          [&](size_t) { return &sink; }, &bytes));
    }
  }
  *rows = changes.rows();
  return tables->Apply(changes, to);
}

Status CheckpointFollower::ApplyDifferences(const CheckpointInfo& c,
                                            uint64_t* rows) {
  std::shared_ptr<ServedTables> tables;
  {
    std::lock_guard lock(mu_);
    tables = tables_;
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::ChainReader> reader,
                      checkpoint::ChainReader::Open(c.path, {}));
  ServedChanges changes;
  DiffSink sink(*tables, &changes);
  for (uint32_t shard : tables->shards()) {
    // One reader: the sink compares on this thread.
    PS_RETURN_IF_ERROR(reader->ReadShard(shard, /*readers=*/1, &sink));
  }
  sink.EraseUnseen();
  *rows = changes.rows();
  return tables->Apply(changes, ServedCheckpointOf(c));
}

}  // namespace ps::serving
