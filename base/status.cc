#include "base/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>

namespace ps {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotRegistered:
      return "not registered";
    case StatusCode::kAccessDenied:
      return "access denied";
    case StatusCode::kInvalidKey:
      return "invalid key";
    case StatusCode::kOutOfRange:
      return "out of range";
    case StatusCode::kStaleDescriptor:
      return "stale descriptor";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kPeerLost:
      return "peer lost";
    case StatusCode::kNetwork:
      return "network error";
    case StatusCode::kNotInitialized:
      return "not initialized";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kIOError:
      return "I/O error";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kNotSupported:
      return "not supported";
    case StatusCode::kInternal:
      return "internal error";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::move(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  }
  return *this;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return ok() ? kEmpty : state_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(state_->code));
  if (!state_->message.empty()) {
    out += ": ";
    out += state_->message;
  }
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  std::string message(context);
  message += ": ";
  message += state_->message;
  return Status(state_->code, std::move(message));
}

#define PS_DEFINE_STATUS_MAKER(Name, Code)               \
  Status Name(std::string message) {                     \
    return Status(StatusCode::Code, std::move(message)); \
  }
PS_DEFINE_STATUS_MAKER(InvalidArgument, kInvalidArgument)
PS_DEFINE_STATUS_MAKER(NotRegistered, kNotRegistered)
PS_DEFINE_STATUS_MAKER(AccessDenied, kAccessDenied)
PS_DEFINE_STATUS_MAKER(InvalidKey, kInvalidKey)
PS_DEFINE_STATUS_MAKER(OutOfRange, kOutOfRange)
PS_DEFINE_STATUS_MAKER(StaleDescriptor, kStaleDescriptor)
PS_DEFINE_STATUS_MAKER(Timeout, kTimeout)
PS_DEFINE_STATUS_MAKER(PeerLost, kPeerLost)
PS_DEFINE_STATUS_MAKER(NetworkError, kNetwork)
PS_DEFINE_STATUS_MAKER(NotInitialized, kNotInitialized)
PS_DEFINE_STATUS_MAKER(Corruption, kCorruption)
PS_DEFINE_STATUS_MAKER(NotFound, kNotFound)
PS_DEFINE_STATUS_MAKER(IOError, kIOError)
PS_DEFINE_STATUS_MAKER(ResourceExhausted, kResourceExhausted)
PS_DEFINE_STATUS_MAKER(NotSupported, kNotSupported)
PS_DEFINE_STATUS_MAKER(Internal, kInternal)
PS_DEFINE_STATUS_MAKER(Unauthenticated, kUnauthenticated)
PS_DEFINE_STATUS_MAKER(Cancelled, kCancelled)
#undef PS_DEFINE_STATUS_MAKER

Status ErrnoStatus(StatusCode code, std::string_view what, int err) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Status(code, std::move(message));
}

std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << s.ToString();
}

namespace internal {

void DieOnError(std::string_view what, const Status& status) {
  std::fprintf(stderr, "%.*s on an error: %s\n", static_cast<int>(what.size()),
               what.data(), status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal

}  // namespace ps
