// ckpt_bench: write and restore throughput of one checkpoint shard.
//
//   ckpt_bench --dir=/tmp/ckpt_bench --bytes=1073741824 --dim=64
//
// Builds a shard of one HASHED table (SGD: no optimizer state, so the rows
// are all the bytes) of --bytes, writes it as a full checkpoint (WriteShard
// + CommitCheckpoint: SST files, ingest, fsyncs, MANIFEST) and restores it
// into a second buffer (RestoreShard: scan, block and entry checksums, copy
// into place), checking the result bit for bit. Before the restore the
// shard's files are dropped from the page cache (posix_fadvise DONTNEED), so
// the restore reads the disk. Prints one JSON object:
//   {"write_mb_s":..., "restore_mb_s":..., "bytes":..., "disk_bytes":...}
// MB = 10^6 bytes of row data (what dd's MB/s counts too).
#include <fcntl.h>
#include <gflags/gflags.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"
#include "protocol/shard_map.h"

DEFINE_string(dir, "/tmp/ckpt_bench", "Scratch directory (emptied first).");
DEFINE_uint64(bytes, 1ull << 30, "Bytes of rows in the shard.");
DEFINE_uint32(dim, 64, "Floats per row.");
DEFINE_int32(threads, 2, "SST files written at the same time.");

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

void DropFromPageCache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  namespace ck = ps::checkpoint;
  std::error_code ec;
  std::filesystem::remove_all(FLAGS_dir, ec);
  std::filesystem::create_directories(FLAGS_dir);

  ck::ShardSnapshot snap;
  ck::TableSnapshot t;
  t.spec.set_id(1);
  t.spec.set_name("emb");
  t.spec.set_kind(ps::proto::HASHED);
  t.spec.set_dim(FLAGS_dim);
  const uint64_t rows = FLAGS_bytes / (FLAGS_dim * sizeof(float));
  t.spec.set_capacity(rows);
  t.spec.mutable_optimizer()->set_name("sgd");
  t.first_row = 0;
  t.rows = rows;
  t.values.resize(rows * FLAGS_dim);
  for (uint64_t i = 0; i < t.values.size(); ++i) {
    t.values[i] = static_cast<float>(ps::protocol::Mix64(i) >> 40) * 1e-6f;
  }
  const uint64_t bytes = t.values.size() * sizeof(float);
  snap.tables.push_back(t);
  snap.step = 1;

  const std::string ckpt = ck::JoinPath(FLAGS_dir, ck::CheckpointDirName(1));
  auto start = std::chrono::steady_clock::now();
  ck::ShardWriteOptions wo;
  wo.threads = FLAGS_threads;
  auto entry = ck::WriteShard(ckpt, snap, wo);
  if (!entry.ok()) {
    std::fprintf(stderr, "write: %s\n", entry.status().ToString().c_str());
    return 1;
  }
  ck::CommitRequest c;
  c.checkpoint_dir = ckpt;
  c.step = 1;
  c.tables = {t.spec};
  auto m = ck::CommitCheckpoint(c);
  if (!m.ok()) {
    std::fprintf(stderr, "commit: %s\n", m.status().ToString().c_str());
    return 1;
  }
  const double write_s = Seconds(start);

  DropFromPageCache(ckpt);
  std::vector<float> restored(t.values.size());
  ck::RestoreTarget target;
  ck::TableTarget tt;
  tt.spec = t.spec;
  tt.first_row = 0;
  tt.rows = rows;
  tt.values = restored.data();
  target.tables.push_back(tt);
  start = std::chrono::steady_clock::now();
  auto r = ck::RestoreShard(ckpt, &target);
  const double restore_s = Seconds(start);
  if (!r.ok()) {
    std::fprintf(stderr, "restore: %s\n", r.status().ToString().c_str());
    return 1;
  }
  if (std::memcmp(restored.data(), snap.tables[0].values.data(), bytes) != 0) {
    std::fprintf(stderr, "restore: rows differ from what was written\n");
    return 1;
  }
  std::printf(
      "{\"bytes\": %llu, \"disk_bytes\": %llu, \"rows\": %llu, \"dim\": %u, "
      "\"write_s\": %.3f, \"restore_s\": %.3f, \"write_mb_s\": %.1f, "
      "\"restore_mb_s\": %.1f}\n",
      static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(m->total_bytes()),
      static_cast<unsigned long long>(rows), FLAGS_dim, write_s, restore_s,
      bytes / 1e6 / write_s, bytes / 1e6 / restore_s);
  std::filesystem::remove_all(FLAGS_dir, ec);
  return 0;
}
