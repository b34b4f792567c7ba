#include "worker/data/csv_layout.h"

#include <charconv>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "worker/data/column_text.h"
#include "worker/data/feature_hash.h"

namespace ps::data {
namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

std::vector<std::string> SplitNames(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    names.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

StatusOr<char> ParseSeparator(std::string_view value) {
  if (value == "comma") return ',';
  if (value == "tab" || value == "\\t") return '\t';
  if (value == "semicolon") return ';';
  if (value == "pipe") return '|';
  if (value.size() == 1 && value[0] != '"' && value[0] != '\n') {
    return value[0];
  }
  return InvalidArgument("sep='" + Clip(value) +
                         "' is not one character or comma, tab, semicolon, "
                         "pipe");
}

// Splits a line into its fields (quoted ones unquoted into *storage, whose
// elements do not move as it grows, and which must outlive the views).
// kInvalidArgument for a quote left open or text after a closing quote.
Status SplitFields(std::string_view line, char sep,
                   std::vector<std::string_view>* fields,
                   std::deque<std::string>* storage) {
  fields->clear();
  storage->clear();
  size_t at = 0;
  for (;;) {
    if (at < line.size() && line[at] == '"') {
      std::string value;
      size_t i = at + 1;
      for (;;) {
        if (i >= line.size()) {
          return InvalidArgument(
              "a quoted field is not closed on its line (a field across "
              "lines is not supported)");
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            value.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        value.push_back(line[i++]);
      }
      if (i < line.size() && line[i] != sep) {
        return InvalidArgument("text after the closing quote of field " +
                               std::to_string(fields->size() + 1));
      }
      storage->push_back(std::move(value));
      fields->push_back(storage->back());
      if (i >= line.size()) return Status::OK();
      at = i + 1;
      continue;
    }
    const size_t end = line.find(sep, at);
    fields->push_back(line.substr(
        at, end == std::string_view::npos ? std::string_view::npos : end - at));
    if (end == std::string_view::npos) return Status::OK();
    at = end + 1;
  }
}

bool ParseNumber(std::string_view s, int64_t* rounded) {
  s = WithoutPlusSign(s);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *rounded);
  if (ec == std::errc() && end == s.data() + s.size()) return true;
  double v;
  auto [dend, dec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (dec != std::errc() || dend != s.data() + s.size() || !std::isfinite(v) ||
      std::fabs(v) >= 9.2e18) {
    return false;
  }
  *rounded = std::llround(v);
  return true;
}

}  // namespace

StatusOr<CsvSpec> CsvSpec::Parse(std::string_view text) {
  CsvSpec spec;
  bool has_sep = false;
  while (!text.empty()) {
    const size_t space = text.find(' ');
    std::string_view item = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view()
                                           : text.substr(space + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq + 1 == item.size()) {
      return InvalidArgument("csv spec item '" + Clip(item) +
                             "' is not role=NAMES (label=, categorical=, "
                             "numeric=, ignore=, sep=)");
    }
    const std::string_view role = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (role == "label") {
      if (!spec.label.empty()) {
        return InvalidArgument("csv spec names label= twice");
      }
      spec.label = std::string(value);
    } else if (role == "numeric" || role == "ignore" || role == "categorical") {
      std::vector<std::string>& names = role == "numeric"  ? spec.numeric
                                        : role == "ignore" ? spec.ignore
                                                           : spec.categorical;
      for (auto& n : SplitNames(value)) names.push_back(std::move(n));
    } else if (role == "sep") {
      if (has_sep) return InvalidArgument("csv spec names sep= twice");
      PS_ASSIGN_OR_RETURN(spec.separator, ParseSeparator(value));
      has_sep = true;
    } else {
      return InvalidArgument("csv spec role '" + Clip(role) +
                             "' is not label, categorical, numeric, ignore or "
                             "sep");
    }
  }
  if (spec.label.empty()) {
    return InvalidArgument("csv spec names no label column (label=NAME)");
  }
  return spec;
}

StatusOr<CsvLayout> CsvLayout::FromHeader(const CsvSpec& spec,
                                          std::string_view header) {
  if (header.substr(0, kByteOrderMark.size()) == kByteOrderMark) {
    header.remove_prefix(kByteOrderMark.size());
  }
  std::vector<std::string_view> names;
  std::deque<std::string> storage;
  PS_RETURN_IF_ERROR(SplitFields(header, spec.separator, &names, &storage)
                         .WithContext("the header line"));
  CsvLayout layout;
  layout.separator_ = spec.separator;
  std::map<std::string, size_t, std::less<>> index;
  for (std::string_view name : names) {
    if (!index.emplace(std::string(name), layout.columns_.size()).second) {
      return InvalidArgument("the header names column '" + Clip(name) +
                             "' twice");
    }
    layout.columns_.push_back({std::string(name), Role::kCategorical, 0});
  }
  // Every column the spec names must be in the header, under one role.
  std::vector<bool> named(layout.columns_.size(), false);
  auto assign = [&](const std::string& name, Role role,
                    std::string_view what) -> Status {
    auto it = index.find(name);
    if (it == index.end()) {
      std::string known;
      for (size_t i = 0; i < names.size() && i < 30; ++i) {
        known += (i ? ", " : "") + std::string(names[i]);
      }
      if (names.size() > 30) known += ", ...";
      return InvalidArgument("csv spec " + std::string(what) + " column '" +
                             Clip(name) + "' is not in the header (" + known +
                             ")");
    }
    if (named[it->second]) {
      return InvalidArgument("csv spec names column '" + Clip(name) +
                             "' twice");
    }
    named[it->second] = true;
    layout.columns_[it->second].role = role;
    return Status::OK();
  };
  PS_RETURN_IF_ERROR(assign(spec.label, Role::kLabel, "label"));
  for (const auto& n : spec.numeric) {
    PS_RETURN_IF_ERROR(assign(n, Role::kNumeric, "numeric"));
  }
  for (const auto& n : spec.ignore) {
    PS_RETURN_IF_ERROR(assign(n, Role::kIgnored, "ignore"));
  }
  for (const auto& n : spec.categorical) {
    PS_RETURN_IF_ERROR(assign(n, Role::kCategorical, "categorical"));
  }
  for (size_t i = 0; i < layout.columns_.size(); ++i) {
    Column& c = layout.columns_[i];
    // With an explicit categorical list, the columns no role names are
    // read past.
    if (!named[i] && !spec.categorical.empty()) c.role = Role::kIgnored;
    if (c.role == Role::kCategorical || c.role == Role::kNumeric) {
      c.field = layout.num_fields();
      layout.field_names_.push_back(c.name);
    }
  }
  if (layout.field_names_.empty()) {
    return InvalidArgument("the csv spec leaves no feature column");
  }
  return layout;
}

Status CsvLayout::ParseValue(const Column& column, std::string_view value,
                             ExampleBatch* batch, float* label) const {
  switch (column.role) {
    case Role::kLabel:
      if (!ParseLabel(value, label)) {
        return InvalidArgument("label " + column.name + " '" + Clip(value) +
                               "' is not 0/1 or -1/+1");
      }
      return Status::OK();
    case Role::kIgnored:
      return Status::OK();
    case Role::kCategorical:
      batch->AddFeature(value.empty() ? MissingFeature(column.field)
                                      : HashFeature(column.field, value),
                        1.0f, column.field);
      return Status::OK();
    case Role::kNumeric: {
      if (value.empty()) {
        batch->AddFeature(MissingFeature(column.field), 1.0f, column.field);
        return Status::OK();
      }
      int64_t v;
      if (!ParseNumber(value, &v)) {
        return InvalidArgument("numeric column " + column.name + " '" +
                               Clip(value) + "' is not a number");
      }
      // Negative numbers are bucketed by magnitude too (LogBucket keeps
      // every one below 3 apart), on their own side.
      const int64_t bucket = v >= 0 ? LogBucket(v) : -1 - LogBucket(-v);
      batch->AddFeature(HashBucket(column.field, bucket), 1.0f, column.field);
      return Status::OK();
    }
  }
  return Internal("unknown column role");
}

Status CsvLayout::ParseLine(std::string_view line, ExampleBatch* batch) const {
  // Per-thread scratch: ParseLine runs on the trainer's parsing threads.
  thread_local std::vector<std::string_view> fields;
  thread_local std::deque<std::string> storage;
  Status s = SplitFields(line, separator_, &fields, &storage);
  if (!s.ok()) return s;
  if (fields.size() != columns_.size()) {
    return InvalidArgument("has " + std::to_string(fields.size()) +
                           " columns, the header " +
                           std::to_string(columns_.size()));
  }
  float label = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    s = ParseValue(columns_[i], fields[i], batch, &label);
    if (!s.ok()) {
      batch->AbandonExample();
      return s;
    }
  }
  batch->EndExample(label);
  return Status::OK();
}

}  // namespace ps::data
