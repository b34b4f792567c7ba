// Included by a test that logs from several threads of its own process:
// glibc re-reads the time zone at every localtime() glog makes unless TZ is
// set, and that free/strdup races between logging threads (TSan reports it;
// ps_server sets TZ in main for the same reason). The environment sets TZ
// before the first test runs.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace ps::testing {

class FixedTimeZone : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TZ", ":/etc/localtime", 0); }
};

inline const ::testing::Environment* const kFixedTimeZone =
    ::testing::AddGlobalTestEnvironment(new FixedTimeZone);

}  // namespace ps::testing
