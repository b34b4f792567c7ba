// LineReader: lines across its 1 MiB blocks, a line longer than a block, the
// last line without "\n", empty and CRLF lines, SkipLine and offset(),
// StartAt at every byte of a file (and refused for gzip and a pipe), gzip,
// a pipe, and a truncated gzip file as an error (not as the end of the
// data).
#include "worker/data/line_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ps::data {
namespace {

class LineReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ps_line_reader_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string Write(const std::string& content) {
    std::string path = dir_ + "/plain.txt";
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string WriteGzip(const std::string& content) {
    std::string path = dir_ + "/data.gz";
    gzFile gz = gzopen(path.c_str(), "wb");
    gzwrite(gz, content.data(), static_cast<unsigned>(content.size()));
    gzclose(gz);
    return path;
  }
  std::vector<std::string> ReadAll(const std::string& path) {
    auto r = LineReader::Open(path);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> lines;
    std::string line;
    while ((*r)->Next(&line)) lines.push_back(line);
    EXPECT_TRUE((*r)->status().ok()) << (*r)->status().ToString();
    EXPECT_EQ((*r)->line_number(), lines.size());
    return lines;
  }
  std::string dir_;
};

// Lines of varying length whose total spans several 1 MiB blocks.
std::string ManyLines(int n, std::vector<std::string>* lines) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    std::string line = std::to_string(i) + std::string(i % 300, 'x');
    lines->push_back(line);
    text += line + "\n";
  }
  return text;
}

TEST_F(LineReaderTest, LinesAcrossBlocksComeBackWhole) {
  std::vector<std::string> want;
  std::string text = ManyLines(20000, &want);
  ASSERT_GT(text.size(), size_t{2} << 20);
  EXPECT_EQ(ReadAll(Write(text)), want);
  EXPECT_EQ(ReadAll(WriteGzip(text)), want);
}

TEST_F(LineReaderTest, ALineLongerThanABlock) {
  std::string huge(3 << 20, 'y');
  EXPECT_EQ(ReadAll(Write("a\n" + huge + "\nb\n")),
            (std::vector<std::string>{"a", huge, "b"}));
}

TEST_F(LineReaderTest, EmptyCrlfAndUnterminatedLines) {
  EXPECT_EQ(ReadAll(Write("a\r\n\nb\r\n\r\nlast")),
            (std::vector<std::string>{"a", "", "b", "", "last"}));
  EXPECT_TRUE(ReadAll(Write("")).empty());
  EXPECT_EQ(ReadAll(Write("\n")), (std::vector<std::string>{""}));
}

TEST_F(LineReaderTest, SkipLinePassesLinesAndCountsThem) {
  auto r = LineReader::Open(Write("one\ntwo\nthree\nfour"));
  ASSERT_TRUE(r.ok());
  std::string line;
  ASSERT_TRUE((*r)->SkipLine());
  ASSERT_TRUE((*r)->Next(&line));
  EXPECT_EQ(line, "two");
  EXPECT_EQ((*r)->line_number(), 2u);
  EXPECT_EQ((*r)->offset(), 8u);
  ASSERT_TRUE((*r)->SkipLine());
  ASSERT_TRUE((*r)->Next(&line));
  EXPECT_EQ(line, "four");
  EXPECT_EQ((*r)->offset(), 18u);
  EXPECT_FALSE((*r)->SkipLine());
  EXPECT_FALSE((*r)->Next(&line));
  EXPECT_TRUE((*r)->status().ok());
}

// Every start offset, on every kind of line end: the lines that start at
// or after it, and none cut in two.
TEST_F(LineReaderTest, StartAtGivesTheLinesStartingThereOrLater) {
  const std::string text = "a\nbb\n\nccc\r\n\r\nd";
  const std::vector<std::pair<uint64_t, std::string>> starts = {
      {0, "a"}, {2, "bb"}, {5, ""}, {6, "ccc"}, {11, ""}, {13, "d"}};
  const std::string path = Write(text);
  for (uint64_t offset = 0; offset <= text.size() + 2; ++offset) {
    std::vector<std::string> want;
    for (const auto& [at, line] : starts) {
      if (at >= offset) want.push_back(line);
    }
    auto r = LineReader::Open(path);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE((*r)->StartAt(offset).ok());
    EXPECT_GE((*r)->offset(), std::min<uint64_t>(offset, text.size()));
    std::vector<std::string> got;
    std::string line;
    while ((*r)->Next(&line)) got.push_back(line);
    EXPECT_TRUE((*r)->status().ok());
    EXPECT_EQ(got, want) << "from byte " << offset;
    EXPECT_EQ((*r)->line_number(), want.size());
  }
}

TEST_F(LineReaderTest, AGzipFileCannotStartMidStream) {
  auto r = LineReader::Open(WriteGzip("a\nb\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->compressed());
  Status s = (*r)->StartAt(2);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gzip"), std::string::npos) << s.ToString();
}

TEST_F(LineReaderTest, APipeIsReadThroughButNotEnteredMidStream) {
  const std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A shell's <(zcat ...): the open blocks until the writer is there too.
  std::thread writer(
      [&] { std::ofstream(fifo, std::ios::binary) << "a\nbb\nccc\n"; });
  {
    auto r = LineReader::Open(fifo);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      EXPECT_FALSE((*r)->compressed());
      std::vector<std::string> lines;
      std::string line;
      while ((*r)->Next(&line)) lines.push_back(line);
      EXPECT_EQ(lines, (std::vector<std::string>{"a", "bb", "ccc"}));
      Status s = (*r)->StartAt(2);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find("not a regular file"), std::string::npos)
          << s.ToString();
    }
  }
  writer.join();
}

TEST_F(LineReaderTest, ATruncatedGzipFileIsAnError) {
  std::vector<std::string> want;
  std::string path = WriteGzip(ManyLines(20000, &want));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() / 2);
  auto r = LineReader::Open(path);
  ASSERT_TRUE(r.ok());
  std::string line;
  size_t n = 0;
  while ((*r)->Next(&line)) ++n;
  EXPECT_LT(n, want.size());
  EXPECT_EQ((*r)->status().code(), StatusCode::kIOError)
      << (*r)->status().ToString();
}

}  // namespace
}  // namespace ps::data
