// The trainer with parameters in-process: it learns planted data, splits
// lines between workers and the held-out set without overlap, skips and
// counts malformed lines (or stops at them with strict_data), reports
// missing files, checks table shapes against the model, and stops a run
// whose loss turns NaN.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "protocol/table_config.h"
#include "tests/train/watchdog.h"
#include "worker/datagen/criteo_synth.h"
#include "worker/datagen/planted_model.h"
#include "worker/train/example_source.h"
#include "worker/train/local_param_store.h"

namespace ps::train {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/trainer_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    (void)!std::system(cmd.c_str());
  }
  // Writes `rows` rows from a planted model; returns the path.
  std::string Generate(const std::string& name, int rows,
                       datagen::PlantedOptions::Kind kind) {
    datagen::PlantedOptions po;
    po.kind = kind;
    po.weight_stddev = 0.5f;
    datagen::PlantedModel model(po);
    datagen::SynthOptions so;
    so.max_vocab = 300;
    datagen::CriteoSynth synth(so, &model);
    std::string path = dir_ + "/" + name;
    std::ofstream out(path);
    std::string line;
    double p;
    for (int i = 0; i < rows; ++i) {
      synth.NextRow(&line, &p);
      out << line << "\n";
    }
    return path;
  }
  std::unique_ptr<LocalParamStore> Store(const std::string& text) {
    auto config = protocol::ParseTableConfig(text);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto store = LocalParamStore::Create(*config);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(*store);
  }
  std::string dir_;
};

constexpr char kLrTables[] = R"(table { id: 1 name: "emb" kind: HASHED
    dim: 1 capacity: 65536 optimizer { name: "adagrad" learning_rate: 0.05 }
    })";

TEST_F(TrainerTest, LearnsPlantedLogisticRegression) {
  std::string train =
      Generate("train.tsv", 30000, datagen::PlantedOptions::Kind::kLr);
  auto store = Store(kLrTables);
  auto model = MakeModel(ModelOptions{});
  ASSERT_TRUE(model.ok());
  TrainerOptions o;
  o.train_data = train;
  o.threads = 2;
  o.epochs = 2;
  o.batch_size = 200;
  o.progress_secs = 0;
  auto trainer = Trainer::Create(o, model->get(), store.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  auto result = trainer->Run();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->evaluated);
  EXPECT_GT(result->final_eval.auc, 0.70);
  EXPECT_LT(result->final_eval.logloss, 0.60);
  // About a tenth is held out, twice over two epochs is trained.
  EXPECT_NEAR(result->final_eval.examples, 3000, 300);
  EXPECT_EQ(result->train_examples, 2 * (30000 - result->final_eval.examples));
  ASSERT_EQ(result->history.size(), 2u);  // after epoch 1, and the end
  std::string json = TrainResultJson(*result, "lr", true, o);
  EXPECT_NE(json.find("\"eval_auc\": "), std::string::npos);
}

TEST_F(TrainerTest, WorkersAndHoldoutSplitTheLines) {
  std::string path =
      Generate("split.tsv", 2000, datagen::PlantedOptions::Kind::kLr);
  std::multiset<float> seen_labels_count;
  uint64_t total = 0;
  for (int part = 0; part < 4; ++part) {
    SourceOptions so;
    so.holdout_every = 10;
    so.num_workers = 3;
    so.worker_id = part < 3 ? part : 0;
    so.holdout = part == 3;
    auto source = ExampleSource::Open(path, so);
    ASSERT_TRUE(source.ok());
    data::ExampleBatch batch;
    ExampleSource::Scratch scratch;
    while (true) {
      auto got = (*source)->Next(128, &batch, &scratch);
      ASSERT_TRUE(got.ok());
      if (*got == 0) break;
    }
    total += batch.size();
    EXPECT_EQ((*source)->stats().examples, batch.size());
    if (part == 3) {
      EXPECT_NEAR(batch.size(), 200, 50);
    }
  }
  EXPECT_EQ(total, 2000u);  // every line exactly once
}

TEST_F(TrainerTest, MalformedLinesAreSkippedOrFatalWhenStrict) {
  std::string path =
      Generate("bad.tsv", 500, datagen::PlantedOptions::Kind::kLr);
  {
    std::ofstream out(path, std::ios::app);
    out << "1\tnot-a-number\n"
        << "garbage\n";
  }
  auto store = Store(kLrTables);
  auto model = MakeModel(ModelOptions{});
  TrainerOptions o;
  o.train_data = path;
  o.holdout_every = 0;
  o.eval_data = path;
  o.progress_secs = 0;
  auto result = Trainer::Create(o, model->get(), store.get())->Run();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->malformed_lines, 2u);
  ASSERT_EQ(result->first_malformed.size(), 2u);
  EXPECT_NE(result->first_malformed[0].find("line 501"), std::string::npos)
      << result->first_malformed[0];
  o.strict_data = true;
  auto strict = Trainer::Create(o, model->get(), store.get())->Run();
  EXPECT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("line 501"), std::string::npos);
}

TEST_F(TrainerTest, MissingFilesAndWrongTablesAreErrors) {
  auto store = Store(kLrTables);
  ModelOptions fm;
  fm.name = "fm";
  auto model = MakeModel(fm);
  TrainerOptions o;
  o.train_data = dir_ + "/none.tsv";
  EXPECT_FALSE(Trainer::Create(o, model->get(), store.get()).ok());  // dim 1
  auto lr = MakeModel(ModelOptions{});
  auto run = Trainer::Create(o, lr->get(), store.get())->Run();
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  o.sparse_table = "other";
  EXPECT_FALSE(Trainer::Create(o, lr->get(), store.get()).ok());
}

// A learning rate far too high: the first step's push makes the weights
// infinite, the second step's loss is NaN. Run must stop there with an error
// that says so and what to change, quickly (it used to train on NaN and
// then spin in Auc), and the parameters NaN left behind must not score as
// a model either.
TEST_F(TrainerTest, DivergingRunStopsWithAnErrorNamingTheTable) {
  ps::testing::Watchdog watchdog("a diverging Trainer::Run",
                                 std::chrono::seconds(20));
  std::string train =
      Generate("train.tsv", 3000, datagen::PlantedOptions::Kind::kLr);
  auto store = Store(R"(table { id: 1 name: "emb" kind: HASHED dim: 1
      capacity: 65536 optimizer { name: "sgd" learning_rate: 1e38 } })");
  auto model = MakeModel(ModelOptions{});
  ASSERT_TRUE(model.ok());
  TrainerOptions o;
  o.train_data = train;
  o.threads = 2;
  o.batch_size = 100;
  o.eval_every = 500;
  o.progress_secs = 0.05;  // the progress line's AUC runs too
  auto trainer = Trainer::Create(o, model->get(), store.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  auto result = trainer->Run();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = result.status().message();
  EXPECT_NE(m.find("training diverged at step "), std::string::npos) << m;
  EXPECT_NE(m.find("is nan"), std::string::npos) << m;
  EXPECT_NE(m.find("lower the learning rate of table emb (sgd, "
                   "learning_rate 1e+38)"),
            std::string::npos)
      << m;

  auto eval = trainer->Evaluate(1);
  ASSERT_FALSE(eval.ok());
  EXPECT_NE(eval.status().message().find("not finite"), std::string::npos)
      << eval.status().ToString();
}

}  // namespace
}  // namespace ps::train
