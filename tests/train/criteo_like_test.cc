// The shipped configs (configs/{lr,fm,deepfm}.{flags,tables}) on Criteo-like
// generated rows (ps_datagen --model=fm --vocab=criteo: the Kaggle log's
// per-field cardinalities, up to 10M values, most of the big fields' values
// seen once), trained by ps_worker --local with no extra flags: every eval
// must beat the base rate (normalized entropy < 1) and stay finite.
//
// Built twice from this file:
//  - train_criteo_like_test (the release suite, seconds): 100k rows, each
//    model with its shipped epochs (sanitizer builds: 20k rows, one epoch);
//  - train_criteo_like_acceptance_test (label acceptance,
//  PS_CRITEO_ACCEPTANCE):
//    the run on 1M rows, every model with its shipped epochs, and
//    the comparisons: FM AUC >= LR AUC, DeepFM AUC >= FM AUC - 0.002, FM
//    within 0.03 of the planted optimum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tests/train/output_numbers.h"
#include "tests/train/run_program.h"

namespace ps::testing {
namespace {

#ifdef PS_CRITEO_ACCEPTANCE
constexpr bool kAcceptance = true;
#else
constexpr bool kAcceptance = false;
#endif

const std::string kSource = PS_SOURCE_DIR;

struct EvalLine {
  double auc = 0, logloss = 0, ne = 0;
};

// The "eval after N examples: AUC a logloss l NE n" lines of a run.
std::vector<EvalLine> EvalLines(const std::string& output) {
  std::vector<EvalLine> out;
  for (const std::string& line : LinesWith(output, "eval after ")) {
    const std::vector<double> auc = NumbersAfter(line, ": AUC ");
    const std::vector<double> logloss = NumbersAfter(line, " logloss ");
    const std::vector<double> ne = NumbersAfter(line, " NE ");
    if (auc.empty() || logloss.empty() || ne.empty()) continue;
    out.push_back({auc[0], logloss[0], ne[0]});
  }
  return out;
}

class CriteoLikeTest : public ::testing::Test {
 protected:
  // Rows: 1M for the acceptance run; 100k in the release suite (20k under
  // sanitizers, whose builds run the trainer several times slower).
  static uint64_t Rows() {
    if (kAcceptance) return 1000000;
    return SlowdownFactor() > 1 ? 20000 : 100000;
  }

  static void SetUpTestSuite() {
    dir_ = ScratchDir::Create("criteo_like").value().release();
    const std::string rows = std::to_string(Rows());
    const std::string eval_rows = std::to_string(Rows() / 10);
    Outcome gen = RunProgram(
        {PS_DATAGEN_BIN, "--model=fm", "--vocab=criteo", "--rows=" + rows,
         "--eval_rows=" + eval_rows, "--output=" + Path("train.tsv"),
         "--eval_output=" + Path("eval.tsv")},
        Path("datagen.log"), 600);
    ASSERT_EQ(gen.code, 0) << gen.output;
    const std::vector<double> optimum =
        NumbersAfter(gen.output, "planted optimum AUC ");
    ASSERT_FALSE(optimum.empty()) << gen.output;
    optimum_ = optimum[0];
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Path(const std::string& name) {
    return dir_->path() + "/" + name;
  }

  // Trains `model` with its shipped flagfile and tables (plus `extra`) and
  // returns its eval lines, one per epoch; each must beat the base rate.
  std::vector<EvalLine> Train(const std::string& model,
                              const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {
        PS_WORKER_BIN,
        "--flagfile=" + kSource + "/configs/" + model + ".flags",
        "--local",
        "--tables=" + kSource + "/configs/" + model + ".tables",
        "--train_data=" + Path("train.tsv"),
        "--eval_data=" + Path("eval.tsv"),
        "--progress_secs=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Outcome out = RunProgram(argv, Path(model + ".log"), 1500);
    EXPECT_EQ(out.code, 0) << Joined(argv) << "\n" << out.output;
    std::vector<EvalLine> evals = EvalLines(out.output);
    EXPECT_FALSE(evals.empty()) << out.output;
    for (size_t e = 0; e < evals.size(); ++e) {
      std::printf("%s epoch %zu: AUC %.4f logloss %.4f NE %.4f\n",
                  model.c_str(), e + 1, evals[e].auc, evals[e].logloss,
                  evals[e].ne);
      EXPECT_TRUE(std::isfinite(evals[e].logloss)) << model << " " << e + 1;
      EXPECT_LT(evals[e].ne, 1.0)
          << model << " epoch " << e + 1 << " is no better than the base "
          << "rate:\n"
          << out.output;
    }
    return evals;
  }

  static ScratchDir* dir_;
  static double optimum_;
};

ScratchDir* CriteoLikeTest::dir_ = nullptr;
double CriteoLikeTest::optimum_ = 0;

TEST_F(CriteoLikeTest, ShippedConfigsBeatTheBaseRateEveryEpoch) {
  // Sanitizer builds train each model for one epoch.
  const std::vector<std::string> extra =
      SlowdownFactor() > 1 ? std::vector<std::string>{"--epochs=1"}
                           : std::vector<std::string>{};
  const std::vector<EvalLine> lr = Train("lr", extra);
  const std::vector<EvalLine> fm = Train("fm", extra);
  const std::vector<EvalLine> deepfm = Train("deepfm", extra);
  std::printf("planted optimum AUC %.4f (%llu rows)\n", optimum_,
              static_cast<unsigned long long>(Rows()));
  if (!kAcceptance || lr.empty() || fm.empty() || deepfm.empty()) return;
  EXPECT_GE(fm.back().auc, lr.back().auc);
  EXPECT_GE(deepfm.back().auc, fm.back().auc - 0.002);
  EXPECT_GT(fm.back().auc, optimum_ - 0.03);
}

}  // namespace
}  // namespace ps::testing
