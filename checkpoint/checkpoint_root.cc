#include "checkpoint/checkpoint_root.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace ps::checkpoint {
namespace {

// Not in every <linux/magic.h>.
constexpr uint32_t kConfigfsMagic = 0x62656570;
constexpr uint32_t kFusectlMagic = 0x65735543;
constexpr uint32_t kMqueueMagic = 0x19800202;

// Filesystems that show the kernel's state as files: writes there change
// settings or fail, and nothing written stays.
struct PseudoFilesystem {
  uint32_t magic;
  const char* name;
};
constexpr PseudoFilesystem kPseudoFilesystems[] = {
    {PROC_SUPER_MAGIC, "proc"},
    {SYSFS_MAGIC, "sysfs"},
    {DEVPTS_SUPER_MAGIC, "devpts"},
    {CGROUP_SUPER_MAGIC, "cgroup"},
    {CGROUP2_SUPER_MAGIC, "cgroup2"},
    {DEBUGFS_MAGIC, "debugfs"},
    {TRACEFS_MAGIC, "tracefs"},
    {SECURITYFS_MAGIC, "securityfs"},
    {SELINUX_MAGIC, "selinuxfs"},
    {SMACK_MAGIC, "smackfs"},
    {BPF_FS_MAGIC, "bpf"},
    {PSTOREFS_MAGIC, "pstore"},
    {EFIVARFS_MAGIC, "efivarfs"},
    {BINFMTFS_MAGIC, "binfmt_misc"},
    {NSFS_MAGIC, "nsfs"},
    {HUGETLBFS_MAGIC, "hugetlbfs"},  // no write(2): RocksDB cannot work there
    {kConfigfsMagic, "configfs"},
    {kFusectlMagic, "fusectl"},
    {kMqueueMagic, "mqueue"},
};

// Refuses `dir` (an existing directory) when it is on a pseudo filesystem.
Status CheckFilesystem(const std::string& path, const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) {
    return ErrnoStatus(StatusCode::kIOError,
                       "checkpoint directory " + path + ": statfs " + dir,
                       errno);
  }
  for (const PseudoFilesystem& p : kPseudoFilesystems) {
    if (static_cast<uint32_t>(fs.f_type) == p.magic) {
      return InvalidArgument("checkpoint directory " + path + " is on a " +
                             p.name + " filesystem" +
                             (dir == path ? "" : " (at " + dir + ")") +
                             ", a view of the kernel's state that cannot "
                             "hold checkpoints; choose a directory on a "
                             "disk");
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckCheckpointRoot(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return InvalidArgument("the checkpoint directory is an empty path");
  }
  std::error_code ec;
  fs::path target = fs::absolute(path, ec);
  if (ec) {
    return ErrnoStatus(StatusCode::kIOError,
                       "checkpoint directory " + path + ": absolute path",
                       ec.value());
  }
  if (!target.has_filename()) target = target.parent_path();  // "dir/"
  // The nearest part of the path that exists: what is created below it
  // lands on its filesystem.
  fs::path existing = target;
  struct stat st;
  while (::stat(existing.c_str(), &st) != 0) {
    // ENOTDIR: a component is not a directory; the walk up finds it.
    if (errno != ENOENT && errno != ENOTDIR) {
      return ErrnoStatus(
          StatusCode::kIOError,
          "checkpoint directory " + path + ": stat " + existing.string(),
          errno);
    }
    if (existing == existing.parent_path()) {
      return NotFound("checkpoint directory " + path +
                      ": no part of the path exists");
    }
    existing = existing.parent_path();
  }
  const bool exists = existing == target;
  if (!S_ISDIR(st.st_mode)) {
    if (exists) {
      return InvalidArgument("checkpoint directory " + path +
                             " exists and is not a directory");
    }
    return InvalidArgument("checkpoint directory " + path +
                           " cannot be created: " + existing.string() +
                           " exists and is not a directory");
  }
  PS_RETURN_IF_ERROR(CheckFilesystem(path, exists ? path : existing.string()));
  if (!exists) {
    // Another process creating it at the same time is not an error.
    fs::create_directories(target, ec);
    std::error_code exists_ec;
    if (ec && !fs::is_directory(target, exists_ec)) {
      return ErrnoStatus(StatusCode::kIOError,
                         "cannot create checkpoint directory " + path,
                         ec.value());
    }
  }
  // Permission bits, ACLs, a read-only mount, an immutable directory: only
  // trying tells. The name is per process, so concurrent probes do not meet.
  const std::string probe =
      (target / (".ps_ckpt_write_probe." + std::to_string(::getpid())))
          .string();
  int fd =
      ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return ErrnoStatus(StatusCode::kIOError,
                       "checkpoint directory " + path +
                           " is not writable by this process (create " + probe +
                           ")",
                       errno);
  }
  ::close(fd);
  if (::unlink(probe.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(StatusCode::kIOError,
                       "checkpoint directory " + path +
                           ": cannot remove the probe file " + probe,
                       errno);
  }
  return Status::OK();
}

}  // namespace ps::checkpoint
