// Linked into the test binaries that also run on the scalar fallback: their
// *_scalar ctest entries set PS_KERNELS_SCALAR=1, and then every kernel of
// the process takes its scalar path (kernels::ForceScalarKernels), from
// before main() on. The library itself reads no environment.
#include <cstdlib>
#include <cstring>

#include "kernels/cpu_features.h"

namespace {

[[maybe_unused]] const bool kScalarFromEnvironment = [] {
  const char* value = std::getenv("PS_KERNELS_SCALAR");
  if (value == nullptr || std::strcmp(value, "1") != 0) return false;
  ps::kernels::ForceScalarKernels();
  return true;
}();

}  // namespace
