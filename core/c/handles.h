// What the C API's opaque handles (core/c/ps_xfer.h) are, and the helpers
// every entry point uses to turn a Status into a ps_xfer_status. Private to
// core/c/.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/batch.h"
#include "core/c/ps_xfer.h"
#include "core/context.h"
#include "core/endpoint.h"
#include "core/memory_region.h"
#include "core/registered_pool.h"
#include "core/remote_region.h"
#include "core/request.h"

// Each handle holds shared_ptrs to what it needs, declared so that a handle
// drops its own object before the context: the context stops only when its
// last handle is gone (the header's ownership rule).
struct ps_xfer_context {
  std::shared_ptr<ps::xfer::Context> context;
  std::string address;  // what ps_xfer_context_address hands out
};

struct ps_xfer_region {
  std::shared_ptr<ps::xfer::Context> context;
  std::shared_ptr<ps::xfer::MemoryRegion> region;
};

struct ps_xfer_endpoint {
  std::shared_ptr<ps::xfer::Context> context;
  std::shared_ptr<ps::xfer::Endpoint> endpoint;
};

struct ps_xfer_remote {
  std::shared_ptr<ps::xfer::Context> context;
  std::shared_ptr<ps::xfer::Endpoint> endpoint;
  ps::xfer::RemoteRegion region;
};

struct ps_xfer_request {
  std::shared_ptr<ps::xfer::Context> context;
  // A pending operation's transport lives in its endpoint.
  std::shared_ptr<ps::xfer::Endpoint> endpoint;
  // writev/readv: the segment list, converted, kept as long as the request
  // so that no transport can outlive it.
  std::vector<ps::xfer::Segment> segments;
  ps::xfer::Request request;
};

struct ps_xfer_batch {
  ps::xfer::Batch batch;
};

struct ps_xfer_pool {
  std::shared_ptr<ps::xfer::Context> context;
  std::unique_ptr<ps::xfer::RegisteredPool> pool;
};

namespace ps::xfer::c_api {

// Records `status` as this thread's last error (unless OK) and returns its
// code.
ps_xfer_status Report(const Status& status);

// PS_XFER_INVALID_ARGUMENT with "<function>: <what>".
ps_xfer_status InvalidArg(const char* function, const char* what);

// PS_XFER_OK for an access mask of known flags, else InvalidArg: checked
// before the mask reaches C++.
inline ps_xfer_status CheckAccess(const char* function, uint32_t access) {
  if ((access & ~kAllAccessFlags) == 0) return PS_XFER_OK;
  return InvalidArg(function,
                    "access has bits other than PS_XFER_REMOTE_* and "
                    "PS_XFER_NOTIFY_EVENTS");
}

// Runs an entry point's body, so that no C++ exception (bad_alloc from a
// string, say) crosses into C, where it would terminate the program. The
// body gets the entry point's name for its messages (inside a lambda,
// __func__ is "operator()").
template <typename Body>
ps_xfer_status Guard(const char* function, Body body) {
  try {
    return body(function);
  } catch (const std::bad_alloc&) {
    return Report(ResourceExhausted(std::string(function) + ": out of memory"));
  } catch (const std::exception& e) {
    return Report(Internal(std::string(function) + ": " + e.what()));
  } catch (...) {
    return Report(Internal(std::string(function) + ": unknown exception"));
  }
}

}  // namespace ps::xfer::c_api
