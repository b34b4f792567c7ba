#include "table/rocksdb_cold_row_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <numeric>

#include "base/plain_folder.h"
#include "kernels/thread_pool.h"
#include "table/uring_read_file_system.h"

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

// `env`: the store's (TierEnv), or null for RocksDB's default (a scan of
// linked files, a DestroyDB).
rocksdb::Options StoreOptions(rocksdb::Env* env = nullptr) {
  rocksdb::Options o;
  if (env != nullptr) o.env = env;
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

// The Env of a store's database: RocksDB's default, but with its reads of
// several blocks at once batched through io_uring
// (table/uring_read_file_system.h).
std::shared_ptr<rocksdb::Env> TierEnv() {
  return rocksdb::NewCompositeEnv(UringReadFileSystem::Create());
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

// Where Link's folders go: beside the store's, on its file system.
std::string LinksDir(const std::string& dir) { return dir + ".links"; }

}  // namespace

struct RocksDbColdRowStore::Database {
  Database(std::string dir, std::shared_ptr<rocksdb::Env> env,
           std::unique_ptr<rocksdb::DB> db, int read_threads,
           std::shared_ptr<std::atomic<uint64_t>> bytes_read)
      : dir(std::move(dir)),
        env(std::move(env)),
        db(std::move(db)),
        bytes_read(std::move(bytes_read)),
        readers(read_threads) {}
  ~Database() {
    db.reset();
    // Scratch: nothing to keep. A failure leaves files to the next Open.
    (void)rocksdb::DestroyDB(dir, StoreOptions());
    std::error_code ec;
    std::filesystem::remove(dir, ec);            // only if empty
    std::filesystem::remove(LinksDir(dir), ec);  // only if empty
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
    bytes_read->fetch_add(value.size(), std::memory_order_relaxed);
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
    // Each thread reads a range of the keys in key order with one batched
    // MultiGet. RocksDB takes a MultiGet 32 keys at a time, and reads the
    // blocks those need from one file together (one io_uring batch,
    // table/uring_read_file_system.h); keys in order fall in few files, so
    // that the batches are large.
    std::vector<uint32_t> order(keys.size());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
    std::vector<Status> errors(readers.size());
    auto read = [&](size_t begin, size_t end, int share) {
      const size_t n = end - begin;
      std::vector<EncodedKey> encoded;
      encoded.reserve(n);
      std::vector<rocksdb::Slice> slices;
      slices.reserve(n);
      for (size_t i = begin; i < end; ++i) {
        encoded.emplace_back(keys[order[i]]);
        slices.push_back(encoded.back().slice());
      }
      std::vector<rocksdb::PinnableSlice> values(n);
      std::vector<rocksdb::Status> statuses(n);
      rocksdb::ReadOptions r;
      r.snapshot = snapshot;
      db->MultiGet(r, db->DefaultColumnFamily(), n, slices.data(),
                   values.data(), statuses.data());
      for (size_t j = 0; j < n; ++j) {
        const size_t i = order[begin + j];
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
        bytes_read->fetch_add(record_bytes, std::memory_order_relaxed);
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
  const std::shared_ptr<rocksdb::Env> env;  // db's: outlives it
  std::unique_ptr<rocksdb::DB> db;
  // The store's, which outlives an Adopt: read without this database.
  const std::shared_ptr<std::atomic<uint64_t>> bytes_read;
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

namespace {

// An empty database in `dir` (created if missing): what a killed process
// or a failed Adopt left there is deleted first.
StatusOr<std::unique_ptr<rocksdb::DB>> OpenEmpty(const std::string& dir,
                                                 rocksdb::Env* env) {
  const rocksdb::Options options = StoreOptions(env);
  rocksdb::Status s = rocksdb::DestroyDB(dir, options);
  if (!s.ok()) return FromRocks(s, "cannot empty what was left there", dir);
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return FromRocks(s, "cannot open", dir);
  return std::unique_ptr<rocksdb::DB>(db);
}

// Syncs the file or folder `path` (a folder: its new entries). kIOError
// naming it.
Status SyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return IOError("cannot sync " + path + ": " + std::strerror(err));
  }
  ::close(fd);
  return Status::OK();
}

// Syncs the folder `dir` (its new entries). kIOError naming it.
Status SyncFolder(const std::string& dir) { return SyncPath(dir, O_DIRECTORY); }

// Names the store's files in a folder PlaceAt made: the RocksDB session
// (unique to one opening of the store) whose file names (numbers, never
// reused in a session) they are. RocksDB ignores the file.
constexpr char kSessionFile[] = "PS-STORE-SESSION";

// The contents of `path`, or "" when it cannot be read.
std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A RocksDB checkpoint of the store: its own folder of links, deleted with
// it.
class LinkedFiles final : public ColdRowFiles {
 public:
  LinkedFiles(std::string dir, size_t record_bytes, std::string session)
      : dir_(std::move(dir)),
        record_bytes_(record_bytes),
        session_(std::move(session)) {}
  ~LinkedFiles() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    // <store>.links, once the store and its other links are gone.
    std::filesystem::remove(std::filesystem::path(dir_).parent_path(), ec);
  }

  Status ForEach(const ColdRecordFn& fn) const override {
    rocksdb::Options options = StoreOptions();
    options.create_if_missing = false;
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, dir_, &raw);
    if (!s.ok()) return FromRocks(s, "cannot open the linked files", dir_);
    const std::unique_ptr<rocksdb::DB> db(raw);
    return Scan(db.get(), nullptr, dir_, record_bytes_, 0, SIZE_MAX, fn)
        .status();
  }

  Status PlaceAt(const std::string& dir,
                 const std::vector<std::string>& earlier) const override {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::create_directory(dir, ec) || ec) {
      return IOError("cannot create " + dir + ": " +
                     (ec ? ec.message() : "it exists"));
    }
    // The earlier folders that hold files of this session.
    std::vector<std::string> same_session;
    for (const std::string& e : earlier) {
      if (ReadSmallFile(e + "/" + kSessionFile) == session_) {
        same_session.push_back(e);
      }
    }
    PS_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                        ListPlainFolder(dir_));
    for (const std::string& name : names) {
      const fs::path from = fs::path(dir_) / name;
      const std::string to = dir + "/" + name;
      std::error_code link_ec;
      fs::create_hard_link(from, to, link_ec);
      bool placed = !link_ec;
      if (!placed && from.extension() == ".sst") {
        // Another file system: the copy an earlier checkpoint made, if any.
        std::error_code size_ec;
        const uintmax_t size = fs::file_size(from, size_ec);
        for (const std::string& folder : same_session) {
          const std::string copy = folder + "/" + name;
          std::error_code other;
          if (size_ec || fs::file_size(copy, other) != size || other) continue;
          fs::create_hard_link(copy, to, other);
          if ((placed = !other)) break;
        }
      }
      if (!placed) {  // none to link: a copy
        std::error_code copy_ec;
        fs::copy_file(from, to, copy_ec);
        if (copy_ec) {
          return IOError("cannot place " + from.string() + " at " + to + ": " +
                         copy_ec.message());
        }
        PS_RETURN_IF_ERROR(SyncPath(to, 0));  // links share synced data
      }
    }
    // Only saves copies later: a file not written is no error.
    std::ofstream(dir + "/" + kSessionFile, std::ios::binary) << session_;
    return SyncFolder(dir);
  }

 private:
  const std::string dir_;
  const size_t record_bytes_;
  const std::string session_;
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
  std::filesystem::remove_all(LinksDir(dir), ec);
  if (ec) {
    return IOError("disk tier " + dir + ": cannot remove " + LinksDir(dir) +
                   ": " + ec.message());
  }
  std::shared_ptr<rocksdb::Env> env = TierEnv();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db,
                      OpenEmpty(dir, env.get()));
  auto bytes_read = std::make_shared<std::atomic<uint64_t>>(0);
  auto database = std::make_shared<Database>(dir, env, std::move(db),
                                             read_threads, bytes_read);
  return std::unique_ptr<ColdRowStore>(
      new RocksDbColdRowStore(dir, record_bytes, read_threads, std::move(env),
                              std::move(bytes_read), std::move(database)));
}

RocksDbColdRowStore::RocksDbColdRowStore(
    std::string dir, size_t record_bytes, int read_threads,
    std::shared_ptr<rocksdb::Env> env,
    std::shared_ptr<std::atomic<uint64_t>> bytes_read,
    std::shared_ptr<Database> database)
    : dir_(std::move(dir)),
      record_bytes_(record_bytes),
      read_threads_(read_threads),
      env_(std::move(env)),
      bytes_read_(std::move(bytes_read)),
      database_(std::move(database)),
      db_(database_->db.get()) {}

Status RocksDbColdRowStore::Adopt(const std::string& dir) {
  namespace fs = std::filesystem;
  if (database_.use_count() != 1) {
    return Internal("disk tier " + dir_ +
                    ": cannot adopt other rows while views of it live");
  }
  // What is to be adopted is looked at before anything is dropped.
  StatusOr<std::vector<std::string>> names = ListPlainFolder(dir);
  if (!names.ok()) {
    return names.status().WithContext("disk tier " + dir_ + ": adopting");
  }
  // The old database goes (closed, its files deleted), then the folder is
  // filled and opened again; on a failure it opens empty.
  database_.reset();
  db_ = nullptr;
  Status placed = [&]() -> Status {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!ec) fs::create_directories(dir_, ec);
    if (ec) return IOError("cannot make the folder anew: " + ec.message());
    for (const std::string& name : *names) {
      if (name == kSessionFile) continue;  // the checkpoint's, not RocksDB's
      const fs::path from = fs::path(dir) / name;
      const std::string to = dir_ + "/" + name;
      // Table files are never changed once written; RocksDB rewrites or
      // appends to the others (MANIFEST, logs), which must stay the
      // checkpoint's as they are.
      if (from.extension() == ".sst") {
        fs::create_hard_link(from, to, ec);
        if (!ec) continue;
        ec.clear();  // another file system: a copy
      }
      fs::copy_file(from, to, ec);
      if (ec)
        return IOError("cannot take " + from.string() + ": " + ec.message());
    }
    rocksdb::Options options = StoreOptions(env_.get());
    options.create_if_missing = false;
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(options, dir_, &db);
    if (!s.ok()) return FromRocks(s, "cannot open the rows of " + dir, dir_);
    database_ =
        std::make_shared<Database>(dir_, env_, std::unique_ptr<rocksdb::DB>(db),
                                   read_threads_, bytes_read_);
    return Status::OK();
  }();
  if (!placed.ok()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_, ec);
    StatusOr<std::unique_ptr<rocksdb::DB>> empty = OpenEmpty(dir_, env_.get());
    if (empty.ok()) {
      database_ = std::make_shared<Database>(dir_, env_, std::move(*empty),
                                             read_threads_, bytes_read_);
    }
    placed = placed.WithContext("disk tier " + dir_ + ": adopting " + dir +
                                (empty.ok() ? " (the store is empty now)"
                                            : " (the store is unusable)"));
  }
  db_ = database_ != nullptr ? database_->db.get() : nullptr;
  return placed;
}

RocksDbColdRowStore::~RocksDbColdRowStore() = default;  // see Database

Status RocksDbColdRowStore::Put(uint64_t key,
                                std::span<const std::byte> record) {
  if (db_ == nullptr) return Unusable();
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
  if (db_ == nullptr) return Unusable();
  return database_->Get(key, record);
}

Status RocksDbColdRowStore::GetMany(std::span<const uint64_t> keys,
                                    std::span<std::byte> records,
                                    std::span<uint8_t> found) const {
  if (db_ == nullptr) return Unusable();
  return database_->GetMany(nullptr, record_bytes_, keys, records, found);
}

uint64_t RocksDbColdRowStore::bytes_read() const {
  return bytes_read_->load(std::memory_order_relaxed);
}

Status RocksDbColdRowStore::Unusable() const {
  return IOError("disk tier " + dir_ +
                 ": unusable since adopting other rows failed");
}

Status RocksDbColdRowStore::Delete(uint64_t key) {
  if (db_ == nullptr) return Unusable();
  const rocksdb::Status s = db_->Delete(Unlogged(), EncodedKey(key).slice());
  if (!s.ok()) return FromRocks(s, "cannot delete a row", dir_);
  return Status::OK();
}

Status RocksDbColdRowStore::Write(std::span<const ColdRecordWrite> writes) {
  if (db_ == nullptr) return Unusable();
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
  if (db_ == nullptr) return Unusable();
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
  if (db_ == nullptr) return Unusable();
  return Scan(db_, nullptr, dir_, record_bytes_, first, limit, fn);
}

StatusOr<std::shared_ptr<const ColdRowView>> RocksDbColdRowStore::Pin() const {
  if (db_ == nullptr) return Unusable();
  return std::shared_ptr<const ColdRowView>(
      std::make_shared<PinnedView>(database_, record_bytes_));
}

StatusOr<std::shared_ptr<const ColdRowFiles>> RocksDbColdRowStore::Link()
    const {
  if (db_ == nullptr) return Unusable();
  std::error_code ec;
  std::filesystem::create_directories(LinksDir(dir_), ec);
  if (ec) {
    return IOError("disk tier " + dir_ + ": cannot create " + LinksDir(dir_) +
                   ": " + ec.message());
  }
  // RocksDB wants an absolute path.
  const std::string to =
      std::filesystem::absolute(LinksDir(dir_), ec).string() + "/" +
      std::to_string(links_made_.fetch_add(1));
  if (ec) return IOError("disk tier " + dir_ + ": " + ec.message());
  std::string session;
  rocksdb::Status s = db_->GetDbSessionId(session);
  if (!s.ok()) return FromRocks(s, "cannot name its session", dir_);
  rocksdb::Checkpoint* raw = nullptr;
  s = rocksdb::Checkpoint::Create(db_, &raw);
  const std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // The default log_size_for_flush (0) writes the memtable out first: the
  // store has no write-ahead log to link.
  if (s.ok()) s = checkpoint->CreateCheckpoint(to);
  if (!s.ok()) return FromRocks(s, "cannot link its files", dir_);
  return std::shared_ptr<const ColdRowFiles>(
      std::make_shared<LinkedFiles>(to, record_bytes_, std::move(session)));
}

}  // namespace ps::table
