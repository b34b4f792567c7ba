// ckpt_bench: write and restore throughput of one checkpoint shard.
//
//   ckpt_bench --dir=/tmp/ckpt_bench --bytes=1073741824 --dim=64
//   ckpt_bench --dir=D --phase=write     # leaves the checkpoint in D
//   ckpt_bench --dir=D --phase=restore --cache=cold   # restores D's
//
// Builds a shard of one HASHED table (SGD: no optimizer state, so the rows
// are all the bytes) of --bytes, writes it as a full checkpoint (WriteShard
// + CommitCheckpoint: SST files, ingest, fsyncs, MANIFEST) and restores it
// into a second buffer (RestoreShard: scan, block and entry checksums, copy
// into place), checking the result bit for bit against the rows, which are
// a function of their index (so a restore phase needs no written copy).
// --cache=cold (default): before the restore the checkpoint's files are
// dropped from the page cache (posix_fadvise DONTNEED), so it reads the
// disk; hot: they are read once first, so it reads the page cache.
// scripts/bench_ckpt.sh runs the phases apart so that its dd peer reads the
// same files, in the same cache state, between them. Prints one JSON object:
//   {"write_mb_s":..., "restore_mb_s":..., "bytes":..., "disk_bytes":...}
// (a phase prints its own figures). MB = 10^6 bytes of row data; the files
// hold a little more (keys, block trailers, index), which dd counts.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/committer.h"
#include "checkpoint/layout.h"
#include "checkpoint/restorer.h"
#include "checkpoint/shard_writer.h"
#include "cli/flags.h"
#include "protocol/shard_map.h"

DEFINE_string(dir, "/tmp/ckpt_bench", "Scratch directory (emptied first).");
DEFINE_uint64(bytes, 1ull << 30, "Bytes of rows in the shard.");
DEFINE_uint32(dim, 64, "Floats per row.");
DEFINE_int32(threads, 2, "SST files written at the same time.");
DEFINE_int32(readers, 0,
             "Threads reading the shard at restore (RestoreTarget::readers; "
             "0: one per hardware thread).");
DEFINE_string(phase, "all",
              "all: write, then restore, then remove --dir; write: write the "
              "checkpoint and keep it; restore: restore the one --phase=write "
              "left in --dir (same --bytes and --dim) and keep it.");
DEFINE_string(cache, "cold",
              "The page cache before the restore: cold (the checkpoint's "
              "files dropped from it) or hot (read into it first).");

namespace {

namespace ck = ps::checkpoint;

enum class Phase { kAll, kWrite, kRestore };
enum class Cache { kCold, kHot };

bool ParsePhase(const std::string& s, Phase* out) {
  if (s == "all")
    *out = Phase::kAll;
  else if (s == "write")
    *out = Phase::kWrite;
  else if (s == "restore")
    *out = Phase::kRestore;
  else
    return false;
  return true;
}

bool ParseCache(const std::string& s, Cache* out) {
  if (s == "cold")
    *out = Cache::kCold;
  else if (s == "hot")
    *out = Cache::kHot;
  else
    return false;
  return true;
}

// User and system CPU seconds of this process so far (all threads).
double CpuSeconds() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

// Drops every file under `dir` from the page cache, or (hot) reads it whole.
void SetPageCache(const std::string& dir, Cache cache) {
  std::vector<char> buf(cache == Cache::kHot ? 1 << 20 : 0);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (cache == Cache::kCold) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    } else {
      while (::read(fd, buf.data(), buf.size()) > 0) {
      }
    }
    ::close(fd);
  }
}

float RowValue(uint64_t i) {
  return static_cast<float>(ps::protocol::Mix64(i) >> 40) * 1e-6f;
}

ps::proto::TableSpec BenchSpec(uint64_t rows) {
  ps::proto::TableSpec spec;
  spec.set_id(1);
  spec.set_name("emb");
  spec.set_kind(ps::proto::HASHED);
  spec.set_dim(FLAGS_dim);
  spec.set_capacity(rows);
  spec.mutable_optimizer()->set_name("sgd");
  return spec;
}

// Writes the checkpoint; its write seconds and bytes on disk.
bool Write(const std::string& ckpt, const ps::proto::TableSpec& spec,
           uint64_t rows, double* seconds, uint64_t* disk_bytes) {
  ck::ShardSnapshot snap;
  ck::TableSnapshot t;
  t.spec = spec;
  t.first_row = 0;
  t.rows = rows;
  t.values.resize(rows * FLAGS_dim);
  for (uint64_t i = 0; i < t.values.size(); ++i) t.values[i] = RowValue(i);
  snap.tables.push_back(std::move(t));
  snap.step = 1;
  const auto start = std::chrono::steady_clock::now();
  ck::ShardWriteOptions wo;
  wo.threads = FLAGS_threads;
  auto entry = ck::WriteShard(ckpt, snap, wo);
  if (!entry.ok()) {
    std::fprintf(stderr, "write: %s\n", entry.status().ToString().c_str());
    return false;
  }
  ck::CommitRequest c;
  c.checkpoint_dir = ckpt;
  c.step = 1;
  c.tables = {spec};
  auto m = ck::CommitCheckpoint(c);
  if (!m.ok()) {
    std::fprintf(stderr, "commit: %s\n", m.status().ToString().c_str());
    return false;
  }
  *seconds = Seconds(start);
  *disk_bytes = m->total_bytes();
  return true;
}

// Restores the checkpoint and checks every row; the restore's seconds.
bool Restore(const std::string& ckpt, const ps::proto::TableSpec& spec,
             uint64_t rows, Cache cache, double* seconds, double* cpu_seconds) {
  // Allocated and touched before the clock starts, as a server's table is.
  std::vector<float> restored(rows * FLAGS_dim);
  SetPageCache(ckpt, cache);
  ck::RestoreTarget target;
  target.readers = FLAGS_readers;
  ck::TableTarget tt;
  tt.spec = spec;
  tt.first_row = 0;
  tt.rows = rows;
  tt.values = restored.data();
  target.tables.push_back(tt);
  const double cpu_start = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  auto r = ck::RestoreShard(ckpt, &target);
  *seconds = Seconds(start);
  *cpu_seconds = CpuSeconds() - cpu_start;
  if (!r.ok()) {
    std::fprintf(stderr, "restore: %s\n", r.status().ToString().c_str());
    return false;
  }
  for (uint64_t i = 0; i < restored.size(); ++i) {
    const float want = RowValue(i);
    if (std::memcmp(&restored[i], &want, sizeof want) != 0) {
      std::fprintf(stderr,
                   "restore: float %llu differs from what was "
                   "written\n",
                   static_cast<unsigned long long>(i));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "write and restore throughput of one checkpoint shard (the rows of one "
      "HASHED table, --bytes of them); prints one JSON object of MB/s. The "
      "phases apart: --phase=write, then --phase=restore (scripts/"
      "bench_ckpt.sh)");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "ckpt_bench: %s\n", s.message().c_str());
    return 2;
  }
  Phase phase;
  Cache cache;
  if (!ParsePhase(FLAGS_phase, &phase)) {
    std::fprintf(stderr,
                 "ckpt_bench: --phase must be all, write or restore, "
                 "not '%s'\n",
                 FLAGS_phase.c_str());
    return 2;
  }
  if (!ParseCache(FLAGS_cache, &cache)) {
    std::fprintf(stderr, "ckpt_bench: --cache must be cold or hot, not '%s'\n",
                 FLAGS_cache.c_str());
    return 2;
  }
  if (FLAGS_dim == 0 || FLAGS_bytes < FLAGS_dim * sizeof(float)) {
    std::fprintf(stderr,
                 "ckpt_bench: --bytes must hold one row of --dim "
                 "floats\n");
    return 2;
  }
  const uint64_t rows = FLAGS_bytes / (FLAGS_dim * sizeof(float));
  const uint64_t bytes = rows * FLAGS_dim * sizeof(float);
  const ps::proto::TableSpec spec = BenchSpec(rows);
  const std::string ckpt = ck::JoinPath(FLAGS_dir, ck::CheckpointDirName(1));
  std::error_code ec;
  if (phase != Phase::kRestore) {
    std::filesystem::remove_all(FLAGS_dir, ec);
    std::filesystem::create_directories(FLAGS_dir);
  }
  std::string json = "{\"bytes\": " + std::to_string(bytes) +
                     ", \"rows\": " + std::to_string(rows) +
                     ", \"dim\": " + std::to_string(FLAGS_dim);
  char buf[160];
  if (phase != Phase::kRestore) {
    double s;
    uint64_t disk_bytes;
    if (!Write(ckpt, spec, rows, &s, &disk_bytes)) return 1;
    std::snprintf(buf, sizeof buf,
                  ", \"disk_bytes\": %llu, \"write_s\": %.3f, "
                  "\"write_mb_s\": %.1f",
                  static_cast<unsigned long long>(disk_bytes), s,
                  bytes / 1e6 / s);
    json += buf;
  }
  if (phase != Phase::kWrite) {
    double s, cpu_s;
    if (!Restore(ckpt, spec, rows, cache, &s, &cpu_s)) return 1;
    std::snprintf(buf, sizeof buf,
                  ", \"restore_s\": %.3f, \"restore_cpu_s\": %.3f, "
                  "\"restore_mb_s\": %.1f",
                  s, cpu_s, bytes / 1e6 / s);
    json += buf;
  }
  std::printf("%s}\n", json.c_str());
  if (phase == Phase::kAll) std::filesystem::remove_all(FLAGS_dir, ec);
  return 0;
}
