// StreamServer + StreamTransport driven directly, in one process, over a
// Unix socketpair and over a loopback TCP connection: every operation, every
// target-side rejection (with the connection going on), pipelining,
// concurrent posting and descriptor passing. Lost and silent peers:
// stream_peer_failure_test.cc.
#include "core/stream/stream_transport.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/internal/op.h"
#include "core/internal/region_table.h"
#include "core/remote_region.h"
#include "core/request.h"
#include "core/stream/stream_server.h"
#include "core/stream/wire.h"
#include "net/connect.h"
#include "net/transfer.h"
#include "tests/core/stream_test_sockets.h"

namespace ps::xfer::internal {
namespace {

using net::UniqueFd;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

Op AtomicOp(OpType type, const RemoteRegion& r, uint64_t offset, uint64_t a,
            uint64_t b, uint64_t* result) {
  Op op = MakeOp(type, r, nullptr, offset, 8);
  op.operand0 = a;
  op.operand1 = b;
  op.result = result;
  return op;
}

class StreamTransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Start(kPatientTimeout); }

  void Start(milliseconds timeout, MapRegionHandler map = nullptr) {
    transport_.reset();
    server_.reset();
    auto [origin, target] = Connect(GetParam());
    server_ = std::make_unique<StreamServer>(std::move(target), &table_,
                                             "worker-2", std::move(map));
    transport_ = std::make_unique<StreamTransport>(std::move(origin),
                                                   "server-1", timeout);
  }

  // A target region of `size` bytes (8-byte aligned), registered, and the
  // origin's view of it.
  RemoteRegion AddRegion(uint64_t id, size_t size, uint32_t access) {
    memory_.emplace_back((size + 7) / 8, 0);
    void* data = memory_.back().data();
    uint64_t key = 0x1000 + id * 7919;
    table_.Insert(RegionTable::WrapForTesting(id, key, data, size, access));
    bases_[id] = static_cast<char*>(data);
    return RemoteRegion::ForTesting(id, key, size, access, kInstance,
                                    "server-1");
  }
  char* Base(uint64_t id) { return bases_[id]; }

  Status Do(const Op& op) { return transport_->Post(op).Wait(); }
  Status Put(const void* src, size_t n, const RemoteRegion& r, uint64_t off) {
    return Do(MakeOp(OpType::kPut, r, const_cast<void*>(src), off, n));
  }
  Status Get(void* dst, size_t n, const RemoteRegion& r, uint64_t off) {
    return Do(MakeOp(OpType::kGet, r, dst, off, n));
  }

  // The connection still serves: a put and a get of 16 bytes round-trip.
  void ExpectStillServing(const RemoteRegion& r) {
    char in[16] = "still serving!!";
    char out[16] = {};
    ASSERT_TRUE(Put(in, sizeof(in), r, 0).ok());
    ASSERT_TRUE(Get(out, sizeof(out), r, 0).ok());
    EXPECT_EQ(std::memcmp(in, out, sizeof(in)), 0);
  }

  RegionTable table_{"server-1", kInstance};
  std::deque<std::vector<uint64_t>> memory_;
  std::map<uint64_t, char*> bases_;
  std::unique_ptr<StreamServer> server_;
  std::unique_ptr<StreamTransport> transport_;
};

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 31 + seed);
  return v;
}

TEST_P(StreamTransportTest, PutThenGetRoundTrips) {
  RemoteRegion r = AddRegion(1, 1 << 20, kRemoteAll);
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{1} << 20}) {
    auto data = Pattern(n, static_cast<int>(n));
    ASSERT_TRUE(Put(data.data(), n, r, 0).ok());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), Base(1)));
    std::vector<char> back(n);
    ASSERT_TRUE(Get(back.data(), n, r, 0).ok());
    EXPECT_EQ(back, data);
  }
  // A put at an offset lands exactly there.
  ASSERT_TRUE(Put("abc", 3, r, 1000).ok());
  EXPECT_EQ(std::memcmp(Base(1) + 1000, "abc", 3), 0);
}

TEST_P(StreamTransportTest, WriteVAndReadVMoveManySegments) {
  RemoteRegion r = AddRegion(1, 64 << 10, kRemoteAll);
  constexpr int kSegments = 100;
  auto source = Pattern(kSegments * 100, 7);
  std::vector<Segment> out, in;
  std::vector<char> back(source.size());
  size_t local = 0;
  for (int i = 0; i < kSegments; ++i) {
    size_t len = 1 + static_cast<size_t>(i % 97);
    uint64_t remote = static_cast<uint64_t>(kSegments - 1 - i) * 600 + i;
    out.push_back({source.data() + local, remote, len});
    in.push_back({back.data() + local, remote, len});
    local += len;
  }
  Op write;
  write.type = OpType::kWriteV;
  write.remote = &r;
  write.segments = out;
  ASSERT_TRUE(Do(write).ok());
  for (const Segment& s : out) {
    ASSERT_EQ(std::memcmp(Base(1) + s.remote_offset, s.local, s.length), 0);
  }
  Op read = write;
  read.type = OpType::kReadV;
  read.segments = in;
  ASSERT_TRUE(Do(read).ok());
  EXPECT_EQ(std::memcmp(back.data(), source.data(), local), 0);
}

TEST_P(StreamTransportTest, AtomicsReturnThePreviousValue) {
  RemoteRegion r = AddRegion(1, 64, kRemoteAtomic | kRemoteRead);
  uint64_t previous = 1;
  ASSERT_TRUE(Do(AtomicOp(OpType::kFetchAdd, r, 8, 5, 0, &previous)).ok());
  EXPECT_EQ(previous, 0u);
  ASSERT_TRUE(Do(AtomicOp(OpType::kFetchAdd, r, 8, 7, 0, &previous)).ok());
  EXPECT_EQ(previous, 5u);
  // CAS with the wrong expectation fails and reports the current value.
  ASSERT_TRUE(Do(AtomicOp(OpType::kCompareSwap, r, 8, 1, 99, &previous)).ok());
  EXPECT_EQ(previous, 12u);
  ASSERT_TRUE(Do(AtomicOp(OpType::kCompareSwap, r, 8, 12, 99, &previous)).ok());
  EXPECT_EQ(previous, 12u);
  uint64_t word;
  std::memcpy(&word, Base(1) + 8, 8);
  EXPECT_EQ(word, 99u);
}

TEST_P(StreamTransportTest, PutWithNotifyWritesDataThenFlag) {
  RemoteRegion data = AddRegion(1, 4096, kRemoteWrite);
  RemoteRegion flags = AddRegion(2, 64, kRemoteWrite);
  auto payload = Pattern(4096, 3);
  Op op = MakeOp(OpType::kPutNotify, data, payload.data(), 0, payload.size());
  op.notify_remote = &flags;
  op.notify_offset = 16;
  op.notify_value = 42;
  ASSERT_TRUE(Do(op).ok());
  EXPECT_EQ(std::memcmp(Base(1), payload.data(), payload.size()), 0);
  EXPECT_EQ(__atomic_load_n(reinterpret_cast<uint64_t*>(Base(2) + 16),
                            __ATOMIC_ACQUIRE),
            42u);

  // A notify word the target refuses: nothing is written, not even data.
  Op bad = op;
  bad.notify_offset = 60;  // 60 + 8 > 64
  payload[0] ^= 1;
  Status s = Do(bad);
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  EXPECT_NE(Base(1)[0], payload[0]);
  bad.notify_offset = 4;  // in bounds, misaligned
  s = Do(bad);
  EXPECT_TRUE(s.Is(StatusCode::kInvalidArgument)) << s;
  EXPECT_NE(s.message().find("aligned"), std::string::npos) << s;
  ExpectStillServing(AddRegion(3, 64, kRemoteAll));
}

TEST_P(StreamTransportTest, EveryRejectionKeepsTheConnectionServing) {
  RemoteRegion rw = AddRegion(1, 4096, kRemoteAll);
  RemoteRegion ro = AddRegion(2, 4096, kRemoteRead);
  std::vector<char> buf(8192, 'x');

  struct Case {
    const char* what;
    Status status;
    StatusCode want;
  };
  std::vector<Case> cases;
  cases.push_back({"put past the end", Put(buf.data(), 100, rw, 4000),
                   StatusCode::kOutOfRange});
  cases.push_back({"get past the end", Get(buf.data(), 4097, rw, 0),
                   StatusCode::kOutOfRange});
  cases.push_back({"offset overflow", Get(buf.data(), 16, rw, ~uint64_t{0}),
                   StatusCode::kOutOfRange});
  cases.push_back({"wrong key",
                   Put(buf.data(), 8, rw.WithKeyForTesting(rw.key() + 1), 0),
                   StatusCode::kInvalidKey});
  cases.push_back({"write to read-only", Put(buf.data(), 64, ro, 0),
                   StatusCode::kAccessDenied});
  uint64_t prev = 0;
  cases.push_back({"atomic without atomic access",
                   Do(AtomicOp(OpType::kFetchAdd, ro, 0, 1, 0, &prev)),
                   StatusCode::kAccessDenied});
  cases.push_back({"misaligned atomic",
                   Do(AtomicOp(OpType::kFetchAdd, rw, 4, 1, 0, &prev)),
                   StatusCode::kInvalidArgument});
  RemoteRegion gone = AddRegion(3, 4096, kRemoteAll);
  ASSERT_TRUE(table_.Remove(3).ok());
  cases.push_back({"deregistered region", Put(buf.data(), 8, gone, 0),
                   StatusCode::kNotRegistered});
  RemoteRegion stale = RemoteRegion::ForTesting(
      rw.id(), rw.key(), rw.size(), rw.access(), kInstance + 1, "server-1");
  cases.push_back({"stale instance", Put(buf.data(), 8, stale, 0),
                   StatusCode::kStaleDescriptor});
  // WriteV with one bad segment among good ones: nothing lands, the
  // payload is skipped, and the stream stays in step.
  std::vector<Segment> segs;
  for (int i = 0; i < 70; ++i) {
    segs.push_back({buf.data() + i * 10, static_cast<uint64_t>(i) * 50, 10});
  }
  segs[40].remote_offset = 5000;
  Op writev;
  writev.type = OpType::kWriteV;
  writev.remote = &rw;
  writev.segments = segs;
  std::memset(Base(1), 0, 4096);
  cases.push_back(
      {"writev segment out of bounds", Do(writev), StatusCode::kOutOfRange});
  EXPECT_EQ(Base(1)[0], 0) << "a rejected WriteV must not write";
  Op readv = writev;
  readv.type = OpType::kReadV;
  readv.remote = &rw;
  cases.push_back(
      {"readv segment out of bounds", Do(readv), StatusCode::kOutOfRange});

  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.status.code(), c.want) << c.status;
    // Messages name the region and both ends.
    EXPECT_NE(c.status.message().find("server-1"), std::string::npos)
        << c.status;
    EXPECT_NE(c.status.message().find("worker-2"), std::string::npos)
        << c.status;
  }
  EXPECT_NE(cases[0].status.message().find("region 1"), std::string::npos);
  EXPECT_FALSE(transport_->lost());
  ExpectStillServing(rw);
  // The transport does not remember errors that were already returned by
  // Wait... but Flush reports the first one since the last Flush.
  Status flushed = transport_->Flush();
  EXPECT_TRUE(flushed.Is(StatusCode::kOutOfRange)) << flushed;
  EXPECT_TRUE(transport_->Flush().ok());
}

TEST_P(StreamTransportTest, BatchCompletesWithTheFirstError) {
  RemoteRegion r = AddRegion(1, 4096, kRemoteAll);
  auto data = Pattern(256, 1);
  std::vector<char> back(256);
  uint64_t prev = 7;
  std::vector<Op> ops = {
      MakeOp(OpType::kPut, r, data.data(), 0, 256),
      AtomicOp(OpType::kFetchAdd, r, 1024, 3, 0, &prev),
      MakeOp(OpType::kGet, r, back.data(), 0, 256),
  };
  ASSERT_TRUE(transport_->PostBatch(ops).Wait().ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(prev, 0u);

  ops.push_back(MakeOp(OpType::kGet, r, back.data(), 4000, 256));  // bad
  ops.push_back(AtomicOp(OpType::kFetchAdd, r, 1024, 3, 0, &prev));
  Status s = transport_->PostBatch(ops).Wait();
  EXPECT_TRUE(s.Is(StatusCode::kOutOfRange)) << s;
  EXPECT_EQ(prev, 6u) << "ops after the failed one still ran";
}

TEST_P(StreamTransportTest, PipelinedMixedOpsThenFlush) {
  constexpr int kOps = 2000;
  RemoteRegion r = AddRegion(1, kOps * 64 + 64, kRemoteAll);
  std::vector<char> src(kOps * 64), dst(kOps * 64);
  for (int i = 0; i < kOps * 64; ++i) src[i] = static_cast<char>(i * 13);
  std::vector<uint64_t> prev(kOps);
  std::vector<Request> requests;
  for (int i = 0; i < kOps; ++i) {
    transport_->Post(MakeOp(OpType::kPut, r, src.data() + i * 64,
                            static_cast<uint64_t>(i) * 64, 64));
    requests.push_back(transport_->Post(
        AtomicOp(OpType::kFetchAdd, r, kOps * 64, 1, 0, &prev[i])));
    // Ops on one connection are served in order: this get sees the put.
    requests.push_back(
        transport_->Post(MakeOp(OpType::kGet, r, dst.data() + i * 64,
                                static_cast<uint64_t>(i) * 64, 64)));
  }
  ASSERT_TRUE(transport_->Flush().ok());
  for (size_t k = 0; k < requests.size(); ++k) {
    Request& q = requests[k];
    Status s;
    ASSERT_TRUE(q.Test(&s)) << k;
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(dst, src);
  for (int i = 0; i < kOps; ++i) ASSERT_EQ(prev[i], static_cast<uint64_t>(i));
}

TEST_P(StreamTransportTest, FourThreadsPostConcurrently) {
  constexpr int kThreads = 4;
  constexpr int kIters = 500;
  RemoteRegion r = AddRegion(1, kThreads * 4096 + 8, kRemoteAll);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<char> mine(4096), back(4096);
      uint64_t base = static_cast<uint64_t>(t) * 4096;
      for (int i = 0; i < kIters; ++i) {
        size_t n = 1 + static_cast<size_t>((i * 37 + t) % 4096);
        std::memset(mine.data(), (i + t) & 0xff, n);
        uint64_t prev;
        Request put =
            transport_->Post(MakeOp(OpType::kPut, r, mine.data(), base, n));
        Request add = transport_->Post(
            AtomicOp(OpType::kFetchAdd, r, kThreads * 4096, 1, 0, &prev));
        if (!put.Wait().ok() || !add.Wait().ok()) ++failures;
        if (!transport_->Post(MakeOp(OpType::kGet, r, back.data(), base, n))
                 .Wait()
                 .ok() ||
            std::memcmp(back.data(), mine.data(), n) != 0) {
          ++failures;
        }
        if (i % 100 == 0 && !transport_->Flush().ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  uint64_t total;
  std::memcpy(&total, Base(1) + kThreads * 4096, 8);
  EXPECT_EQ(total, uint64_t{kThreads} * kIters);
}

// Callers of Run read replies themselves (their own and others'), beside
// the reader thread that completes the posted requests: every reply lands
// with its own request. Two threads run blocking operations, two post and
// wait; each checks its own data, and the fetch-adds of all four return
// every previous value once.
TEST_P(StreamTransportTest, RunningCallersReadRepliesBesidePostedOnes) {
  constexpr int kThreads = 4;
  constexpr int kIters = 200;
  constexpr size_t kSlot = 64 << 10;
  const uint64_t counter = kThreads * kSlot;
  RemoteRegion r = AddRegion(1, counter + 8, kRemoteAll);
  std::atomic<int> failures{0};
  std::vector<std::vector<uint64_t>> previous(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const bool run = t % 2 == 0;
      auto apply = [&](const Op& op) {
        return run ? transport_->Run(op) : transport_->Post(op).Wait();
      };
      std::vector<char> back(kSlot);
      const uint64_t base = static_cast<uint64_t>(t) * kSlot;
      for (int i = 0; i < kIters; ++i) {
        // Sizes up to the slot: some replies take several reads.
        const size_t n = 1 + static_cast<size_t>((i * 7919 + t) % kSlot);
        std::vector<char> mine = Pattern(n, i * kThreads + t);
        uint64_t prev = ~uint64_t{0};
        if (!apply(MakeOp(OpType::kPut, r, mine.data(), base, n)).ok() ||
            !apply(AtomicOp(OpType::kFetchAdd, r, counter, 1, 0, &prev)).ok() ||
            !apply(MakeOp(OpType::kGet, r, back.data(), base, n)).ok() ||
            std::memcmp(back.data(), mine.data(), n) != 0) {
          ++failures;
        }
        previous[t].push_back(prev);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<uint64_t> all;
  for (const auto& v : previous) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(all[i], i) << "a fetch-add result went missing or twice";
  }
}

TEST_P(StreamTransportTest, MapRegionPassesADescriptor) {
  RemoteRegion r = AddRegion(1, 64, kRemoteAll);
  wire::MapReply reply{};
  UniqueFd memfd;
  Status s = transport_->MapRegion(1, r.key(), kInstance, &reply, &memfd);
  EXPECT_TRUE(s.Is(StatusCode::kNotSupported)) << s;
  ExpectStillServing(r);
  if (GetParam() != "unix") return;

  int fd = memfd_create("stream-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  UniqueFd owned(fd);
  Start(kPatientTimeout, [fd](const wire::RequestHeader& h, wire::MapReply* out,
                              int* memfd_out) {
    if (h.region_id != 9) return NotRegistered("region 9 only");
    *out = {4096, kRemoteAll, 3};
    *memfd_out = fd;
    return Status::OK();
  });
  s = transport_->MapRegion(1, 0, kInstance, &reply, &memfd);
  EXPECT_TRUE(s.Is(StatusCode::kNotRegistered)) << s;
  ASSERT_TRUE(transport_->MapRegion(9, 0, kInstance, &reply, &memfd).ok());
  EXPECT_EQ(reply.size, 4096u);
  EXPECT_EQ(reply.state_slot, 3u);
  ASSERT_TRUE(memfd.valid());
  EXPECT_NE(memfd.get(), fd);
  // The received descriptor is the same file.
  ASSERT_EQ(pwrite(fd, "memfd!", 6, 0), 6);
  char check[6];
  ASSERT_EQ(pread(memfd.get(), check, 6, 0), 6);
  EXPECT_EQ(std::memcmp(check, "memfd!", 6), 0);
}

INSTANTIATE_TEST_SUITE_P(Sockets, StreamTransportTest,
                         ::testing::Values("unix", "tcp"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ps::xfer::internal
