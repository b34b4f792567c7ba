#include "worker/train/example_source.h"

#include <algorithm>
#include <optional>

#include "protocol/shard_map.h"
#include "worker/data/line_parsers.h"

namespace ps::train {

StatusOr<DataSplit> DataSplitFromName(std::string_view name) {
  if (name == "lines") return DataSplit::kLines;
  if (name == "bytes") return DataSplit::kByteRanges;
  if (name == "auto") return DataSplit::kAuto;
  return InvalidArgument("split must be lines, bytes or auto, not '" +
                         std::string(name) + "'");
}

std::string_view DataSplitName(DataSplit split) {
  switch (split) {
    case DataSplit::kLines:
      return "lines";
    case DataSplit::kByteRanges:
      return "bytes";
    case DataSplit::kAuto:
      return "auto";
  }
  return "?";
}

StatusOr<std::unique_ptr<ExampleSource>> ExampleSource::Open(
    const std::string& path, const SourceOptions& options) {
  if (options.num_workers == 0 || options.worker_id >= options.num_workers) {
    return InvalidArgument("worker id " + std::to_string(options.worker_id) +
                           " is not below the number of workers " +
                           std::to_string(options.num_workers));
  }
  std::unique_ptr<ExampleSource> source(new ExampleSource(path, options));
  PS_ASSIGN_OR_RETURN(auto lines, data::LineReader::Open(path));
  PS_ASSIGN_OR_RETURN(
      source->format_,
      data::LineFormat::Open(options.format, options.csv_spec, lines.get()));
  source->compressed_ = lines->compressed();
  // A gzip file or a pipe (a shell's <(zcat ...)) has no byte to cut at.
  const std::optional<uint64_t> plain_bytes = lines->plain_bytes();
  source->file_bytes_ = plain_bytes.value_or(0);
  DataSplit split = options.split;
  if (split == DataSplit::kAuto) {
    split = plain_bytes ? DataSplit::kByteRanges : DataSplit::kLines;
  }
  source->split_ = split;
  if (split == DataSplit::kByteRanges) {
    if (options.holdout_every > 0 || options.holdout) {
      return InvalidArgument(
          "a held-out split needs the file split by lines, not bytes");
    }
    if (!plain_bytes) {
      return InvalidArgument(
          "data file " + path +
          (source->compressed_ ? " is gzip-compressed"
                               : " is not a regular file (a pipe?)") +
          ": it cannot be split into byte ranges (split it by lines)");
    }
    // 128-bit products: B x n does not fit 64 bits for every file size.
    const auto border = [&](uint64_t w) {
      return static_cast<uint64_t>(
          static_cast<unsigned __int128>(source->file_bytes_) * w /
          options.num_workers);
    };
    source->part_begin_ = border(options.worker_id);
    source->part_end_ = border(options.worker_id + 1);
  }
  PS_RETURN_IF_ERROR(source->Start(std::move(lines)));
  return source;
}

Status ExampleSource::Rewind() {
  PS_ASSIGN_OR_RETURN(auto lines, data::LineReader::Open(path_));
  return Start(std::move(lines));
}

Status ExampleSource::Start(std::unique_ptr<data::LineReader> lines) {
  if (split_ == DataSplit::kByteRanges) {
    PS_RETURN_IF_ERROR(lines->StartAt(part_begin_));
  }
  // A reader at byte 0 of a CSV file has its header next (Open read it
  // from its own reader already).
  std::string header;
  if (format_.has_header() && lines->offset() == 0 && !lines->Next(&header)) {
    PS_RETURN_IF_ERROR(lines->status());
  }
  std::lock_guard<std::mutex> lock(read_mu_);
  lines_ = std::move(lines);
  consumed_ = 0;
  return Status::OK();
}

bool ExampleSource::NextOwnLine(std::string* line) {
  for (;;) {
    if (lines_->offset() >= part_end_) return false;  // the next part's
    // Other workers' (and held-out) lines are passed without a copy.
    if (!Wanted(lines_->line_number())) {
      if (!lines_->SkipLine()) return false;
      continue;
    }
    return lines_->Next(line);
  }
}

std::string ExampleSource::Where(uint64_t line_number) const {
  std::string where = path_ + " line " + std::to_string(line_number);
  if (split_ == DataSplit::kByteRanges && part_begin_ > 0) {
    where += " of the part from byte " + std::to_string(part_begin_);
  }
  return where;
}

Status ExampleSource::Skip(uint64_t n) {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string line;
  uint64_t skipped = 0;
  while (skipped < n && NextOwnLine(&line)) {
    if (!line.empty()) ++skipped;
  }
  PS_RETURN_IF_ERROR(lines_->status());
  consumed_ += skipped;
  if (skipped < n) {
    return OutOfRange(path_ + " has " + std::to_string(skipped) +
                      " lines of this worker, fewer than the " +
                      std::to_string(n) + " to skip (a different file?)");
  }
  return Status::OK();
}

uint64_t ExampleSource::consumed() const {
  std::lock_guard<std::mutex> lock(read_mu_);
  return consumed_;
}

bool ExampleSource::Wanted(uint64_t i) const {
  if (split_ == DataSplit::kByteRanges) return true;  // the whole part
  const bool held_out =
      options_.holdout_every > 0 &&
      protocol::Mix64(i ^ (options_.seed * 0x9e3779b97f4a7c15ULL)) %
              options_.holdout_every ==
          0;
  if (options_.holdout) return held_out;
  return !held_out && i % options_.num_workers == options_.worker_id;
}

StatusOr<size_t> ExampleSource::Next(size_t max, data::ExampleBatch* batch,
                                     Scratch* scratch) {
  // A run of malformed lines must not look like the end of the file.
  while (true) {
    PS_ASSIGN_OR_RETURN(TakeResult r, Take(max, batch, scratch));
    if (r.added > 0 || r.taken == 0) return r.added;
  }
}

StatusOr<ExampleSource::TakeResult> ExampleSource::Take(
    size_t max, data::ExampleBatch* batch, Scratch* scratch) {
  size_t taken = 0;
  {
    std::lock_guard<std::mutex> lock(read_mu_);
    if (scratch->lines.size() < max) scratch->lines.resize(max);
    std::string* line = &scratch->lines[0].second;
    while (taken < max) {
      if (!NextOwnLine(line)) break;
      if (line->empty()) continue;
      scratch->lines[taken].first = lines_->line_number();
      if (++taken < max) line = &scratch->lines[taken].second;
    }
    consumed_ += taken;
    if (!lines_->status().ok()) return lines_->status();
  }
  size_t added = 0, malformed = 0;
  std::vector<std::string> notes;
  Status first_error;
  for (size_t i = 0; i < taken; ++i) {
    Status s = format_.Parse(scratch->lines[i].second, batch);
    if (s.ok()) {
      ++added;
      continue;
    }
    ++malformed;
    std::string where = Where(scratch->lines[i].first);
    if (options_.strict) {
      first_error = s.WithContext(where);
      break;
    }
    if (notes.size() < 5) notes.push_back(where + ": " + s.message());
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.lines += taken;
    stats_.examples += added;
    stats_.malformed += malformed;
    for (auto& n : notes) {
      if (stats_.first_malformed.size() < 5) {
        stats_.first_malformed.push_back(std::move(n));
      }
    }
  }
  if (!first_error.ok()) return first_error;
  return TakeResult{taken, added};
}

double ExampleSource::fraction_read() const {
  if (compressed_ || file_bytes_ == 0) return -1;
  const uint64_t end = std::min(part_end_, file_bytes_);
  if (end <= part_begin_) return 1.0;  // an empty part
  std::lock_guard<std::mutex> lock(read_mu_);
  const uint64_t at = std::clamp(lines_->offset(), part_begin_, end);
  return static_cast<double>(at - part_begin_) / (end - part_begin_);
}

data::ReaderStats ExampleSource::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace ps::train
