#include "protocol/transport_name.h"

#include <string>

namespace ps::protocol {

std::string_view TransportChoiceName(xfer::TransportChoice choice) {
  switch (choice) {
    case xfer::TransportChoice::kAuto:
      return "auto";
    case xfer::TransportChoice::kShm:
      return "shm";
    case xfer::TransportChoice::kTcp:
      return "tcp";
    case xfer::TransportChoice::kVerbs:
      return "verbs";
  }
  return "?";
}

StatusOr<xfer::TransportChoice> TransportChoiceFromName(
    std::string_view name,
    std::initializer_list<xfer::TransportChoice> accepted) {
  std::string list;
  size_t i = 0;
  for (xfer::TransportChoice c : accepted) {
    if (TransportChoiceName(c) == name) return c;
    if (i > 0) list += i + 1 == accepted.size() ? " or " : ", ";
    list += TransportChoiceName(c);
    ++i;
  }
  return InvalidArgument("must be " + list + ", not '" + std::string(name) +
                         "'");
}

}  // namespace ps::protocol
