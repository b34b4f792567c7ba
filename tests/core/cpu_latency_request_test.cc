// ContextOptions::cpu_wakeup_latency_us (core/internal/
// cpu_latency_request.h): the request holds while its owner lives and is
// dropped with it; a bound that cannot be asked for is a clear error, not a
// context that silently runs without it. The cases that need to write
// /dev/cpu_dma_latency skip where this process may not (not root).
#include "core/internal/cpu_latency_request.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/context.h"

namespace ps::testing {
namespace {

using xfer::internal::CpuLatencyRequest;

// The machine's current bound (the lowest request held), as the kernel
// reports it: a binary s32.
int32_t CurrentBound() {
  const int fd = ::open(CpuLatencyRequest::kDevicePath, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int32_t value = -1;
  if (::read(fd, &value, sizeof value) != sizeof value) value = -1;
  ::close(fd);
  return value;
}

bool CanAsk() { return ::access(CpuLatencyRequest::kDevicePath, W_OK) == 0; }

TEST(CpuLatencyRequestTest, HoldsTheBoundWhileAlive) {
  if (!CanAsk()) GTEST_SKIP() << "cannot write /dev/cpu_dma_latency";
  auto held = CpuLatencyRequest::Hold(3);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ((*held)->max_us(), 3);
  // Another process may hold a lower bound; none can make it higher.
  const int32_t with = CurrentBound();
  EXPECT_GE(with, 0);
  EXPECT_LE(with, 3);
}

TEST(CpuLatencyRequestTest, ContextHoldsItAndGivesItBack) {
  if (!CanAsk()) GTEST_SKIP() << "cannot write /dev/cpu_dma_latency";
  const int32_t before = CurrentBound();
  if (before <= 2) GTEST_SKIP() << "another process holds " << before << " us";
  xfer::ContextOptions o;
  o.name = "latency";
  o.cpu_wakeup_latency_us = 2;
  {
    auto context = xfer::Context::Create(o);
    ASSERT_TRUE(context.ok()) << context.status();
    EXPECT_EQ(CurrentBound(), 2);
  }
  EXPECT_EQ(CurrentBound(), before);  // dropped with the context
  o.cpu_wakeup_latency_us = -1;       // the default asks for nothing
  auto context = xfer::Context::Create(o);
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ(CurrentBound(), before);
}

TEST(CpuLatencyRequestTest, AFileThatCannotBeWrittenIsNamed) {
  auto missing = CpuLatencyRequest::Hold(0, "/nonexistent/cpu_dma_latency");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().Is(StatusCode::kNotSupported))
      << missing.status();
  EXPECT_NE(missing.status().message().find("/nonexistent/cpu_dma_latency"),
            std::string::npos)
      << missing.status();
  auto directory = CpuLatencyRequest::Hold(0, "/");
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(directory.status().Is(StatusCode::kNotSupported))
      << directory.status();
}

TEST(CpuLatencyRequestTest, NegativeBoundsAreRefused) {
  auto held = CpuLatencyRequest::Hold(-5);
  ASSERT_FALSE(held.ok());
  EXPECT_TRUE(held.status().Is(StatusCode::kInvalidArgument)) << held.status();
  xfer::ContextOptions o;
  o.name = "latency";
  o.cpu_wakeup_latency_us = -2;
  auto context = xfer::Context::Create(o);
  ASSERT_FALSE(context.ok());
  EXPECT_TRUE(context.status().Is(StatusCode::kInvalidArgument))
      << context.status();
  EXPECT_NE(context.status().message().find("cpu_wakeup_latency_us"),
            std::string::npos)
      << context.status();
}

}  // namespace
}  // namespace ps::testing
