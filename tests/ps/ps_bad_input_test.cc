// Bad-input integration tests: 2 ps_server processes, 3 worker processes, on
// shm and on tcp.
//
// GarbageInAnInboxIsRejectedAndTheServerGoesOn: an intruder process says
// hello as worker 2 over a raw ControlClient, imports its inbox on both
// servers with its own xfer Context and writes, each with a valid sequence
// word through PutWithNotify: random bytes, a valid packet with one byte
// flipped (checksum), a slot whose length word exceeds the slot, and a
// well-formed packet naming a row past the shard; then one valid packet.
// Every server must reject the 4 bad ones (Stats: packets_rejected 4,
// rejected_by_sender one entry naming worker 2 with 4), name the sender in
// its log, advance the inbox head past them (the intruder sees head 5), and
// apply the valid packet and the later pushes of workers 0 and 1, whose
// rows must then be exact.
//
// KilledWorkerMidPushLeavesTheOthersExact: worker 2 pushes large gradients
// into its own table in a loop and is killed (SIGKILL) at a random moment,
// most likely in the middle of a push. Workers 0 and 1 then push and pull:
// their rows are exact, no packet is rejected (the partial packet has no
// sequence word, so the server never looks at it), and each row of the
// killed worker's table holds whole pushes only: between the pushes that
// returned before the kill and one more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/context.h"
#include "protocol/control_channel.h"
#include "protocol/inbox_ring.h"
#include "protocol/sparse_packet.h"
#include "protocol/status_words.h"
#include "tests/core/process_harness.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr uint32_t kTable = 1;
constexpr uint32_t kVictimTable = 2;
constexpr uint32_t kWorkers = 3;
constexpr uint32_t kBadPackets = 4;
constexpr size_t kVictimKeys = 100000;

constexpr char kTables[] = R"(
table { id: 1 name: "shared_sum" kind: HASHED dim: 2 capacity: 1000
        push_value_type: FP32 optimizer { name: "sum" } }
table { id: 2 name: "victim_sum" kind: HASHED dim: 2 capacity: 65536
        push_value_type: FP32 optimizer { name: "sum" } }
)";

uint64_t KeyOf(uint64_t k) { return k * 0x9E3779B97F4A7C15ULL + 99; }

// Workers 0 and 1 push these rounds into kTable: integer values, exact sums.
constexpr uint32_t kRounds = 5;
std::vector<uint64_t> HonestKeys(uint32_t w, uint32_t round) {
  std::vector<uint64_t> keys;
  for (uint64_t k = w * 100; k < w * 100 + 200; ++k) {
    if ((k + round) % 3 != 0) keys.push_back(KeyOf(k));
  }
  return keys;
}
std::vector<float> HonestGrads(uint32_t w, uint32_t round, size_t n) {
  std::vector<float> g(n * 2);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] =
        static_cast<float>(static_cast<int>((i * 5 + w * 3 + round) % 7) - 3);
  return g;
}
std::vector<uint64_t> AllHonestKeys() {
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(KeyOf(k));
  return keys;
}
void AddHonest(ExpectedRows* expected) {
  for (uint32_t w = 0; w < 2; ++w) {
    for (uint32_t r = 0; r < kRounds; ++r) {
      auto keys = HonestKeys(w, r);
      auto g = HonestGrads(w, r, keys.size());
      for (size_t i = 0; i < keys.size(); ++i)
        expected->Add(keys[i], std::span(g).subspan(i * 2, 2));
    }
  }
}

// The valid packet the intruder sends to shard s: local rows 0 and 1 get
// {8, 16} each.
constexpr float kIntruderValues[] = {8, 16, 8, 16};

// Writes one slot of `inbox` as packet number n, the way a worker does.
Status WriteSlot(xfer::Endpoint& ep, const xfer::RemoteRegion& inbox,
                 const proto::ClusterInfo& info, uint64_t n,
                 uint32_t length_word, std::span<const uint8_t> bytes) {
  std::vector<uint8_t> src(8 + bytes.size());
  std::memcpy(src.data(), &length_word, 4);
  std::memset(src.data() + 4, 0, 4);
  std::memcpy(src.data() + 8, bytes.data(), bytes.size());
  const uint64_t slot =
      protocol::SlotOffset(n, info.inbox_slots(), info.slot_bytes());
  return ep.PutWithNotify(src.data(), src.size(), inbox, slot + 8, inbox, slot,
                          n);
}

StatusOr<std::vector<uint8_t>> Encode(const proto::ClusterInfo& info,
                                      std::vector<uint32_t> rows,
                                      std::span<const float> values) {
  protocol::SparsePacketMeta meta;
  meta.table_id = kTable;
  meta.shard_id = info.shard_id();
  meta.sender_id = 2;
  meta.row_dim = 2;
  std::vector<uint8_t> out;
  std::vector<protocol::EncodedPacket> packets;
  PS_RETURN_IF_ERROR(protocol::EncodeSparsePackets(
      meta, rows, values, protocol::MaxPacketBytes(info.slot_bytes()), &out,
      &packets));
  if (packets.size() != 1) return Internal("expected one packet");
  return out;
}

// The intruder: worker 2 as far as the servers can tell.
int Intruder(LineChannel& ch, const TestCluster& cluster) {
  xfer::ContextOptions options;
  options.name = "intruder";
  options.transport = cluster.options().transport;
  auto ctx_or = xfer::Context::Create(options);
  PS_CHILD_OK(ctx_or.status());
  auto& ctx = *ctx_or;
  std::vector<protocol::ControlClient> controls;  // kept open until exit
  std::mt19937_64 rng(4242);
  for (uint32_t s = 0; s < cluster.options().num_servers; ++s) {
    PS_CHILD_ASSIGN(auto control, protocol::ControlClient::Connect(
                                      cluster.addresses()[s],
                                      {.timeout_ms = 10000 * SlowdownFactor(),
                                       .secret = {}}));
    proto::ControlRequest hello;
    hello.mutable_hello()->set_worker_id(2);
    hello.mutable_hello()->set_num_workers(kWorkers);
    hello.mutable_hello()->set_name("worker-2");
    PS_CHILD_ASSIGN(proto::ControlReply reply, control.Call(hello));
    PS_CHILD_CHECK(reply.has_cluster(), "hello without cluster info");
    const proto::ClusterInfo info = reply.cluster();
    controls.push_back(std::move(control));
    PS_CHILD_ASSIGN(auto ep, ctx->Connect(info.xfer_address()));
    PS_CHILD_ASSIGN(xfer::RemoteRegion inbox, ep->Import(info.inbox_region()));
    PS_CHILD_ASSIGN(xfer::RemoteRegion status,
                    ep->Import(info.status_region()));
    uint32_t shard_rows = 0;
    for (const auto& st : info.shard_tables()) {
      if (st.table_id() == kTable)
        shard_rows = static_cast<uint32_t>(st.rows());
    }
    PS_CHILD_CHECK(shard_rows > 2);

    // 1: random bytes.
    std::vector<uint8_t> junk(64 + rng() % 900);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    PS_CHILD_OK(WriteSlot(*ep, inbox, info, 1,
                          static_cast<uint32_t>(junk.size()), junk));
    // 2: a valid packet with one payload byte flipped: checksum mismatch.
    PS_CHILD_ASSIGN(std::vector<uint8_t> flipped,
                    Encode(info, {0, 1}, kIntruderValues));
    flipped[protocol::kSparsePacketHeaderBytes + 1] ^= 0x40;
    PS_CHILD_OK(WriteSlot(*ep, inbox, info, 2,
                          static_cast<uint32_t>(flipped.size()), flipped));
    // 3: a length word larger than the slot can hold.
    PS_CHILD_OK(WriteSlot(*ep, inbox, info, 3, info.slot_bytes(), junk));
    // 4: well-formed, checksum right, but a row past the shard's rows.
    PS_CHILD_ASSIGN(std::vector<uint8_t> far,
                    Encode(info, {0, shard_rows + 5}, kIntruderValues));
    PS_CHILD_OK(
        WriteSlot(*ep, inbox, info, 4, static_cast<uint32_t>(far.size()), far));
    // 5: valid.
    PS_CHILD_ASSIGN(std::vector<uint8_t> good,
                    Encode(info, {0, 1}, kIntruderValues));
    PS_CHILD_OK(WriteSlot(*ep, inbox, info, 5,
                          static_cast<uint32_t>(good.size()), good));

    // The server must consume all five: rejected ones are skipped.
    const protocol::StatusWords words{kWorkers};
    uint64_t head = 0;
    const int64_t deadline =
        MonotonicNanos() + int64_t{20000} * SlowdownFactor() * 1000000;
    while (head < 5 && MonotonicNanos() < deadline) {
      PS_CHILD_OK(ep->Get(&head, 8, status, words.InboxHeadOffset(2)));
      if (head < 5) usleep(2000);
    }
    PS_CHILD_CHECK(head == 5, "shard " + std::to_string(s) +
                                  ": inbox head stuck at " +
                                  std::to_string(head));
  }
  PS_CHILD_CHECK(ch.Send("done"));
  PS_CHILD_CHECK(ch.Receive(120000 * SlowdownFactor()) == "exit");
  return 0;
}

// Workers 0 and 1: push on "go", verify on "verify"; worker 0 also reports
// the servers' stats.
int HonestWorker(LineChannel& ch, const TestCluster& cluster, uint32_t w,
                 bool expect_intruder) {
  const int timeout_ms = 120000 * SlowdownFactor();
  PS_CHILD_CHECK(ch.Receive(timeout_ms) == "go");
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, w));
  for (uint32_t r = 0; r < kRounds; ++r) {
    auto keys = HonestKeys(w, r);
    PS_CHILD_OK(client->Push(kTable, keys, HonestGrads(w, r, keys.size())));
  }
  PS_CHILD_OK(client->WaitApplied());
  PS_CHILD_CHECK(ch.Send("pushed"));
  auto verify = ch.Receive(timeout_ms);
  PS_CHILD_CHECK(verify.has_value() && verify->rfind("verify", 0) == 0);

  const uint32_t shards = cluster.options().num_servers;
  ExpectedRows expected(cluster.table(kTable), shards);
  AddHonest(&expected);
  if (expect_intruder) {
    for (uint32_t s = 0; s < shards; ++s) {
      const uint64_t first = expected.map().FirstRow(s);
      expected.AddToRow(first, std::vector<double>{8, 16});
      expected.AddToRow(first + 1, std::vector<double>{8, 16});
    }
  }
  std::vector<uint64_t> keys = AllHonestKeys();
  // Also pull keys that land on the intruder's rows, if any.
  for (uint64_t k = 1000000; keys.size() < 300 + 8 && k < 1100000; ++k) {
    auto loc = expected.map().Locate(k);
    if (loc.local_row < 2) keys.push_back(k);
  }
  std::vector<float> out(keys.size() * 2);
  PS_CHILD_OK(client->Pull(kTable, keys, out));
  std::string diff =
      CompareRows(expected, keys, out, [](uint64_t, uint32_t) { return 0.0; });
  PS_CHILD_CHECK(diff.empty(), "worker " + std::to_string(w) + ":\n" + diff);

  std::string report = "ok";
  if (w == 0) {
    // verify <pushes that returned before the kill> (killed-worker test).
    std::vector<std::string> words = SplitWords(*verify);
    if (words.size() == 2) {
      const uint64_t n = std::stoull(words[1]);
      ExpectedRows per_push(cluster.table(kVictimTable), shards);
      std::vector<uint64_t> vkeys(kVictimKeys);
      const float ones[2] = {1, 1};
      for (size_t i = 0; i < kVictimKeys; ++i) {
        vkeys[i] = KeyOf(5000000 + i);
        per_push.Add(vkeys[i], ones);
      }
      std::vector<float> rows(kVictimKeys * 2);
      // Complete packets of the killed worker are still applied: wait.
      const int64_t deadline =
          MonotonicNanos() + int64_t{20000} * SlowdownFactor() * 1000000;
      std::string problem;
      for (;;) {
        PS_CHILD_OK(client->Pull(kVictimTable, vkeys, rows));
        problem.clear();
        for (size_t i = 0; i < kVictimKeys && problem.empty(); ++i) {
          const double m = per_push.Value(vkeys[i], 0);  // keys in the row
          for (uint32_t j = 0; j < 2; ++j) {
            const double pushes = rows[i * 2 + j] / m;
            if (pushes != std::floor(pushes) || pushes < n || pushes > n + 1) {
              problem = "victim key " + std::to_string(vkeys[i]) + " [" +
                        std::to_string(j) +
                        "]: " + std::to_string(rows[i * 2 + j]) + " = " +
                        std::to_string(pushes) + " pushes of " +
                        std::to_string(m) + " keys; want whole pushes in [" +
                        std::to_string(n) + ", " + std::to_string(n + 1) + "]";
              break;
            }
          }
        }
        if (problem.empty() || MonotonicNanos() > deadline) break;
        usleep(20000);
      }
      PS_CHILD_CHECK(problem.empty(), problem);
    }
    for (uint32_t s = 0; s < shards; ++s) {
      PS_CHILD_ASSIGN(proto::StatsReply st, client->Stats(s));
      report += " shard" + std::to_string(s) + " rejected " +
                std::to_string(st.packets_rejected());
      std::map<std::string, uint64_t> sorted(st.rejected_by_sender().begin(),
                                             st.rejected_by_sender().end());
      for (const auto& [sender, count] : sorted) {
        report += " by " + sender + "=" + std::to_string(count);
      }
    }
  }
  PS_CHILD_CHECK(ch.Send(report));
  return 0;
}

// The killed worker: pushes all of its keys, again and again, reporting each
// push that returned.
int VictimWorker(LineChannel& ch, const TestCluster& cluster) {
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, 2));
  std::vector<uint64_t> keys(kVictimKeys);
  for (size_t i = 0; i < kVictimKeys; ++i) keys[i] = KeyOf(5000000 + i);
  std::vector<float> grads(kVictimKeys * 2, 1.0f);
  for (uint64_t n = 1;; ++n) {
    PS_CHILD_OK(client->Push(kVictimTable, keys, grads));
    PS_CHILD_CHECK(ch.Send("pushed " + std::to_string(n)));
  }
}

// "worker-2", "worker 2" or "worker2" somewhere in `text` (any case).
bool NamesWorker2(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(c));
  for (const char* name : {"worker-2", "worker 2", "worker2", "worker_2"}) {
    size_t at = text.find(name);
    if (at != std::string::npos) {
      size_t end = at + std::strlen(name);
      if (end == text.size() ||
          !std::isdigit(static_cast<unsigned char>(text[end])))
        return true;
    }
  }
  return false;
}

// A log line that says a packet was rejected (or invalid, dropped) and
// names worker 2.
bool LogNamesRejectedSender(const std::string& log) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    const bool rejected = lower.find("reject") != std::string::npos ||
                          lower.find("invalid") != std::string::npos ||
                          lower.find("drop") != std::string::npos;
    if (rejected && NamesWorker2(lower)) return true;
  }
  return false;
}

class BadInputTest : public ::testing::TestWithParam<xfer::TransportChoice> {
 protected:
  StatusOr<std::unique_ptr<TestCluster>> StartCluster(const char* tag) {
    ClusterOptions o;
    o.num_servers = 2;
    o.num_workers = kWorkers;
    o.consistency = proto::CONSISTENCY_ASYNC;
    o.transport = GetParam();
    o.tables = kTables;
    return TestCluster::Start(o, tag);
  }
};

TEST_P(BadInputTest, GarbageInAnInboxIsRejectedAndTheServerGoesOn) {
  auto cluster = StartCluster("garbage");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& c = **cluster;
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < 2; ++w) {
    workers.push_back(ChildProcess::Start(
        "worker-" + std::to_string(w), [&c, w](LineChannel& ch) {
          return HonestWorker(ch, c, w, /*expect_intruder=*/true);
        }));
  }
  ChildProcess intruder = ChildProcess::Start(
      "intruder", [&c](LineChannel& ch) { return Intruder(ch, c); });
  const int timeout_ms = 60000 * SlowdownFactor();
  ASSERT_EQ(intruder.channel().Receive(timeout_ms), "done");
  for (auto& w : workers) ASSERT_TRUE(w.channel().Send("go"));
  for (auto& w : workers) ASSERT_EQ(w.channel().Receive(timeout_ms), "pushed");
  for (auto& w : workers) ASSERT_TRUE(w.channel().Send("verify"));
  std::string report0 = workers[0].channel().Receive(timeout_ms).value_or("");
  EXPECT_EQ(workers[1].channel().Receive(timeout_ms), "ok");
  // Stats name the intruder's inbox (worker 2) as the sender of 4 rejects
  // on each shard, whatever sender id the garbage claimed:
  // "ok shard0 rejected 4 by worker-2=4 shard1 rejected 4 by worker-2=4".
  std::vector<std::string> words = SplitWords(report0);
  ASSERT_EQ(words.size(), 11u) << report0;
  EXPECT_EQ(words[0], "ok") << report0;
  for (uint32_t s = 0; s < 2; ++s) {
    const size_t at = 1 + 5 * s;
    EXPECT_EQ(words[at], "shard" + std::to_string(s)) << report0;
    EXPECT_EQ(words[at + 1], "rejected") << report0;
    EXPECT_EQ(words[at + 2], std::to_string(kBadPackets)) << report0;
    EXPECT_EQ(words[at + 3], "by") << report0;
    EXPECT_TRUE(NamesWorker2(words[at + 4]) && words[at + 4].size() > 2 &&
                words[at + 4].substr(words[at + 4].size() - 2) == "=4")
        << report0;
  }
  ASSERT_TRUE(intruder.channel().Send("exit"));
  for (auto& w : workers) EXPECT_EQ(WaitChild(w, timeout_ms), 0);
  EXPECT_EQ(WaitChild(intruder, timeout_ms), 0);
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  // Each server logged the sender with the reason.
  for (uint32_t s = 0; s < 2; ++s) {
    std::string log = (*cluster)->server(s).ReadLog();
    EXPECT_TRUE(LogNamesRejectedSender(log))
        << "server " << s << " log does not name worker 2 as the sender of "
        << "rejected packets:\n"
        << log.substr(0, 4000);
  }
}

TEST_P(BadInputTest, KilledWorkerMidPushLeavesTheOthersExact) {
  auto cluster = StartCluster("killed");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& c = **cluster;
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < 2; ++w) {
    workers.push_back(ChildProcess::Start(
        "worker-" + std::to_string(w), [&c, w](LineChannel& ch) {
          return HonestWorker(ch, c, w, /*expect_intruder=*/false);
        }));
  }
  ChildProcess victim = ChildProcess::Start(
      "victim", [&c](LineChannel& ch) { return VictimWorker(ch, c); });
  const int timeout_ms = 60000 * SlowdownFactor();

  // Let it push for a random while (reading its reports so it never blocks
  // on the pipe), then kill it.
  std::random_device seed;
  std::mt19937 rng(seed());
  const int delay_ms = 100 + static_cast<int>(rng() % 400) * SlowdownFactor();
  uint64_t returned = 0;
  auto first = victim.channel().Receive(timeout_ms);
  ASSERT_TRUE(first.has_value()) << "the victim never completed a push";
  returned = 1;
  const int64_t kill_at = MonotonicNanos() + int64_t{delay_ms} * 1000000;
  while (MonotonicNanos() < kill_at) {
    int left = static_cast<int>((kill_at - MonotonicNanos()) / 1000000) + 1;
    auto line = victim.channel().Receive(left);
    if (line) returned = std::stoull(SplitWords(*line).at(1));
  }
  victim.Kill();
  while (auto line = victim.channel().Receive(100)) {
    returned = std::stoull(SplitWords(*line).at(1));
  }
  std::printf(
      "%s: killed the victim %d ms after its first push, after %lu "
      "complete pushes\n",
      TransportFlag(GetParam()).c_str(), delay_ms, returned);

  for (auto& w : workers) ASSERT_TRUE(w.channel().Send("go"));
  for (auto& w : workers) ASSERT_EQ(w.channel().Receive(timeout_ms), "pushed");
  for (auto& w : workers)
    ASSERT_TRUE(w.channel().Send("verify " + std::to_string(returned)));
  EXPECT_EQ(workers[0].channel().Receive(timeout_ms),
            "ok shard0 rejected 0 shard1 rejected 0");
  EXPECT_EQ(workers[1].channel().Receive(timeout_ms), "ok");
  for (auto& w : workers) EXPECT_EQ(WaitChild(w, timeout_ms), 0);
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

INSTANTIATE_TEST_SUITE_P(Transports, BadInputTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
