#include "worker/data/line_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace ps::data {

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
  gzbuffer(gz, 1 << 20);
  std::unique_ptr<LineReader> r(new LineReader());
  r->path_ = path;
  r->gz_ = gz;
  return r;
}

LineReader::~LineReader() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

bool LineReader::Next(std::string* line) {
  if (!status_.ok()) return false;
  auto* gz = static_cast<gzFile>(gz_);
  line->clear();
  char chunk[64 * 1024];
  for (;;) {
    if (gzgets(gz, chunk, sizeof(chunk)) == nullptr) {
      int err = 0;
      const char* msg = gzerror(gz, &err);
      if (err != Z_OK && err != Z_STREAM_END) {
        status_ = IOError(path_ + " after line " +
                          std::to_string(line_number_) + ": " + msg);
        return false;
      }
      if (line->empty()) return false;  // end of file
      break;                            // last line without "\n"
    }
    size_t n = std::strlen(chunk);
    line->append(chunk, n);
    if (n > 0 && chunk[n - 1] == '\n') {
      line->pop_back();
      break;
    }
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  ++line_number_;
  return true;
}

}  // namespace ps::data
