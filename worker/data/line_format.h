// LineFormat: how every line of one data file is parsed. For Criteo TSV,
// libsvm and libffm that is the DataFormat alone; a CSV log also needs its
// column layout, which the user's spec (csv_layout.h) and the file's header
// line make together. The header is then no example: readers pass the line
// at byte 0 of a CSV file (has_header()).
//
// Thread-safety: immutable once made; copies share the layout; Parse may
// run on many threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/status_or.h"
#include "worker/data/csv_layout.h"
#include "worker/data/example_batch.h"
#include "worker/data/line_parsers.h"
#include "worker/data/line_reader.h"

namespace ps::data {

class LineFormat {
 public:
  // The format of the file `lines` reads, which must be at its first line:
  // for kCsv its header is read from it (and so passed) and resolved
  // against `csv_spec`; other formats take no spec and read nothing.
  // kInvalidArgument for a spec that is wrong, missing or not wanted, and
  // for a CSV file without a header line.
  static StatusOr<LineFormat> Open(DataFormat format,
                                   const std::string& csv_spec,
                                   LineReader* lines);

  LineFormat() = default;  // Criteo TSV

  Status Parse(std::string_view line, ExampleBatch* batch) const;

  DataFormat format() const { return format_; }
  // Whether the file's first line is a header, not an example.
  bool has_header() const { return csv_ != nullptr; }
  // The CSV layout; nullptr for other formats.
  const CsvLayout* csv() const { return csv_.get(); }

 private:
  DataFormat format_ = DataFormat::kCriteo;
  std::shared_ptr<const CsvLayout> csv_;
};

}  // namespace ps::data
