#include "worker/data/example_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace ps::data {
namespace {

class ExampleReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ps_reader_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string Write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string dir_;
};

std::string Line(int label, int seed) {
  // Appends, not operator+ on temporaries: GCC 12 at -O3 reports a false
  // -Wstringop-overflow inside the inlined concatenation.
  std::string line = std::to_string(label);
  for (int i = 0; i < 13; ++i)
    line.append("\t").append(std::to_string(seed + i));
  for (int i = 0; i < 26; ++i) {
    line.append("\tc").append(std::to_string(seed * 31 + i));
  }
  return line;
}

TEST_F(ExampleReaderTest, StreamsInBatchesAndSkipsMalformedLines) {
  std::string content = Line(1, 1) + "\n" + Line(0, 2) + "\nnot a line\n\n" +
                        Line(1, 3) + "\n1\t2\n" + Line(0, 4);  // no final \n
  auto reader = ExampleReader::Open(Write("d.tsv", content), {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExampleBatch b;
  auto n = (*reader)->Read(3, &b);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  n = (*reader)->Read(10, &b);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  n = (*reader)->Read(10, &b);
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(b.labels, (std::vector<float>{1, 0, 1, 0}));
  const ReaderStats& st = (*reader)->stats();
  EXPECT_EQ(st.examples, 4u);
  EXPECT_EQ(st.malformed, 2u);
  ASSERT_EQ(st.first_malformed.size(), 2u);
  EXPECT_NE(st.first_malformed[0].find("line 3"), std::string::npos)
      << st.first_malformed[0];
  EXPECT_NE(st.first_malformed[1].find("line 6"), std::string::npos)
      << st.first_malformed[1];
}

TEST_F(ExampleReaderTest, StrictModeFailsOnTheFirstMalformedLine) {
  ReaderOptions strict;
  strict.strict = true;
  auto reader = ExampleReader::Open(
      Write("d.tsv", Line(1, 1) + "\nbroken\n" + Line(0, 2) + "\n"), strict);
  ASSERT_TRUE(reader.ok());
  ExampleBatch b;
  auto n = (*reader)->Read(10, &b);
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(n.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(n.status().message().find("line 2"), std::string::npos);
}

TEST_F(ExampleReaderTest, CrlfLinesParseLikeLf) {
  auto lf = ExampleReader::Open(Write("lf.tsv", Line(1, 5) + "\n"), {});
  auto crlf = ExampleReader::Open(Write("crlf.tsv", Line(1, 5) + "\r\n"), {});
  ASSERT_TRUE(lf.ok() && crlf.ok());
  ExampleBatch a, b;
  ASSERT_EQ(*(*lf)->Read(10, &a), 1u);
  ASSERT_EQ(*(*crlf)->Read(10, &b), 1u);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ((*crlf)->stats().malformed, 0u);
}

TEST_F(ExampleReaderTest, ReadsGzipCompressedFiles) {
  std::string path = dir_ + "/d.tsv.gz";
  std::string content = Line(1, 1) + "\n" + Line(0, 2) + "\n";
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  gzwrite(gz, content.data(), static_cast<unsigned>(content.size()));
  gzclose(gz);
  auto reader = ExampleReader::Open(path, {});
  ASSERT_TRUE(reader.ok());
  ExampleBatch b;
  EXPECT_EQ(*(*reader)->Read(10, &b), 2u);
  EXPECT_EQ(b.ids.size(), 78u);
}

TEST_F(ExampleReaderTest, SkipResumesInsideTheFile) {
  auto reader = ExampleReader::Open(
      Write("d.tsv", Line(1, 1) + "\n" + Line(0, 2) + "\n" + Line(1, 3) + "\n"),
      {});
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Skip(2).ok());
  ExampleBatch b;
  EXPECT_EQ(*(*reader)->Read(10, &b), 1u);
  EXPECT_EQ(b.labels[0], 1.0f);
}

TEST_F(ExampleReaderTest, MissingOrUnreadableFilesAreClearErrors) {
  auto missing = ExampleReader::Open(dir_ + "/nope.tsv", {});
  EXPECT_TRUE(missing.status().Is(StatusCode::kNotFound));
  EXPECT_NE(missing.status().message().find("nope.tsv"), std::string::npos);
  auto dir = ExampleReader::Open(dir_, {});
  EXPECT_FALSE(dir.ok());
  // A truncated gzip stream is an I/O error, not silent success.
  std::string content;
  for (int i = 0; i < 200; ++i) content += Line(i % 2, i) + "\n";
  std::string gz_path = dir_ + "/t.gz";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  gzwrite(gz, content.data(), static_cast<unsigned>(content.size()));
  gzclose(gz);
  std::ifstream in(gz_path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string cut = Write("cut.gz", bytes.substr(0, bytes.size() / 2));
  auto reader = ExampleReader::Open(cut, {});
  ASSERT_TRUE(reader.ok());
  ExampleBatch b;
  StatusOr<size_t> n = size_t{0};
  do {
    n = (*reader)->Read(1000, &b);
  } while (n.ok() && *n > 0);
  EXPECT_TRUE(n.status().Is(StatusCode::kIOError)) << n.status();
}

TEST_F(ExampleReaderTest, ACsvFileIsReadByItsHeader) {
  ReaderOptions csv;
  csv.format = DataFormat::kCsv;
  csv.csv_spec = "label=y sep=;";
  auto reader = ExampleReader::Open(
      Write("d.csv", "y;colour\n1;red\n0;blue\n2;red\n"), csv);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->format().csv()->field_names(),
            std::vector<std::string>{"colour"});
  ExampleBatch b;
  auto n = (*reader)->Read(10, &b);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(b.labels, (std::vector<float>{1, 0}));
  const ReaderStats& st = (*reader)->stats();
  EXPECT_EQ(st.malformed, 1u);
  ASSERT_EQ(st.first_malformed.size(), 1u);
  EXPECT_NE(st.first_malformed[0].find(
                "d.csv line 4: label y '2' is not 0/1 or -1/+1"),
            std::string::npos)
      << st.first_malformed[0];
}

}  // namespace
}  // namespace ps::data
