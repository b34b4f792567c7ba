// CsvLayout: how the columns of a CSV (or TSV) click log with a header line
// become an example. The user's spec (CsvSpec) names the columns by role;
// the file's header says where each one is (CsvLayout::FromHeader); every
// data line is then split and turned into an example (ParseLine).
//
// Spec: space-separated items, e.g. "label=click ignore=id numeric=hour":
//   label=NAME         the label column (0/1, or -1/+1); required
//   numeric=A,B,...    integer-valued columns (counts, prices): log-bucketed
//                      like Criteo's integer columns (feature_hash.h); a
//                      number with a fraction is rounded first
//   ignore=A,B,...     columns read past (row ids, timestamps)
//   categorical=A,...  the categorical columns (one hashed feature each);
//                      default: every column not named otherwise
//   sep=C              the separator: one character, or comma, tab,
//                      semicolon, pipe (default comma)
// Feature columns (categorical and numeric) are the model's fields,
// numbered 0, 1, ... in the header's order; an empty value is the field's
// "missing" feature. A field may be quoted ("a,b"; "" is a quote inside
// one); a quoted field cannot span lines. A UTF-8 byte order mark before
// the header is ignored.
//
// Thread-safety: immutable once made; ParseLine may run on many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "worker/data/example_batch.h"

namespace ps::data {

struct CsvSpec {
  std::string label;
  std::vector<std::string> numeric;
  std::vector<std::string> ignore;
  std::vector<std::string> categorical;  // empty: every other column
  char separator = ',';

  // kInvalidArgument naming the item that is wrong.
  static StatusOr<CsvSpec> Parse(std::string_view text);
};

class CsvLayout {
 public:
  // kInvalidArgument when a column the spec names is not in the header, a
  // column is named twice, or no feature column is left.
  static StatusOr<CsvLayout> FromHeader(const CsvSpec& spec,
                                        std::string_view header);

  // Adds the line's example to *batch, or returns kInvalidArgument saying
  // what is wrong (and adds nothing).
  Status ParseLine(std::string_view line, ExampleBatch* batch) const;

  // The feature columns' names, in field order.
  const std::vector<std::string>& field_names() const { return field_names_; }
  uint32_t num_fields() const {
    return static_cast<uint32_t>(field_names_.size());
  }
  size_t num_columns() const { return columns_.size(); }

 private:
  enum class Role : uint8_t { kLabel, kCategorical, kNumeric, kIgnored };
  struct Column {
    std::string name;
    Role role = Role::kCategorical;
    uint32_t field = 0;  // kCategorical and kNumeric
  };

  CsvLayout() = default;
  Status ParseValue(const Column& column, std::string_view value,
                    ExampleBatch* batch, float* label) const;

  char separator_ = ',';
  std::vector<Column> columns_;
  std::vector<std::string> field_names_;
};

}  // namespace ps::data
