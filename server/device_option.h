// The --device flag of ps_server: where the HASHED and DENSE tables live.
// "" or "host": host memory; "cuda" or "cuda:N": CUDA device N (0 when not
// given), table::DeviceParamTable.
//
// Pure functions: thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include "base/status_or.h"

namespace ps::server {

// nullopt for host memory, else the device ordinal (0 .. 1023);
// kInvalidArgument naming the accepted forms otherwise.
StatusOr<std::optional<int>> ParseDeviceOption(std::string_view value);

}  // namespace ps::server
