// How a failed Status crosses into Python: bindings call ThrowIfError (or
// ValueOrThrow); the translator RegisterStatusErrors installs raises the
// ps.errors class of the status code (python/ps/errors.py) with the status
// message. Everything a C++ call can report this way is an ordinary Python
// exception: nothing from a peer, a file or a caller crashes the
// interpreter.
//
// Thread-safe: StatusError is an immutable value.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "base/status.h"
#include "base/status_or.h"

namespace ps::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override {
    return status_.message().c_str();
  }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(StatusOr<T> result) {
  ThrowIfError(result.status());
  return std::move(result).value();
}

// Runs `call` (returning a Status) without the GIL, then raises its error:
// for every C++ call that may wait.
template <typename Call>
void Released(Call&& call) {
  Status status;
  {
    pybind11::gil_scoped_release release;
    status = call();
  }
  ThrowIfError(status);
}

// The same for a call returning StatusOr<T>: its value.
template <typename T, typename Call>
T ReleasedValue(Call&& call) {
  std::optional<StatusOr<T>> result;
  {
    pybind11::gil_scoped_release release;
    result.emplace(call());
  }
  return ValueOrThrow(std::move(*result));
}

// Raises ps.errors.InvalidArgumentError with `message` (for arguments the
// bindings check themselves, before any C++ call).
[[noreturn]] void ThrowInvalidArgument(std::string message);

// Installs the translator; call once from the module's init.
void RegisterStatusErrors();

}  // namespace ps::python
