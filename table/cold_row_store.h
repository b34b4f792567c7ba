// ColdRowStore: the disk tier of one EXACT table shard (table/exact_table.h,
// when_full: WHEN_FULL_MOVE_TO_DISK): the rows that cooled down out of the
// shard's memory bound, each as one fixed-size record (its values, optimizer
// state and last update, laid out by ExactPartition) under its key, in a
// RocksDB database of its own folder.
//
// The store is scratch, not durable state: Open empties the folder, writes
// skip the write-ahead log and are never synced, and the destructor
// deletes the files. Checkpoints are what survive a crash (they copy every
// row of both tiers), so a restart restores the newest checkpoint and
// starts with an empty store; a killed process leaves its files to the
// next Open.
//
// RocksDB, tuned for this: no compression (float rows do not compress), a
// bloom filter per file kept in memory (a push of a key that was never
// demoted, the common case, then costs no disk read), a small block cache
// (the rows that are hot live in the table's memory already), a small
// memtable with a filter. Chosen over a file of fixed-size slots with an
// index in memory, which moved rows 7x faster from the page cache (2.7 us
// against 19 us for a read, read, delete and write of 208-byte rows), for
// two reasons: its index costs no memory per row on disk (a slot file's
// costs ~20 bytes, 3.5 GB for 1.75x10^8 cold rows), and its files are
// immutable, so checkpoints can link them instead of copying.
//
// A key is either in the table's memory or here, never both: the table
// moves it under its partition's exclusive lock, so the store itself needs
// no ordering between keys. Thread-safe (RocksDB is).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/status.h"
#include "base/status_or.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace ps::table {

class ColdRowStore {
 public:
  // Opens an empty store of records of `record_bytes` in `dir`, created if
  // missing; what an earlier process left there is deleted. kIOError (with
  // RocksDB's reason) when the folder cannot be written.
  static StatusOr<std::unique_ptr<ColdRowStore>> Open(const std::string& dir,
                                                      size_t record_bytes);
  // Deletes the store's files, and `dir` when that leaves it empty.
  ~ColdRowStore();

  size_t record_bytes() const { return record_bytes_; }
  const std::string& dir() const { return dir_; }

  // Stores `record` (record_bytes) under `key`. kIOError when the disk
  // refuses it (full, gone): then nothing was stored.
  Status Put(uint64_t key, std::span<const std::byte> record);
  // Copies the record of `key` into `record` (record_bytes): true, or false
  // when the store has none. kIOError for a failed read.
  StatusOr<bool> Get(uint64_t key, std::span<std::byte> record) const;
  Status Delete(uint64_t key);
  // Every record deleted (a restore starts from an empty store).
  Status Clear();
  // fn(key, record) for every record, keys ascending.
  using RecordFn = std::function<void(uint64_t, std::span<const std::byte>)>;
  Status ForEach(const RecordFn& fn) const;
  // fn for at most `limit` records from key `first` on, keys ascending.
  // Returns the key after the last one visited, or nullopt when the scan
  // reached the end.
  StatusOr<std::optional<uint64_t>> ForEachFrom(uint64_t first, size_t limit,
                                                const RecordFn& fn) const;

  // Bytes of records written and read since Open.
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  ColdRowStore(std::string dir, size_t record_bytes,
               std::unique_ptr<rocksdb::DB> db);

  const std::string dir_;
  const size_t record_bytes_;
  std::unique_ptr<rocksdb::DB> db_;
  std::atomic<uint64_t> bytes_written_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace ps::table
