// Every XXH3 path gives libxxhash's digest: sizes around each of XXH3's
// internal borders (16, 128, 240 bytes, a stripe, a block), unaligned
// starts, several seeds. A path the CPU lacks is skipped, with the reason.
#include "kernels/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

#include "kernels/cpu_features.h"

namespace ps::kernels {
namespace {

using Path = uint64_t (*)(const void*, size_t, uint64_t);

void ExpectLibDigest(Path path, const char* name) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> bytes(70000 + 64);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t sizes[] = {0,    1,    3,    4,    8,    9,     16,
                          17,   128,  129,  240,  241,  255,   256,
                          1023, 1024, 1025, 4096, 4097, 65536, 70000};
  for (size_t size : sizes) {
    for (size_t offset : {0, 1, 13}) {
      for (uint64_t seed : {uint64_t{0}, uint64_t{1}, ~uint64_t{0} / 3}) {
        const uint8_t* p = bytes.data() + offset;
        ASSERT_EQ(path(p, size, seed), XXH3_64bits_withSeed(p, size, seed))
            << name << ": " << size << " bytes at +" << offset << ", seed "
            << seed;
      }
    }
  }
}

TEST(ChecksumTest, Sse2PathIsXxh3) {
  ExpectLibDigest(internal::Xxh3SeededSse2, "sse2");
}

TEST(ChecksumTest, Avx2PathIsXxh3) {
  if (!DetectCpuFeatures().avx2) GTEST_SKIP() << "this CPU has no AVX2";
  ExpectLibDigest(internal::Xxh3SeededAvx2, "avx2");
}

TEST(ChecksumTest, Avx512PathIsXxh3) {
  if (!DetectCpuFeatures().avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  ExpectLibDigest(internal::Xxh3SeededAvx512, "avx512");
}

TEST(ChecksumTest, DispatchedPathIsXxh3) {
  ExpectLibDigest(Xxh3Seeded, "dispatched");
}

}  // namespace
}  // namespace ps::kernels
