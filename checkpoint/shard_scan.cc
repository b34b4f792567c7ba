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

#include "checkpoint/layout.h"
#include "checkpoint/manifest_entries.h"
#include "checkpoint/rocksdb_options.h"
#include "checkpoint/row_codec.h"

namespace ps::checkpoint {
namespace {

// One reader's share: one SST file, or the keys in [lower, upper) of the
// database (empty: unbounded).
struct Range {
  std::string file;
  std::string lower, upper;
  EntrySink* sink = nullptr;
  uint64_t count = 0, checksum = 0, bytes = 0;
  Status status;
};

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
std::vector<Range> CutRanges(rocksdb::DB* db, int readers) {
  std::vector<rocksdb::LiveFileMetaData> files;
  db->GetLiveFilesMetaData(&files);
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return a.smallestkey < b.smallestkey;
  });
  bool by_file =
      !files.empty() &&
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
  std::vector<std::string> cuts;
  for (const auto& f : files) cuts.push_back(f.smallestkey);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 1; i < cuts.size(); ++i) {
    ranges.back().upper = cuts[i];
    ranges.emplace_back();
    ranges.back().lower = cuts[i];
  }
  return ranges;
}

class RangeScanner {
 public:
  RangeScanner(rocksdb::DB* db, const std::vector<ScanTable>& tables,
               const std::string& where, FileReads reads)
      : db_(db), tables_(tables), where_(where), reads_(reads) {}

  // Gives up early once `*stop` is set (another range failed).
  void Scan(Range* r, const std::atomic<bool>* stop) const {
    rocksdb::ReadOptions ro = CheckpointScanOptions();
    const rocksdb::Slice lower(r->lower), upper(r->upper);
    if (!r->lower.empty()) ro.iterate_lower_bound = &lower;
    if (!r->upper.empty()) ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::SstFileReader> file;  // outlives the iterator
    std::unique_ptr<rocksdb::Iterator> it;
    if (r->file.empty()) {
      it.reset(db_->NewIterator(ro));
    } else {
      file = std::make_unique<rocksdb::SstFileReader>(
          CheckpointReadDbOptions(reads_));
      rocksdb::Status s = file->Open(r->file);
      if (!s.ok()) {
        r->status = Corruption(where_ + ": cannot open " + r->file + ": " +
                               s.ToString());
        return;
      }
      it.reset(file->NewIterator(ro));
    }
    const ScanTable* t = nullptr;
    uint32_t t_id = 0;
    uint64_t n = 0;
    uint64_t run_end = 0;  // HASHED/DENSE: the row after the last entry's
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
      if ((n & 4095) == 0 && stop->load(std::memory_order_relaxed)) {
        return;
      }
      const rocksdb::Slice k = it->key(), v = it->value();
      uint32_t table_id;
      uint64_t id;
      if (!DecodeKey(std::string_view(k.data(), k.size()), &table_id, &id)) {
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
      if (!CheckValue(*t, id, v.size(), run_end, &rows, &r->status)) return;
      run_end = id + rows;
      const std::string_view value(v.data(), v.size());
      r->checksum += EntryChecksum(table_id, id, value);
      r->bytes += k.size() + v.size();
      if (r->sink != nullptr) {
        r->status = r->sink->Add(*t, id, rows, value);
        if (!r->status.ok()) return;
      }
    }
    r->count = n;
    if (!it->status().ok()) {
      r->status = Corruption(where_ + ": " + it->status().ToString());
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
    t.entry = &e;
    t.exact = t.spec->kind() == ps::proto::EXACT;
    t.value_bytes =
        ValueBytes(t.spec->dim(), static_cast<int>(e.state_arrays()), t.exact);
    t.max_run_rows = t.exact ? 1 : std::max<uint64_t>(1, e.rows_per_entry());
    tables.push_back(t);
  }

  std::vector<Range> ranges = CutRanges(db.get(), options.readers);
  for (size_t i = 0; i < ranges.size(); ++i) {
    ranges[i].sink = make_sink ? make_sink(i) : nullptr;
  }
  const RangeScanner scanner(db.get(), tables, where, reads);
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
