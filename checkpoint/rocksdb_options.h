// The RocksDB options a checkpoint shard is written and read with, in one
// place so that the writer, the reader and ps_ckpt agree.
//
// Bulk writing: rows are produced in key order, so they go straight into SST
// files (rocksdb::SstFileWriter, several files in parallel) that the database
// then ingests by moving them (IngestExternalFile, move_files): no write-ahead
// log, no memtable, no flush, no compaction. The SST files are fsynced when
// finished; the database's own MANIFEST is synced by the ingest; our MANIFEST
// (checkpoint/layout.h) is the commit point after that.
//  - No compression: float rows barely compress and the CPU is better spent
//    elsewhere (2 cores shared with training).
//  - 64 KiB blocks, no filter: restore scans; it never looks up single keys,
//    so bigger blocks mean a smaller index and fewer reads. A HASHED/DENSE
//    entry holds a run of rows of about 128 KiB (checkpoint/row_codec.h), so
//    a data block holds one entry: one read and one block checksum per run.
//  - XXH3 block checksums (the fastest RocksDB has; see the .cc).
//  - Auto compactions off: ingested files do not overlap and are never
//    rewritten; a checkpoint is written once and read rarely.
//  - A logger that discards: the info LOG would otherwise be a good part of
//    a small incremental checkpoint's bytes.
#pragma once

#include <rocksdb/options.h>

#include <memory>

namespace ps::checkpoint {

rocksdb::Options CheckpointDbOptions();
// Opening a checkpoint to read it (restore, verify): CheckpointDbOptions with
// settings that only the reader sees (nothing of the files' format): the
// kernel's readahead left on, as restore reads every file front to back.
// How a scan reads a checkpoint's files: mapped (the default: a restore
// reads the page cache without a copy) or copied into buffers (the pages
// then never count in the reader's resident memory: a serving replica,
// whose memory is its tables).
enum class FileReads { kMapped, kCopied };
rocksdb::Options CheckpointReadDbOptions(FileReads reads = FileReads::kMapped);
// Reads: block checksums verified, no block cache pollution, large
// readahead for the sequential scan.
rocksdb::ReadOptions CheckpointScanOptions();

}  // namespace ps::checkpoint
