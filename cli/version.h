// The version of the ps programs and the options they were built with, as
// `--version` prints them and ps_server reports them (ps_ctl status).
//
// Thread-safety: pure functions over constants compiled in (CMake passes
// the build options to version.cc as definitions).
#pragma once

#include <string>
#include <string_view>

namespace ps::cli {

// The project's version (CMake's project version), e.g. "0.1.0".
std::string_view Version();

// What --version prints:
//   ps_server 0.1.0
//   build: Release, GNU 12.2.0
//   transports: shm tcp verbs
//   CUDA kernels: no
//   sanitizers: none
std::string VersionText(std::string_view program);

}  // namespace ps::cli
