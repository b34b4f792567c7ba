// Exact-key table integration test: 2 ps_server processes, 3 worker
// processes, on shm and on tcp. The table admits a key at its 3rd push
// (counted across workers; the pushes before are dropped) and evicts rows
// not updated for more than 3 steps (a push's step is its worker's clock).
//
// Phase 1, all at step 0: key group A is pushed once, B twice (by two
// workers), C three times (by three workers), D three times (by one worker).
// Then A and B have no row (Pull gives zeros, Stats counts 40 keys pending)
// and C and D have one holding the admitting push (every push adds {1, 2}).
// Phase 2, worker 0 alone: it clocks to step 5 pushing half of C (C1) at
// every step, then pushes a new group E. Rows idle since step 0 (the other
// half of C and all of D) are evicted: Stats' exact_evicted grows by 30,
// exact_rows shrinks to the 10 of C1, and those keys pull as zeros again.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/checkpoint_sync.h"
#include "tests/core/process_harness.h"
#include "tests/ps/ps_cluster.h"

namespace ps::testing {
namespace {

constexpr uint32_t kTable = 5;
constexpr uint32_t kWorkers = 3;
constexpr uint32_t kGroup = 20;

constexpr char kTables[] = R"(
table { id: 5 name: "exact_ids" kind: EXACT dim: 2 capacity: 1000
        push_value_type: FP32 optimizer { name: "sum" }
        admit_after_pushes: 3 evict_after_steps: 3 }
)";

std::vector<uint64_t> Group(char name, size_t first = 0, size_t n = kGroup) {
  std::vector<uint64_t> keys;
  for (size_t i = first; i < first + n; ++i)
    keys.push_back(static_cast<uint64_t>(name) * 1000003 + i * 7919);
  return keys;
}

Status PushGroup(worker::PsClient& client, const std::vector<uint64_t>& keys) {
  std::vector<float> grads;
  for (size_t i = 0; i < keys.size(); ++i) {
    grads.push_back(1.0f);
    grads.push_back(2.0f);
  }
  return client.Push(kTable, keys, grads);
}

// "" if every key of `keys` pulls as {scale, 2 * scale}.
std::string CheckGroup(worker::PsClient& client, const std::string& name,
                       const std::vector<uint64_t>& keys, float scale) {
  std::vector<float> out(keys.size() * 2, -1.0f);
  Status s = client.Pull(kTable, keys, out);
  if (!s.ok()) return "pull of group " + name + ": " + s.ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (out[2 * i] != scale || out[2 * i + 1] != 2 * scale) {
      return "group " + name + " key " + std::to_string(keys[i]) + ": got {" +
             std::to_string(out[2 * i]) + ", " +
             std::to_string(out[2 * i + 1]) + "}, want {" +
             std::to_string(scale) + ", " + std::to_string(2 * scale) + "}";
    }
  }
  return "";
}

StatusOr<proto::StatsReply> TotalStats(worker::PsClient& client,
                                       uint32_t shards) {
  proto::StatsReply total;
  for (uint32_t s = 0; s < shards; ++s) {
    PS_ASSIGN_OR_RETURN(proto::StatsReply r, client.Stats(s));
    total.set_exact_rows(total.exact_rows() + r.exact_rows());
    total.set_exact_evicted(total.exact_evicted() + r.exact_evicted());
    total.set_exact_admission_pending(total.exact_admission_pending() +
                                      r.exact_admission_pending());
    total.set_rows_applied(total.rows_applied() + r.rows_applied());
  }
  return total;
}

std::string StatsText(const proto::StatsReply& s) {
  return "exact_rows " + std::to_string(s.exact_rows()) + ", exact_evicted " +
         std::to_string(s.exact_evicted()) + ", exact_admission_pending " +
         std::to_string(s.exact_admission_pending());
}

int ExactWorker(LineChannel& ch, const TestCluster& cluster, uint32_t w) {
  PS_CHILD_ASSIGN(auto client, ConnectWorker(cluster, w));
  const uint32_t shards = cluster.options().num_servers;
  const int timeout_ms = 60000 * SlowdownFactor();
  PS_CHILD_CHECK(ch.Receive(timeout_ms) == "phase1");
  switch (w) {
    case 0:
      PS_CHILD_OK(PushGroup(*client, Group('A')));
      PS_CHILD_OK(PushGroup(*client, Group('B')));
      PS_CHILD_OK(PushGroup(*client, Group('C')));
      break;
    case 1:
      PS_CHILD_OK(PushGroup(*client, Group('B')));
      PS_CHILD_OK(PushGroup(*client, Group('C')));
      break;
    case 2:
      PS_CHILD_OK(PushGroup(*client, Group('C')));
      for (int i = 0; i < 3; ++i) PS_CHILD_OK(PushGroup(*client, Group('D')));
      break;
  }
  // Pushes are in the inboxes when they return; applied after this.
  PS_CHILD_OK(client->WaitApplied());
  PS_CHILD_CHECK(ch.Send("pushed"));
  if (w != 0) {
    PS_CHILD_CHECK(ch.Receive(timeout_ms) == "exit");
    return 0;
  }

  // Worker 0 checks phase 1 once every worker's pushes returned.
  PS_CHILD_CHECK(ch.Receive(timeout_ms) == "check1");
  std::string problem;
  for (char g : {'A', 'B'}) {
    if (problem.empty())
      problem = CheckGroup(*client, std::string(1, g), Group(g), 0.0f);
  }
  for (char g : {'C', 'D'}) {
    if (problem.empty())
      problem = CheckGroup(*client, std::string(1, g), Group(g), 1.0f);
  }
  PS_CHILD_ASSIGN(proto::StatsReply s1, TotalStats(*client, shards));
  if (problem.empty() &&
      (s1.exact_rows() != 2 * kGroup || s1.exact_evicted() != 0 ||
       s1.exact_admission_pending() != 2 * kGroup)) {
    problem =
        "after phase 1 want exact_rows 40, exact_evicted 0, "
        "exact_admission_pending 40; stats: " +
        StatsText(s1);
  }
  PS_CHILD_CHECK(ch.Send(problem.empty() ? "ok" : "phase 1: " + problem));
  if (!problem.empty()) return 1;

  // Phase 2: keep C1 fresh up to step 5, let C2 and D age out.
  PS_CHILD_CHECK(ch.Receive(timeout_ms) == "phase2");
  const std::vector<uint64_t> c1 = Group('C', 0, kGroup / 2);
  const std::vector<uint64_t> c2 = Group('C', kGroup / 2, kGroup / 2);
  for (uint64_t step = 1; step <= 5; ++step) {
    PS_CHILD_ASSIGN(uint64_t clock, client->Clock());
    PS_CHILD_CHECK(clock == step, "clock " + std::to_string(clock));
    PS_CHILD_OK(PushGroup(*client, c1));
  }
  PS_CHILD_OK(PushGroup(*client, Group('E')));
  PS_CHILD_OK(client->WaitApplied());
  problem = CheckGroup(*client, "C1", c1, 6.0f);
  if (problem.empty()) problem = CheckGroup(*client, "C2", c2, 0.0f);
  if (problem.empty()) problem = CheckGroup(*client, "D", Group('D'), 0.0f);
  if (problem.empty()) problem = CheckGroup(*client, "E", Group('E'), 0.0f);
  PS_CHILD_ASSIGN(proto::StatsReply s2, TotalStats(*client, shards));
  if (problem.empty() && (s2.exact_rows() != kGroup / 2 ||
                          s2.exact_evicted() != kGroup / 2 + kGroup)) {
    problem = "after phase 2 want exact_rows 10, exact_evicted 30; stats: " +
              StatsText(s2);
  }
  PS_CHILD_CHECK(ch.Send(problem.empty() ? "ok" : "phase 2: " + problem));
  return problem.empty() ? 0 : 1;
}

class ExactTableTest : public ::testing::TestWithParam<xfer::TransportChoice> {
};

TEST_P(ExactTableTest, AdmissionByPushCountAndEvictionByAge) {
  ClusterOptions o;
  o.num_servers = 2;
  o.num_workers = kWorkers;
  o.consistency = proto::CONSISTENCY_ASYNC;
  o.transport = GetParam();
  o.tables = kTables;
  // Precondition of the counts below: every group has keys on both shards,
  // so both servers admit, count and evict.
  protocol::ShardMap map(1000, o.num_servers, proto::EXACT, kTable);
  for (char g : {'A', 'B', 'C', 'D', 'E'}) {
    std::vector<int> per_shard(o.num_servers, 0);
    for (uint64_t k : Group(g)) ++per_shard[map.ShardOfKey(k)];
    ASSERT_GT(per_shard[0], 0) << g;
    ASSERT_GT(per_shard[1], 0) << g;
  }
  auto cluster = TestCluster::Start(o, "exact");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const TestCluster& c = **cluster;
  std::vector<ChildProcess> workers;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    workers.push_back(ChildProcess::Start(
        "worker-" + std::to_string(w),
        [&c, w](LineChannel& ch) { return ExactWorker(ch, c, w); }));
  }
  const int timeout_ms = 60000 * SlowdownFactor();
  for (auto& worker : workers) ASSERT_TRUE(worker.channel().Send("phase1"));
  for (uint32_t w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(workers[w].channel().Receive(timeout_ms), "pushed")
        << "worker " << w;
  }
  ASSERT_TRUE(workers[0].channel().Send("check1"));
  EXPECT_EQ(workers[0].channel().Receive(timeout_ms), "ok");
  ASSERT_TRUE(workers[0].channel().Send("phase2"));
  EXPECT_EQ(workers[0].channel().Receive(timeout_ms), "ok");
  for (uint32_t w = 1; w < kWorkers; ++w)
    ASSERT_TRUE(workers[w].channel().Send("exit"));
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(WaitChild(workers[w], timeout_ms), 0) << "worker " << w;
  }
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

// One worker and `servers` servers of table 5: EXACT, rows of `dim`
// floats that are sums of their gradients, every key admitted at its first
// push, at most `capacity` rows a shard.
ClusterOptions SumTableCluster(uint32_t servers, uint32_t dim,
                               uint64_t capacity,
                               xfer::TransportChoice transport) {
  ClusterOptions o;
  o.num_servers = servers;
  o.num_workers = 1;
  o.transport = transport;
  o.tables = R"(table { id: 5 name: "exact_ids" kind: EXACT dim: )" +
             std::to_string(dim) + " capacity: " + std::to_string(capacity) +
             R"( push_value_type: FP32 optimizer { name: "sum" }
                 admit_after_pushes: 1 })";
  return o;
}

// Pulls go through the inboxes as lookups (client/lookup_channel.h): with
// small inboxes (4 slots of 4 KiB, so 16 KiB of lookup replies: 1,000 rows
// of dim 2 a chunk, 496 keys a packet) a pull of 5,000 keys in random order,
// 500 of them repeats and 500 without a row, asks for its 4,500 distinct
// keys once each, in several chunks of two packets and more on each
// server, and each key still reads its own row. A pull right after a push,
// without waiting for it to be applied, reads the push: the lookup follows
// it through the same inbox. Then the choice to look for repeats: a pull
// without any makes the next 63 small pulls go as given (repeats asked for
// again), and the one after looks again. Returns each server's stats after
// the first pull.
std::vector<proto::StatsReply> PullInManyChunks(
    uint32_t servers, xfer::TransportChoice transport) {
  ClusterOptions o = SumTableCluster(servers, 2, 10000, transport);
  o.extra_flags = {"--inbox_slots=4", "--slot_bytes=4096"};
  auto cluster = TestCluster::Start(o, "exact-chunks");
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return {};
  auto client = ConnectWorker(**cluster, 0);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  std::vector<uint64_t> pushed;
  std::vector<float> grads;
  for (uint64_t i = 0; i < 4000; ++i) {
    pushed.push_back(i * 0x9e3779b97f4a7c15ull + 1);
    grads.push_back(static_cast<float>(i));
    grads.push_back(-static_cast<float>(i) - 0.5f);
  }
  EXPECT_TRUE((*client)->Push(kTable, pushed, grads).ok());
  // Every pushed key once, 500 of them twice, 500 keys never pushed.
  std::vector<uint64_t> keys = pushed;
  for (uint64_t i = 0; i < 500; ++i) keys.push_back(pushed[i * 7]);
  for (uint64_t i = 0; i < 500; ++i) keys.push_back(~i);
  std::mt19937_64 rng(5);
  std::shuffle(keys.begin(), keys.end(), rng);
  std::vector<float> out(keys.size() * 2, -1.0f);
  Status s = (*client)->Pull(kTable, keys, out);
  EXPECT_TRUE(s.ok()) << s;
  std::unordered_map<uint64_t, size_t> index;
  for (size_t i = 0; i < pushed.size(); ++i) index[pushed[i]] = i;
  size_t wrong = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    auto it = index.find(keys[j]);
    const float want0 = it == index.end() ? 0.0f : grads[2 * it->second];
    const float want1 = it == index.end() ? 0.0f : grads[2 * it->second + 1];
    wrong += out[2 * j] != want0 || out[2 * j + 1] != want1;
  }
  EXPECT_EQ(wrong, 0u) << "of " << keys.size() << " keys";
  // A pull of no keys asks no server anything.
  s = (*client)->Pull(kTable, {}, {});
  EXPECT_TRUE(s.ok()) << s;
  std::vector<proto::StatsReply> stats;
  uint64_t looked_up = 0;
  for (uint32_t shard = 0; shard < servers; ++shard) {
    auto reply = (*client)->Stats(shard);
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return {};
    looked_up += reply->lookup_keys();
    stats.push_back(*reply);
  }
  EXPECT_EQ(looked_up, 4500u);

  // Keys each server was asked for by the pulls of `pull` (each a pull).
  auto asked_by = [&](const std::vector<std::vector<uint64_t>>& pulls) {
    uint64_t before = 0, after = 0;
    for (uint32_t shard = 0; shard < servers; ++shard) {
      auto reply = (*client)->Stats(shard);
      EXPECT_TRUE(reply.ok()) << reply.status();
      before += reply.ok() ? reply->lookup_keys() : 0;
    }
    for (const std::vector<uint64_t>& pull : pulls) {
      std::vector<float> rows(pull.size() * 2);
      Status p = (*client)->Pull(kTable, pull, rows);
      EXPECT_TRUE(p.ok()) << p;
    }
    for (uint32_t shard = 0; shard < servers; ++shard) {
      auto reply = (*client)->Stats(shard);
      EXPECT_TRUE(reply.ok()) << reply.status();
      after += reply.ok() ? reply->lookup_keys() : 0;
    }
    return after - before;
  };
  const std::vector<uint64_t> once(pushed.begin(), pushed.begin() + 1000);
  std::vector<uint64_t> twice = once;
  twice.insert(twice.end(), once.begin(), once.end());
  EXPECT_EQ(asked_by({once}), 1000u);  // no repeats: as given from now on
  EXPECT_EQ(asked_by({twice}), 2000u);
  EXPECT_EQ(asked_by(std::vector<std::vector<uint64_t>>(62, {pushed[0]})), 62u);
  EXPECT_EQ(asked_by({twice}), 1000u);  // looks again
  EXPECT_EQ(asked_by({twice}), 1000u);
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  return stats;
}

TEST_P(ExactTableTest, PullsInManyChunksReadEachKeysRowAndFollowPushes) {
  const auto stats = PullInManyChunks(1, GetParam());
  // Four chunks of 1,000 keys, each in packets of 496 + 496 + 8 keys, and
  // one of 500 keys in packets of 496 + 4.
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].lookups_answered(), 14u);
}

// With two servers both shards' lookups are in flight at once
// (LookupChannel::Drive): each server answers its chunks while the worker
// places the other's rows, and every key still reads its own row.
TEST_P(ExactTableTest, PullsOfTwoShardsAtOnceReadEachKeysRow) {
  const auto stats = PullInManyChunks(2, GetParam());
  ASSERT_EQ(stats.size(), 2u);
  for (const proto::StatsReply& shard : stats) {
    // About 2,250 keys each: three chunks or more, so the two servers'
    // chunks interleave.
    EXPECT_GE(shard.lookups_answered(), 6u);
    EXPECT_GT(shard.lookup_keys(), 2000u);
  }
}

// A push of many keys goes out in pieces as it is summed (ExactPath: more
// than a round of distinct keys, duplicates summed whole within a piece),
// and a pull of many goes in hash order: every key's row is the sum of
// its gradients, read back where the key was asked. A push with a
// non-finite gradient, and one of finite gradients whose sum is not finite
// (which takes the path that sums everything first), are refused before
// anything is sent: no row changes. Over two servers with rows of two
// floats, and over one with rows of one float (whose gradients travel
// through the worker's sort with their keys).
void LargePushesAndPulls(uint32_t servers, uint32_t dim,
                         xfer::TransportChoice transport,
                         std::vector<std::string> server_flags = {}) {
  ClusterOptions o = SumTableCluster(servers, dim, 400000, transport);
  o.extra_flags = std::move(server_flags);
  auto cluster = TestCluster::Start(o, "exact-stream");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectWorker(**cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  // 300,000 distinct keys, the first 1,000 of them given three times and
  // key 1 20,000 times more (more than a round takes from its lane, so a
  // round must stretch to keep its sum whole). A row is
  // (scale * (i % 1000), scale), cut to its first `dim` floats.
  constexpr uint64_t kKeys = 300000;
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  auto give = [&](uint64_t i, float scale) {
    keys.push_back(i * 0x9e3779b97f4a7c15ull + 3);
    const float row[2] = {scale * static_cast<float>(i % 1000), scale};
    grads.insert(grads.end(), row, row + dim);
  };
  for (uint64_t i = 0; i < kKeys; ++i) give(i, 1.0f);
  for (uint64_t i = 0; i < 1000; ++i) give(i, 2.0f);
  for (uint64_t i = 0; i < 1000; ++i) give(i, 0.5f);
  constexpr int kMoreOfKey1 = 20000;
  for (int n = 0; n < kMoreOfKey1; ++n) give(1, 1.0f);
  std::vector<uint64_t> order(keys.size());
  std::mt19937_64 rng(9);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint64_t> shuffled_keys;
  std::vector<float> shuffled_grads;
  for (uint64_t i : order) {
    shuffled_keys.push_back(keys[i]);
    for (uint32_t j = 0; j < dim; ++j) {
      shuffled_grads.push_back(grads[dim * i + j]);
    }
  }
  ASSERT_TRUE((*client)->Push(kTable, shuffled_keys, shuffled_grads).ok());
  ASSERT_TRUE((*client)->WaitApplied().ok());
  // Each key's sum went out once, whole: as many keys applied as there are
  // distinct keys (a sum split over two pieces would count twice).
  auto stats = TotalStats(**client, servers);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->rows_applied(), kKeys);
  EXPECT_EQ(stats->exact_rows(), kKeys);

  // Pulled in an order of their own, not the push's.
  std::vector<uint64_t> pulled(keys.begin(), keys.begin() + kKeys);
  auto expect_rows = [&](const char* after) {
    std::vector<float> out(kKeys * dim, -1.0f);
    Status s = (*client)->Pull(kTable, pulled, out);
    ASSERT_TRUE(s.ok()) << s;
    size_t wrong = 0;
    for (uint64_t i = 0; i < kKeys; ++i) {
      const float scale = i == 1 ? 3.5f + kMoreOfKey1 : i < 1000 ? 3.5f : 1.0f;
      const float row[2] = {scale * static_cast<float>(i % 1000), scale};
      for (uint32_t j = 0; j < dim; ++j) wrong += out[dim * i + j] != row[j];
    }
    EXPECT_EQ(wrong, 0u) << "of " << kKeys << " keys, " << after;
  };
  expect_rows("after the push");

  // A NaN in the middle of a large push: refused, nothing sent.
  std::vector<float> bad = shuffled_grads;
  bad[bad.size() / 2] = std::numeric_limits<float>::quiet_NaN();
  Status s = (*client)->Push(kTable, shuffled_keys, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("non-finite"), std::string::npos) << s;
  // Finite gradients, one key's two of them summing past FLT_MAX.
  bad = shuffled_grads;
  const uint64_t twice = shuffled_keys[0];
  std::vector<uint64_t> overflow_keys = shuffled_keys;
  overflow_keys.push_back(twice);
  bad[0] = 3e38f;
  bad.push_back(3e38f);
  if (dim == 2) bad.push_back(0.0f);
  s = (*client)->Push(kTable, overflow_keys, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  ASSERT_TRUE((*client)->WaitApplied().ok());
  expect_rows("after the refused pushes");
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

TEST_P(ExactTableTest, LargePushesStreamAndNonFiniteOnesChangeNothing) {
  LargePushesAndPulls(/*servers=*/2, /*dim=*/2, GetParam());
}

TEST_P(ExactTableTest, LargePushesAndPullsOfOneServerAndOneFloatRows) {
  LargePushesAndPulls(/*servers=*/1, /*dim=*/1, GetParam());
}

// A reply region of a few chunks' rows (8 slots of 64 KiB: ~65,000 rows a
// half): a large pull from one server asks for its first keys while the
// rest still sort, in parts of chunks while the server would idle, and
// every key still reads its own row.
TEST_P(ExactTableTest, LargePullsOfOneServerAskWhileTheKeysSort) {
  LargePushesAndPulls(/*servers=*/1, /*dim=*/1, GetParam(),
                      {"--inbox_slots=8", "--slot_bytes=65536"});
}

// Servers that do not take keys in hash order (as builds before it): the
// workers push in key order and pull in the caller's order, as then.
TEST_P(ExactTableTest, LargePushesAndPullsToServersWithoutHashOrder) {
  LargePushesAndPulls(/*servers=*/2, /*dim=*/2, GetParam(),
                      {"--keys_in_hash_order=false"});
}

// A push of fewer than 64Ki keys sums each distinct key's gradients first
// (ExactPath::PushDistinct) and sends each sum once: a training batch's
// keys repeat. Fresh keys (few repeats) then send the next pushes as
// given, summed after the sort: both give every key the sum of its
// gradients (integers: exact in any order), one row applied per distinct
// key a push. A non-finite gradient, or finite ones whose sum is not,
// changes nothing.
void SmallPushesWithRepeats(uint32_t servers, xfer::TransportChoice transport) {
  auto cluster = TestCluster::Start(
      SumTableCluster(servers, 2, 100000, transport), "exact-small-push");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectWorker(**cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  const auto key_of = [](uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 11; };
  std::unordered_map<uint64_t, std::pair<float, float>> want;
  std::mt19937_64 rng(5);
  uint64_t applied = 0;
  // `copies` gradients for each of keys [first, first + n), shuffled; key
  // i's are (i % 7 + 1, copy).
  auto push = [&](uint64_t first, uint64_t n, int copies) {
    std::vector<std::pair<uint64_t, int>> given;
    for (uint64_t i = first; i < first + n; ++i) {
      for (int c = 0; c < copies; ++c) given.emplace_back(i, c);
    }
    std::shuffle(given.begin(), given.end(), rng);
    std::vector<uint64_t> keys;
    std::vector<float> grads;
    for (const auto& [i, c] : given) {
      keys.push_back(key_of(i));
      const float g[2] = {static_cast<float>(i % 7 + 1), static_cast<float>(c)};
      grads.insert(grads.end(), g, g + 2);
      want[key_of(i)].first += g[0];
      want[key_of(i)].second += g[1];
    }
    Status s = (*client)->Push(kTable, keys, grads);
    ASSERT_TRUE(s.ok()) << s;
    applied += n;
  };
  auto expect_rows = [&](const std::string& after) {
    ASSERT_TRUE((*client)->WaitApplied().ok());
    auto stats = TotalStats(**client, servers);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->rows_applied(), applied) << after;
    std::vector<uint64_t> keys;
    for (const auto& [key, row] : want) keys.push_back(key);
    std::vector<float> out(keys.size() * 2, -1.0f);
    Status s = (*client)->Pull(kTable, keys, out);
    ASSERT_TRUE(s.ok()) << s;
    size_t wrong = 0;
    for (size_t k = 0; k < keys.size(); ++k) {
      wrong += out[2 * k] != want[keys[k]].first ||
               out[2 * k + 1] != want[keys[k]].second;
    }
    EXPECT_EQ(wrong, 0u) << "of " << keys.size() << " keys, " << after;
  };
  push(0, 3000, 4);  // 12,000 keys, 3,000 distinct: summed first
  expect_rows("after a push of repeated keys");
  // Refused before anything is sent: a NaN among repeated keys, and two
  // finite gradients of one key whose sum is not finite.
  std::vector<uint64_t> keys = {key_of(1), key_of(2), key_of(1), key_of(2)};
  std::vector<float> bad = {1, 1, 1, 1, 1, 1, 1, 1};
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  Status s = (*client)->Push(kTable, keys, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  bad[5] = 1;
  bad[0] = bad[4] = 3e38f;
  s = (*client)->Push(kTable, keys, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("non-finite"), std::string::npos) << s;
  expect_rows("after the refused pushes");

  push(3000, 5000, 1);  // fresh keys: the next pushes go as given
  push(0, 2000, 3);
  push(8000, 500, 2);
  expect_rows("after pushes of fresh keys, then of repeated ones");
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

TEST_P(ExactTableTest, SmallPushesSumEachKeysRepeatsOnce) {
  SmallPushesWithRepeats(/*servers=*/1, GetParam());
}

TEST_P(ExactTableTest, SmallPushesOfTwoShardsSumEachKeysRepeatsOnce) {
  SmallPushesWithRepeats(/*servers=*/2, GetParam());
}

// One worker and `servers` servers of table 5 with a disk tier (each
// shard keeps `capacity` rows in memory; rows are sums of gradients); the
// caller adds --disk_tier_dir.
ClusterOptions TieredCluster(uint32_t servers, uint64_t capacity,
                             xfer::TransportChoice transport) {
  ClusterOptions o;
  o.num_servers = servers;
  o.num_workers = 1;
  o.transport = transport;
  o.tables =
      R"(table { id: 5 name: "exact_ids" kind: EXACT dim: 2 capacity: )" +
      std::to_string(capacity) + R"(
      push_value_type: FP32 optimizer { name: "sum" } admit_after_pushes: 1
      when_full: WHEN_FULL_MOVE_TO_DISK })";
  return o;
}

// A table whose shards keep 300 rows in memory (when_full:
// WHEN_FULL_MOVE_TO_DISK, ps_server --disk_tier_dir) takes 3,000 keys: the
// rows beyond the bound move to each server's disk tier and back as keys
// are pushed again, and every key pulls as the sum of its gradients,
// wherever its row is. Stats and the servers' log say where the rows are.
TEST_P(ExactTableTest, RowsBeyondTheBoundMoveToDiskAndBack) {
  auto tier = ScratchDir::Create("exact-tier");
  ASSERT_TRUE(tier.ok()) << tier.status();
  const std::string tier_dir = (*tier)->path();
  ClusterOptions o = TieredCluster(2, 300, GetParam());
  o.extra_flags = {"--disk_tier_dir=" + tier_dir};
  auto cluster = TestCluster::Start(o, "exact-tier");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectWorker(**cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr uint64_t kKeys = 3000;
  std::vector<uint64_t> keys;
  std::vector<double> want;
  for (uint64_t i = 0; i < kKeys; ++i) {
    keys.push_back(i * 0x9e3779b97f4a7c15ull + 11);
    want.insert(want.end(), {0.0, 0.0});
  }
  // Ten pushes of 600 keys drawn from all 3,000, integer gradients.
  std::mt19937_64 rng(4);
  for (int push = 0; push < 10; ++push) {
    std::vector<uint64_t> batch;
    std::vector<float> grads;
    for (int j = 0; j < 600; ++j) {
      const uint64_t i = rng() % kKeys;
      const float g = static_cast<float>(1 + rng() % 5);
      batch.push_back(keys[i]);
      grads.insert(grads.end(), {g, -2 * g});
      want[2 * i] += g;
      want[2 * i + 1] -= 2 * g;
    }
    ASSERT_TRUE((*client)->Push(kTable, batch, grads).ok());
  }
  ASSERT_TRUE((*client)->WaitApplied().ok());
  std::vector<float> out(2 * kKeys, -1.0f);
  ASSERT_TRUE((*client)->Pull(kTable, keys, out).ok());
  size_t wrong = 0;
  for (size_t j = 0; j < out.size(); ++j) wrong += out[j] != want[j];
  EXPECT_EQ(wrong, 0u) << "of " << out.size() << " values";
  uint64_t pushed_keys = 0;
  for (uint64_t i = 0; i < kKeys; ++i) pushed_keys += want[2 * i] != 0;
  uint64_t rows = 0, on_disk = 0;
  for (uint32_t shard = 0; shard < o.num_servers; ++shard) {
    auto stats = (*client)->Stats(shard);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_GT(stats->exact_demoted(), 0u) << "shard " << shard;
    EXPECT_GT(stats->exact_promoted(), 0u) << "shard " << shard;
    rows += stats->exact_rows();
    on_disk += stats->exact_rows_on_disk();
  }
  EXPECT_EQ(rows + on_disk, pushed_keys);
  EXPECT_GT(on_disk, pushed_keys / 2);
  for (uint32_t shard = 0; shard < o.num_servers; ++shard) {
    EXPECT_TRUE(std::filesystem::exists(tier_dir + "/shard-" +
                                        std::to_string(shard) + "/table-5"))
        << "shard " << shard;
  }
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
  // The tier is scratch: a server that stops deletes it.
  for (uint32_t shard = 0; shard < o.num_servers; ++shard) {
    EXPECT_FALSE(std::filesystem::exists(tier_dir + "/shard-" +
                                         std::to_string(shard) + "/table-5"))
        << "shard " << shard;
  }
}

// A checkpoint of a tiered table holds the rows of both tiers; kill -9 of
// its server while pushes of fresh keys move rows to disk, then a restart
// with --restore_from=latest (the same --disk_tier_dir, which the killed
// server left files in): every key reads exactly as checkpointed, whether
// the restore put its row in memory or on disk.
TEST_P(ExactTableTest, KillNineMidDemotionRestoresTheCheckpointExactly) {
  auto scratch = ScratchDir::Create("exact-tier-kill");
  ASSERT_TRUE(scratch.ok()) << scratch.status();
  const std::string ckpt = (*scratch)->path() + "/ckpt";
  const std::string tier = (*scratch)->path() + "/tier";
  ClusterOptions o = TieredCluster(1, 500, GetParam());
  o.extra_flags = {"--disk_tier_dir=" + tier, "--checkpoint_dir=" + ckpt,
                   "--checkpoint_every_steps=1", "--checkpoint_on_exit=false"};
  constexpr uint64_t kKeys = 5000;
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  for (uint64_t i = 0; i < kKeys; ++i) {
    keys.push_back(i * 0x9e3779b97f4a7c15ull + 17);
    grads.insert(grads.end(), {static_cast<float>(i), -1.0f});
  }
  {
    auto cluster = TestCluster::Start(o, "exact-tier-kill");
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto client = ConnectWorker(**cluster, 0);
    ASSERT_TRUE(client.ok()) << client.status();
    auto sync = worker::CheckpointSync::Create(client->get());
    ASSERT_TRUE(sync.ok()) << sync.status();
    ASSERT_TRUE((*sync)->Info().ok());
    ASSERT_TRUE((*client)->Push(kTable, keys, grads).ok());
    ASSERT_TRUE((*client)->WaitApplied().ok());
    auto clock = (*client)->Clock();
    ASSERT_TRUE(clock.ok()) << clock.status();
    const uint64_t first_step = *clock;
    auto cut = (*sync)->Checkpoint(first_step, 0, 0);
    ASSERT_TRUE(cut.ok()) << cut.status();
    // A cut returns before its checkpoint is committed; the next one
    // waits for that and says how it ended. (Its own may be cut short by
    // the kill: restores skip it. It holds the same rows.)
    clock = (*client)->Clock();
    ASSERT_TRUE(clock.ok()) << clock.status();
    cut = (*sync)->Checkpoint(*clock, 0, 0);
    ASSERT_TRUE(cut.ok()) << cut.status();
    ASSERT_GE(cut->newest_complete_step, first_step);
    auto before = (*client)->Stats(0);
    ASSERT_TRUE(before.ok()) << before.status();
    ASSERT_GT(before->exact_rows_on_disk(), kKeys / 2);
    // Fresh keys, many: every one moves a row to disk. Kill as soon as the
    // server has begun.
    std::vector<uint64_t> fresh;
    for (uint64_t i = 0; i < 300000; ++i) fresh.push_back(~i);
    ASSERT_TRUE(
        (*client)
            ->Push(kTable, fresh, std::vector<float>(2 * fresh.size(), 1.0f))
            .ok());
    bool demoting = false;
    for (int i = 0; i < 2000 && !demoting; ++i) {
      auto now = (*client)->Stats(0);
      ASSERT_TRUE(now.ok()) << now.status();
      demoting = now->exact_demoted() > before->exact_demoted();
      if (!demoting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(demoting) << "the server never moved a fresh row to disk";
    ASSERT_EQ(::kill((*cluster)->server(0).pid(), SIGKILL), 0);
    auto killed = (*cluster)->server(0).Stop(10000);
    ASSERT_TRUE(killed.ok()) << killed.status();
    EXPECT_EQ(*killed, 128 + SIGKILL);
  }
  o.extra_flags.push_back("--restore_from=latest");
  auto cluster = TestCluster::Start(o, "exact-tier-restored");
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectWorker(**cluster, 0);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> out(2 * kKeys, -1.0f);
  ASSERT_TRUE((*client)->Pull(kTable, keys, out).ok());
  size_t wrong = 0;
  for (size_t j = 0; j < out.size(); ++j) wrong += out[j] != grads[j];
  EXPECT_EQ(wrong, 0u) << "of " << out.size() << " values";
  auto stats = (*client)->Stats(0);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->exact_rows() + stats->exact_rows_on_disk(), kKeys);
  EXPECT_EQ(stats->exact_rows(), 500u);
  std::vector<float> gone(2, -1.0f);
  ASSERT_TRUE(
      (*client)->Pull(kTable, std::vector<uint64_t>{~uint64_t{0}}, gone).ok());
  EXPECT_EQ(gone, std::vector<float>(2, 0.0f)) << "a key after the cut";
  Status stopped = (*cluster)->Stop();
  EXPECT_TRUE(stopped.ok()) << stopped;
}

// A table that moves rows to disk on a server started without
// --disk_tier_dir: the server refuses to start and says what is missing.
TEST_P(ExactTableTest, ADiskTierWithoutAFolderIsRefusedAtStart) {
  ClusterOptions o = TieredCluster(1, 300, GetParam());
  auto cluster = TestCluster::Start(o, "exact-tier-nodir");
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.status().message().find("--disk_tier_dir"),
            std::string::npos)
      << cluster.status();
}

INSTANTIATE_TEST_SUITE_P(Transports, ExactTableTest, ClusterTransports(),
                         TransportParamName());

}  // namespace
}  // namespace ps::testing
