#include "core/memory_kind.h"

namespace ps::xfer {

std::string_view MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kCudaDevice:
      return "cuda";
  }
  return "unknown";
}

}  // namespace ps::xfer
