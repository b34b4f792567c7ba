// A full checkpoint written and restored onto the same layout gives back
// every row and every optimizer state value bit for bit, plus the step,
// worker positions and optimizer step counts.
#include <gtest/gtest.h>

#include "checkpoint/row_codec.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::Model;
using testing::TempDir;

TEST(CheckpointRoundTrip, FullWriteRestoreIsExact) {
  TempDir dir;
  Model model;
  auto m = testing::WriteCheckpoint(dir.path(), model, 100, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->step(), 100u);
  EXPECT_EQ(m->kind(), proto::FULL);
  ASSERT_EQ(m->shards_size(), 2);
  ASSERT_EQ(m->workers_size(), 1);
  EXPECT_EQ(m->workers(0).examples_consumed(), 10000u);
  // HASHED/DENSE rows are stored in runs (checkpoint/row_codec.h): one
  // entry per RowsPerRun rows of a shard; EXACT one entry per key.
  uint64_t entries = 0, want = model.exact_keys;
  for (uint32_t k = 0; k < 2; ++k) {
    const auto& s = m->shards(static_cast<int>(k));
    entries += s.entries();
    EXPECT_GT(s.bytes(), 0u);
    for (const auto& spec : model.Specs()) {
      if (spec.kind() == ps::proto::EXACT) continue;
      const uint64_t rows = protocol::ShardMap::ForTable(spec, 2).RowsOf(k);
      const uint64_t run =
          RowsPerRun(spec.dim(), Model::StateArrays(spec.id()));
      want += (rows + run - 1) / run;
    }
  }
  EXPECT_EQ(entries, want);

  for (uint32_t k = 0; k < 2; ++k) {
    auto t = model.MakeTarget(k, 2);
    auto r = RestoreLatest(dir.path(), {}, &t.target);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->manifest.step(), 100u);
    model.ExpectRestored(t.target);
    for (const auto& tt : t.target.tables) {
      EXPECT_EQ(tt.optimizer_steps, 1000u + 100 + k) << tt.spec.name();
    }
  }
  auto v = VerifyCheckpoint(JoinPath(dir.path(), CheckpointDirName(100)));
  EXPECT_TRUE(v.ok()) << v.status();
}

TEST(CheckpointRoundTrip, LatestIsTheHighestCompleteStep) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 5, 1).ok());
  model.version = [](uint32_t, uint64_t) { return 1u; };
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 12, 1).ok());
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->manifest.step(), 12u);
  model.ExpectRestored(t.target);
}

TEST(CheckpointRoundTrip, MismatchedTableIsRefusedWithItsName) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 1, 1).ok());
  Model other = model;
  other.hashed_dim = 16;
  auto t = other.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'emb'"), std::string::npos)
      << r.status();
}

TEST(CheckpointRoundTrip, EmptyRootIsNotFound) {
  TempDir dir;
  Model model;
  auto t = model.MakeTarget(0, 1);
  auto r = RestoreLatest(dir.path(), {}, &t.target);
  EXPECT_TRUE(r.status().Is(StatusCode::kNotFound)) << r.status();
}

}  // namespace
}  // namespace ps::checkpoint
