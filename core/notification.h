// Notification: what the target of a put-with-notify learns, besides the
// notify word itself, when the word lies in a region registered with
// kNotifyEvents (core/access.h): who sent it, which word, and the value.
//
// A target reads them from its Context (Context::WaitNotification, which
// sleeps rather than spins, or PollNotification). The data of the put and
// the notify word are visible before the notification is: a reader who got
// a notification sees everything the put wrote.
//
// A plain value; any thread.
#pragma once

#include <cstdint>

namespace ps::xfer {

struct Notification {
  // The sending Context's instance() (each process life has its own).
  uint64_t sender = 0;
  // The region holding the notify word (MemoryRegion::id() at the target),
  // and the word's offset in it.
  uint64_t region_id = 0;
  uint64_t offset = 0;
  // The value the put stored in the notify word.
  uint64_t value = 0;
};

}  // namespace ps::xfer
