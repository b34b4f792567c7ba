// --early_stop and the divergence warning with the real binaries, on FM with
// a learning rate (adagrad 5) that makes it worse than predicting the base
// rate from the first eval on while staying finite:
//   - every eval says so loudly (NE >= 1), naming the table's optimizer and
//     learning rate;
//   - --local stops early, exits 0, ends with the eval of the best
//     parameters it kept in memory (and ps_worker links no RocksDB);
//   - with a ps_server that keeps checkpoints (--checkpoint_keep=1, every
//     one full): the best point's checkpoint is marked BEST and survives
//     the later ones' retention, and ps_server --restore_from=best with
//     ps_worker --eval_only reproduces the best eval logloss; without a
//     --checkpoint_dir the worker says the servers keep the latest.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/ps/server_process.h"
#include "tests/train/output_numbers.h"
#include "tests/train/run_program.h"

namespace {

using ps::testing::Joined;
using ps::testing::LinesWith;
using ps::testing::NumbersAfter;
using ps::testing::Outcome;
using ps::testing::ReadFile;
using ps::testing::RunProgram;
using ps::testing::ScratchDir;
using ps::testing::ServerProcess;

// FM rows [w, v_1..v_8] with a learning rate far too high for them.
constexpr char kTooFastFm[] = R"(table { id: 1 name: "emb" kind: HASHED
    dim: 9 capacity: 65536
    optimizer { name: "adagrad" learning_rate: 5 initial_accumulator: 0.1 }
    initializer { name: "normal" scale: 0.05 seed: 7 } })";

// A number after `"key": ` in a flat JSON text (the first one).
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stod(json.substr(at + key.size() + 4));
}

class EarlyStopProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir::Create("early_stop").value();
    tables_ = dir_->WriteFile("fm.tables", kTooFastFm).value();
    Outcome gen = RunProgram(
        {PS_DATAGEN_BIN, "--model=fm", "--rows=20000", "--eval_rows=4000",
         "--output=" + Path("train.tsv"), "--eval_output=" + Path("eval.tsv")},
        Path("datagen.log"), 60);
    ASSERT_EQ(gen.code, 0) << gen.output;
  }
  std::string Path(const std::string& name) const {
    return dir_->path() + "/" + name;
  }
  // ps_worker training FM with early stopping, plus `extra`.
  std::vector<std::string> Worker(std::vector<std::string> extra) {
    std::vector<std::string> argv = {PS_WORKER_BIN,
                                     "--model=fm",
                                     "--train_data=" + Path("train.tsv"),
                                     "--eval_data=" + Path("eval.tsv"),
                                     "--batch_size=500",
                                     "--epochs=2",
                                     "--eval_every=2000",
                                     "--early_stop",
                                     "--progress_secs=0",
                                     "--metrics_json=" + Path("metrics.json")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  // What every early-stopped run must show: the loud warning, the stop
  // before the end, and the best point as the final eval, after `patience`
  // evals without a better one.
  void ExpectStoppedEarlyAtTheBest(const Outcome& out, int patience = 2) {
    for (const char* said :
         {"EVAL NO BETTER THAN THE BASE RATE",
          "the model is no better than predicting the base rate",
          "lower the learning rate of table emb (adagrad, learning_rate 5)",
          "every value has its own row", "adaptive_admission { }",
          "early stop after step ", "early stop; best eval at step "}) {
      EXPECT_NE(out.output.find(said), std::string::npos)
          << "no '" << said << "' in\n"
          << out.output;
    }
    const std::string json = ReadFile(Path("metrics.json"));
    EXPECT_NE(json.find("\"early_stopped\": true"), std::string::npos) << json;
    // 2 epochs of ~20000 rows: far fewer were trained.
    EXPECT_LT(JsonNumber(json, "train_examples"), 30000) << json;
    const size_t best_at = json.find("\"best\": ");
    ASSERT_NE(best_at, std::string::npos) << json;
    const double best = JsonNumber(json.substr(best_at), "logloss");
    EXPECT_NEAR(JsonNumber(json, "eval_logloss"), best, 1e-4) << json;
    EXPECT_GE(JsonNumber(json, "eval_ne"), 1) << json;
    // The best is the lowest of the history.
    const std::string history = json.substr(json.find("\"history\""));
    int points = 0;
    for (double logloss : NumbersAfter(history, "\"logloss\": ")) {
      EXPECT_LE(best, logloss + 1e-9) << json;
      ++points;
    }
    EXPECT_GE(points, 1 + patience) << json;  // a best, then patience without
    best_logloss_ = best;
    best_step_ =
        static_cast<uint64_t>(JsonNumber(json.substr(best_at), "step"));
  }

  std::unique_ptr<ScratchDir> dir_;
  std::string tables_;
  double best_logloss_ = -1;
  uint64_t best_step_ = 0;
};

TEST_F(EarlyStopProcessTest, LocalKeepsTheBestParametersInMemory) {
  std::vector<std::string> argv = Worker({"--local", "--tables=" + tables_});
  Outcome out = RunProgram(argv, Path("worker.log"), 120);
  ASSERT_EQ(out.code, 0) << Joined(argv) << "\n" << out.output;
  ExpectStoppedEarlyAtTheBest(out);
  EXPECT_NE(out.output.find("eval of the best parameters kept (step " +
                            std::to_string(best_step_) + ")"),
            std::string::npos)
      << out.output;
  // The copy is in memory: ps_worker links no storage library.
  Outcome ldd = RunProgram({"/usr/bin/ldd", PS_WORKER_BIN}, Path("ldd.log"));
  ASSERT_EQ(ldd.code, 0) << ldd.output;
  EXPECT_EQ(ldd.output.find("rocksdb"), std::string::npos) << ldd.output;
}

TEST_F(EarlyStopProcessTest, ServersKeepTheBestCheckpointPastRetention) {
  const std::string ckpt = Path("ckpt");
  ps::testing::ServerOptions so;
  so.tables_path = tables_;
  // Every checkpoint full and only the newest kept: without the mark,
  // retention would delete the best one as soon as a later one completes.
  so.extra_flags = {"--checkpoint_dir=" + ckpt, "--checkpoint_keep=1",
                    "--checkpoint_full_every=1", "--checkpoint_every_steps=6",
                    "--checkpoint_on_exit=false"};
  auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::string> argv = Worker({"--servers=" + (*server)->address()});
  Outcome out = RunProgram(argv, Path("worker.log"), 120);
  ASSERT_EQ(out.code, 0) << Joined(argv) << "\n" << out.output;
  ExpectStoppedEarlyAtTheBest(out);
  EXPECT_NE(out.output.find("the best are in their checkpoint of step " +
                            std::to_string(best_step_)),
            std::string::npos)
      << out.output;
  ASSERT_TRUE((*server)->Stop(30000).ok());  // every write and commit done
  EXPECT_NE((*server)->ReadLog().find("is the best so far"), std::string::npos);

  Outcome list =
      RunProgram({PS_CKPT_BIN, "list", "--dir=" + ckpt}, Path("list.log"));
  ASSERT_EQ(list.code, 0) << list.output;
  char best_line[64];
  std::snprintf(best_line, sizeof(best_line), "ckpt-%012llu  step %llu",
                static_cast<unsigned long long>(best_step_),
                static_cast<unsigned long long>(best_step_));
  const size_t line = list.output.find(best_line);
  ASSERT_NE(line, std::string::npos) << list.output;
  const std::string rest = list.output.substr(line);
  EXPECT_NE(rest.substr(0, rest.find('\n')).find("BEST"), std::string::npos)
      << list.output;
  // Retention ran after the best: exactly the best and the newest are left,
  // the newest later than the best.
  std::vector<uint64_t> steps;
  for (const std::string& entry : LinesWith(list.output, "  full")) {
    const std::vector<double> step = NumbersAfter(entry, "  step ");
    if (entry.find("ckpt-") != std::string::npos && !step.empty()) {
      steps.push_back(static_cast<uint64_t>(step[0]));
    }
  }
  ASSERT_EQ(steps.size(), 2u) << list.output;
  EXPECT_EQ(steps[0], best_step_) << list.output;
  EXPECT_GT(steps[1], best_step_) << list.output;

  // The best checkpoint brings back the best eval.
  so.extra_flags = {"--checkpoint_dir=" + ckpt, "--restore_from=best",
                    "--checkpoint_on_exit=false"};
  auto restored = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  Outcome eval = RunProgram(
      {PS_WORKER_BIN, "--model=fm", "--servers=" + (*restored)->address(),
       "--train_data=" + Path("train.tsv"), "--eval_data=" + Path("eval.tsv"),
       "--eval_only"},
      Path("eval_only.log"), 60);
  ASSERT_EQ(eval.code, 0) << eval.output;
  const std::vector<std::string> evals = LinesWith(eval.output, "eval AUC ");
  ASSERT_FALSE(evals.empty()) << eval.output;
  const std::vector<double> logloss = NumbersAfter(evals[0], " logloss ");
  ASSERT_FALSE(logloss.empty()) << eval.output;
  EXPECT_NEAR(logloss[0], best_logloss_, 1e-3) << eval.output;
}

// Two workers: worker 0 evaluates inside each cut, the other learns its
// verdict from shard 0, and both stop after the same step and exit 0.
TEST_F(EarlyStopProcessTest, EveryWorkerStopsAfterTheSameStep) {
  ps::testing::ServerOptions so;
  so.tables_path = tables_;
  so.num_workers = 2;
  so.extra_flags = {"--checkpoint_dir=" + Path("ckpt"),
                    "--checkpoint_on_exit=false"};
  auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Outcome outs[2];
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      // A later --metrics_json overrides Worker()'s: one file each. Two
      // async workers make the eval curve differ from run to run; it
      // wanders up and down (the rate diverges) but once improved at every
      // other eval for ten evals, which a patience of 2 never stops. A
      // patience of 1 stops at the first eval that is no better.
      std::vector<std::string> argv = Worker(
          {"--servers=" + (*server)->address(), "--num_workers=2",
           "--worker_id=" + std::to_string(w),
           "--metrics_json=" + Path(w == 0 ? "metrics.json" : "metrics-1.json"),
           "--early_stop_patience=1"});
      outs[w] =
          RunProgram(argv, Path("worker-" + std::to_string(w) + ".log"), 120);
    });
  }
  for (auto& t : workers) t.join();
  ASSERT_EQ(outs[0].code, 0) << outs[0].output;
  ASSERT_EQ(outs[1].code, 0) << outs[1].output;
  ExpectStoppedEarlyAtTheBest(outs[0], /*patience=*/1);
  const std::string stopped = "early stop after step ";
  const std::vector<double> s0 = NumbersAfter(outs[0].output, stopped);
  const std::vector<double> s1 = NumbersAfter(outs[1].output, stopped);
  ASSERT_FALSE(s0.empty()) << outs[0].output;
  ASSERT_FALSE(s1.empty()) << outs[1].output;
  EXPECT_EQ(s0[0], s1[0]);
  EXPECT_NE(outs[1].output.find("the evaluating worker's evals stopped"),
            std::string::npos)
      << outs[1].output;
}

// Without a --checkpoint_dir nothing can keep the best parameters: the run
// still stops at the best point's patience and reports it, and says (at
// start and at the end) that the servers hold the latest parameters.
TEST_F(EarlyStopProcessTest, ServersWithoutCheckpointsWarnTheyHoldTheLatest) {
  ps::testing::ServerOptions so;
  so.tables_path = tables_;
  auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::vector<std::string> argv = Worker({"--servers=" + (*server)->address()});
  Outcome out = RunProgram(argv, Path("worker.log"), 120);
  ASSERT_EQ(out.code, 0) << Joined(argv) << "\n" << out.output;
  ExpectStoppedEarlyAtTheBest(out);
  for (const char* said :
       {"the servers keep no checkpoints (no --checkpoint_dir)",
        "the parameters the servers hold then are the LATEST, not the best",
        "the servers hold the latest parameters, not the best"}) {
    EXPECT_NE(out.output.find(said), std::string::npos)
        << "no '" << said << "' in\n"
        << out.output;
  }
}

}  // namespace
