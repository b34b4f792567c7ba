// Completion events (Context::WaitNotification) between real processes, on
// shm and tcp: forked senders put data with a notify word into this
// process's kNotifyEvents region, and this process checks that every event
// arrives once, names its sender, word and value, comes after its data, in
// each sender's order; that a waiter sleeps and times out; and that a full
// queue refuses a put with nothing written. The same for data regions that
// verbs stages through the receiver's CPU (device memory without GPUDirect;
// ContextOptions::verbs_stage_host_regions_for_testing): the event is
// published only after the CPU's copy.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/process_harness.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::ContextOptions;
using xfer::MemoryRegion;
using xfer::Notification;
using xfer::TransportChoice;

constexpr size_t kMessageBytes = 256;

// A sender child. Serves lines until "exit":
//   "go ADDRESS DATA NOTIFY COUNT" -> "instance I", then COUNT messages,
//       then "sent". Message j of sender `index` goes to data offset
//       (index * COUNT + j) * kMessageBytes with notify word index * 8 set
//       to j + 1, each a blocking PutWithNotify (so they are ordered).
//   "extra" -> message COUNT (one past the last) the same way, then "ok" or
//       "refused CODE".
int RunSender(LineChannel& ch, int index, TransportChoice transport) {
  auto ctx = Context::Create(
      TestOptions("sender-" + std::to_string(index), transport, 0, 2000));
  PS_CHILD_CHECK(ctx.ok(), ctx.status().ToString());
  std::shared_ptr<xfer::Endpoint> ep;
  xfer::RemoteRegion data, notify;
  uint64_t count = 0;
  std::vector<uint8_t> message(kMessageBytes);
  auto send = [&](uint64_t j) {
    FillPattern(message.data(), message.size(), index * 1000003 + j);
    return ep->PutWithNotify(message.data(), message.size(), data,
                             (index * count + j) * kMessageBytes, notify,
                             index * 8, j + 1);
  };
  for (;;) {
    std::optional<std::string> line = ch.Receive(30000);
    if (!line.has_value() || *line == "exit") return 0;
    std::vector<std::string> w = SplitWords(*line);
    if (w[0] == "extra") {
      Status s = send(count);
      ch.Send(s.ok() ? "ok"
                     : "refused " + std::to_string(static_cast<int>(s.code())));
      continue;
    }
    PS_CHILD_CHECK(w.size() == 5 && w[0] == "go", *line);
    if (ep == nullptr) {
      auto connected = (*ctx)->Connect(w[1]);
      PS_CHILD_CHECK(connected.ok(), connected.status().ToString());
      ep = std::move(connected).value();
    }
    auto d = ep->Import(HexDecode(w[2]).value_or(""));
    auto n = ep->Import(HexDecode(w[3]).value_or(""));
    PS_CHILD_CHECK(d.ok() && n.ok());
    data = std::move(d).value();
    notify = std::move(n).value();
    count = std::stoull(w[4]);
    ch.Send("instance " + std::to_string((*ctx)->instance()));
    for (uint64_t j = 0; j < count; ++j) {
      Status s = send(j);
      PS_CHILD_CHECK(s.ok(), s.ToString());
    }
    ch.Send("sent");
  }
}

class XferEventsTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  // Forks `senders` children (before this process has threads), then makes
  // the receiving context with `capacity` notification cells; `staged`:
  // verbs senders reach its data regions through its CPU.
  void Start(int senders, uint32_t capacity = 4096, bool staged = false) {
    PS_SKIP_IF_UNUSABLE(GetParam());
    for (int i = 0; i < senders; ++i) {
      children_.push_back(ChildProcess::Start(
          "sender-" + std::to_string(i), [i, t = GetParam()](LineChannel& ch) {
            return RunSender(ch, i, t);
          }));
    }
    ContextOptions o = TestOptions("receiver", GetParam(), 0, 2000);
    o.notification_capacity = capacity;
    o.verbs_stage_host_regions_for_testing = staged;
    auto ctx = Context::Create(o);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
  }

  // Tells every sender to go with `count` messages into `data` (notify
  // words in `notify`); returns their instances by index.
  std::vector<uint64_t> Go(const MemoryRegion& data, const MemoryRegion& notify,
                           uint64_t count) {
    std::vector<uint64_t> instances;
    for (ChildProcess& c : children_) {
      c.channel().Send(
          "go " + ctx_->address() + " " + HexEncode(data.descriptor()) + " " +
          HexEncode(notify.descriptor()) + " " + std::to_string(count));
    }
    for (ChildProcess& c : children_) {
      std::optional<std::string> line = c.channel().Receive(20000);
      std::vector<std::string> w = SplitWords(line.value_or(""));
      EXPECT_EQ(w.size(), 2u) << c.name() << ": " << line.value_or("nothing");
      instances.push_back(w.size() == 2 ? std::stoull(w[1]) : 0);
    }
    return instances;
  }

  void TearDown() override {
    for (ChildProcess& c : children_) {
      c.channel().Send("exit");
      EXPECT_EQ(c.Wait(20000), std::optional<int>(0)) << c.name();
    }
  }

  // Every sender's `count` events arrive once, after their data, in order.
  void ExpectEveryEventOnceInOrder(int senders, uint64_t count);

  std::vector<ChildProcess> children_;
  std::unique_ptr<Context> ctx_;
};

// Registered (application) memory takes the streamed path on shm too.
enum class NotifyMemory { kAllocated, kRegistered };

TEST_P(XferEventsTest, EveryEventOnceAfterItsDataInEachSendersOrder) {
  constexpr int kSenders = 3;
  Start(kSenders);
  if (IsSkipped()) return;
  ExpectEveryEventOnceInOrder(kSenders, 200);
}

// The data region has no atomics, so a verbs sender reaches it through the
// receiver's CPU: the event must still come after the bytes are in place.
TEST_P(XferEventsTest, EveryEventOnceAfterItsStagedData) {
  constexpr int kSenders = 2;
  Start(kSenders, 4096, /*staged=*/true);
  if (IsSkipped()) return;
  ExpectEveryEventOnceInOrder(kSenders, 40);
}

void XferEventsTest::ExpectEveryEventOnceInOrder(int senders, uint64_t count) {
  for (NotifyMemory kind :
       {NotifyMemory::kAllocated, NotifyMemory::kRegistered}) {
    SCOPED_TRACE(kind == NotifyMemory::kAllocated ? "allocated" : "registered");
    auto data =
        ctx_->Allocate(senders * count * kMessageBytes, xfer::kRemoteWrite);
    std::vector<uint64_t> words(senders, 0);
    auto notify =
        kind == NotifyMemory::kAllocated
            ? ctx_->Allocate(4096, xfer::kRemoteWrite | xfer::kNotifyEvents)
            : ctx_->Register(words.data(), words.size() * 8,
                             xfer::kRemoteWrite | xfer::kNotifyEvents);
    ASSERT_TRUE(data.ok() && notify.ok());
    const std::vector<uint64_t> instances = Go(**data, **notify, count);
    std::map<uint64_t, int> index_of;
    for (int i = 0; i < senders; ++i) index_of[instances[i]] = i;
    ASSERT_EQ(index_of.size(), static_cast<size_t>(senders));

    std::vector<uint64_t> last(senders, 0);
    std::vector<uint8_t> expected(kMessageBytes);
    for (uint64_t got = 0; got < senders * count; ++got) {
      StatusOr<Notification> n =
          ctx_->WaitNotification(std::chrono::seconds(10));
      ASSERT_TRUE(n.ok()) << n.status().ToString() << " after " << got;
      ASSERT_EQ(index_of.count(n->sender), 1u) << "unknown sender";
      const int i = index_of[n->sender];
      EXPECT_EQ(n->region_id, (*notify)->id());
      EXPECT_EQ(n->offset, uint64_t(i) * 8);
      // Each sender's events in its order, none lost or repeated.
      ASSERT_EQ(n->value, last[i] + 1) << "sender " << i;
      last[i] = n->value;
      // The data is in place when its event is read.
      const uint64_t j = n->value - 1;
      FillPattern(expected.data(), kMessageBytes, i * 1000003 + j);
      const uint8_t* at = static_cast<const uint8_t*>((*data)->data()) +
                          (i * count + j) * kMessageBytes;
      ASSERT_EQ(std::memcmp(at, expected.data(), kMessageBytes), 0)
          << "message " << j << " of sender " << i << " not there yet";
    }
    for (ChildProcess& c : children_) {
      EXPECT_EQ(c.channel().Receive(10000), std::optional<std::string>("sent"));
    }
    EXPECT_FALSE(ctx_->PollNotification().has_value()) << "an extra event";
    ASSERT_TRUE(ctx_->Deregister(**notify).ok());
  }
}

TEST_P(XferEventsTest, WaiterSleepsUntilTimeoutOrAnEvent) {
  Start(1);
  if (IsSkipped()) return;
  // Nothing sent: the wait times out after its time, without burning CPU.
  timespec cpu0{}, cpu1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  const int64_t t0 = MonotonicNanos();
  StatusOr<Notification> none =
      ctx_->WaitNotification(std::chrono::milliseconds(300));
  const int64_t waited_ms = (MonotonicNanos() - t0) / 1'000'000;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  EXPECT_TRUE(none.status().Is(StatusCode::kTimeout)) << none.status();
  EXPECT_GE(waited_ms, 300);
  EXPECT_LT(waited_ms, 5000);
  const int64_t cpu_ms = (cpu1.tv_sec - cpu0.tv_sec) * 1000 +
                         (cpu1.tv_nsec - cpu0.tv_nsec) / 1'000'000;
  EXPECT_LT(cpu_ms, 100) << "the waiter spun instead of sleeping";

  // A sleeping waiter is woken by the event (well before its timeout).
  auto data = ctx_->Allocate(kMessageBytes, xfer::kRemoteWrite);
  auto notify = ctx_->Allocate(64, xfer::kRemoteWrite | xfer::kNotifyEvents);
  ASSERT_TRUE(data.ok() && notify.ok());
  Go(**data, **notify, 1);
  const int64_t t1 = MonotonicNanos();
  StatusOr<Notification> one = ctx_->WaitNotification(std::chrono::seconds(20));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->value, 1u);
  EXPECT_LT((MonotonicNanos() - t1) / 1'000'000, 15000);
}

TEST_P(XferEventsTest, FullQueueRefusesThePutWithNothingWritten) {
  constexpr uint64_t kCapacity = 4;
  Start(1, kCapacity);
  if (IsSkipped()) return;
  auto data =
      ctx_->Allocate((kCapacity + 1) * kMessageBytes, xfer::kRemoteWrite);
  auto notify = ctx_->Allocate(64, xfer::kRemoteWrite | xfer::kNotifyEvents);
  ASSERT_TRUE(data.ok() && notify.ok());
  Go(**data, **notify, kCapacity);
  ASSERT_EQ(children_[0].channel().Receive(20000),
            std::optional<std::string>("sent"));
  // Nobody read: the fifth put (message kCapacity, into the last slot)
  // waits half the sender's peer timeout, then is refused, and its bytes
  // never reach the region.
  children_[0].channel().Send("extra");
  EXPECT_EQ(children_[0].channel().Receive(20000),
            std::optional<std::string>("refused " +
                                       std::to_string(static_cast<int>(
                                           StatusCode::kResourceExhausted))));
  const uint8_t* fifth =
      static_cast<const uint8_t*>((*data)->data()) + kCapacity * kMessageBytes;
  for (size_t b = 0; b < kMessageBytes; ++b) ASSERT_EQ(fifth[b], 0) << b;
  // Reading makes room: the same put goes through.
  for (uint64_t v = 1; v <= kCapacity; ++v) {
    std::optional<Notification> n = ctx_->PollNotification();
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->value, v);
  }
  children_[0].channel().Send("extra");
  EXPECT_EQ(children_[0].channel().Receive(20000),
            std::optional<std::string>("ok"));
  StatusOr<Notification> n = ctx_->WaitNotification(std::chrono::seconds(10));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->value, kCapacity + 1);
  std::vector<uint8_t> expected(kMessageBytes);
  FillPattern(expected.data(), kMessageBytes, kCapacity);
  EXPECT_EQ(std::memcmp(fifth, expected.data(), kMessageBytes), 0);
}

TEST(XferEventsOptions, CapacityMustBeAPowerOfTwo) {
  ContextOptions o = TestOptions("bad", TransportChoice::kTcp);
  o.notification_capacity = 1000;
  auto ctx = Context::Create(o);
  EXPECT_TRUE(ctx.status().Is(StatusCode::kInvalidArgument)) << ctx.status();
  EXPECT_NE(ctx.status().message().find("power of two"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Transports, XferEventsTest,
                         ::testing::ValuesIn(TestedTransports()),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

}  // namespace
}  // namespace ps::testing
