#include "checkpoint/layout.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ps::checkpoint {
namespace {

constexpr char kMagic[4] = {'P', 'S', 'C', 'K'};
constexpr size_t kHeaderBytes = 4 + 4 + 8;
constexpr size_t kTrailerBytes = 8;

void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetLE(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<uint8_t>(p[i]);
  }
  return v;
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(StatusCode::kIOError, "write " + path, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

std::string DirOf(const std::string& path) {
  std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

}  // namespace

std::string CheckpointDirName(uint64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ckpt-%012llu",
                static_cast<unsigned long long>(step));
  return buf;
}

bool ParseCheckpointDirName(const std::string& name, uint64_t* step) {
  if (name.size() != 17 || name.compare(0, 5, "ckpt-") != 0) return false;
  uint64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *step = v;
  return true;
}

std::string ShardDirName(uint32_t shard) {
  return "shard-" + std::to_string(shard);
}
std::string ShardDoneName(uint32_t shard) {
  return ShardDirName(shard) + ".done";
}
std::string ShardDiskTierName(uint32_t shard, uint32_t table_id) {
  return ShardDirName(shard) + ".disk-" + std::to_string(table_id);
}
std::string JoinPath(const std::string& a, const std::string& b) {
  return (std::filesystem::path(a) / b).string();
}

Status SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(StatusCode::kIOError, "open " + dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(StatusCode::kIOError, "fsync " + dir, err);
  return Status::OK();
}

Status WriteFramedFile(const std::string& path, const std::string& payload) {
  std::string frame;
  frame.reserve(kHeaderBytes + payload.size() + kTrailerBytes);
  frame.append(kMagic, 4);
  PutU32(&frame, kFrameVersion);
  PutU64(&frame, payload.size());
  frame += payload;
  PutU64(&frame, XXH3_64bits(payload.data(), payload.size()));
  return WriteFileAtomically(path, frame);
}

Status WriteFileAtomically(const std::string& path,
                           const std::string& contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(StatusCode::kIOError, "create " + tmp, errno);
  Status s = WriteAll(fd, contents.data(), contents.size(), tmp);
  if (s.ok() && ::fsync(fd) != 0) {
    s = ErrnoStatus(StatusCode::kIOError, "fsync " + tmp, errno);
  }
  ::close(fd);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "rename " + tmp + " to " + path,
                       errno);
  }
  return SyncDirectory(DirOf(path));
}

StatusOr<std::string> ReadFramedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(path + " does not exist");
    return ErrnoStatus(StatusCode::kIOError, "open " + path, errno);
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus(StatusCode::kIOError, "read " + path, err);
    }
    if (r == 0) break;
    data.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  if (data.size() < kHeaderBytes + kTrailerBytes ||
      std::memcmp(data.data(), kMagic, 4) != 0) {
    return Corruption(path + ": not a checkpoint file (bad magic or " +
                      std::to_string(data.size()) + " bytes too short)");
  }
  const uint32_t version = static_cast<uint32_t>(GetLE(data.data() + 4, 4));
  if (version != kFrameVersion) {
    return Corruption(path + ": format version " + std::to_string(version) +
                      ", this program reads " + std::to_string(kFrameVersion));
  }
  const uint64_t length = GetLE(data.data() + 8, 8);
  if (length != data.size() - kHeaderBytes - kTrailerBytes) {
    return Corruption(
        path + ": length field says " + std::to_string(length) +
        " payload bytes, the file holds " +
        std::to_string(data.size() - kHeaderBytes - kTrailerBytes));
  }
  std::string payload = data.substr(kHeaderBytes, length);
  const uint64_t stored = GetLE(data.data() + kHeaderBytes + length, 8);
  if (stored != XXH3_64bits(payload.data(), payload.size())) {
    return Corruption(path +
                      ": checksum mismatch (the file was altered or "
                      "damaged)");
  }
  return payload;
}

Status WriteManifest(const std::string& checkpoint_dir,
                     const proto::Manifest& m) {
  std::string payload;
  if (!m.SerializeToString(&payload)) {
    return Internal("cannot serialize the manifest");
  }
  return WriteFramedFile(JoinPath(checkpoint_dir, kManifestName), payload);
}

StatusOr<proto::Manifest> ReadManifest(const std::string& checkpoint_dir) {
  const std::string path = JoinPath(checkpoint_dir, kManifestName);
  PS_ASSIGN_OR_RETURN(std::string payload, ReadFramedFile(path));
  proto::Manifest m;
  if (!m.ParseFromString(payload)) {
    return Corruption(path + ": the payload is not a Manifest");
  }
  if (m.format_version() < kOldestFormatVersion ||
      m.format_version() > kFormatVersion) {
    return Corruption(path + ": manifest format version " +
                      std::to_string(m.format_version()) +
                      ", this program reads " +
                      std::to_string(kOldestFormatVersion) + " to " +
                      std::to_string(kFormatVersion));
  }
  if (m.num_shards() == 0 ||
      static_cast<uint32_t>(m.shards_size()) != m.num_shards()) {
    return Corruption(path + ": " + std::to_string(m.shards_size()) +
                      " shard entries for " + std::to_string(m.num_shards()) +
                      " shards");
  }
  return m;
}

uint64_t BytesOnDisk(const std::string& path) {
  std::error_code ec;
  uint64_t total = 0;
  if (std::filesystem::is_regular_file(path, ec)) {
    return std::filesystem::file_size(path, ec);
  }
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

Status RemoveTree(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (st.type() == fs::file_type::not_found) return Status::OK();
  if (ec) return ErrnoStatus(StatusCode::kIOError, "stat " + path, ec.value());
  if (st.type() == fs::file_type::directory) {
    // Children first; the listing is read whole so that deleting does not
    // race the iterator.
    std::vector<std::string> children;
    for (auto it = fs::directory_iterator(path, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec)) {
      children.push_back(it->path().string());
    }
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return ErrnoStatus(StatusCode::kIOError, "list " + path, ec.value());
    }
    for (const std::string& child : children) {
      PS_RETURN_IF_ERROR(RemoveTree(child));
    }
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(StatusCode::kIOError, "delete directory " + path,
                         errno);
    }
    return Status::OK();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(StatusCode::kIOError, "delete " + path, errno);
  }
  return Status::OK();
}

namespace {

// The ckpt-* directories under `root` (names and steps only), by step
// ascending.
StatusOr<std::vector<CheckpointInfo>> CheckpointDirs(const std::string& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    return NotFound("checkpoint directory " + root + " does not exist");
  }
  std::vector<CheckpointInfo> out;
  for (auto it = std::filesystem::directory_iterator(root, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    CheckpointInfo info;
    info.name = it->path().filename().string();
    // An entry that vanishes meanwhile (a concurrent retention) is skipped.
    std::error_code type_ec;
    if (!it->is_directory(type_ec) ||
        !ParseCheckpointDirName(info.name, &info.step)) {
      continue;
    }
    info.path = it->path().string();
    out.push_back(std::move(info));
  }
  if (ec) return ErrnoStatus(StatusCode::kIOError, "list " + root, ec.value());
  std::sort(out.begin(), out.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) {
              return a.step < b.step;
            });
  return out;
}

// Reads the MANIFEST of a listed checkpoint into `info`.
void ReadInfo(CheckpointInfo* info) {
  auto m = ReadManifest(info->path);
  if (m.ok()) {
    info->complete = m->step() == info->step;
    info->manifest = std::move(*m);
    if (!info->complete) {
      info->manifest_status =
          Corruption(info->path + "/MANIFEST: records step " +
                     std::to_string(info->manifest.step()));
    }
  } else {
    info->manifest_status = m.status();
  }
}

}  // namespace

StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& root) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, CheckpointDirs(root));
  for (CheckpointInfo& info : all) ReadInfo(&info);
  return all;
}

StatusOr<std::optional<CheckpointInfo>> NewestCompleteCheckpoint(
    const std::string& root, std::optional<uint64_t> above_step) {
  PS_ASSIGN_OR_RETURN(std::vector<CheckpointInfo> all, CheckpointDirs(root));
  for (auto it = all.rbegin();
       it != all.rend() && (!above_step || it->step > *above_step); ++it) {
    ReadInfo(&*it);
    if (it->complete) return std::optional<CheckpointInfo>(std::move(*it));
  }
  return std::optional<CheckpointInfo>();
}

}  // namespace ps::checkpoint
