// StatusOr<T>: a T, or the Status that explains why there is none.
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

  // Precondition: ok(). Accessing the value of an error is a programming bug.
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
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
