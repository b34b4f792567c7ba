#include "core/internal/transport_registry.h"

#include <glog/logging.h>

#include <cstdlib>

#include "core/shm/shm_provider.h"
#include "core/stream/stream_provider.h"
#include "core/transport_name.h"
#if PS_HAVE_VERBS
#include "core/verbs/verbs_provider.h"
#endif

namespace ps::xfer::internal {

// A new transport: its folder (a Make...Provider() beside its transport),
// an enumerator in core/transport_kind.h, and one line here, where it ranks:
// the first provider that carries a connection wins.
std::vector<std::shared_ptr<TransportProvider>> MakeTransportProviders() {
  std::vector<std::shared_ptr<TransportProvider>> providers;
#if PS_HAVE_VERBS
  providers.push_back(MakeVerbsProvider());  // other hosts, with a device
#endif
  providers.push_back(MakeShmProvider());     // the same host
  providers.push_back(MakeStreamProvider());  // tcp: everyone else
  return providers;
}

TransportChoice EffectiveChoice(TransportChoice option) {
  if (option != TransportChoice::kAuto) return option;
  const char* env = std::getenv("XFER_TRANSPORT");
  if (env == nullptr) return option;
  if (env[0] == '\0') return option;
  auto choice = TransportChoiceFromName(
      env, {TransportChoice::kAuto, TransportChoice::kShm,
            TransportChoice::kTcp, TransportChoice::kVerbs});
  if (!choice.ok()) {
    LOG(WARNING) << "XFER_TRANSPORT " << choice.status().message()
                 << "; choosing automatically";
    return TransportChoice::kAuto;
  }
  return *choice;
}

std::optional<TransportKind> ForcedKind(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kAuto:
      return std::nullopt;
    case TransportChoice::kShm:
      return TransportKind::kShm;
    case TransportChoice::kTcp:
      return TransportKind::kTcp;
    case TransportChoice::kVerbs:
      return TransportKind::kVerbs;
  }
  return std::nullopt;
}

}  // namespace ps::xfer::internal
