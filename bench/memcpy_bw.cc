// memcpy_bw: the bandwidth of one plain single-threaded memcpy of --bytes
// within one process, both buffers faulted in first: the peer figure of
// scripts/bench_kv.sh for a same-host KV cache hand-off of as many bytes.
// With --piece_bytes it copies the same bytes in pieces (one memcpy each)
// taken every --source_stride bytes of a larger source into a contiguous
// destination: the KV hand-off's own access pattern without a transport,
// which tells what the pattern costs the memory system from what the
// transport adds. With --threads the copy is cut into as many contiguous
// parts, each a thread's (the peer of a hand-off with copy lanes). Prints
// each repetition and "RESULT memcpy_gbps <median>
// GB/s" (1e9 B/s of destination bytes).
#include <gflags/gflags.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "cli/flags.h"

DEFINE_uint64(bytes, uint64_t{1} << 30, "bytes to copy (1 KiB .. 64 GiB)");
DEFINE_uint64(piece_bytes, 0,
              "0: one memcpy of --bytes; else copy pieces of this many bytes "
              "(it must divide --bytes)");
DEFINE_uint64(source_stride, 0,
              "with --piece_bytes: bytes between the starts of the pieces in "
              "the source (>= --piece_bytes; 0: --piece_bytes, contiguous)");
DEFINE_int32(threads, 1,
             "threads, each copying a contiguous part of the bytes (1..64)");
DEFINE_int32(reps, 3,
             "timed copies (the median is reported), after one "
             "untimed");

namespace {

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "memcpy of --bytes (one thread unless --threads), timed; the peer of "
      "scripts/bench_kv.sh");
  if (ps::Status s = ps::cli::ParseFlags(&argc, &argv); !s.ok()) {
    std::fprintf(stderr, "memcpy_bw: %s\n", s.message().c_str());
    return 2;
  }
  ps::Status s =
      ps::cli::CheckUintFlag("bytes", FLAGS_bytes, 1024, uint64_t{64} << 30);
  if (s.ok()) s = ps::cli::CheckIntFlag("reps", FLAGS_reps, 1, 1000);
  if (s.ok()) s = ps::cli::CheckIntFlag("threads", FLAGS_threads, 1, 64);
  const size_t piece = FLAGS_piece_bytes == 0 ? FLAGS_bytes : FLAGS_piece_bytes;
  const size_t stride = FLAGS_source_stride == 0 ? piece : FLAGS_source_stride;
  if (s.ok() && (piece > FLAGS_bytes || FLAGS_bytes % piece != 0)) {
    s = ps::InvalidArgument("--piece_bytes must divide --bytes");
  }
  if (s.ok()) {
    s = ps::cli::CheckUintFlag("source_stride", stride, piece, piece * 64,
                               "from --piece_bytes to 64 times it");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "memcpy_bw: %s\n", s.message().c_str());
    return 2;
  }
  const size_t n = FLAGS_bytes;
  const size_t pieces = n / piece;
  const size_t source_bytes = pieces * stride;
  void* src = mmap(nullptr, source_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* dst = mmap(nullptr, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (src == MAP_FAILED || dst == MAP_FAILED) {
    std::fprintf(stderr, "memcpy_bw: cannot map 2 x %zu bytes\n", n);
    return 1;
  }
  std::memset(src, 0x5a, source_bytes);
  std::memset(dst, 0, n);
  std::vector<double> gbps;
  for (int r = -1; r < FLAGS_reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    // Thread t copies pieces [t * pieces / threads, (t + 1) * pieces /
    // threads), one piece being all the bytes when unsplit: then its part.
    auto copy = [&](size_t t, size_t threads) {
      auto* d = static_cast<unsigned char*>(dst);
      const auto* from = static_cast<const unsigned char*>(src);
      if (pieces == 1) {
        const size_t begin = n * t / threads, end = n * (t + 1) / threads;
        std::memcpy(d + begin, from + begin, end - begin);
        return;
      }
      for (size_t i = pieces * t / threads; i < pieces * (t + 1) / threads;
           ++i) {
        std::memcpy(d + i * piece, from + i * stride, piece);
      }
    };
    const size_t threads = static_cast<size_t>(FLAGS_threads);
    std::vector<std::thread> others;
    for (size_t t = 1; t < threads; ++t) others.emplace_back(copy, t, threads);
    copy(0, threads);
    for (std::thread& t : others) t.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    // Keeps the copy from being optimised away.
    if (static_cast<volatile unsigned char*>(dst)[n - 1] != 0x5a) return 1;
    if (r < 0) continue;
    gbps.push_back(n / s / 1e9);
    std::printf(
        "memcpy %zu bytes in %zu piece(s), %d thread(s): %.2f ms, "
        "%.2f GB/s\n",
        n, pieces, FLAGS_threads, s * 1e3, gbps.back());
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf("RESULT memcpy_gbps %.4f GB/s\n", gbps[gbps.size() / 2]);
  munmap(src, source_bytes);
  munmap(dst, n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
