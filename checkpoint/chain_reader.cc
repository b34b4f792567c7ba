#include "checkpoint/chain_reader.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "checkpoint/manifest_entries.h"
#include "checkpoint/restorer.h"
#include "protocol/shard_map.h"

namespace ps::checkpoint {
namespace {

// HASHED/DENSE: kCorruption when rows [row, row + rows) are not the
// table's (a forged entry).
Status CheckRows(const ps::proto::TableSpec& spec, uint64_t row,
                 uint64_t rows) {
  if (row < spec.capacity() && rows <= spec.capacity() - row) {
    return Status::OK();
  }
  return Corruption(TableWhere(spec) + ": rows " + std::to_string(row) +
                    " to " + std::to_string(row + rows - 1) +
                    " are past its capacity of " +
                    std::to_string(spec.capacity()));
}

// HASHED/DENSE rows changed by an increment: `rows` rows from `row` on
// (values only), applied over the base in chain order.
struct ChangedRun {
  uint64_t row;
  uint64_t rows;
  std::string values;
};

}  // namespace

// One table and what a shard's scans gather for it.
struct ChainReader::Table {
  const ps::proto::TableSpec* spec = nullptr;
  bool exact = false;
  size_t base = 0;  // the chain's last link where the table is full

  // The shard being read: its increments, newest last.
  std::vector<ChangedRun> changed_runs;
  std::map<uint64_t, std::string> changed_keys;  // EXACT: empty = tombstone
  std::map<uint64_t, std::string>::const_iterator next_changed;
  uint64_t base_rows = 0;  // HASHED/DENSE rows of the shard's base

  // EXACT: passes the changed keys below `key` (inclusive: up to it) that
  // still have a row.
  Status ChangedBelow(uint64_t key, bool inclusive, ChainRowSink* sink) {
    for (; next_changed != changed_keys.end() &&
           (next_changed->first < key ||
            (inclusive && next_changed->first == key));
         ++next_changed) {
      if (next_changed->second.empty()) continue;
      PS_RETURN_IF_ERROR(
          sink->Key(*spec, next_changed->first, next_changed->second.data()));
    }
    return Status::OK();
  }
};

namespace {

// Gathers a shard's entries of the tables whose increment this link is:
// one sink per key range, merged after the scan in key order.
class ChangeSink : public EntrySink {
 public:
  using Tables = std::map<uint32_t, ChainReader::Table*>;
  explicit ChangeSink(Tables tables) : tables_(std::move(tables)) {}

  Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    auto it = tables_.find(table.spec->id());
    if (it == tables_.end()) return Status::OK();
    if (!table.exact) {
      PS_RETURN_IF_ERROR(CheckRows(*table.spec, id, rows));
      // The run's values only (its first array, checkpoint/row_codec.h).
      value = value.substr(0, rows * table.spec->dim() * 4);
    }
    entries_.push_back({it->second, id, rows, std::string(value)});
    return Status::OK();
  }

  void MergeInto();

 private:
  struct Entry {
    ChainReader::Table* table;
    uint64_t id, rows;
    std::string value;
  };
  Tables tables_;
  std::vector<Entry> entries_;
};

// Passes the rows of the tables whose full base this link is: HASHED/DENSE
// runs as they come (any number of ranges at once), EXACT keys merged with
// the shard's changed keys (one reader: key order).
class BaseSink : public EntrySink {
 public:
  using Tables = std::map<uint32_t, ChainReader::Table*>;
  BaseSink(Tables tables, ChainRowSink* out)
      : tables_(std::move(tables)), out_(out) {}

  Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    auto it = tables_.find(table.spec->id());
    if (it == tables_.end()) return Status::OK();
    ChainReader::Table* t = it->second;
    if (!t->exact) {
      PS_RETURN_IF_ERROR(CheckRows(*table.spec, id, rows));
      rows_[t] += rows;
      return out_->Rows(*t->spec, id, rows, value.data());
    }
    if (value.empty()) {
      return Corruption(TableWhere(*t->spec) + " key " + std::to_string(id) +
                        ": a tombstone in a full checkpoint");
    }
    PS_RETURN_IF_ERROR(t->ChangedBelow(id, /*inclusive=*/false, out_));
    if (t->next_changed != t->changed_keys.end() &&
        t->next_changed->first == id) {
      return t->ChangedBelow(id, /*inclusive=*/true, out_);
    }
    return out_->Key(*t->spec, id, value.data());
  }

  void MergeInto() {
    for (auto& [t, rows] : rows_) t->base_rows += rows;
  }

 private:
  Tables tables_;
  ChainRowSink* out_;
  std::map<ChainReader::Table*, uint64_t> rows_;  // HASHED/DENSE rows seen
};

void ChangeSink::MergeInto() {
  for (Entry& e : entries_) {
    if (e.table->exact) {
      e.table->changed_keys[e.id] = std::move(e.value);
    } else {
      e.table->changed_runs.push_back({e.id, e.rows, std::move(e.value)});
    }
  }
}

}  // namespace

ChainReader::ChainReader(std::vector<CheckpointInfo> chain)
    : chain_(std::move(chain)) {}
ChainReader::~ChainReader() = default;

StatusOr<std::unique_ptr<ChainReader>> ChainReader::Open(
    const std::string& checkpoint_path,
    const std::vector<std::string>& table_names) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> chain,
                      ResolveChain(checkpoint_path));
  std::unique_ptr<ChainReader> r(new ChainReader(std::move(chain)));
  const proto::Manifest& last = r->manifest();
  std::vector<const ps::proto::TableSpec*> chosen;
  if (table_names.empty()) {
    for (const auto& s : last.tables()) chosen.push_back(&s);
  }
  for (const std::string& name : table_names) {
    const ps::proto::TableSpec* found = nullptr;
    for (const auto& s : last.tables()) {
      if (s.name() == name) found = &s;
    }
    if (found == nullptr) {
      std::string names;
      for (const auto& s : last.tables()) {
        names += (names.empty() ? "" : ", ") + s.name();
      }
      return InvalidArgument(checkpoint_path + " has no table '" + name +
                             "' (it has: " + names + ")");
    }
    chosen.push_back(found);
  }
  for (const ps::proto::TableSpec* spec : chosen) {
    auto t = std::make_unique<Table>();
    t->spec = spec;
    t->exact = spec->kind() == ps::proto::EXACT;
    bool has_base = false;
    for (size_t j = 0; j < r->chain_.size(); ++j) {
      const auto* e = FindEntry(r->chain_[j].manifest.shards(0), spec->id());
      if (e != nullptr && e->full()) {
        t->base = j;
        has_base = true;
      }
    }
    if (!has_base) {
      return Corruption(checkpoint_path + ": " + TableWhere(*spec) +
                        " is full in no checkpoint of its chain");
    }
    r->tables_.push_back(std::move(t));
  }
  return r;
}

std::vector<const ps::proto::TableSpec*> ChainReader::tables() const {
  std::vector<const ps::proto::TableSpec*> specs;
  for (const auto& t : tables_) specs.push_back(t->spec);
  return specs;
}

Status ChainReader::Scan(size_t link, uint32_t shard, ScanOptions scan,
                         const SinkFactory& make_sink) {
  const CheckpointInfo& c = chain_[link];
  scan.readers = std::max(scan.readers, 1);
  return ScanShard(c.path, c.manifest,
                   c.manifest.shards(static_cast<int>(shard)), scan, make_sink,
                   &bytes_read_);
}

Status ChainReader::ReadShard(uint32_t shard, const ScanOptions& scan,
                              ChainRowSink* sink) {
  const int readers = scan.readers;
  if (shard >= manifest().num_shards()) {
    return InvalidArgument("shard " + std::to_string(shard) + " of a " +
                           std::to_string(manifest().num_shards()) +
                           "-shard checkpoint");
  }
  for (auto& t : tables_) {
    t->changed_runs.clear();
    t->changed_keys.clear();
    t->base_rows = 0;
  }
  // The increments first: EXACT bases are merged with them as they go.
  for (size_t j = 0; j < chain_.size(); ++j) {
    ChangeSink::Tables changed;
    for (auto& t : tables_) {
      if (j > t->base) changed[t->spec->id()] = t.get();
    }
    if (changed.empty()) continue;
    std::vector<std::unique_ptr<ChangeSink>> sinks;
    PS_RETURN_IF_ERROR(Scan(j, shard, scan, [&](size_t) {
      sinks.push_back(std::make_unique<ChangeSink>(changed));
      return sinks.back().get();
    }));
    for (auto& s : sinks) s->MergeInto();
  }
  for (size_t j = 0; j < chain_.size(); ++j) {
    BaseSink::Tables based;
    bool exact = false;
    for (auto& t : tables_) {
      if (t->base != j) continue;
      based[t->spec->id()] = t.get();
      exact |= t->exact;
      t->next_changed = t->changed_keys.begin();
    }
    if (based.empty()) continue;
    std::vector<std::unique_ptr<BaseSink>> sinks;
    // One reader calls its ranges in key order: one sink serves them all.
    const int base_readers = exact ? 1 : readers;
    ScanOptions base_scan = scan;
    base_scan.readers = base_readers;
    PS_RETURN_IF_ERROR(Scan(j, shard, base_scan, [&](size_t) {
      if (base_readers > 1 || sinks.empty()) {
        sinks.push_back(std::make_unique<BaseSink>(based, sink));
      }
      return sinks.back().get();
    }));
    for (auto& s : sinks) s->MergeInto();
    for (auto& [id, t] : based) {
      if (t->exact) {
        PS_RETURN_IF_ERROR(t->ChangedBelow(UINT64_MAX, true, sink));
      }
    }
  }
  const uint32_t shards = manifest().num_shards();
  for (auto& t : tables_) {
    if (t->exact) continue;
    const auto map = protocol::ShardMap::ForTable(*t->spec, shards);
    if (t->base_rows != map.RowsOf(shard)) {
      return Corruption(chain_[t->base].path + ": " + TableWhere(*t->spec) +
                        " has " + std::to_string(t->base_rows) + " of the " +
                        std::to_string(map.RowsOf(shard)) + " rows of shard " +
                        std::to_string(shard) +
                        " (rows missing from the full checkpoint)");
    }
    for (const ChangedRun& r : t->changed_runs) {
      PS_RETURN_IF_ERROR(sink->Rows(*t->spec, r.row, r.rows, r.values.data()));
    }
  }
  return Status::OK();
}

}  // namespace ps::checkpoint
