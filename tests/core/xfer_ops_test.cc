// Every xfer operation between real processes, on both transports: the test
// process is the origin, forked children are targets (tests/core/
// xfer_test_peer.h). Data is checked at both ends: what the origin reads back
// and what the target hashes in its own memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/batch.h"
#include "core/context.h"
#include "core/endpoint.h"
#include "tests/core/process_harness.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Batch;
using xfer::Context;
using xfer::Endpoint;
using xfer::RemoteRegion;
using xfer::Request;
using xfer::Segment;
using xfer::TransportChoice;

class XferOpsTest : public ::testing::TestWithParam<TransportChoice> {
 protected:
  static constexpr int kTargets = 2;

  void SetUp() override {
    PS_SKIP_IF_UNUSABLE(GetParam());
    // Children first: this process must have no threads when it forks.
    for (int i = 0; i < kTargets; ++i) {
      targets_[i].process =
          StartTarget("target-" + std::to_string(i), GetParam());
    }
    for (auto& t : targets_) {
      std::optional<TargetInfo> info = AwaitReady(t.process.channel());
      ASSERT_TRUE(info.has_value()) << t.process.name() << " did not start";
      ASSERT_EQ(info->descriptors.size(), size_t{kTargetRegionCount});
      t.info = std::move(*info);
    }
    auto ctx = Context::Create(TestOptions("origin", GetParam()));
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(ctx).value();
    for (auto& t : targets_) {
      Status s = t.Connect(*ctx_);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(t.ep->transport(), ExpectedKind(GetParam()));
    }
  }

  void TearDown() override {
    for (auto& t : targets_) {
      if (!t.process.running()) continue;
      EXPECT_EQ(t.Exit(), std::optional<int>(0))
          << t.process.name() << " did not exit cleanly";
    }
  }

  TargetHandle& target() { return targets_[0]; }
  Endpoint& ep() { return *targets_[0].ep; }

  std::unique_ptr<Context> ctx_;
  TargetHandle targets_[kTargets];
  std::mt19937_64 rng_{20240611};
};

// Both kinds of region: Allocate (memfd) and Register (application memory).
constexpr int kRwRegions[] = {kAllocatedRw, kRegisteredRw};

std::vector<uint8_t> Pattern(size_t length, uint64_t seed) {
  std::vector<uint8_t> v(length);
  FillPattern(v.data(), length, seed);
  return v;
}

TEST_P(XferOpsTest, PutIsVisibleAtTargetAndGetReadsItBack) {
  const size_t sizes[] = {1, 7, 8, 64, 4095, 4096, 65536 + 3, 300000};
  for (int region : kRwRegions) {
    const RemoteRegion& r = target().regions[region];
    ASSERT_EQ(r.size(), kTargetRegionSize);
    uint64_t seed = 1000 * region;
    for (size_t len : sizes) {
      uint64_t off = rng_() % (kTargetRegionSize - len + 1);
      std::vector<uint8_t> data = Pattern(len, ++seed);
      Status s = ep().Put(data.data(), len, r, off);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(target().Hash(region, off, len), Fnv1a(data.data(), len))
          << "region " << region << " len " << len << " off " << off;
      std::vector<uint8_t> back(len, 0xee);
      s = ep().Get(back.data(), len, r, off);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(back == data) << "len " << len;
    }
    // The whole region in one operation.
    std::vector<uint8_t> all = Pattern(kTargetRegionSize, 99 + region);
    ASSERT_TRUE(ep().Put(all.data(), all.size(), r, 0).ok());
    EXPECT_EQ(target().Hash(region, 0, all.size()),
              Fnv1a(all.data(), all.size()));
  }
}

TEST_P(XferOpsTest, GetReadsWhatTheTargetWrote) {
  for (int region : kRwRegions) {
    const uint64_t off = 12345, len = 100000, seed = 4242 + region;
    ASSERT_TRUE(Command(target().process.channel(),
                        "fill " + std::to_string(region) + " " +
                            std::to_string(off) + " " + std::to_string(len) +
                            " " + std::to_string(seed)));
    ASSERT_TRUE(SyncTarget(ep(), target().regions[kSync]).ok());
    std::vector<uint8_t> got(len);
    Status s = ep().Get(got.data(), len, target().regions[region], off);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(got == Pattern(len, seed));
  }
  // A read-only region serves reads.
  std::vector<uint8_t> ro(kSmallRegionSize);
  ASSERT_TRUE(
      ep().Get(ro.data(), ro.size(), target().regions[kReadOnly], 0).ok());
  EXPECT_TRUE(ro == Pattern(kSmallRegionSize, 77));
}

// Non-overlapping random pieces of a region, in random order, each with its
// own place in a local buffer.
std::vector<Segment> RandomSegments(std::mt19937_64& rng, int count,
                                    size_t region_size, uint8_t* local,
                                    size_t local_size) {
  std::vector<Segment> segs;
  const size_t remote_slot = region_size / count;
  const size_t local_slot = local_size / count;
  const size_t max_len = std::min(remote_slot, local_slot);
  for (int i = 0; i < count; ++i) {
    size_t len = 1 + rng() % max_len;
    uint64_t roff = i * remote_slot + rng() % (remote_slot - len + 1);
    size_t loff = i * local_slot + rng() % (local_slot - len + 1);
    segs.push_back({local + loff, roff, len});
  }
  std::shuffle(segs.begin(), segs.end(), rng);
  return segs;
}

TEST_P(XferOpsTest, WriteVAndReadVWithManySegments) {
  for (int region : kRwRegions) {
    const RemoteRegion& r = target().regions[region];
    // What the region should hold: zero, as the target made it.
    std::vector<uint8_t> model(kTargetRegionSize, 0);
    for (int round = 0; round < 3; ++round) {
      const int count = 64 + static_cast<int>(rng_() % 100);
      std::vector<uint8_t> src = Pattern(512 << 10, rng_());
      std::vector<Segment> w = RandomSegments(rng_, count, kTargetRegionSize,
                                              src.data(), src.size());
      Status s = ep().WriteV(w, r);
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (const Segment& seg : w) {
        std::memcpy(model.data() + seg.remote_offset, seg.local, seg.length);
      }
      EXPECT_EQ(target().Hash(region, 0, kTargetRegionSize),
                Fnv1a(model.data(), model.size()))
          << "region " << region << " round " << round;

      std::vector<uint8_t> dst(768 << 10, 0);
      std::vector<Segment> rd =
          RandomSegments(rng_, 64 + static_cast<int>(rng_() % 100),
                         kTargetRegionSize, dst.data(), dst.size());
      s = ep().ReadV(rd, r);
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (const Segment& seg : rd) {
        ASSERT_EQ(std::memcmp(seg.local, model.data() + seg.remote_offset,
                              seg.length),
                  0)
            << "segment at remote " << seg.remote_offset << " len "
            << seg.length;
      }
    }
  }
}

TEST_P(XferOpsTest, AtomicsReturnThePreviousValue) {
  for (int region : kRwRegions) {
    const RemoteRegion& r = target().regions[region];
    const uint64_t off = 8 * (1000 + region);
    uint64_t expected = 0;
    for (uint64_t add : {1ull, 41ull, 1ull << 40, ~0ull}) {
      auto prev = ep().FetchAdd64(r, off, add);
      ASSERT_TRUE(prev.ok()) << prev.status().ToString();
      EXPECT_EQ(*prev, expected);
      expected += add;
    }
    EXPECT_EQ(target().Load64(region, off), expected);

    auto failed = ep().CompareSwap64(r, off, expected + 1, 7);
    ASSERT_TRUE(failed.ok()) << failed.status().ToString();
    EXPECT_EQ(*failed, expected);  // no swap: the word stays
    EXPECT_EQ(target().Load64(region, off), expected);
    auto swapped = ep().CompareSwap64(r, off, expected, 7);
    ASSERT_TRUE(swapped.ok()) << swapped.status().ToString();
    EXPECT_EQ(*swapped, expected);
    EXPECT_EQ(target().Load64(region, off), 7u);
    uint64_t word = 0;
    ASSERT_TRUE(ep().Get(&word, 8, r, off).ok());
    EXPECT_EQ(word, 7u);  // atomics and gets see the same memory
  }
}

TEST_P(XferOpsTest, PutWithNotifyWritesDataAndWord) {
  for (int region : kRwRegions) {
    const int other = region == kAllocatedRw ? kRegisteredRw : kAllocatedRw;
    std::vector<uint8_t> data = Pattern(5000, 31 + region);
    const uint64_t off = 200000, flag_same = 8, flag_other = 16;
    // Notify word in the same region, then in another region.
    Status s =
        ep().PutWithNotify(data.data(), data.size(), target().regions[region],
                           off, target().regions[region], flag_same, 11);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(target().Load64(region, flag_same), 11u);
    s = ep().PutWithNotify(data.data(), 100, target().regions[region],
                           off + 8000, target().regions[other], flag_other, 12);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(target().Load64(other, flag_other), 12u);
    EXPECT_EQ(target().Hash(region, off, data.size()),
              Fnv1a(data.data(), data.size()));
    EXPECT_EQ(target().Hash(region, off + 8000, 100), Fnv1a(data.data(), 100));
  }
}

TEST_P(XferOpsTest, BatchPostsMixedOperations) {
  const RemoteRegion& a = target().regions[kAllocatedRw];
  const RemoteRegion& b = target().regions[kRegisteredRw];
  std::vector<uint8_t> pa = Pattern(3000, 1), pb = Pattern(7000, 2);
  ASSERT_TRUE(ep().Put(pa.data(), pa.size(), a, 0).ok());
  ASSERT_TRUE(ep().Put(pb.data(), pb.size(), b, 0).ok());

  std::vector<uint8_t> pc = Pattern(4096, 3);
  std::vector<uint8_t> got_a(pa.size()), got_b(pb.size());
  uint64_t prev_a = 1, prev_b = 1;
  Batch batch;
  batch.Get(got_a.data(), got_a.size(), a, 0);
  batch.Get(got_b.data(), got_b.size(), b, 0);
  batch.Put(pc.data(), pc.size(), a, 65536);
  batch.Put(pc.data(), pc.size(), b, 65536);
  batch.FetchAdd64(a, 8192, 5, &prev_a);
  batch.FetchAdd64(b, 8192, 6, &prev_b);
  EXPECT_EQ(batch.size(), 6u);
  Status s = ep().Post(batch).Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(got_a == pa);
  EXPECT_TRUE(got_b == pb);
  EXPECT_EQ(prev_a, 0u);
  EXPECT_EQ(prev_b, 0u);
  EXPECT_EQ(target().Load64(kAllocatedRw, 8192), 5u);
  EXPECT_EQ(target().Load64(kRegisteredRw, 8192), 6u);
  EXPECT_EQ(target().Hash(kAllocatedRw, 65536, pc.size()),
            Fnv1a(pc.data(), pc.size()));
  EXPECT_EQ(target().Hash(kRegisteredRw, 65536, pc.size()),
            Fnv1a(pc.data(), pc.size()));

  // A batch with one bad operation fails as a whole request, and the
  // endpoint keeps working.
  Batch bad;
  uint64_t prev = 0;
  bad.Put(pc.data(), pc.size(), a, 0);
  bad.FetchAdd64(target().regions[kReadOnly], 0, 1, &prev);
  EXPECT_EQ(ep().Post(bad).Wait().code(), StatusCode::kAccessDenied);
  // Flush may report the same failure again; either way it must return.
  (void)ep().Flush();
  EXPECT_TRUE(ep().Put(pc.data(), 8, a, 0).ok());
}

TEST_P(XferOpsTest, NonBlockingFormsCompleteByWaitTestAndFlush) {
  const RemoteRegion& r = target().regions[kAllocatedRw];
  const RemoteRegion& app = target().regions[kRegisteredRw];
  // Many puts in flight, then one Flush makes them all visible.
  constexpr int kPuts = 64;
  constexpr size_t kChunk = 8192;
  std::vector<uint8_t> src = Pattern(kPuts * kChunk, 5);
  std::vector<Request> requests;
  for (int i = 0; i < kPuts; ++i) {
    // Source buffers may be reused once the call returns: post from a
    // scratch copy that is overwritten right after.
    std::vector<uint8_t> scratch(src.begin() + i * kChunk,
                                 src.begin() + (i + 1) * kChunk);
    requests.push_back(ep().PostPut(scratch.data(), kChunk, r, i * kChunk));
    std::fill(scratch.begin(), scratch.end(), 0xab);
  }
  Status s = ep().Flush();
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (Request& req : requests) {
    Status done;
    EXPECT_TRUE(req.Test(&done)) << "flushed request not complete";
    EXPECT_TRUE(done.ok()) << done.ToString();
  }
  EXPECT_EQ(target().Hash(kAllocatedRw, 0, src.size()),
            Fnv1a(src.data(), src.size()));

  // Get polled with Test.
  std::vector<uint8_t> got(src.size());
  Request get = ep().PostGet(got.data(), got.size(), r, 0);
  Status st;
  while (!get.Test(&st)) {
  }
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(got == src);

  // Atomics, vectors and notify, non-blocking.
  uint64_t prev_add = 1, prev_cas = 1;
  Request add = ep().PostFetchAdd64(app, 0, 3, &prev_add);
  ASSERT_TRUE(add.Wait().ok());
  Request cas = ep().PostCompareSwap64(app, 0, 3, 9, &prev_cas);
  ASSERT_TRUE(cas.Wait().ok());
  EXPECT_EQ(prev_add, 0u);
  EXPECT_EQ(prev_cas, 3u);

  std::vector<uint8_t> vsrc = Pattern(256 << 10, 6);
  std::vector<Segment> w =
      RandomSegments(rng_, 80, 512 << 10, vsrc.data(), vsrc.size());
  for (Segment& seg : w) seg.remote_offset += 4096;
  ASSERT_TRUE(ep().PostWriteV(w, app).Wait().ok());
  std::vector<uint8_t> vdst(256 << 10, 0);
  std::vector<Segment> rd = w;
  for (Segment& seg : rd) {
    seg.local = vdst.data() + (static_cast<uint8_t*>(seg.local) - vsrc.data());
  }
  ASSERT_TRUE(ep().PostReadV(rd, app).Wait().ok());
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(std::memcmp(w[i].local, rd[i].local, w[i].length), 0);
  }

  std::vector<uint8_t> payload = Pattern(1000, 8);
  Request notify = ep().PostPutWithNotify(payload.data(), payload.size(), r,
                                          900000, app, 64, 1234);
  ASSERT_TRUE(notify.Wait().ok());
  EXPECT_EQ(target().Load64(kRegisteredRw, 0), 9u);
  EXPECT_EQ(target().Load64(kRegisteredRw, 64), 1234u);
  EXPECT_EQ(target().Hash(kAllocatedRw, 900000, payload.size()),
            Fnv1a(payload.data(), payload.size()));
  EXPECT_TRUE(Request().Wait().ok());  // a default request is complete
}

TEST_P(XferOpsTest, FenceFlushesEveryEndpoint) {
  std::vector<uint8_t> data = Pattern(1 << 20, 21);
  for (int round = 0; round < 3; ++round) {
    for (auto& t : targets_) {
      for (int i = 0; i < 16; ++i) {
        (void)t.ep->PostPut(data.data() + i * 65536, 65536,
                            t.regions[kRegisteredRw], i * 65536);
      }
    }
    Status s = ctx_->Fence();
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (auto& t : targets_) {
      EXPECT_EQ(t.Hash(kRegisteredRw, 0, data.size()),
                Fnv1a(data.data(), data.size()))
          << t.process.name();
    }
    FillPattern(data.data(), data.size(), 22 + round);
  }
}

TEST_P(XferOpsTest, ConnectToOwnAddressReachesOwnRegions) {
  auto own = ctx_->Allocate(4096, xfer::kRemoteAll);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  auto self = ctx_->Connect(ctx_->address());
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  auto r = (*self)->Import((*own)->descriptor());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (int i = 0; i < 100; ++i) {
    auto prev = (*self)->FetchAdd64(*r, 64, 2);
    ASSERT_TRUE(prev.ok()) << prev.status().ToString();
    EXPECT_EQ(*prev, 2u * i);
  }
  EXPECT_EQ(std::atomic_ref<uint64_t>(static_cast<uint64_t*>((*own)->data())[8])
                .load(std::memory_order_acquire),
            200u);
  const char msg[] = "hello, me";
  ASSERT_TRUE((*self)->Put(msg, sizeof(msg), *r, 1024).ok());
  // An atomic after the put orders it with this thread's read (for TSan:
  // on tcp a progress thread of this process wrote the bytes).
  ASSERT_TRUE((*self)->FetchAdd64(*r, 64, 0).ok());
  (void)std::atomic_ref<uint64_t>(static_cast<uint64_t*>((*own)->data())[8])
      .load(std::memory_order_acquire);
  EXPECT_STREQ(static_cast<const char*>((*own)->data()) + 1024, msg);
  EXPECT_TRUE(ctx_->Deregister(**own).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Transports, XferOpsTest, ::testing::ValuesIn(TestedTransports()),
    [](const ::testing::TestParamInfo<TransportChoice>& info) {
      return TransportLabel(info.param);
    });

}  // namespace
}  // namespace ps::testing
