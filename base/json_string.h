// JsonString: a string as a JSON string literal, quotes included
// ("a\"b" for a"b), control characters as \u00XX. For the few places that
// write JSON by hand (bench/report, ps_ckpt export's tables.json).
//
// Thread-safety: a pure function.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ps {

inline std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace ps
