// The trainer with frequency admission, parameters in-process: the counts
// are taken in the first epoch only, and a run resumed from a checkpoint
// (whose counts are gone) re-counts the training data first, so that it
// maps its epoch exactly as the uninterrupted run mapped the same epoch;
// threads share the counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "protocol/table_config.h"
#include "worker/datagen/criteo_synth.h"
#include "worker/datagen/planted_model.h"
#include "worker/train/local_param_store.h"
#include "worker/train/trainer.h"

namespace ps::train {
namespace {

constexpr char kTables[] = R"(table { id: 1 name: "emb" kind: HASHED
    dim: 1 capacity: 65536 admit_after_examples: 3
    optimizer { name: "adagrad" learning_rate: 0.05 } })";

class TrainerAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/trainer_admission_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    datagen::PlantedOptions po;
    datagen::PlantedModel model(po);
    datagen::SynthOptions so;
    so.max_vocab = 3000;  // a tail of values seen once or twice
    datagen::CriteoSynth synth(so, &model);
    train_ = dir_ + "/train.tsv";
    std::ofstream out(train_);
    std::string line;
    double p;
    for (int i = 0; i < 3000; ++i) {
      synth.NextRow(&line, &p);
      out << line << "\n";
    }
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    (void)!std::system(cmd.c_str());
  }
  // A fresh store and trainer run over `epochs` (from `start_epoch`);
  // the admission counts it ends with.
  AdmissionCounts Train(uint32_t epochs, uint32_t start_epoch,
                        uint32_t threads = 1, uint64_t eval_every = 0) {
    auto config = protocol::ParseTableConfig(kTables);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    auto store = LocalParamStore::Create(*config);
    EXPECT_TRUE(store.ok());
    auto model = MakeModel(ModelOptions{});
    TrainerOptions o;
    o.train_data = train_;
    o.epochs = epochs;
    o.start_epoch = start_epoch;
    o.batch_size = 100;
    o.threads = threads;
    o.eval_every = eval_every;
    o.progress_secs = 0;
    auto trainer = Trainer::Create(o, model->get(), store->get());
    EXPECT_TRUE(trainer.ok()) << trainer.status().ToString();
    EXPECT_NE(trainer->admission(), nullptr);
    auto result = trainer->Run();
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_TRUE(trainer->admission()->frozen());
    return trainer->admission()->counts();
  }
  std::string dir_, train_;
};

TEST_F(TrainerAdmissionTest, ResumedRunMapsAsTheUninterruptedOne) {
  const AdmissionCounts one = Train(1, 0);
  const AdmissionCounts two = Train(2, 0);
  const AdmissionCounts resumed = Train(2, 1);  // epoch 2 only
  // The tail is there, and the second epoch counted nothing more.
  EXPECT_GT(one.occurrences_oov, 0u);
  EXPECT_GT(one.distinct_seen, one.distinct_admitted);
  EXPECT_EQ(two.distinct_seen, one.distinct_seen);
  EXPECT_EQ(two.distinct_admitted, one.distinct_admitted);
  // Epoch 2 maps with the complete counts: fewer OOV than epoch 1, whose
  // first occurrences of every value went to OOV.
  const uint64_t second_epoch_oov = two.occurrences_oov - one.occurrences_oov;
  EXPECT_LT(second_epoch_oov, one.occurrences_oov);
  // The resumed run counted the same and mapped its epoch the same.
  EXPECT_EQ(resumed.distinct_seen, one.distinct_seen);
  EXPECT_EQ(resumed.distinct_admitted, one.distinct_admitted);
  EXPECT_EQ(resumed.occurrences_oov, second_epoch_oov);
  EXPECT_EQ(resumed.occurrences_kept + resumed.occurrences_oov,
            one.occurrences_kept + one.occurrences_oov);
}

// Training threads count and map while the run's thread evaluates (every
// 500 examples) with the same sketch; TSan checks the sharing. Every
// occurrence is counted exactly once, whichever thread took it.
TEST_F(TrainerAdmissionTest, ThreadsShareTheCountsWithTheEvaluation) {
  const AdmissionCounts one = Train(1, 0);
  const AdmissionCounts threaded = Train(2, 0, 3, 500);
  EXPECT_EQ(threaded.occurrences_kept + threaded.occurrences_oov,
            2 * (one.occurrences_kept + one.occurrences_oov));
  EXPECT_EQ(threaded.distinct_seen, one.distinct_seen);
  EXPECT_EQ(threaded.distinct_admitted, one.distinct_admitted);
}

}  // namespace
}  // namespace ps::train
