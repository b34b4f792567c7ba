#include "core/context_environment.h"

#include <charconv>
#include <string>

#include "core/transport_name.h"

namespace ps::xfer {
namespace {

// A non-empty value of `name`, or nullopt.
std::optional<std::string_view> NonEmpty(const char* const* envp,
                                         std::string_view name) {
  auto value = EnvValue(envp, name);
  if (!value.has_value() || value->empty()) return std::nullopt;
  return value;
}

StatusOr<int> IntValue(std::string_view name, std::string_view text) {
  int n = 0;
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("$" + std::string(name) +
                           " must be an integer, not '" + std::string(text) +
                           "'");
  }
  return n;
}

}  // namespace

std::optional<std::string_view> EnvValue(const char* const* envp,
                                         std::string_view name) {
  if (envp == nullptr) return std::nullopt;
  for (const char* const* e = envp; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.size() > name.size() && entry.starts_with(name) &&
        entry[name.size()] == '=') {
      return entry.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

StatusOr<ContextOptions> ApplyEnvironment(ContextOptions options,
                                          const char* const* envp) {
  if (auto text = NonEmpty(envp, "XFER_TRANSPORT");
      text && options.transport == TransportChoice::kAuto) {
    auto choice = TransportChoiceFromName(
        *text, {TransportChoice::kAuto, TransportChoice::kShm,
                TransportChoice::kTcp, TransportChoice::kVerbs});
    if (!choice.ok()) return choice.status().WithContext("$XFER_TRANSPORT");
    options.transport = *choice;
  }
  if (auto text = NonEmpty(envp, "XFER_IB_DEV");
      text && options.ib_device.empty()) {
    options.ib_device = std::string(*text);
  }
  if (auto text = NonEmpty(envp, "XFER_IB_PORT");
      text && options.ib_port == 0) {
    PS_ASSIGN_OR_RETURN(options.ib_port, IntValue("XFER_IB_PORT", *text));
  }
  if (auto text = NonEmpty(envp, "XFER_IB_GID_INDEX");
      text && options.ib_gid_index < 0) {
    PS_ASSIGN_OR_RETURN(options.ib_gid_index,
                        IntValue("XFER_IB_GID_INDEX", *text));
  }
  return options;
}

}  // namespace ps::xfer
