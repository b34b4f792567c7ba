// internal::NotificationRing: a Context's queue of notifications
// (core/notification.h), in memory that the owner and its same-host peers
// share. Producers are the owner's stream servers (for tcp and streamed
// puts) and same-host peers that mapped the ring (for mapped puts): each
// claims a cell, writes the event after the put's data and notify word, and
// publishes it. Consumers are the owner's threads in WaitNotification.
//
// The ring is a bounded multi-producer multi-consumer queue of 64-byte
// cells, each with a sequence word (D. Vyukov's design): a cell at position
// p is free for the producer of p when its sequence is p, readable by the
// consumer of p when it is p + 1. A producer claims a cell before it moves
// the data, so a full ring refuses the put before anything is written, and
// a claimed cell is always published or voided (a void cell is skipped).
//
// Sleeping: a consumer that finds the ring empty registers as a sleeper,
// checks again and waits on a futex word in the shared memory (not a
// process-private futex: peers in other processes wake it). A producer
// bumps the word after publishing and wakes only when sleepers are
// registered, so a busy ring costs no system calls.
//
// A hostile same-host peer can write the shared memory: it can make the ring
// lose or invent events, never make a reader touch memory outside it
// (positions are masked, and nothing read from a cell is an address).
//
// Thread-safety: any number of producers and consumers, in any processes
// that map the ring, at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "base/status_or.h"
#include "core/context.h"
#include "core/internal/sealed_memfd.h"
#include "core/notification.h"

namespace ps::xfer::internal {

class NotificationRing {
 public:
  static constexpr uint32_t kMaxCapacity =
      ContextOptions::kMaxNotificationCapacity;

  // A new ring of `capacity` cells (a power of two, 2 to kMaxCapacity) in a
  // sealed memfd that same-host peers may map writable (`memfd()`).
  static StatusOr<std::unique_ptr<NotificationRing>> Create(
      const std::string& name, uint32_t capacity);
  // The ring in `bytes` of mapped memory that another process created (the
  // mapping is this object's: it is unmapped with it). kInvalidArgument when
  // the size or the header is no ring's.
  static StatusOr<std::unique_ptr<NotificationRing>> Attach(void* mapped,
                                                            size_t bytes);
  ~NotificationRing();
  NotificationRing(const NotificationRing&) = delete;
  NotificationRing& operator=(const NotificationRing&) = delete;

  // Bytes of shared memory for `capacity` cells.
  static size_t BytesFor(uint32_t capacity);
  // The descriptor a same-host peer maps (owner side only; -1 otherwise).
  int memfd() const { return memfd_.fd.valid() ? memfd_.fd.get() : -1; }
  size_t bytes() const { return bytes_; }
  uint32_t capacity() const { return mask_ + 1; }

  // Producer: claims the next cell, waiting while the ring is full for at
  // most `wait` (kResourceExhausted after that, naming the unread events).
  StatusOr<uint64_t> Claim(std::chrono::milliseconds wait);
  // Producer: fills the claimed cell and makes it readable, waking sleepers.
  void Publish(uint64_t position, const Notification& n);
  // Producer: gives up a claimed cell (the put failed); readers skip it.
  void Void(uint64_t position);

  // Consumer: the next notification, if one is readable now.
  std::optional<Notification> Poll();
  // Consumer: the next notification, sleeping up to `timeout` for one;
  // nullopt when none came.
  std::optional<Notification> Wait(std::chrono::microseconds timeout);

 private:
  struct Header;
  struct Cell;
  NotificationRing() = default;
  // Takes the next readable cell (true: *out and *was_void set), or finds
  // none (false).
  bool Take(Notification* out, bool* was_void);
  // Publishes the claimed cell: the event `n`, or void when null.
  void Finish(uint64_t position, const Notification* n);

  SealedMemfd memfd_;  // the owner's; empty for an attached ring
  void* mapped_ = nullptr;
  size_t bytes_ = 0;
  Header* header_ = nullptr;
  Cell* cells_ = nullptr;
  uint64_t mask_ = 0;
};

}  // namespace ps::xfer::internal
