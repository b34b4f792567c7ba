// The tcp stream's sessions (core/stream/stream_session.h) through a relay
// that resets connections while both contexts live (tests/core/tcp_proxy.h):
// the connection is re-established and every operation completes exactly
// once (fetch-adds add once, puts land, gets read); a peer that stays
// unreachable past the peer timeout is lost in time; a peer that restarted
// is lost at once; an orderly close is not resumed. The contexts' link
// stats count the reconnects, resumed sessions and lost peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/tcp_proxy.h"
#include "tests/fixed_time_zone.h"

namespace ps::xfer {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kRegionBytes = 1 << 20;

ContextOptions Options(const char* name, int timeout_ms) {
  ContextOptions o;
  o.name = name;
  o.transport = TransportChoice::kTcp;
  o.peer_timeout_ms = timeout_ms;
  return o;
}

class StreamReconnectTest : public ::testing::Test {
 protected:
  void Start(int timeout_ms) {
    auto target = Context::Create(Options("target", timeout_ms));
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::move(*target);
    auto region = target_->Allocate(kRegionBytes, kRemoteAll);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = *region;
    proxy_ = std::make_unique<testing::TcpProxy>(target_->address());
    auto origin = Context::Create(Options("origin", timeout_ms));
    ASSERT_TRUE(origin.ok()) << origin.status();
    origin_ = std::move(*origin);
    auto ep = origin_->Connect(proxy_->address());
    ASSERT_TRUE(ep.ok()) << ep.status();
    ep_ = *ep;
    auto remote = ep_->Import(region_->descriptor());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  std::unique_ptr<Context> target_;
  std::shared_ptr<MemoryRegion> region_;
  std::unique_ptr<testing::TcpProxy> proxy_;
  std::unique_ptr<Context> origin_;
  std::shared_ptr<Endpoint> ep_;
  RemoteRegion remote_;
};

// Threads post fetch-adds and puts while the relay resets every connection
// again and again: the counter ends at exactly the number of adds, each add
// saw a distinct previous value, and every put's bytes are in place.
TEST_F(StreamReconnectTest, ResetsLoseAndRepeatNothing) {
  Start(10000);
  constexpr int kThreads = 3;
  constexpr int kAddsPerThread = 1500;
  constexpr size_t kPutBytes = 4096;
  std::atomic<bool> done{false};
  std::thread breaker([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(milliseconds(15));
      proxy_->Reset();
    }
  });
  std::vector<std::vector<uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<char> data(kPutBytes);
      for (int i = 0; i < kAddsPerThread; ++i) {
        auto previous = ep_->FetchAdd64(remote_, 0, 1);
        if (!previous.ok()) {
          ADD_FAILURE() << previous.status();
          failures.fetch_add(1);
          return;
        }
        seen[t].push_back(*previous);
        // Each thread owns a slice; the last put of a slot wins.
        std::fill(data.begin(), data.end(), static_cast<char>(i + t));
        const uint64_t offset = 4096 + (t * 16 + i % 16) * kPutBytes;
        Request put = ep_->PostPut(data.data(), data.size(), remote_, offset);
        // The source may be reused at once: overwrite it before the reply.
        std::fill(data.begin(), data.end(), 0);
        Status s = put.Wait();
        if (!s.ok()) {
          ADD_FAILURE() << s;
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  done.store(true);
  breaker.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_TRUE(ep_->Flush().ok());
  EXPECT_GT(proxy_->accepted(), 3) << "the relay never broke a connection";
  uint64_t counter = 0;
  ASSERT_TRUE(ep_->Get(&counter, sizeof(counter), remote_, 0).ok());
  EXPECT_EQ(counter, uint64_t{kThreads * kAddsPerThread});
  std::set<uint64_t> all;
  for (const auto& v : seen) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t{kThreads * kAddsPerThread})
      << "some fetch-add ran twice or a previous value repeated";
  const char* bytes = static_cast<const char*>(region_->data());
  for (int t = 0; t < kThreads; ++t) {
    for (int slot = 0; slot < 16; ++slot) {
      // The last i with i % 16 == slot.
      int last = kAddsPerThread - 1;
      while (last % 16 != slot) --last;
      const char* p = bytes + 4096 + (t * 16 + slot) * kPutBytes;
      EXPECT_TRUE(
          std::all_of(p, p + kPutBytes,
                      [&](char c) { return c == static_cast<char>(last + t); }))
          << "thread " << t << " slot " << slot;
    }
  }
}

// Unreachable for longer than the peer timeout: lost, within the timeout
// (counted from the last progress) and a little.
TEST_F(StreamReconnectTest, UnreachablePastTheTimeoutIsLost) {
  constexpr int kTimeoutMs = 1500;
  Start(kTimeoutMs);
  uint64_t word = 0;
  ASSERT_TRUE(ep_->Get(&word, sizeof(word), remote_, 0).ok());
  proxy_->SetRefusing(true);
  const auto start = Clock::now();
  proxy_->Reset();
  Status s = ep_->FetchAdd64(remote_, 0, 1).status();
  const auto waited =
      std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
  EXPECT_LT(waited.count(), kTimeoutMs + 1500);
  EXPECT_TRUE(ep_->lost());
  EXPECT_EQ(origin_->link_stats().peers_lost, 1u);
  EXPECT_EQ(origin_->link_stats().reconnects, 0u);
}

// A reset shorter than the timeout, with nothing in flight: the next
// operation goes through on the new connection.
TEST_F(StreamReconnectTest, ShortOutageIsRiddenOut) {
  Start(5000);
  proxy_->SetRefusing(true);
  proxy_->Reset();
  std::thread heal([&] {
    std::this_thread::sleep_for(milliseconds(300));
    proxy_->SetRefusing(false);
  });
  auto previous = ep_->FetchAdd64(remote_, 8, 5);
  heal.join();
  ASSERT_TRUE(previous.ok()) << previous.status();
  EXPECT_EQ(*previous, 0u);
  uint64_t word = 0;
  ASSERT_TRUE(ep_->Get(&word, sizeof(word), remote_, 8).ok());
  EXPECT_EQ(word, 5u);
  EXPECT_FALSE(ep_->lost());
  // Counted for monitoring (core/link_stats.h): one reconnect here, one
  // resumed session at the target, nobody lost.
  EXPECT_EQ(origin_->link_stats().reconnects, 1u);
  EXPECT_EQ(origin_->link_stats().peers_lost, 0u);
  EXPECT_EQ(target_->link_stats().resumed, 1u);
}

// The target restarted (a new instance at the same address) while the
// connection was broken: the session is gone with it, and the endpoint is
// lost as soon as the new hello says so, not after the timeout.
TEST_F(StreamReconnectTest, RestartedPeerIsLostAtOnce) {
  Start(10000);
  const std::string address = target_->address();
  const uint16_t port =
      static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  proxy_->SetRefusing(true);
  proxy_->Reset();  // the origin starts re-establishing at once
  region_.reset();
  target_.reset();
  ContextOptions o = Options("target", 10000);
  o.listen_port = port;
  auto again = Context::Create(o);
  ASSERT_TRUE(again.ok()) << again.status();
  const auto start = Clock::now();
  proxy_->SetRefusing(false);
  Status s = ep_->FetchAdd64(remote_, 0, 1).status();
  EXPECT_TRUE(s.Is(StatusCode::kPeerLost)) << s;
  EXPECT_NE(s.message().find("restarted"), std::string::npos) << s;
  EXPECT_LT(Clock::now() - start, milliseconds(5000));
}

}  // namespace
}  // namespace ps::xfer
