// StatusOr<T>: a T, or the Status that explains why there is none.
//
// Reading the value (value(), operator*, operator->) of an error is a
// programming error, checked: the process aborts with the status message on
// stderr rather than touch an empty value. Check ok() first, or use
// PS_ASSIGN_OR_RETURN.
//
// Thread safety: a value type, like T; one object may be read from several
// threads at once, written by one at a time.
#pragma once

#include <optional>
#include <utility>

#include "base/status.h"

namespace ps {

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Internal("StatusOr built from an OK status");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Precondition: ok(); checked (aborts with the status otherwise).
  T& value() & { return CheckedValue(); }
  const T& value() const& { return CheckedValue(); }
  T&& value() && { return std::move(CheckedValue()); }
  T& operator*() & { return CheckedValue(); }
  const T& operator*() const& { return CheckedValue(); }
  T* operator->() { return &CheckedValue(); }
  const T* operator->() const { return &CheckedValue(); }

 private:
  T& CheckedValue() {
    if (!status_.ok()) [[unlikely]] {
      internal::DieOnError("StatusOr::value()", status_);
    }
    return *value_;
  }
  const T& CheckedValue() const {
    if (!status_.ok()) [[unlikely]] {
      internal::DieOnError("StatusOr::value()", status_);
    }
    return *value_;
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace ps

#define PS_STATUS_CONCAT_INNER(a, b) a##b
#define PS_STATUS_CONCAT(a, b) PS_STATUS_CONCAT_INNER(a, b)

// PS_ASSIGN_OR_RETURN(auto region, ctx.Allocate(4096, kRemoteWrite));
#define PS_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto PS_STATUS_CONCAT(_ps_or_, __LINE__) = (expr);     \
  if (!PS_STATUS_CONCAT(_ps_or_, __LINE__).ok())         \
    return PS_STATUS_CONCAT(_ps_or_, __LINE__).status(); \
  lhs = std::move(PS_STATUS_CONCAT(_ps_or_, __LINE__)).value()
