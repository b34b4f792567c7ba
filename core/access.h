// What a peer may do to a memory region. The owner always has full local
// access; these flags only grant remote operations. kNotifyEvents grants
// nothing: it asks for a notification (core/notification.h) at the owner
// whenever a put-with-notify stores a notify word in the region.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace ps::xfer {

enum Access : uint32_t {
  kLocalOnly = 0,
  kRemoteRead = 1u << 0,    // Get, ReadV
  kRemoteWrite = 1u << 1,   // Put, WriteV, PutWithNotify
  kRemoteAtomic = 1u << 2,  // FetchAdd64, CompareSwap64
  kRemoteAll = kRemoteRead | kRemoteWrite | kRemoteAtomic,
  // PutWithNotify into this region also queues a Notification at the owner
  // (Context::WaitNotification). Over verbs such a put takes three round
  // trips on the connection's bootstrap socket (verbs_transport.h).
  kNotifyEvents = 1u << 3,
  kAllAccessFlags = kRemoteAll | kNotifyEvents,
};

inline Access operator|(Access a, Access b) {
  return static_cast<Access>(static_cast<uint32_t>(a) | b);
}

// "read|write|atomic|notify-events", or "local-only".
std::string AccessToString(uint32_t access);

}  // namespace ps::xfer
