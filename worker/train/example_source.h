// ExampleSource: the examples of one data file that belong to this worker,
// shared by the trainer's threads. How the file is shared (DataSplit):
//   kLines: line i (0-based, counting every line of the file) is
//     held out   when holdout_every > 0 and Mix64(i ^ seed) % holdout_every
//                == 0 (the same lines for every worker and every epoch), and
//     this worker's when it is not held out and i % num_workers ==
//     worker_id.
//   A source opened with `holdout` yields the held-out lines instead (all
//   of them, for evaluation on one worker).
//   kByteRanges: worker w reads the lines that start in bytes
//     [w B / n, (w + 1) B / n) of a plain file of B bytes (n workers), as
//     Hadoop and dmlc-core split a text file. A worker then reads only its
//     own part of the file, where kLines makes every worker read all of it;
//     the parts hold about as many lines as bytes, not exactly as many.
//     No holdout; a gzip file cannot be entered mid-stream, and a pipe has
//     no size (both kInvalidArgument).
//   kAuto: kByteRanges for a plain file, kLines for gzip or a pipe.
//
// A CSV file's header (its first line) is read once, at Open, for the
// column layout, and passed by every reader that starts at byte 0.
//
// Threads call Next concurrently: the raw lines are taken under a lock (a
// cheap copy) and parsed outside it, so parsing runs in parallel. Malformed
// lines are skipped and counted, the first few remembered with their line
// number, unless `strict` makes the first one an error.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status_or.h"
#include "worker/data/example_batch.h"
#include "worker/data/example_reader.h"
#include "worker/data/line_format.h"
#include "worker/data/line_reader.h"

namespace ps::train {

enum class DataSplit { kLines, kByteRanges, kAuto };

// "lines", "bytes" or "auto"; kInvalidArgument for another name.
StatusOr<DataSplit> DataSplitFromName(std::string_view name);
std::string_view DataSplitName(DataSplit split);

struct SourceOptions {
  data::DataFormat format = data::DataFormat::kCriteo;
  std::string csv_spec;  // kCsv: the columns (worker/data/csv_layout.h)
  bool strict = false;
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  DataSplit split = DataSplit::kLines;
  uint32_t holdout_every = 0;  // 0: no held-out split (kLines only)
  bool holdout = false;        // yield the held-out lines (all workers')
  uint64_t seed = 1;
};

class ExampleSource {
 public:
  // kNotFound / kIOError for the file; kInvalidArgument for kByteRanges
  // with a gzip file, a pipe or a holdout, and for a csv spec that does not
  // fit the file's header.
  static StatusOr<std::unique_ptr<ExampleSource>> Open(
      const std::string& path, const SourceOptions& options);

  // Per-thread buffers for Next.
  struct Scratch {
    std::vector<std::pair<uint64_t, std::string>> lines;  // (number, text)
  };
  // Appends up to `max` examples to *batch; 0 at the end of the file.
  StatusOr<size_t> Next(size_t max, data::ExampleBatch* batch,
                        Scratch* scratch);
  // Starts over from the first line (next epoch).
  Status Rewind();
  // Reads past the next `n` lines of ours without parsing them: a resumed
  // epoch continues where the checkpointed run was (consumed() lines in).
  // kOutOfRange if the file has fewer.
  Status Skip(uint64_t n);
  // Lines of ours read since the last Rewind (malformed ones included):
  // the data position a checkpoint records.
  uint64_t consumed() const;

  // Fraction of this worker's part read so far (kLines: of the file), or
  // -1 when unknown (gzip).
  double fraction_read() const;
  // How the file is shared: kLines or kByteRanges (kAuto resolved).
  DataSplit split() const { return split_; }
  data::ReaderStats stats() const;
  const std::string& path() const { return path_; }
  const data::LineFormat& format() const { return format_; }

 private:
  ExampleSource(std::string path, SourceOptions options)
      : path_(std::move(path)), options_(options) {}
  bool Wanted(uint64_t line_index) const;
  // Reads from the start of this worker's share with `lines`, just opened.
  Status Start(std::unique_ptr<data::LineReader> lines);
  // The next line of this worker into *line (under read_mu_); false at the
  // end of its share of the file or on an error (lines_->status()).
  bool NextOwnLine(std::string* line);
  // "<path> line 17" for a line number of lines_ (kByteRanges: counted from
  // the start of this worker's part, which the text says).
  std::string Where(uint64_t line_number) const;
  struct TakeResult {
    size_t taken = 0;  // lines of ours read
    size_t added = 0;  // examples parsed from them
  };
  StatusOr<TakeResult> Take(size_t max, data::ExampleBatch* batch,
                            Scratch* scratch);

  const std::string path_;
  const SourceOptions options_;
  data::LineFormat format_;
  DataSplit split_ = DataSplit::kLines;
  uint64_t file_bytes_ = 0;
  // This worker's part: the lines that start in [part_begin_, part_end_).
  uint64_t part_begin_ = 0;
  uint64_t part_end_ = UINT64_MAX;
  bool compressed_ = false;

  mutable std::mutex read_mu_;  // the line reader
  std::unique_ptr<data::LineReader> lines_;
  uint64_t consumed_ = 0;

  mutable std::mutex stats_mu_;
  data::ReaderStats stats_;
};

}  // namespace ps::train
