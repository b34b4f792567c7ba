// UringReadFileSystem: the FileSystem (rocksdb/file_system.h) the disk tier
// opens its RocksDB database on (table/rocksdb_cold_row_store.h): the
// default one, except that a MultiRead (the data blocks one MultiGet needs
// from one table file) goes to the disk as one batch through io_uring
// instead of one pread after another.
//
// Why: a training step's pull misses thousands of rows that lie on disk,
// one random 4 KiB read each. This machine's virtual disk answers 113k such
// reads a second with 16 in flight through io_uring, but only 48k from 16
// threads calling pread (fio, O_DIRECT): on 2 cores each pread's system
// call and wake-up cost more than the read. A batch is one system call.
//
// Where the kernel refuses io_uring (older than 5.1, or forbidden, as
// container runtimes' seccomp profiles do), files read as the default
// FileSystem's do, and available() says so.
//
// Thread-safe: files are read from many threads at once; each MultiRead
// takes a ring of its own from a pool for its duration.
#pragma once

#include <rocksdb/file_system.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct io_uring;

namespace ps::table {

class UringReadFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  // Reads of one MultiRead kept in flight at most.
  static constexpr unsigned kDepth = 64;

  // Wraps rocksdb::FileSystem::Default().
  static std::shared_ptr<UringReadFileSystem> Create();

  // False where this kernel refuses io_uring: then every read is target's.
  bool available() const { return rings_->available(); }

  static const char* kClassName() { return "UringReadFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus NewRandomAccessFile(
      const std::string& path, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomAccessFile>* file,
      rocksdb::IODebugContext* dbg) override;

  // Rings of kDepth entries, made as concurrent MultiReads need them and
  // kept for the next ones. Thread-safe.
  class RingPool {
   public:
    RingPool();
    ~RingPool();
    bool available() const { return available_; }
    // A ring of its own for the caller, or null (io_uring refused).
    io_uring* Take();
    void Give(io_uring* ring);

   private:
    bool available_ = false;
    std::mutex mu_;
    std::vector<io_uring*> idle_;  // guarded by mu_
  };

 private:
  explicit UringReadFileSystem(std::shared_ptr<rocksdb::FileSystem> target);

  // Shared with the files, which may outlive the file system.
  std::shared_ptr<RingPool> rings_;
};

}  // namespace ps::table
