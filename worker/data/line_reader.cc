#include "worker/data/line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace ps::data {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {
constexpr size_t kBlockBytes = size_t{1} << 20;
}  // namespace

StatusOr<std::unique_ptr<LineReader>> LineReader::Open(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return NotFound("data file " + path + " does not exist");
    return ErrnoStatus(StatusCode::kIOError, "cannot open data file " + path,
                       errno);
  }
  std::unique_ptr<LineReader> r(new LineReader());
  r->path_ = path;
  r->fd_ = fd;  // closed by the reader from here on
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return ErrnoStatus(StatusCode::kIOError, "cannot read data file " + path,
                       errno);
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("data file " + path + " is a directory");
  }
  r->plain_bytes_ = static_cast<uint64_t>(st.st_size);
  // A pipe cannot be read twice: zlib reads it, and tells plain from gzip
  // itself.
  unsigned char magic[2] = {0, 0};
  const bool seekable = pread(fd, magic, 2, 0) >= 0;
  if (!seekable && errno != ESPIPE) {
    return ErrnoStatus(StatusCode::kIOError, "cannot read data file " + path,
                       errno);
  }
  const bool gzip_magic = magic[0] == 0x1f && magic[1] == 0x8b;
  if (!seekable || gzip_magic) {
    gzFile gz = gzdopen(fd, "rb");
    if (gz == nullptr) {
      return ErrnoStatus(StatusCode::kIOError, "cannot open data file " + path,
                         errno);
    }
    r->fd_ = -1;  // gzclose closes it
    r->gz_ = gz;
    gzbuffer(gz, 1 << 20);
    r->compressed_ = seekable || gzdirect(gz) == 0;
  }
  r->buffer_.resize(kBlockBytes);  // never empty: data() is never null
  return r;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
  if (fd_ >= 0) close(fd_);
}

Status LineReader::StartAt(uint64_t offset) {
  if (gz_ != nullptr) {
    return InvalidArgument(
        "data file " + path_ +
        (compressed_ ? " is gzip-compressed" : " is not a regular file") +
        ": it cannot be entered mid-stream (split it by lines)");
  }
  // From the byte before: the partial line to pass ends at the first
  // "\n" from there, which is that byte itself when a line starts at
  // `offset`.
  const uint64_t from = offset == 0 ? 0 : offset - 1;
  if (lseek(fd_, static_cast<off_t>(from), SEEK_SET) !=
      static_cast<off_t>(from)) {
    return ErrnoStatus(StatusCode::kIOError, "cannot seek in " + path_, errno);
  }
  begin_ = end_ = 0;
  eof_ = false;
  offset_ = from;
  if (offset > 0) SkipLine();
  line_number_ = 0;
  return status_;
}

bool LineReader::Refill() {
  // Keep the unread bytes (a line's start), then read after them; a line
  // longer than the buffer doubles it.
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  if (end_ == buffer_.size()) buffer_.resize(2 * buffer_.size());
  const size_t room = std::min<size_t>(buffer_.size() - end_, INT_MAX);
  char* into = buffer_.data() + end_;
  ssize_t n;
  if (gz_ == nullptr) {
    do {
      n = read(fd_, into, room);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      status_ = ErrnoStatus(
          StatusCode::kIOError,
          path_ + " after line " + std::to_string(line_number_), errno);
      return false;
    }
  } else {
    auto* gz = static_cast<gzFile>(gz_);
    n = gzread(gz, into, static_cast<unsigned>(room));
    int err = Z_OK;
    const char* message = gzerror(gz, &err);
    if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      status_ = IOError(path_ + " after line " + std::to_string(line_number_) +
                        ": " + message);
      return false;
    }
  }
  if (n == 0) eof_ = true;
  end_ += static_cast<size_t>(n);
  return true;
}

bool LineReader::Find(const char** begin, const char** end) {
  if (!status_.ok()) return false;
  size_t scanned = begin_;
  for (;;) {
    const char* base = buffer_.data();
    const void* nl = std::memchr(base + scanned, '\n', end_ - scanned);
    if (nl != nullptr || (eof_ && end_ > begin_)) {
      *begin = base + begin_;
      *end = nl != nullptr ? static_cast<const char*>(nl) : base + end_;
      return true;
    }
    if (eof_) return false;   // nothing left
    scanned = end_ - begin_;  // where the search goes on after Refill
    if (!Refill()) return false;
  }
}

void LineReader::Pass(const char* end) {
  const char* base = buffer_.data();
  const size_t next = static_cast<size_t>(end - base) + (end < base + end_);
  offset_ += next - begin_;
  begin_ = next;
  ++line_number_;
}

bool LineReader::Next(std::string* line) {
  const char *begin, *end;
  if (!Find(&begin, &end)) return false;
  size_t length = static_cast<size_t>(end - begin);
  if (length > 0 && begin[length - 1] == '\r') --length;
  line->assign(begin, length);
  Pass(end);
  return true;
}

bool LineReader::SkipLine() {
  const char *begin, *end;
  if (!Find(&begin, &end)) return false;
  Pass(end);
  return true;
}

}  // namespace ps::data
