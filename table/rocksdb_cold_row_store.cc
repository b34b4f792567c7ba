#include "table/rocksdb_cold_row_store.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "kernels/thread_pool.h"

namespace ps::table {
namespace {

// Big-endian, so that RocksDB's bytewise order is the keys' order.
struct EncodedKey {
  explicit EncodedKey(uint64_t key) {
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<char>(key >> (56 - 8 * i));
  }
  rocksdb::Slice slice() const { return rocksdb::Slice(bytes, 8); }
  char bytes[8];
};

uint64_t DecodeKey(const rocksdb::Slice& s) {
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) {
    key = (key << 8) | static_cast<uint8_t>(s.data()[i]);
  }
  return key;
}

class DiscardLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

rocksdb::Options StoreOptions() {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.compression = rocksdb::kNoCompression;
  o.bottommost_compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.block_cache = rocksdb::NewLRUCache(8 << 20);
  table.checksum = rocksdb::kXXH3;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // A small memtable with a bloom filter of its own: every promotion
  // reads and deletes and every demotion writes a random key, and the
  // default 64 MiB skip list made each a chain of cache misses (16 MiB and
  // the filter: 6.5 training steps/s instead of 5.3 on a table with 1/8 of
  // its rows in memory).
  o.write_buffer_size = 16 << 20;
  o.memtable_prefix_bloom_size_ratio = 0.1;
  o.memtable_whole_key_filtering = true;
  o.info_log = std::make_shared<DiscardLogger>();
  o.keep_log_file_num = 1;
  o.max_open_files = 256;
  return o;
}

rocksdb::WriteOptions Unlogged() {
  rocksdb::WriteOptions w;
  w.disableWAL = true;  // scratch: checkpoints are the durable copy
  return w;
}

Status FromRocks(const rocksdb::Status& s, const std::string& what,
                 const std::string& dir) {
  return IOError("disk tier " + dir + ": " + what + ": " + s.ToString());
}

// fn(key, record) for at most `limit` records from key `first` on, as of
// `snapshot` (null: now): ColdRowStore::ForEachFrom's contract.
StatusOr<std::optional<uint64_t>> Scan(rocksdb::DB* db,
                                       const rocksdb::Snapshot* snapshot,
                                       const std::string& dir,
                                       size_t record_bytes, uint64_t first,
                                       size_t limit, const ColdRecordFn& fn) {
  rocksdb::ReadOptions r;
  r.fill_cache = false;
  r.snapshot = snapshot;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(r));
  size_t visited = 0;
  for (it->Seek(EncodedKey(first).slice()); it->Valid(); it->Next()) {
    const rocksdb::Slice v = it->value();
    if (it->key().size() != 8 || v.size() != record_bytes) {
      return Corruption("disk tier " + dir + ": a record of the wrong size");
    }
    const uint64_t key = DecodeKey(it->key());
    if (visited == limit) return std::optional<uint64_t>(key);
    fn(key, std::span<const std::byte>(
                reinterpret_cast<const std::byte*>(v.data()), v.size()));
    ++visited;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "cannot scan", dir);
  return std::optional<uint64_t>();
}

}  // namespace

struct RocksDbColdRowStore::Database {
  Database(std::string dir, std::unique_ptr<rocksdb::DB> db, int read_threads)
      : dir(std::move(dir)), db(std::move(db)), readers(read_threads) {}
  ~Database() {
    db.reset();
    // Scratch: nothing to keep. A failure leaves files to the next Open.
    (void)rocksdb::DestroyDB(dir, StoreOptions());
    std::error_code ec;
    std::filesystem::remove(dir, ec);  // only if empty
  }

  // The record of `key` into `record`.
  StatusOr<bool> Get(uint64_t key, std::span<std::byte> record) {
    rocksdb::PinnableSlice value;
    const rocksdb::Status s =
        db->Get(rocksdb::ReadOptions(), db->DefaultColumnFamily(),
                EncodedKey(key).slice(), &value);
    if (s.IsNotFound()) return false;
    if (!s.ok()) return FromRocks(s, "cannot read a row", dir);
    if (value.size() != record.size()) {
      return Corruption("disk tier " + dir + ": the row of key " +
                        std::to_string(key) + " has " +
                        std::to_string(value.size()) + " bytes, not " +
                        std::to_string(record.size()));
    }
    std::memcpy(record.data(), value.data(), value.size());
    bytes_read.fetch_add(value.size(), std::memory_order_relaxed);
    return true;
  }

  // ColdRowStore::GetMany as of `snapshot` (null: now), on the pool.
  Status GetMany(const rocksdb::Snapshot* snapshot, size_t record_bytes,
                 std::span<const uint64_t> keys, std::span<std::byte> records,
                 std::span<uint8_t> found) {
    if (records.size() != keys.size() * record_bytes ||
        found.size() != keys.size()) {
      return InvalidArgument("disk tier " + dir +
                             ": GetMany given buffers of the wrong size");
    }
    // Each thread reads a contiguous share with one batched MultiGet
    // (RocksDB sorts it and shares the index and filter lookups of keys in
    // one file): as many reads in flight as threads.
    std::vector<Status> errors(readers.size());
    auto read = [&](size_t begin, size_t end, int share) {
      const size_t n = end - begin;
      std::vector<EncodedKey> encoded;
      encoded.reserve(n);
      std::vector<rocksdb::Slice> slices;
      slices.reserve(n);
      for (size_t i = begin; i < end; ++i) {
        encoded.emplace_back(keys[i]);
        slices.push_back(encoded.back().slice());
      }
      std::vector<rocksdb::PinnableSlice> values(n);
      std::vector<rocksdb::Status> statuses(n);
      rocksdb::ReadOptions r;
      r.snapshot = snapshot;
      db->MultiGet(r, db->DefaultColumnFamily(), n, slices.data(),
                   values.data(), statuses.data());
      for (size_t j = 0; j < n; ++j) {
        const size_t i = begin + j;
        if (statuses[j].IsNotFound()) {
          found[i] = 0;
          continue;
        }
        if (!statuses[j].ok()) {
          errors[share] = FromRocks(statuses[j], "cannot read a row", dir);
          return;
        }
        if (values[j].size() != record_bytes) {
          errors[share] =
              Corruption("disk tier " + dir + ": the row of key " +
                         std::to_string(keys[i]) + " has " +
                         std::to_string(values[j].size()) + " bytes, not " +
                         std::to_string(record_bytes));
          return;
        }
        std::memcpy(records.data() + i * record_bytes, values[j].data(),
                    record_bytes);
        found[i] = 1;
        bytes_read.fetch_add(record_bytes, std::memory_order_relaxed);
      }
    };
    {
      std::lock_guard lock(readers_mu);
      readers.ParallelFor(keys.size(), 1, read);
    }
    for (Status& s : errors) {
      if (!s.ok()) return s;
    }
    return Status::OK();
  }

  const std::string dir;
  std::unique_ptr<rocksdb::DB> db;
  std::atomic<uint64_t> bytes_read{0};
  std::mutex readers_mu;  // one GetMany on the pool at a time
  kernels::ThreadPool readers;
};

namespace {

// A RocksDB snapshot of the store, which keeps the database open.
class PinnedView final : public ColdRowView {
 public:
  PinnedView(std::shared_ptr<RocksDbColdRowStore::Database> database,
             size_t record_bytes)
      : database_(std::move(database)),
        snapshot_(database_->db->GetSnapshot()),
        record_bytes_(record_bytes) {}
  ~PinnedView() override { database_->db->ReleaseSnapshot(snapshot_); }

  Status ForEach(const ColdRecordFn& fn) const override {
    return Scan(database_->db.get(), snapshot_, database_->dir, record_bytes_,
                0, SIZE_MAX, fn)
        .status();
  }
  Status GetMany(std::span<const uint64_t> keys, std::span<std::byte> records,
                 std::span<uint8_t> found) const override {
    return database_->GetMany(snapshot_, record_bytes_, keys, records, found);
  }

 private:
  const std::shared_ptr<RocksDbColdRowStore::Database> database_;
  const rocksdb::Snapshot* const snapshot_;
  const size_t record_bytes_;
};

}  // namespace

StatusOr<std::unique_ptr<ColdRowStore>> RocksDbColdRowStore::Open(
    const std::string& dir, size_t record_bytes, int read_threads) {
  if (read_threads < 1) {
    return InvalidArgument("disk tier " + dir +
                           ": read threads must be >= 1, not " +
                           std::to_string(read_threads));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return IOError("disk tier " + dir +
                   ": cannot create the folder: " + ec.message());
  }
  const rocksdb::Options options = StoreOptions();
  rocksdb::Status s = rocksdb::DestroyDB(dir, options);
  if (!s.ok()) return FromRocks(s, "cannot empty what was left there", dir);
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return FromRocks(s, "cannot open", dir);
  auto database = std::make_shared<Database>(
      dir, std::unique_ptr<rocksdb::DB>(db), read_threads);
  return std::unique_ptr<ColdRowStore>(
      new RocksDbColdRowStore(dir, record_bytes, std::move(database)));
}

RocksDbColdRowStore::RocksDbColdRowStore(std::string dir, size_t record_bytes,
                                         std::shared_ptr<Database> database)
    : dir_(std::move(dir)),
      record_bytes_(record_bytes),
      database_(std::move(database)),
      db_(database_->db.get()) {}

RocksDbColdRowStore::~RocksDbColdRowStore() = default;  // see Database

Status RocksDbColdRowStore::Put(uint64_t key,
                                std::span<const std::byte> record) {
  const rocksdb::Status s =
      db_->Put(Unlogged(), EncodedKey(key).slice(),
               rocksdb::Slice(reinterpret_cast<const char*>(record.data()),
                              record.size()));
  if (!s.ok()) return FromRocks(s, "cannot write a row", dir_);
  bytes_written_.fetch_add(record.size(), std::memory_order_relaxed);
  return Status::OK();
}

StatusOr<bool> RocksDbColdRowStore::Get(uint64_t key,
                                        std::span<std::byte> record) const {
  return database_->Get(key, record);
}

Status RocksDbColdRowStore::GetMany(std::span<const uint64_t> keys,
                                    std::span<std::byte> records,
                                    std::span<uint8_t> found) const {
  return database_->GetMany(nullptr, record_bytes_, keys, records, found);
}

uint64_t RocksDbColdRowStore::bytes_read() const {
  return database_->bytes_read.load(std::memory_order_relaxed);
}

Status RocksDbColdRowStore::Delete(uint64_t key) {
  const rocksdb::Status s = db_->Delete(Unlogged(), EncodedKey(key).slice());
  if (!s.ok()) return FromRocks(s, "cannot delete a row", dir_);
  return Status::OK();
}

Status RocksDbColdRowStore::Write(std::span<const ColdRecordWrite> writes) {
  rocksdb::WriteBatch batch;
  uint64_t bytes = 0;
  for (const ColdRecordWrite& w : writes) {
    const EncodedKey key(w.key);
    rocksdb::Status s;
    if (w.record.empty()) {
      s = batch.Delete(key.slice());
    } else if (w.record.size() != record_bytes_) {
      return InvalidArgument("disk tier " + dir_ + ": a record of " +
                             std::to_string(w.record.size()) + " bytes, not " +
                             std::to_string(record_bytes_));
    } else {
      s = batch.Put(
          key.slice(),
          rocksdb::Slice(reinterpret_cast<const char*>(w.record.data()),
                         w.record.size()));
      bytes += w.record.size();
    }
    if (!s.ok()) return FromRocks(s, "cannot stage a write", dir_);
  }
  const rocksdb::Status s = db_->Write(Unlogged(), &batch);
  if (!s.ok()) return FromRocks(s, "cannot write rows", dir_);
  bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

Status RocksDbColdRowStore::Clear() {
  const EncodedKey begin(0);
  // DeleteRange's end is exclusive: key UINT64_MAX goes on its own.
  const EncodedKey end(UINT64_MAX);
  rocksdb::Status s = db_->DeleteRange(Unlogged(), db_->DefaultColumnFamily(),
                                       begin.slice(), end.slice());
  if (s.ok()) s = db_->Delete(Unlogged(), end.slice());
  if (!s.ok()) return FromRocks(s, "cannot clear", dir_);
  return Status::OK();
}

StatusOr<std::optional<uint64_t>> RocksDbColdRowStore::ForEachFrom(
    uint64_t first, size_t limit, const RecordFn& fn) const {
  return Scan(db_, nullptr, dir_, record_bytes_, first, limit, fn);
}

StatusOr<std::shared_ptr<const ColdRowView>> RocksDbColdRowStore::Pin() const {
  return std::shared_ptr<const ColdRowView>(
      std::make_shared<PinnedView>(database_, record_bytes_));
}

}  // namespace ps::table
