// cli/flags.h: PrecheckFlags finds what would make gflags exit 1 (unknown
// flags, missing or bad values, also inside --flagfile) and returns it as a
// Status; the range checks name the flag and reject NaN and infinities.
#include <gflags/gflags.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "cli/flags.h"

DEFINE_int32(test_count, 1, "a number");
DEFINE_bool(test_switch, false, "a switch");
DEFINE_string(test_name, "", "a name");

namespace ps::cli {
namespace {

// PrecheckFlags over {"prog", args...}.
Status Precheck(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return PrecheckFlags(static_cast<int>(args.size()), argv.data());
}

class CliFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/cli_flags_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    (void)!std::system(cmd.c_str());
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(CliFlagsTest, AcceptsWhatGflagsAccepts) {
  EXPECT_TRUE(Precheck({}).ok());
  EXPECT_TRUE(Precheck({"--test_count=3", "-test_name", "x", "--test_switch",
                        "--notest_switch", "positional", "--", "--nonsense"})
                  .ok());
  EXPECT_EQ(FLAGS_test_count, 3);
}

TEST_F(CliFlagsTest, UnknownMissingAndBadValuesAreErrors) {
  Status s = Precheck({"--no_such_flag"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown flag --no_such_flag (see --help)");
  s = Precheck({"--test_name"});
  EXPECT_EQ(s.message(), "flag --test_name needs a value");
  s = Precheck({"--test_count=many"});
  EXPECT_EQ(s.message(),
            "bad value 'many' for --test_count (a int32; see --help)");
  s = Precheck({"--notest_count"});
  EXPECT_NE(s.message().find("--test_count is not a boolean flag"),
            std::string::npos)
      << s.ToString();
}

TEST_F(CliFlagsTest, FlagfilesAreCheckedAsGflagsReadsThem) {
  // Unknown names and value-less lines are ignored in a flagfile (gflags
  // ignores them too); sections for other programs are skipped.
  const std::string ok = Write("ok.flags",
                               "# comment\n"
                               "  --test_count=4\n"
                               "--unknown_here=1\n"
                               "--test_name\n"
                               "other_program\n"
                               "--test_count=not-for-us\n"
                               "prog\n"
                               "--test_switch\n");
  EXPECT_TRUE(Precheck({"--flagfile=" + ok}).ok());
  const std::string bad =
      Write("bad.flags", "--test_count=1\n--test_count=x\n");
  Status s = Precheck({"--flagfile", bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(bad + ":2: bad value 'x' for --test_count"),
            std::string::npos)
      << s.ToString();
  // Nested, and one that names itself.
  const std::string outer = Write("outer.flags", "--flagfile=" + bad + "\n");
  EXPECT_FALSE(Precheck({"--flagfile=" + ok + "," + outer}).ok());
  const std::string self = dir_ + "/self.flags";
  Write("self.flags", "--flagfile=" + self + "\n");
  s = Precheck({"--flagfile=" + self});
  EXPECT_NE(s.message().find("levels deep"), std::string::npos) << s.ToString();
  s = Precheck({"--flagfile=" + dir_ + "/missing.flags"});
  EXPECT_NE(s.message().find("cannot read"), std::string::npos) << s.ToString();
}

TEST_F(CliFlagsTest, RangeChecksNameTheFlag) {
  EXPECT_TRUE(CheckUintFlag("rows", 5, 1, 10).ok());
  Status s = CheckUintFlag("batch_size", 4000000000u, 1, 1000000, "why");
  EXPECT_EQ(s.message(),
            "--batch_size must be in [1, 1000000], not 4000000000; why");
  EXPECT_FALSE(CheckIntFlag("fm_dim", -1, 1, 256).ok());
  EXPECT_TRUE(CheckRealFlag("bias", -1.2, -30, 30).ok());
  const double inf = std::numeric_limits<double>::infinity();
  s = CheckRealFlag("factor_stddev", inf, 0, 10);
  EXPECT_EQ(s.message(),
            "--factor_stddev must be a finite number in [0, 10], not inf");
  EXPECT_FALSE(
      CheckRealFlag("x", std::numeric_limits<double>::quiet_NaN(), 0, 1).ok());
  EXPECT_FALSE(CheckRealFlag("x", -inf, -inf, 1).ok());
}

}  // namespace
}  // namespace ps::cli
