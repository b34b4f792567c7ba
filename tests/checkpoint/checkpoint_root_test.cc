// CheckCheckpointRoot: a missing directory is created; a regular file, a
// path under one, a pseudo filesystem (proc, sysfs, devpts, cgroup) and a
// directory this process cannot write are refused, each with a message
// naming the path and the reason.
#include "checkpoint/checkpoint_root.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint_fixture.h"

namespace ps::checkpoint {
namespace {

using testing::TempDir;

bool IsEmptyDirectory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_empty(path, ec);
}

// True when `path` is on a filesystem with this statfs magic.
bool MountedAs(const std::string& path, uint32_t magic) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 &&
         static_cast<uint32_t>(fs.f_type) == magic;
}

void ExpectRefused(const Status& s, StatusCode code, const std::string& path,
                   const std::string& reason) {
  EXPECT_TRUE(s.Is(code)) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_NE(s.message().find(reason), std::string::npos) << s;
}

TEST(CheckpointRoot, CreatesAMissingDirectoryAndItsParents) {
  TempDir dir;
  const std::string root = dir.path() + "/a/b/ckpt";
  ASSERT_TRUE(CheckCheckpointRoot(root).ok());
  EXPECT_TRUE(IsEmptyDirectory(root));  // the probe file is gone
  // Again, and with a trailing slash: the directory exists now.
  ASSERT_TRUE(CheckCheckpointRoot(root).ok());
  ASSERT_TRUE(CheckCheckpointRoot(root + "/").ok());
  EXPECT_TRUE(IsEmptyDirectory(root));
}

TEST(CheckpointRoot, RefusesAnEmptyPath) {
  EXPECT_TRUE(CheckCheckpointRoot("").Is(StatusCode::kInvalidArgument));
}

TEST(CheckpointRoot, RefusesARegularFile) {
  TempDir dir;
  const std::string file = dir.path() + "/ckpt";
  std::ofstream(file) << "not a directory";
  ExpectRefused(CheckCheckpointRoot(file), StatusCode::kInvalidArgument, file,
                "exists and is not a directory");
  // A path below the file cannot be created either; the file is named.
  const std::string below = file + "/sub";
  Status s = CheckCheckpointRoot(below);
  ExpectRefused(s, StatusCode::kInvalidArgument, below,
                file + " exists and is not a directory");
}

TEST(CheckpointRoot, RefusesProc) {
  if (!MountedAs("/proc", PROC_SUPER_MAGIC)) GTEST_SKIP() << "no /proc here";
  ExpectRefused(CheckCheckpointRoot("/proc/x"), StatusCode::kInvalidArgument,
                "/proc/x", "proc filesystem");
  ExpectRefused(CheckCheckpointRoot("/proc/self"), StatusCode::kInvalidArgument,
                "/proc/self", "proc filesystem");
}

TEST(CheckpointRoot, RefusesSysfs) {
  if (!MountedAs("/sys/kernel", SYSFS_MAGIC)) GTEST_SKIP() << "no sysfs here";
  ExpectRefused(CheckCheckpointRoot("/sys/kernel/ps_ckpt"),
                StatusCode::kInvalidArgument, "/sys/kernel/ps_ckpt",
                "sysfs filesystem");
}

TEST(CheckpointRoot, RefusesDevpts) {
  if (!MountedAs("/dev/pts", DEVPTS_SUPER_MAGIC)) {
    GTEST_SKIP() << "no devpts at /dev/pts here";
  }
  ExpectRefused(CheckCheckpointRoot("/dev/pts"), StatusCode::kInvalidArgument,
                "/dev/pts", "devpts filesystem");
}

TEST(CheckpointRoot, RefusesCgroupWithoutCreatingOne) {
  std::string base;
  for (const char* p : {"/sys/fs/cgroup", "/sys/fs/cgroup/memory"}) {
    if (MountedAs(p, CGROUP2_SUPER_MAGIC) || MountedAs(p, CGROUP_SUPER_MAGIC)) {
      base = p;
      break;
    }
  }
  if (base.empty()) GTEST_SKIP() << "no cgroup filesystem mounted here";
  // A mkdir there would make a cgroup (as root): it must not happen.
  const std::string path = base + "/ps_ckpt_test_" + std::to_string(getpid());
  ExpectRefused(CheckCheckpointRoot(path), StatusCode::kInvalidArgument, path,
                "cgroup");
  EXPECT_FALSE(std::filesystem::exists(path));
  ::rmdir(path.c_str());
}

// Runs CheckCheckpointRoot(path) as user nobody in a child process (root
// writes anywhere; the check must see what the server's user may do). The
// child's status as text, or why it could not run.
std::string CheckAsNobody(const std::string& path, bool* ran) {
  *ran = false;
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(out[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    // A temp dir under a private folder: nobody cannot even look.
    if (::access(path.c_str(), R_OK | X_OK) != 0) ::_exit(4);
    const std::string s = CheckCheckpointRoot(path).ToString();
    (void)!::write(out[1], s.data(), s.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    return "cannot switch to user nobody here";
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 4) {
    return "user nobody cannot reach " + path + " (TEST_TMPDIR is private)";
  }
  *ran = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return text;
}

TEST(CheckpointRoot, RefusesADirectoryItCannotWrite) {
  TempDir dir;
  const std::string root = dir.path() + "/readonly";
  ASSERT_TRUE(std::filesystem::create_directory(root));
  // Others may enter the temp dir, nobody may write the root.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(root.c_str(), 0555), 0);
  std::string result;
  if (::geteuid() == 0) {
    bool ran = false;
    result = CheckAsNobody(root, &ran);
    if (!ran) GTEST_SKIP() << result;
  } else {
    result = CheckCheckpointRoot(root).ToString();
    if (result == "OK") {
      GTEST_SKIP() << "this process writes a 0555 directory (it has "
                      "CAP_DAC_OVERRIDE): nothing to refuse";
    }
  }
  EXPECT_EQ(result.rfind("I/O error: ", 0), 0u) << result;
  EXPECT_NE(result.find(root + " is not writable"), std::string::npos)
      << result;
  EXPECT_TRUE(IsEmptyDirectory(root));
  ::chmod(root.c_str(), 0755);
}

}  // namespace
}  // namespace ps::checkpoint
