#include "core/transport_name.h"

#include <string>

namespace ps::xfer {

std::string_view TransportChoiceName(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kAuto:
      return "auto";
    case TransportChoice::kShm:
      return "shm";
    case TransportChoice::kTcp:
      return "tcp";
    case TransportChoice::kVerbs:
      return "verbs";
  }
  return "?";
}

StatusOr<TransportChoice> TransportChoiceFromName(
    std::string_view name, std::initializer_list<TransportChoice> accepted) {
  std::string list;
  size_t i = 0;
  for (TransportChoice c : accepted) {
    if (TransportChoiceName(c) == name) return c;
    if (i > 0) list += i + 1 == accepted.size() ? " or " : ", ";
    list += TransportChoiceName(c);
    ++i;
  }
  return InvalidArgument("must be " + list + ", not '" + std::string(name) +
                         "'");
}

}  // namespace ps::xfer
