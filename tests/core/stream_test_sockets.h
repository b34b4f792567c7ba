// What the stream transport tests share: connected socket pairs of either
// kind ("unix": a socketpair, "tcp": loopback), the target instance, and ops
// built by hand.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "core/internal/op.h"
#include "core/remote_region.h"
#include "net/connect.h"
#include "net/unique_fd.h"

namespace ps::xfer::internal {

inline constexpr uint64_t kInstance = 0x5eed0001;
inline constexpr std::chrono::milliseconds kPatientTimeout{10000};

// Connected (origin, target) sockets of the kind the test is about.
inline std::pair<net::UniqueFd, net::UniqueFd> Connect(
    const std::string& kind) {
  if (kind == "unix") {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    return {net::UniqueFd(sv[0]), net::UniqueFd(sv[1])};
  }
  auto listener = net::ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status();
  auto port = net::LocalPort(listener->get());
  EXPECT_TRUE(port.ok());
  auto origin = net::ConnectTcp("127.0.0.1:" + std::to_string(*port), 2000);
  EXPECT_TRUE(origin.ok()) << origin.status();
  auto target = net::Accept(listener->get());
  EXPECT_TRUE(target.ok()) << target.status();
  return {std::move(*origin), std::move(*target)};
}

inline Op MakeOp(OpType type, const RemoteRegion& r, void* local,
                 uint64_t offset, size_t length) {
  Op op;
  op.type = type;
  op.remote = &r;
  op.single = Segment{local, offset, length};
  return op;
}

}  // namespace ps::xfer::internal
