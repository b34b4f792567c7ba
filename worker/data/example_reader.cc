#include "worker/data/example_reader.h"

namespace ps::data {

StatusOr<std::unique_ptr<ExampleReader>> ExampleReader::Open(
    const std::string& path, const ReaderOptions& options) {
  PS_ASSIGN_OR_RETURN(auto lines, LineReader::Open(path));
  PS_ASSIGN_OR_RETURN(
      LineFormat format,
      LineFormat::Open(options.format, options.csv_spec, lines.get()));
  return std::unique_ptr<ExampleReader>(
      new ExampleReader(std::move(lines), std::move(format), options));
}

StatusOr<size_t> ExampleReader::Read(size_t max, ExampleBatch* batch) {
  size_t added = 0;
  while (added < max && lines_->Next(&line_)) {
    ++stats_.lines;
    if (line_.empty()) continue;
    Status s = format_.Parse(line_, batch);
    if (s.ok()) {
      ++added;
      continue;
    }
    ++stats_.malformed;
    std::string where =
        path() + " line " + std::to_string(lines_->line_number());
    if (options_.strict) return s.WithContext(where);
    if (static_cast<int>(stats_.first_malformed.size()) <
        options_.keep_malformed) {
      stats_.first_malformed.push_back(where + ": " + s.message());
    }
  }
  if (!lines_->status().ok()) return lines_->status();
  stats_.examples += added;
  return added;
}

Status ExampleReader::Skip(uint64_t examples) {
  ExampleBatch scratch;
  while (examples > 0) {
    scratch.Clear();
    size_t want = static_cast<size_t>(std::min<uint64_t>(examples, 4096));
    PS_ASSIGN_OR_RETURN(size_t got, Read(want, &scratch));
    if (got == 0) break;
    examples -= got;
  }
  return Status::OK();
}

}  // namespace ps::data
