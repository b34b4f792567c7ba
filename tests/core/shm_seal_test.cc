// Read-only holds between processes on one host, against a peer that does
// not play by the rules. This process is the peer: it connects to a target
// process over shm through the real Endpoint/Import path, keeps the memfd
// the target sent (RemoteMapping's test seam), and tries what a hostile peer
// would: map a read-only region writable, mprotect its read-only mapping,
// reopen /proc/self/fd/N read-write and write, ftruncate the memfd (which
// would kill the owner with SIGBUS), add seals. Each must fail, and the
// target must stay alive with its bytes unchanged. The liveness page, which
// every same-host peer maps, is tried the same way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/endpoint.h"
#include "core/shm/remote_mapping.h"
#include "tests/core/process_harness.h"
#include "tests/core/xfer_test_peer.h"

namespace ps::testing {
namespace {

using xfer::Context;
using xfer::RemoteRegion;
using xfer::TransportChoice;
using xfer::internal::RemoteMapping;

std::string Errno() { return std::strerror(errno); }

// Every way a peer holding `fd` (the memfd of `bytes` it was sent) could
// change the memory or its size; empty when all of them failed, else which
// succeeded. `may_write`: the region lets peers write, so a writable mapping
// is fine, but resizing and sealing are not.
std::string HostileAttempts(int fd, size_t bytes, bool may_write) {
  std::string got;
  if (!may_write) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      munmap(p, bytes);
      got += "mmap(PROT_WRITE, MAP_SHARED) of the fd it was sent; ";
    }
    // Reopening the same memfd read-write goes around the fd's mode.
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    int rw = open(link.c_str(), O_RDWR | O_CLOEXEC);
    if (rw >= 0) {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
      if (p != MAP_FAILED) {
        munmap(p, bytes);
        got += "mmap(PROT_WRITE, MAP_SHARED) after reopening " + link +
               " O_RDWR; ";
      }
      // A read-only mapping of the read-write fd, then made writable.
      p = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, rw, 0);
      if (p != MAP_FAILED) {
        if (mprotect(p, bytes, PROT_READ | PROT_WRITE) == 0) {
          got += "mprotect(PROT_WRITE) of a mapping of the reopened fd; ";
        }
        munmap(p, bytes);
      }
      // Rewrites byte 0 with itself: the owner's data stays as it was even
      // where this succeeds (which is then reported).
      unsigned char byte = 0;
      if (pread(rw, &byte, 1, 0) == 1 && pwrite(rw, &byte, 1, 0) == 1) {
        got += "write(2) through the reopened fd; ";
      }
      if (ftruncate(rw, 0) == 0) {
        got += "ftruncate(0) through the reopened fd; ";
        (void)!ftruncate(rw, static_cast<off_t>(bytes));
      }
      close(rw);
    }
  }
  // Growing, then shrinking: a shrink under the owner's mapping makes the
  // owner die of SIGBUS at its next access (the size is put back at once
  // where it succeeds, but the bytes are zeroed).
  if (ftruncate(fd, static_cast<off_t>(bytes) * 2) == 0) {
    got += "ftruncate to grow; ";
    (void)!ftruncate(fd, static_cast<off_t>(bytes));
  }
  if (ftruncate(fd, 0) == 0) {
    got += "ftruncate(0); ";
    (void)!ftruncate(fd, static_cast<off_t>(bytes));
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0) {
    got += "F_ADD_SEALS F_SEAL_FUTURE_WRITE (locks the other peers out); ";
  }
  return got;
}

class ShmSealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The target first: fork only while this process has no threads.
    target_.process = StartTarget("owner", TransportChoice::kShm);
    std::optional<TargetInfo> info = AwaitReady(target_.process.channel());
    ASSERT_TRUE(info.has_value()) << "target did not start";
    target_.info = std::move(*info);
    auto ctx = Context::Create(TestOptions("peer", TransportChoice::kShm));
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_ = std::move(ctx).value();
    Status s = target_.Connect(*ctx_);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(target_.ep->transport(), xfer::TransportKind::kShm);
  }

  void TearDown() override {
    if (target_.process.running()) {
      EXPECT_EQ(target_.Exit(), std::optional<int>(0));
    }
  }

  // Maps `region` through a first Get, keeping the memfd the target sent.
  RemoteMapping* MapKeepingFd(const RemoteRegion& region) {
    RemoteMapping* m = xfer::internal::MappingOf(region);
    m->keep_owner_fd = true;
    uint64_t word = 0;
    Status s = target_.ep->Get(&word, sizeof(word), region, 0);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(m->owner_fd.valid()) << "the shm transport did not map it";
    return m;
  }

  std::unique_ptr<Context> ctx_;
  TargetHandle target_;
};

TEST_F(ShmSealTest, ReadOnlyRegionStaysReadOnly) {
  const RemoteRegion& ro = target_.regions[kReadOnly];
  std::vector<uint8_t> want(kSmallRegionSize);
  FillPattern(want.data(), want.size(), 77);  // what the target wrote
  RemoteMapping* m = MapKeepingFd(ro);
  ASSERT_TRUE(m->owner_fd.valid());
  const int fd = m->owner_fd.get();
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY)
      << "the target sent a writable descriptor for a read-only region";
  // The transport's own mapping is read-only, and cannot be made writable.
  EXPECT_NE(mprotect(m->base, m->size, PROT_READ | PROT_WRITE), 0)
      << "mprotect(PROT_WRITE) of the peer's read-only mapping succeeded";
  EXPECT_EQ(HostileAttempts(fd, m->size, /*may_write=*/false), "");
  // The target is alive and its bytes are what it wrote.
  EXPECT_EQ(target_.Hash(kReadOnly, 0, kSmallRegionSize),
            std::optional<uint64_t>(Fnv1a(want.data(), want.size())));
  // And reads still work.
  std::vector<uint8_t> back(4096);
  Status s = target_.ep->Get(back.data(), back.size(), ro, 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(back.data(), want.data(), back.size()), 0);
}

TEST_F(ShmSealTest, WritableRegionCannotBeResizedOrSealed) {
  const RemoteRegion& rw = target_.regions[kAllocatedRw];
  RemoteMapping* m = MapKeepingFd(rw);
  ASSERT_TRUE(m->owner_fd.valid());
  EXPECT_EQ(HostileAttempts(m->owner_fd.get(), m->size, /*may_write=*/true),
            "");
  // Writes through the transport still land, and the target is alive.
  std::vector<uint8_t> data(8192);
  FillPattern(data.data(), data.size(), 5);
  Status s = target_.ep->Put(data.data(), data.size(), rw, 4096);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(target_.ep->Flush().ok());
  EXPECT_EQ(target_.Hash(kAllocatedRw, 4096, data.size()),
            std::optional<uint64_t>(Fnv1a(data.data(), data.size())));
}

// The target's liveness page as this process mapped it: the read-only
// shared mapping of a memfd named xfer-liveness (this process's own page is
// mapped read-write). Empty when none is found.
struct Mapping {
  uintptr_t start = 0, end = 0;
  std::string range;  // "start-end" as /proc/self/maps writes it
};
Mapping PeerLivenessMapping() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:xfer-liveness") == std::string::npos) continue;
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    if (perms != "r--s") continue;
    Mapping m;
    m.range = range;
    std::sscanf(range.c_str(), "%lx-%lx", &m.start, &m.end);
    return m;
  }
  return {};
}

TEST_F(ShmSealTest, LivenessPageStaysReadOnly) {
  const Mapping page = PeerLivenessMapping();
  ASSERT_NE(page.start, 0u) << "no read-only mapping of the target's "
                               "liveness page in /proc/self/maps";
  const size_t bytes = page.end - page.start;
  EXPECT_NE(mprotect(reinterpret_cast<void*>(page.start), bytes,
                     PROT_READ | PROT_WRITE),
            0)
      << "mprotect(PROT_WRITE) of the liveness page succeeded";
  // The memfd behind the mapping, opened anew (as reopening the fd the
  // target sent would): needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE.
  const std::string file = "/proc/self/map_files/" + page.range;
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::printf(
        "  (cannot open %s: %s; the liveness page's memfd was only "
        "tried with mprotect)\n",
        file.c_str(), Errno().c_str());
  } else {
    EXPECT_EQ(HostileAttempts(fd, bytes, /*may_write=*/false), "");
    close(fd);
  }
  // The target is alive, and its regions still read as live.
  uint64_t word = 0;
  Status s =
      target_.ep->Get(&word, sizeof(word), target_.regions[kReadOnly], 0);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(target_.Hash(kAllocatedRw, 0, 64).has_value());
}

}  // namespace
}  // namespace ps::testing
