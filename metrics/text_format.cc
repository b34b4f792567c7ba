#include "metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace ps::metrics {
namespace {

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AppendLabels(const Labels& labels, const char* extra_name,
                  const std::string& extra_value, std::string* out) {
  if (labels.empty() && extra_name == nullptr) return;
  out->push_back('{');
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out->push_back(',');
    first = false;
    *out += name;
    *out += "=\"";
    *out += EscapeLabelValue(value);
    out->push_back('"');
  }
  if (extra_name != nullptr) {
    if (!first) out->push_back(',');
    *out += extra_name;
    *out += "=\"";
    *out += extra_value;
    out->push_back('"');
  }
  out->push_back('}');
}

void AppendLine(const std::string& name, const Labels& labels,
                const char* extra_name, const std::string& extra_value,
                const std::string& value, std::string* out) {
  *out += name;
  AppendLabels(labels, extra_name, extra_value, out);
  out->push_back(' ');
  *out += value;
  out->push_back('\n');
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string RenderText(const std::vector<Family>& families) {
  std::string out;
  for (const Family& f : families) {
    out += "# HELP " + f.name + " " + EscapeHelp(f.help) + "\n";
    out += "# TYPE " + f.name + " " + TypeName(f.type) + "\n";
    if (f.type != MetricType::kHistogram) {
      for (const Sample& s : f.samples) {
        AppendLine(f.name, s.labels, nullptr, "", FormatValue(s.value), &out);
      }
      continue;
    }
    for (const HistogramSample& h : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
        cumulative += i < h.bucket_counts.size() ? h.bucket_counts[i] : 0;
        AppendLine(f.name + "_bucket", h.labels, "le",
                   FormatValue(h.upper_bounds[i]), std::to_string(cumulative),
                   &out);
      }
      AppendLine(f.name + "_bucket", h.labels, "le", "+Inf",
                 std::to_string(h.count), &out);
      AppendLine(f.name + "_sum", h.labels, nullptr, "", FormatValue(h.sum),
                 &out);
      AppendLine(f.name + "_count", h.labels, nullptr, "",
                 std::to_string(h.count), &out);
    }
  }
  return out;
}

bool ValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

bool ValidLabelName(const std::string& name) {
  return ValidMetricName(name) && name.find(':') == std::string::npos &&
         name.rfind("__", 0) != 0;
}

}  // namespace ps::metrics
