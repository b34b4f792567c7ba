// Parsers of one data line into an ExampleBatch. Each adds one example, or
// returns kInvalidArgument saying what is wrong with the line (and adds
// nothing).
//
// Criteo TSV: label, I1..I13 (integer counts), C1..C26 (categorical tokens,
// usually 8 hex digits), 40 tab-separated columns. An empty column is a
// missing value: it becomes the field's "missing" feature. Integers are
// log-bucketed (feature_hash.h); fields are numbered 0..38 (I1 = 0,
// C1 = 13).
//
// libsvm: "label index:value index:value ...", label 0/1 or -1/+1 (taken as
// 0/1); the index is hashed as the token of field 0.
// libffm: "label field:index:value ...": like libsvm with explicit fields.
//
// CSV (a header line, then delimited columns the user names by role) needs
// the layout its header gives: csv_layout.h, and line_format.h, which parses
// a line of any of these formats.
#pragma once

#include <string_view>

#include "base/status.h"
#include "worker/data/example_batch.h"

namespace ps::data {

inline constexpr int kCriteoIntegerColumns = 13;
inline constexpr int kCriteoCategoricalColumns = 26;
inline constexpr int kCriteoFields =
    kCriteoIntegerColumns + kCriteoCategoricalColumns;

enum class DataFormat { kCriteo, kLibsvm, kLibffm, kCsv };

// "criteo", "libsvm", "libffm", "csv" -> format; kInvalidArgument otherwise.
Status ParseDataFormat(std::string_view name, DataFormat* format);

Status ParseCriteoLine(std::string_view line, ExampleBatch* batch);
Status ParseLibsvmLine(std::string_view line, ExampleBatch* batch);
Status ParseLibffmLine(std::string_view line, ExampleBatch* batch);
// kCriteo, kLibsvm, kLibffm (kCsv: kInvalidArgument; use LineFormat).
Status ParseLine(DataFormat format, std::string_view line, ExampleBatch* batch);

}  // namespace ps::data
