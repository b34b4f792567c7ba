#include "serving/checkpoint_follower.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/chain_reader.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_scan.h"

namespace ps::serving {
namespace {

using checkpoint::CheckpointInfo;

// Files copied, not mapped: a replica's resident memory is its tables, and
// a checkpoint read whole would otherwise add its mapped size to it.
checkpoint::ScanOptions ScanFor(int readers) {
  return {.readers = readers, .mapped = false};
}

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

// Rows for a tiered table's disk store, handed to `write` 4,096 at a time
// (a batch in memory, not the whole checkpoint's rows).
class ColdBatch {
 public:
  using WriteFn =
      std::function<Status(std::span<const table::ColdRecordWrite>)>;
  ColdBatch(size_t row_bytes, WriteFn write)
      : row_bytes_(row_bytes), write_(std::move(write)) {}

  // `values` (row_bytes) stored under `key`; nullptr: the key's row deleted.
  Status Add(uint64_t key, const void* values) {
    keys_.push_back(key);
    if (values == nullptr) {
      at_.push_back(kErase);
    } else {
      at_.push_back(records_.size());
      const auto* bytes = static_cast<const std::byte*>(values);
      records_.insert(records_.end(), bytes, bytes + row_bytes_);
    }
    return keys_.size() == kRows ? Flush() : Status::OK();
  }

  Status Flush() {
    std::vector<table::ColdRecordWrite> writes;
    for (size_t i = 0; i < keys_.size(); ++i) {
      writes.push_back(
          {keys_[i], at_[i] == kErase
                         ? std::span<const std::byte>()
                         : std::span<const std::byte>(records_.data() + at_[i],
                                                      row_bytes_)});
    }
    PS_RETURN_IF_ERROR(write_(writes));
    keys_.clear();
    at_.clear();
    records_.clear();
    return Status::OK();
  }

 private:
  static constexpr size_t kRows = 4096;
  static constexpr size_t kErase = SIZE_MAX;
  const size_t row_bytes_;
  const WriteFn write_;
  std::vector<uint64_t> keys_;
  std::vector<size_t> at_;  // of each key's record in records_, or kErase
  std::vector<std::byte> records_;
};

// A whole chain compared with the served rows: the rows that differ are
// staged. A row staged once is staged again whatever it holds (the
// increments' rows come after the base's and replace them). The EXACT rows
// the chain has a key for are marked, so that the others can be erased.
// Of a tiered table, the rows not in memory are written to a new disk
// store instead, which replaces the served one at the switch.
class DiffSink : public checkpoint::ChainRowSink {
 public:
  DiffSink(const ServedTables& tables, ServedChanges* changes)
      : tables_(tables), changes_(changes) {}

  // A new, empty store for each tiered table (even one whose rows will all
  // fit in memory: the old store holds rows the chain may no longer have).
  Status OpenStores() {
    for (const auto& spec : tables_.manifest().tables()) {
      if (!tables_.tiered(spec.id())) continue;
      PS_ASSIGN_OR_RETURN(std::unique_ptr<table::ColdRowStore> store,
                          tables_.NewColdStore(spec.id()));
      table::ColdRowStore* to = store.get();
      changes_->cold_stores.push_back({spec.id(), std::move(store)});
      stores_.try_emplace(spec.id(), spec.dim() * sizeof(float),
                          [to](std::span<const table::ColdRecordWrite> w) {
                            return to->Write(w);
                          });
    }
    return Status::OK();
  }

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
  // EXACT keys are compared in batches: each key's index line is fetched
  // as it comes and looked at a batch later, so that the misses of a large
  // index overlap.
  Status Key(const ps::proto::TableSpec& spec, uint64_t key,
             const char* values) override {
    if (!pending_.empty() && pending_.back().table != spec.id()) {
      PS_RETURN_IF_ERROR(Compare());
    }
    tables_.PrefetchKey(spec.id(), key);
    const size_t at = pending_values_.size();
    pending_values_.resize(at + spec.dim());
    std::memcpy(pending_values_.data() + at, values,
                spec.dim() * sizeof(float));
    pending_.push_back({spec.id(), spec.dim(), key, at});
    if (pending_.size() == kBatch) return Compare();
    return Status::OK();
  }

  // The served EXACT keys the chain did not have: erased. The new disk
  // stores completed.
  Status Finish() {
    PS_RETURN_IF_ERROR(Compare());
    for (auto& [table, batch] : stores_) PS_RETURN_IF_ERROR(batch.Flush());
    for (const auto& spec : tables_.manifest().tables()) {
      if (spec.kind() != ps::proto::EXACT) continue;
      const std::vector<uint8_t>& seen = seen_[spec.id()];
      tables_.ForEachKey(spec.id(), [&](uint64_t key, uint32_t slot) {
        if (slot >= seen.size() || !seen[slot]) {
          changes_->EraseKey(spec.id(), key);
        }
      });
    }
    return Status::OK();
  }

 private:
  static constexpr size_t kBatch = 64;
  struct Pending {
    uint32_t table, dim;
    uint64_t key;
    size_t at;  // of its values in pending_values_
  };

  Status Compare() {
    for (const Pending& p : pending_) {
      const uint32_t slot = tables_.KeySlot(p.table, p.key);
      const float* values = pending_values_.data() + p.at;
      if (slot == ServedTables::kNoSlot && tables_.tiered(p.table)) {
        PS_RETURN_IF_ERROR(stores_.at(p.table).Add(p.key, values));
        continue;
      }
      if (slot != ServedTables::kNoSlot) {
        std::vector<uint8_t>& seen = seen_[p.table];
        if (seen.empty()) seen.resize(tables_.SlotCount(p.table));
        seen[slot] = 1;
        if (std::memcmp(tables_.SlotRow(p.table, slot), values,
                        p.dim * sizeof(float)) == 0) {
          continue;
        }
      }
      changes_->AddKey(p.table, p.key, reinterpret_cast<const char*>(values),
                       p.dim);
    }
    pending_.clear();
    pending_values_.clear();
    return Status::OK();
  }

  const ServedTables& tables_;
  ServedChanges* changes_;
  std::unordered_map<uint32_t, std::unordered_set<uint64_t>> staged_rows_;
  // EXACT: the served slots the chain has a key for.
  std::unordered_map<uint32_t, std::vector<uint8_t>> seen_;
  // Tiered tables: the rows not in memory, for their new stores.
  std::unordered_map<uint32_t, ColdBatch> stores_;
  std::vector<Pending> pending_;
  std::vector<float> pending_values_;
};

// The entries of one link's shard database, staged as they are: it holds
// only changed rows (EXACT: with tombstones for keys that lost their row).
// Of a tiered table, the rows not in memory are written to its store
// instead, in batches (ServedTables::WriteCold), so that the memory an
// increment takes is bounded by the rows in memory.
class IncrementSink : public checkpoint::EntrySink {
 public:
  IncrementSink(ServedTables* tables, ServedChanges* changes)
      : tables_(tables), changes_(changes) {}

  Status Add(const checkpoint::ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    const uint32_t t = table.spec->id(), dim = table.spec->dim();
    if (!table.exact) {
      // A run's values come first (checkpoint/row_codec.h).
      changes_->AddRows(t, id, rows, value.data(), dim);
    } else if (tables_->tiered(t) &&
               tables_->KeySlot(t, id) == ServedTables::kNoSlot) {
      ++rows_to_disk_;
      return Batch(t, dim).Add(id, value.empty() ? nullptr : value.data());
    } else if (value.empty()) {
      changes_->EraseKey(t, id);
    } else {
      changes_->AddKey(t, id, value.data(), dim);
    }
    return Status::OK();
  }

  // The batches not yet written.
  Status Flush() {
    for (auto& [table, batch] : batches_) PS_RETURN_IF_ERROR(batch.Flush());
    return Status::OK();
  }
  uint64_t rows_to_disk() const { return rows_to_disk_; }

 private:
  ColdBatch& Batch(uint32_t table_id, uint32_t dim) {
    auto write = [tables = tables_,
                  table_id](std::span<const table::ColdRecordWrite> w) {
      return tables->WriteCold(table_id, w);
    };
    return batches_.try_emplace(table_id, dim * sizeof(float), write)
        .first->second;
  }

  ServedTables* tables_;
  ServedChanges* changes_;
  std::unordered_map<uint32_t, ColdBatch> batches_;
  uint64_t rows_to_disk_ = 0;
};

// The tables-N folders of a replica that stopped without removing them
// (killed): scratch, as its stores are.
Status RemoveLeftovers(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tables-", 0) != 0 || !e.is_directory()) continue;
    std::filesystem::remove_all(e.path(), ec);
    if (ec) {
      return IOError("disk tier " + dir + ": cannot remove " + name +
                     ", left by an earlier replica: " + ec.message());
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IOError("disk tier " + dir + ": cannot list: " + ec.message());
  }
  return Status::OK();
}

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
  if (loads_ == 0 && !options_.disk_tier.dir.empty()) {
    PS_RETURN_IF_ERROR(RemoveLeftovers(options_.disk_tier.dir));
  }
  if (tables) {
    PS_ASSIGN_OR_RETURN(r.rows_promoted,
                        tables->Promote(options_.promote_per_poll));
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
    PS_RETURN_IF_ERROR(loaded->Serve(to));
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
  // Tables a failed switch left with disk rows ahead of the served
  // checkpoint take a compared one, which replaces their stores.
  bool increments_only = at + 1 < chain.size() && !tables->diverged();
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
  DiskTier tier = options_.disk_tier;
  if (!tier.dir.empty()) {
    tier.dir =
        checkpoint::JoinPath(tier.dir, "tables-" + std::to_string(loads_++));
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ServedTables> tables,
                      ServedTables::Create(c.manifest, options_.shards, tier));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::ChainReader> reader,
                      checkpoint::ChainReader::Open(c.path, {}));
  LoadSink sink(tables.get());
  for (uint32_t shard : tables->shards()) {
    PS_RETURN_IF_ERROR(reader->ReadShard(shard, ScanFor(2), &sink));
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
  IncrementSink sink(tables.get(), &changes);
  uint64_t bytes = 0;
  for (const CheckpointInfo& link : links) {
    for (uint32_t shard : tables->shards()) {
      // One reader: its ranges come in key order, so one sink takes them.
      PS_RETURN_IF_ERROR(checkpoint::ScanShard(
          link.path, link.manifest,
          link.manifest.shards(static_cast<int>(shard)), ScanFor(1),
          [&](size_t) { return &sink; }, &bytes));
    }
  }
  PS_RETURN_IF_ERROR(sink.Flush());
  *rows = changes.rows() + sink.rows_to_disk();
  return tables->Apply(std::move(changes), to);
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
  PS_RETURN_IF_ERROR(sink.OpenStores());
  for (uint32_t shard : tables->shards()) {
    // One reader: the sink compares on this thread.
    PS_RETURN_IF_ERROR(reader->ReadShard(shard, ScanFor(1), &sink));
  }
  PS_RETURN_IF_ERROR(sink.Finish());
  *rows = changes.rows();
  return tables->Apply(std::move(changes), ServedCheckpointOf(c));
}

}  // namespace ps::serving
