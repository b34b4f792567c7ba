#include "table/table.h"

#include <cstdio>

#include "protocol/spec_choices.h"

namespace ps::table {
Status Table::Unsupported(const char* what) const {
  return NotSupported("table '" + spec_.name() + "' (" +
                      std::string(protocol::TableKindName(spec_.kind())) +
                      ") cannot " + what);
}

Status Table::ApplyRows(uint64_t, std::span<const uint32_t>, std::span<float>,
                        kernels::AccumulateMode) {
  return Unsupported("apply rows of a packet: it is keyed");
}

Status Table::ApplyPacket(std::span<const uint8_t>,
                          const protocol::SparsePacketExpectations&,
                          protocol::SparsePacketHeader*) {
  return Unsupported("decode packets itself");
}

Status Table::ApplyKeys(uint64_t, std::span<const uint64_t>,
                        std::span<const float>) {
  return Unsupported("apply keyed gradients: its rows are not keyed");
}

Status Table::ApplyHashedKeys(uint64_t step, std::span<const uint64_t> keys,
                              std::span<const uint64_t>,
                              std::span<const float> grads) {
  return ApplyKeys(step, keys, grads);
}

Status Table::ReadKeys(std::span<const uint64_t>, std::span<float>,
                       std::span<bool>) const {
  return Unsupported("read rows by key: workers read its region");
}

std::string Table::Placement() const {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f MB", bytes() / 1e6);
  return text;
}

}  // namespace ps::table
