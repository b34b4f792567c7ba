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
#include "core/internal/notification_ring.h"
#include "core/internal/region_state.h"
#include "core/internal/region_table.h"
#include "core/internal/transport.h"
#include "core/link_stats.h"
#include "core/transport_kind.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "net/unique_fd.h"

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
  // The context's notification queue: targets queue an event for each
  // put-with-notify into a kNotifyEvents region.
  std::shared_ptr<NotificationRing> notifications;
  // Start may add listeners for the hello acceptor (a same-host socket).
  std::vector<HelloAcceptor::Listener>* listeners = nullptr;
  // The context's reconnect and loss counters (core/link_stats.h).
  std::shared_ptr<LinkCounters> link_counters;
  // The context's accelerator memory (core/device/device_memory.h).
  std::shared_ptr<DeviceMemory> device_memory;
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

// A new connection to a listener dialed before, past its hello.
struct Redialed {
  net::UniqueFd fd;
  proto::HelloReply reply;
};
// The offer for a redial's hello, made once the hello is (its auth_nonce
// set), so that the offer can cover it (a resume's proof does).
using RedialOffer =
    std::function<proto::TransportOffer(const proto::Hello& hello)>;
// Dials the same listener again and says hello with only the offer `offer`
// makes, before the deadline: how a transport re-establishes a broken
// connection. It holds copies of all it needs, so it works after the
// Context is gone.
using Redial = std::function<StatusOr<Redialed>(const RedialOffer& offer,
                                                net::Deadline deadline)>;

// The listener as the hello found it, the same for every provider.
struct DialedPeer {
  std::string address;
  const proto::HelloReply* reply = nullptr;
  bool same_host = false;  // the listener runs on this host
  net::UniqueFd* fd =
      nullptr;             // the hello's connection; a provider may take it
  net::Deadline deadline;  // of the whole Connect
  std::chrono::milliseconds peer_timeout{0};
  // The context's reconnect and loss counters (core/link_stats.h).
  std::shared_ptr<LinkCounters> link_counters;
  // The hello again (without offers) on another connection to the same
  // listener, before the deadline: the listener's real reply.
  std::function<StatusOr<proto::HelloReply>(int fd)> hello_again;
  Redial redial;
};

// One provider's part of one Connect.
struct Dial {
  Selection selection;
  // Offer: the bytes for the hello, and what it keeps (null: no offer).
  proto::TransportOffer offer;
  std::unique_ptr<PendingOffer> pending;
  // Set past the hello: the listener, and its provider's answer (or null).
  const DialedPeer* peer = nullptr;
  const proto::TransportAnswer* answer = nullptr;
  // Connect: why this provider did not carry a connection it could have
  // (e.g. the shm hand-over failed), for the Context's log line.
  std::string declined;
};

// One hello at the listener, as one provider sees it.
struct Greeting {
  const proto::Hello* hello = nullptr;
  bool same_host_socket = false;  // it came on a provider's local listener
  bool same_host = false;         // the connector runs on this host
  const proto::TransportOffer* offer = nullptr;  // this provider's, or null
  proto::TransportAnswer* answer = nullptr;      // what the reply says
};

class TransportProvider {
 public:
  virtual ~TransportProvider() = default;

  virtual TransportKind kind() const = 0;
  uint32_t id() const { return ProviderId(kind()); }

  // Starts serving. A provider whose hardware is missing starts, and
  // offers and accepts nothing (a missing device is not an error).
  virtual Status Start(const ProviderEnv& env) = 0;
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

  // Connector, before the hello: fills dial.offer and dial.pending to offer
  // something. An error fails Connect (e.g. forced without the hardware).
  virtual Status Offer(Dial& dial) {
    (void)dial;
    return Status::OK();
  }
  // Connector, past the hello: the transport for the connection, or null
  // when this provider does not carry it (the next one is asked).
  virtual StatusOr<std::unique_ptr<Transport>> Connect(Dial& dial) = 0;

  // Listener: answers a hello (greeting.answer) and returns what takes the
  // connection once the reply went out, or an empty function to leave it
  // to the next provider.
  virtual std::function<void(net::UniqueFd)> Answer(
      const Greeting& greeting) = 0;
};

}  // namespace ps::xfer::internal
