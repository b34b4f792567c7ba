// Spans over the NumPy arrays the bindings take, with the checks that turn a
// wrong array into a Python exception instead of a wild read or write:
// dtype (TypeError), C-contiguous layout, writability and size
// (InvalidArgumentError). Torch tensors reach here as NumPy views of the
// same memory (ps/_arrays.py), so these checks cover them too.
//
// The spans borrow the array's memory: callers keep the array referenced for
// as long as the span is used (for non-blocking calls, until they complete).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>

#include "python/src/status_error.h"

namespace ps::python {

namespace py = pybind11;

// The NumPy kind character and size of T (float32: 'f', 4).
template <typename T>
bool HasDtype(const py::array& a) {
  py::dtype want = py::dtype::of<T>();
  return a.dtype().kind() == want.kind() &&
         a.dtype().itemsize() == want.itemsize();
}

inline void CheckContiguous(const py::array& a, const char* name) {
  if (!(a.flags() & py::array::c_style)) {
    ThrowInvalidArgument(std::string(name) +
                         " must be C-contiguous (use numpy.ascontiguousarray "
                         "or tensor.contiguous())");
  }
}

template <typename T>
std::span<const T> InputSpan(const py::array& a, const char* name,
                             const char* dtype_name) {
  if (!HasDtype<T>(a)) {
    throw py::type_error(std::string(name) + " must have dtype " + dtype_name +
                         ", not " + std::string(py::str(a.dtype())));
  }
  CheckContiguous(a, name);
  return {static_cast<const T*>(a.data()), static_cast<size_t>(a.size())};
}

template <typename T>
std::span<T> OutputSpan(py::array& a, const char* name,
                        const char* dtype_name) {
  std::span<const T> in = InputSpan<T>(a, name, dtype_name);
  if (!a.writeable()) {
    ThrowInvalidArgument(std::string(name) + " is read-only");
  }
  return {const_cast<T*>(in.data()), in.size()};
}

inline std::span<const float> FloatInput(const py::array& a, const char* name) {
  return InputSpan<float>(a, name, "float32");
}
inline std::span<float> FloatOutput(py::array& a, const char* name) {
  return OutputSpan<float>(a, name, "float32");
}

// Keys: int64 or uint64 (the same 64 bits either way), one dimension.
inline std::span<const uint64_t> KeyInput(const py::array& a) {
  if (a.ndim() != 1) {
    ThrowInvalidArgument("keys must be one-dimensional, not " +
                         std::to_string(a.ndim()) + "-dimensional");
  }
  if (HasDtype<int64_t>(a)) {
    CheckContiguous(a, "keys");
    return {static_cast<const uint64_t*>(a.data()),
            static_cast<size_t>(a.size())};
  }
  return InputSpan<uint64_t>(a, "keys", "int64 or uint64");
}

// A vector moved into a new NumPy array without a copy (the array owns it).
template <typename T>
py::array_t<T> ToArray(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(
      owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(),
                        free_when_done);
}

}  // namespace ps::python
