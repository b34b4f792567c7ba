// Status: the outcome of an operation that can fail for reasons outside the
// program's control (a peer, a file, a flag, a user). Every such failure is a
// value with a code a caller can branch on and a message a person can act on,
// e.g. "remote region 7 on worker-2 is not registered".
//
// A Status is one pointer wide; the OK status allocates nothing, so returning
// Status on hot paths costs a register.
//
// Thread safety: a Status is an immutable value (its state is owned, never
// shared); distinct copies may be used from any threads, one object from
// several threads only for reading.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace ps {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed
  kNotRegistered,      // the memory region does not exist (or no longer)
  kAccessDenied,       // the region does not allow this access
  kInvalidKey,         // the remote key does not match the region
  kOutOfRange,         // offset/length outside the region, or row out of table
  kStaleDescriptor,    // the descriptor came from an earlier life of the peer
  kTimeout,            // no answer within the configured time
  kPeerLost,           // the peer closed, crashed or its connection broke
  kNetwork,            // a socket-level failure that is not a lost peer
  kNotInitialized,     // the object was used before it was set up
  kCorruption,         // data failed validation (checksum, format)
  kNotFound,           // a named thing (file, key, checkpoint) does not exist
  kIOError,            // a file-system or device error
  kResourceExhausted,  // a bounded resource (slots, memory) is used up
  kNotSupported,       // the feature is not built or not available here
  kInternal,           // a bug in this program; report it
  kUnauthenticated,    // the peer did not prove it holds the cluster secret
  kCancelled,          // given up because this process is stopping
};

// The largest code: a code read off the wire above it is invalid.
inline constexpr StatusCode kLastStatusCode = StatusCode::kCancelled;

// The stable, lower-case name of a code ("out of range").
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;  // OK
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  // The message alone, without the code name; empty for OK.
  const std::string& message() const;
  // "out of range: offset 4096 + 8 is past the end of region 3 (4096 bytes)".
  std::string ToString() const;

  // Prefixes context to the message ("checkpoint 12: " + message), keeping
  // the code. Returns a copy; OK stays OK.
  Status WithContext(std::string_view context) const;

  bool Is(StatusCode c) const { return code() == c; }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

// Shorthand constructors, one per code: InvalidArgument("bad flag --x").
Status InvalidArgument(std::string message);
Status NotRegistered(std::string message);
Status AccessDenied(std::string message);
Status InvalidKey(std::string message);
Status OutOfRange(std::string message);
Status StaleDescriptor(std::string message);
Status Timeout(std::string message);
Status PeerLost(std::string message);
Status NetworkError(std::string message);
Status NotInitialized(std::string message);
Status Corruption(std::string message);
Status NotFound(std::string message);
Status IOError(std::string message);
Status ResourceExhausted(std::string message);
Status NotSupported(std::string message);
Status Internal(std::string message);
Status Unauthenticated(std::string message);
Status Cancelled(std::string message);

// An IOError or NetworkError built from errno: "<what>: <strerror(err)>".
Status ErrnoStatus(StatusCode code, std::string_view what, int err);

std::ostream& operator<<(std::ostream& os, const Status& s);

namespace internal {
// Prints "`what` on an error: <status>" to stderr and aborts: for our own
// programming errors only (a StatusOr's value read without checking ok()).
[[noreturn]] void DieOnError(std::string_view what, const Status& status);
}  // namespace internal

}  // namespace ps

// Returns from the enclosing function if `expr` yields a non-OK Status.
#define PS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::ps::Status _ps_status = (expr);        \
    if (!_ps_status.ok()) return _ps_status; \
  } while (0)
