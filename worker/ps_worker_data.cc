#include "worker/ps_worker_data.h"

#include <gflags/gflags.h>

#include "worker/data/line_format.h"
#include "worker/data/line_reader.h"

DEFINE_string(data_format, "criteo",
              "Format of both files: 'criteo' (label, I1..I13, C1..C26, "
              "tab-separated; empty fields are missing values), 'libsvm' "
              "(label id:value ...), 'libffm' (label field:id:value ...) or "
              "'csv' (a header line, then delimited columns: "
              "--csv_columns says which is which).");
DEFINE_string(csv_columns, "",
              "--data_format=csv: the header's columns by role, "
              "space-separated: label=NAME (0/1 or -1/+1; required), "
              "numeric=A,B (numbers, log-bucketed), ignore=A,B (read past: "
              "ids), categorical=A,B (default: every column not named), "
              "sep=C (one character, or comma, tab, semicolon, pipe; "
              "default comma). E.g. \"label=click ignore=id\" for an "
              "Avazu-style log. The feature columns are the model's fields "
              "in header order (deepfm's --num_fields follows from them). "
              "Values may be quoted; a line with another column count than "
              "the header is malformed.");

namespace ps::worker {

StatusOr<DataFlags> ResolveDataFlags(const std::string& train_data) {
  DataFlags flags;
  if (Status s = data::ParseDataFormat(FLAGS_data_format, &flags.format);
      !s.ok()) {
    return s.WithContext("--data_format");
  }
  flags.csv_spec = FLAGS_csv_columns;
  if (flags.format != data::DataFormat::kCsv) {
    if (!flags.csv_spec.empty()) {
      return InvalidArgument("--csv_columns is for --data_format=csv");
    }
    return flags;
  }
  if (flags.csv_spec.empty()) {
    return InvalidArgument(
        "--data_format=csv needs --csv_columns (e.g. \"label=click "
        "ignore=id\")");
  }
  // A pipe cannot be read twice: its header is the trainer's to read.
  if (!data::IsRegularFile(train_data)) return flags;
  PS_ASSIGN_OR_RETURN(auto lines, data::LineReader::Open(train_data));
  auto format =
      data::LineFormat::Open(flags.format, flags.csv_spec, lines.get());
  if (!format.ok()) return format.status().WithContext("--csv_columns");
  flags.csv_fields = format->csv()->num_fields();
  return flags;
}

}  // namespace ps::worker
