// Checkpoints written before the spec enums still restore: a checkpoint made
// by main at 84238ed (tests/checkpoint/data/main_84238ed, see its README) is
// verified, its string-only specs normalise to the enums and match the
// config it was written with, and its rows come back: the DENSE table (never
// pushed) holds exactly its initializer's values, the Adagrad table's
// untouched rows too, and its pushed rows carry accumulated state. And a
// checkpoint of an EXACT table made by main at b7db8c8 (data/main_b7db8c8),
// before the table interface, restores its keys, rows and Adagrad state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/restorer.h"
#include "protocol/spec_choices.h"
#include "protocol/table_config.h"
#include "protocol/table_runtime_config.h"
#include "table/initializer.h"

namespace ps::checkpoint {
namespace {

const std::string kData = PS_SOURCE_DIR "/tests/checkpoint/data/main_84238ed";
const std::string kExactData =
    PS_SOURCE_DIR "/tests/checkpoint/data/main_b7db8c8";

class CheckpointCompatTest : public ::testing::Test {
 protected:
  void SetUp() override { Copy(kData); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A copy of `data`'s checkpoint in a folder of this test: RocksDB may
  // touch files in the directory it opens.
  void Copy(const std::string& data) {
    const char* base = std::getenv("TEST_TMPDIR");
    dir_ = std::filesystem::path(base ? base : "/tmp") /
           ("ckpt_compat_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::filesystem::copy(data + "/ckpt-000000000001",
                          dir_ / "ckpt-000000000001",
                          std::filesystem::copy_options::recursive);
    path_ = (dir_ / "ckpt-000000000001").string();
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(CheckpointCompatTest, OldManifestSpecsNormaliseToTheConfigs) {
  auto manifest = VerifyCheckpoint(path_);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  auto config = protocol::LoadTableConfig(kData + "/compat.tables");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(manifest->tables_size(), 2);
  for (int i = 0; i < 2; ++i) {
    ps::proto::TableSpec saved = manifest->tables(i);
    // Written before the enums: strings only.
    EXPECT_EQ(saved.optimizer().kind(), ps::proto::OPTIMIZER_UNSET);
    ASSERT_TRUE(protocol::NormalizeTableSpec(&saved).ok());
    EXPECT_EQ(saved.SerializeAsString(), config->table(i).SerializeAsString())
        << saved.DebugString() << " vs " << config->table(i).DebugString();
  }
  const ps::proto::TableSpec& emb = manifest->tables(0);
  auto rt = protocol::TableRuntimeConfig::FromSpec(emb);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->optimizer_kind, ps::proto::OPTIMIZER_ADAGRAD);
  EXPECT_EQ(rt->sparsify, ps::proto::SPARSIFY_THRESHOLD);
  EXPECT_EQ(rt->initializer, ps::proto::INITIALIZER_UNIFORM);
  auto bias = protocol::TableRuntimeConfig::FromSpec(manifest->tables(1));
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_EQ(bias->optimizer_kind, ps::proto::OPTIMIZER_SUM);
  EXPECT_EQ(bias->initializer, ps::proto::INITIALIZER_NORMAL);
}

TEST_F(CheckpointCompatTest, RowsAndStateRestore) {
  auto config = protocol::LoadTableConfig(kData + "/compat.tables");
  ASSERT_TRUE(config.ok()) << config.status();
  const ps::proto::TableSpec& emb = config->table(0);
  const ps::proto::TableSpec& bias = config->table(1);
  std::vector<float> emb_rows(emb.capacity() * emb.dim());
  std::vector<float> emb_acc(emb.capacity() * emb.dim());
  std::vector<float> bias_rows(bias.capacity() * bias.dim());
  RestoreTarget target;
  TableTarget e;
  e.spec = emb;
  e.state_arrays = 1;  // Adagrad's accumulators
  e.rows = emb.capacity();
  e.values = emb_rows.data();
  e.state[0] = emb_acc.data();
  target.tables.push_back(std::move(e));
  TableTarget b;
  b.spec = bias;
  b.rows = bias.capacity();
  b.values = bias_rows.data();
  target.tables.push_back(std::move(b));
  auto result = RestoreShard(path_, &target);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->manifest.step(), 1u);
  EXPECT_EQ(target.tables[0].rows_restored, emb.capacity());
  EXPECT_EQ(target.tables[1].rows_restored, bias.capacity());
  EXPECT_EQ(target.tables[0].optimizer_steps, 3u);  // three pushes

  std::vector<float> want(bias.capacity() * bias.dim());
  table::InitializeRows(bias.initializer(), 0, bias.capacity(), bias.dim(),
                        want.data());
  EXPECT_EQ(bias_rows, want);  // never pushed: its initial values, exactly

  const uint32_t dim = emb.dim();
  int pushed = 0, untouched = 0;
  for (uint64_t r = 0; r < emb.capacity(); ++r) {
    std::vector<float> init(dim);
    table::InitializeRow(emb.initializer(), r, init);
    bool touched = false;
    for (uint32_t c = 0; c < dim; ++c) {
      const float acc = emb_acc[r * dim + c];
      ASSERT_TRUE(std::isfinite(acc) && acc >= 0.1f) << r << " " << acc;
      touched |= acc > 0.1f;
    }
    if (touched) {
      ++pushed;
    } else {
      ++untouched;
      for (uint32_t c = 0; c < dim; ++c) {
        EXPECT_EQ(emb_rows[r * dim + c], init[c]) << "row " << r;
      }
    }
  }
  EXPECT_GT(pushed, 0);
  EXPECT_GT(untouched, 0);
}

TEST_F(CheckpointCompatTest, ExactTableKeysRowsAndStateRestore) {
  std::filesystem::remove_all(dir_);
  Copy(kExactData);
  auto manifest = VerifyCheckpoint(path_);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  auto config = protocol::LoadTableConfig(kExactData + "/compat.tables");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(manifest->tables_size(), 1);
  const ps::proto::TableSpec& ids = config->table(0);
  ASSERT_EQ(ids.kind(), ps::proto::EXACT);

  RestoreTarget target;
  TableTarget t;
  t.spec = ids;
  t.state_arrays = 1;  // Adagrad's accumulators
  target.tables.push_back(std::move(t));
  auto result = RestoreShard(path_, &target);
  ASSERT_TRUE(result.ok()) << result.status();
  const TableTarget& got = target.tables[0];
  EXPECT_EQ(got.optimizer_steps, 3u);  // three pushes
  const TableSnapshot& rows = got.exact;
  ASSERT_EQ(rows.ids.size(), 53u);  // the README's count
  EXPECT_EQ(got.rows_restored, 53u);
  ASSERT_EQ(rows.values.size(), 53u * ids.dim());
  ASSERT_EQ(rows.state[0].size(), 53u * ids.dim());
  EXPECT_TRUE(std::is_sorted(rows.ids.begin(), rows.ids.end()));
  for (uint64_t key : rows.ids) EXPECT_LT(key, 200u);  // --key_space
  // Every key was pushed (admitted at its first push), so each carries
  // Adagrad state above the initial accumulator, and finite values.
  for (size_t i = 0; i < rows.values.size(); ++i) {
    EXPECT_TRUE(std::isfinite(rows.values[i])) << i;
    EXPECT_GT(rows.state[0][i], 0.1f) << i;
  }
}

}  // namespace
}  // namespace ps::checkpoint
