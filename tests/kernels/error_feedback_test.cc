// Error feedback keeps sent + residual == accumulated gradient exactly in
// fp32, step after step, for every value type, selection and row shape; and
// what it sends is exactly what the packet decoder returns.
#include "kernels/error_feedback.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "protocol/sparse_packet.h"

namespace ps::kernels {
namespace {

using protocol::DecodeSparsePacket;
using protocol::EncodedPacket;
using protocol::EncodeSparsePackets;
using protocol::SparsePacketMeta;

constexpr ValueType kTypes[] = {ValueType::kFp32, ValueType::kFp16,
                                ValueType::kBf16, ValueType::kInt8};

// Dyadic values (multiples of 2^-10, |v| <= 1): sums of a few hundred are
// exact in both fp32 and double, so totals can be compared exactly.
std::vector<float> DyadicGradient(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> v(-1024, 1024);
  std::bernoulli_distribution sparse(0.3);
  std::vector<float> g(n);
  for (auto& x : g)
    x = sparse(rng) ? std::ldexp(static_cast<float>(v(rng)), -10) : 0.0f;
  return g;
}

struct Case {
  ValueType type;
  size_t dim;
  bool topk;
};

void RunSteps(const Case& c, ThreadPool* pool, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t rows = 997;
  ErrorFeedbackOptions opt;
  opt.rows = rows;
  opt.row_dim = c.dim;
  opt.value_type = c.type;
  opt.int8_block = 16;
  if (c.topk) {
    opt.selection = ErrorFeedbackOptions::Selection::kTopK;
    opt.k = 50;
  } else {
    opt.epsilon = 0.6f;
  }
  ErrorFeedback ef(opt);
  ASSERT_TRUE(ef.Validate().ok());
  const size_t n = rows * c.dim;
  std::vector<double> total_grad(n), total_sent(n);
  SparseSelection sel;
  const bool exact_totals = c.type != ValueType::kInt8;
  for (int step = 0; step < 40; ++step) {
    std::vector<float> g = DyadicGradient(n, rng);
    std::vector<float> acc(n);
    for (size_t i = 0; i < n; ++i) {
      acc[i] = ef.residual()[i] + g[i];
      total_grad[i] += g[i];
    }
    ASSERT_TRUE(ef.Step(g, pool, &sel).ok());
    ASSERT_EQ(sel.values.size(), sel.rows.size() * c.dim);
    ASSERT_EQ(sel.value_type, c.type);
    if (c.topk) {
      ASSERT_EQ(sel.rows.size(), 50u);
    }
    std::vector<float> sent(n, 0.0f);
    for (size_t r = 0; r < sel.rows.size(); ++r) {
      if (r > 0) {
        ASSERT_GT(sel.rows[r], sel.rows[r - 1]);
      }
      for (size_t j = 0; j < c.dim; ++j)
        sent[sel.rows[r] * c.dim + j] = sel.values[r * c.dim + j];
    }
    for (size_t i = 0; i < n; ++i) {
      // The invariant, exactly, in fp32.
      ASSERT_EQ(sent[i] + ef.residual()[i], acc[i])
          << "step " << step << " i " << i;
      total_sent[i] += sent[i];
    }
    // The packets carry exactly the sent values.
    if (!sel.rows.empty()) {
      SparsePacketMeta meta{.row_dim = static_cast<uint32_t>(c.dim),
                            .value_type = sel.value_type,
                            .int8_block = sel.int8_block};
      std::vector<uint8_t> wire;
      std::vector<EncodedPacket> packets;
      ASSERT_TRUE(
          EncodeSparsePackets(meta, sel.rows, sel.values, 512, &wire, &packets)
              .ok());
      std::vector<float> decoded(sel.values.size());
      std::vector<uint32_t> drows(sel.rows.size());
      for (const EncodedPacket& pk : packets) {
        ASSERT_TRUE(
            DecodeSparsePacket(
                std::span(wire).subspan(pk.offset, pk.size),
                {.table_rows = rows}, std::span(drows).subspan(pk.first_row),
                std::span(decoded).subspan(pk.first_row * c.dim), nullptr)
                .ok());
      }
      ASSERT_EQ(drows, sel.rows);
      ASSERT_EQ(0, std::memcmp(decoded.data(), sel.values.data(),
                               4 * decoded.size()));
    }
  }
  ASSERT_TRUE(ef.Flush(pool, &sel).ok());
  EXPECT_EQ(sel.value_type, ValueType::kFp32);
  for (size_t r = 0; r < sel.rows.size(); ++r)
    for (size_t j = 0; j < c.dim; ++j)
      total_sent[sel.rows[r] * c.dim + j] += sel.values[r * c.dim + j];
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(ef.residual()[i], 0.0f);
    if (exact_totals) {
      ASSERT_EQ(total_sent[i], total_grad[i]) << i;  // nothing lost, exactly
    } else {
      ASSERT_NEAR(total_sent[i], total_grad[i], 1e-4) << i;
    }
  }
}

TEST(ErrorFeedbackTest, InvariantHoldsExactlyForEveryTypeAndSelection) {
  uint32_t seed = 1;
  for (ValueType type : kTypes)
    for (size_t dim : {1u, 3u})
      for (bool topk : {false, true}) {
        SCOPED_TRACE(std::string(ValueTypeName(type)) + " dim " +
                     std::to_string(dim) + (topk ? " topk" : " threshold"));
        RunSteps({type, dim, topk}, nullptr, seed++);
      }
}

TEST(ErrorFeedbackTest, SameResultWithAThreadPool) {
  ThreadPool pool(3);
  RunSteps({ValueType::kFp16, 1, true}, &pool, 42);
  RunSteps({ValueType::kInt8, 4, false}, &pool, 43);
}

TEST(ErrorFeedbackTest, Fp16SaturationKeepsTheInvariant) {
  ErrorFeedbackOptions opt{
      .rows = 4, .epsilon = 1.0f, .value_type = ValueType::kFp16};
  ErrorFeedback ef(opt);
  std::vector<float> g = {1e9f, -70000.0f, 2.0f, 0.5f};
  SparseSelection sel;
  ASSERT_TRUE(ef.Step(g, nullptr, &sel).ok());
  ASSERT_EQ(sel.rows, (std::vector<uint32_t>{0, 1, 2}));
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_LE(std::fabs(sel.values[r]), 65504.0f);
    EXPECT_EQ(sel.values[r] + ef.residual()[sel.rows[r]], g[sel.rows[r]]);
  }
  EXPECT_EQ(ef.residual()[2], 0.0f);
  EXPECT_EQ(ef.residual()[3], 0.5f);
}

TEST(ErrorFeedbackTest, RecordsQuantizationErrorWhenEnabled) {
  QuantStats stats(true);
  ErrorFeedbackOptions opt{.rows = 1000,
                           .epsilon = 0.0f,
                           .value_type = ValueType::kBf16,
                           .stats = &stats,
                           .table_id = 7};
  ErrorFeedback ef(opt);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> g(1000);
  for (auto& x : g) x = d(rng);
  SparseSelection sel;
  ASSERT_TRUE(ef.Step(g, nullptr, &sel).ok());
  QuantErrorStats s = stats.Get(7, ValueType::kBf16);
  EXPECT_EQ(s.values, 1000u);
  EXPECT_GT(s.max_abs_error, 0.0);
  double max_abs = 0;
  for (float x : g) max_abs = std::max(max_abs, double{std::fabs(x)});
  EXPECT_LE(s.max_abs_error, max_abs * 0x1p-8);
  EXPECT_GT(s.rms_error(), 0.0);
  EXPECT_LE(s.rms_error(), s.max_abs_error);
}

TEST(ErrorFeedbackTest, RejectsBadInput) {
  ErrorFeedback bad({.rows = 4, .row_dim = 0});
  SparseSelection sel;
  EXPECT_TRUE(bad.Step(std::vector<float>(4), nullptr, &sel)
                  .Is(StatusCode::kInvalidArgument));
  ErrorFeedback ef({.rows = 4});
  EXPECT_TRUE(ef.Step(std::vector<float>(5), nullptr, &sel)
                  .Is(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ps::kernels
