// NumbersAfter: the numbers a program printed after a label ("AUC 0.71",
// "step 40"), for the tests that read what ps_worker and ps_ckpt print.
// Plain string search rather than std::regex: GCC 12 with sanitizers warns
// (-Werror) inside libstdc++'s regex.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace ps::testing {

// Every number (strtod: also nan, inf) that directly follows an occurrence
// of `label` in `text`, in order.
inline std::vector<double> NumbersAfter(const std::string& text,
                                        const std::string& label) {
  std::vector<double> out;
  for (size_t at = text.find(label); at != std::string::npos;
       at = text.find(label, at + 1)) {
    const char* start = text.c_str() + at + label.size();
    char* end = nullptr;
    const double value = std::strtod(start, &end);
    if (end != start) out.push_back(value);
  }
  return out;
}

// The lines of `text` that contain `part`.
inline std::vector<std::string> LinesWith(const std::string& text,
                                          const std::string& part) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (line.find(part) != std::string::npos) out.push_back(std::move(line));
    begin = end + 1;
  }
  return out;
}

}  // namespace ps::testing
