// base/huge_pages.h. ReserveOnHugePages: an empty vector with room for n,
// writable to the end; one that already has the room keeps its memory.
// HugePageAllocator: vectors small and large keep their contents as they
// grow and shrink; a large one lies on its own 2 MiB-aligned mapping, whose
// whole 2 MiB ranges the kernel backs with huge pages where it gives any.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ps {
namespace {

TEST(HugePagesTest, ReservesRoomAndKeepsALargerVectorsMemory) {
  std::vector<float> v = {1, 2, 3};
  constexpr size_t kFloats = size_t{3} << 20;  // 12 MiB: several huge pages
  ReserveOnHugePages(&v, kFloats);
  EXPECT_TRUE(v.empty());
  ASSERT_GE(v.capacity(), kFloats);
  const float* room = v.data();
  for (size_t i = 0; i < kFloats; ++i) v.push_back(static_cast<float>(i));
  EXPECT_EQ(v.data(), room) << "the reserved room was not enough";
  EXPECT_EQ(v[kFloats - 1], static_cast<float>(kFloats - 1));
  ReserveOnHugePages(&v, 10);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.data(), room) << "a vector with room keeps its memory";
  AdviseHugePages(nullptr, 0);  // nothing to advise: no effect
  AdviseHugePages(v.data(), 100);
}

using HugeVector = std::vector<uint64_t, HugePageAllocator<uint64_t>>;

// Transparent huge pages as the kernel offers them: false when it gives
// none ("never"), or says nothing.
bool KernelGivesHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  return std::getline(in, modes) && modes.find("[never]") == std::string::npos;
}

// AnonHugePages (kB) of the mapping that contains `address`, from
// /proc/self/smaps; -1 when no mapping does.
long HugePagesKbAt(const void* address) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream fields(line);
    if (fields >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= a && a < end;
      continue;
    }
    long kb = 0;
    if (inside &&
        std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) {
      return kb;
    }
  }
  return -1;
}

TEST(HugePagesTest, AllocatorKeepsContentsOfSmallAndLargeVectors) {
  HugeVector v;
  // From 8 bytes to 24 MiB and back down: operator new, then mappings.
  for (uint64_t i = 0; i < (uint64_t{3} << 20); ++i) v.push_back(i * 7);
  for (uint64_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i * 7) << i;
  v.resize(100);
  v.shrink_to_fit();
  for (uint64_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], i * 7) << i;
  HugeVector empty;
  empty.shrink_to_fit();
  EXPECT_TRUE(empty.empty());
}

TEST(HugePagesTest, LargeArraysLieOnHugePages) {
  if (!kLargeArraysMapped) GTEST_SKIP() << "ASan: arrays from operator new";
  // 5 MiB: two whole huge pages and a 1 MiB tail on 4 KiB pages.
  HugeVector v(5 * (size_t{1} << 20) / sizeof(uint64_t), 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePageBytes, 0u);
  const long kb = HugePagesKbAt(v.data());
  ASSERT_GE(kb, 0) << "no mapping holds the array";
  EXPECT_LE(kb, 4096) << "a huge page past the array's whole 2 MiB ranges";
  if (KernelGivesHugePages()) {
    EXPECT_GT(kb, 0) << "the kernel gave the advised array no huge page";
  }
}

}  // namespace
}  // namespace ps
