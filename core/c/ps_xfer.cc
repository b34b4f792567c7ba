// The C API (core/c/ps_xfer.h), part one: errors, contexts, regions,
// endpoints and imported regions. The operations are in ps_xfer_ops.cc.
#include "core/c/ps_xfer.h"

#include <unistd.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "core/access.h"
#include "core/auth.h"
#include "core/c/handles.h"
#include "core/context_environment.h"
#include "core/transport_kind.h"

namespace ps::xfer::c_api {
namespace {

// The header promises the same numbers as StatusCode: a code from C++ is
// passed through with a cast.
#define PS_XFER_SAME_CODE(c_name, cc_name) \
  static_assert(c_name == static_cast<int>(StatusCode::cc_name))
PS_XFER_SAME_CODE(PS_XFER_OK, kOk);
PS_XFER_SAME_CODE(PS_XFER_INVALID_ARGUMENT, kInvalidArgument);
PS_XFER_SAME_CODE(PS_XFER_NOT_REGISTERED, kNotRegistered);
PS_XFER_SAME_CODE(PS_XFER_ACCESS_DENIED, kAccessDenied);
PS_XFER_SAME_CODE(PS_XFER_INVALID_KEY, kInvalidKey);
PS_XFER_SAME_CODE(PS_XFER_OUT_OF_RANGE, kOutOfRange);
PS_XFER_SAME_CODE(PS_XFER_STALE_DESCRIPTOR, kStaleDescriptor);
PS_XFER_SAME_CODE(PS_XFER_TIMEOUT, kTimeout);
PS_XFER_SAME_CODE(PS_XFER_PEER_LOST, kPeerLost);
PS_XFER_SAME_CODE(PS_XFER_NETWORK, kNetwork);
PS_XFER_SAME_CODE(PS_XFER_NOT_INITIALIZED, kNotInitialized);
PS_XFER_SAME_CODE(PS_XFER_CORRUPTION, kCorruption);
PS_XFER_SAME_CODE(PS_XFER_NOT_FOUND, kNotFound);
PS_XFER_SAME_CODE(PS_XFER_IO_ERROR, kIOError);
PS_XFER_SAME_CODE(PS_XFER_RESOURCE_EXHAUSTED, kResourceExhausted);
PS_XFER_SAME_CODE(PS_XFER_NOT_SUPPORTED, kNotSupported);
PS_XFER_SAME_CODE(PS_XFER_INTERNAL, kInternal);
PS_XFER_SAME_CODE(PS_XFER_UNAUTHENTICATED, kUnauthenticated);
PS_XFER_SAME_CODE(PS_XFER_CANCELLED, kCancelled);
#undef PS_XFER_SAME_CODE
// A code added to StatusCode must be added to the header too.
static_assert(PS_XFER_CANCELLED == static_cast<int>(kLastStatusCode));

static_assert(static_cast<uint32_t>(PS_XFER_REMOTE_READ) == kRemoteRead);
static_assert(static_cast<uint32_t>(PS_XFER_REMOTE_WRITE) == kRemoteWrite);
static_assert(static_cast<uint32_t>(PS_XFER_REMOTE_ATOMIC) == kRemoteAtomic);
static_assert(static_cast<uint32_t>(PS_XFER_REMOTE_ALL) == kRemoteAll);
static_assert(static_cast<uint32_t>(PS_XFER_NOTIFY_EVENTS) == kNotifyEvents);

static_assert(PS_XFER_TRANSPORT_AUTO ==
              static_cast<int>(TransportChoice::kAuto));
static_assert(PS_XFER_TRANSPORT_SHM == static_cast<int>(TransportChoice::kShm));
static_assert(PS_XFER_TRANSPORT_TCP == static_cast<int>(TransportChoice::kTcp));
static_assert(PS_XFER_TRANSPORT_VERBS ==
              static_cast<int>(TransportChoice::kVerbs));

// The message of this thread's last failure. Per thread, like errno: it is
// the C form of the Status a C++ caller would get back, not shared state,
// and a thread reading it never sees another thread's failure.
thread_local std::string last_error;

std::string OrEmpty(const char* s) { return s != nullptr ? s : ""; }

// Allocate and Register differ only in the C++ call.
template <typename Make>
ps_xfer_status NewRegion(const char* function, ps_xfer_context* context,
                         uint32_t access, ps_xfer_region** out, Make make) {
  return Guard(function, [&](const char*) {
    if (out == nullptr) return InvalidArg(function, "out is NULL");
    *out = nullptr;
    if (context == nullptr) return InvalidArg(function, "context is NULL");
    if (ps_xfer_status s = CheckAccess(function, access); s != PS_XFER_OK) {
      return s;
    }
    auto region = make(*context->context);
    if (!region.ok()) return Report(region.status());
    auto handle = std::make_unique<ps_xfer_region>();
    handle->context = context->context;
    handle->region = std::move(*region);
    *out = handle.release();
    return PS_XFER_OK;
  });
}

}  // namespace

ps_xfer_status Report(const Status& status) {
  if (status.ok()) return PS_XFER_OK;
  // Assigned in place: a failure to allocate the message must not hide the
  // code (the string keeps its old text then).
  try {
    last_error = status.ToString();
  } catch (...) {
  }
  return static_cast<ps_xfer_status>(status.code());
}

ps_xfer_status InvalidArg(const char* function, const char* what) {
  // Called outside Guard by the accessors: nothing may escape.
  try {
    return Report(InvalidArgument(std::string(function) + ": " + what));
  } catch (...) {
    return PS_XFER_INVALID_ARGUMENT;
  }
}

}  // namespace ps::xfer::c_api

using ps::xfer::c_api::Guard;
using ps::xfer::c_api::InvalidArg;
using ps::xfer::c_api::NewRegion;
using ps::xfer::c_api::OrEmpty;
using ps::xfer::c_api::Report;

extern "C" {

const char* ps_xfer_strerror(int status) {
  // StatusCodeName returns string literals, so data() is NUL-terminated.
  return ps::StatusCodeName(static_cast<ps::StatusCode>(status)).data();
}

const char* ps_xfer_last_error(void) {
  return ps::xfer::c_api::last_error.c_str();
}

ps_xfer_status ps_xfer_context_options_init(ps_xfer_context_options* options) {
  return Guard(__func__, [&](const char* fn) {
    if (options == nullptr) return InvalidArg(fn, "options is NULL");
    // The C++ defaults themselves, from one ContextOptions that is never
    // destroyed, so that the strings handed out stay valid for the whole
    // program (also in atexit handlers).
    static const ps::xfer::ContextOptions* const defaults =
        new ps::xfer::ContextOptions();
    *options = ps_xfer_context_options{};
    options->name = defaults->name.c_str();
    options->listen_host = defaults->listen_host.c_str();
    options->listen_port = defaults->listen_port;
    options->advertise_host = nullptr;  // "": derived, as in C++
    options->transport = static_cast<ps_xfer_transport>(defaults->transport);
    options->peer_timeout_ms = defaults->peer_timeout_ms;
    options->secret = nullptr;
    options->secret_length = 0;
    options->ib_device = nullptr;
    options->ib_port = defaults->ib_port;
    options->ib_gid_index = defaults->ib_gid_index;
    options->notification_capacity = defaults->notification_capacity;
    options->copy_threads = defaults->copy_threads;
    options->cpu_wakeup_latency_us = defaults->cpu_wakeup_latency_us;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_context_create(const ps_xfer_context_options* options,
                                      ps_xfer_context** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out == nullptr) return InvalidArg(fn, "out is NULL");
    *out = nullptr;
    if (options == nullptr) return InvalidArg(fn, "options is NULL");
    // A C caller can store any int in the enum, but C++ may not load one
    // outside the enumerators as the enum (UBSan's "invalid value"): the
    // field is read as its underlying integer.
    std::underlying_type_t<ps_xfer_transport> transport;
    static_assert(sizeof transport == sizeof options->transport);
    std::memcpy(&transport, &options->transport, sizeof transport);
    // As unsigned, a negative number is out of range too.
    if (static_cast<unsigned>(transport) > PS_XFER_TRANSPORT_VERBS) {
      return InvalidArg(fn, "unknown transport");
    }
    if (options->secret == nullptr && options->secret_length != 0) {
      return InvalidArg(fn, "secret is NULL but secret_length is not 0");
    }
    ps::xfer::ContextOptions o;
    if (options->name != nullptr) o.name = options->name;
    if (options->listen_host != nullptr) o.listen_host = options->listen_host;
    o.listen_port = options->listen_port;
    o.advertise_host = OrEmpty(options->advertise_host);
    o.transport = static_cast<ps::xfer::TransportChoice>(transport);
    o.peer_timeout_ms = options->peer_timeout_ms;
    if (options->secret_length != 0) {
      auto secret = ps::xfer::ClusterSecret::FromBytes(std::string(
          static_cast<const char*>(options->secret), options->secret_length));
      if (!secret.ok()) return Report(secret.status());
      o.secret = *secret;
    }
    o.ib_device = OrEmpty(options->ib_device);
    o.ib_port = options->ib_port;
    o.ib_gid_index = options->ib_gid_index;
    if (options->notification_capacity != 0) {
      o.notification_capacity = options->notification_capacity;
    }
    o.copy_threads = options->copy_threads;
    o.cpu_wakeup_latency_us = options->cpu_wakeup_latency_us;
    // The C API is an entry point: it honours XFER_TRANSPORT and XFER_IB_*
    // as ps_xfer.h documents (core/context_environment.h).
    auto with_environment = ps::xfer::ApplyEnvironment(std::move(o), environ);
    if (!with_environment.ok()) return Report(with_environment.status());
    auto context = ps::xfer::Context::Create(std::move(*with_environment));
    if (!context.ok()) return Report(context.status());
    auto handle = std::make_unique<ps_xfer_context>();
    handle->address = (*context)->address();
    handle->context = std::move(*context);
    *out = handle.release();
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_context_destroy(ps_xfer_context* context) {
  return Guard(__func__, [&](const char*) {
    delete context;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_context_address(const ps_xfer_context* context,
                                       const char** address) {
  if (address == nullptr) return InvalidArg(__func__, "address is NULL");
  *address = nullptr;
  if (context == nullptr) return InvalidArg(__func__, "context is NULL");
  *address = context->address.c_str();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_context_fence(ps_xfer_context* context) {
  return Guard(__func__, [&](const char* fn) {
    if (context == nullptr) return InvalidArg(fn, "context is NULL");
    return Report(context->context->Fence());
  });
}

ps_xfer_status ps_xfer_allocate(ps_xfer_context* context, size_t length,
                                uint32_t access, ps_xfer_region** out) {
  return NewRegion(__func__, context, access, out, [&](ps::xfer::Context& c) {
    return c.Allocate(length, access);
  });
}

ps_xfer_status ps_xfer_register(ps_xfer_context* context, void* data,
                                size_t length, uint32_t access,
                                ps_xfer_region** out) {
  if (data == nullptr && out != nullptr) *out = nullptr;
  if (data == nullptr) return InvalidArg(__func__, "data is NULL");
  return NewRegion(__func__, context, access, out, [&](ps::xfer::Context& c) {
    return c.Register(data, length, access);
  });
}

ps_xfer_status ps_xfer_deregister(ps_xfer_context* context,
                                  ps_xfer_region* region) {
  return Guard(__func__, [&](const char* fn) {
    if (region == nullptr) return InvalidArg(fn, "region is NULL");
    if (context == nullptr) return InvalidArg(fn, "context is NULL");
    if (region->context != context->context) {
      // The caller's mistake changed nothing: the handle stays theirs.
      return InvalidArg(fn, "the region belongs to another context");
    }
    // From here the handle is freed whatever happens, as the header says.
    std::unique_ptr<ps_xfer_region> owned(region);
    return Report(context->context->Deregister(*owned->region));
  });
}

ps_xfer_status ps_xfer_region_release(ps_xfer_region* region) {
  return Guard(__func__, [&](const char*) {
    delete region;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_region_data(const ps_xfer_region* region, void** data) {
  if (data == nullptr) return InvalidArg(__func__, "data is NULL");
  *data = nullptr;
  if (region == nullptr) return InvalidArg(__func__, "region is NULL");
  *data = region->region->data();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_region_size(const ps_xfer_region* region, size_t* size) {
  if (size == nullptr) return InvalidArg(__func__, "size is NULL");
  *size = 0;
  if (region == nullptr) return InvalidArg(__func__, "region is NULL");
  *size = region->region->size();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_region_key(const ps_xfer_region* region, uint64_t* key) {
  if (key == nullptr) return InvalidArg(__func__, "key is NULL");
  *key = 0;
  if (region == nullptr) return InvalidArg(__func__, "region is NULL");
  *key = region->region->key();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_region_descriptor(const ps_xfer_region* region,
                                         const void** data, size_t* length) {
  if (data == nullptr || length == nullptr) {
    return InvalidArg(__func__, "data or length is NULL");
  }
  *data = nullptr;
  *length = 0;
  if (region == nullptr) return InvalidArg(__func__, "region is NULL");
  const std::string& d = region->region->descriptor();
  *data = d.data();
  *length = d.size();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_connect(ps_xfer_context* context, const char* address,
                               ps_xfer_endpoint** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out == nullptr) return InvalidArg(fn, "out is NULL");
    *out = nullptr;
    if (context == nullptr) return InvalidArg(fn, "context is NULL");
    if (address == nullptr) return InvalidArg(fn, "address is NULL");
    auto endpoint = context->context->Connect(address);
    if (!endpoint.ok()) return Report(endpoint.status());
    auto handle = std::make_unique<ps_xfer_endpoint>();
    handle->context = context->context;
    handle->endpoint = std::move(*endpoint);
    *out = handle.release();
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_endpoint_destroy(ps_xfer_endpoint* endpoint) {
  return Guard(__func__, [&](const char*) {
    delete endpoint;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_endpoint_transport(const ps_xfer_endpoint* endpoint,
                                          ps_xfer_transport* transport) {
  if (transport == nullptr) return InvalidArg(__func__, "transport is NULL");
  *transport = PS_XFER_TRANSPORT_AUTO;
  if (endpoint == nullptr) return InvalidArg(__func__, "endpoint is NULL");
  switch (endpoint->endpoint->transport()) {
    case ps::xfer::TransportKind::kShm:
      *transport = PS_XFER_TRANSPORT_SHM;
      break;
    case ps::xfer::TransportKind::kTcp:
      *transport = PS_XFER_TRANSPORT_TCP;
      break;
    case ps::xfer::TransportKind::kVerbs:
      *transport = PS_XFER_TRANSPORT_VERBS;
      break;
  }
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_flush(ps_xfer_endpoint* endpoint) {
  return Guard(__func__, [&](const char* fn) {
    if (endpoint == nullptr) return InvalidArg(fn, "endpoint is NULL");
    return Report(endpoint->endpoint->Flush());
  });
}

ps_xfer_status ps_xfer_import(ps_xfer_endpoint* endpoint,
                              const void* descriptor, size_t length,
                              ps_xfer_remote** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out == nullptr) return InvalidArg(fn, "out is NULL");
    *out = nullptr;
    if (endpoint == nullptr) return InvalidArg(fn, "endpoint is NULL");
    if (descriptor == nullptr) {
      return InvalidArg(fn, "descriptor is NULL");
    }
    auto region = endpoint->endpoint->Import(
        std::string_view(static_cast<const char*>(descriptor), length));
    if (!region.ok()) return Report(region.status());
    auto handle = std::make_unique<ps_xfer_remote>();
    handle->context = endpoint->context;
    handle->endpoint = endpoint->endpoint;
    handle->region = std::move(*region);
    *out = handle.release();
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_remote_destroy(ps_xfer_remote* remote) {
  return Guard(__func__, [&](const char*) {
    delete remote;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_remote_size(const ps_xfer_remote* remote,
                                   uint64_t* size) {
  if (size == nullptr) return InvalidArg(__func__, "size is NULL");
  *size = 0;
  if (remote == nullptr) return InvalidArg(__func__, "remote is NULL");
  *size = remote->region.size();
  return PS_XFER_OK;
}

}  // extern "C"
