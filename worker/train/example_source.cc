#include "worker/train/example_source.h"

#include <filesystem>
#include <fstream>

#include "protocol/shard_map.h"
#include "worker/data/line_parsers.h"

namespace ps::train {

StatusOr<std::unique_ptr<ExampleSource>> ExampleSource::Open(
    const std::string& path, const SourceOptions& options) {
  if (options.num_workers == 0 || options.worker_id >= options.num_workers) {
    return InvalidArgument("worker id " + std::to_string(options.worker_id) +
                           " is not below the number of workers " +
                           std::to_string(options.num_workers));
  }
  std::unique_ptr<ExampleSource> source(new ExampleSource(path, options));
  PS_RETURN_IF_ERROR(source->Rewind());
  std::error_code ec;
  source->file_bytes_ = std::filesystem::file_size(path, ec);
  if (ec) source->file_bytes_ = 0;
  std::ifstream head(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  head.read(reinterpret_cast<char*>(magic), 2);
  source->compressed_ = magic[0] == 0x1f && magic[1] == 0x8b;
  return source;
}

Status ExampleSource::Rewind() {
  PS_ASSIGN_OR_RETURN(auto lines, data::LineReader::Open(path_));
  std::lock_guard<std::mutex> lock(read_mu_);
  lines_ = std::move(lines);
  consumed_ = 0;
  return Status::OK();
}

Status ExampleSource::Skip(uint64_t n) {
  std::lock_guard<std::mutex> lock(read_mu_);
  std::string line;
  uint64_t skipped = 0;
  while (skipped < n) {
    if (!Wanted(lines_->line_number())) {
      if (!lines_->SkipLine()) break;
      continue;
    }
    if (!lines_->Next(&line)) break;
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
      // Other workers' (and held-out) lines are passed without a copy.
      if (!Wanted(lines_->line_number())) {
        if (!lines_->SkipLine()) break;
        continue;
      }
      if (!lines_->Next(line)) break;
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
    Status s =
        data::ParseLine(options_.format, scratch->lines[i].second, batch);
    if (s.ok()) {
      ++added;
      continue;
    }
    ++malformed;
    std::string where =
        path_ + " line " + std::to_string(scratch->lines[i].first);
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
  std::lock_guard<std::mutex> lock(read_mu_);
  return std::min(1.0, static_cast<double>(lines_->offset()) / file_bytes_);
}

data::ReaderStats ExampleSource::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace ps::train
