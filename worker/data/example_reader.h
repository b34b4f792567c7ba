// ExampleReader: streams examples from a data file in batches. Malformed
// lines are skipped and counted; the first few are kept with their line
// number and reason for the log. With `strict`, the first malformed line is
// an error instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "worker/data/example_batch.h"
#include "worker/data/line_format.h"
#include "worker/data/line_parsers.h"
#include "worker/data/line_reader.h"

namespace ps::data {

struct ReaderOptions {
  DataFormat format = DataFormat::kCriteo;
  bool strict = false;     // a malformed line fails the read
  int keep_malformed = 5;  // how many malformed lines to remember
  std::string csv_spec;    // kCsv: the columns (csv_layout.h)
};

struct ReaderStats {
  uint64_t lines = 0;
  uint64_t examples = 0;
  uint64_t malformed = 0;
  // "line 17: I3 'x' is not an integer", for the first few.
  std::vector<std::string> first_malformed;
};

class ExampleReader {
 public:
  // kNotFound / kIOError for the file; kInvalidArgument for a csv spec
  // that does not fit the file's header (or a spec with another format).
  static StatusOr<std::unique_ptr<ExampleReader>> Open(
      const std::string& path, const ReaderOptions& options);

  // Appends up to `max` examples to `batch`; returns how many (0 at the end
  // of the file). Empty lines are skipped silently.
  StatusOr<size_t> Read(size_t max, ExampleBatch* batch);
  // Skips `examples` examples (to resume inside an epoch).
  Status Skip(uint64_t examples);

  const ReaderStats& stats() const { return stats_; }
  const std::string& path() const { return lines_->path(); }
  const LineFormat& format() const { return format_; }

 private:
  ExampleReader(std::unique_ptr<LineReader> lines, LineFormat format,
                ReaderOptions options)
      : lines_(std::move(lines)),
        format_(std::move(format)),
        options_(std::move(options)) {}
  std::unique_ptr<LineReader> lines_;
  LineFormat format_;
  ReaderOptions options_;
  ReaderStats stats_;
  std::string line_;
};

}  // namespace ps::data
