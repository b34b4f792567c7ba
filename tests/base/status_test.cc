#include "base/status.h"

#include <gtest/gtest.h>

#include <string>

#include "base/status_or.h"

namespace ps {
namespace {

TEST(StatusTest, OkIsDefaultAndCarriesNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(StatusTest, ErrorKeepsCodeAndMessage) {
  Status s = OutOfRange("offset 4096 is past region 3");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange));
  EXPECT_EQ(s.ToString(), "out of range: offset 4096 is past region 3");
  Status copy = s;
  EXPECT_EQ(copy.ToString(), s.ToString());
  EXPECT_EQ(s.WithContext("put").message(),
            "put: offset 4096 is past region 3");
  EXPECT_TRUE(Status().WithContext("x").ok());
}

TEST(StatusTest, ErrnoStatusNamesTheError) {
  Status s = ErrnoStatus(StatusCode::kIOError, "open /nope", ENOENT);
  EXPECT_EQ(s.ToString(), "I/O error: open /nope: No such file or directory");
}

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  PS_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::OK();
}

TEST(StatusOrTest, ValueOrStatus) {
  ASSERT_TRUE(Half(4).ok());
  EXPECT_EQ(*Half(4), 2);
  EXPECT_TRUE(Half(3).status().Is(StatusCode::kInvalidArgument));
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_FALSE(UseHalf(3, &out).ok());
  EXPECT_FALSE(StatusOr<int>(Status::OK()).ok());
}

TEST(StatusOrDeathTest, ReadingTheValueOfAnErrorAbortsWithTheStatus) {
  StatusOr<std::string> bad = NotFound("checkpoint 7");
  EXPECT_DEATH((void)bad.value(),
               "StatusOr::value\\(\\) on an error: not found: checkpoint 7");
  EXPECT_DEATH((void)bad->size(), "checkpoint 7");
  EXPECT_DEATH((void)*bad, "checkpoint 7");
}

}  // namespace
}  // namespace ps
