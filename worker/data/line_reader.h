// LineReader: streams the lines of a text file, plain or gzip-compressed
// (detected from the content, not the name), one line at a time with no
// line-length limit. A trailing "\r" (CRLF files) is removed.
//
// The file is read in 1 MiB blocks and lines are found with memchr, so a
// line costs one scan and (for Next) one copy; SkipLine passes one without
// copying it (another worker's line). A plain file is read with read(2)
// straight into the block, and can start at any byte offset (StartAt: a
// worker's byte range); a gzip file or a pipe goes through zlib from its
// start.
//
// Not thread-safe: one reader per thread (or a lock around it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::data {

// Whether `path` is a regular file (after symlinks): one that can be read
// twice, unlike a pipe.
bool IsRegularFile(const std::string& path);

class LineReader {
 public:
  // kNotFound if the file does not exist, kIOError if it cannot be read.
  static StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  ~LineReader();

  // Moves to the first line that starts at byte `offset` of the file or
  // after it: the line holding byte offset - 1 is passed unless it ends
  // there, so readers started at the borders of byte ranges read every
  // line exactly once between them. line_number() then counts from there.
  // kInvalidArgument for a gzip file or a pipe (they cannot be entered
  // mid-stream), kIOError if the file cannot be read there.
  Status StartAt(uint64_t offset);
  // Whether the content is gzip-compressed.
  bool compressed() const { return compressed_; }
  // The size of a plain (seekable, uncompressed) file, which StartAt can
  // enter anywhere; nullopt for gzip or a pipe.
  std::optional<uint64_t> plain_bytes() const {
    if (gz_ != nullptr) return std::nullopt;
    return plain_bytes_;
  }

  // Reads the next line into *line (without its end). Returns false at the
  // end of the file; a read error is reported by status().
  bool Next(std::string* line);
  // Passes the next line without reading it out; false at the end of the
  // file (or after an error: status()).
  bool SkipLine();
  // Line number of the line last returned (1-based).
  uint64_t line_number() const { return line_number_; }
  // Where the next line starts in the (uncompressed) text: the bytes before
  // it, line ends included.
  uint64_t offset() const { return offset_; }
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  LineReader() = default;
  // The next line as [begin, end) of buffer_ (end: its "\n" or the end of
  // the file); false at the end of the file or on an error.
  bool Find(const char** begin, const char** end);
  // Steps past the line Find returned.
  void Pass(const char* end);
  // Reads more of the file after the unread bytes; false on an error.
  bool Refill();

  std::string path_;
  int fd_ = -1;         // a plain file
  void* gz_ = nullptr;  // or a gzFile: gzip, or a pipe
  bool compressed_ = false;
  uint64_t plain_bytes_ = 0;  // when fd_ is open
  uint64_t line_number_ = 0;
  uint64_t offset_ = 0;
  Status status_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes of buffer_
  bool eof_ = false;
};

}  // namespace ps::data
