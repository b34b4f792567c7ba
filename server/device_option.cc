#include "server/device_option.h"

#include <charconv>
#include <string>

namespace ps::server {

StatusOr<std::optional<int>> ParseDeviceOption(std::string_view value) {
  if (value.empty() || value == "host") return std::optional<int>();
  if (value == "cuda") return std::optional<int>(0);
  constexpr std::string_view kPrefix = "cuda:";
  int ordinal = -1;
  if (value.starts_with(kPrefix)) {
    const std::string_view digits = value.substr(kPrefix.size());
    const auto [end, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
    if (error != std::errc() || end != digits.data() + digits.size() ||
        digits.empty()) {
      ordinal = -1;
    }
  }
  if (ordinal < 0 || ordinal > 1023) {
    return InvalidArgument("device '" + std::string(value) +
                           "' is not host, cuda or cuda:N (N in 0..1023)");
  }
  return std::optional<int>(ordinal);
}

}  // namespace ps::server
