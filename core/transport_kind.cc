#include "core/transport_kind.h"

namespace ps::xfer {

std::string_view TransportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kVerbs:
      return "verbs";
  }
  return "unknown";
}

}  // namespace ps::xfer
