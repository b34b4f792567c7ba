#include "kernels/cpu_features.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ps::kernels {

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  // F16C has no __builtin_cpu_supports name in GCC 12; it ships with every
  // AVX2 CPU from both vendors, so AVX2 implies it in practice.
  f.f16c = f.avx2;
  // CPUID leaf 7, EBX bit 11 (no __builtin_cpu_supports name for it). A
  // CPU whose microcode disabled TSX clears the bit, or makes every
  // transaction abort, which the user of this flag must survive.
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) f.rtm = (b >> 11) & 1;
#endif
  return f;
}

namespace {
// Set once by ForceScalarKernels (a test's main), read by every dispatch.
std::atomic<bool> force_scalar{false};
}  // namespace

void ForceScalarKernels() {
  force_scalar.store(true, std::memory_order_relaxed);
}

const CpuFeatures& ActiveCpuFeatures() {
  // Function-local constants, computed once: the CPU does not change.
  static const CpuFeatures detected = DetectCpuFeatures();
  static const CpuFeatures scalar{};
  return force_scalar.load(std::memory_order_relaxed) ? scalar : detected;
}

}  // namespace ps::kernels
