// Concurrency stress of the xfer core between real processes, on both
// transports: PutWithNotify ordering under load, FetchAdd64 atomicity from
// many threads of two processes, and a CAS spin lock across processes.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "core/batch.h"
#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/process_harness.h"
#include "tests/core/stress_peers.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::Endpoint;
using xfer::MemoryRegion;
using xfer::RemoteRegion;
using xfer::Request;
using xfer::TransportChoice;

class XferStressTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  void SetUp() override { PS_SKIP_IF_UNUSABLE(GetParam()); }
};

// --- PutWithNotify -------------------------------------------------------

// The writer fills slot i % kSlots of the reader's inbox with payload i and
// sets that slot's notify word to i + 1. The reader waits for each word in
// turn and checks the whole payload it guards; it acknowledges progress with
// FetchAdd64 on a word in the writer's memory, and the writer reuses a slot
// only once its previous payload was acknowledged.
//
// The reader's checks and its progress thread's later copies into the same
// slot are ordered through the writer, which ThreadSanitizer cannot follow
// across processes. So the reader does an atomic on its sync word before it
// acknowledges, and the writer, each time it sees a new acknowledgement, does
// a FetchAdd64 on that word before it reuses slots: the target's progress
// thread then acquires the reader's accesses before it copies.
constexpr uint64_t kNotifyIterations = 100000;
constexpr uint64_t kSlots = 64;
constexpr uint64_t kAckEvery = 8;
constexpr size_t kMaxPayload = 4096;
// One cache line per notify word, then the reader's sync word.
constexpr uint64_t kSyncOffset = kSlots * 64;
constexpr size_t kNotifyArea = (kSlots + 1) * 64;
constexpr size_t kInboxSize = kNotifyArea + kSlots * kMaxPayload;

size_t PayloadLength(uint64_t i) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull;
  return 256 + 8 * ((h >> 40) % ((kMaxPayload - 256) / 8 + 1));
}
uint64_t PayloadWord(uint64_t i, uint64_t j) {
  return (i + 1) * 0xD6E8FEB86659FD93ull ^ (j + 1) * 0xA0761D6478BD642Full;
}
uint64_t NotifyOffset(uint64_t slot) { return slot * 64; }
uint64_t PayloadOffset(uint64_t slot) {
  return kNotifyArea + slot * kMaxPayload;
}

void SpinPause(uint64_t& spins) {
  if (++spins % 64 == 0) sched_yield();
}

int RunNotifyWriter(LineChannel& ch, TransportChoice t) {
  PeerSetup p;
  // The writer's region holds the acknowledgement word.
  PS_CHILD_CHECK(
      JoinPeer(ch, "writer", t, 4096, xfer::kRemoteAtomic, false, &p));
  std::atomic_ref<uint64_t> acked(*static_cast<uint64_t*>(p.own->data()));
  std::vector<uint64_t> buffer(kMaxPayload / 8);
  std::deque<Request> in_flight;
  uint64_t spins = 0, synced = 0;
  for (uint64_t i = 0; i < kNotifyIterations; ++i) {
    if (i >= kSlots) {
      uint64_t seen;
      while ((seen = acked.load(std::memory_order_acquire)) < i - kSlots + 1) {
        SpinPause(spins);
      }
      if (seen > synced) {
        auto v = p.to_peer->FetchAdd64(p.peer_region, kSyncOffset, 1);
        PS_CHILD_CHECK(v.ok(), v.status().ToString());
        synced = seen;
      }
    }
    const uint64_t slot = i % kSlots;
    const size_t len = PayloadLength(i);
    for (size_t j = 0; j < len / 8; ++j) buffer[j] = PayloadWord(i, j);
    if (i % 16 == 0) {
      Status s = p.to_peer->PutWithNotify(buffer.data(), len, p.peer_region,
                                          PayloadOffset(slot), p.peer_region,
                                          NotifyOffset(slot), i + 1);
      PS_CHILD_CHECK(s.ok(), s.ToString());
    } else {
      in_flight.push_back(p.to_peer->PostPutWithNotify(
          buffer.data(), len, p.peer_region, PayloadOffset(slot), p.peer_region,
          NotifyOffset(slot), i + 1));
    }
    while (in_flight.size() > kSlots / 2) {
      Status s = in_flight.front().Wait();
      PS_CHILD_CHECK(s.ok(), s.ToString());
      in_flight.pop_front();
    }
  }
  Status s = p.to_peer->Flush();
  PS_CHILD_CHECK(s.ok(), s.ToString());
  for (Request& r : in_flight) {
    Status done;
    PS_CHILD_CHECK(r.Test(&done) && done.ok(), done.ToString());
  }
  ch.Send("done " + std::to_string(spins));
  std::optional<std::string> line = ch.Receive(60000);
  return line && *line == "exit" ? 0 : 3;
}

// On a failure at iteration i: every slot's notify word as an offset from
// the value it should hold, and which iteration the payload of `slot` holds,
// to tell a stale write of one slot from a stale view of the whole inbox.
std::string DescribeInbox(uint8_t* base, uint64_t i, uint64_t slot) {
  std::string out = "notify words (seen - expected):";
  for (uint64_t s = 0; s < kSlots; ++s) {
    // What slot s held once the reader had passed iteration i - 1.
    const uint64_t last = i - 1 - ((i - 1 - s) % kSlots);
    const uint64_t seen =
        std::atomic_ref<uint64_t>(
            *reinterpret_cast<uint64_t*>(base + NotifyOffset(s)))
            .load(std::memory_order_acquire);
    out += ' ';
    out += std::to_string(static_cast<int64_t>(seen - (last + 1)));
  }
  const auto* payload =
      reinterpret_cast<const uint64_t*>(base + PayloadOffset(slot));
  out += "; slot ";
  out += std::to_string(slot);
  out += "'s payload is from iteration";
  bool found = false;
  for (uint64_t k = slot; k <= i + kSlots; k += kSlots) {
    if (payload[0] == PayloadWord(k, 0)) {
      out += ' ';
      out += std::to_string(k);
      found = true;
    }
  }
  if (!found) out += " (none)";
  return out;
}

int RunNotifyReader(LineChannel& ch, TransportChoice t) {
  PeerSetup p;
  PS_CHILD_CHECK(JoinPeer(ch, "reader", t, kInboxSize,
                          xfer::kRemoteWrite | xfer::kRemoteAtomic, false, &p));
  auto* base = static_cast<uint8_t*>(p.own->data());
  std::atomic_ref<uint64_t> sync_word(
      *reinterpret_cast<uint64_t*>(base + kSyncOffset));
  uint64_t spins = 0, acked = 0;
  for (uint64_t i = 0; i < kNotifyIterations; ++i) {
    const uint64_t slot = i % kSlots;
    std::atomic_ref<uint64_t> notify(
        *reinterpret_cast<uint64_t*>(base + NotifyOffset(slot)));
    const uint64_t previous = i >= kSlots ? i - kSlots + 1 : 0;
    for (;;) {
      uint64_t seen = notify.load(std::memory_order_acquire);
      if (seen == i + 1) break;
      PS_CHILD_CHECK(seen == previous, "slot " + std::to_string(slot) +
                                           " shows " + std::to_string(seen) +
                                           " while waiting for " +
                                           std::to_string(i + 1) + "; " +
                                           DescribeInbox(base, i, slot));
      SpinPause(spins);
    }
    const auto* payload =
        reinterpret_cast<const uint64_t*>(base + PayloadOffset(slot));
    const size_t words = PayloadLength(i) / 8;
    for (size_t j = 0; j < words; ++j) {
      PS_CHILD_CHECK(payload[j] == PayloadWord(i, j),
                     "iteration " + std::to_string(i) + " word " +
                         std::to_string(j) + " of " + std::to_string(words) +
                         " is not the payload its notify word announced; " +
                         DescribeInbox(base, i, slot));
    }
    if ((i + 1) % kAckEvery == 0 || i + 1 == kNotifyIterations) {
      sync_word.fetch_add(1, std::memory_order_acq_rel);
      auto prev = p.to_peer->FetchAdd64(p.peer_region, 0, i + 1 - acked);
      PS_CHILD_CHECK(prev.ok(), prev.status().ToString());
      PS_CHILD_CHECK(*prev == acked);
      acked = i + 1;
    }
  }
  ch.Send("done " + std::to_string(spins));
  std::optional<std::string> line = ch.Receive(60000);
  return line && *line == "exit" ? 0 : 3;
}

TEST_P(XferStressTest, PutWithNotifyNeverShowsTheWordBeforeTheData) {
  const TransportChoice t = GetParam();
  ChildProcess writer = ChildProcess::Start(
      "writer", [t](LineChannel& ch) { return RunNotifyWriter(ch, t); });
  ChildProcess reader = ChildProcess::Start(
      "reader", [t](LineChannel& ch) { return RunNotifyReader(ch, t); });
  ASSERT_NO_FATAL_FAILURE(IntroduceAndStart(writer, reader));
  AwaitDone(reader, 300000);
  AwaitDone(writer, 20000);
  ExpectCleanExit(reader);
  ExpectCleanExit(writer);
}

// --- FetchAdd64 ----------------------------------------------------------

// Process A owns the word and reaches it through an endpoint to itself;
// process B through its endpoint to A. 4 threads each, kAdds adds per
// thread, mostly pipelined. Each process reports the sum of the previous
// values it got: all adds of 1 on one word return exactly 0 .. N-1.
constexpr int kAddThreads = 4;
constexpr uint64_t kAddsPerThread = 100000;
constexpr size_t kAddWindow = 64;

int RunAdder(LineChannel& ch, const std::string& name, TransportChoice t,
             bool owns_word) {
  PeerSetup p;
  PS_CHILD_CHECK(
      JoinPeer(ch, name, t, 4096, xfer::kRemoteAtomic, owns_word, &p));
  Endpoint& ep = owns_word ? *p.to_self : *p.to_peer;
  const RemoteRegion& word = owns_word ? p.own_via_self : p.peer_region;
  std::atomic<uint64_t> prev_sum{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kAddThreads; ++k) {
    threads.emplace_back([&] {
      uint64_t sum = 0;
      std::vector<uint64_t> prev(kAddWindow);
      std::vector<Request> requests(kAddWindow);
      auto fail = [&](const Status& s) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        failures++;
      };
      // Three forms in turn: blocking, a window of single posts, and (most
      // of them, it is the fast one on tcp) batches.
      for (uint64_t done = 0, round = 0; done < kAddsPerThread; ++round) {
        if (round % 16 == 0) {
          auto v = ep.FetchAdd64(word, 64, 1);
          if (!v.ok()) return fail(v.status());
          sum += *v;
          ++done;
          continue;
        }
        const size_t n = std::min<uint64_t>(kAddWindow, kAddsPerThread - done);
        if (round % 4 == 1) {
          for (size_t q = 0; q < n; ++q) {
            requests[q] = ep.PostFetchAdd64(word, 64, 1, &prev[q]);
          }
          for (size_t q = 0; q < n; ++q) {
            if (Status s = requests[q].Wait(); !s.ok()) return fail(s);
          }
        } else {
          xfer::Batch batch;
          for (size_t q = 0; q < n; ++q)
            batch.FetchAdd64(word, 64, 1, &prev[q]);
          if (Status s = ep.Post(batch).Wait(); !s.ok()) return fail(s);
        }
        for (size_t q = 0; q < n; ++q) sum += prev[q];
        done += n;
      }
      prev_sum.fetch_add(sum);
    });
  }
  for (auto& th : threads) th.join();
  PS_CHILD_CHECK(failures.load() == 0);
  ch.Send("done " + std::to_string(prev_sum.load()));
  for (;;) {
    std::optional<std::string> line = ch.Receive(120000);
    if (!line) return 3;
    if (*line == "exit") return 0;
    if (*line == "load" && owns_word) {
      uint64_t v =
          std::atomic_ref<uint64_t>(static_cast<uint64_t*>(p.own->data())[8])
              .load(std::memory_order_acquire);
      ch.Send("value " + std::to_string(v));
    }
  }
}

TEST_P(XferStressTest, FetchAddFromTwoProcessesTimesFourThreadsSumsExactly) {
  const TransportChoice t = GetParam();
  ChildProcess a = ChildProcess::Start("adder-a", [t](LineChannel& ch) {
    return RunAdder(ch, "adder-a", t, true);
  });
  ChildProcess b = ChildProcess::Start("adder-b", [t](LineChannel& ch) {
    return RunAdder(ch, "adder-b", t, false);
  });
  ASSERT_NO_FATAL_FAILURE(IntroduceAndStart(a, b));
  std::vector<std::string> da = AwaitDone(a, 300000);
  std::vector<std::string> db = AwaitDone(b, 300000);
  ASSERT_EQ(da.size(), 1u);
  ASSERT_EQ(db.size(), 1u);
  const uint64_t n = 2 * kAddThreads * kAddsPerThread;
  ASSERT_TRUE(a.channel().Send("load"));
  EXPECT_EQ(a.channel().Receive(20000),
            std::optional<std::string>("value " + std::to_string(n)));
  const uint64_t prev_sum = std::stoull(da[0]) + std::stoull(db[0]);
  EXPECT_EQ(prev_sum, n * (n - 1) / 2)
      << "the previous values are not exactly 0 .. " << n - 1;
  ExpectCleanExit(a);
  ExpectCleanExit(b);
}

// --- CAS lock ------------------------------------------------------------

// Lock word at 0, counter at 64, holder id at 128 of A's region. Inside the
// lock: non-atomic Get, +1, Put, Flush of the counter; the holder id checks
// that nobody else is inside at the same time.
constexpr int kLockThreads = 2;
constexpr uint64_t kLockRounds = 1500;

int RunLocker(LineChannel& ch, const std::string& name, TransportChoice t,
              bool owns_word, uint64_t id_base) {
  PeerSetup p;
  PS_CHILD_CHECK(JoinPeer(ch, name, t, 4096, xfer::kRemoteAll, owns_word, &p));
  Endpoint& ep = owns_word ? *p.to_self : *p.to_peer;
  const RemoteRegion& r = owns_word ? p.own_via_self : p.peer_region;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> contended{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kLockThreads; ++k) {
    threads.emplace_back([&, k] {
      const uint64_t me = id_base + k;
      auto fail = [&](const std::string& why) {
        std::fprintf(stderr, "%s thread %d: %s\n", name.c_str(), k,
                     why.c_str());
        failures++;
      };
      for (uint64_t round = 0; round < kLockRounds; ++round) {
        for (uint64_t spins = 0;; ++spins) {
          auto prev = ep.CompareSwap64(r, 0, 0, 1);
          if (!prev.ok()) return fail(prev.status().ToString());
          if (*prev == 0) break;
          if (*prev != 1) return fail("lock word " + std::to_string(*prev));
          contended++;
          if (spins % 4 == 3) sched_yield();
        }
        uint64_t holder = me;
        if (Status s = ep.Put(&holder, 8, r, 128); !s.ok()) {
          return fail(s.ToString());
        }
        uint64_t counter = 0;
        if (Status s = ep.Get(&counter, 8, r, 64); !s.ok()) {
          return fail(s.ToString());
        }
        counter += 1;
        if (Status s = ep.Put(&counter, 8, r, 64); !s.ok()) {
          return fail(s.ToString());
        }
        if (Status s = ep.Flush(); !s.ok()) return fail(s.ToString());
        // Let the others run while the lock is held (on shm the section is
        // otherwise too short to ever be contended on two cores).
        if (round % 8 == 0) sched_yield();
        if (Status s = ep.Get(&holder, 8, r, 128); !s.ok()) {
          return fail(s.ToString());
        }
        if (holder != me) {
          return fail("thread " + std::to_string(holder) +
                      " was inside the lock too");
        }
        // Released with a CAS, not a Put of 0: on tcp a put is a plain copy
        // into the word that other threads of the target use atomically.
        auto prev = ep.CompareSwap64(r, 0, 1, 0);
        if (!prev.ok()) return fail(prev.status().ToString());
        if (*prev != 1) return fail("released a lock that was not held");
      }
    });
  }
  for (auto& th : threads) th.join();
  PS_CHILD_CHECK(failures.load() == 0);
  ch.Send("done " + std::to_string(contended.load()));
  for (;;) {
    std::optional<std::string> line = ch.Receive(120000);
    if (!line) return 3;
    if (*line == "exit") return 0;
    if (*line == "load" && owns_word) {
      uint64_t counter = 0;
      Status s = ep.Get(&counter, 8, r, 64);
      PS_CHILD_CHECK(s.ok(), s.ToString());
      ch.Send("value " + std::to_string(counter));
    }
  }
}

TEST_P(XferStressTest, CompareSwapLockProtectsACounterAcrossProcesses) {
  const TransportChoice t = GetParam();
  ChildProcess a = ChildProcess::Start("locker-a", [t](LineChannel& ch) {
    return RunLocker(ch, "locker-a", t, true, 100);
  });
  ChildProcess b = ChildProcess::Start("locker-b", [t](LineChannel& ch) {
    return RunLocker(ch, "locker-b", t, false, 200);
  });
  ASSERT_NO_FATAL_FAILURE(IntroduceAndStart(a, b));
  std::vector<std::string> da = AwaitDone(a, 300000);
  std::vector<std::string> db = AwaitDone(b, 300000);
  ASSERT_TRUE(a.channel().Send("load"));
  EXPECT_EQ(a.channel().Receive(20000),
            std::optional<std::string>(
                "value " + std::to_string(2 * kLockThreads * kLockRounds)));
  // The lock was actually contended, or the test proved nothing.
  ASSERT_EQ(da.size(), 1u);
  ASSERT_EQ(db.size(), 1u);
  EXPECT_GT(std::stoull(da[0]) + std::stoull(db[0]), 0u);
  ExpectCleanExit(a);
  ExpectCleanExit(b);
}

INSTANTIATE_TEST_SUITE_P(
    Transports, XferStressTest, ::testing::ValuesIn(TestedTransports()),
    [](const ::testing::TestParamInfo<TransportChoice>& info) {
      return TransportLabel(info.param);
    });

}  // namespace
}  // namespace ps::testing
