#include "worker/data/line_format.h"

namespace ps::data {

StatusOr<LineFormat> LineFormat::Open(DataFormat format,
                                      const std::string& csv_spec,
                                      LineReader* lines) {
  LineFormat f;
  f.format_ = format;
  if (format != DataFormat::kCsv) {
    if (!csv_spec.empty()) {
      return InvalidArgument(
          "a csv column spec is given, but the data format is not csv");
    }
    return f;
  }
  if (csv_spec.empty()) {
    return InvalidArgument(
        "the csv format needs a column spec (e.g. \"label=click ignore=id\")");
  }
  PS_ASSIGN_OR_RETURN(CsvSpec spec, CsvSpec::Parse(csv_spec));
  std::string header;
  if (!lines->Next(&header)) {
    PS_RETURN_IF_ERROR(lines->status());
    return InvalidArgument(lines->path() +
                           " is empty: a csv file starts "
                           "with a header line");
  }
  auto layout = CsvLayout::FromHeader(spec, header);
  if (!layout.ok()) {
    return layout.status().WithContext(lines->path() + " line 1");
  }
  f.csv_ = std::make_shared<const CsvLayout>(std::move(layout).value());
  return f;
}

Status LineFormat::Parse(std::string_view line, ExampleBatch* batch) const {
  if (csv_ != nullptr) return csv_->ParseLine(line, batch);
  return ParseLine(format_, line, batch);
}

}  // namespace ps::data
