#include "core/internal/transport_registry.h"

#include <glog/logging.h>

#include <cstdlib>
#include <cstring>

#include "core/shm/shm_provider.h"
#include "core/stream/stream_provider.h"
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
  if (std::strcmp(env, "tcp") == 0) return TransportChoice::kTcp;
  if (std::strcmp(env, "shm") == 0) return TransportChoice::kShm;
  if (std::strcmp(env, "verbs") == 0) return TransportChoice::kVerbs;
  if (std::strcmp(env, "auto") != 0 && env[0] != '\0') {
    LOG(WARNING) << "XFER_TRANSPORT=" << env
                 << " is not tcp, shm, verbs or auto; choosing automatically";
  }
  return TransportChoice::kAuto;
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
