// ColdRowStore: the disk tier of one EXACT table shard (table/exact_table.h,
// when_full: WHEN_FULL_MOVE_TO_DISK): the rows that cooled down out of the
// shard's memory bound, each as one fixed-size record (its values, optimizer
// state and last update, laid out by ExactPartition) under its key.
//
// An interface, so that the table does not depend on a storage library
// (workers link table/ and no storage): the server opens the
// implementation, RocksDbColdRowStore (table/rocksdb_cold_row_store.h),
// and hands it to the table (ExactTable::Options::open_disk_tier).
//
// A store is scratch, not durable state: it starts empty and deletes its
// files when destroyed (or when the last view of it goes). Checkpoints are
// what survive a crash: they write the rows in memory and link the store's
// files as they were at the cut (Link), so a restart restores the newest
// checkpoint and starts with an empty store.
//
// A key is either in the table's memory or here, never both: the table
// moves it under its partition's exclusive lock, so a store needs no
// ordering between keys. Implementations are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::table {

// fn(key, record) of one record.
using ColdRecordFn = std::function<void(uint64_t, std::span<const std::byte>)>;

// One change of ColdRowStore::Write: `record` stored under `key`, or, when
// `record` is empty, the key's record deleted.
struct ColdRecordWrite {
  uint64_t key;
  std::span<const std::byte> record;
};

// The records of a store as they were at one moment (ColdRowStore::Pin),
// readable later and from any thread while the store goes on changing:
// what a checkpoint writes the rows on disk from. Thread-safe.
class ColdRowView {
 public:
  virtual ~ColdRowView() = default;
  // fn(key, record) for every record of the moment, keys ascending.
  virtual Status ForEach(const ColdRecordFn& fn) const = 0;
  // ColdRowStore::GetMany as of the moment.
  virtual Status GetMany(std::span<const uint64_t> keys,
                         std::span<std::byte> records,
                         std::span<uint8_t> found) const = 0;
};

// The records of a store at one moment as files (ColdRowStore::Link): hard
// links to the store's files, which RocksDB never changes once written, in
// a folder of their own that is a database by itself. What a checkpoint
// places in its folder instead of writing the rows again (checkpoint/
// shard_writer.h). The folder is deleted when the object goes.
// Thread-safe.
class ColdRowFiles {
 public:
  virtual ~ColdRowFiles() = default;
  // fn(key, record) for every record of the moment, keys ascending (reads
  // the files).
  virtual Status ForEach(const ColdRecordFn& fn) const = 0;
  // Places the files in `dir`, created here (its parent must exist, `dir`
  // must not): each file hard-linked where `dir` is on the same file
  // system; where not (a checkpoint folder on NFS, say), hard-linked from
  // the first of `earlier` (folders PlaceAt made before, newest first,
  // on dir's file system) that holds the same file of the same store, so
  // that each file is copied once and then shared, the file system
  // counting its links; copied otherwise. The folder is synced. kIOError
  // naming what failed (then `dir` may hold some of the files: the caller
  // removes it).
  virtual Status PlaceAt(const std::string& dir,
                         const std::vector<std::string>& earlier) const = 0;
};

class ColdRowStore {
 public:
  virtual ~ColdRowStore() = default;

  // Bytes of every record.
  virtual size_t record_bytes() const = 0;
  // The folder it lies in: named in messages, and where the table makes
  // files of its own without names (table/spilled_rows.h: a snapshot writes
  // its rows in memory there), which the store never sees.
  virtual const std::string& where() const = 0;

  // Stores `record` (record_bytes) under `key`. kIOError when the disk
  // refuses it (full, gone): then nothing was stored.
  virtual Status Put(uint64_t key, std::span<const std::byte> record) = 0;
  // Copies the record of `key` into `record` (record_bytes): true, or false
  // when the store has none. kIOError for a failed read, kCorruption for a
  // record of the wrong size.
  virtual StatusOr<bool> Get(uint64_t key,
                             std::span<std::byte> record) const = 0;
  // Get of every key: the record of keys[i] into records at i *
  // record_bytes, found[i] = whether the store has one. Implementations
  // read many at once (a disk serves several reads in flight several times
  // faster than one at a time). The first error of any read is returned
  // (then records and found are partly written).
  virtual Status GetMany(std::span<const uint64_t> keys,
                         std::span<std::byte> records,
                         std::span<uint8_t> found) const = 0;
  virtual Status Delete(uint64_t key) = 0;
  // Every change of `writes`, in order, at once: a view pinned later sees
  // all of them, one pinned earlier none, and on an error (kIOError)
  // nothing was changed.
  virtual Status Write(std::span<const ColdRecordWrite> writes) = 0;
  // Every record deleted (a restore starts from an empty store).
  virtual Status Clear() = 0;
  // Every record replaced by those of the folder `dir` that
  // ColdRowFiles::PlaceAt made (a checkpoint's, which a restore adopts
  // instead of writing each row again): its table files hard-linked into
  // the store (copied across file systems), the rest copied; `dir` is left
  // as it was. Nothing else may use the store meanwhile, and no view of it
  // may live (kInternal, nothing changed). A `dir` that is not a folder of
  // regular files is refused before anything changes (kCorruption,
  // kNotFound: base/plain_folder.h). Other failures (kIOError, naming what
  // failed) leave the store empty, or, where it cannot be opened again,
  // unusable (its calls fail).
  virtual Status Adopt(const std::string& dir) = 0;
  // fn(key, record) for at most `limit` records from key `first` on, keys
  // ascending. Returns the key after the last one visited, or nullopt when
  // the scan reached the end.
  using RecordFn = ColdRecordFn;
  virtual StatusOr<std::optional<uint64_t>> ForEachFrom(
      uint64_t first, size_t limit, const RecordFn& fn) const = 0;
  // Every record, keys ascending.
  Status ForEach(const RecordFn& fn) const {
    return ForEachFrom(0, SIZE_MAX, fn).status();
  }

  // The records as they are now, as a view that keeps them (and the
  // store's files) while it lives, even past the store's own end.
  virtual StatusOr<std::shared_ptr<const ColdRowView>> Pin() const = 0;
  // The records as they are now, as files that stay as they are while the
  // store goes on changing (what writes hold still during this call is
  // what they hold). Costs writing out the records not yet in a file
  // (RocksDB's memtable, up to 16 MiB), then one hard link per file.
  virtual StatusOr<std::shared_ptr<const ColdRowFiles>> Link() const = 0;

  // Bytes of records written and read since the store opened.
  virtual uint64_t bytes_written() const = 0;
  virtual uint64_t bytes_read() const = 0;
};

// Opens a table shard's empty store for records of `record_bytes`.
using ColdRowStoreOpener =
    std::function<StatusOr<std::unique_ptr<ColdRowStore>>(size_t)>;

}  // namespace ps::table
