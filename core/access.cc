#include "core/access.h"

namespace ps::xfer {

std::string AccessToString(uint32_t access) {
  if ((access & kRemoteAll) == 0) return "local-only";
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (!(access & bit)) return;
    if (!out.empty()) out += '|';
    out += name;
  };
  add(kRemoteRead, "read");
  add(kRemoteWrite, "write");
  add(kRemoteAtomic, "atomic");
  return out;
}

}  // namespace ps::xfer
