// Sparse detection speed, each next to its reference in the same binary:
//   BM_ReadBandwidth_64MiB     a SIMD sum over the 64 MiB gradient: how fast
//                              one core can read that buffer at all
//   BM_ReadBandwidth_64MiB_Prefetch  the same sum with software prefetch
//                              4 KiB ahead, as the detection loop does (so
//                              the reference is not weaker than the kernel's
//                              own way of reading)
//   BM_DetectThreshold_64MiB   threshold detection (|g| >= eps, 1.0% kept,
//                              indices only) over the same buffer, one
//                              thread; the target is >= 0.7x the read
//                              bandwidth
//   BM_DetectThreshold_64MiB_Density/pct:P  the same at P% kept (1, 5, 10:
//                              the densities a push sends), indices only
//   BM_DetectThreshold_64MiB_Values/pct:P   the same writing the selected
//                              values too (what a push needs next)
//   BM_DetectThreshold_64MiB_Pool/threads:2   1% with a pool of 2
//   BM_TopK/<n>                exact top-k (k = n/100) of n floats, 1 thread
// bytes_per_second is the gradient size over the time (GB/s); every
// detection states the measured density as kept_fraction.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <random>
#include <vector>

#include "bench/bench_main.h"
#include "kernels/cpu_features.h"
#include "kernels/sparse_detect.h"

namespace ps::kernels {
namespace {

constexpr size_t kFloats64MiB = (size_t{64} << 20) / sizeof(float);

const std::vector<float>& Gradient(size_t n) {
  static std::vector<float> g;  // benchmark fixture, built once per size
  if (g.size() != n) {
    g.resize(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto& x : g) x = d(rng);
  }
  return g;
}

template <bool kPrefetch>
__attribute__((target("avx2"))) float SumAvx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1024), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1040), _MM_HINT_T0);
    }
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes,
                  _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += p[i];
  return s;
}

float SumScalar(const float* p, size_t n) {
  float a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) a[l] += p[i + l];
  float s = 0;
  for (float l : a) s += l;
  for (; i < n; ++i) s += p[i];
  return s;
}

template <bool kPrefetch>
void ReadBandwidth(benchmark::State& state) {
  const auto& g = Gradient(kFloats64MiB);
  const bool avx2 = ActiveCpuFeatures().avx2;
  for (auto _ : state) {
    float s = avx2 ? SumAvx2<kPrefetch>(g.data(), g.size())
                   : SumScalar(g.data(), g.size());
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(state.iterations() *
                          int64_t(g.size() * sizeof(float)));
}
void BM_ReadBandwidth_64MiB(benchmark::State& s) { ReadBandwidth<false>(s); }
BENCHMARK(BM_ReadBandwidth_64MiB)->Unit(benchmark::kMillisecond);
void BM_ReadBandwidth_64MiB_Prefetch(benchmark::State& s) {
  ReadBandwidth<true>(s);
}
BENCHMARK(BM_ReadBandwidth_64MiB_Prefetch)->Unit(benchmark::kMillisecond);

// |g| >= eps keeps P% of a standard normal gradient: the two-sided normal
// quantiles.
float EpsForPercent(int64_t pct) {
  switch (pct) {
    case 1:
      return 2.5758f;
    case 5:
      return 1.9600f;
    case 10:
      return 1.6449f;
  }
  return 0.0f;
}

void Detect(benchmark::State& state, int64_t pct, bool with_values) {
  const auto& g = Gradient(kFloats64MiB);
  const float eps = EpsForPercent(pct);
  std::vector<uint32_t> idx;
  std::vector<float> values;
  for (auto _ : state) {
    if (!DetectThreshold(g, eps, nullptr, &idx, with_values ? &values : nullptr)
             .ok())
      state.SkipWithError("detect failed");
    benchmark::DoNotOptimize(idx.data());
    benchmark::DoNotOptimize(values.data());
  }
  state.counters["kept_fraction"] = static_cast<double>(idx.size()) / g.size();
  state.SetBytesProcessed(state.iterations() *
                          int64_t(g.size() * sizeof(float)));
}

void BM_DetectThreshold_64MiB(benchmark::State& state) {
  Detect(state, 1, false);
}
BENCHMARK(BM_DetectThreshold_64MiB)->Unit(benchmark::kMillisecond);

void BM_DetectThreshold_64MiB_Density(benchmark::State& state) {
  Detect(state, state.range(0), false);
}
BENCHMARK(BM_DetectThreshold_64MiB_Density)
    ->ArgName("pct")
    ->Arg(1)
    ->Arg(5)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond);

void BM_DetectThreshold_64MiB_Values(benchmark::State& state) {
  Detect(state, state.range(0), true);
}
BENCHMARK(BM_DetectThreshold_64MiB_Values)
    ->ArgName("pct")
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond);

void BM_DetectThreshold_64MiB_Pool(benchmark::State& state) {
  const auto& g = Gradient(kFloats64MiB);
  ThreadPool pool(2);
  std::vector<uint32_t> idx;
  for (auto _ : state) {
    if (!DetectThreshold(g, EpsForPercent(1), &pool, &idx).ok())
      state.SkipWithError("detect failed");
    benchmark::DoNotOptimize(idx.data());
  }
  state.SetBytesProcessed(state.iterations() *
                          int64_t(g.size() * sizeof(float)));
}
BENCHMARK(BM_DetectThreshold_64MiB_Pool)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_TopK(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto& g = Gradient(n);
  std::vector<uint32_t> idx;
  for (auto _ : state) {
    if (!DetectTopK(g, n / 100, nullptr, &idx).ok())
      state.SkipWithError("top-k failed");
    benchmark::DoNotOptimize(idx.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(n * sizeof(float)));
}
BENCHMARK(BM_TopK)->Arg(1000000)->Arg(10000000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ps::kernels

int main(int argc, char** argv) {
  return ps::bench::BenchmarkMain(
      argc, argv,
      "sparse detection speed over a 64 MiB gradient (threshold detection at "
      "1-10% kept, with and without values, on 1 and 2 threads; exact top-k) "
      "next to the bandwidth of one core reading that buffer; "
      "scripts/bench_kernels.sh");
}
