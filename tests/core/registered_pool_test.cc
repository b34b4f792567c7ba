// RegisteredPool: fill, free, reuse, full, alignment and bad frees; blocks
// written by a peer through (the pool's descriptor, the block's offset),
// over tcp and shm in one process; and pools used from several threads.
#include "core/registered_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::PoolBlock;
using xfer::RegisteredPool;
using xfer::TransportChoice;

std::unique_ptr<Context> NewContext(const std::string& name,
                                    TransportChoice t = TransportChoice::kTcp) {
  auto ctx = Context::Create(TestOptions(name, t));
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return ctx.ok() ? std::move(ctx).value() : nullptr;
}

TEST(RegisteredPoolTest, FillFreeReuseAndFull) {
  auto ctx = NewContext("pool");
  ASSERT_NE(ctx, nullptr);
  auto pool = RegisteredPool::Create(ctx.get(), 64 * 1024, xfer::kRemoteWrite);
  ASSERT_TRUE(pool.ok()) << pool.status();
  RegisteredPool& p = **pool;
  // Fill it with 16 blocks of 4 KiB.
  std::vector<PoolBlock> blocks;
  for (int i = 0; i < 16; ++i) {
    auto b = p.Allocate(4096);
    ASSERT_TRUE(b.ok()) << i << ": " << b.status();
    EXPECT_EQ(b->offset % RegisteredPool::kDefaultAlignment, 0u);
    EXPECT_EQ(b->data, static_cast<uint8_t*>(p.region().data()) + b->offset);
    blocks.push_back(*b);
  }
  EXPECT_EQ(p.used(), p.capacity());
  // Full: a clear refusal, nothing handed out.
  auto full = p.Allocate(1);
  EXPECT_TRUE(full.status().Is(StatusCode::kResourceExhausted));
  EXPECT_NE(full.status().message().find("0 of 65536 bytes free"),
            std::string::npos)
      << full.status();
  // Two neighbours freed merge into one piece that holds 8 KiB.
  ASSERT_TRUE(p.Free(blocks[4]).ok());
  ASSERT_TRUE(p.Free(blocks[5]).ok());
  EXPECT_EQ(p.largest_free(), 8192u);
  auto big = p.Allocate(8192);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->offset, blocks[4].offset);
  // Freeing everything leaves one piece: the whole pool.
  ASSERT_TRUE(p.Free(*big).ok());
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (i == 4 || i == 5) continue;
    ASSERT_TRUE(p.Free(blocks[i]).ok()) << i;
  }
  EXPECT_EQ(p.used(), 0u);
  EXPECT_EQ(p.largest_free(), p.capacity());
}

TEST(RegisteredPoolTest, AlignmentAndBadArguments) {
  auto ctx = NewContext("pool");
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(RegisteredPool::Create(ctx.get(), 4096, xfer::kRemoteWrite, 24)
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(RegisteredPool::Create(nullptr, 4096, xfer::kRemoteWrite)
                  .status()
                  .Is(StatusCode::kInvalidArgument));
  auto pool = RegisteredPool::Create(ctx.get(), 1 << 20, xfer::kRemoteWrite);
  ASSERT_TRUE(pool.ok());
  auto small = (*pool)->Allocate(10);
  auto aligned = (*pool)->Allocate(100, 4096);
  ASSERT_TRUE(small.ok() && aligned.ok());
  EXPECT_EQ(aligned->offset % 4096, 0u);
  EXPECT_GE(aligned->offset, small->offset + 10);
  // The padding before the aligned block is still free for small blocks.
  auto filler = (*pool)->Allocate(64);
  ASSERT_TRUE(filler.ok());
  EXPECT_LT(filler->offset, aligned->offset);
  EXPECT_TRUE((*pool)->Allocate(0).status().Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      (*pool)->Allocate(64, 48).status().Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE(
      (*pool)->Allocate(2 << 20).status().Is(StatusCode::kResourceExhausted));
  // A block freed twice, or made up, is refused and the pool is unchanged.
  const size_t used = (*pool)->used();
  ASSERT_TRUE((*pool)->Free(*small).ok());
  EXPECT_TRUE((*pool)->Free(*small).Is(StatusCode::kInvalidArgument));
  EXPECT_TRUE((*pool)
                  ->Free(PoolBlock{12345, 8, nullptr})
                  .Is(StatusCode::kInvalidArgument));
  EXPECT_EQ((*pool)->used(), used - 64);
}

class RegisteredPoolPeerTest
    : public ::testing::TestWithParam<TransportChoice> {};

// A peer imports the pool once and writes each block at its offset.
TEST_P(RegisteredPoolPeerTest, PeerAddressesBlocksByOffset) {
  PS_SKIP_IF_UNUSABLE(GetParam());
  auto owner = NewContext("owner", GetParam());
  auto peer = NewContext("peer", GetParam());
  ASSERT_TRUE(owner != nullptr && peer != nullptr);
  auto pool = RegisteredPool::Create(owner.get(), 1 << 20, xfer::kRemoteWrite);
  ASSERT_TRUE(pool.ok());
  auto ep = peer->Connect(owner->address());
  ASSERT_TRUE(ep.ok()) << ep.status();
  auto remote = (*ep)->Import((*pool)->descriptor());
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::vector<PoolBlock> blocks;
  for (size_t size : {100, 5000, 64, 70000}) {
    auto b = (*pool)->Allocate(size);
    ASSERT_TRUE(b.ok());
    blocks.push_back(*b);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::vector<uint8_t> bytes(blocks[i].size);
    FillPattern(bytes.data(), bytes.size(), i);
    ASSERT_TRUE(
        (*ep)->Put(bytes.data(), bytes.size(), *remote, blocks[i].offset).ok());
  }
  ASSERT_TRUE((*ep)->Flush().ok());
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::vector<uint8_t> bytes(blocks[i].size);
    FillPattern(bytes.data(), bytes.size(), i);
    EXPECT_EQ(std::memcmp(blocks[i].data, bytes.data(), bytes.size()), 0) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RegisteredPoolPeerTest,
                         ::testing::ValuesIn(TestedTransports()),
                         [](const auto& info) {
                           return TransportLabel(info.param);
                         });

// Threads allocate, write and free at once; no two live blocks overlap.
TEST(RegisteredPoolTest, ThreadsShareAPool) {
  auto ctx = NewContext("pool");
  ASSERT_NE(ctx, nullptr);
  auto pool = RegisteredPool::Create(ctx.get(), 1 << 20, xfer::kRemoteWrite);
  ASSERT_TRUE(pool.ok());
  RegisteredPool& p = **pool;
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&p, &failures, t] {
      for (int round = 0; round < 300; ++round) {
        auto b = p.Allocate(64 + (round * 37 + t) % 2000);
        if (!b.ok()) {
          ++failures[t];
          continue;
        }
        std::memset(b->data, t + 1, b->size);
        std::this_thread::yield();
        const auto* bytes = static_cast<const uint8_t*>(b->data);
        if (std::any_of(bytes, bytes + b->size,
                        [t](uint8_t v) { return v != t + 1; })) {
          ++failures[t];  // another thread's block overlapped ours
        }
        if (!p.Free(*b).ok()) ++failures[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
  EXPECT_EQ(p.used(), 0u);
  EXPECT_EQ(p.largest_free(), p.capacity());
}

}  // namespace
}  // namespace ps::testing
