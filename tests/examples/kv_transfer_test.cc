// examples/kv_transfer as real processes: a decode and a prefill process
// (fork + exec of the binary built here) hand a small KV cache over shm and
// over tcp, decode holding a middle range of the heads, prefill cutting each
// layer into several WriteVs; decode checks every byte. Bad input: a prefill
// whose shape differs from decode's, a decode whose pattern seed differs
// (its byte check must catch it), an empty head range: each ends with a
// clear message and a nonzero status; so does a prefill killed half-way
// (decode hears nothing for its --timeout_ms). Every process is stopped and
// reaped (launch::Process), on any path out of a test.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launch/process.h"

namespace ps::kv {
namespace {

// Generous: only a broken run waits this long (sanitizer builds are slow).
constexpr int kExitWaitMs = 60000;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Scratch {
 public:
  Scratch() {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
        "/kv_transfer_test.XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Program {
  std::unique_ptr<launch::Process> process;
  std::string log;
};

// Starts kv_transfer with `flags` (its output in <dir>/<name>.log).
Program Start(const Scratch& dir, const std::string& name,
              const std::vector<std::string>& flags) {
  launch::ProcessSpec spec;
  spec.argv = {KV_TRANSFER_BIN};
  spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
  spec.log_path = dir.path() + "/" + name + ".log";
  spec.name = name;
  auto p = launch::Process::Spawn(spec);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return {p.ok() ? std::move(p).value() : nullptr, spec.log_path};
}

// Its exit code (nullopt: still running after kExitWaitMs, or not started).
std::optional<int> ExitOf(Program& r) {
  if (r.process == nullptr) return std::nullopt;
  return r.process->WaitExit(kExitWaitMs);
}

std::vector<std::string> Shape(const std::string& heads = "8") {
  return {"--layers=4", "--tokens=96", "--heads=" + heads, "--head_dim=64",
          "--timeout_ms=20000"};
}

std::vector<std::string> With(std::vector<std::string> a,
                              const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class KvTransferTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvTransferTest, EveryByteArrivesLayerByLayer) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string handoff = "--peer_file=" + dir.path() + "/handoff";
  const std::string transport = "--transport=" + GetParam();
  // Decode holds heads [3, 6) of 8: every (K/V, token) is a segment of its
  // own; 50 segments an op cut each layer (192 segments) into 4 WriteVs.
  Program decode = Start(
      dir, "decode",
      With(Shape(), {"--role=decode", handoff, transport, "--heads_begin=3",
                     "--heads_end=6", "--warmup=1", "--iterations=2"}));
  Program prefill = Start(dir, "prefill",
                          With(Shape(), {"--role=prefill", handoff, transport,
                                         "--segments_per_op=50"}));
  EXPECT_EQ(ExitOf(prefill), 0) << ReadAll(prefill.log);
  EXPECT_EQ(ExitOf(decode), 0) << ReadAll(decode.log);
  const std::string out = ReadAll(decode.log);
  EXPECT_NE(out.find("transfer 3/3"), std::string::npos) << out;
  EXPECT_NE(out.find("checked: every byte of 3 transfer(s)"), std::string::npos)
      << out;
  EXPECT_NE(ReadAll(prefill.log).find("over " + GetParam()), std::string::npos)
      << ReadAll(prefill.log);
  // Decode removes its hand-off file when it ends.
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/handoff"));
}

INSTANTIATE_TEST_SUITE_P(Transports, KvTransferTest,
                         ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return info.param; });

// Over shm with copy lanes: WriteVs of 768 KiB (1024 segments of heads
// [0, 3) of 8), each shared out over three threads, land byte for byte.
TEST(KvTransferLanesTest, EveryByteArrivesThroughCopyLanes) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string handoff = "--peer_file=" + dir.path() + "/handoff";
  const std::vector<std::string> shape = {
      "--layers=4",     "--tokens=2048",      "--heads=8",
      "--head_dim=128", "--timeout_ms=20000", "--transport=shm"};
  Program decode =
      Start(dir, "decode",
            With(shape, {"--role=decode", handoff, "--heads_begin=0",
                         "--heads_end=3", "--iterations=2"}));
  Program prefill =
      Start(dir, "prefill",
            With(shape, {"--role=prefill", handoff, "--copy_threads=3"}));
  EXPECT_EQ(ExitOf(prefill), 0) << ReadAll(prefill.log);
  EXPECT_EQ(ExitOf(decode), 0) << ReadAll(decode.log);
  const std::string out = ReadAll(decode.log);
  EXPECT_NE(out.find("checked: every byte of 2 transfer(s)"), std::string::npos)
      << out;
}

TEST(KvTransferBadInputTest, ShapeMismatchIsRefusedByPrefill) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string handoff = "--peer_file=" + dir.path() + "/handoff";
  Program decode =
      Start(dir, "decode", With(Shape("8"), {"--role=decode", handoff}));
  Program prefill =
      Start(dir, "prefill", With(Shape("16"), {"--role=prefill", handoff}));
  EXPECT_EQ(ExitOf(prefill), 1) << ReadAll(prefill.log);
  const std::string out = ReadAll(prefill.log);
  EXPECT_NE(out.find("holds a cache of 4 layers x 2 x 96 tokens x 8 heads"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("give both roles the same --layers, --tokens, --heads"),
            std::string::npos)
      << out;
  // Decode never got a layer: stop it (it would wait --timeout_ms).
  ASSERT_NE(decode.process, nullptr);
  EXPECT_TRUE(decode.process->Stop(SIGTERM, kExitWaitMs).ok());
}

TEST(KvTransferBadInputTest, WrongBytesAreReportedByDecode) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string handoff = "--peer_file=" + dir.path() + "/handoff";
  Program decode = Start(dir, "decode",
                         With(Shape(), {"--role=decode", handoff, "--seed=1"}));
  Program prefill = Start(dir, "prefill",
                          With(Shape(), {"--role=prefill", handoff, "--seed=2",
                                         "--timeout_ms=5000"}));
  EXPECT_EQ(ExitOf(decode), 1) << ReadAll(decode.log);
  const std::string out = ReadAll(decode.log);
  EXPECT_NE(out.find("bytes from prefill differ"), std::string::npos) << out;
  EXPECT_NE(out.find("layer 0: "), std::string::npos) << out;
  // Prefill loses its peer: it fails too, and says so.
  EXPECT_EQ(ExitOf(prefill), 1) << ReadAll(prefill.log);
}

TEST(KvTransferBadInputTest, LostPrefillIsReportedByDecode) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string handoff = "--peer_file=" + dir.path() + "/handoff";
  std::vector<std::string> shape = Shape();
  shape.back() = "--timeout_ms=1000";  // decode's wait for the next layer
  Program decode =
      Start(dir, "decode",
            With(shape, {"--role=decode", handoff, "--iterations=1000"}));
  Program prefill =
      Start(dir, "prefill", With(Shape(), {"--role=prefill", handoff}));
  ASSERT_NE(prefill.process, nullptr);
  // Killed in the middle of the run, once decode has seen two transfers.
  const int64_t deadline = launch::MonotonicMillis() + kExitWaitMs;
  while (ReadAll(decode.log).find("transfer 2/1000") == std::string::npos &&
         launch::MonotonicMillis() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  prefill.process->Signal(SIGKILL);
  EXPECT_EQ(ExitOf(decode), 1) << ReadAll(decode.log);
  const std::string out = ReadAll(decode.log);
  EXPECT_NE(out.find("then nothing for 1000 ms: prefill was lost or stalled"),
            std::string::npos)
      << out;
}

TEST(KvTransferBadInputTest, EmptyHeadRangeIsAUsageError) {
  Scratch dir;
  ASSERT_FALSE(dir.path().empty());
  Program decode = Start(
      dir, "decode",
      With(Shape(), {"--role=decode", "--peer_file=" + dir.path() + "/handoff",
                     "--heads_begin=6", "--heads_end=4"}));
  EXPECT_EQ(ExitOf(decode), 2) << ReadAll(decode.log);
  EXPECT_NE(ReadAll(decode.log).find("--heads_begin/--heads_end"),
            std::string::npos)
      << ReadAll(decode.log);
}

}  // namespace
}  // namespace ps::kv
