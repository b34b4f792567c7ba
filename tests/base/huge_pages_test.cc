// ReserveOnHugePages (base/huge_pages.h): an empty vector with room for n,
// writable to the end; one that already has the room keeps its memory.
#include "base/huge_pages.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ps
