#include "net/advertise.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include "base/status.h"

namespace ps::net {
namespace {

std::string Unbracketed(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// The first up, non-loopback interface address of `family` (IPv6: global
// scope only; a link-local address needs an interface name to dial).
std::string FirstInterfaceAddress(int family) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    } else {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr) ||
          IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)) {
        continue;
      }
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    }
    found = text;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

bool IsWildcardHost(const std::string& host) {
  const std::string bare = Unbracketed(host);
  return bare == "0.0.0.0" || bare == "::";
}

StatusOr<std::string> AdvertisedHost(const std::string& listen_host,
                                     const std::string& advertise_host) {
  if (!advertise_host.empty()) {
    if (IsWildcardHost(advertise_host)) {
      return InvalidArgument("cannot advertise " + advertise_host +
                             ": peers cannot dial a wildcard address; give "
                             "the address they reach this process by");
    }
    return Unbracketed(advertise_host);
  }
  if (!IsWildcardHost(listen_host)) return Unbracketed(listen_host);
  const bool v6_listener = Unbracketed(listen_host) == "::";
  std::string host = FirstInterfaceAddress(AF_INET);
  if (host.empty() && v6_listener) host = FirstInterfaceAddress(AF_INET6);
  if (host.empty()) host = v6_listener ? "::1" : "127.0.0.1";
  return host;
}

std::string JoinHostPort(const std::string& host, uint16_t port) {
  const std::string bare = Unbracketed(host);
  const bool v6 = bare.find(':') != std::string::npos;
  return (v6 ? "[" + bare + "]" : bare) + ":" + std::to_string(port);
}

}  // namespace ps::net
