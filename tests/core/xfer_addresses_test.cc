// Where a Context listens and what it tells peers (net/advertise.h): a
// wildcard bind advertises a dialable address, an explicit advertise host
// wins, a wildcard cannot be advertised, IPv6 hosts are bracketed, and
// peers reach contexts bound to 0.0.0.0, :: and ::1 through address().
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/context.h"
#include "core/endpoint.h"
#include "net/advertise.h"
#include "net/unique_fd.h"

namespace ps::xfer {
namespace {

bool HaveIpv6Loopback() {
  net::UniqueFd fd(socket(AF_INET6, SOCK_STREAM, 0));
  if (!fd.valid()) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  return bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
}

TEST(AdvertisedHost, ExplicitSpecificAndWildcard) {
  EXPECT_EQ(*net::AdvertisedHost("0.0.0.0", "node7.example"), "node7.example");
  EXPECT_EQ(*net::AdvertisedHost("10.1.2.3", ""), "10.1.2.3");
  EXPECT_EQ(*net::AdvertisedHost("[fd00::5]", ""), "fd00::5");
  for (const char* wildcard : {"0.0.0.0", "::", "[::]"}) {
    auto host = net::AdvertisedHost(wildcard, "");
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_FALSE(host->empty());
    EXPECT_FALSE(net::IsWildcardHost(*host)) << wildcard << " -> " << *host;
  }
  auto bad = net::AdvertisedHost("127.0.0.1", "0.0.0.0");
  EXPECT_TRUE(bad.status().Is(StatusCode::kInvalidArgument)) << bad.status();
}

TEST(AdvertisedHost, JoinBracketsIpv6) {
  EXPECT_EQ(net::JoinHostPort("10.0.0.1", 7000), "10.0.0.1:7000");
  EXPECT_EQ(net::JoinHostPort("fd00::1", 7000), "[fd00::1]:7000");
  EXPECT_EQ(net::JoinHostPort("[::1]", 7), "[::1]:7");
}

ClusterSecret Secret() {
  return *ClusterSecret::FromBytes("a test secret of enough bytes");
}

// A target bound as given, an origin that dials its address() over tcp
// and moves a word both ways.
void ExpectReachable(const std::string& listen_host) {
  ContextOptions o;
  o.name = "target";
  o.listen_host = listen_host;
  o.secret = Secret();
  auto target = Context::Create(o);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ((*target)->address().find("0.0.0.0"), std::string::npos);
  EXPECT_NE((*target)->address().rfind("[::]", 0), 0u);
  auto region = (*target)->Allocate(4096, kRemoteAll);
  ASSERT_TRUE(region.ok());
  ContextOptions c;
  c.name = "origin";
  c.transport = TransportChoice::kTcp;
  c.secret = Secret();
  auto origin = Context::Create(c);
  ASSERT_TRUE(origin.ok()) << origin.status();
  auto ep = (*origin)->Connect((*target)->address());
  ASSERT_TRUE(ep.ok()) << listen_host << ": " << ep.status();
  auto remote = (*ep)->Import((*region)->descriptor());
  ASSERT_TRUE(remote.ok());
  const uint64_t value = 0x1234;
  ASSERT_TRUE((*ep)->Put(&value, sizeof(value), *remote, 0).ok());
  uint64_t back = 0;
  ASSERT_TRUE((*ep)->Get(&back, sizeof(back), *remote, 0).ok());
  EXPECT_EQ(back, value);
}

TEST(ContextAddress, WildcardIpv4IsReachableByItsAdvertisedAddress) {
  ExpectReachable("0.0.0.0");
}

TEST(ContextAddress, Ipv6LoopbackAndWildcard) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  ExpectReachable("::1");
  ExpectReachable("::");
}

}  // namespace
}  // namespace ps::xfer
