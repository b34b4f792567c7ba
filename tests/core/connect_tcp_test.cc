// net::ConnectTcp against a host the kernel finds no route to, in a network
// namespace of the test's own (a child process unshares one; the test is
// skipped where it may not): a route of type "unreachable" makes each dial
// fail at once with EHOSTUNREACH, as a neighbour that never answered does
// on a lossy link. ConnectTcp dials again until its timeout and then gives
// that error; a host that becomes reachable meanwhile is connected.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "net/connect.h"

namespace ps::net {
namespace {

constexpr int kSkip = 77;

// Runs `body` in a child process inside a new network namespace whose
// loopback is up and whose 203.0.113.0/24 (TEST-NET-3) is unreachable;
// returns the child's exit code (kSkip: no namespace here).
int InUnreachableNamespace(int (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0 ||
        std::system("ip link set lo up && "
                    "ip route add unreachable 203.0.113.0/24") != 0) {
      _exit(kSkip);
    }
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    return -1;
  }
  return WEXITSTATUS(status);
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

TEST(ConnectTcpTest, AHostWithoutARouteIsDialedUntilTheTimeout) {
  const int rc = InUnreachableNamespace([] {
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<UniqueFd> fd = ConnectTcp("203.0.113.5:4000", 400);
    const double took = SecondsSince(t0);
    if (fd.ok()) return 1;
    if (fd.status().code() != StatusCode::kNetwork) return 2;
    if (fd.status().message().find("No route to host") == std::string::npos) {
      return 3;
    }
    if (took < 0.3) return 4;  // one dial fails in microseconds
    if (took > 5) return 5;
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own here";
  EXPECT_EQ(rc, 0);
}

TEST(ConnectTcpTest, AHostThatBecomesReachableIsConnected) {
  const int rc = InUnreachableNamespace([] {
    StatusOr<UniqueFd> listener = ListenTcp("0.0.0.0", 4000);
    if (!listener.ok()) return 10;
    // 200 ms on, the address comes up on lo (a local route, which wins
    // over the unreachable one).
    std::thread route([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      (void)std::system("ip addr add 203.0.113.5/32 dev lo");
    });
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<UniqueFd> fd = ConnectTcp("203.0.113.5:4000", 10000);
    const double took = SecondsSince(t0);
    route.join();
    if (!fd.ok()) return 11;
    if (took < 0.15) return 12;  // it was unreachable at first
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own here";
  EXPECT_EQ(rc, 0);
}

// A refused connection is not a missing route: it fails at once.
TEST(ConnectTcpTest, ARefusedConnectionIsNotDialedAgain) {
  const int rc = InUnreachableNamespace([] {
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<UniqueFd> fd = ConnectTcp("127.0.0.1:4001", 5000);
    if (fd.ok()) return 20;
    if (SecondsSince(t0) > 1) return 21;
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own here";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace ps::net
