// RocksDbColdRowStore: a ColdRowStore (table/cold_row_store.h) in a RocksDB
// database of its own folder, what ps_server --disk_tier_dir opens.
//
// Scratch: Open empties the folder (what a killed process left), writes
// skip the write-ahead log and are never synced, and the files (and the
// folder when that leaves it empty) are deleted when the store and the
// last view of it (Pin: a RocksDB snapshot) are gone.
//
// Tuned for this: no compression (float rows do not compress), a bloom
// filter per file kept in memory (a push of a key that was never demoted,
// the common case, then costs no disk read), a small block cache (the rows
// that are hot live in the table's memory already), a small memtable with
// a filter. Chosen over a file of fixed-size slots with an index in
// memory, which moved rows 7x faster from the page cache (2.7 us against
// 19 us for a read, read, delete and write of 208-byte rows), for two
// reasons: its index costs no memory per row on disk (a slot file's costs
// ~20 bytes, 3.5 GB for 1.75x10^8 cold rows), and its files are immutable,
// so checkpoints link them instead of copying (Link).
//
// GetMany reads on a pool of threads of the store's own, each a range of
// the keys in key order with one MultiGet, whose blocks of one file go to
// the disk together through io_uring (table/uring_read_file_system.h):
// this machine's disk answers 25k random 4 KiB reads a second one at a
// time, 113k with 16 in flight and 147k with 32 through io_uring, but 48k
// from 16 threads calling pread (fio, O_DIRECT; 2 cores). A thread's
// MultiGet waits for the blocks of one level of the tree before it asks
// for the next level's, 32 keys at a time, so each thread keeps only a few
// reads in flight; a server's apply threads also take the pool in turn.
// Training steps on a table with 1/8 of its rows in memory (5x10^6
// Criteo-law ids, its server in a memory cgroup of those rows + 300 MiB;
// three interleaved runs each, medians) made 13.8 steps/s with 4 threads
// (--disk_tier_read_threads), 15.5 with 8 and 15.6 with 16: 8 by default.
//
// Thread-safe (RocksDB is; GetMany calls, the store's and its views', take
// the pool in turn).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "table/cold_row_store.h"

namespace rocksdb {
class DB;
class Env;
}  // namespace rocksdb

namespace ps::table {

class RocksDbColdRowStore final : public ColdRowStore {
 public:
  static constexpr int kDefaultReadThreads = 8;

  // An empty store of records of `record_bytes` in `dir`, created if
  // missing, whose GetMany reads on `read_threads` (>= 1) threads. kIOError
  // (with RocksDB's reason) when the folder cannot be written.
  static StatusOr<std::unique_ptr<ColdRowStore>> Open(
      const std::string& dir, size_t record_bytes,
      int read_threads = kDefaultReadThreads);
  ~RocksDbColdRowStore() override;

  size_t record_bytes() const override { return record_bytes_; }
  const std::string& where() const override { return dir_; }
  Status Put(uint64_t key, std::span<const std::byte> record) override;
  StatusOr<bool> Get(uint64_t key, std::span<std::byte> record) const override;
  Status GetMany(std::span<const uint64_t> keys, std::span<std::byte> records,
                 std::span<uint8_t> found) const override;
  Status Delete(uint64_t key) override;
  Status Write(std::span<const ColdRecordWrite> writes) override;
  Status Clear() override;
  Status Adopt(const std::string& dir) override;
  StatusOr<std::optional<uint64_t>> ForEachFrom(
      uint64_t first, size_t limit, const RecordFn& fn) const override;
  StatusOr<std::shared_ptr<const ColdRowView>> Pin() const override;
  // A RocksDB checkpoint (rocksdb/utilities/checkpoint.h) in a folder of
  // its own under <dir>.links/, which Open empties too.
  StatusOr<std::shared_ptr<const ColdRowFiles>> Link() const override;
  uint64_t bytes_written() const override { return bytes_written_; }
  uint64_t bytes_read() const override;

  // The open database, shared by the store and its views; the last owner
  // closes it and deletes its files.
  struct Database;

 private:
  RocksDbColdRowStore(std::string dir, size_t record_bytes, int read_threads,
                      std::shared_ptr<rocksdb::Env> env,
                      std::shared_ptr<std::atomic<uint64_t>> bytes_read,
                      std::shared_ptr<Database> database);

  const std::string dir_;
  const size_t record_bytes_;
  const int read_threads_;
  // The databases' (table/uring_read_file_system.h), across Adopt.
  const std::shared_ptr<rocksdb::Env> env_;
  // Bytes read, by the store and its views, across Adopt.
  const std::shared_ptr<std::atomic<uint64_t>> bytes_read_;
  // kIOError: Adopt failed to open the adopted rows (db_ is null).
  Status Unusable() const;

  // Replaced only by Adopt, which nothing else runs beside.
  std::shared_ptr<Database> database_;
  rocksdb::DB* db_;  // database_'s
  std::atomic<uint64_t> bytes_written_{0};
  mutable std::atomic<uint64_t> links_made_{0};  // names Link's folders
};

}  // namespace ps::table
