#include "core/access.h"

namespace ps::xfer {

std::string AccessToString(uint32_t access) {
  if ((access & kAllAccessFlags) == 0) return "local-only";
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (!(access & bit)) return;
    if (!out.empty()) out += '|';
    out += name;
  };
  add(kRemoteRead, "read");
  add(kRemoteWrite, "write");
  add(kRemoteAtomic, "atomic");
  add(kNotifyEvents, "notify-events");
  return out;
}

}  // namespace ps::xfer
