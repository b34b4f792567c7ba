#include "worker/data/line_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace ps::data {

namespace {
constexpr size_t kBlockBytes = size_t{1} << 20;
}  // namespace

StatusOr<std::unique_ptr<LineReader>> LineReader::Open(
    const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return NotFound("data file " + path + " does not exist");
    return ErrnoStatus(StatusCode::kIOError, "cannot open data file " + path,
                       errno);
  }
  if (S_ISDIR(st.st_mode)) {
    return InvalidArgument("data file " + path + " is a directory");
  }
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    return ErrnoStatus(StatusCode::kIOError, "cannot open data file " + path,
                       errno);
  }
  // zlib reads a plain file straight into the caller's buffer when the read
  // is at least twice its own buffer; ours are ~1 MiB, so a 64 KiB zlib
  // buffer spares every block an extra copy (1 MiB had it copied twice).
  gzbuffer(gz, 1 << 16);
  std::unique_ptr<LineReader> r(new LineReader());
  r->path_ = path;
  r->gz_ = gz;
  r->buffer_.resize(kBlockBytes);  // never empty: data() is never null
  return r;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

bool LineReader::Refill() {
  // Keep the unread bytes (a line's start), then read after them; a line
  // longer than the buffer doubles it.
  std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
  if (end_ == buffer_.size()) buffer_.resize(2 * buffer_.size());
  auto* gz = static_cast<gzFile>(gz_);
  const size_t room = std::min<size_t>(buffer_.size() - end_, INT_MAX);
  const int n = gzread(gz, buffer_.data() + end_, static_cast<unsigned>(room));
  int err = Z_OK;
  const char* message = gzerror(gz, &err);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    status_ = IOError(path_ + " after line " + std::to_string(line_number_) +
                      ": " + message);
    return false;
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
