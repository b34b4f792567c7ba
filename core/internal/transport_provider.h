// internal::TransportProvider: one transport (shm, tcp, verbs, ...) as the
// Context sees it, beside the data-path internal::Transport it makes for
// each connection. A provider starts and stops with its Context, takes part
// in every hello (its offer in Hello, its answer in HelloReply), registers
// the Context's memory and packs its remote key into the region descriptor,
// unpacks a peer's key into opaque per-region state, and makes the Transport
// for a connection it carries. The Context knows providers only through
// this interface and the list in transport_registry.cc: a new transport is
// a folder that implements it and a line there.
//
// Choice: the Context asks its providers in the registry's order (verbs,
// shm, tcp); the first that makes a Transport carries the connection, on
// both sides.
//
// Thread-safety: Start and Stop run once, on the Context's thread; Answer
// runs on the hello acceptor's thread; the others on any thread at once.
// A provider may outlive its Context (an Endpoint keeps its provider for
// Import), so what it holds must stay valid after Stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/status_or.h"
#include "core/context.h"
#include "core/descriptor.pb.h"
#include "core/internal/hello_acceptor.h"
#include "core/internal/region_state.h"
#include "core/internal/region_table.h"
#include "core/internal/transport.h"
#include "core/socket.h"
#include "core/transport_kind.h"

namespace ps::xfer::internal {

// A provider's id in descriptors and hellos.
inline uint32_t ProviderId(TransportKind kind) {
  return static_cast<uint32_t>(kind) + 1;
}

// What a provider knows of the Context it serves.
struct ProviderEnv {
  const ContextOptions* options = nullptr;  // outlives Stop
  uint64_t instance = 0;
  std::string host_id;
  const RegionTable* regions = nullptr;  // valid until Stop
};

// What the Connect asked of one provider: whether it may carry the
// connection, and whether it must (ContextOptions::transport forced it).
struct Selection {
  bool allowed = false;
  bool forced = false;
};

// What an offer keeps until the answer comes (e.g. a queue pair).
class PendingOffer {
 public:
  virtual ~PendingOffer() = default;
};

// One Connect past the hello, as a provider sees it.
struct Dial {
  std::string address;
  const proto::HelloReply* reply = nullptr;
  bool same_host = false;  // the listener runs on this host
  UniqueFd* fd = nullptr;  // the hello's connection; a provider may take it
  Deadline deadline;       // of the whole Connect
  std::chrono::milliseconds peer_timeout{0};
  // The hello again (without offers) on another connection to the same
  // listener, before the deadline: the listener's real reply.
  std::function<StatusOr<proto::HelloReply>(int fd)> hello_again;
};

// One hello at the listener, as a provider sees it.
struct Greeting {
  const proto::Hello* hello = nullptr;
  bool same_host_socket = false;  // it came on a provider's local listener
  bool same_host = false;         // the connector runs on this host
};

class TransportProvider {
 public:
  virtual ~TransportProvider() = default;

  virtual TransportKind kind() const = 0;
  uint32_t id() const { return ProviderId(kind()); }

  // Starts serving; may add listeners for the hello acceptor (a same-host
  // socket). A provider whose hardware is missing starts, and offers and
  // accepts nothing (a missing device is not an error).
  virtual Status Start(const ProviderEnv& env,
                       std::vector<HelloAcceptor::Listener>* listeners) = 0;
  // For the Context's "listening" log line ("verbs on rxe0 ..."); empty:
  // nothing to say.
  virtual std::string Describe() const { return ""; }
  // Stops serving peers and joins the provider's threads.
  virtual void Stop() = 0;

  // A new local region (id, data, size, access set; the key not yet):
  // this provider's state for it, or null when it has nothing to do.
  virtual StatusOr<std::unique_ptr<LocalRegionState>> Register(
      const MemoryRegion& region) {
    (void)region;
    return std::unique_ptr<LocalRegionState>();
  }
  // A peer's region for an endpoint of this provider: its key (`present`
  // false: the descriptor has none from this provider) made into state the
  // transport uses. kInvalidArgument for a malformed key.
  virtual StatusOr<std::shared_ptr<RemoteRegionState>> Unpack(
      std::string_view key, bool present) const {
    (void)key;
    (void)present;
    return std::shared_ptr<RemoteRegionState>();
  }

  // Connector: fills `offer` (its bytes) for the hello and returns what it
  // keeps, or null for no offer. An error fails Connect (e.g. forced
  // without the hardware).
  virtual StatusOr<std::unique_ptr<PendingOffer>> Offer(
      const Selection& selection, proto::TransportOffer* offer) {
    (void)selection;
    (void)offer;
    return std::unique_ptr<PendingOffer>();
  }
  // Connector, past the hello: the transport for the connection, or null
  // when this provider does not carry it (the next one is asked). `offer`
  // is what Offer returned, `answer` the listener's (null: none).
  virtual StatusOr<std::unique_ptr<Transport>> Connect(
      const Selection& selection, Dial& dial,
      std::unique_ptr<PendingOffer> offer,
      const proto::TransportAnswer* answer) = 0;

  // Listener: answers a hello (`offer`: this provider's, null if none) in
  // `answer` and returns what takes the connection once the reply went
  // out, or an empty function to leave it to the next provider.
  virtual std::function<void(UniqueFd)> Answer(
      const Greeting& greeting, const proto::TransportOffer* offer,
      proto::TransportAnswer* answer) = 0;
};

}  // namespace ps::xfer::internal
