#include "serving/checkpoint_follower.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
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
  // stores completed and handed to the changes.
  Status Finish() {
    PS_RETURN_IF_ERROR(Compare());
    // A tiered table whose rows all fit in memory still gets a new, empty
    // store: the old one holds rows the chain may no longer have.
    for (const auto& spec : tables_.manifest().tables()) {
      NewStore& store = stores_[spec.id()];
      if (!tables_.tiered(spec.id()) || store.store != nullptr) continue;
      PS_ASSIGN_OR_RETURN(store.store, tables_.NewColdStore(spec.id()));
      store.dim = spec.dim();
    }
    for (auto& [table, store] : stores_) {
      if (store.store == nullptr) continue;
      PS_RETURN_IF_ERROR(store.Flush());
      changes_->cold_stores.push_back({table, std::move(store.store)});
    }
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
  // A new disk store being filled, its writes batched.
  struct NewStore {
    std::unique_ptr<table::ColdRowStore> store;
    std::vector<uint64_t> keys;
    std::vector<float> values;
    uint32_t dim = 0;

    Status Add(uint64_t key, const float* v) {
      keys.push_back(key);
      values.insert(values.end(), v, v + dim);
      return keys.size() == 4096 ? Flush() : Status::OK();
    }
    Status Flush() {
      std::vector<table::ColdRecordWrite> batch;
      for (size_t i = 0; i < keys.size(); ++i) {
        batch.push_back(
            {keys[i],
             {reinterpret_cast<const std::byte*>(values.data() + i * dim),
              dim * sizeof(float)}});
      }
      PS_RETURN_IF_ERROR(store->Write(batch));
      keys.clear();
      values.clear();
      return Status::OK();
    }
  };
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
        NewStore& store = stores_[p.table];
        if (store.store == nullptr) {
          PS_ASSIGN_OR_RETURN(store.store, tables_.NewColdStore(p.table));
          store.dim = p.dim;
        }
        PS_RETURN_IF_ERROR(store.Add(p.key, values));
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
  std::unordered_map<uint32_t, NewStore> stores_;  // tiered tables'
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
      return ToDisk(t, id, value.empty() ? nullptr : value.data(),
                    dim * sizeof(float));
    } else if (value.empty()) {
      changes_->EraseKey(t, id);
    } else {
      changes_->AddKey(t, id, value.data(), dim);
    }
    return Status::OK();
  }

  // The batches not yet written.
  Status Flush() {
    for (auto& [table, batch] : batches_) {
      PS_RETURN_IF_ERROR(Write(table, &batch));
    }
    return Status::OK();
  }
  uint64_t rows_to_disk() const { return rows_to_disk_; }

 private:
  struct Batch {
    std::vector<uint64_t> keys;
    std::vector<std::byte> records;  // row_bytes each; none for an erase
    std::vector<bool> erase;
    size_t row_bytes = 0;
  };

  Status ToDisk(uint32_t table, uint64_t key, const char* values,
                size_t row_bytes) {
    Batch& b = batches_[table];
    b.row_bytes = row_bytes;
    b.keys.push_back(key);
    b.erase.push_back(values == nullptr);
    if (values != nullptr) {
      const auto* bytes = reinterpret_cast<const std::byte*>(values);
      b.records.insert(b.records.end(), bytes, bytes + row_bytes);
    }
    ++rows_to_disk_;
    return b.keys.size() == 4096 ? Write(table, &b) : Status::OK();
  }

  Status Write(uint32_t table, Batch* b) {
    std::vector<table::ColdRecordWrite> writes;
    size_t at = 0;
    for (size_t i = 0; i < b->keys.size(); ++i) {
      if (b->erase[i]) {
        writes.push_back({b->keys[i], {}});
      } else {
        writes.push_back({b->keys[i], {b->records.data() + at, b->row_bytes}});
        at += b->row_bytes;
      }
    }
    PS_RETURN_IF_ERROR(tables_->WriteCold(table, writes));
    b->keys.clear();
    b->records.clear();
    b->erase.clear();
    return Status::OK();
  }

  ServedTables* tables_;
  ServedChanges* changes_;
  std::unordered_map<uint32_t, Batch> batches_;
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
  for (uint32_t shard : tables->shards()) {
    // One reader: the sink compares on this thread.
    PS_RETURN_IF_ERROR(reader->ReadShard(shard, ScanFor(1), &sink));
  }
  PS_RETURN_IF_ERROR(sink.Finish());
  *rows = changes.rows();
  return tables->Apply(std::move(changes), ServedCheckpointOf(c));
}

}  // namespace ps::serving
