#include "kernels/optimizers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/internal/optimizer_kernels.h"

namespace ps::kernels {
namespace {

using internal::OptimizerKernelSet;

// ---- Reference formulas, written plainly in double, one element at a time.

struct RefState {
  double w;
  double s0 = 0;  // momentum v, adagrad accumulator, adam m, ftrl z
  double s1 = 0;  // adam v, ftrl n
};

void RefStep(const OptimizerConfig& config, uint64_t t, RefState& e, double g) {
  if (const auto* c = std::get_if<SgdConfig>(&config)) {
    e.w -= c->learning_rate * g;
  } else if (const auto* c = std::get_if<MomentumConfig>(&config)) {
    e.s0 = c->momentum * e.s0 + g;
    e.w -= c->learning_rate * e.s0;
  } else if (const auto* c = std::get_if<AdagradConfig>(&config)) {
    e.s0 += g * g;
    e.w -= c->learning_rate * g / (std::sqrt(e.s0) + c->epsilon);
  } else if (const auto* c = std::get_if<AdamConfig>(&config)) {
    e.s0 = c->beta1 * e.s0 + (1 - c->beta1) * g;
    e.s1 = c->beta2 * e.s1 + (1 - c->beta2) * g * g;
    const double m_hat = e.s0 / (1 - std::pow(c->beta1, t));
    const double v_hat = e.s1 / (1 - std::pow(c->beta2, t));
    e.w -= c->learning_rate * m_hat / (std::sqrt(v_hat) + c->epsilon);
  } else if (const auto* c = std::get_if<FtrlConfig>(&config)) {
    const double n_new = e.s1 + g * g;
    const double sigma = (std::sqrt(n_new) - std::sqrt(e.s1)) / c->alpha;
    e.s0 += g - sigma * e.w;
    e.s1 = n_new;
    if (std::fabs(e.s0) <= c->l1) {
      e.w = 0;
    } else {
      const double sign = e.s0 < 0 ? -1 : 1;
      e.w = -(e.s0 - sign * c->l1) /
            ((c->beta + std::sqrt(e.s1)) / c->alpha + c->l2);
    }
  }
}

struct NamedConfig {
  std::string name;
  OptimizerConfig config;
};

std::vector<NamedConfig> AllConfigs() {
  return {
      {"sgd", SgdConfig{0.1f}},
      {"momentum", MomentumConfig{0.05f, 0.9f}},
      {"adagrad", AdagradConfig{0.1f, 1e-6f, 0.1f}},
      {"adam", AdamConfig{0.01f, 0.9f, 0.999f, 1e-6f}},
      {"ftrl", FtrlConfig{0.1f, 1.0f, 0.3f, 0.1f}},
  };
}

float InitialState(const OptimizerConfig& config, int k) {
  if (const auto* c = std::get_if<AdagradConfig>(&config)) {
    return k == 0 ? c->initial_accumulator : 0.0f;
  }
  return 0.0f;
}

// Float kernels against the double reference: a few float roundings per step,
// compounded over a handful of steps.
void ExpectClose(float got, double want, const std::string& what) {
  ASSERT_NEAR(got, want, 2e-5 + 2e-5 * std::fabs(want)) << what;
}

std::vector<const OptimizerKernelSet*> KernelSetsHere() {
  std::vector<const OptimizerKernelSet*> sets = {
      &internal::ScalarOptimizerKernels()};
  const CpuFeatures cpu = DetectCpuFeatures();
  if (cpu.avx2 && cpu.fma) sets.push_back(&internal::Avx2OptimizerKernels());
  return sets;
}

TEST(OptimizersTest, StateFloatsPerParameter) {
  EXPECT_EQ(StateFloatsPerParameter(SgdConfig{}), 0);
  EXPECT_EQ(StateFloatsPerParameter(MomentumConfig{}), 1);
  EXPECT_EQ(StateFloatsPerParameter(AdagradConfig{}), 1);
  EXPECT_EQ(StateFloatsPerParameter(AdamConfig{}), 2);
  EXPECT_EQ(StateFloatsPerParameter(FtrlConfig{}), 2);
  for (const NamedConfig& c : AllConfigs()) {
    EXPECT_LE(StateFloatsPerParameter(c.config), kMaxOptimizerStates);
  }
}

TEST(OptimizersTest, DenseEqualsReferenceOverSeveralSteps) {
  if (KernelSetsHere().size() == 1) {
    std::printf("note: no AVX2+FMA on this CPU; only the scalar path runs\n");
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const OptimizerKernelSet* kernels : KernelSetsHere()) {
    for (const NamedConfig& nc : AllConfigs()) {
      ASSERT_TRUE(ValidateOptimizerConfig(nc.config).ok()) << nc.name;
      const int states = StateFloatsPerParameter(nc.config);
      for (size_t n : {0u, 1u, 7u, 8u, 9u, 33u, 100u}) {
        const std::string what = std::string(kernels->name) + " " + nc.name +
                                 " n=" + std::to_string(n);
        std::vector<float> w(n);
        for (float& x : w) x = normal(rng);
        std::vector<std::vector<float>> state(states,
                                              std::vector<float>(n, 0.0f));
        for (int k = 0; k < states; ++k) {
          std::fill(state[k].begin(), state[k].end(),
                    InitialState(nc.config, k));
        }
        std::vector<RefState> ref(n);
        for (size_t i = 0; i < n; ++i) {
          ref[i].w = w[i];
          ref[i].s0 = states > 0 ? state[0][i] : 0;
        }
        for (uint64_t t = 1; t <= 6; ++t) {
          std::vector<float> g(n);
          for (float& x : g) x = normal(rng);
          std::vector<std::span<float>> state_spans(state.begin(), state.end());
          ASSERT_TRUE(internal::ApplyOptimizerDenseWith(*kernels, nc.config, t,
                                                        w, state_spans, g)
                          .ok())
              << what;
          for (size_t i = 0; i < n; ++i) RefStep(nc.config, t, ref[i], g[i]);
        }
        for (size_t i = 0; i < n; ++i) {
          ExpectClose(w[i], ref[i].w, what + " w[" + std::to_string(i) + "]");
          if (states > 0) ExpectClose(state[0][i], ref[i].s0, what + " s0");
          if (states > 1) ExpectClose(state[1][i], ref[i].s1, what + " s1");
        }
      }
    }
  }
}

TEST(OptimizersTest, RowsEqualReferenceOverSeveralSteps) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const OptimizerKernelSet* kernels : KernelSetsHere()) {
    for (const NamedConfig& nc : AllConfigs()) {
      const int states = StateFloatsPerParameter(nc.config);
      for (uint32_t dim : {1u, 5u, 16u, 19u}) {
        const std::string what = std::string(kernels->name) + " " + nc.name +
                                 " dim=" + std::to_string(dim);
        const uint32_t num_rows = 23;
        const size_t size = static_cast<size_t>(num_rows) * dim;
        std::vector<float> w(size);
        for (float& x : w) x = normal(rng);
        std::vector<std::vector<float>> state(kMaxOptimizerStates);
        for (int k = 0; k < states; ++k) {
          state[k].assign(size, InitialState(nc.config, k));
        }
        std::vector<RefState> ref(size);
        for (size_t i = 0; i < size; ++i) {
          ref[i].w = w[i];
          ref[i].s0 = states > 0 ? state[0][i] : 0;
        }
        OptimizerTable table{
            w.data(), {state[0].data(), state[1].data()}, num_rows, dim};
        for (uint64_t t = 1; t <= 5; ++t) {
          // A few rows, unsorted, one of them twice (applied twice in order).
          std::vector<uint32_t> rows;
          std::uniform_int_distribution<uint32_t> row(0, num_rows - 1);
          for (int i = 0; i < 7; ++i) rows.push_back(row(rng));
          rows.push_back(rows[2]);
          std::vector<float> g(rows.size() * dim);
          for (float& x : g) x = normal(rng);
          ASSERT_TRUE(internal::ApplyOptimizerToRowsWith(*kernels, nc.config, t,
                                                         table, rows, g)
                          .ok())
              << what;
          for (size_t i = 0; i < rows.size(); ++i) {
            for (uint32_t j = 0; j < dim; ++j) {
              RefStep(nc.config, t, ref[rows[i] * dim + j], g[i * dim + j]);
            }
          }
        }
        for (size_t i = 0; i < size; ++i) {
          ExpectClose(w[i], ref[i].w, what + " w[" + std::to_string(i) + "]");
          if (states > 0) ExpectClose(state[0][i], ref[i].s0, what + " s0");
          if (states > 1) ExpectClose(state[1][i], ref[i].s1, what + " s1");
        }
      }
    }
  }
}

TEST(OptimizersTest, FtrlL1GivesExactZeros) {
  // Small gradients never push |z| past a large l1: the weights stay at 0.
  FtrlConfig config{0.1f, 1.0f, 10.0f, 0.0f};
  std::vector<float> w(20, 0.0f), z(20, 0.0f), n(20, 0.0f);
  std::vector<float> g(20, 0.5f);
  const std::span<float> state[] = {z, n};
  for (uint64_t t = 1; t <= 3; ++t) {
    ASSERT_TRUE(ApplyOptimizerDense(config, t, w, state, g).ok());
  }
  for (float x : w) EXPECT_EQ(x, 0.0f);
  for (float x : z) EXPECT_FLOAT_EQ(x, 1.5f);
}

TEST(OptimizersTest, BadRowIsOutOfRangeAndNothingChanges) {
  std::vector<float> w(10 * 3, 1.0f), m(30, 0.0f), v(30, 0.0f);
  const std::vector<float> before = w;
  const std::vector<uint32_t> rows = {1, 9, 10};
  const std::vector<float> g(rows.size() * 3, 1.0f);
  for (const NamedConfig& nc : AllConfigs()) {
    const Status s = ApplyOptimizerToRows(
        nc.config, 1, OptimizerTable{w.data(), {m.data(), v.data()}, 10, 3},
        rows, g);
    EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << nc.name << ": " << s;
    EXPECT_EQ(w, before) << nc.name;
  }
}

TEST(OptimizersTest, MalformedCallsAreInvalidArgument) {
  std::vector<float> w(12, 1.0f), m(12), v(12);
  const std::vector<uint32_t> rows = {0, 1};
  // Gradient size mismatch.
  EXPECT_TRUE(ApplyOptimizerToRows(SgdConfig{}, 1,
                                   OptimizerTable{w.data(), {}, 4, 3}, rows,
                                   std::vector<float>(5))
                  .Is(StatusCode::kInvalidArgument));
  // Missing state array.
  EXPECT_TRUE(ApplyOptimizerToRows(AdamConfig{}, 1,
                                   OptimizerTable{w.data(), {m.data()}, 4, 3},
                                   rows, std::vector<float>(6))
                  .Is(StatusCode::kInvalidArgument));
  // Adam counts steps from 1.
  EXPECT_TRUE(
      ApplyOptimizerToRows(AdamConfig{}, 0,
                           OptimizerTable{w.data(), {m.data(), v.data()}, 4, 3},
                           rows, std::vector<float>(6))
          .Is(StatusCode::kInvalidArgument));
  // Dense: state of the wrong length, too few state arrays.
  const std::span<float> short_state[] = {std::span(m).first(11)};
  EXPECT_TRUE(ApplyOptimizerDense(MomentumConfig{}, 1, w, short_state,
                                  std::vector<float>(12))
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      ApplyOptimizerDense(FtrlConfig{}, 1, w, {}, std::vector<float>(12))
          .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(ApplyOptimizerDense(SgdConfig{}, 1, w, {}, std::vector<float>(11))
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_EQ(w, std::vector<float>(12, 1.0f));
}

TEST(OptimizersTest, ValidateRejectsBadHyperParameters) {
  EXPECT_FALSE(ValidateOptimizerConfig(SgdConfig{0.0f}).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(SgdConfig{NAN}).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(MomentumConfig{0.1f, 1.0f}).ok());
  EXPECT_FALSE(ValidateOptimizerConfig(AdagradConfig{0.1f, 0.0f, 0.1f}).ok());
  EXPECT_FALSE(
      ValidateOptimizerConfig(AdamConfig{0.1f, 0.9f, 1.0f, 1e-8f}).ok());
  EXPECT_FALSE(
      ValidateOptimizerConfig(FtrlConfig{0.1f, 1.0f, -1.0f, 0.0f}).ok());
  for (const NamedConfig& c : AllConfigs()) {
    EXPECT_TRUE(ValidateOptimizerConfig(c.config).ok()) << c.name;
  }
}

}  // namespace
}  // namespace ps::kernels
