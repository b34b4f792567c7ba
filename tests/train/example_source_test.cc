// ExampleSource's byte-range split: the workers' parts hold every line of
// the file exactly once, in order, for any number of workers; skip,
// consumed and rewind count within a part; auto picks byte ranges for a
// plain file and lines for gzip or a pipe; gzip, a pipe or a holdout with
// byte ranges, and an unknown split name, are errors; a malformed line is
// named with its part; a CSV file's header is read once and never taken for
// an example, in every split, after a rewind and from gzip.
#include "worker/train/example_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "worker/data/feature_hash.h"

namespace ps::train {
namespace {

class ExampleSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ps_example_source_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  // libsvm lines "1 1:<i> 2:1 2:1 ..." of varying length (i = the line's
  // index, read back as the first value), with empty and CRLF lines mixed
  // in and no "\n" after the last one.
  std::string WriteLines(int n, std::string* text_out = nullptr) {
    std::string text;
    for (int i = 0; i < n; ++i) {
      text += "1 1:" + std::to_string(i);
      for (int k = 0; k < (i * 7) % 11; ++k) text += " 2:1";
      if (i % 13 == 5) text += "\r";
      if (i + 1 < n) text += "\n";
      if (i % 17 == 3) text += "\n";  // an empty line
    }
    std::string path = dir_ + "/lines.libsvm";
    std::ofstream(path, std::ios::binary) << text;
    if (text_out != nullptr) *text_out = text;
    return path;
  }

  static SourceOptions Options(uint32_t worker, uint32_t workers,
                               DataSplit split = DataSplit::kByteRanges) {
    SourceOptions o;
    o.format = data::DataFormat::kLibsvm;
    o.worker_id = worker;
    o.num_workers = workers;
    o.split = split;
    return o;
  }

  // The line indices of every example `source` yields, in order.
  static std::vector<int> ReadIndices(ExampleSource& source,
                                      size_t batch_size = 7) {
    std::vector<int> indices;
    ExampleSource::Scratch scratch;
    for (;;) {
      data::ExampleBatch batch;
      auto got = source.Next(batch_size, &batch, &scratch);
      EXPECT_TRUE(got.ok()) << got.status().ToString();
      if (!got.ok() || *got == 0) break;
      for (size_t e = 0; e < batch.size(); ++e) {
        indices.push_back(static_cast<int>(batch.values[batch.offsets[e]]));
      }
    }
    return indices;
  }

  std::string dir_;
};

TEST_F(ExampleSourceTest, ByteRangesHoldEveryLineOnceForAnyWorkerCount) {
  const int kLines = 300;
  const std::string path = WriteLines(kLines);
  for (uint32_t workers = 1; workers <= 9; ++workers) {
    std::vector<int> all;
    for (uint32_t w = 0; w < workers; ++w) {
      auto source = ExampleSource::Open(path, Options(w, workers));
      ASSERT_TRUE(source.ok()) << source.status().ToString();
      EXPECT_EQ((*source)->split(), DataSplit::kByteRanges);
      std::vector<int> part = ReadIndices(**source);
      EXPECT_EQ((*source)->consumed(), part.size());
      EXPECT_DOUBLE_EQ((*source)->fraction_read(), 1.0);
      // Parts are about equal in bytes, so in lines here.
      EXPECT_NEAR(static_cast<double>(part.size()),
                  static_cast<double>(kLines) / workers, 12.0)
          << "worker " << w << " of " << workers;
      all.insert(all.end(), part.begin(), part.end());
    }
    ASSERT_EQ(all.size(), size_t{kLines}) << workers << " workers";
    for (int i = 0; i < kLines; ++i) EXPECT_EQ(all[i], i);
  }
}

TEST_F(ExampleSourceTest, MoreWorkersThanLinesLeavesSomePartsEmpty) {
  const std::string path = WriteLines(3);
  std::vector<int> all;
  for (uint32_t w = 0; w < 64; ++w) {
    auto source = ExampleSource::Open(path, Options(w, 64));
    ASSERT_TRUE(source.ok());
    std::vector<int> part = ReadIndices(**source);
    all.insert(all.end(), part.begin(), part.end());
  }
  EXPECT_EQ(all, (std::vector<int>{0, 1, 2}));
}

TEST_F(ExampleSourceTest, SkipConsumedAndRewindCountWithinThePart) {
  const std::string path = WriteLines(200);
  auto whole = ExampleSource::Open(path, Options(1, 3));
  ASSERT_TRUE(whole.ok());
  const std::vector<int> part = ReadIndices(**whole);
  ASSERT_GT(part.size(), 20u);

  auto source = ExampleSource::Open(path, Options(1, 3));
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->Skip(5).ok());
  EXPECT_EQ((*source)->consumed(), 5u);
  EXPECT_EQ(ReadIndices(**source),
            std::vector<int>(part.begin() + 5, part.end()));
  ASSERT_TRUE((*source)->Rewind().ok());
  EXPECT_EQ((*source)->consumed(), 0u);
  EXPECT_EQ(ReadIndices(**source, 1000), part);

  Status s = (*source)->Skip(part.size() + 1);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
}

TEST_F(ExampleSourceTest, AutoSplitsPlainFilesByBytesAndGzipByLines) {
  std::string text;
  const std::string plain = WriteLines(40, &text);
  auto source = ExampleSource::Open(plain, Options(0, 2, DataSplit::kAuto));
  ASSERT_TRUE(source.ok());
  EXPECT_EQ((*source)->split(), DataSplit::kByteRanges);

  const std::string gz_path = dir_ + "/lines.libsvm.gz";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  auto gz_source =
      ExampleSource::Open(gz_path, Options(1, 2, DataSplit::kAuto));
  ASSERT_TRUE(gz_source.ok()) << gz_source.status().ToString();
  EXPECT_EQ((*gz_source)->split(), DataSplit::kLines);
  // Every other line of the file, empty lines counted (and not examples).
  std::vector<int> odd_lines;
  size_t start = 0;
  for (int line = 0; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string body = text.substr(start, end - start);
    if (line % 2 == 1 && !body.empty()) {
      odd_lines.push_back(std::atoi(body.c_str() + 4));  // "1 1:<i>"
    }
    start = end + 1;
  }
  ASSERT_GT(odd_lines.size(), 15u);
  EXPECT_EQ(ReadIndices(**gz_source), odd_lines);

  auto refused = ExampleSource::Open(gz_path, Options(0, 2));
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("gzip"), std::string::npos)
      << refused.status().ToString();
}

TEST_F(ExampleSourceTest, APipeIsSplitByLinesOrRefusedForByteRanges) {
  std::string text;
  WriteLines(20, &text);
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // The refused open closes the read end, maybe before the writer wrote.
  signal(SIGPIPE, SIG_IGN);
  for (DataSplit split : {DataSplit::kAuto, DataSplit::kByteRanges}) {
    // A writer, as a shell's <(zcat ...) would be (the open blocks until
    // both ends are there).
    std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << text; });
    {
      auto source = ExampleSource::Open(fifo, Options(0, 1, split));
      if (split == DataSplit::kAuto) {
        EXPECT_TRUE(source.ok()) << source.status().ToString();
        if (source.ok()) {
          EXPECT_EQ((*source)->split(), DataSplit::kLines);
          EXPECT_EQ(ReadIndices(**source).size(), 20u);
        }
      } else {
        EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
        EXPECT_NE(source.status().message().find("pipe"), std::string::npos)
            << source.status().ToString();
      }
    }
    writer.join();
  }
}

TEST_F(ExampleSourceTest, ByteRangesRefuseAHoldout) {
  SourceOptions o = Options(0, 2);
  o.holdout_every = 10;
  auto source = ExampleSource::Open(WriteLines(10), o);
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument)
      << source.status().ToString();
}

TEST_F(ExampleSourceTest, SplitNames) {
  for (DataSplit split :
       {DataSplit::kLines, DataSplit::kByteRanges, DataSplit::kAuto}) {
    auto back = DataSplitFromName(DataSplitName(split));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, split);
  }
  auto bad = DataSplitFromName("halves");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("halves"), std::string::npos);
}

TEST_F(ExampleSourceTest, AMalformedLineIsNamedWithItsPart) {
  const std::string path = dir_ + "/bad.libsvm";
  std::ofstream(path, std::ios::binary) << "1 1:0\n1 1:1\n1 1:2\nnot-a-label\n";
  SourceOptions o = Options(1, 2);
  o.strict = true;
  auto source = ExampleSource::Open(path, o);
  ASSERT_TRUE(source.ok());
  data::ExampleBatch batch;
  ExampleSource::Scratch scratch;
  auto got = (*source)->Next(10, &batch, &scratch);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("line 1 of the part from byte 15"),
            std::string::npos)
      << got.status().ToString();
}

// A CSV log "id,click,row" of n rows (row = "r<i>"), CRLF line ends on
// some and an empty line in between.
std::string CsvText(int n) {
  std::string text = "id,click,row\r\n";
  for (int i = 0; i < n; ++i) {
    text.append(std::to_string(1000 + i)).append(i % 3 ? ",1,r" : ",0,r");
    text.append(std::to_string(i)).append(i % 5 == 2 ? "\r\n" : "\n");
    if (i == 7) text += "\n";
  }
  return text;
}

// The rows (i of "r<i>") of every example `source` yields.
std::vector<int> CsvRows(ExampleSource& source, int n) {
  std::map<uint64_t, int> row_of;
  for (int i = 0; i < n; ++i) {
    std::string row = "r";
    row_of[data::HashFeature(0, row.append(std::to_string(i)))] = i;
  }
  std::vector<int> rows;
  ExampleSource::Scratch scratch;
  for (;;) {
    data::ExampleBatch batch;
    auto got = source.Next(4, &batch, &scratch);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || *got == 0) break;
    for (uint64_t id : batch.ids) {
      auto it = row_of.find(id);
      rows.push_back(it == row_of.end() ? -1 : it->second);
    }
  }
  EXPECT_EQ(source.stats().malformed, 0u) << "the header was parsed";
  return rows;
}

TEST_F(ExampleSourceTest, ACsvHeaderIsReadOnceAndNeverAnExample) {
  constexpr int kRows = 40;
  const std::string text = CsvText(kRows);
  const std::string path = dir_ + "/log.csv";
  std::ofstream(path, std::ios::binary) << text;
  const std::string gz_path = dir_ + "/log.csv.gz";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);

  struct Case {
    std::string path;
    DataSplit split;
  };
  for (const Case& c :
       {Case{path, DataSplit::kByteRanges}, Case{path, DataSplit::kLines},
        Case{gz_path, DataSplit::kLines}}) {
    for (uint32_t workers : {1u, 2u, 3u}) {
      std::vector<int> all;
      for (uint32_t w = 0; w < workers; ++w) {
        SourceOptions o = Options(w, workers, c.split);
        o.format = data::DataFormat::kCsv;
        o.csv_spec = "label=click ignore=id";
        o.strict = true;
        auto source = ExampleSource::Open(c.path, o);
        ASSERT_TRUE(source.ok()) << source.status().ToString();
        ASSERT_NE((*source)->format().csv(), nullptr);
        EXPECT_EQ((*source)->format().csv()->field_names(),
                  std::vector<std::string>{"row"});
        std::vector<int> rows = CsvRows(**source, kRows);
        ASSERT_TRUE((*source)->Rewind().ok());
        EXPECT_EQ(CsvRows(**source, kRows), rows) << "after a rewind";
        all.insert(all.end(), rows.begin(), rows.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int> every(kRows);
      for (int i = 0; i < kRows; ++i) every[i] = i;
      EXPECT_EQ(all, every) << c.path << ", " << workers << " workers, "
                            << DataSplitName(c.split);
    }
  }
}

TEST_F(ExampleSourceTest, ACsvSpecThatDoesNotFitTheHeaderIsRefused) {
  const std::string path = dir_ + "/log.csv";
  std::ofstream(path, std::ios::binary) << CsvText(3);
  SourceOptions o = Options(0, 1);
  o.format = data::DataFormat::kCsv;
  o.csv_spec = "label=clicked";
  auto source = ExampleSource::Open(path, o);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(source.status().message().find(
                path + " line 1: csv spec label column 'clicked' is not in "
                       "the header (id, click, row)"),
            std::string::npos)
      << source.status().ToString();

  o.csv_spec = "";
  EXPECT_EQ(ExampleSource::Open(path, o).status().code(),
            StatusCode::kInvalidArgument);
  const std::string empty = dir_ + "/empty.csv";
  std::ofstream(empty, std::ios::binary) << "";
  o.csv_spec = "label=click";
  auto none = ExampleSource::Open(empty, o);
  EXPECT_NE(none.status().message().find("a csv file starts with a header"),
            std::string::npos)
      << none.status().ToString();
  o.format = data::DataFormat::kLibsvm;
  EXPECT_NE(ExampleSource::Open(path, o).status().message().find(
                "the data format is not csv"),
            std::string::npos);
}

}  // namespace
}  // namespace ps::train
