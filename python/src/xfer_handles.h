// The objects ps._native.xfer hands to Python, and the argument checks its
// two binding files (xfer_bindings.cc: Context and MemoryRegion;
// xfer_endpoint_bindings.cc: Endpoint, RemoteRegion, Request, Batch) share.
//
// Lifetimes follow the C++ rules (core/*.h) whatever order Python's garbage
// collector picks:
// - ContextHandle owns the xfer::Context. Every region and endpoint made from
//   it holds a shared_ptr to it, so the C++ Context (its listener and
//   progress threads) lives until the Python Context and everything made from
//   it are gone. Then it is destroyed with the GIL released (it joins
//   threads), and only after that are the registered arrays let go.
// - A registered array is pinned by the context (not by the Python region
//   object) until deregister() or the context's end: peers may write into it
//   for as long as it is registered.
// - RemoteRegionHandle holds its EndpointHandle: an xfer::RemoteRegion points
//   at the endpoint that imported it.
// - RequestHandle and BatchHandle hold every array and remote region their
//   operations name until those completed (core/endpoint.h, core/batch.h).
//
// Everything here is touched with the GIL held, except the xfer calls the
// bindings make inside a py::gil_scoped_release.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "core/batch.h"
#include "core/context.h"
#include "core/endpoint.h"
#include "core/memory_region.h"
#include "core/remote_region.h"
#include "core/request.h"
#include "core/segment.h"

namespace ps::python {

namespace py = pybind11;

// Runs `fn` without the GIL when this thread holds it and the interpreter is
// not shutting down (a thread that gives the GIL up during finalization may
// never get it back). For the waits in destructors.
inline bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

template <typename Fn>
void WithoutGil(Fn&& fn) {
  if (PyGILState_Check() && !PythonFinalizing()) {
    py::gil_scoped_release release;
    fn();
  } else {
    fn();
  }
}

struct ContextHandle {
  ~ContextHandle();

  std::unique_ptr<xfer::Context> context;
  int peer_timeout_ms = 0;
  // Registered arrays by region id (see the file comment).
  std::unordered_map<uint64_t, py::object> pinned;
};

struct RegionHandle {
  std::shared_ptr<ContextHandle> context;
  std::shared_ptr<xfer::MemoryRegion> region;
  // The registered array (Register); none for Allocate's memory.
  py::object array;
};

struct EndpointHandle {
  std::shared_ptr<ContextHandle> context;
  std::shared_ptr<xfer::Endpoint> endpoint;
};

struct RemoteRegionHandle {
  std::shared_ptr<EndpointHandle> endpoint;
  xfer::RemoteRegion remote;  // at a fixed address: ops point at it
};

struct BatchHandle {
  xfer::Batch batch;
  std::vector<py::object> arrays;
  std::vector<std::shared_ptr<RemoteRegionHandle>> remotes;
  // fetch_add's previous values; a deque, so that adding one moves none.
  std::deque<uint64_t> results;
};

struct RequestHandle {
  // Waits (GIL released) for an unfinished operation: its buffers are
  // released only after it no longer touches them.
  ~RequestHandle();
  // Marks the request finished with `status`; drops what it kept.
  void Finish(Status status);
  // Raises the failure, or returns the atomic's previous value (or None).
  py::object Outcome() const;

  xfer::Request request;
  std::optional<Status> done;
  std::vector<py::object> arrays;
  std::vector<std::shared_ptr<RemoteRegionHandle>> remotes;
  std::shared_ptr<BatchHandle> batch;
  std::vector<xfer::Segment> segments;  // writev/readv
  std::unique_ptr<uint64_t> result;     // atomics: the previous value
};

// `length` bytes at `data`: one buffer argument.
struct ByteView {
  void* data;
  size_t length;
};

// The bytes of `buffer`, a C-contiguous NumPy array of any dtype: TypeError
// for anything else, InvalidArgumentError when it is not C-contiguous, or
// (`writable`: it is a destination) read-only.
ByteView ArrayBytes(const py::handle& buffer, bool writable, const char* name);

// An offset or length from Python: OutOfRangeError when negative.
uint64_t ByteOffset(int64_t value, const char* name);

// An integer (a Python int, a NumPy integer: anything with __index__) in
// [-2**63, 2**64) as a 64-bit word, negative ones as two's complement (so -1
// adds "minus one"); TypeError for a non-integer, OutOfRangeError beyond.
uint64_t Word(const py::handle& value);

void BindXferEndpoint(py::module_& m);
// RegisteredPool (xfer_pool_bindings.cc).
void BindPool(py::module_& m);

}  // namespace ps::python
