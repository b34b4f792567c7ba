#include "core/internal/transport_registry.h"

#include "core/shm/shm_provider.h"
#include "core/stream/stream_provider.h"
#include "core/transport_name.h"
#if PS_HAVE_VERBS
#include "core/verbs/verbs_provider.h"
#endif

namespace ps::xfer {
namespace internal {
namespace {

constexpr TransportEntry kTransports[] = {
    // Other hosts, where both have an RDMA device.
    {TransportKind::kVerbs, TransportChoice::kVerbs, "verbs",
#if PS_HAVE_VERBS
     MakeVerbsProvider
#else
     nullptr
#endif
    },
    // The same host: mapped memory.
    {TransportKind::kShm, TransportChoice::kShm, "shm", MakeShmProvider},
    // Everyone else: a stream socket.
    {TransportKind::kTcp, TransportChoice::kTcp, "tcp", MakeStreamProvider},
};

}  // namespace

std::span<const TransportEntry> Transports() { return kTransports; }

const TransportEntry* FindTransport(TransportKind kind) {
  for (const TransportEntry& t : kTransports) {
    if (t.kind == kind) return &t;
  }
  return nullptr;
}

const TransportEntry* FindTransport(TransportChoice choice) {
  for (const TransportEntry& t : kTransports) {
    if (t.choice == choice) return &t;
  }
  return nullptr;
}

std::vector<std::shared_ptr<TransportProvider>> MakeTransportProviders() {
  std::vector<std::shared_ptr<TransportProvider>> providers;
  for (const TransportEntry& t : kTransports) {
    if (t.make != nullptr) providers.push_back(t.make());
  }
  return providers;
}

std::optional<TransportKind> ForcedKind(TransportChoice choice) {
  const TransportEntry* t = FindTransport(choice);
  if (t == nullptr) return std::nullopt;
  return t->kind;
}

}  // namespace internal

// The public names (core/transport_kind.h, core/transport_name.h), from the
// registry.
std::string_view TransportName(TransportKind kind) {
  const internal::TransportEntry* t = internal::FindTransport(kind);
  return t == nullptr ? std::string_view("unknown") : t->name;
}

std::string_view TransportChoiceName(TransportChoice choice) {
  if (choice == TransportChoice::kAuto) return "auto";
  const internal::TransportEntry* t = internal::FindTransport(choice);
  return t == nullptr ? std::string_view("?") : t->name;
}

}  // namespace ps::xfer
