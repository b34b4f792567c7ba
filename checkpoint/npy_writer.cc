#include "checkpoint/npy_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ps::checkpoint {
namespace {

// Appended rows are written in pieces of about this size.
constexpr size_t kAppendBufferBytes = 1 << 20;

size_t ItemBytes(NpyType type) { return type == NpyType::kFloat32 ? 4 : 8; }

}  // namespace

std::string NpyHeader(NpyType type, uint64_t rows, uint64_t cols) {
  const char* descr = type == NpyType::kFloat32 ? "<f4" : "<u8";
  char shape[64];
  if (cols == 0) {
    std::snprintf(shape, sizeof shape, "(%llu,)",
                  static_cast<unsigned long long>(rows));
  } else {
    std::snprintf(shape, sizeof shape, "(%llu, %llu)",
                  static_cast<unsigned long long>(rows),
                  static_cast<unsigned long long>(cols));
  }
  std::string dict = std::string("{'descr': '") + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version 1.0, then the dictionary's length (u16, little endian).
  constexpr size_t kPreamble = 10;
  const size_t dict_bytes = kNpyHeaderBytes - kPreamble;
  dict.resize(dict_bytes - 1, ' ');  // the longest shape fits (< 100 bytes)
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  header.push_back(static_cast<char>(dict_bytes & 0xff));
  header.push_back(static_cast<char>(dict_bytes >> 8));
  return header + dict;
}

StatusOr<std::unique_ptr<NpyWriter>> NpyWriter::Create(std::string path,
                                                       NpyType type,
                                                       uint64_t cols) {
  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(StatusCode::kIOError, "create " + tmp, errno);
  std::unique_ptr<NpyWriter> w(new NpyWriter(std::move(path), type, cols, fd));
  // The header's room; Finish writes it.
  PS_RETURN_IF_ERROR(
      w->PWrite(std::string(kNpyHeaderBytes, ' ').data(), kNpyHeaderBytes, 0));
  return w;
}

NpyWriter::NpyWriter(std::string path, NpyType type, uint64_t cols, int fd)
    : path_(std::move(path)),
      tmp_path_(path_ + ".tmp"),
      type_(type),
      cols_(cols),
      row_bytes_(ItemBytes(type) * (cols == 0 ? 1 : cols)),
      fd_(fd) {}

NpyWriter::~NpyWriter() {
  ::close(fd_);
  if (!finished_) ::unlink(tmp_path_.c_str());
}

Status NpyWriter::PWrite(const char* data, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, data, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(StatusCode::kIOError, "write " + tmp_path_, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status NpyWriter::WriteAt(uint64_t row, const void* data, uint64_t rows) {
  return PWrite(static_cast<const char*>(data), rows * row_bytes_,
                kNpyHeaderBytes + row * row_bytes_);
}

Status NpyWriter::Append(const void* data, uint64_t rows) {
  const char* p = static_cast<const char*>(data);
  buffer_.insert(buffer_.end(), p, p + rows * row_bytes_);
  appended_rows_ += rows;
  return buffer_.size() >= kAppendBufferBytes ? Flush() : Status::OK();
}

Status NpyWriter::Flush() {
  const uint64_t first = appended_rows_ - buffer_.size() / row_bytes_;
  Status s = PWrite(buffer_.data(), buffer_.size(),
                    kNpyHeaderBytes + first * row_bytes_);
  buffer_.clear();
  return s;
}

Status NpyWriter::Finish(uint64_t rows) {
  PS_RETURN_IF_ERROR(Flush());
  const std::string header = NpyHeader(type_, rows, cols_);
  PS_RETURN_IF_ERROR(PWrite(header.data(), header.size(), 0));
  if (::ftruncate(
          fd_, static_cast<off_t>(kNpyHeaderBytes + rows * row_bytes_)) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "truncate " + tmp_path_, errno);
  }
  if (::fdatasync(fd_) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "fsync " + tmp_path_, errno);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(StatusCode::kIOError,
                       "rename " + tmp_path_ + " to " + path_, errno);
  }
  finished_ = true;
  return Status::OK();
}

}  // namespace ps::checkpoint
