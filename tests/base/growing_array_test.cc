// GrowingArray: contents survive growth from the heap into a mapping and
// from mapping to mapping, added elements take the fill, and a request
// for more memory than there is changes nothing.
#include "base/growing_array.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "base/huge_pages.h"

namespace ps {
namespace {

struct Record {
  uint64_t a;
  uint32_t b, c;
};

TEST(GrowingArrayTest, KeepsItsElementsAsItGrowsARowAtATime) {
  GrowingArray<Record> array;
  EXPECT_TRUE(array.empty());
  // 400k records of 16 B: from the heap into a mapping at 64 KiB, then
  // remapped about seven times.
  constexpr uint32_t kRows = 400000;
  for (uint32_t i = 0; i < kRows; ++i) {
    ASSERT_TRUE(array.Resize(i + 1));
    EXPECT_EQ(array[i].a, 0u);  // the default fill
    array[i] = Record{uint64_t{i} * 3, i, ~i};
  }
  ASSERT_EQ(array.size(), kRows);
  EXPECT_GE(array.capacity(), kRows);
  for (uint32_t i = 0; i < kRows; ++i) {
    ASSERT_EQ(array[i].a, uint64_t{i} * 3) << i;
    ASSERT_EQ(array[i].b, i);
    ASSERT_EQ(array[i].c, ~i);
  }
}

TEST(GrowingArrayTest, ResizeFillsAddedElementsAndKeepsTheRoom) {
  GrowingArray<float> array;
  ASSERT_TRUE(array.Reserve(100000));
  const size_t room = array.capacity();
  EXPECT_GE(room, 100000u);
  ASSERT_TRUE(array.Resize(50000, 1.5f));
  ASSERT_TRUE(array.Resize(10));  // shrinks: nothing refilled
  EXPECT_EQ(array[9], 1.5f);
  ASSERT_TRUE(array.Resize(20, -2.0f));
  EXPECT_EQ(array[9], 1.5f);
  EXPECT_EQ(array[10], -2.0f);
  EXPECT_EQ(array[19], -2.0f);
  array.Clear();
  EXPECT_EQ(array.size(), 0u);
  EXPECT_EQ(array.capacity(), room);
}

TEST(GrowingArrayTest, TooMuchIsRefusedAndChangesNothing) {
  GrowingArray<uint64_t> array;
  ASSERT_TRUE(array.Resize(20000, 7));
  const uint64_t* before = array.data();
  EXPECT_FALSE(array.Reserve(SIZE_MAX / 4));  // overflows a size_t
  // 8 PiB: no such memory. Not under ASan, whose realloc aborts on a size
  // past its limit instead of failing it.
  if (kLargeArraysMapped) {
    EXPECT_FALSE(array.Reserve(size_t{1} << 50));
    EXPECT_FALSE(array.Resize(size_t{1} << 50));
  }
  EXPECT_EQ(array.data(), before);
  EXPECT_EQ(array.size(), 20000u);
  EXPECT_EQ(array[19999], 7u);
}

TEST(GrowingArrayTest, MovesHandOverTheStorage) {
  GrowingArray<uint32_t> a;
  ASSERT_TRUE(a.Resize(100000, 3));
  GrowingArray<uint32_t> b(std::move(a));
  EXPECT_EQ(b.size(), 100000u);
  EXPECT_EQ(b[99999], 3u);
  EXPECT_EQ(a.size(), 0u);  // NOLINT: moved from, empty by contract
  a = std::move(b);
  EXPECT_EQ(a[0], 3u);
}

}  // namespace
}  // namespace ps
