// The registry of transports: the one place a transport is listed, with
// its kind, the choice that forces it, its name and how its provider is
// made. Everything else about "which transports are there" (the providers
// a Context starts, TransportName, TransportChoiceName and its parser, the
// transport a choice forces) is derived from it.
//
// A new transport: its folder (a Make...Provider() beside its transport),
// its enumerator in core/transport_kind.h and in TransportChoice
// (core/context_options.h), one row in kTransports (transport_registry.cc),
// where it ranks, and its choice in the lists of choices that flags and
// XFER_TRANSPORT accept (core/transport_name.h, context_environment.cc)
// where those should offer it.
//
// Thread-safe (constant data).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/context_options.h"
#include "core/internal/transport_provider.h"
#include "core/transport_kind.h"

namespace ps::xfer::internal {

struct TransportEntry {
  TransportKind kind;
  TransportChoice choice;  // the ContextOptions::transport that forces it
  std::string_view name;   // in logs, flags and XFER_TRANSPORT
  // Its provider; null where this build leaves the transport out.
  std::shared_ptr<TransportProvider> (*make)();
};

// Every transport, in order of preference: the first provider that
// carries a connection wins.
std::span<const TransportEntry> Transports();

// The entry of `kind`, or of the transport `choice` forces; null for
// kAuto.
const TransportEntry* FindTransport(TransportKind kind);
const TransportEntry* FindTransport(TransportChoice choice);

// One of each provider this build has, in order of preference.
std::vector<std::shared_ptr<TransportProvider>> MakeTransportProviders();

// The transport a choice forces; nullopt for kAuto.
std::optional<TransportKind> ForcedKind(TransportChoice choice);

}  // namespace ps::xfer::internal
