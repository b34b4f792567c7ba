// Peers for the cross-process stress tests (xfer_stress_test.cc): two child
// processes that learn each other's address and region descriptor through
// the parent, connect, and start their roles together. Test code; one
// thread per child.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/process_harness.h"

namespace ps::testing {

// Two peers that know each other: each child owns one region, learns the
// other's address and descriptor through the parent, connects to it (and
// may also connect to itself), then runs its role when the parent says go.
struct PeerSetup {
  std::unique_ptr<xfer::Context> ctx;
  std::shared_ptr<xfer::MemoryRegion> own;
  std::shared_ptr<xfer::Endpoint> to_peer;
  xfer::RemoteRegion peer_region;
  std::shared_ptr<xfer::Endpoint> to_self;
  xfer::RemoteRegion own_via_self;
};

// Child side of the handshake. Returns false (after printing why) on error.
bool JoinPeer(LineChannel& ch, const std::string& name, xfer::TransportChoice t,
              size_t region_size, uint32_t access, bool connect_self,
              PeerSetup* setup);
// Parent side: introduces two started peers to each other and starts them.
void IntroduceAndStart(ChildProcess& a, ChildProcess& b);
// Waits for "done ..." from a child; returns the words after "done".
std::vector<std::string> AwaitDone(ChildProcess& c, int timeout_ms);
// Tells a child to exit and expects status 0.
void ExpectCleanExit(ChildProcess& c);

}  // namespace ps::testing
