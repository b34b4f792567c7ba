// The benchmark report every scripts/bench_*.sh writes: one table on stdout
// and, with --json, {"results": [{"name", "value", "unit", "peer",
// "peer_value", "ratio"}]} (null where a figure or its peer is missing).
//
// Input, one item per line ('#' starts a comment; "a b" in double quotes
// is one word):
//   NAME VALUE [UNIT ...]             a sample; a name given several times
//                                     counts with its median (the unit is
//                                     for people reading the input)
//   row FIGURE UNIT OURS PEER BETTER [PEER LABEL ...]
//   extra FIGURE UNIT OURS PEER BETTER [PEER LABEL ...]
// A row is a figure of the table and the JSON, an extra one of the table
// only. OURS and PEER are a sample name (with an optional "*FACTOR", e.g.
// bytes_per_second*1e-9), a number, or "-" (none). BETTER says how the ratio
// reads, above 1 meaning we are ahead: "higher" (ours / peer), "lower"
// (peer / ours) or "-" (no ratio). The label is the rest of the line ("-" or
// nothing: null).
//
// Thread-safety: a Report is a value used by one thread at a time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ps::bench {

enum class Better { kHigher, kLower, kNone };

struct Figure {
  std::string name;
  std::string unit;
  std::optional<double> value;
  std::optional<std::string> peer;  // the label
  std::optional<double> peer_value;
  std::optional<double> ratio;
  bool in_json = true;
};

class Report {
 public:
  // Adds the lines of `text`; kInvalidArgument names the bad line.
  Status Add(std::string_view text);
  // The figures, samples resolved, in the order their rows came.
  std::vector<Figure> Figures() const;
  // A table for people: every figure, numbers to 4 digits, "-" for null.
  std::string Table() const;
  // The JSON document of the rows (not the extras), with a final newline.
  std::string Json() const;

 private:
  struct Row {
    std::string figure, unit, ours, peer, label;
    Better better = Better::kNone;
    bool in_json = true;
  };
  std::optional<double> Resolve(const std::string& ref) const;
  std::map<std::string, std::vector<double>> samples_;
  std::vector<Row> rows_;
};

// Shortest text that reads back as the same double ("null" for nullopt).
std::string FormatNumber(std::optional<double> v);

}  // namespace ps::bench
