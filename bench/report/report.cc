#include "bench/report/report.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/json_string.h"

namespace ps::bench {
namespace {

// Words split at blanks; "a b" in double quotes is one word.
std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
      ++i;
    if (i == line.size()) break;
    std::string w;
    if (line[i] == '"') {
      size_t end = line.find('"', i + 1);
      if (end == std::string_view::npos) end = line.size();
      w = std::string(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else {
      while (i < line.size() &&
             !std::isspace(static_cast<unsigned char>(line[i])))
        w += line[i++];
    }
    words.push_back(std::move(w));
  }
  return words;
}

std::optional<double> ParseNumber(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Short(std::optional<double> v) {
  if (!v) return "-";
  char buf[32];
  // Four digits; large values whole (141224, not 1.412e+05).
  std::snprintf(buf, sizeof(buf), std::abs(*v) >= 1e4 ? "%.0f" : "%.4g", *v);
  return buf;
}

}  // namespace

std::string FormatNumber(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "null";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), *v);
  return ec == std::errc() ? std::string(buf, end) : "null";
}

Status Report::Add(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (size_t hash = line.find('#'); hash != std::string::npos)
      line.erase(hash);
    std::vector<std::string> w = Words(line);
    if (w.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("line " + std::to_string(number) + " '" + line +
                             "': " + why);
    };
    if (w[0] == "row" || w[0] == "extra") {
      if (w.size() < 6) return bad("a row needs FIGURE UNIT OURS PEER BETTER");
      Row r;
      r.figure = w[1];
      r.unit = w[2];
      r.ours = w[3];
      r.peer = w[4];
      if (w[5] == "higher") {
        r.better = Better::kHigher;
      } else if (w[5] == "lower") {
        r.better = Better::kLower;
      } else if (w[5] != "-") {
        return bad("BETTER is higher, lower or -, not '" + w[5] + "'");
      }
      for (size_t i = 6; i < w.size(); ++i)
        r.label += (i > 6 ? " " : "") + w[i];
      if (r.label == "-") r.label.clear();
      r.in_json = w[0] == "row";
      rows_.push_back(std::move(r));
      continue;
    }
    if (w.size() < 2) return bad("a sample is NAME VALUE [UNIT]");
    auto v = ParseNumber(w[1]);
    if (!v) return bad("'" + w[1] + "' is not a number");
    samples_[w[0]].push_back(*v);
  }
  return Status::OK();
}

std::optional<double> Report::Resolve(const std::string& ref) const {
  if (ref == "-") return std::nullopt;
  if (auto literal = ParseNumber(ref)) return literal;
  std::string name = ref;
  double factor = 1;
  if (size_t star = ref.rfind('*'); star != std::string::npos) {
    if (auto f = ParseNumber(std::string_view(ref).substr(star + 1))) {
      name = ref.substr(0, star);
      factor = *f;
    }
  }
  auto it = samples_.find(name);
  if (it == samples_.end() || it->second.empty()) return std::nullopt;
  return Median(it->second) * factor;
}

std::vector<Figure> Report::Figures() const {
  std::vector<Figure> out;
  for (const auto& r : rows_) {
    Figure f;
    f.name = r.figure;
    f.unit = r.unit;
    f.value = Resolve(r.ours);
    if (!r.label.empty()) f.peer = r.label;
    f.peer_value = Resolve(r.peer);
    if (f.value && f.peer_value && *f.value > 0 && *f.peer_value > 0) {
      if (r.better == Better::kHigher) f.ratio = *f.value / *f.peer_value;
      if (r.better == Better::kLower) f.ratio = *f.peer_value / *f.value;
      // Four digits, as the table shows it: more is noise.
      if (f.ratio) f.ratio = std::stod(Short(f.ratio));
    }
    f.in_json = r.in_json;
    out.push_back(std::move(f));
  }
  return out;
}

std::string Report::Table() const {
  std::vector<std::vector<std::string>> cells = {
      {"figure", "value", "unit", "peer", "peer value", "ratio"}};
  for (const auto& f : Figures()) {
    cells.push_back({f.name, Short(f.value), f.unit, f.peer.value_or("-"),
                     Short(f.peer_value), Short(f.ratio)});
  }
  std::vector<size_t> width(6, 0);
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool number = i == 1 || i == 4 || i == 5;
      std::string pad(width[i] - row[i].size(), ' ');
      line += (i ? "  " : "") + (number ? pad + row[i] : row[i] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Report::Json() const {
  std::string out = "{\n  \"results\": [";
  bool first = true;
  for (const auto& f : Figures()) {
    if (!f.in_json) continue;
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {\"name\": " + JsonString(f.name) +
           ", \"value\": " + FormatNumber(f.value) +
           ", \"unit\": " + JsonString(f.unit) +
           ", \"peer\": " + (f.peer ? JsonString(*f.peer) : "null") +
           ", \"peer_value\": " + FormatNumber(f.peer_value) +
           ", \"ratio\": " + FormatNumber(f.ratio) + "}";
  }
  out += first ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace ps::bench
