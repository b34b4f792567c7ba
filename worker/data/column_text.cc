#include "worker/data/column_text.h"

#include <charconv>

namespace ps::data {

std::string_view WithoutPlusSign(std::string_view s) {
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  return s;
}

bool ParseLabel(std::string_view s, float* label) {
  s = WithoutPlusSign(s);
  double v;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  if (v == 1.0) {
    *label = 1.0f;
    return true;
  }
  if (v == 0.0 || v == -1.0) {
    *label = 0.0f;
    return true;
  }
  return false;
}

std::string Clip(std::string_view s) {
  std::string out(s.substr(0, 32));
  if (s.size() > 32) out.append("...");
  return out;
}

}  // namespace ps::data
