// The trainer's side of checkpoints, in-process (LocalParamStore): the data
// position recorded at a checkpoint is exact even with several training
// threads (no batch in flight at the cut), and a run resumed from it trains
// on exactly the remaining lines, numbering its steps on from the restored
// one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "protocol/table_config.h"
#include "worker/train/example_source.h"
#include "worker/train/local_param_store.h"
#include "worker/train/trainer.h"

namespace ps::train {
namespace {

constexpr char kTables[] = R"(table { id: 1 name: "emb" kind: HASHED
    dim: 1 capacity: 4096 optimizer { name: "adagrad" learning_rate: 0.05 }
    })";
constexpr uint32_t kLines = 2500, kBatch = 100, kEvery = 4;
constexpr uint64_t kStepsPerEpoch = kLines / kBatch;

struct Cut {
  uint64_t step;
  uint32_t epoch;
  uint64_t consumed;
};

class ResumePositionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/ckpt_resume.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    // libsvm lines whose label follows feature 1's presence.
    for (const char* name : {"train.svm", "eval.svm"}) {
      std::ofstream out(dir_ + "/" + name);
      for (uint32_t i = 0; i < kLines; ++i) {
        const bool positive = (i * 2654435761u) % 7 < 3;
        out << (positive ? 1 : 0) << " " << (positive ? 1 : 2) << ":1 "
            << 10 + i % 50 << ":1\n";
      }
    }
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    (void)!std::system(cmd.c_str());
  }

  // Trains 2 epochs with `threads` threads and a checkpoint every kEvery
  // steps, starting as `start` says; returns the cuts seen.
  std::vector<Cut> Train(uint32_t threads, Cut start, TrainResult* result) {
    auto store =
        LocalParamStore::Create(protocol::ParseTableConfig(kTables).value())
            .value();
    auto model = MakeModel(ModelOptions{}).value();
    TrainerOptions o;
    o.train_data = dir_ + "/train.svm";
    o.eval_data = dir_ + "/eval.svm";
    o.format = data::DataFormat::kLibsvm;
    o.threads = threads;
    o.epochs = 2;
    o.batch_size = kBatch;
    o.progress_secs = 0;
    o.start_step = start.step;
    o.start_epoch = start.epoch;
    o.start_consumed = start.consumed;
    std::mutex mu;
    std::vector<Cut> cuts;
    o.checkpoint_due = [](uint64_t step) -> StatusOr<bool> {
      return step % kEvery == 0;
    };
    o.checkpoint = [&](uint64_t step, uint32_t epoch, uint64_t consumed) {
      std::lock_guard<std::mutex> lock(mu);
      cuts.push_back({step, epoch, consumed});
      return Status::OK();
    };
    auto trainer = Trainer::Create(o, model.get(), store.get()).value();
    auto r = trainer.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) *result = *r;
    return cuts;
  }
  std::string dir_;
};

TEST_F(ResumePositionTest, PositionAtEachCutIsExactWithThreads) {
  for (uint32_t threads : {1u, 3u}) {
    TrainResult r;
    std::vector<Cut> cuts = Train(threads, {0, 0, 0}, &r);
    ASSERT_EQ(cuts.size(), 2 * kStepsPerEpoch / kEvery) << threads;
    for (size_t i = 0; i < cuts.size(); ++i) {
      const uint64_t step = (i + 1) * kEvery;
      EXPECT_EQ(cuts[i].step, step);
      // Every batch is full, so the lines consumed follow from the step.
      EXPECT_EQ(cuts[i].epoch, (step - 1) / kStepsPerEpoch);
      EXPECT_EQ(cuts[i].consumed, ((step - 1) % kStepsPerEpoch + 1) * kBatch)
          << "threads " << threads << " step " << step;
    }
    EXPECT_EQ(r.train_examples, 2u * kLines);
  }
}

TEST_F(ResumePositionTest, ResumedRunTrainsExactlyTheRest) {
  // Mid-epoch 0, and at the very end of epoch 0 (all of it consumed).
  for (Cut start : {Cut{12, 0, 1200}, Cut{25, 0, 2500}}) {
    TrainResult r;
    std::vector<Cut> cuts = Train(2, start, &r);
    EXPECT_EQ(r.train_examples, 2u * kLines - start.consumed);
    ASSERT_FALSE(cuts.empty());
    const uint64_t first = (start.step / kEvery + 1) * kEvery;
    EXPECT_EQ(cuts.front().step, first);
    EXPECT_EQ(cuts.front().epoch, (first - 1) / kStepsPerEpoch);
    EXPECT_EQ(cuts.front().consumed,
              ((first - 1) % kStepsPerEpoch + 1) * kBatch);
    EXPECT_EQ(cuts.back().step, 2 * kStepsPerEpoch / kEvery * kEvery);
  }
}

TEST_F(ResumePositionTest, SkipPastTheEndIsAnError) {
  SourceOptions so;
  auto source = ExampleSource::Open(dir_ + "/train.svm", so).value();
  EXPECT_TRUE(source->Skip(kLines).ok());
  EXPECT_EQ(source->consumed(), kLines);
  ASSERT_TRUE(source->Rewind().ok());
  Status s = source->Skip(kLines + 1);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s;
}

}  // namespace
}  // namespace ps::train
