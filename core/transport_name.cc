#include "core/transport_name.h"

#include <string>

namespace ps::xfer {

// TransportChoiceName is defined with the registry
// (core/internal/transport_registry.cc).

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
