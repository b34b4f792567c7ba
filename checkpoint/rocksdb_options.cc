#include "checkpoint/rocksdb_options.h"

#include <rocksdb/env.h>
#include <rocksdb/table.h>

#include <cstdarg>

namespace ps::checkpoint {
namespace {

class DiscardLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

}  // namespace

rocksdb::Options CheckpointDbOptions() {
  rocksdb::Options o;
  o.compression = rocksdb::kNoCompression;
  o.bottommost_compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table;
  table.block_size = 64 << 10;
  table.filter_policy.reset();
  table.no_block_cache = true;
  // RocksDB's default, said here because restore pays it on every byte: in
  // this build of librocksdb (portable, SSE2) XXH3 verifies ~15 GB/s a core;
  // its CRC32c runs in software, 8 times slower.
  table.checksum = rocksdb::kXXH3;
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.disable_auto_compactions = true;
  o.info_log = std::make_shared<DiscardLogger>();
  o.max_open_files = 256;
  o.keep_log_file_num = 1;
  return o;
}

rocksdb::Options CheckpointReadDbOptions(FileReads reads) {
  rocksdb::Options o = CheckpointDbOptions();
  // RocksDB's default tells the kernel every file is read at random
  // (POSIX_FADV_RANDOM), which turns its readahead off: each of the scan's
  // reads would then wait for the disk.
  o.advise_random_on_open = false;
  // Reads blocks straight from the page cache instead of copying them into
  // a buffer first: a hot restore spent a quarter of its time in that copy.
  // Checksums are still verified on every block. The cost: an I/O error on
  // a mapped page is a SIGBUS, not a Status, as for any mapped file; a file
  // cut short at rest is still found (RocksDB maps the size it sees at
  // open and checks the footer), see checkpoint_integrity_test.
  o.allow_mmap_reads = reads == FileReads::kMapped;
  return o;
}

rocksdb::ReadOptions CheckpointScanOptions() {
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  r.fill_cache = false;
  r.readahead_size = 4 << 20;
  r.total_order_seek = true;
  return r;
}

}  // namespace ps::checkpoint
