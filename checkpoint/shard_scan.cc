#include "checkpoint/shard_scan.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/metadata.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/sst_file_reader.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "base/plain_folder.h"
#include "checkpoint/layout.h"
#include "checkpoint/manifest_entries.h"
#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"
#include "kernels/optimizers.h"
#include "table/exact_partition.h"

namespace ps::checkpoint {
namespace {

// One reader's share: one SST file, or the keys in [lower, upper) of the
// database (empty: unbounded) and of the tables' rows on disk.
struct Range {
  std::string file;
  std::string lower, upper;
  EntrySink* sink = nullptr;
  uint64_t count = 0, checksum = 0, bytes = 0;
  Status status;
};

// An EXACT table's rows on disk (ShardTableEntry.disk_tier_path): a database
// of disk tier records under 8-byte big-endian keys, opened read-only.
struct DiskPart {
  const ScanTable* table = nullptr;
  std::string dir;
  std::unique_ptr<rocksdb::DB> db;
  size_t record_bytes = 0;  // table::ExactPartition::ColdRecordBytes
};

uint64_t DecodeBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t IntProperty(rocksdb::DB* db, const std::string& name) {
  uint64_t v = 0;
  // Unknown: assume there is something (the caller then takes the general
  // path).
  return db->GetIntProperty(name, &v) ? v : 1;
}

// How the database is split among readers. What the shard writer makes
// (ingested SST files, disjoint key ranges, an empty write-ahead log) is
// read file by file with SstFileReader: each reader streams whole files,
// without the database's merging of levels. Anything else (files whose key
// ranges overlap, entries in a memtable: a database written some other way)
// is cut into key ranges of the database at the files' smallest keys,
// which a database iterator per range reads exactly.
//
// Tables with rows on disk are read by key ranges too, each range merging
// the shard's database with the rows on disk; their files' smallest keys
// are cuts as well.
std::vector<Range> CutRanges(rocksdb::DB* db,
                             const std::vector<DiskPart>& disk_parts,
                             int readers) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return a.smallestkey < b.smallestkey;
  });
  std::vector<std::string> cuts;
  for (const auto& f : files) cuts.push_back(f.smallestkey);
  for (const DiskPart& d : disk_parts) {
    std::vector<rocksdb::LiveFileMetaData> disk_files;
    d.db->GetLiveFilesMetaData(&disk_files);
    for (const auto& f : disk_files) {
      if (f.smallestkey.size() != 8) continue;  // the scan reports it
      char key[kKeyBytes];
      EncodeKey(d.table->entry->table_id(),
                DecodeBigEndian64(f.smallestkey.data()), key);
      cuts.emplace_back(key, kKeyBytes);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  bool by_file =
      !files.empty() && disk_parts.empty() &&
      IntProperty(db, rocksdb::DB::Properties::kNumEntriesActiveMemTable) ==
          0 &&
      IntProperty(db, rocksdb::DB::Properties::kNumEntriesImmMemTables) == 0;
  for (size_t i = 1; by_file && i < files.size(); ++i) {
    if (files[i].smallestkey <= files[i - 1].largestkey) by_file = false;
  }
  std::vector<Range> ranges;
  if (by_file) {
    for (const auto& f : files) {
      ranges.emplace_back();
      ranges.back().file = JoinPath(f.directory, f.relative_filename);
    }
    return ranges;
  }
  ranges.emplace_back();
  if (readers <= 1) return ranges;
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 1; i < cuts.size(); ++i) {
    ranges.back().upper = cuts[i];
    ranges.emplace_back();
    ranges.back().lower = cuts[i];
  }
  return ranges;
}

// The entries of one source in key order: 12-byte keys (row_codec.h) and
// checkpoint values.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual bool Valid() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual void Next() = 0;
  virtual Status status() const = 0;
  // Its entries are a table's rows on disk (EntrySink::AddFromDisk).
  virtual bool on_disk() const { return false; }
};

// The shard's database, or one of its SST files, as they are.
class ShardCursor final : public Cursor {
 public:
  ShardCursor(std::unique_ptr<rocksdb::SstFileReader> file,
              std::unique_ptr<rocksdb::Iterator> it)
      : file_(std::move(file)), it_(std::move(it)) {
    it_->SeekToFirst();
  }
  bool Valid() const override { return it_->Valid(); }
  std::string_view key() const override {
    return std::string_view(it_->key().data(), it_->key().size());
  }
  std::string_view value() const override {
    return std::string_view(it_->value().data(), it_->value().size());
  }
  void Next() override { it_->Next(); }
  Status status() const override {
    return it_->status().ok() ? Status::OK()
                              : Corruption(it_->status().ToString());
  }

 private:
  std::unique_ptr<rocksdb::SstFileReader> file_;  // outlives the iterator
  std::unique_ptr<rocksdb::Iterator> it_;
};

// A table's rows on disk within [lower, upper) of the 12-byte keys, each
// disk tier record read as the EXACT value a copied row would have.
class DiskCursor final : public Cursor {
 public:
  DiskCursor(const DiskPart& part, const std::string& lower,
             const std::string& upper)
      : part_(part),
        upper_(upper),
        table_id_(part.table->entry->table_id()),
        it_(part.db->NewIterator(CheckpointScanOptions())) {
    uint32_t lower_table = 0;
    uint64_t lower_id = 0;
    if (lower.empty() || !DecodeKey(lower, &lower_table, &lower_id) ||
        lower_table < table_id_) {
      it_->SeekToFirst();
    } else if (lower_table == table_id_) {
      // The key's last 8 bytes are the id, big endian, as the tier keys it.
      it_->Seek(rocksdb::Slice(lower.data() + 4, 8));
    } else {
      done_ = true;  // the range lies past this table
    }
    Load();
  }
  bool Valid() const override { return !done_ && it_->Valid(); }
  std::string_view key() const override {
    return std::string_view(key_, kKeyBytes);
  }
  std::string_view value() const override { return value_; }
  void Next() override {
    it_->Next();
    Load();
  }
  bool on_disk() const override { return true; }
  Status status() const override {
    if (!status_.ok()) return status_;
    return it_->status().ok()
               ? Status::OK()
               : Corruption(part_.dir + ": " + it_->status().ToString());
  }

 private:
  // The entry at the iterator, decoded; done_ past the range or on a
  // malformed entry (status_).
  void Load() {
    if (done_ || !it_->Valid()) return;
    const rocksdb::Slice k = it_->key(), v = it_->value();
    if (k.size() != 8 || v.size() != part_.record_bytes) {
      status_ =
          Corruption(part_.dir + ": an entry with a key of " +
                     std::to_string(k.size()) + " bytes (8 expected) " +
                     "and a value of " + std::to_string(v.size()) + " bytes (" +
                     std::to_string(part_.record_bytes) + " expected)");
      done_ = true;
      return;
    }
    EncodeKey(table_id_, DecodeBigEndian64(k.data()), key_);
    if (!upper_.empty() && key() >= std::string_view(upper_)) {
      done_ = true;
      return;
    }
    // A record read in place need not be 4-byte aligned: copied first.
    record_.assign(reinterpret_cast<const std::byte*>(v.data()),
                   reinterpret_cast<const std::byte*>(v.data()) + v.size());
    const int arrays = static_cast<int>(part_.table->entry->state_arrays());
    const uint32_t dim = part_.table->spec->dim();
    const table::ExactPartition::ColdRow row =
        table::ExactPartition::ViewColdRecord(record_, dim, arrays);
    EncodeExactValue(dim, arrays, row.values, row.state, row.last_update,
                     &value_);
  }

  const DiskPart& part_;
  const std::string& upper_;
  const uint32_t table_id_;
  std::unique_ptr<rocksdb::Iterator> it_;
  bool done_ = false;
  Status status_;
  char key_[kKeyBytes] = {};
  std::vector<std::byte> record_;
  std::string value_;
};

class RangeScanner {
 public:
  RangeScanner(rocksdb::DB* db, const std::vector<ScanTable>& tables,
               const std::vector<DiskPart>& disk_parts,
               const std::string& where, FileReads reads)
      : db_(db),
        tables_(tables),
        disk_parts_(disk_parts),
        where_(where),
        reads_(reads) {}

  // Gives up early once `*stop` is set (another range failed).
  void Scan(Range* r, const std::atomic<bool>* stop) const {
    rocksdb::ReadOptions ro = CheckpointScanOptions();
    const rocksdb::Slice lower(r->lower), upper(r->upper);
    if (!r->lower.empty()) ro.iterate_lower_bound = &lower;
    if (!r->upper.empty()) ro.iterate_upper_bound = &upper;
    std::vector<std::unique_ptr<Cursor>> cursors;
    if (r->file.empty()) {
      cursors.push_back(std::make_unique<ShardCursor>(
          nullptr, std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(ro))));
    } else {
      auto file = std::make_unique<rocksdb::SstFileReader>(
          CheckpointReadDbOptions(reads_));
      rocksdb::Status s = file->Open(r->file);
      if (!s.ok()) {
        r->status = Corruption(where_ + ": cannot open " + r->file + ": " +
                               s.ToString());
        return;
      }
      std::unique_ptr<rocksdb::Iterator> it(file->NewIterator(ro));
      cursors.push_back(
          std::make_unique<ShardCursor>(std::move(file), std::move(it)));
    }
    for (const DiskPart& d : disk_parts_) {
      cursors.push_back(std::make_unique<DiskCursor>(d, r->lower, r->upper));
    }
    const ScanTable* t = nullptr;
    uint32_t t_id = 0;
    uint64_t n = 0;
    uint64_t run_end = 0;  // HASHED/DENSE: the row after the last entry's
    for (;; ++n) {
      if ((n & 4095) == 0 && stop->load(std::memory_order_relaxed)) {
        return;
      }
      // The smallest key of the sources (one, unless rows lie on disk).
      Cursor* c = nullptr;
      for (const auto& each : cursors) {
        if (!each->Valid()) continue;
        if (c != nullptr && each->key() == c->key()) {
          r->status = Corruption(where_ +
                                 ": a key is both in the shard's "
                                 "database and among its rows on "
                                 "disk");
          return;
        }
        if (c == nullptr || each->key() < c->key()) c = each.get();
      }
      if (c == nullptr) break;
      const std::string_view k = c->key(), value = c->value();
      uint32_t table_id;
      uint64_t id;
      if (!DecodeKey(k, &table_id, &id)) {
        r->status =
            Corruption(where_ + ": a key of " + std::to_string(k.size()) +
                       " bytes (12 expected)");
        return;
      }
      if (t == nullptr || table_id != t_id) {
        t = Find(table_id);
        t_id = table_id;
        run_end = 0;
        if (t == nullptr) {
          r->status = Corruption(where_ + ": an entry of table id " +
                                 std::to_string(table_id) +
                                 " that the shard's manifest entry does not "
                                 "list");
          return;
        }
      }
      uint64_t rows = 1;
      if (!CheckValue(*t, id, value.size(), run_end, &rows, &r->status)) {
        return;
      }
      run_end = id + rows;
      r->checksum += EntryChecksum(table_id, id, value);
      r->bytes += k.size() + value.size();
      if (r->sink != nullptr) {
        r->status = c->on_disk() ? r->sink->AddFromDisk(*t, id, value)
                                 : r->sink->Add(*t, id, rows, value);
        if (!r->status.ok()) return;
      }
      c->Next();
    }
    r->count = n;
    for (const auto& each : cursors) {
      if (Status s = each->status(); !s.ok()) {
        r->status = s.WithContext(where_);
        return;
      }
    }
  }

 private:
  // The rows of an entry of `table` at `id` with a value of `size` bytes
  // into *rows; false with *status set when the size is not what the
  // manifest allows (EXACT: one row or a tombstone; else a run of 1 to
  // max_run_rows rows) or the run starts inside the one before it (row
  // `run_end`: a run's rows would be restored twice).
  bool CheckValue(const ScanTable& t, uint64_t id, size_t size,
                  uint64_t run_end, uint64_t* rows, Status* status) const {
    auto what = [&] {
      return where_ + ": " + TableWhere(*t.spec) + " id " + std::to_string(id) +
             " has a value of " + std::to_string(size) + " bytes, ";
    };
    if (t.exact) {
      if (size == t.value_bytes || (size == 0 && !t.entry->full())) {
        return true;
      }
      *status =
          Corruption(what() + std::to_string(t.value_bytes) + " expected");
      return false;
    }
    *rows = size / t.value_bytes;
    if (size == 0 || size % t.value_bytes != 0 || *rows > t.max_run_rows) {
      *status = Corruption(what() + "expected a multiple of " +
                           std::to_string(t.value_bytes) +
                           " (a row) of at "
                           "most " +
                           std::to_string(t.max_run_rows) + " rows");
      return false;
    }
    if (id < run_end || id + *rows < id) {
      *status = Corruption(where_ + ": " + TableWhere(*t.spec) + " rows " +
                           std::to_string(id) + " to " +
                           std::to_string(id + *rows - 1) +
                           " overlap the entry before (which ends at row " +
                           std::to_string(run_end - 1) + ")");
      return false;
    }
    return true;
  }

  const ScanTable* Find(uint32_t table_id) const {
    for (const ScanTable& t : tables_) {
      if (t.entry->table_id() == table_id) return &t;
    }
    return nullptr;
  }

  rocksdb::DB* db_;
  const std::vector<ScanTable>& tables_;
  const std::vector<DiskPart>& disk_parts_;
  const std::string& where_;
  const FileReads reads_;
};

}  // namespace

Status ScanShard(const std::string& checkpoint_path, const proto::Manifest& m,
                 const proto::ShardEntry& shard, const ScanOptions& options,
                 const SinkFactory& make_sink, uint64_t* bytes_read) {
  const std::string dir = JoinPath(checkpoint_path, shard.path());
  const std::string where = "checkpoint " + checkpoint_path + " shard " +
                            std::to_string(shard.shard_id()) + " (" + dir + ")";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Corruption(where + ": the shard's database is missing");
  }
  const FileReads reads =
      options.mapped ? FileReads::kMapped : FileReads::kCopied;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(CheckpointReadDbOptions(reads), dir, &raw);
  if (!s.ok()) {
    return Corruption(where + ": cannot open the database: " + s.ToString());
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::vector<ScanTable> tables;
  for (const auto& e : shard.tables()) {
    ScanTable t;
    for (const auto& s : m.tables()) {
      if (s.id() == e.table_id()) t.spec = &s;
    }
    if (t.spec == nullptr) {
      return Corruption(where + ": table id " + std::to_string(e.table_id()) +
                        " is not in the manifest's tables");
    }
    if (e.state_arrays() > kernels::kMaxOptimizerStates) {
      return Corruption(where + ": " + TableWhere(*t.spec) + " has " +
                        std::to_string(e.state_arrays()) +
                        " optimizer state arrays, at most " +
                        std::to_string(kernels::kMaxOptimizerStates) +
                        " exist");
    }
    t.entry = &e;
    t.exact = t.spec->kind() == ps::proto::EXACT;
    t.value_bytes =
        ValueBytes(t.spec->dim(), static_cast<int>(e.state_arrays()), t.exact);
    t.max_run_rows = t.exact ? 1 : std::max<uint64_t>(1, e.rows_per_entry());
    tables.push_back(t);
  }

  // The tables' rows on disk. tables is not resized from here on: the
  // parts point into it.
  std::vector<DiskPart> disk_parts;
  for (const ScanTable& t : tables) {
    const std::string& path = t.entry->disk_tier_path();
    if (path.empty()) continue;
    // Only the name the writer gives: a manifest cannot point a reader
    // anywhere else.
    if (!t.exact ||
        path != ShardDiskTierName(shard.shard_id(), t.entry->table_id())) {
      return Corruption(where + ": " + TableWhere(*t.spec) +
                        " names rows on disk at '" + path + "'" +
                        (t.exact ? ", not at '" +
                                       ShardDiskTierName(shard.shard_id(),
                                                         t.entry->table_id()) +
                                       "'"
                                 : ", which only EXACT tables have"));
    }
    DiskPart d;
    d.table = &t;
    d.dir = JoinPath(checkpoint_path, path);
    d.record_bytes = table::ExactPartition::ColdRecordBytes(
        t.spec->dim(), static_cast<int>(t.entry->state_arrays()));
    // Nothing but files: a link there could point the reader anywhere.
    if (auto files = ListPlainFolder(d.dir); !files.ok()) {
      return Corruption(where + ": cannot open the rows on disk of " +
                        TableWhere(*t.spec) + ": " + files.status().message());
    }
    rocksdb::DB* part = nullptr;
    // Copied, never mapped: the rows on disk may be larger than memory, and
    // a restore that adopts them reads them only to check them, so their
    // pages must not count in its resident memory.
    s = rocksdb::DB::OpenForReadOnly(
        CheckpointReadDbOptions(FileReads::kCopied), d.dir, &part);
    if (!s.ok()) {
      return Corruption(where + ": cannot open the rows on disk of " +
                        TableWhere(*t.spec) + " (" + d.dir +
                        "): " + s.ToString());
    }
    d.db.reset(part);
    disk_parts.push_back(std::move(d));
  }

  std::vector<Range> ranges = CutRanges(db.get(), disk_parts, options.readers);
  for (size_t i = 0; i < ranges.size(); ++i) {
    ranges[i].sink = make_sink ? make_sink(i) : nullptr;
  }
  const RangeScanner scanner(db.get(), tables, disk_parts, where, reads);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&] {
    // RocksDB counts every step of an iteration in thread-local counters
    // by default; restore reads none of them.
    const rocksdb::PerfLevel was = rocksdb::GetPerfLevel();
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
    for (size_t i; (i = next.fetch_add(1)) < ranges.size();) {
      scanner.Scan(&ranges[i], &stop);
      if (!ranges[i].status.ok()) stop.store(true);
    }
    rocksdb::SetPerfLevel(was);
  };
  const size_t threads = std::clamp<size_t>(options.readers, 1, ranges.size());
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  // The first error in key order (a range that stopped early has none).
  for (const Range& r : ranges) {
    if (!r.status.ok()) return r.status;
  }
  uint64_t count = 0, checksum = 0;
  for (const Range& r : ranges) {
    count += r.count;
    checksum += r.checksum;
    *bytes_read += r.bytes;
  }
  if (count != shard.entries()) {
    return Corruption(where + ": " + std::to_string(count) +
                      " entries, the manifest records " +
                      std::to_string(shard.entries()));
  }
  if (checksum != shard.checksum()) {
    return Corruption(where + ": checksum mismatch over " +
                      std::to_string(count) +
                      " entries (a row or its state was altered)");
  }
  return Status::OK();
}

}  // namespace ps::checkpoint
