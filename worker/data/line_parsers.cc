#include "worker/data/line_parsers.h"

#include <charconv>
#include <cmath>
#include <string>

#include "worker/data/column_text.h"
#include "worker/data/feature_hash.h"

namespace ps::data {
namespace {

// Splits off the text before `sep` (or all of it) and advances `rest`.
std::string_view NextToken(std::string_view* rest, char sep) {
  size_t pos = rest->find(sep);
  std::string_view token = rest->substr(0, pos);
  *rest = pos == std::string_view::npos ? std::string_view()
                                        : rest->substr(pos + 1);
  return token;
}

bool ParseInt(std::string_view s, int64_t* v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

bool ParseFloat(std::string_view s, float* v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*v);
}

Status Malformed(ExampleBatch* batch, std::string message) {
  batch->AbandonExample();
  return InvalidArgument(std::move(message));
}

// "index:value" pairs after the label, with an optional leading field.
Status ParseSparseLine(std::string_view line, bool with_field,
                       ExampleBatch* batch) {
  std::string_view rest = line;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) {
    rest.remove_prefix(1);
  }
  std::string_view label_text = NextToken(&rest, ' ');
  float label;
  if (!ParseLabel(label_text, &label)) {
    return Malformed(batch,
                     "label '" + Clip(label_text) + "' is not 0/1 or -1/+1");
  }
  while (!rest.empty()) {
    std::string_view item = NextToken(&rest, ' ');
    if (item.empty() || item == "\t") continue;
    uint32_t field = 0;
    if (with_field) {
      std::string_view f = NextToken(&item, ':');
      int64_t fv;
      if (!ParseInt(f, &fv) || fv < 0 || fv > 1'000'000) {
        return Malformed(batch, "bad field in '" + Clip(f) + "'");
      }
      field = static_cast<uint32_t>(fv);
    }
    size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) {
      return Malformed(batch, "feature '" + Clip(item) + "' has no ':value'");
    }
    std::string_view index = item.substr(0, colon);
    float value;
    if (index.empty() || !ParseFloat(item.substr(colon + 1), &value)) {
      return Malformed(batch, "bad feature '" + Clip(item) + "'");
    }
    batch->AddFeature(HashFeature(field, index), value, field);
  }
  batch->EndExample(label);
  return Status::OK();
}

}  // namespace

Status ParseDataFormat(std::string_view name, DataFormat* format) {
  if (name == "criteo") {
    *format = DataFormat::kCriteo;
  } else if (name == "libsvm") {
    *format = DataFormat::kLibsvm;
  } else if (name == "libffm") {
    *format = DataFormat::kLibffm;
  } else if (name == "csv") {
    *format = DataFormat::kCsv;
  } else {
    return InvalidArgument("unknown data format '" + std::string(name) +
                           "' (criteo, libsvm, libffm, csv)");
  }
  return Status::OK();
}

Status ParseCriteoLine(std::string_view line, ExampleBatch* batch) {
  std::string_view rest = line;
  std::string_view label_text = NextToken(&rest, '\t');
  float label;
  if (!ParseLabel(label_text, &label)) {
    return Malformed(batch, "label '" + Clip(label_text) + "' is not 0 or 1");
  }
  for (uint32_t field = 0; field < kCriteoFields; ++field) {
    if (rest.data() == nullptr) {
      return Malformed(
          batch, "has " + std::to_string(field + 1) + " columns, expected 40");
    }
    std::string_view col = NextToken(&rest, '\t');
    if (col.empty()) {
      batch->AddFeature(MissingFeature(field), 1.0f, field);
    } else if (field < kCriteoIntegerColumns) {
      int64_t v;
      if (!ParseInt(col, &v)) {
        std::string message = "I";
        message.append(std::to_string(field + 1))
            .append(" '")
            .append(Clip(col))
            .append("' is not an integer");
        return Malformed(batch, std::move(message));
      }
      batch->AddFeature(HashBucket(field, LogBucket(v)), 1.0f, field);
    } else {
      batch->AddFeature(HashFeature(field, col), 1.0f, field);
    }
  }
  if (rest.data() != nullptr) {
    return Malformed(batch, "has more than 40 columns");
  }
  batch->EndExample(label);
  return Status::OK();
}

Status ParseLibsvmLine(std::string_view line, ExampleBatch* batch) {
  return ParseSparseLine(line, /*with_field=*/false, batch);
}

Status ParseLibffmLine(std::string_view line, ExampleBatch* batch) {
  return ParseSparseLine(line, /*with_field=*/true, batch);
}

Status ParseLine(DataFormat format, std::string_view line,
                 ExampleBatch* batch) {
  switch (format) {
    case DataFormat::kCriteo:
      return ParseCriteoLine(line, batch);
    case DataFormat::kLibsvm:
      return ParseLibsvmLine(line, batch);
    case DataFormat::kLibffm:
      return ParseLibffmLine(line, batch);
    case DataFormat::kCsv:
      return InvalidArgument("a csv line needs its file's header (LineFormat)");
  }
  return InvalidArgument("unknown data format");
}

}  // namespace ps::data
