// The apply path: packets written into inbox slots the way a worker's
// PutWithNotify writes them (data, then the sequence word with release) are
// validated, applied to the shard's rows, and their heads published; bad
// packets are counted per sender and skipped, and the next packet applies.
#include "server/apply_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "protocol/lookup_packet.h"
#include "protocol/shard_map.h"
#include "protocol/sparse_packet.h"
#include "protocol/table_config.h"
#include "table/param_table.h"

namespace ps::server {
namespace {

xfer::ContextOptions Named(const char* name) {
  xfer::ContextOptions o;
  o.name = name;
  return o;
}

constexpr uint32_t kSlots = 4;
constexpr uint32_t kSlotBytes = 4096;

class ApplyLoopTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(/*shard_id=*/0, /*num_shards=*/1, 2); }

  void Build(uint32_t shard_id, uint32_t num_shards, uint32_t workers,
             StepPushes pushes = {}) {
    context_ = xfer::Context::Create(Named("apply-test")).value();
    auto config = protocol::ParseTableConfig(R"(
      table { id: 1 name: "w" kind: HASHED dim: 1 capacity: 1000
              optimizer { name: "sgd" learning_rate: 0.5 } }
      table { id: 2 name: "emb" kind: DENSE dim: 4 capacity: 64
              optimizer { name: "sum" } }
      table { id: 3 name: "ids" kind: EXACT dim: 1 capacity: 10
              admit_after_pushes: 1 }
      table { id: 4 name: "ada" kind: DENSE dim: 2 capacity: 16
              optimizer { name: "adagrad" learning_rate: 0.1 } }
    )");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    shard_ = Shard::Create(context_.get(), *config, shard_id, num_shards,
                           std::nullopt, pushes)
                 .value();
    inboxes_ = Inboxes::Create(context_.get(), workers, kSlots, kSlotBytes,
                               /*lookups=*/true)
                   .value();
    stats_ = std::make_unique<ServerStats>(workers);
  }

  std::unique_ptr<ApplyLoop> MakeLoop(uint32_t threads) {
    ApplyOptions o;
    o.threads = threads;
    return std::make_unique<ApplyLoop>(shard_.get(), inboxes_.get(),
                                       stats_.get(), o);
  }

  static std::vector<uint8_t> Encode(uint32_t table, uint32_t dim,
                                     std::vector<uint32_t> rows,
                                     std::vector<float> values,
                                     uint32_t sender = 0, uint32_t shard = 0,
                                     uint64_t step = 0) {
    protocol::SparsePacketMeta meta;
    meta.step = step;
    meta.table_id = table;
    meta.shard_id = shard;
    meta.sender_id = sender;
    meta.row_dim = dim;
    std::vector<uint8_t> out;
    std::vector<protocol::EncodedPacket> packets;
    Status s = protocol::EncodeSparsePackets(
        meta, rows, values, protocol::MaxPacketBytes(kSlotBytes), &out,
        &packets);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(packets.size(), 1u);
    return out;
  }

  static std::vector<uint8_t> EncodeKeyed(uint32_t table, uint32_t dim,
                                          std::vector<uint64_t> keys,
                                          std::vector<float> values,
                                          uint64_t step = 0) {
    protocol::SparsePacketMeta meta;
    meta.step = step;
    meta.table_id = table;
    meta.row_dim = dim;
    std::vector<uint8_t> out;
    std::vector<protocol::EncodedPacket> packets;
    Status s = protocol::EncodeKeyedPackets(
        meta, keys, values, protocol::MaxPacketBytes(kSlotBytes), &out,
        &packets);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(packets.size(), 1u);
    return out;
  }

  static std::vector<uint8_t> EncodeLookup(uint32_t table,
                                           std::vector<uint64_t> keys,
                                           uint64_t request,
                                           uint64_t reply_offset = 256,
                                           uint32_t shard = 0) {
    protocol::LookupMeta meta{.table_id = table, .shard_id = shard};
    std::vector<uint8_t> out;
    std::vector<protocol::EncodedPacket> packets;
    Status s = protocol::EncodeLookupPackets(
        meta, keys, request, reply_offset, sizeof(float),
        protocol::MaxPacketBytes(kSlotBytes), 0, &out, &packets);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(packets.size(), 1u);
    return out;
  }

  const uint8_t* Reply(uint32_t worker) const {
    return static_cast<const uint8_t*>(inboxes_->reply_region(worker)->data());
  }
  protocol::LookupReplyHeader ReplyHeader(uint32_t worker) const {
    return protocol::LookupReplyHeader::Parse(Reply(worker));
  }

  // A key of EXACT table 3 on shard 0 and one on shard 1 (2 shards).
  std::pair<uint64_t, uint64_t> KeysOfShards0And1() const {
    const auto map = protocol::ShardMap::ForTable(config_.table(2), 2);
    uint64_t mine = 0, theirs = 0;
    while (map.ShardOfKey(mine) != 0) ++mine;
    while (map.ShardOfKey(theirs) != 1) ++theirs;
    return {mine, theirs};
  }

  // The row of `key` in EXACT table `table` (zeros without one).
  float KeyRow(uint32_t table, uint64_t key) {
    float value = -1.0f;
    bool present = false;
    EXPECT_TRUE(shard_->Find(table)
                    ->table()
                    .ReadKeys(std::span<const uint64_t>(&key, 1),
                              std::span<float>(&value, 1),
                              std::span<bool>(&present, 1))
                    .ok());
    return value;
  }

  // What PutWithNotify does: bytes first, sequence word last (release).
  void Write(uint32_t worker, uint64_t n, const void* packet, uint32_t length,
             uint32_t length_field) {
    uint8_t* slot = inboxes_->Slot(worker, n);
    std::memcpy(slot + 8, &length_field, 4);
    std::memcpy(slot + 16, packet, length);
    __atomic_store_n(reinterpret_cast<uint64_t*>(slot), n, __ATOMIC_RELEASE);
  }
  void Write(uint32_t worker, uint64_t n, const std::vector<uint8_t>& p) {
    Write(worker, n, p.data(), static_cast<uint32_t>(p.size()),
          static_cast<uint32_t>(p.size()));
  }

  float Row(uint32_t table, uint64_t row, uint32_t j = 0) {
    TableShard* t = shard_->Find(table);
    return static_cast<const float*>(
        t->rows_region()->data())[row * t->dim() + j];
  }

  std::unique_ptr<xfer::Context> context_;
  proto::TableConfig config_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<Inboxes> inboxes_;
  std::unique_ptr<ServerStats> stats_;
};

TEST_F(ApplyLoopTest, KeyedPacketsApplyToExactTablesOnly) {
  auto loop = MakeLoop(1);
  // Keys of any size; table 3 is EXACT, "sum", admits at the first push.
  Write(0, 1, EncodeKeyed(3, 1, {7, 1ull << 40, ~0ull}, {1.5f, 2.0f, -3.0f}));
  Write(0, 2, EncodeKeyed(3, 1, {7}, {0.5f}));
  EXPECT_EQ(loop->DrainOnce(), 2u);
  EXPECT_EQ(stats_->packets_rejected(), 0u);
  EXPECT_EQ(stats_->rows_applied(), 4u);
  EXPECT_FLOAT_EQ(KeyRow(3, 7), 2.0f);
  EXPECT_FLOAT_EQ(KeyRow(3, 1ull << 40), 2.0f);
  EXPECT_FLOAT_EQ(KeyRow(3, ~0ull), -3.0f);
  EXPECT_FLOAT_EQ(KeyRow(3, 8), 0.0f);
  // A keyed packet for a table of rows is refused, the table untouched.
  Write(0, 3, EncodeKeyed(1, 1, {3}, {1.0f}));
  EXPECT_EQ(loop->DrainOnce(), 1u);
  EXPECT_EQ(stats_->packets_rejected(), 1u);
  EXPECT_FLOAT_EQ(Row(1, 3), 0.0f);
}

TEST_F(ApplyLoopTest, KeyedPacketsWithKeysOfAnotherShardAreRefused) {
  Build(/*shard_id=*/0, /*num_shards=*/2, 2);
  auto loop = MakeLoop(1);
  const auto [mine, theirs] = KeysOfShards0And1();
  Write(0, 1,
        EncodeKeyed(3, 1, {std::min(mine, theirs), std::max(mine, theirs)},
                    {1.0f, 1.0f}));
  Write(0, 2, EncodeKeyed(3, 1, {mine}, {1.0f}));
  EXPECT_EQ(loop->DrainOnce(), 2u);
  EXPECT_EQ(stats_->packets_rejected(), 1u);  // nothing of it applied
  EXPECT_FLOAT_EQ(KeyRow(3, mine), 1.0f);
  EXPECT_FLOAT_EQ(KeyRow(3, theirs), 0.0f);
}

TEST_F(ApplyLoopTest, LookupsAreAnsweredIntoTheirWorkersReplyRegion) {
  auto loop = MakeLoop(1);
  // The push comes first in the same inbox: the lookup sees it applied.
  Write(0, 1, EncodeKeyed(3, 1, {7, 9}, {1.5f, 2.0f}));
  Write(0, 2, EncodeLookup(3, {9, 8, 7}, /*request=*/1, /*reply_offset=*/320));
  EXPECT_EQ(loop->DrainOnce(), 2u);
  EXPECT_EQ(stats_->packets_rejected(), 0u);
  EXPECT_EQ(stats_->lookups_answered(), 1u);
  EXPECT_EQ(stats_->lookup_keys(), 3u);
  EXPECT_EQ(stats_->packets_applied(), 1u);  // the push; lookups apart
  const protocol::LookupReplyHeader h = ReplyHeader(0);
  EXPECT_EQ(h.answered, 1u);
  EXPECT_EQ(h.failed_request, 0u);
  const float* rows = reinterpret_cast<const float*>(Reply(0) + 320);
  EXPECT_FLOAT_EQ(rows[0], 2.0f);
  EXPECT_FLOAT_EQ(rows[1], 0.0f);  // no row: zeros
  EXPECT_FLOAT_EQ(rows[2], 1.5f);
  // The other worker's replies are untouched.
  EXPECT_EQ(ReplyHeader(1).answered, 0u);
}

TEST_F(ApplyLoopTest, RefusedLookupsSayWhyInTheReplyAndTheNextIsAnswered) {
  Build(/*shard_id=*/0, /*num_shards=*/2, 2);
  auto loop = MakeLoop(1);
  const auto [mine, theirs] = KeysOfShards0And1();
  const uint64_t region = inboxes_->reply_region(0)->size();
  struct Case {
    std::vector<uint8_t> packet;
    StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {EncodeLookup(1, {mine}, 1), StatusCode::kInvalidArgument,
       "only EXACT tables"},
      {EncodeLookup(99, {mine}, 2), StatusCode::kNotFound, "unknown table"},
      {EncodeLookup(3, {mine, theirs}, 3), StatusCode::kInvalidArgument,
       "belongs to shard 1"},
      {EncodeLookup(3, std::vector<uint64_t>(40, mine), 4, region - 64),
       StatusCode::kOutOfRange, "past the reply region"},
      {EncodeLookup(3, {mine}, 5, 256, /*shard=*/1),
       StatusCode::kInvalidArgument, "for shard 1"},
  };
  uint64_t n = 0;
  for (const Case& c : cases) {
    Write(0, ++n, c.packet);
    EXPECT_EQ(loop->DrainOnce(), 1u);
    const protocol::LookupReplyHeader h = ReplyHeader(0);
    EXPECT_EQ(h.answered, n);
    EXPECT_EQ(h.failed_request, n);
    EXPECT_EQ(h.failure.code(), c.code) << h.failure;
    EXPECT_NE(h.failure.message().find(c.message), std::string::npos)
        << h.failure;
  }
  EXPECT_EQ(stats_->packets_rejected(), n);
  EXPECT_EQ(stats_->lookups_answered(), 0u);
  // A damaged packet is refused under the request number it carries.
  ++n;
  std::vector<uint8_t> damaged = EncodeLookup(3, {mine}, n);
  damaged.back() ^= 1;
  Write(0, n, damaged);
  EXPECT_EQ(loop->DrainOnce(), 1u);
  EXPECT_EQ(ReplyHeader(0).failed_request, n);
  EXPECT_EQ(ReplyHeader(0).failure.code(), StatusCode::kCorruption);
  // The next good one is answered, its refusal record left as it was.
  ++n;
  Write(0, n, EncodeLookup(3, {mine}, n));
  EXPECT_EQ(loop->DrainOnce(), 1u);
  EXPECT_EQ(ReplyHeader(0).answered, n);
  EXPECT_EQ(ReplyHeader(0).failed_request, n - 1);
  EXPECT_EQ(stats_->lookups_answered(), 1u);
}

TEST_F(ApplyLoopTest, ValidPacketsApplyThroughTheTableOptimizer) {
  auto loop = MakeLoop(1);
  Write(0, 1, Encode(1, 1, {3, 999}, {2.0f, -4.0f}));
  Write(1, 1, Encode(2, 4, {5}, {1, 2, 3, 4}, 1));
  Write(1, 2, Encode(2, 4, {5}, {1, 1, 1, 1}, 1));
  EXPECT_EQ(loop->DrainOnce(), 3u);
  EXPECT_FLOAT_EQ(Row(1, 3), -1.0f);  // sgd lr 0.5
  EXPECT_FLOAT_EQ(Row(1, 999), 2.0f);
  EXPECT_FLOAT_EQ(Row(2, 5, 0), 2.0f);  // sum
  EXPECT_FLOAT_EQ(Row(2, 5, 3), 5.0f);
  EXPECT_EQ(inboxes_->Head(0), 1u);
  EXPECT_EQ(inboxes_->Head(1), 2u);
  EXPECT_EQ(stats_->packets_applied(), 3u);
  EXPECT_EQ(stats_->rows_applied(), 4u);
  EXPECT_EQ(stats_->packets_rejected(), 0u);
  // A stateful optimizer (adagrad, accumulator starts at 0.1): the update
  // differs from plain sgd.
  Write(0, 2, Encode(4, 2, {1}, {1.0f, 1.0f}));
  EXPECT_EQ(loop->DrainOnce(), 1u);
  EXPECT_LT(Row(4, 1), -0.05f);
  EXPECT_GT(Row(4, 1), -0.1f);
  // Nothing new: nothing consumed, an old sequence is not re-applied.
  EXPECT_EQ(loop->DrainOnce(), 0u);
}

TEST_F(ApplyLoopTest, GarbageSlotIsCountedAndTheNextPacketApplies) {
  auto loop = MakeLoop(1);
  std::vector<uint8_t> garbage(1000);
  std::mt19937 rng(7);
  for (auto& b : garbage) b = static_cast<uint8_t>(rng());
  Write(1, 1, garbage);
  Write(1, 2, Encode(1, 1, {10}, {1.0f}, 1));
  EXPECT_EQ(loop->DrainOnce(), 2u);
  EXPECT_EQ(stats_->packets_rejected(), 1u);
  EXPECT_EQ(stats_->rejected_from(1), 1u);
  EXPECT_EQ(stats_->rejected_from(0), 0u);
  EXPECT_EQ(stats_->packets_applied(), 1u);
  EXPECT_FLOAT_EQ(Row(1, 10), -0.5f);
  EXPECT_EQ(inboxes_->Head(1), 2u);
  auto p = stats_->ToProto({});
  EXPECT_EQ(p.rejected_by_sender().at("worker-1"), 1u);
}

TEST_F(ApplyLoopTest, EveryKindOfBadPacketIsRejectedWithoutTouchingRows) {
  auto loop = MakeLoop(1);
  const auto good = Encode(1, 1, {1}, {1.0f});
  auto corrupt = good;
  corrupt.back() ^= 0x40;  // checksum mismatch
  uint64_t n = 0;
  auto reject = [&](auto&& write, const char* what) {
    write(++n);
    EXPECT_EQ(loop->DrainOnce(), 1u) << what;
    EXPECT_EQ(stats_->packets_rejected(), n) << what;
    EXPECT_EQ(stats_->packets_applied(), 0u) << what;
  };
  const uint32_t size = static_cast<uint32_t>(good.size());
  reject([&](uint64_t k) { Write(0, k, good.data(), size, kSlotBytes); },
         "length field beyond the slot");
  reject([&](uint64_t k) { Write(0, k, good.data(), size, 20); },
         "length field shorter than the packet");
  reject([&](uint64_t k) { Write(0, k, Encode(9, 1, {1}, {1.0f})); },
         "unknown table");
  reject([&](uint64_t k) { Write(0, k, Encode(3, 1, {1}, {1.0f})); },
         "EXACT table");
  reject([&](uint64_t k) { Write(0, k, Encode(1, 1, {1000}, {1.0f})); },
         "row past the shard");
  reject(
      [&](uint64_t k) {
        Write(0, k, Encode(1, 2, {1}, {1.0f, 1.0f}));
      },
      "wrong dim");
  reject([&](uint64_t k) { Write(0, k, Encode(1, 1, {1}, {1.0f}, 0, 1)); },
         "other shard");
  reject([&](uint64_t k) { Write(0, k, corrupt); }, "checksum");
  const uint64_t bad = n;
  Write(0, ++n, good);
  EXPECT_EQ(loop->DrainOnce(), 1u);
  EXPECT_EQ(stats_->packets_rejected(), bad);
  EXPECT_EQ(stats_->rejected_from(0), bad);
  EXPECT_EQ(stats_->packets_applied(), 1u);
  EXPECT_FLOAT_EQ(Row(1, 1), -0.5f);
  for (uint64_t r = 0; r < 1000; ++r) {
    if (r != 1) {
      ASSERT_EQ(Row(1, r), 0.0f) << "row " << r;
    }
  }
  EXPECT_EQ(inboxes_->Head(0), n);
}

TEST_F(ApplyLoopTest, PartialPacketWithoutSequenceIsNeverApplied) {
  auto loop = MakeLoop(1);
  auto p = Encode(1, 1, {2}, {1.0f});
  uint8_t* slot = inboxes_->Slot(0, 1);
  std::memcpy(slot + 16, p.data(), p.size() / 2);  // the sender died here
  EXPECT_EQ(loop->DrainOnce(), 0u);
  EXPECT_EQ(inboxes_->Head(0), 0u);
  EXPECT_FLOAT_EQ(Row(1, 2), 0.0f);
}

// Packets that go through a real ring with credits: one thread per worker
// writes as fast as the head allows while the apply threads run.
void PushThroughRing(Inboxes* inboxes, uint32_t worker, int packets,
                     const std::vector<uint8_t>& packet) {
  for (int n = 1; n <= packets; ++n) {
    while (n - inboxes->Head(worker) > kSlots) std::this_thread::yield();
    uint8_t* slot = inboxes->Slot(worker, n);
    uint32_t len = static_cast<uint32_t>(packet.size());
    std::memcpy(slot + 8, &len, 4);
    std::memcpy(slot + 16, packet.data(), len);
    __atomic_store_n(reinterpret_cast<uint64_t*>(slot), uint64_t(n),
                     __ATOMIC_RELEASE);
  }
}

void RunConcurrent(Inboxes* inboxes, ApplyLoop* loop, uint32_t workers,
                   int packets, const std::vector<uint8_t>& packet) {
  loop->Start();
  std::vector<std::thread> senders;
  for (uint32_t w = 0; w < workers; ++w) {
    senders.emplace_back(PushThroughRing, inboxes, w, packets,
                         std::cref(packet));
  }
  for (auto& t : senders) t.join();
  loop->StopAndDrain();  // drains what is still in the rings
}

TEST_F(ApplyLoopTest, ConcurrentSendersLoseNoUpdateWithOneApplyThread) {
  auto loop = MakeLoop(1);
  const int kPackets = 2000;
  auto packet = Encode(2, 4, {0, 7, 63}, std::vector<float>(12, 1.0f));
  RunConcurrent(inboxes_.get(), loop.get(), 2, kPackets, packet);
  EXPECT_EQ(stats_->packets_applied(), 2u * kPackets);
  EXPECT_FLOAT_EQ(Row(2, 7, 2), 2.0f * kPackets);
  EXPECT_FLOAT_EQ(Row(2, 63, 3), 2.0f * kPackets);
}

TEST_F(ApplyLoopTest, ConcurrentSendersLoseNoUpdateWithTwoApplyThreads) {
  auto loop = MakeLoop(2);
  ASSERT_EQ(loop->threads(), 2u);
  const int kPackets = 2000;
  auto sum = Encode(2, 4, {0, 7, 63}, std::vector<float>(12, 1.0f));
  RunConcurrent(inboxes_.get(), loop.get(), 2, kPackets, sum);
  EXPECT_EQ(stats_->packets_applied(), 2u * kPackets);
  EXPECT_FLOAT_EQ(Row(2, 0, 0), 2.0f * kPackets);
  EXPECT_FLOAT_EQ(Row(2, 63, 1), 2.0f * kPackets);
}

TEST_F(ApplyLoopTest, StatefulOptimizerIsSerializedAcrossApplyThreads) {
  auto loop = MakeLoop(2);
  const int kPackets = 500;
  auto packet = Encode(4, 2, {3}, {1.0f, 1.0f});
  RunConcurrent(inboxes_.get(), loop.get(), 2, kPackets, packet);
  // Adagrad with g = 1 throughout: the result of 1000 sequential steps.
  double w = 0.0, acc = 0.1;
  for (int i = 0; i < 2 * kPackets; ++i) {
    acc += 1.0;
    w -= 0.1 / (std::sqrt(acc) + 1e-8);
  }
  EXPECT_NEAR(Row(4, 3, 0), w, 1e-3 * std::abs(w));
  EXPECT_FLOAT_EQ(Row(4, 3, 0), Row(4, 3, 1));
}

// A bsp job's two workers push their shares of two steps, applied by two
// threads: the adagrad table ends where one apply of each step's summed
// gradient ends (the update --local makes), and its step count is 2.
TEST_F(ApplyLoopTest, ABspStepsPushesFoldIntoOneUpdate) {
  Build(0, 1, 2, StepPushes{.workers = 2, .bsp = true});
  auto loop = MakeLoop(2);
  loop->Start();
  Write(0, 1, Encode(4, 2, {3, 5}, {1.0f, -1.0f, 0.5f, 0.5f}, 0, 0, 1));
  Write(1, 1, Encode(4, 2, {3}, {2.0f, 4.0f}, 1, 0, 1));
  // Step 2 only once step 1 is applied, as a bsp barrier orders them.
  while (inboxes_->Head(0) < 1 || inboxes_->Head(1) < 1) {
    std::this_thread::yield();
  }
  Write(1, 2, Encode(4, 2, {3}, {-1.0f, 1.0f}, 1, 0, 2));
  loop->StopAndDrain();

  auto local =
      table::ParamTable::Create(config_.table(3), 0, shard_->Find(4)->rows())
          .value();
  std::vector<float> step1 = {3.0f, 3.0f, 0.5f, 0.5f}, step2 = {-1.0f, 1.0f};
  const auto m = kernels::AccumulateMode::kExclusive;
  ASSERT_TRUE(local->Apply(std::vector<uint32_t>{3, 5}, step1, m).ok());
  ASSERT_TRUE(local->Apply(std::vector<uint32_t>{3}, step2, m).ok());
  for (uint32_t row : {3u, 5u}) {
    for (uint32_t j = 0; j < 2; ++j) {
      EXPECT_EQ(Row(4, row, j), local->data()[row * 2 + j]) << row << "," << j;
    }
  }
  table::TableSnapshot snapshot;
  ASSERT_TRUE(shard_->Find(4)->table().Snapshot(&snapshot).ok());
  EXPECT_EQ(snapshot.optimizer_steps, 2u);
  EXPECT_NE(shard_->Find(4)->Describe().find("folded"), std::string::npos);
  // sgd and sum tables add, which sums already: nothing to fold.
  EXPECT_EQ(shard_->Find(1)->Describe().find("folded"), std::string::npos);
}

}  // namespace
}  // namespace ps::server
