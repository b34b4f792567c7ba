#include "core/internal/notification_ring.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <thread>

namespace ps::xfer::internal {
namespace {

constexpr uint64_t kMagic = 0x31474e4952544f4eull;  // "NOTRING1"
// Cell flags: a published event, or a claimed cell given up.
constexpr uint64_t kEvent = 1;
constexpr uint64_t kVoid = 2;

uint64_t Load(const uint64_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

// Waits on a futex word that other processes may share (no PRIVATE flag).
void FutexWait(uint32_t* word, uint32_t expected,
               std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1'000'000'000),
              static_cast<long>(timeout.count() % 1'000'000'000)};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

// The first 256 bytes of the ring: what never changes, then each
// contended word on its own line.
struct NotificationRing::Header {
  uint64_t magic;
  uint64_t capacity;
  alignas(64) uint64_t tail;  // the next position producers claim
  alignas(64) uint64_t head;  // the next position consumers take
  alignas(64) uint32_t wake;  // futex word: bumped after each publish
  uint32_t sleepers;          // consumers waiting on `wake`
};

struct NotificationRing::Cell {
  uint64_t sequence;
  uint64_t flags;
  uint64_t sender;
  uint64_t region_id;
  uint64_t offset;
  uint64_t value;
  uint64_t unused[2];
};

size_t NotificationRing::BytesFor(uint32_t capacity) {
  static_assert(sizeof(Header) == 256 && sizeof(Cell) == 64);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t raw = sizeof(Header) + size_t{capacity} * sizeof(Cell);
  return (raw + page - 1) / page * page;
}

StatusOr<std::unique_ptr<NotificationRing>> NotificationRing::Create(
    const std::string& name, uint32_t capacity) {
  if (capacity < 2 || capacity > kMaxCapacity ||
      (capacity & (capacity - 1)) != 0) {
    return InvalidArgument("notification capacity " + std::to_string(capacity) +
                           " is not a power of two from 2 to " +
                           std::to_string(kMaxCapacity));
  }
  std::unique_ptr<NotificationRing> ring(new NotificationRing());
  PS_ASSIGN_OR_RETURN(
      ring->memfd_,
      SealedMemfd::Create(name + "-notifications", BytesFor(capacity),
                          /*peers_may_write=*/true));
  ring->mapped_ = ring->memfd_.data;
  ring->bytes_ = ring->memfd_.bytes;
  ring->header_ = static_cast<Header*>(ring->mapped_);
  ring->cells_ = reinterpret_cast<Cell*>(ring->header_ + 1);
  ring->mask_ = capacity - 1;
  ring->header_->magic = kMagic;
  ring->header_->capacity = capacity;
  for (uint64_t i = 0; i < capacity; ++i) ring->cells_[i].sequence = i;
  return ring;
}

StatusOr<std::unique_ptr<NotificationRing>> NotificationRing::Attach(
    void* mapped, size_t bytes) {
  std::unique_ptr<NotificationRing> ring(new NotificationRing());
  ring->mapped_ = mapped;  // unmapped by the destructor from here on
  ring->bytes_ = bytes;
  const auto* h = static_cast<const Header*>(mapped);
  if (bytes < sizeof(Header) || h->magic != kMagic || h->capacity < 2 ||
      h->capacity > kMaxCapacity || (h->capacity & (h->capacity - 1)) != 0 ||
      BytesFor(static_cast<uint32_t>(h->capacity)) > bytes) {
    return InvalidArgument("the peer's notification ring (" +
                           std::to_string(bytes) +
                           " bytes) has no valid header");
  }
  ring->header_ = static_cast<Header*>(mapped);
  ring->cells_ = reinterpret_cast<Cell*>(ring->header_ + 1);
  // Read once: the peer cannot grow our view afterwards.
  ring->mask_ = h->capacity - 1;
  return ring;
}

NotificationRing::~NotificationRing() {
  if (mapped_ != nullptr) munmap(mapped_, bytes_);
}

StatusOr<uint64_t> NotificationRing::Claim(std::chrono::milliseconds wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + wait;
  uint32_t spins = 0;
  uint64_t position = __atomic_load_n(&header_->tail, __ATOMIC_RELAXED);
  for (;;) {
    Cell& cell = cells_[position & mask_];
    const int64_t diff = static_cast<int64_t>(Load(&cell.sequence) - position);
    if (diff == 0) {
      if (__atomic_compare_exchange_n(&header_->tail, &position, position + 1,
                                      true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        return position;
      }
      continue;  // `position` holds the tail another producer left
    }
    if (diff > 0) {  // another producer took it: look again
      position = __atomic_load_n(&header_->tail, __ATOMIC_RELAXED);
      continue;
    }
    // Full: the cell still holds an event of the previous lap.
    if (Clock::now() >= deadline) {
      return ResourceExhausted(
          "the notification queue is full (" + std::to_string(capacity()) +
          " events unread for " + std::to_string(wait.count()) +
          " ms): the target does not read its notifications");
    }
    if (++spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    position = __atomic_load_n(&header_->tail, __ATOMIC_RELAXED);
  }
}

void NotificationRing::Finish(uint64_t position, const Notification* n) {
  Cell& cell = cells_[position & mask_];
  if (n != nullptr) {
    cell.sender = n->sender;
    cell.region_id = n->region_id;
    cell.offset = n->offset;
    cell.value = n->value;
  }
  cell.flags = n != nullptr ? kEvent : kVoid;
  __atomic_store_n(&cell.sequence, position + 1, __ATOMIC_RELEASE);
  // Dekker with Wait: we store the cell then read `sleepers`; a consumer
  // stores `sleepers` then reads the cell. Sequentially consistent, so at
  // least one of us sees the other's store.
  __atomic_fetch_add(&header_->wake, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&header_->sleepers, __ATOMIC_SEQ_CST) != 0) {
    FutexWakeAll(&header_->wake);
  }
}

void NotificationRing::Publish(uint64_t position, const Notification& n) {
  Finish(position, &n);
}

void NotificationRing::Void(uint64_t position) { Finish(position, nullptr); }

bool NotificationRing::Take(Notification* out, bool* was_void) {
  uint64_t position = __atomic_load_n(&header_->head, __ATOMIC_RELAXED);
  for (;;) {
    Cell& cell = cells_[position & mask_];
    const int64_t diff =
        static_cast<int64_t>(Load(&cell.sequence) - (position + 1));
    if (diff < 0) return false;  // empty, or claimed and not yet published
    if (diff > 0) {              // another consumer took it
      position = __atomic_load_n(&header_->head, __ATOMIC_RELAXED);
      continue;
    }
    if (!__atomic_compare_exchange_n(&header_->head, &position, position + 1,
                                     true, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
      continue;
    }
    *was_void = cell.flags != kEvent;
    out->sender = cell.sender;
    out->region_id = cell.region_id;
    out->offset = cell.offset;
    out->value = cell.value;
    // Free for the producer of the next lap.
    __atomic_store_n(&cell.sequence, position + mask_ + 1, __ATOMIC_RELEASE);
    return true;
  }
}

std::optional<Notification> NotificationRing::Poll() {
  Notification n;
  bool was_void = false;
  while (Take(&n, &was_void)) {
    if (!was_void) return n;
  }
  return std::nullopt;
}

std::optional<Notification> NotificationRing::Wait(
    std::chrono::microseconds timeout) {
  using Clock = std::chrono::steady_clock;
  if (std::optional<Notification> n = Poll()) return n;
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    __atomic_fetch_add(&header_->sleepers, 1, __ATOMIC_SEQ_CST);
    const uint32_t seen = __atomic_load_n(&header_->wake, __ATOMIC_SEQ_CST);
    std::optional<Notification> n = Poll();
    const Clock::time_point now = Clock::now();
    if (!n.has_value() && now < deadline) {
      // Returns at once if a producer bumped `wake` since we read it.
      FutexWait(&header_->wake, seen, deadline - now);
      n = Poll();
    }
    __atomic_fetch_sub(&header_->sleepers, 1, __ATOMIC_SEQ_CST);
    if (n.has_value() || Clock::now() >= deadline) return n;
  }
}

}  // namespace ps::xfer::internal
