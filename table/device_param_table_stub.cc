// DeviceParamTable in a build without CUDA (no nvcc at configure time, or a
// sanitizer build, which leaves nvcc code out): the same class, so callers
// compile either way, whose Create says plainly that there is no device
// path. No table can exist, so the members below never run on one.
//
// Thread-safety: nothing here keeps state.
#include "table/device_param_table.h"

namespace ps::table {
namespace {

Status WithoutCuda() {
  return NotSupported(
      "device tables: built without CUDA (nvcc was not found at configure "
      "time, or this is a sanitizer build, which leaves CUDA out)");
}

}  // namespace

struct DeviceParamTable::Lane {};

Status DeviceParamTable::Available() { return WithoutCuda(); }

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::Create(
    const proto::TableSpec&, uint64_t, uint64_t, int) {
  return WithoutCuda();
}

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::CreateWithRows(
    const proto::TableSpec& spec, uint64_t, uint64_t num_rows, int,
    std::span<float> rows) {
  PS_RETURN_IF_ERROR(CheckRowsSize(spec, num_rows, rows));
  return WithoutCuda();
}

Status DeviceParamTable::CheckDevice(int) { return WithoutCuda(); }

StatusOr<std::unique_ptr<DeviceParamTable>> DeviceParamTable::Make(
    const proto::TableSpec&, uint64_t, uint64_t, int, float*) {
  return WithoutCuda();
}

DeviceParamTable::DeviceParamTable(const proto::TableSpec& spec)
    : Table(spec), dim_(spec.dim()), optimizer_(spec) {}

DeviceParamTable::~DeviceParamTable() = default;

uint64_t DeviceParamTable::bytes() const { return 0; }

StatusOr<DeviceParamTable::Lane*> DeviceParamTable::TakeLane() {
  return WithoutCuda();
}

void DeviceParamTable::ReturnLane(Lane*) {}

Status DeviceParamTable::Apply(std::span<const uint32_t>,
                               std::span<const float>) {
  return WithoutCuda();
}

Status DeviceParamTable::ApplyOnLane(Lane&, std::span<const uint32_t>,
                                     std::span<const float>) {
  return WithoutCuda();
}

Status DeviceParamTable::ApplyPacket(std::span<const uint8_t>,
                                     const protocol::SparsePacketExpectations&,
                                     protocol::SparsePacketHeader*) {
  return WithoutCuda();
}

Status DeviceParamTable::StagePacket(Lane&, std::span<const uint8_t>,
                                     const protocol::SparsePacketExpectations&,
                                     protocol::SparsePacketHeader*) {
  return WithoutCuda();
}

Status DeviceParamTable::ApplyPacketOnLane(
    Lane&, const protocol::SparsePacketHeader&) {
  return WithoutCuda();
}

Status DeviceParamTable::CopyTo(std::vector<float>*, std::vector<float>*,
                                uint64_t*) const {
  return WithoutCuda();
}

Status DeviceParamTable::RestoreFrom(std::span<const float>,
                                     const std::vector<float>*, uint64_t) {
  return WithoutCuda();
}

uint64_t DeviceParamTable::optimizer_steps() const { return 0; }

}  // namespace ps::table
