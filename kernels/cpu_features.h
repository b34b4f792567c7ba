// Which SIMD instruction sets this CPU offers, read once at run time so one
// binary runs everywhere: kernels pick an AVX2/F16C path where present and a
// scalar path otherwise. Tests force the scalar path to compare both.
#pragma once

namespace ps::kernels {

struct CpuFeatures {
  bool avx2 = false;
  bool f16c = false;
  bool fma = false;
  // AVX-512 F and DQ (the worker's key hash and push drain, the varint
  // writer).
  bool avx512 = false;
  // Intel's restricted transactional memory (XBEGIN/XEND), which
  // sparse_accumulate uses to make a batch of plain adds atomic.
  bool rtm = false;
};

// What the CPU supports (cpuid via the compiler's builtins).
CpuFeatures DetectCpuFeatures();

// The features kernels should use: DetectCpuFeatures() (detected once),
// or none after ForceScalarKernels(). Cheap to call.
const CpuFeatures& ActiveCpuFeatures();

// From now on every kernel of this process takes its scalar path: for tests
// that compare both paths (their main calls it, before any kernel runs:
// tests/kernels/scalar_kernels_from_env.cc reads PS_KERNELS_SCALAR=1 for them).
void ForceScalarKernels();

}  // namespace ps::kernels
