#include "cli/version.h"

#ifndef PS_VERSION
#define PS_VERSION "unknown"
#endif
#ifndef PS_BUILD_TYPE
#define PS_BUILD_TYPE "unknown"
#endif
#ifndef PS_BUILD_COMPILER
#define PS_BUILD_COMPILER "unknown compiler"
#endif
#ifndef PS_BUILD_VERBS
#define PS_BUILD_VERBS 0
#endif
#ifndef PS_BUILD_CUDA
#define PS_BUILD_CUDA 0
#endif
#ifndef PS_BUILD_SANITIZE
#define PS_BUILD_SANITIZE ""
#endif

namespace ps::cli {

std::string_view Version() { return PS_VERSION; }

std::string VersionText(std::string_view program) {
  const std::string sanitizers = PS_BUILD_SANITIZE;
  std::string out = std::string(program) + " " + std::string(Version()) + "\n";
  out += "build: " + std::string(PS_BUILD_TYPE) + ", " PS_BUILD_COMPILER "\n";
  out += "transports: shm tcp";
  out += PS_BUILD_VERBS ? " verbs\n" : " (verbs not compiled in)\n";
  out += PS_BUILD_CUDA ? "CUDA kernels: yes\n" : "CUDA kernels: no\n";
  out += "sanitizers: " + (sanitizers.empty() ? "none" : sanitizers) + "\n";
  return out;
}

}  // namespace ps::cli
