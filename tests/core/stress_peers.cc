#include "tests/core/stress_peers.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>

#include "tests/core/xfer_test_peer.h"

namespace ps::testing {

using xfer::Context;
using xfer::TransportChoice;

// Child side of the handshake. Returns false (after printing why) on error.
bool JoinPeer(LineChannel& ch, const std::string& name, TransportChoice t,
              size_t region_size, uint32_t access, bool connect_self,
              PeerSetup* setup) {
  auto ctx = Context::Create(TestOptions(name, t));
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 ctx.status().ToString().c_str());
    return false;
  }
  setup->ctx = std::move(ctx).value();
  auto own = setup->ctx->Allocate(region_size, access);
  if (!own.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 own.status().ToString().c_str());
    return false;
  }
  setup->own = *own;
  ch.Send("ready " + setup->ctx->address() + " " +
          HexEncode(setup->own->descriptor()));
  std::optional<std::string> line = ch.Receive(20000);
  if (!line) return false;
  std::vector<std::string> w = SplitWords(*line);
  std::optional<std::string> desc =
      w.size() == 3 ? HexDecode(w[2]) : std::nullopt;
  if (w[0] != "peer" || !desc) return false;
  auto ep = setup->ctx->Connect(w[1]);
  if (!ep.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 ep.status().ToString().c_str());
    return false;
  }
  setup->to_peer = *ep;
  auto r = setup->to_peer->Import(*desc);
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(),
                 r.status().ToString().c_str());
    return false;
  }
  setup->peer_region = *r;
  if (connect_self) {
    auto self = setup->ctx->Connect(setup->ctx->address());
    if (!self.ok()) return false;
    setup->to_self = *self;
    auto mine = setup->to_self->Import(setup->own->descriptor());
    if (!mine.ok()) return false;
    setup->own_via_self = *mine;
  }
  ch.Send("connected");
  line = ch.Receive(20000);
  return line && *line == "go";
}

// Parent side: introduces two started peers to each other and starts them.
void IntroduceAndStart(ChildProcess& a, ChildProcess& b) {
  std::optional<std::string> ra = a.channel().Receive(20000);
  std::optional<std::string> rb = b.channel().Receive(20000);
  ASSERT_TRUE(ra && rb) << "peers did not start";
  std::vector<std::string> wa = SplitWords(*ra), wb = SplitWords(*rb);
  ASSERT_EQ(wa.size(), 3u);
  ASSERT_EQ(wb.size(), 3u);
  ASSERT_TRUE(a.channel().Send("peer " + wb[1] + " " + wb[2]));
  ASSERT_TRUE(b.channel().Send("peer " + wa[1] + " " + wa[2]));
  ASSERT_EQ(a.channel().Receive(20000),
            std::optional<std::string>("connected"));
  ASSERT_EQ(b.channel().Receive(20000),
            std::optional<std::string>("connected"));
  ASSERT_TRUE(a.channel().Send("go"));
  ASSERT_TRUE(b.channel().Send("go"));
}

// Waits for "done ..." from a child; returns the words after "done".
std::vector<std::string> AwaitDone(ChildProcess& c, int timeout_ms) {
  std::optional<std::string> line = c.channel().Receive(timeout_ms);
  EXPECT_TRUE(line.has_value()) << c.name() << " did not finish";
  if (!line) return {};
  std::vector<std::string> w = SplitWords(*line);
  EXPECT_FALSE(w.empty() || w[0] != "done") << c.name() << ": " << *line;
  if (!w.empty()) w.erase(w.begin());
  return w;
}

void ExpectCleanExit(ChildProcess& c) {
  c.channel().Send("exit");
  EXPECT_EQ(c.Wait(20000), std::optional<int>(0)) << c.name();
}

}  // namespace ps::testing
