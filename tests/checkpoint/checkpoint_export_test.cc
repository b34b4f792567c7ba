// ExportCheckpoint: a checkpoint's tables as .npy files. The files are read
// back here by a parser of the .npy format written from NumPy's
// specification (not from our writer), and checked bit for bit against the
// model (full checkpoints) and against what a restore of the same chain
// gives (incremental chains with changed rows, EXACT tombstones and new
// keys). tests/python/test_export.py reads them with NumPy itself. Bad
// input: an unknown table, a folder that is not empty, a damaged
// checkpoint and a write that fails are clear errors that leave no file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "checkpoint/committer.h"
#include "checkpoint/exporter.h"
#include "checkpoint/shard_writer.h"
#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::kDense;
using testing::kExact;
using testing::kHashed;
using testing::Model;
using testing::TempDir;

// An .npy file as NumPy's format 1.0 defines it: "\x93NUMPY", major, minor,
// u16 LE header length, a Python dict literal ending in '\n', the data; the
// whole header a multiple of 16 bytes.
struct Npy {
  std::string descr;
  std::vector<uint64_t> shape;
  std::string data;
};

Npy ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string all = ss.str();
  Npy n;
  EXPECT_GE(all.size(), 10u) << path;
  if (all.size() < 10) return n;
  EXPECT_EQ(all.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << path;
  const size_t len = static_cast<uint8_t>(all[8]) |
                     (static_cast<size_t>(static_cast<uint8_t>(all[9])) << 8);
  EXPECT_EQ((10 + len) % 16, 0u) << path;
  const std::string header = all.substr(10, len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  const size_t d = header.find("'descr': '") + 10;
  n.descr = header.substr(d, header.find('\'', d) - d);
  const size_t s = header.find("'shape': (") + 10;
  std::stringstream shape(header.substr(s, header.find(')', s) - s));
  for (std::string dim; std::getline(shape, dim, ',');) {
    if (dim.find_first_not_of(' ') != std::string::npos) {
      n.shape.push_back(std::stoull(dim));
    }
  }
  n.data = all.substr(10 + len);
  return n;
}

// The rows of a float32 [rows, dim] file.
std::vector<float> Floats(const Npy& n) {
  std::vector<float> v(n.data.size() / 4);
  std::memcpy(v.data(), n.data.data(), v.size() * 4);
  return v;
}

std::vector<uint64_t> Keys(const Npy& n) {
  std::vector<uint64_t> v(n.data.size() / 8);
  std::memcpy(v.data(), n.data.data(), v.size() * 8);
  return v;
}

ExportOptions Into(std::string out, std::vector<std::string> tables = {},
                   int readers = 0) {
  ExportOptions o;
  o.out_dir = std::move(out);
  o.tables = std::move(tables);
  o.readers = readers;
  return o;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// An EXACT table's export as key -> row.
std::map<uint64_t, std::vector<float>> ExactRows(const std::string& out,
                                                 const std::string& stem,
                                                 uint32_t dim) {
  const Npy keys = ReadNpy(out + "/" + stem + ".keys.npy");
  const Npy rows = ReadNpy(out + "/" + stem + ".rows.npy");
  EXPECT_EQ(keys.descr, "<u8");
  EXPECT_EQ(rows.descr, "<f4");
  EXPECT_EQ(keys.shape.size(), 1u);
  EXPECT_EQ(rows.shape, (std::vector<uint64_t>{keys.shape[0], dim}));
  const auto k = Keys(keys);
  const auto v = Floats(rows);
  std::map<uint64_t, std::vector<float>> m;
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_TRUE(m.emplace(k[i], std::vector<float>(v.begin() + i * dim,
                                                   v.begin() + (i + 1) * dim))
                    .second)
        << "key " << k[i] << " twice";
  }
  return m;
}

TEST(CheckpointExport, FullCheckpointOfEveryKindIsExactAndReadable) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 100, 2).ok());
  const std::string out = dir.path() + "/export";
  auto r = ExportCheckpoint(JoinPath(dir.path(), CheckpointDirName(100)),
                            Into(out, {}, 2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{
                              "emb.rows.npy", "ids.keys.npy", "ids.rows.npy",
                              "mlp.rows.npy", "tables.json"}));
  ASSERT_EQ(r->tables.size(), 3u);
  uint64_t bytes = 0;
  for (const auto& f : FilesIn(out)) {
    if (f != "tables.json") bytes += std::filesystem::file_size(out + "/" + f);
  }
  EXPECT_EQ(r->bytes_written, bytes);

  // HASHED and DENSE: every global row in row order.
  for (uint32_t table : {kHashed, kDense}) {
    const ps::proto::TableSpec spec = model.Specs()[table - 1];
    const Npy n = ReadNpy(out + "/" + spec.name() + ".rows.npy");
    EXPECT_EQ(n.descr, "<f4");
    ASSERT_EQ(n.shape, (std::vector<uint64_t>{spec.capacity(), spec.dim()}));
    const auto v = Floats(n);
    for (uint64_t row = 0; row < spec.capacity(); ++row) {
      for (uint32_t j = 0; j < spec.dim(); ++j) {
        ASSERT_TRUE(
            SameBits(v[row * spec.dim() + j], model.Value(table, row, j, -1)))
            << spec.name() << " row " << row;
      }
    }
  }
  // EXACT: every key once, with its row; ascending within each shard.
  const Npy keys_file = ReadNpy(out + "/ids.keys.npy");
  const auto keys = Keys(keys_file);
  ASSERT_EQ(keys.size(), model.exact_keys);
  const auto map = protocol::ShardMap::ForTable(model.Specs()[2], 2);
  for (size_t i = 1; i < keys.size(); ++i) {
    const uint32_t a = map.ShardOfKey(keys[i - 1]), b = map.ShardOfKey(keys[i]);
    EXPECT_TRUE(a < b || (a == b && keys[i - 1] < keys[i])) << i;
  }
  const auto rows = ExactRows(out, "ids", model.exact_dim);
  for (uint32_t i = 0; i < model.exact_keys; ++i) {
    const uint64_t key = model.ExactKey(i);
    ASSERT_EQ(rows.count(key), 1u) << key;
    for (uint32_t j = 0; j < model.exact_dim; ++j) {
      ASSERT_TRUE(SameBits(rows.at(key)[j], model.Value(kExact, key, j, -1)));
    }
  }

  // The index names the files and how a HASHED id finds its row.
  const std::string json = ReadText(out + "/tables.json");
  for (const char* want :
       {"\"format\": \"ps-export-1\"", "\"step\": 100",
        "\"rows_file\": "
        "\"emb.rows.npy\"",
        "\"keys_file\": \"ids.keys.npy\"",
        "\"name\": \"splitmix64\", \"seed\": 1, \"capacity\": 20011",
        "\"kind\": \"DENSE\"", "\"rows\": 3000"}) {
    EXPECT_NE(json.find(want), std::string::npos) << want << " in " << json;
  }
}

// A chain of three: full, 1% of the rows changed, then an increment where
// an EXACT key lost its row, one changed and a new one appeared. The export
// equals a restore of the chain onto one shard.
TEST(CheckpointExport, IncrementalChainEqualsItsRestore) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 1, 2).ok());
  auto is_changed = [](uint32_t, uint64_t id) {
    return protocol::Mix64(id) % 100 == 0;
  };
  model.version = [is_changed](uint32_t t, uint64_t id) {
    return is_changed(t, id) ? 1u : 0u;
  };
  std::function<bool(uint32_t, uint64_t)> changed = is_changed;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 2, 2,
                                       CheckpointDirName(1), &changed)
                  .ok());
  const std::string c3 = JoinPath(dir.path(), CheckpointDirName(3));
  const uint64_t gone = model.ExactKey(0), updated = model.ExactKey(1),
                 added = 12345;
  const auto map = protocol::ShardMap::ForTable(model.Specs()[2], 2);
  for (uint32_t k = 0; k < 2; ++k) {
    ShardSnapshot snap;
    snap.step = 3;
    snap.shard_id = k;
    snap.num_shards = 2;
    TableSnapshot t;
    t.spec = model.Specs()[2];
    t.full = false;
    t.state_arrays = 1;
    for (uint64_t key : std::min(updated, added) == updated
                            ? std::vector<uint64_t>{updated, added}
                            : std::vector<uint64_t>{added, updated}) {
      if (map.ShardOfKey(key) != k) continue;
      t.ids.push_back(key);
      t.values.insert(t.values.end(), 4, static_cast<float>(key % 97));
      t.state[0].insert(t.state[0].end(), 4, 1.0f);
      t.last_update.push_back(3);
    }
    if (map.ShardOfKey(gone) == k) t.deleted = {gone};
    snap.tables.push_back(t);
    ShardWriteOptions o;
    o.kind = proto::INCREMENTAL;
    o.parent = CheckpointDirName(2);
    ASSERT_TRUE(WriteShard(c3, snap, o).ok());
  }
  CommitRequest c;
  c.checkpoint_dir = c3;
  c.step = 3;
  c.num_shards = 2;
  c.tables = model.Specs();
  ASSERT_TRUE(CommitCheckpoint(c).ok());

  const std::string out = dir.path() + "/export";
  auto r = ExportCheckpoint(c3, Into(out));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chain.size(), 3u);

  auto restored = model.MakeTarget(0, 1);
  ASSERT_TRUE(RestoreShard(c3, &restored.target).ok());
  for (const TableTarget& t : restored.target.tables) {
    SCOPED_TRACE(t.spec.name());
    if (t.spec.kind() == ps::proto::EXACT) {
      const auto rows = ExactRows(out, t.spec.name(), t.spec.dim());
      ASSERT_EQ(rows.size(), t.exact.ids.size());
      EXPECT_EQ(rows.count(gone), 0u);
      EXPECT_EQ(rows.count(added), 1u);
      for (size_t i = 0; i < t.exact.ids.size(); ++i) {
        const auto& row = rows.at(t.exact.ids[i]);
        for (uint32_t j = 0; j < t.spec.dim(); ++j) {
          ASSERT_TRUE(SameBits(row[j], t.exact.values[i * t.spec.dim() + j]));
        }
      }
      EXPECT_EQ(rows.at(updated)[0], static_cast<float>(updated % 97));
      continue;
    }
    const auto v = Floats(ReadNpy(out + "/" + t.spec.name() + ".rows.npy"));
    ASSERT_EQ(v.size(), t.rows * t.spec.dim());
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_TRUE(SameBits(v[i], t.values[i])) << "float " << i;
    }
  }
}

TEST(CheckpointExport, ChosenTablesOnly) {
  TempDir dir;
  Model model;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), model, 5, 1).ok());
  const std::string out = dir.path() + "/export";
  auto r = ExportCheckpoint(JoinPath(dir.path(), CheckpointDirName(5)),
                            Into(out, {"ids"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{
                              "ids.keys.npy", "ids.rows.npy", "tables.json"}));
}

class CheckpointExportRefuses : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteCheckpoint(dir_.path(), model_, 7, 2).ok());
  }
  std::string Ckpt() const {
    return JoinPath(dir_.path(), CheckpointDirName(7));
  }
  // The export fails with `code` and a message naming `what`; the output
  // folder is left as it was (`before`).
  void ExpectRefused(const ExportOptions& o, StatusCode code,
                     const std::string& what,
                     const std::vector<std::string>& before = {}) {
    auto r = ExportCheckpoint(Ckpt(), o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status();
    if (std::filesystem::exists(o.out_dir)) {
      EXPECT_EQ(FilesIn(o.out_dir), before);
    }
  }
  TempDir dir_;
  Model model_;
};

TEST_F(CheckpointExportRefuses, UnknownTableNamingThoseItHas) {
  ExpectRefused(Into(dir_.path() + "/out", {"nope"}),
                StatusCode::kInvalidArgument, "no table 'nope' (it has: emb");
}

TEST_F(CheckpointExportRefuses, FolderThatIsNotEmpty) {
  const std::string out = dir_.path() + "/out";
  std::filesystem::create_directories(out);
  std::ofstream(out + "/mine.txt") << "keep me";
  ExpectRefused(Into(out), StatusCode::kInvalidArgument, "not empty",
                {"mine.txt"});
  EXPECT_EQ(ReadText(out + "/mine.txt"), "keep me");
}

TEST_F(CheckpointExportRefuses, MissingCheckpoint) {
  auto r = ExportCheckpoint(dir_.path() + "/ckpt-000000000999",
                            Into(dir_.path() + "/out"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();
}

TEST_F(CheckpointExportRefuses, DamagedShardLeavesNoFile) {
  // Shard 1's largest data file loses its middle: the scan's block
  // checksums catch it after shard 0's rows were written.
  std::string sst;
  for (const auto& e :
       std::filesystem::directory_iterator(JoinPath(Ckpt(), ShardDirName(1)))) {
    if (e.path().extension() == ".sst" &&
        (sst.empty() || e.file_size() > std::filesystem::file_size(sst))) {
      sst = e.path().string();
    }
  }
  ASSERT_FALSE(sst.empty());
  std::filesystem::resize_file(sst, std::filesystem::file_size(sst) / 2);
  ExpectRefused(Into(dir_.path() + "/out"), StatusCode::kCorruption, "shard 1");
}

TEST_F(CheckpointExportRefuses, WriteThatFailsLeavesNoFile) {
  // Files may not grow past 64 KiB (as a full disk, a write fails; the
  // signal that would kill the process ignored): the HASHED rows (640 KB)
  // cannot be written.
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old), 0);
  rlimit limit = {}, saved = {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  limit.rlim_cur = 64 << 10;
  limit.rlim_max = saved.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  auto r = ExportCheckpoint(Ckpt(), Into(dir_.path() + "/out"));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  sigaction(SIGXFSZ, &old, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError) << r.status();
  EXPECT_NE(r.status().message().find("emb.rows.npy"), std::string::npos)
      << r.status();
  EXPECT_EQ(FilesIn(dir_.path() + "/out"), std::vector<std::string>{});
}

}  // namespace
}  // namespace ps::checkpoint
