// ps_server's --device values (server/device_option.h).
#include "server/device_option.h"

#include <gtest/gtest.h>

namespace ps::server {
namespace {

TEST(DeviceOptionTest, HostAndCudaForms) {
  EXPECT_EQ(*ParseDeviceOption(""), std::nullopt);
  EXPECT_EQ(*ParseDeviceOption("host"), std::nullopt);
  EXPECT_EQ(*ParseDeviceOption("cuda"), std::optional<int>(0));
  EXPECT_EQ(*ParseDeviceOption("cuda:0"), std::optional<int>(0));
  EXPECT_EQ(*ParseDeviceOption("cuda:7"), std::optional<int>(7));
}

TEST(DeviceOptionTest, OtherValuesAreRefused) {
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:1024",
                          "CUDA:0", "tpu:0", "cuda:99999999999"}) {
    auto d = ParseDeviceOption(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_TRUE(d.status().Is(StatusCode::kInvalidArgument));
    EXPECT_NE(d.status().message().find("cuda:N"), std::string::npos);
  }
}

}  // namespace
}  // namespace ps::server
