// ApplyEnvironment and EnvValue: the environment a program hands down fills
// what its options leave open, never what they set, and a value that does
// not parse is an error naming the variable. No process environment is
// read or changed: each test passes a block of its own.
#include "core/context_environment.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps::xfer {
namespace {

// A null-terminated block of "NAME=value" entries.
class Block {
 public:
  Block(std::initializer_list<const char*> entries) : entries_(entries) {
    entries_.push_back(nullptr);
  }
  const char* const* get() const { return entries_.data(); }

 private:
  std::vector<const char*> entries_;
};

TEST(ContextEnvironmentTest, EnvValueFindsTheFirstEntryOfAName) {
  Block env({"XFER_TRANSPORTX=no", "XFER_TRANSPORT=tcp", "XFER_TRANSPORT=shm",
             "EMPTY="});
  EXPECT_EQ(EnvValue(env.get(), "XFER_TRANSPORT"), "tcp");
  EXPECT_EQ(EnvValue(env.get(), "EMPTY"), "");
  EXPECT_FALSE(EnvValue(env.get(), "XFER").has_value());
  EXPECT_FALSE(EnvValue(env.get(), "MISSING").has_value());
  EXPECT_FALSE(EnvValue(nullptr, "XFER_TRANSPORT").has_value());
}

TEST(ContextEnvironmentTest, FillsWhatTheOptionsLeaveOpen) {
  Block env({"XFER_TRANSPORT=tcp", "XFER_IB_DEV=rxe0", "XFER_IB_PORT=2",
             "XFER_IB_GID_INDEX=3"});
  auto o = ApplyEnvironment({}, env.get());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->transport, TransportChoice::kTcp);
  EXPECT_EQ(o->ib_device, "rxe0");
  EXPECT_EQ(o->ib_port, 2);
  EXPECT_EQ(o->ib_gid_index, 3);
}

TEST(ContextEnvironmentTest, WhatTheOptionsSetStays) {
  Block env({"XFER_TRANSPORT=tcp", "XFER_IB_DEV=rxe0", "XFER_IB_PORT=2",
             "XFER_IB_GID_INDEX=3"});
  ContextOptions set;
  set.transport = TransportChoice::kShm;
  set.ib_device = "mlx5_0";
  set.ib_port = 1;
  set.ib_gid_index = 0;
  auto o = ApplyEnvironment(set, env.get());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->transport, TransportChoice::kShm);
  EXPECT_EQ(o->ib_device, "mlx5_0");
  EXPECT_EQ(o->ib_port, 1);
  EXPECT_EQ(o->ib_gid_index, 0);
}

TEST(ContextEnvironmentTest, NoneOrEmptyValuesChangeNothing) {
  const Block none({}), empty({"XFER_TRANSPORT=", "XFER_IB_PORT="});
  for (const char* const* env :
       {none.get(), empty.get(), static_cast<const char* const*>(nullptr)}) {
    auto o = ApplyEnvironment({}, env);
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->transport, TransportChoice::kAuto);
    EXPECT_EQ(o->ib_port, 0);
    EXPECT_EQ(o->ib_gid_index, -1);
  }
}

TEST(ContextEnvironmentTest, AValueThatDoesNotParseNamesItsVariable) {
  Block transport({"XFER_TRANSPORT=rdma"});
  auto o = ApplyEnvironment({}, transport.get());
  ASSERT_TRUE(o.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(o.status().message().find("$XFER_TRANSPORT"), std::string::npos);
  EXPECT_NE(o.status().message().find("rdma"), std::string::npos);
  for (const char* bad : {"XFER_IB_PORT=one", "XFER_IB_PORT=1x",
                          "XFER_IB_GID_INDEX=-", "XFER_IB_PORT=99999999999"}) {
    Block env({bad});
    auto r = ApplyEnvironment({}, env.get());
    ASSERT_TRUE(r.status().Is(StatusCode::kInvalidArgument)) << bad;
    const std::string name(bad, std::string(bad).find('='));
    EXPECT_NE(r.status().message().find("$" + name), std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace ps::xfer
