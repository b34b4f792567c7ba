#include "server/initializer.h"

#include <cmath>
#include <numbers>

#include "protocol/shard_map.h"

namespace ps::server {
namespace {

bool IsZeros(const proto::InitializerSpec& spec) {
  return spec.name().empty() || spec.name() == "zeros" || spec.scale() == 0.0f;
}

// A uniform double in (0, 1) from 53 well-mixed bits; never 0, so log() in
// Box-Muller is finite.
double Unit(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

uint64_t Draw(uint64_t seed, uint64_t identity, uint64_t column,
              uint64_t stream) {
  using protocol::Mix64;
  return Mix64(Mix64(Mix64(seed ^ 0x9e3779b97f4a7c15ULL) ^ identity) ^
               (column * 2 + stream));
}

}  // namespace

Status ValidateInitializer(const proto::InitializerSpec& spec) {
  const std::string& n = spec.name();
  if (!n.empty() && n != "zeros" && n != "uniform" && n != "normal") {
    return InvalidArgument("unknown initializer '" + n +
                           "' (zeros, uniform, normal)");
  }
  if (!std::isfinite(spec.scale()) || spec.scale() < 0.0f) {
    return InvalidArgument("initializer scale must be finite and >= 0, not " +
                           std::to_string(spec.scale()));
  }
  return Status::OK();
}

void InitializeRow(const proto::InitializerSpec& spec, uint64_t identity,
                   std::span<float> row) {
  if (IsZeros(spec)) {
    for (float& v : row) v = 0.0f;
    return;
  }
  const double scale = spec.scale();
  const bool normal = spec.name() == "normal";
  for (size_t j = 0; j < row.size(); ++j) {
    double u = Unit(Draw(spec.seed(), identity, j, 0));
    if (normal) {
      double u2 = Unit(Draw(spec.seed(), identity, j, 1));
      row[j] = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u)) *
                                  std::cos(2.0 * std::numbers::pi * u2));
    } else {
      row[j] = static_cast<float>(scale * (2.0 * u - 1.0));
    }
  }
}

void InitializeRows(const proto::InitializerSpec& spec, uint64_t first_identity,
                    uint64_t count, uint32_t dim, float* rows) {
  if (IsZeros(spec)) return;
  for (uint64_t i = 0; i < count; ++i) {
    InitializeRow(spec, first_identity + i,
                  std::span<float>(rows + i * dim, dim));
  }
}

}  // namespace ps::server
