// UringReadFileSystem: a MultiRead (io_uring batches, or the default
// FileSystem's reads where the kernel refuses io_uring) returns exactly the
// file's bytes: batches larger than a ring, reads that end past the end of
// the file, from many threads at once, and a read the kernel fails shows
// as that request's error.
#include "table/uring_read_file_system.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/temp_dir.h"

namespace ps::table {
namespace {

using ::ps::testing::TempDir;

constexpr size_t kFileBytes = 1 << 20;
constexpr size_t kBlock = 4096;

// A file of kFileBytes whose byte i is a function of i.
std::string WriteFile(const std::string& dir) {
  std::string bytes(kFileBytes, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  const std::string path = dir + "/blocks";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::unique_ptr<rocksdb::FSRandomAccessFile> OpenFile(UringReadFileSystem& fs,
                                                      const std::string& path) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  const rocksdb::IOStatus s =
      fs.NewRandomAccessFile(path, rocksdb::FileOptions(), &file, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return file;
}

// Reads `offsets` (kBlock each) with one MultiRead and checks every byte.
void ReadAndCheck(rocksdb::FSRandomAccessFile& file,
                  const std::vector<uint64_t>& offsets,
                  const std::string& expected) {
  std::vector<std::string> scratch(offsets.size(), std::string(kBlock, 'x'));
  std::vector<rocksdb::FSReadRequest> reqs(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) {
    reqs[i].offset = offsets[i];
    reqs[i].len = kBlock;
    reqs[i].scratch = scratch[i].data();
  }
  ASSERT_TRUE(
      file.MultiRead(reqs.data(), reqs.size(), rocksdb::IOOptions(), nullptr)
          .ok());
  for (size_t i = 0; i < offsets.size(); ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << reqs[i].status.ToString();
    const size_t want = offsets[i] >= kFileBytes
                            ? 0
                            : std::min<size_t>(kBlock, kFileBytes - offsets[i]);
    ASSERT_EQ(reqs[i].result.size(), want) << "at " << offsets[i];
    EXPECT_EQ(reqs[i].result.ToString(),
              expected.substr(std::min<size_t>(offsets[i], kFileBytes), want))
        << "at " << offsets[i];
  }
}

TEST(UringReadFileSystem, BatchesReturnTheFilesBytes) {
  TempDir dir;
  const std::string path = WriteFile(dir.path());
  std::string expected(kFileBytes, '\0');
  std::ifstream(path, std::ios::binary).read(expected.data(), kFileBytes);
  auto fs = UringReadFileSystem::Create();
  // Where io_uring is refused the same reads go through pread: the bytes
  // must be the same either way.
  std::printf("io_uring %s\n", fs->available() ? "available" : "refused");
  auto file = OpenFile(*fs, path);
  ASSERT_NE(file, nullptr);

  // More requests than a ring holds, unaligned, in random order.
  std::mt19937_64 rng(1);
  std::vector<uint64_t> offsets;
  for (uint64_t at = 0; at + kBlock <= kFileBytes; at += kBlock + 17) {
    offsets.push_back(at);
  }
  std::shuffle(offsets.begin(), offsets.end(), rng);
  ASSERT_GT(offsets.size(), 3 * UringReadFileSystem::kDepth);
  ReadAndCheck(*file, offsets, expected);

  // Reads that end past the end of the file, or start there: short, OK.
  ReadAndCheck(*file, {kFileBytes - 100, 0, kFileBytes + 10}, expected);

  // Many threads, each its own batches.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 mine(t);
      for (int round = 0; round < 20; ++round) {
        std::vector<uint64_t> some(1 + mine() % 100);
        for (uint64_t& o : some) o = (mine() % (kFileBytes / kBlock)) * kBlock;
        std::sort(some.begin(), some.end());
        some.erase(std::unique(some.begin(), some.end()), some.end());
        ReadAndCheck(*file, some, expected);
      }
    });
  }
  for (auto& t : threads) t.join();
}

TEST(UringReadFileSystem, AFailedReadIsThatRequestsError) {
  TempDir dir;
  auto fs = UringReadFileSystem::Create();
  // RocksDB's default FileSystem opens a folder for reading; reading it
  // fails (EISDIR), in a batch as alone.
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  const rocksdb::IOStatus opened = fs->NewRandomAccessFile(
      dir.path(), rocksdb::FileOptions(), &file, nullptr);
  if (!opened.ok())
    GTEST_SKIP() << "cannot open a folder: " << opened.ToString();
  std::string a(kBlock, 'x'), b(kBlock, 'x');
  rocksdb::FSReadRequest reqs[2];
  reqs[0].offset = 0;
  reqs[0].len = kBlock;
  reqs[0].scratch = a.data();
  reqs[1].offset = kBlock;
  reqs[1].len = kBlock;
  reqs[1].scratch = b.data();
  ASSERT_TRUE(file->MultiRead(reqs, 2, rocksdb::IOOptions(), nullptr).ok());
  for (const auto& r : reqs) {
    EXPECT_TRUE(r.status.IsIOError()) << r.status.ToString();
    EXPECT_NE(r.status.ToString().find("directory"), std::string::npos)
        << r.status.ToString();
  }
}

}  // namespace
}  // namespace ps::table
