// SKIP_WITHOUT_GPU(): skips the current test, saying why, unless a CUDA
// device is usable for table::DeviceParamTable (tests of device tables run
// only where there is one).
#pragma once

#include <gtest/gtest.h>

#include "table/device_param_table.h"

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    const ::ps::Status available = ::ps::table::DeviceParamTable::Available(); \
    if (!available.ok()) {                                                     \
      GTEST_SKIP() << "no usable CUDA device: " << available.ToString();       \
    }                                                                          \
  } while (0)
