// LineReader: streams the lines of a text file, plain or gzip-compressed
// (detected from the content, not the name), one line at a time with no
// line-length limit. A trailing "\r" (CRLF files) is removed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::data {

class LineReader {
 public:
  // kNotFound if the file does not exist, kIOError if it cannot be read.
  static StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  ~LineReader();

  // Reads the next line into *line (without its end). Returns false at the
  // end of the file; a read error is reported by status().
  bool Next(std::string* line);
  // Line number of the line last returned (1-based).
  uint64_t line_number() const { return line_number_; }
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  LineReader() = default;
  std::string path_;
  void* gz_ = nullptr;  // gzFile
  uint64_t line_number_ = 0;
  Status status_;
  std::string buffer_;
};

}  // namespace ps::data
