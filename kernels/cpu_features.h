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

// The features kernels should use: DetectCpuFeatures(), unless the
// environment variable PS_KERNELS_SCALAR=1 asks for the scalar fallback.
// Read once; cheap to call.
const CpuFeatures& ActiveCpuFeatures();

}  // namespace ps::kernels
