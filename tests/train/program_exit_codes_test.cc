// The exit statuses ps_worker, ps_datagen, ps_server and ps_ckpt promise, with
// the real binaries: 2 for bad usage (an unknown flag, a size no machine can
// hold, a non-finite or absurd value, an evaluating worker outside the job),
// said in a message that names the flag and before anything is allocated; 1 for
// a training run that diverges, with --local and against a ps_server, with
// a message that says what to change. Every case must end in seconds: the
// defects these guard against were aborts (std::bad_alloc, exit 134) and
// endless loops at 100% CPU.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/ps/server_process.h"
#include "tests/train/run_program.h"

namespace {

using ps::testing::Joined;
using ps::testing::Outcome;
using ps::testing::RunProgram;
using ps::testing::ScratchDir;
using ps::testing::ServerProcess;
using ps::testing::SlowdownFactor;

constexpr char kTables[] = R"(table { id: 1 name: "emb" kind: HASHED dim: 1
    capacity: 65536 optimizer { name: "adagrad" learning_rate: 0.05 } })";
// The first push makes every weight it touches infinite.
constexpr char kDivergingTables[] = R"(table { id: 1 name: "emb" kind: HASHED
    dim: 1 capacity: 65536 optimizer { name: "sgd" learning_rate: 1e38 } })";

class ProgramExitCodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ScratchDir::Create("program_exit").value();
    tables_ = dir_->WriteFile("lr.tables", kTables).value();
    diverging_tables_ =
        dir_->WriteFile("diverging.tables", kDivergingTables).value();
  }
  std::string Path(const std::string& name) const {
    return dir_->path() + "/" + name;
  }
  // 2000 planted rows, written once per test.
  const std::string& TrainData() {
    if (train_.empty()) {
      const std::string path = Path("train.tsv");
      Outcome gen = RunProgram(
          {PS_DATAGEN_BIN, "--rows=2000", "--eval_rows=0", "--output=" + path},
          Path("datagen.log"));
      EXPECT_EQ(gen.code, 0) << gen.output;
      train_ = path;
    }
    return train_;
  }
  // A --local ps_worker on the planted rows, plus `extra` flags.
  std::vector<std::string> LocalWorker(const std::string& tables,
                                       std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        PS_WORKER_BIN, "--local", "--tables=" + tables,
        "--train_data=" + TrainData(), "--progress_secs=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  // Runs argv and expects exit status `code` within `max_s` seconds, with
  // every one of `said` in the output.
  void Expect(const std::vector<std::string>& argv, int code,
              const std::vector<std::string>& said, double max_s = 5) {
    Outcome out = RunProgram(argv, Path("run.log"));
    EXPECT_EQ(out.code, code) << Joined(argv) << "\n" << out.output;
    for (const std::string& s : said) {
      EXPECT_NE(out.output.find(s), std::string::npos)
          << Joined(argv) << ": no '" << s << "' in\n"
          << out.output;
    }
    EXPECT_LT(out.seconds, max_s * SlowdownFactor()) << Joined(argv);
  }

  std::unique_ptr<ScratchDir> dir_;
  std::string tables_, diverging_tables_, train_;
};

TEST_F(ProgramExitCodesTest, WorkerUnknownFlagOrBadValueExitsTwo) {
  Expect({PS_WORKER_BIN, "--no_such_flag"}, 2,
         {"ps_worker: unknown flag --no_such_flag"});
  Expect({PS_WORKER_BIN, "--batch_size=many"}, 2, {"--batch_size"});
  const std::string flags =
      dir_->WriteFile("bad.flags", "--model=lr\n--threads=some\n").value();
  Expect({PS_WORKER_BIN, "--flagfile=" + flags}, 2, {"--threads"});
}

TEST_F(ProgramExitCodesTest, WorkerSizesBeyondTheirBoundsExitTwo) {
  Expect(LocalWorker(tables_, {"--batch_size=4000000000"}), 2,
         {"--batch_size must be in [1, 1000000], not 4000000000"});
  Expect(LocalWorker(tables_, {"--threads=100000"}), 2, {"--threads"});
  Expect(LocalWorker(tables_, {"--num_workers=4000000000"}), 2,
         {"--num_workers"});
  Expect(LocalWorker(tables_, {"--model=deepfm", "--hidden=4294967297"}), 2,
         {"--hidden"});
  Expect(LocalWorker(tables_, {"--l2_v=inf"}), 2, {"--l2_v"});
  Expect(LocalWorker(tables_, {"--cpu_wakeup_latency_us=-2"}), 2,
         {"--cpu_wakeup_latency_us must be in [-1, 1000000], not -2"});
}

TEST_F(ProgramExitCodesTest, WorkerEvalWorkerOutsideTheJobExitsTwo) {
  Expect(LocalWorker(tables_, {"--num_workers=1", "--eval_worker=7"}), 2,
         {"--eval_worker must be -1", "not 7"});
  Expect(LocalWorker(tables_, {"--eval_worker=-2"}), 2, {"--eval_worker"});
}

TEST_F(ProgramExitCodesTest, WorkerEarlyStopWithoutEvalsOrPatienceExitsTwo) {
  Expect(LocalWorker(tables_, {"--early_stop_patience=0"}), 2,
         {"--early_stop_patience must be >= 1"});
  Expect(LocalWorker(tables_, {"--early_stop"}), 2,
         {"--early_stop needs --eval_every > 0"});
  Expect(LocalWorker(tables_, {"--early_stop", "--eval_every=0"}), 2,
         {"--early_stop needs --eval_every > 0"});
  // With servers worker 0 must be the one that evaluates (checked before
  // any server is dialled).
  Expect({PS_WORKER_BIN, "--servers=127.0.0.1:1", "--num_workers=2",
          "--eval_worker=1", "--early_stop", "--eval_every=100",
          "--train_data=" + TrainData()},
         2, {"--early_stop with servers needs --eval_worker=0"});
}

// The planted rows as a CSV log with a header: "label,I1..I13,C1..C26".
std::string CsvOf(const std::string& tsv) {
  std::string csv = "label";
  for (int i = 1; i <= 13; ++i) csv.append(",I").append(std::to_string(i));
  for (int i = 1; i <= 26; ++i) csv.append(",C").append(std::to_string(i));
  csv += "\n";
  std::ifstream in(tsv);
  for (std::string line; std::getline(in, line);) {
    for (char& c : line) c = c == '\t' ? ',' : c;
    csv.append(line).append("\n");
  }
  return csv;
}

TEST_F(ProgramExitCodesTest, WorkerCsvColumnsAreCheckedAgainstTheHeader) {
  const std::string csv =
      dir_->WriteFile("train.csv", CsvOf(TrainData())).value();
  std::string numeric = "--csv_columns=label=label numeric=I1";
  for (int i = 2; i <= 13; ++i) numeric.append(",I").append(std::to_string(i));
  auto worker = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        PS_WORKER_BIN, "--local", "--train_data=" + csv, "--progress_secs=0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    // The last --tables wins: a test case may name its own.
    argv.insert(argv.begin() + 2, "--tables=" + tables_);
    return argv;
  };
  Expect(worker({"--data_format=csv"}), 2,
         {"--data_format=csv needs --csv_columns"});
  Expect(worker({"--csv_columns=label=label"}), 2,
         {"--csv_columns is for --data_format=csv"});
  Expect(worker({"--data_format=csv", "--csv_columns=label=click"}), 2,
         {"--csv_columns: " + csv +
          " line 1: csv spec label column 'click' is not in the header "
          "(label, I1, I2,"});
  Expect(worker({"--data_format=csv", "--csv_columns=label=label sep=ab"}), 2,
         {"sep='ab'"});
  Expect(worker({"--data_format=csv", numeric, "--model=deepfm",
                 "--num_fields=10"}),
         2, {"--num_fields=10, but " + csv + " has 39 feature columns"});
  // The header's feature columns are deepfm's fields without a flag: 38
  // here (C26 read past), not the flag's default 39.
  // (The MLP of 38 x 8 inputs, 64 and 32 hidden units: 21633 weights.)
  const std::string deepfm_tables = dir_->WriteFile("deepfm.tables", R"(
          table { id: 1 name: "emb" kind: HASHED dim: 9 capacity: 65536
                  optimizer { name: "adagrad" learning_rate: 0.05 }
                  initializer { name: "normal" scale: 0.01 seed: 7 } }
          table { id: 2 name: "mlp" kind: DENSE dim: 1 capacity: 21633
                  optimizer { name: "adam" learning_rate: 0.0003 }
                  initializer { name: "uniform" scale: 0.05 seed: 11 } })")
                                        .value();
  Expect(worker({"--data_format=csv", numeric + " ignore=C26", "--model=deepfm",
                 "--tables=" + deepfm_tables, "--strict_data"}),
         0, {"eval AUC"}, 60);
  // An eval file must have the training file's feature columns: said
  // before training.
  std::string other_text = CsvOf(TrainData());
  other_text.replace(other_text.find(",C25,"), 5, ",C25b,");
  const std::string other = dir_->WriteFile("other.csv", other_text).value();
  Expect(worker({"--data_format=csv", numeric, "--eval_data=" + other}), 1,
         {"other.csv's header gives the feature columns (", ", C25b, C26)",
          "the model needs the same columns in the same order"});
  // lr and fm have no fields to agree on.
  Expect(worker({"--data_format=csv", numeric, "--num_fields=10"}), 0,
         {"eval AUC"}, 60);
}

TEST_F(ProgramExitCodesTest, DatagenBadValuesExitTwoNamingTheFlag) {
  const std::string out = "--output=" + Path("gen.tsv");
  const std::vector<std::vector<std::string>> cases = {
      {"--model=fm", "--factor_stddev=inf"},
      {"--weight_stddev=nan"},
      {"--bias=inf"},
      {"--bias=1e30"},
      {"--model=fm", "--factor_stddev=-1"},
      {"--zipf_exponent=nan"},
      {"--max_vocab=4000000000"},
      {"--rows=4000000000000"},
      {"--vocab=kaggle"},
      {"--vocab=criteo", "--vocab_scale=0"},
      {"--vocab=criteo", "--vocab_scale=nan"},
      {"--vocab=criteo", "--vocab_scale=1e9"},
      {"--vocab_scale=0.5"},  // scales --vocab=criteo only
      {"--vocab=criteo", "--max_vocab=1000"},
      {"--vocab=criteo", "--zipf_exponent=1.2"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {PS_DATAGEN_BIN, "--rows=1000",
                                     "--eval_rows=0", out};
    argv.insert(argv.end(), c.begin(), c.end());
    const std::string flag = c.back().substr(0, c.back().find('='));
    Expect(argv, 2, {"ps_datagen: " + flag + " must be"});
  }
  Expect({PS_DATAGEN_BIN, "--no_such_flag"}, 2, {"unknown flag"});
}

TEST_F(ProgramExitCodesTest, DivergingLocalRunExitsOne) {
  Expect(LocalWorker(diverging_tables_, {}), 1,
         {"training diverged at step ",
          "lower the learning rate of table emb (sgd, learning_rate 1e+38)"},
         10);
}

TEST_F(ProgramExitCodesTest, DivergingRunWithAServerExitsOne) {
  ps::testing::ServerOptions so;
  so.tables_path = diverging_tables_;
  // bsp: the second step's pull sees the first step's push, so the
  // divergence is caught while training. In async the second pull may run
  // before the server applied that push, and only the evaluation would see it.
  so.consistency = ps::proto::CONSISTENCY_BSP;
  auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Expect({PS_WORKER_BIN, "--servers=" + (*server)->address(),
          "--train_data=" + TrainData(), "--progress_secs=0"},
         1,
         {"training diverged at step ",
          "lower the learning rate of table emb (sgd, learning_rate 1e+38)"},
         10);
}

}  // namespace

namespace {

TEST_F(ProgramExitCodesTest, CkptUnknownFlagExitsTwoNotOne) {
  // 1 would mean "a checkpoint is damaged".
  Expect({PS_CKPT_BIN, "list", "--no_such_flag"}, 2,
         {"ps_ckpt: unknown flag --no_such_flag"});
}

TEST_F(ProgramExitCodesTest, ServerRefusesBadCheckpointDirsAndOpenListeners) {
  const std::string file = dir_->WriteFile("not-a-dir", "x").value();
  Expect({PS_SERVER_BIN, "--tables=" + tables_, "--checkpoint_dir=" + file}, 2,
         {"--checkpoint_dir", file});
  Expect({PS_SERVER_BIN, "--tables=" + tables_, "--checkpoint_dir=/proc/ps"}, 2,
         {"--checkpoint_dir", "/proc/ps"});
  Expect({PS_SERVER_BIN, "--tables=" + tables_, "--listen_host=0.0.0.0"}, 2,
         {"cluster secret"});
}

// Every checkpoint's directory name is taken by a file, so each write fails:
// the worker warns at each checkpoint and stops with 4 after
// --max_failed_checkpoints in a row.
TEST_F(ProgramExitCodesTest, WorkerStopsWhenCheckpointsKeepFailing) {
  const std::string ckpt = Path("ckpt");
  std::filesystem::create_directories(ckpt);
  for (int step = 2; step <= 40; step += 2) {
    char name[32];
    std::snprintf(name, sizeof(name), "ckpt-%012d", step);
    std::ofstream(ckpt + "/" + name) << "in the way";
  }
  ps::testing::ServerOptions so;
  so.tables_path = tables_;
  so.extra_flags = {"--checkpoint_dir=" + ckpt, "--checkpoint_every_steps=2",
                    "--checkpoint_on_exit=false"};
  auto server = ServerProcess::Start(PS_SERVER_BIN, so, dir_->path());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Expect({PS_WORKER_BIN, "--servers=" + (*server)->address(),
          "--train_data=" + TrainData(), "--batch_size=100",
          "--progress_secs=0", "--max_failed_checkpoints=2"},
         4,
         {"the checkpoint at step 2 FAILED", "1 in a row",
          "2 checkpoints in a row failed (--max_failed_checkpoints=2)",
          "the newest complete checkpoint: none yet"},
         10);
}

}  // namespace
