// --help of every program we build (issue 36): the executable targets
// outside tests/ and fuzz/, listed by CMake (cmake/Programs.cmake), each run
// with --help and --helpfull. --help prints a usage line and explains
// flags defined in our sources only (a DEFINE_<type>(name in a source file),
// every one of the program's own among them. glog's, gflags' and the
// libraries' flags (RocksDB's, Google Benchmark's) are behind --helpfull,
// which must then list them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;  // exit status; -1: killed by a signal
  std::string out;
};

// `program arg`, its stdout captured (stderr goes to the test's log). stdin
// is /dev/null and `timeout` ends it after 20 s, so that a program that
// starts its work instead of answering cannot hang the suite.
Outcome RunProgram(const std::string& program, const std::string& arg) {
  const std::string command =
      "timeout 20 '" + program + "' " + arg + " </dev/null";
  Outcome o;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return o;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) {
    o.out.append(buf, n);
  }
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) o.code = WEXITSTATUS(status);
  return o;
}

std::string BaseName(const std::string& path) {
  return fs::path(path).filename().string();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Programs() {
  std::vector<std::string> programs;
  std::ifstream in(PS_PROGRAM_LIST);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) programs.push_back(line);
  }
  return programs;
}

// The flag names DEFINE_<type>(name ...) in our sources outside tests/ and
// fuzz/ (build folders, the ones holding a CMakeCache.txt, skipped).
const std::set<std::string>& SourceFlags() {
  static const std::set<std::string> flags = [] {
    const std::regex define(
        R"(DEFINE_(bool|int32|int64|uint32|uint64|double|string)\(\s*([A-Za-z_][A-Za-z0-9_]*))");
    const fs::path root = PS_SOURCE_DIR;
    std::set<std::string> found;
    for (auto it = fs::recursive_directory_iterator(root);
         it != fs::recursive_directory_iterator(); ++it) {
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      if (it->is_directory()) {
        if (name[0] == '.' || fs::exists(p / "CMakeCache.txt") ||
            (it.depth() == 0 && (name == "tests" || name == "fuzz"))) {
          it.disable_recursion_pending();
        }
        continue;
      }
      const std::string ext = p.extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".cu") continue;
      std::ifstream in(p);
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      if (s.find("DEFINE_") == std::string::npos) continue;
      for (std::sregex_iterator m(s.begin(), s.end(), define), end; m != end;
           ++m) {
        found.insert((*m)[2].str());
      }
    }
    return found;
  }();
  return flags;
}

// glog's flags most likely to leak into a --help.
const std::set<std::string> kGlogFlags = {
    "log_dir",     "logtostderr", "alsologtostderr", "stderrthreshold",
    "minloglevel", "v",           "vmodule"};

TEST(ProgramListTest, HoldsTheServerAndTheWorker) {
  std::set<std::string> names;
  for (const std::string& p : Programs()) names.insert(BaseName(p));
  EXPECT_TRUE(names.count("ps_server")) << PS_PROGRAM_LIST;
  EXPECT_TRUE(names.count("ps_worker")) << PS_PROGRAM_LIST;
  EXPECT_FALSE(names.count("ps_test_pch")) << PS_PROGRAM_LIST;
}

class HelpTest : public testing::TestWithParam<std::string> {};

TEST_P(HelpTest, ExplainsOnlyOurFlagsAndHelpfullTheRest) {
  const std::string& program = GetParam();
  const std::string name = BaseName(program);
  const Outcome help = RunProgram(program, "--help");
  ASSERT_EQ(help.code, 0) << help.out;
  const std::vector<std::string> lines = Lines(help.out);
  ASSERT_FALSE(lines.empty());
  // "<name>: what it does", not gflags' "Warning: SetUsageMessage() never
  // called" nor the benchmark library's "benchmark [--benchmark_...".
  const std::string head = name + ": ";
  EXPECT_EQ(lines[0].rfind(head, 0), 0u) << help.out;
  EXPECT_GT(lines[0].size(), head.size() + 10) << help.out;
  EXPECT_EQ(lines[0].find("SetUsageMessage"), std::string::npos) << help.out;
  // gflags' own --help groups flags under "Flags from <file>:".
  EXPECT_EQ(help.out.find("Flags from "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--helpfull"), std::string::npos) << help.out;

  // A flag described: "  --name (type, default ...)" (cli/help.cc), or
  // gflags' "    -name (what it is) type: ..." that must not be there.
  const std::regex flag_line(R"(^ {2,4}--?([A-Za-z_][A-Za-z0-9_]*) \()");
  const std::regex text_line(R"(^ {6}\S)");
  std::set<std::string> listed;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, flag_line)) continue;
    const std::string flag = m[1];
    listed.insert(flag);
    EXPECT_FALSE(kGlogFlags.count(flag)) << "glog's --" << flag << " in\n"
                                         << help.out;
    EXPECT_TRUE(SourceFlags().count(flag))
        << "--" << flag << " is not defined in our sources:\n"
        << help.out;
    EXPECT_TRUE(i + 1 < lines.size() &&
                std::regex_search(lines[i + 1], text_line))
        << "--" << flag << " has no help text:\n"
        << help.out;
  }

  const Outcome full = RunProgram(program, "--helpfull");
  ASSERT_EQ(full.code, 0) << full.out;
  EXPECT_FALSE(full.out.empty());
  // Every flag gflags has from our sources is explained by --help.
  const std::regex section(R"(^  Flags from (.*):$)");
  const std::regex full_flag(R"(^    -([A-Za-z_][A-Za-z0-9_]*) \()");
  bool ours = false;
  for (const std::string& line : Lines(full.out)) {
    std::smatch m;
    if (std::regex_search(line, m, section)) {
      ours = m[1].str().rfind(PS_SOURCE_DIR, 0) == 0;
    } else if (ours && std::regex_search(line, m, full_flag)) {
      EXPECT_TRUE(listed.count(m[1].str())) << "--help leaves out --" << m[1];
    }
  }
  // What --help promises --helpfull lists, and where glog is linked in,
  // --help says that its flags are behind --helpfull.
  const bool has_glog = full.out.find("\n    -log_dir (") != std::string::npos;
  EXPECT_EQ(help.out.find("--log_dir") != std::string::npos, has_glog)
      << "--help:\n"
      << help.out << "\n--helpfull:\n"
      << full.out;
  if (help.out.find("--benchmark_filter") != std::string::npos) {
    EXPECT_NE(full.out.find("--benchmark_filter"), std::string::npos)
        << full.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, HelpTest, testing::ValuesIn(Programs()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return BaseName(info.param);
                         });

}  // namespace
