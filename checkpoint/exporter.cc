#include "checkpoint/exporter.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "checkpoint/layout.h"
#include "checkpoint/npy_writer.h"
#include "checkpoint/restorer.h"
#include "checkpoint/row_codec.h"
#include "checkpoint/shard_scan.h"

namespace ps::checkpoint {
namespace {

std::string TableWhere(const ps::proto::TableSpec& s) {
  return "table '" + s.name() + "' (id " + std::to_string(s.id()) + ")";
}

const proto::ShardTableEntry* FindEntry(const proto::ShardEntry& shard,
                                        uint32_t table_id) {
  for (const auto& t : shard.tables()) {
    if (t.table_id() == table_id) return &t;
  }
  return nullptr;
}

// A table's name as a file name when it is a plain one, else its id.
std::string FileStem(const ps::proto::TableSpec& spec) {
  const std::string& n = spec.name();
  const bool plain =
      !n.empty() && n.size() <= 200 && n[0] != '.' &&
      std::all_of(n.begin(), n.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
      });
  return plain ? n : "table-" + std::to_string(spec.id());
}

// HASHED/DENSE: kCorruption when rows [row, row + rows) are not the
// table's (a forged entry: its rows would land outside the file).
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

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// HASHED/DENSE rows changed by an increment: `rows` rows from `row` on
// (values only), applied over the base in chain order.
struct ChangedRun {
  uint64_t row;
  uint64_t rows;
  std::string values;
};

// One exported table and what its shards' scans gather for it.
struct TableExport {
  const ps::proto::TableSpec* spec = nullptr;
  bool exact = false;
  size_t base = 0;  // the chain's last link where the table is full
  std::unique_ptr<NpyWriter> rows_file, keys_file;
  uint64_t rows = 0;  // HASHED/DENSE: rows of the bases; EXACT: keys written

  // The shard being exported: its increments, newest last.
  std::vector<ChangedRun> changed_runs;
  std::map<uint64_t, std::string> changed_keys;  // EXACT: empty = tombstone
  std::map<uint64_t, std::string>::const_iterator next_changed;

  // EXACT: writes the changed keys below `key` (all: UINT64_MAX inclusive)
  // that still have a row.
  Status WriteChangedBelow(uint64_t key, bool inclusive) {
    for (; next_changed != changed_keys.end() &&
           (next_changed->first < key ||
            (inclusive && next_changed->first == key));
         ++next_changed) {
      if (next_changed->second.empty()) continue;
      PS_RETURN_IF_ERROR(WriteKey(next_changed->first, next_changed->second));
    }
    return Status::OK();
  }
  Status WriteKey(uint64_t key, std::string_view value) {
    PS_RETURN_IF_ERROR(keys_file->Append(&key, 1));
    ++rows;
    return rows_file->Append(value.data(), 1);  // the value's first row
  }
};

// Gathers a shard's entries of the tables whose increment this link is:
// one per key range, merged after the scan in key order.
class ChangeSink : public EntrySink {
 public:
  struct Entry {
    TableExport* table;
    uint64_t id, rows;
    std::string value;
  };
  ChangeSink(std::map<uint32_t, TableExport*> tables)
      : tables_(std::move(tables)) {}

  Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    auto it = tables_.find(table.spec->id());
    if (it == tables_.end()) return Status::OK();
    TableExport* t = it->second;
    if (!t->exact) {
      PS_RETURN_IF_ERROR(CheckRows(*table.spec, id, rows));
      // The run's values only (its first array).
      value = value.substr(0, rows * table.spec->dim() * 4);
    }
    entries_.push_back({t, id, rows, std::string(value)});
    return Status::OK();
  }

  void MergeInto() {
    for (Entry& e : entries_) {
      if (e.table->exact) {
        e.table->changed_keys[e.id] = std::move(e.value);
      } else {
        e.table->changed_runs.push_back({e.id, e.rows, std::move(e.value)});
      }
    }
  }

 private:
  std::map<uint32_t, TableExport*> tables_;
  std::vector<Entry> entries_;
};

// Writes the rows of the tables whose full base this link is: HASHED/DENSE
// runs at their places (any number of ranges at once), EXACT keys merged
// with the shard's changed keys (one reader: key order).
class BaseSink : public EntrySink {
 public:
  explicit BaseSink(std::map<uint32_t, TableExport*> tables)
      : tables_(std::move(tables)) {}

  Status Add(const ScanTable& table, uint64_t id, uint64_t rows,
             std::string_view value) override {
    auto it = tables_.find(table.spec->id());
    if (it == tables_.end()) return Status::OK();
    TableExport* t = it->second;
    if (!t->exact) {
      PS_RETURN_IF_ERROR(CheckRows(*table.spec, id, rows));
      rows_[t] += rows;
      // A run's values come first (checkpoint/row_codec.h).
      return t->rows_file->WriteAt(id, value.data(), rows);
    }
    if (value.empty()) {
      return Corruption(TableWhere(*t->spec) + " key " + std::to_string(id) +
                        ": a tombstone in a full checkpoint");
    }
    PS_RETURN_IF_ERROR(t->WriteChangedBelow(id, /*inclusive=*/false));
    if (t->next_changed != t->changed_keys.end() &&
        t->next_changed->first == id) {
      return t->WriteChangedBelow(id, /*inclusive=*/true);
    }
    return t->WriteKey(id, value);
  }

  void MergeInto() {
    for (auto& [t, rows] : rows_) t->rows += rows;
  }

 private:
  std::map<uint32_t, TableExport*> tables_;
  std::map<TableExport*, uint64_t> rows_;  // HASHED/DENSE rows written
};

int ReadersOf(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(
      std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 8));
}

// The output folder: created, or an empty one.
Status PrepareOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return IOError("cannot create the export folder " + dir + ": " +
                   ec.message());
  }
  if (!std::filesystem::is_empty(dir, ec) || ec) {
    return InvalidArgument(
        "the export folder " + dir +
        (ec ? " cannot be read: " + ec.message()
            : " is not empty (an export never replaces files: name a new "
              "folder)"));
  }
  return Status::OK();
}

class Exporter {
 public:
  Exporter(std::vector<CheckpointInfo> chain, const ExportOptions& options)
      : chain_(std::move(chain)), options_(options) {}

  Status Plan() {
    const proto::Manifest& last = chain_.back().manifest;
    std::vector<const ps::proto::TableSpec*> chosen;
    if (options_.tables.empty()) {
      for (const auto& s : last.tables()) chosen.push_back(&s);
    }
    for (const std::string& name : options_.tables) {
      const ps::proto::TableSpec* found = nullptr;
      for (const auto& s : last.tables()) {
        if (s.name() == name) found = &s;
      }
      if (found == nullptr) {
        std::string names;
        for (const auto& s : last.tables()) {
          names += (names.empty() ? "" : ", ") + s.name();
        }
        return InvalidArgument(chain_.back().path + " has no table '" + name +
                               "' (it has: " + names + ")");
      }
      chosen.push_back(found);
    }
    for (const ps::proto::TableSpec* spec : chosen) {
      auto t = std::make_unique<TableExport>();
      t->spec = spec;
      t->exact = spec->kind() == ps::proto::EXACT;
      bool has_base = false;
      for (size_t j = 0; j < chain_.size(); ++j) {
        const auto* e = FindEntry(chain_[j].manifest.shards(0), spec->id());
        if (e != nullptr && e->full()) {
          t->base = j;
          has_base = true;
        }
      }
      if (!has_base) {
        return Corruption(chain_.back().path + ": " + TableWhere(*spec) +
                          " is full in no checkpoint of its chain");
      }
      tables_.push_back(std::move(t));
    }
    return Status::OK();
  }

  Status OpenFiles() {
    for (auto& t : tables_) {
      const std::string stem = JoinPath(options_.out_dir, FileStem(*t->spec));
      PS_ASSIGN_OR_RETURN(
          t->rows_file, NpyWriter::Create(stem + ".rows.npy", NpyType::kFloat32,
                                          t->spec->dim()));
      if (t->exact) {
        PS_ASSIGN_OR_RETURN(
            t->keys_file,
            NpyWriter::Create(stem + ".keys.npy", NpyType::kUint64, 0));
      }
    }
    return Status::OK();
  }

  Status ExportShard(uint32_t k) {
    for (auto& t : tables_) {
      t->changed_runs.clear();
      t->changed_keys.clear();
    }
    // The increments first: EXACT bases are merged with them as they go.
    for (size_t j = 0; j < chain_.size(); ++j) {
      std::map<uint32_t, TableExport*> changed;
      for (auto& t : tables_) {
        if (j > t->base) changed[t->spec->id()] = t.get();
      }
      if (changed.empty()) continue;
      std::vector<std::unique_ptr<ChangeSink>> sinks;
      PS_RETURN_IF_ERROR(Scan(j, k, ReadersOf(options_.readers), [&](size_t) {
        sinks.push_back(std::make_unique<ChangeSink>(changed));
        return sinks.back().get();
      }));
      for (auto& s : sinks) s->MergeInto();
    }
    for (size_t j = 0; j < chain_.size(); ++j) {
      std::map<uint32_t, TableExport*> based;
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
      const int readers = exact ? 1 : ReadersOf(options_.readers);
      PS_RETURN_IF_ERROR(Scan(j, k, readers, [&](size_t) {
        if (readers > 1 || sinks.empty()) {
          sinks.push_back(std::make_unique<BaseSink>(based));
        }
        return sinks.back().get();
      }));
      for (auto& s : sinks) s->MergeInto();
      for (auto& [id, t] : based) {
        if (t->exact) {
          PS_RETURN_IF_ERROR(t->WriteChangedBelow(UINT64_MAX, true));
        }
      }
    }
    for (auto& t : tables_) {
      for (const ChangedRun& r : t->changed_runs) {
        PS_RETURN_IF_ERROR(
            t->rows_file->WriteAt(r.row, r.values.data(), r.rows));
      }
    }
    return Status::OK();
  }

  Status Finish(ExportResult* result) {
    for (auto& t : tables_) {
      if (!t->exact && t->rows != t->spec->capacity()) {
        return Corruption(chain_[t->base].path + ": " + TableWhere(*t->spec) +
                          " has " + std::to_string(t->rows) + " of its " +
                          std::to_string(t->spec->capacity()) +
                          " rows (rows missing from the full checkpoint)");
      }
      ExportedTable out;
      out.spec = *t->spec;
      out.rows = t->rows;
      for (NpyWriter* w : {t->rows_file.get(), t->keys_file.get()}) {
        if (w == nullptr) continue;
        PS_RETURN_IF_ERROR(w->Finish(t->rows));
        finished_.push_back(w->path());
        result->bytes_written += kNpyHeaderBytes + t->rows * w->row_bytes();
      }
      out.rows_file = FileStem(*t->spec) + ".rows.npy";
      if (t->exact) out.keys_file = FileStem(*t->spec) + ".keys.npy";
      result->tables.push_back(std::move(out));
    }
    return WriteIndex(*result);
  }

  // On an error: the files already renamed into place go too.
  void RemoveFinished() {
    for (const std::string& f : finished_) std::filesystem::remove(f);
  }

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  Status Scan(size_t link, uint32_t shard, int readers,
              const SinkFactory& make_sink) {
    const CheckpointInfo& c = chain_[link];
    return ScanShard(c.path, c.manifest,
                     c.manifest.shards(static_cast<int>(shard)),
                     {.readers = readers}, make_sink, &bytes_read_);
  }

  Status WriteIndex(const ExportResult& r) {
    const proto::Manifest& m = chain_.back().manifest;
    std::string json = "{\n  \"format\": \"ps-export-1\",\n";
    json += "  \"checkpoint\": " + JsonString(chain_.back().path) + ",\n";
    json += "  \"step\": " + std::to_string(m.step()) + ",\n";
    json += "  \"created_unix_ms\": " + std::to_string(m.created_unix_ms()) +
            ",\n  \"tables\": [";
    for (size_t i = 0; i < r.tables.size(); ++i) {
      const ExportedTable& t = r.tables[i];
      std::string spec;
      google::protobuf::util::JsonPrintOptions po;
      po.preserve_proto_field_names = true;
      po.always_print_primitive_fields = true;
      if (!google::protobuf::util::MessageToJsonString(t.spec, &spec, po)
               .ok()) {
        return Internal("cannot print " + TableWhere(t.spec) + " as JSON");
      }
      json += i == 0 ? "\n" : ",\n";
      json += "    {\"name\": " + JsonString(t.spec.name()) +
              ", \"id\": " + std::to_string(t.spec.id()) + ", \"kind\": \"" +
              ps::proto::TableKind_Name(t.spec.kind()) +
              "\", \"dim\": " + std::to_string(t.spec.dim()) +
              ", \"rows\": " + std::to_string(t.rows) +
              ",\n     \"rows_file\": " + JsonString(t.rows_file);
      switch (t.spec.kind()) {
        case ps::proto::EXACT:
          json += ", \"keys_file\": " + JsonString(t.keys_file) +
                  ",\n     \"key_to_row\": \"the row i where keys[i] == key; "
                  "a key not in keys has no row\"";
          break;
        case ps::proto::DENSE:
          json += ",\n     \"key_to_row\": \"row = key\"";
          break;
        default:
          json +=
              ",\n     \"key_to_row\": \"row = splitmix64(key ^ seed) % "
              "capacity, all uint64 arithmetic modulo 2**64\",\n"
              "     \"hash\": {\"name\": \"splitmix64\", \"seed\": " +
              std::to_string(t.spec.id()) +
              ", \"capacity\": " + std::to_string(t.spec.capacity()) +
              ", \"steps\": [\"x ^= x >> 30\", \"x *= 0xbf58476d1ce4e5b9\", "
              "\"x ^= x >> 27\", \"x *= 0x94d049bb133111eb\", "
              "\"x ^= x >> 31\"]}";
          break;
      }
      json += ",\n     \"spec\": " + spec + "}";
    }
    json += "\n  ]\n}\n";
    return WriteFileAtomically(JoinPath(options_.out_dir, kExportIndexName),
                               json);
  }

  const std::vector<CheckpointInfo> chain_;
  const ExportOptions& options_;
  std::vector<std::unique_ptr<TableExport>> tables_;
  std::vector<std::string> finished_;
  uint64_t bytes_read_ = 0;
};

}  // namespace

StatusOr<ExportResult> ExportCheckpoint(const std::string& checkpoint_path,
                                        const ExportOptions& options) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> chain,
                      ResolveChain(checkpoint_path));
  ExportResult result;
  result.manifest = chain.back().manifest;
  for (const auto& c : chain) result.chain.push_back(c.path);
  const uint32_t shards = result.manifest.num_shards();
  Exporter exporter(std::move(chain), options);
  PS_RETURN_IF_ERROR(exporter.Plan());
  PS_RETURN_IF_ERROR(PrepareOutDir(options.out_dir));
  Status s = exporter.OpenFiles();
  for (uint32_t k = 0; s.ok() && k < shards; ++k) s = exporter.ExportShard(k);
  if (s.ok()) s = exporter.Finish(&result);
  if (!s.ok()) {
    exporter.RemoveFinished();
    return s.WithContext("exporting " + checkpoint_path);
  }
  result.bytes_read = exporter.bytes_read();
  return result;
}

}  // namespace ps::checkpoint
