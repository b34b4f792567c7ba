// Frequency admission end to end, with the real ps_datagen, ps_server and
// ps_worker: on data with a long tail of rare values, a table with
// admit_after_examples holds fewer rows on the server (an EXACT table's
// row count, from the server's final stats line) than the same run
// without, and still learns (finite eval numbers better than chance);
// --eval_only, whose process has no counts, counts the training data first
// and scores exactly as the training run's final evaluation did; --local
// trains with admission too; bad settings are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch/process.h"
#include "launch/text_file.h"
#include "tests/ps/server_process.h"
#include "tests/train/output_numbers.h"

namespace {

using ps::testing::NumbersAfter;
using ps::testing::ScratchDir;
using ps::testing::ServerProcess;
using ps::testing::SlowdownFactor;

struct Outcome {
  int code = -1;  // -1: killed at the timeout
  std::string output;
};

// Runs argv to its end (SIGKILL after timeout_s x SlowdownFactor()).
Outcome RunProgram(const std::vector<std::string>& argv, const std::string& log,
                   int timeout_s = 60) {
  ps::launch::ProcessSpec spec;
  spec.argv = argv;
  spec.log_path = log;
  spec.name = argv[0];
  Outcome out;
  auto p = ps::launch::Process::Spawn(spec);
  if (!p.ok()) {
    out.output = p.status().ToString();
    return out;
  }
  if (auto code = (*p)->WaitExit(timeout_s * 1000 * SlowdownFactor())) {
    out.code = *code;
  } else {
    (void)(*p)->Stop(SIGKILL, 1000);
  }
  out.output = ps::launch::FileTail(log, 1 << 20);
  return out;
}

// The last number after `label` in `text`, or -1.
double LastNumberAfter(const std::string& text, const std::string& label) {
  const std::vector<double> all = NumbersAfter(text, label + " ");
  return all.empty() ? -1 : all.back();
}

std::string Tables(const std::string& kind, uint32_t admit_after_examples) {
  return "table { id: 1 name: \"emb\" kind: " + kind +
         " dim: 1 capacity: 1000000 admit_after_pushes: 1 "
         "optimizer { name: \"adagrad\" learning_rate: 0.05 } "
         "admit_after_examples: " +
         std::to_string(admit_after_examples) + " }";
}

class AdmissionClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir::Create("admission").value();
    // A long tail: fields of up to 20000 values in 6000 rows, most of them
    // seen once or twice.
    Outcome gen = RunProgram(
        {PS_DATAGEN_BIN, "--rows=6000", "--eval_rows=2000", "--max_vocab=20000",
         "--output=" + Path("train.tsv"), "--eval_output=" + Path("eval.tsv")},
        Path("datagen.log"));
    ASSERT_EQ(gen.code, 0) << gen.output;
  }
  std::string Path(const std::string& name) const {
    return dir_->path() + "/" + name;
  }
  std::vector<std::string> Worker(std::vector<std::string> extra) const {
    std::vector<std::string> argv = {PS_WORKER_BIN,
                                     "--model=lr",
                                     "--train_data=" + Path("train.tsv"),
                                     "--eval_data=" + Path("eval.tsv"),
                                     "--batch_size=200",
                                     "--progress_secs=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  struct ClusterRun {
    Outcome train, eval_only;
    double exact_rows = -1;
  };
  // One server with an EXACT table; a training run, then an --eval_only
  // run; the server's row count once it stopped.
  ClusterRun Cluster(uint32_t admit_after_examples) {
    ClusterRun r;
    const std::string tables =
        dir_->WriteFile(
                "exact-" + std::to_string(admit_after_examples) + ".tables",
                Tables("EXACT", admit_after_examples))
            .value();
    ps::testing::ServerOptions so;
    so.tables_path = tables;
    auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (!server.ok()) return r;
    const std::string servers = "--servers=" + (*server)->address();
    r.train = RunProgram(Worker({servers, "--epochs=2"}), Path("train.log"));
    r.eval_only =
        RunProgram(Worker({servers, "--eval_only"}), Path("eval.log"));
    EXPECT_TRUE((*server)->Stop(20000).ok());
    r.exact_rows = LastNumberAfter((*server)->ReadLog(), "exact rows");
    return r;
  }
  std::unique_ptr<ScratchDir> dir_;
};

TEST_F(AdmissionClusterTest, ServerHoldsFewerRowsAndTheModelStillLearns) {
  ClusterRun off = Cluster(0);
  ClusterRun on = Cluster(3);
  for (const ClusterRun* r : {&off, &on}) {
    ASSERT_EQ(r->train.code, 0) << r->train.output;
    ASSERT_EQ(r->eval_only.code, 0) << r->eval_only.output;
    const double auc = LastNumberAfter(r->train.output, "eval AUC");
    const double logloss = LastNumberAfter(r->train.output, "logloss");
    EXPECT_TRUE(std::isfinite(auc) && std::isfinite(logloss))
        << r->train.output;
    EXPECT_GT(auc, 0.6) << r->train.output;
    EXPECT_GT(logloss, 0) << r->train.output;
    EXPECT_LT(logloss, 0.65) << r->train.output;
    // The same parameters, the same counts (re-counted): the same score.
    EXPECT_EQ(LastNumberAfter(r->eval_only.output, "eval AUC"), auc)
        << r->eval_only.output;
  }
  EXPECT_EQ(off.train.output.find("frequency admission"), std::string::npos);
  EXPECT_NE(
      on.train.output.find("frequency admission on the sparse table: a value "
                           "gets its own row from its occurrence 3"),
      std::string::npos)
      << on.train.output;
  EXPECT_NE(on.train.output.find("admission (own row from occurrence 3): "),
            std::string::npos)
      << on.train.output;
  EXPECT_NE(
      on.eval_only.output.find("counting the feature values of the training"),
      std::string::npos)
      << on.eval_only.output;
  // Every value pushed has a row without admission; with it, the values
  // seen fewer than 3 times (most of the tail) share 39 OOV rows.
  ASSERT_GT(off.exact_rows, 0);
  EXPECT_LT(on.exact_rows, 0.7 * off.exact_rows)
      << "rows without admission " << off.exact_rows << ", with "
      << on.exact_rows;
  EXPECT_GT(on.exact_rows, 39);
}

TEST_F(AdmissionClusterTest, LocalRunTrainsWithAdmission) {
  const std::string tables =
      dir_->WriteFile("hashed.tables", Tables("HASHED", 4)).value();
  Outcome out =
      RunProgram(Worker({"--local", "--tables=" + tables, "--threads=2"}),
                 Path("local.log"));
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_GT(LastNumberAfter(out.output, "eval AUC"), 0.6) << out.output;
  EXPECT_NE(out.output.find("admission (own row from occurrence 4): "),
            std::string::npos)
      << out.output;
  // Some occurrences were mapped, not all.
  const double mapped = LastNumberAfter(out.output, "seen;");
  EXPECT_GT(mapped, 0) << out.output;
}

TEST_F(AdmissionClusterTest, AdaptiveAdmissionSetsFieldThresholdsFirst) {
  std::string spec = Tables("HASHED", 0);
  spec.replace(spec.find("admit_after_examples: 0"), 23,
               "adaptive_admission { }");
  const std::string tables = dir_->WriteFile("adaptive.tables", spec).value();
  Outcome out =
      RunProgram(Worker({"--local", "--tables=" + tables, "--threads=2"}),
                 Path("adaptive.log"));
  ASSERT_EQ(out.code, 0) << out.output;
  EXPECT_GT(LastNumberAfter(out.output, "eval AUC"), 0.6) << out.output;
  // The counting pass logs each field's threshold before training.
  const size_t thresholds = out.output.find("admission thresholds by field");
  const size_t trained = out.output.find("eval AUC");
  ASSERT_NE(thresholds, std::string::npos) << out.output;
  EXPECT_LT(thresholds, trained);
  EXPECT_NE(out.output.find(" 13:", thresholds), std::string::npos)
      << out.output;  // C1, a categorical field of the Criteo lines
  EXPECT_NE(out.output.find("admission (adaptive, own row from occurrence "),
            std::string::npos)
      << out.output;
}

TEST_F(AdmissionClusterTest, AdmissionOnADenseTableIsRefused) {
  const std::string tables =
      dir_->WriteFile("dense.tables",
                      "table { id: 1 name: \"emb\" kind: DENSE dim: 1 "
                      "capacity: 10 admit_after_examples: 2 }")
          .value();
  Outcome out =
      RunProgram(Worker({"--local", "--tables=" + tables}), Path("d.log"));
  EXPECT_EQ(out.code, 2) << out.output;
  EXPECT_NE(out.output.find("are for HASHED and EXACT tables"),
            std::string::npos)
      << out.output;
}

TEST_F(AdmissionClusterTest, SketchSizeOutOfBoundsIsAUsageError) {
  const std::string tables =
      dir_->WriteFile("hashed.tables", Tables("HASHED", 4)).value();
  for (const char* mb : {"0", "8193"}) {
    Outcome out =
        RunProgram(Worker({"--local", "--tables=" + tables,
                           std::string("--admission_sketch_mb=") + mb}),
                   Path("mb.log"));
    EXPECT_EQ(out.code, 2) << out.output;
    EXPECT_NE(out.output.find("--admission_sketch_mb must be in [1, 8192], "
                              "not " +
                              std::string(mb)),
              std::string::npos)
        << out.output;
  }
}

}  // namespace
