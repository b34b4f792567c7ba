// cold_store_bench: what one miss of a tiered EXACT table costs its disk
// store, against what the disk itself asks for the same bytes.
//
// A training step on a tiered table (scripts/bench_tiered.sh) reads the
// rows it misses from the disk tier and moves as many other rows out. Here
// a step is that store work alone, --misses times, after --rows records of
// --record_bytes were written:
//
// - store: RocksDbColdRowStore (the disk tier ps_server opens), as the
//   table drives it: one GetMany of the step's keys, then per miss a Put
//   (a row moved out) and a Delete (the row moved in);
// - raw, the peer: one file of the same records, each miss one read of the
//   disk sectors holding its record (O_DIRECT, io_uring, --depth in
//   flight), and the rows moved out appended to the file in 1 MiB direct
//   writes: the least any store must do for a miss on this disk (it keeps
//   no index: a store would also have to find the record).
//
// Prints, per side, the median over --reps of the wall and CPU time (the
// whole process: RocksDB's flushes and compactions too) per miss:
//   RESULT cold_store_us_per_miss_<store|raw> <us>
//   RESULT cold_store_cpu_us_per_miss_<store|raw> <us>
// Run it where the page cache cannot hold the records (bench_tiered.sh runs
// it in the memory cgroup of its tiered server), or the store's reads are
// memory copies.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/status_or.h"
#include "cli/flags.h"
#include "net/unique_fd.h"
#include "table/rocksdb_cold_row_store.h"

DEFINE_string(dir, "",
              "folder on the disk to measure (created; emptied of what this "
              "program writes there when it ends); required");
DEFINE_uint64(rows, 17500000,
              "records written before the steps (bench_tiered.sh's table "
              "has 7/8 of its 2x10^7 rows on disk)");
DEFINE_uint64(record_bytes, 144,
              "bytes of a record (dim 16 and Adagrad: 2 x 64 B, + 16 B of "
              "last update)");
DEFINE_uint32(misses, 2500, "rows missed, and moved out, per step");
DEFINE_uint32(steps, 100, "timed steps per repetition, after 20 untimed");
DEFINE_uint32(reps, 3, "repetitions per side (the median is reported)");
DEFINE_uint32(depth, 64, "raw: reads in flight");

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kWarmupSteps = 20;
constexpr size_t kSector = 512;  // O_DIRECT's alignment on common disks
constexpr size_t kWriteBytes = 1 << 20;

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-6;
}

// Microseconds of wall and CPU time per miss over the timed steps.
struct PerMiss {
  double wall_us = 0;
  double cpu_us = 0;
};

// Runs step() (a Status) for the untimed and then the timed steps; the
// first error ends the run.
template <typename Step>
ps::StatusOr<PerMiss> Time(Step step) {
  for (uint32_t s = 0; s < kWarmupSteps; ++s) PS_RETURN_IF_ERROR(step());
  const auto start = Clock::now();
  const double cpu = CpuSeconds();
  for (uint32_t s = 0; s < FLAGS_steps; ++s) PS_RETURN_IF_ERROR(step());
  const double wall =
      std::chrono::duration<double>(Clock::now() - start).count();
  const double misses = static_cast<double>(FLAGS_steps) * FLAGS_misses;
  return PerMiss{wall * 1e6 / misses, (CpuSeconds() - cpu) * 1e6 / misses};
}

// The store side: a fresh RocksDbColdRowStore in `dir`, filled, then steps.
ps::StatusOr<PerMiss> MeasureStore(const std::string& dir,
                                   std::mt19937_64* rng) {
  PS_ASSIGN_OR_RETURN(
      const std::unique_ptr<ps::table::ColdRowStore> opened,
      ps::table::RocksDbColdRowStore::Open(dir, FLAGS_record_bytes));
  ps::table::ColdRowStore& store = *opened;
  std::vector<std::byte> record(FLAGS_record_bytes, std::byte{0x5a});
  std::vector<ps::table::ColdRecordWrite> batch;
  for (uint64_t key = 0; key < FLAGS_rows; ++key) {
    batch.push_back({key, record});
    if (batch.size() == 1024 || key + 1 == FLAGS_rows) {
      PS_RETURN_IF_ERROR(store.Write(batch));
      batch.clear();
    }
  }
  // Keys on disk are [0, rows) less those moved in, plus those moved out
  // since, numbered on from `rows`: each step misses keys of the first
  // range (most are there) and moves new ones out.
  uint64_t next_out = FLAGS_rows;
  std::vector<uint64_t> keys(FLAGS_misses);
  std::vector<std::byte> records(keys.size() * FLAGS_record_bytes);
  std::vector<uint8_t> found(keys.size());
  return Time([&] {
    for (uint64_t& k : keys) k = (*rng)() % FLAGS_rows;
    PS_RETURN_IF_ERROR(store.GetMany(keys, records, found));
    for (size_t i = 0; i < keys.size(); ++i) {
      PS_RETURN_IF_ERROR(store.Put(next_out++, record));
      if (found[i]) PS_RETURN_IF_ERROR(store.Delete(keys[i]));
    }
    return ps::Status::OK();
  });
}

// The peer: records in one file read and appended with direct I/O.
ps::StatusOr<PerMiss> MeasureRaw(const std::string& path,
                                 std::mt19937_64* rng) {
  const ps::net::UniqueFd fd(open(
      path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return ps::ErrnoStatus(ps::StatusCode::kIOError,
                           "cannot open " + path +
                               " for direct I/O (a file system without "
                               "O_DIRECT?)",
                           errno);
  }
  auto buffer = [](size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, bytes) != 0) std::abort();
    std::memset(p, 0x5a, bytes);
    return std::unique_ptr<void, decltype(&std::free)>(p, &std::free);
  };
  auto out = buffer(kWriteBytes);
  const uint64_t bytes = FLAGS_rows * FLAGS_record_bytes;
  off_t end = 0;
  // One 1 MiB direct write at `end`, which moves on.
  auto write_out = [&]() -> ps::Status {
    if (pwrite(fd.get(), out.get(), kWriteBytes, end) != kWriteBytes) {
      return ps::ErrnoStatus(ps::StatusCode::kIOError, "cannot write " + path,
                             errno);
    }
    end += kWriteBytes;
    return ps::Status::OK();
  };
  while (static_cast<uint64_t>(end) < bytes) PS_RETURN_IF_ERROR(write_out());
  io_uring ring;
  if (int e = io_uring_queue_init(FLAGS_depth, &ring, 0); e != 0) {
    return ps::ErrnoStatus(ps::StatusCode::kIOError, "no io_uring here", -e);
  }
  // The bytes of the sectors a record spans, at most.
  const size_t read_bytes =
      (FLAGS_record_bytes + 2 * kSector - 2) / kSector * kSector;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> slots;
  for (uint32_t i = 0; i < FLAGS_depth; ++i)
    slots.push_back(buffer(read_bytes));
  std::vector<uint64_t> offsets(FLAGS_misses);
  size_t appended = 0;  // bytes of `out` filled
  const ps::StatusOr<PerMiss> result = Time([&]() -> ps::Status {
    for (uint64_t& o : offsets) {
      o = (*rng)() % FLAGS_rows * FLAGS_record_bytes;
    }
    std::vector<uint32_t> idle(FLAGS_depth);  // slots not in flight
    std::iota(idle.begin(), idle.end(), 0u);
    size_t submitted = 0, done = 0;
    while (done < offsets.size()) {
      while (!idle.empty() && submitted < offsets.size()) {
        const uint64_t first = offsets[submitted] / kSector * kSector;
        const uint64_t last =
            (offsets[submitted] + FLAGS_record_bytes + kSector - 1) / kSector *
            kSector;
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        io_uring_prep_read(sqe, fd.get(), slots[idle.back()].get(),
                           static_cast<unsigned>(last - first), first);
        io_uring_sqe_set_data64(sqe, idle.back());
        idle.pop_back();
        ++submitted;
      }
      if (int e = io_uring_submit_and_wait(&ring, 1); e < 0) {
        return ps::ErrnoStatus(ps::StatusCode::kIOError, "io_uring", -e);
      }
      io_uring_cqe* cqe = nullptr;
      unsigned head = 0, seen = 0;
      bool ok = true;
      io_uring_for_each_cqe(&ring, head, cqe) {
        ok = ok && cqe->res > 0;
        idle.push_back(static_cast<uint32_t>(io_uring_cqe_get_data64(cqe)));
        ++seen;
      }
      io_uring_cq_advance(&ring, seen);
      if (!ok) return ps::IOError("a direct read of " + path + " failed");
      done += seen;
    }
    auto* bytes_out = static_cast<std::byte*>(out.get());
    for (uint32_t i = 0; i < FLAGS_misses; ++i) {
      if (appended + FLAGS_record_bytes > kWriteBytes) {
        PS_RETURN_IF_ERROR(write_out());
        appended = 0;
      }
      std::memset(bytes_out + appended, static_cast<int>(i),
                  FLAGS_record_bytes);
      appended += FLAGS_record_bytes;
    }
    return ps::Status::OK();
  });
  io_uring_queue_exit(&ring);
  return result;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "the store work of --misses misses a step on a tiered table's disk "
      "store (RocksDbColdRowStore), against raw direct reads and appends "
      "of the same records; a peer of scripts/bench_tiered.sh");
  ps::Status s = ps::cli::ParseFlags(&argc, &argv);
  if (s.ok() && FLAGS_dir.empty()) s = ps::InvalidArgument("--dir is required");
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("rows", FLAGS_rows, 1000, uint64_t{1} << 32);
  }
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("record_bytes", FLAGS_record_bytes, 16, 4096);
  }
  if (s.ok()) s = ps::cli::CheckUintFlag("misses", FLAGS_misses, 1, 1 << 20);
  if (s.ok()) s = ps::cli::CheckUintFlag("steps", FLAGS_steps, 1, 1 << 20);
  if (s.ok()) s = ps::cli::CheckUintFlag("reps", FLAGS_reps, 1, 100);
  if (s.ok()) s = ps::cli::CheckUintFlag("depth", FLAGS_depth, 1, 4096);
  if (!s.ok()) {
    std::fprintf(stderr, "cold_store_bench: %s\n", s.message().c_str());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_dir, ec);
  if (ec) {
    std::fprintf(stderr, "cold_store_bench: cannot create %s: %s\n",
                 FLAGS_dir.c_str(), ec.message().c_str());
    return 1;
  }
  const std::string store_dir = FLAGS_dir + "/store";
  const std::string raw_file = FLAGS_dir + "/raw.records";
  std::mt19937_64 rng(1);
  const char* names[2] = {"store", "raw"};
  std::vector<double> wall[2], cpu[2];
  // Interleaved, so that a disk or a neighbour that slows for a while
  // slows both sides.
  for (uint32_t r = 0; r < FLAGS_reps; ++r) {
    for (int side = 0; side < 2; ++side) {
      const ps::StatusOr<PerMiss> m = side == 0 ? MeasureStore(store_dir, &rng)
                                                : MeasureRaw(raw_file, &rng);
      std::filesystem::remove_all(store_dir, ec);
      std::filesystem::remove(raw_file, ec);
      std::filesystem::remove_all(store_dir + ".links", ec);
      if (!m.ok()) {
        std::fprintf(stderr, "cold_store_bench: %s: %s\n", names[side],
                     m.status().ToString().c_str());
        return 1;
      }
      std::printf("%s: %.2f us a miss, %.2f us of CPU\n", names[side],
                  m->wall_us, m->cpu_us);
      std::fflush(stdout);
      wall[side].push_back(m->wall_us);
      cpu[side].push_back(m->cpu_us);
    }
  }
  for (int side = 0; side < 2; ++side) {
    std::printf("RESULT cold_store_us_per_miss_%s %.3f us\n", names[side],
                Median(wall[side]));
    std::printf("RESULT cold_store_cpu_us_per_miss_%s %.3f us\n", names[side],
                Median(cpu[side]));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
