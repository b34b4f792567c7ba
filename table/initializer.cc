#include "table/initializer.h"

#include <cmath>
#include <numbers>

#include "protocol/shard_map.h"
#include "protocol/spec_choices.h"

namespace ps::table {
namespace {

// What the spec draws from; an unknown name (refused by
// ValidateInitializer) draws uniformly, as it always has.
proto::InitializerKind KindOf(const proto::InitializerSpec& spec) {
  auto kind = protocol::InitializerKindOf(spec);
  return kind.ok() ? *kind : proto::INITIALIZER_UNIFORM;
}

bool IsZeros(const proto::InitializerSpec& spec, proto::InitializerKind kind) {
  return kind == proto::INITIALIZER_ZEROS || spec.scale() == 0.0f;
}

// A uniform double in (0, 1) from 53 well-mixed bits; never 0, so log() in
// Box-Muller is finite.
double Unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}
// The same in float from 24 bits: (0, 1), never 0.
float UnitF(uint64_t bits) {
  return (static_cast<float>(bits >> 40) + 0.5f) * 0x1.0p-24f;
}

uint64_t Draw(uint64_t seed, uint64_t identity, uint64_t column,
              uint64_t stream) {
  using protocol::Mix64;
  return Mix64(Mix64(Mix64(seed ^ 0x9e3779b97f4a7c15ULL) ^ identity) ^
               (column * 2 + stream));
}

void FillRow(const proto::InitializerSpec& spec, proto::InitializerKind kind,
             uint64_t identity, std::span<float> row) {
  if (IsZeros(spec, kind)) {
    for (float& v : row) v = 0.0f;
    return;
  }
  const float scale = spec.scale();
  if (kind != proto::INITIALIZER_NORMAL) {
    for (size_t j = 0; j < row.size(); ++j) {
      double u = Unit(Draw(spec.seed(), identity, j, 0));
      row[j] = scale * static_cast<float>(2.0 * u - 1.0);
    }
    return;
  }
  // Box-Muller gives two independent normals per pair of uniforms: columns
  // 2k and 2k + 1 share one pair (float math: starting a 100M-value table
  // must take seconds, not minutes).
  for (size_t j = 0; j < row.size(); j += 2) {
    const uint64_t k = j / 2;
    const float u1 = UnitF(Draw(spec.seed(), identity, k, 0));
    const float u2 = UnitF(Draw(spec.seed(), identity, k, 1));
    const float r = scale * std::sqrt(-2.0f * std::log(u1));
    const float a = 2.0f * std::numbers::pi_v<float> * u2;
    row[j] = r * std::cos(a);
    if (j + 1 < row.size()) row[j + 1] = r * std::sin(a);
  }
}

}  // namespace

Status ValidateInitializer(const proto::InitializerSpec& spec) {
  PS_RETURN_IF_ERROR(protocol::InitializerKindOf(spec).status());
  if (!std::isfinite(spec.scale()) || spec.scale() < 0.0f) {
    return InvalidArgument("initializer scale must be finite and >= 0, not " +
                           std::to_string(spec.scale()));
  }
  return Status::OK();
}

void InitializeRow(const proto::InitializerSpec& spec, uint64_t identity,
                   std::span<float> row) {
  FillRow(spec, KindOf(spec), identity, row);
}

RowInitializer::RowInitializer(const proto::InitializerSpec& spec)
    : spec_(spec), kind_(KindOf(spec)) {}

void RowInitializer::Fill(uint64_t identity, std::span<float> row) const {
  FillRow(spec_, kind_, identity, row);
}

void InitializeRows(const proto::InitializerSpec& spec, uint64_t first_identity,
                    uint64_t count, uint32_t dim, float* rows) {
  const proto::InitializerKind kind = KindOf(spec);
  if (IsZeros(spec, kind)) return;
  for (uint64_t i = 0; i < count; ++i) {
    FillRow(spec, kind, first_identity + i,
            std::span<float>(rows + i * dim, dim));
  }
}

}  // namespace ps::table
