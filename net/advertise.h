// The address a listener gives its peers, apart from the one it binds: a
// process may bind a wildcard (0.0.0.0, ::) or an address behind a NAT and
// must still tell peers something they can dial. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>

#include "base/status_or.h"

namespace ps::net {

// True for 0.0.0.0, :: and [::]: binds every address, dials none.
bool IsWildcardHost(const std::string& host);

// The host peers should dial for a listener bound to `listen_host`:
// `advertise_host` when given (it must not be a wildcard); else
// `listen_host` when it names one address; else (a wildcard) the first
// non-loopback address of this host's (or network namespace's) interfaces,
// IPv4 first (a `::` listener also takes IPv4), global IPv6 next, and the
// loopback address when there is nothing else. kInvalidArgument for a
// wildcard advertise_host.
StatusOr<std::string> AdvertisedHost(const std::string& listen_host,
                                     const std::string& advertise_host);

// "host:port", with an IPv6 host in brackets ("[fd00::1]:7000").
std::string JoinHostPort(const std::string& host, uint16_t port);

}  // namespace ps::net
