// ps._native.xfer, part one: Context (options from keyword arguments) and
// MemoryRegion, plus the argument checks both binding files use. The
// endpoint side is in xfer_endpoint_bindings.cc; lifetimes in
// xfer_handles.h; the friendly face in python/ps/xfer.py.
#include <pybind11/stl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/access.h"
#include "core/auth.h"
#include "core/context_environment.h"
#include "core/transport_name.h"
#include "python/src/bindings.h"
#include "python/src/status_error.h"
#include "python/src/xfer_handles.h"

namespace ps::python {

ContextHandle::~ContextHandle() {
  // Stops the listener and joins the progress threads; none of them calls
  // into Python, so the wait needs no GIL.
  WithoutGil([this] { context.reset(); });
  // Only now can no peer reach the registered arrays.
  pinned.clear();
}

ByteView ArrayBytes(const py::handle& buffer, bool writable, const char* name) {
  if (!py::isinstance<py::array>(buffer)) {
    throw py::type_error(
        std::string(name) +
        " must be a numpy array or a CPU torch tensor, not " +
        std::string(py::str(py::type::of(buffer).attr("__name__"))));
  }
  auto a = py::reinterpret_borrow<py::array>(buffer);
  if (!(a.flags() & py::array::c_style)) {
    ThrowInvalidArgument(std::string(name) +
                         " must be C-contiguous (use numpy.ascontiguousarray "
                         "or tensor.contiguous())");
  }
  if (writable && !a.writeable()) {
    ThrowInvalidArgument(std::string(name) +
                         " is read-only: it cannot receive data");
  }
  // data(), not mutable_data() (which refuses read-only arrays): a source
  // is only read.
  return {const_cast<void*>(a.data()), static_cast<size_t>(a.nbytes())};
}

uint64_t ByteOffset(int64_t value, const char* name) {
  if (value < 0) {
    throw StatusError(Status(
        StatusCode::kOutOfRange,
        std::string(name) + " " + std::to_string(value) + " is negative"));
  }
  return static_cast<uint64_t>(value);
}

uint64_t Word(const py::handle& value) {
  auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  // [0, 2**64) as it is, [-2**63, 0) as its two's complement; beyond both a
  // silent wrap would hide a mistake.
  unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
  if (!PyErr_Occurred()) return u;
  PyErr_Clear();
  long long s = PyLong_AsLongLong(index.ptr());
  if (!PyErr_Occurred()) return static_cast<uint64_t>(s);
  PyErr_Clear();
  throw StatusError(
      Status(StatusCode::kOutOfRange,
             std::string(py::str(index)) + " does not fit in a 64-bit word"));
}

namespace {

// (sender, region_id, offset, value): python/ps/xfer.py names the fields.
py::tuple NotificationTuple(const xfer::Notification& n) {
  return py::make_tuple(n.sender, n.region_id, n.offset, n.value);
}

std::shared_ptr<ContextHandle> MakeContext(
    std::string name, std::string listen_host, int listen_port,
    std::string advertise_host, const std::string& transport,
    int peer_timeout_ms, const py::bytes& secret,
    uint32_t notification_capacity, int copy_threads,
    int cpu_wakeup_latency_us) {
  if (listen_port < 0 || listen_port > 65535) {
    ThrowInvalidArgument("listen_port " + std::to_string(listen_port) +
                         " is not a port number (0 to 65535)");
  }
  xfer::ContextOptions o;
  o.name = std::move(name);
  o.listen_host = std::move(listen_host);
  o.listen_port = static_cast<uint16_t>(listen_port);
  o.advertise_host = std::move(advertise_host);
  StatusOr<xfer::TransportChoice> choice = xfer::TransportChoiceFromName(
      transport, {xfer::TransportChoice::kAuto, xfer::TransportChoice::kShm,
                  xfer::TransportChoice::kTcp, xfer::TransportChoice::kVerbs});
  if (!choice.ok()) {
    ThrowInvalidArgument("transport " + choice.status().message());
  }
  o.transport = *choice;
  o.peer_timeout_ms = peer_timeout_ms;
  o.notification_capacity = notification_capacity;
  o.copy_threads = copy_threads;
  o.cpu_wakeup_latency_us = cpu_wakeup_latency_us;
  std::string secret_bytes = secret;
  // No secret given: the environment's, as for the C++ processes.
  o.secret = ValueOrThrow(secret_bytes.empty()
                              ? xfer::ClusterSecret::Resolve("", environ)
                              : xfer::ClusterSecret::FromBytes(secret_bytes));
  // The Python entry point honours XFER_TRANSPORT and XFER_IB_* as the
  // programs do (core/context_environment.h).
  o = ValueOrThrow(xfer::ApplyEnvironment(std::move(o), environ));
  auto handle = std::make_shared<ContextHandle>();
  handle->peer_timeout_ms = peer_timeout_ms;
  handle->context = ValueOrThrow([&] {
    py::gil_scoped_release release;
    return xfer::Context::Create(std::move(o));
  }());
  return handle;
}

uint32_t AccessFlags(int64_t access) {
  if (access < 0 || (access & ~int64_t{xfer::kAllAccessFlags}) != 0) {
    ThrowInvalidArgument(
        "access " + std::to_string(access) +
        " is not a combination of READ, WRITE, ATOMIC and NOTIFY_EVENTS");
  }
  return static_cast<uint32_t>(access);
}

std::shared_ptr<RegionHandle> Allocate(
    const std::shared_ptr<ContextHandle>& self, int64_t length,
    int64_t access) {
  if (length <= 0) {
    ThrowInvalidArgument("a region needs a positive size, not " +
                         std::to_string(length));
  }
  auto r = std::make_shared<RegionHandle>();
  r->context = self;
  r->region = ValueOrThrow(self->context->Allocate(static_cast<size_t>(length),
                                                   AccessFlags(access)));
  return r;
}

std::shared_ptr<RegionHandle> Register(
    const std::shared_ptr<ContextHandle>& self, const py::object& array,
    int64_t access) {
  // Peers with write or atomic access write into it: it must be writable.
  const uint32_t flags = AccessFlags(access);
  ByteView bytes = ArrayBytes(
      array, (flags & (xfer::kRemoteWrite | xfer::kRemoteAtomic)) != 0,
      "array");
  auto r = std::make_shared<RegionHandle>();
  r->context = self;
  r->region =
      ValueOrThrow(self->context->Register(bytes.data, bytes.length, flags));
  r->array = array;
  self->pinned[r->region->id()] = array;
  return r;
}

void Deregister(ContextHandle& self, RegionHandle& r) {
  if (r.context.get() != &self) {
    ThrowInvalidArgument("region " + std::to_string(r.region->id()) +
                         " was not made by this context");
  }
  ThrowIfError(self.context->Deregister(*r.region));
  const uint64_t id = r.region->id();
  if (!self.pinned.contains(id)) return;
  // An operation that found the region before it was withdrawn holds the
  // region until its copy ends; only then may the array go. Bounded: an
  // operation stuck for longer than a peer timeout keeps the array pinned
  // until the context ends instead.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(self.peer_timeout_ms);
  bool idle = false;
  {
    py::gil_scoped_release release;
    while (!(idle = r.region.use_count() == 1) &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  // Found again: another thread may have changed the map meanwhile.
  if (idle) self.pinned.erase(id);
}

// The memory of an allocated region as a uint8 array that keeps the region
// (and so its context) alive; a registered region's own array.
py::object RegionArray(const std::shared_ptr<RegionHandle>& self) {
  if (self->array) return self->array;
  auto* owner = new std::shared_ptr<RegionHandle>(self);
  py::capsule keep(owner, [](void* p) {
    delete static_cast<std::shared_ptr<RegionHandle>*>(p);
  });
  return py::array_t<uint8_t>(static_cast<py::ssize_t>(self->region->size()),
                              static_cast<uint8_t*>(self->region->data()),
                              keep);
}

void BindContext(py::module_& m) {
  py::class_<ContextHandle, std::shared_ptr<ContextHandle>>(
      m, "Context", "core/context.h: this process's transfer context.")
      .def(py::init(&MakeContext), py::kw_only(), py::arg("name") = "xfer",
           py::arg("listen_host") = "127.0.0.1", py::arg("listen_port") = 0,
           py::arg("advertise_host") = "", py::arg("transport") = "auto",
           py::arg("peer_timeout_ms") = 10000, py::arg("secret") = py::bytes(),
           py::arg("notification_capacity") = 4096, py::arg("copy_threads") = 1,
           py::arg("cpu_wakeup_latency_us") = -1)
      .def_property_readonly(
          "name", [](const ContextHandle& c) { return c.context->name(); })
      .def_property_readonly(
          "address",
          [](const ContextHandle& c) { return c.context->address(); })
      .def_property_readonly(
          "instance",
          [](const ContextHandle& c) { return c.context->instance(); })
      .def("allocate", &Allocate, py::arg("length"), py::arg("access"))
      .def("register", &Register, py::arg("array"), py::arg("access"))
      .def("deregister", &Deregister, py::arg("region"))
      .def(
          "connect",
          [](const std::shared_ptr<ContextHandle>& self,
             const std::string& address) {
            auto e = std::make_shared<EndpointHandle>();
            e->context = self;
            e->endpoint = ValueOrThrow([&] {
              py::gil_scoped_release release;
              return self->context->Connect(address);
            }());
            return e;
          },
          py::arg("address"))
      .def("fence",
           [](ContextHandle& c) {
             Status s;
             {
               py::gil_scoped_release release;
               s = c.context->Fence();
             }
             ThrowIfError(s);
           })
      .def(
          "wait_notification",
          [](ContextHandle& c, int64_t timeout_us) -> py::object {
            if (timeout_us < 0) ThrowInvalidArgument("timeout is negative");
            StatusOr<xfer::Notification> n = [&] {
              py::gil_scoped_release release;
              return c.context->WaitNotification(
                  std::chrono::microseconds(timeout_us));
            }();
            if (n.status().Is(StatusCode::kTimeout)) return py::none();
            return NotificationTuple(ValueOrThrow(std::move(n)));
          },
          py::arg("timeout_us"))
      .def("poll_notification", [](ContextHandle& c) -> py::object {
        std::optional<xfer::Notification> n = c.context->PollNotification();
        if (!n.has_value()) return py::none();
        return NotificationTuple(*n);
      });
}

void BindRegion(py::module_& m) {
  py::class_<RegionHandle, std::shared_ptr<RegionHandle>>(
      m, "MemoryRegion", "core/memory_region.h: registered local memory.")
      .def_property_readonly(
          "id", [](const RegionHandle& r) { return r.region->id(); })
      .def_property_readonly(
          "key", [](const RegionHandle& r) { return r.region->key(); })
      .def_property_readonly(
          "size", [](const RegionHandle& r) { return r.region->size(); })
      .def_property_readonly(
          "access", [](const RegionHandle& r) { return r.region->access(); })
      .def_property_readonly(
          "memfd_backed",
          [](const RegionHandle& r) { return r.region->memfd_backed(); })
      .def_property_readonly("descriptor",
                             [](const RegionHandle& r) {
                               return py::bytes(r.region->descriptor());
                             })
      .def_property_readonly("array", &RegionArray)
      .def("__repr__", [](const RegionHandle& r) {
        return "<ps.xfer.MemoryRegion id=" + std::to_string(r.region->id()) +
               " size=" + std::to_string(r.region->size()) +
               " access=" + xfer::AccessToString(r.region->access()) + ">";
      });
}

}  // namespace

void BindXfer(py::module_ m) {
  // Classes before the functions that take or return them, so that
  // signatures in help() name them.
  BindRegion(m);
  BindXferEndpoint(m);
  BindContext(m);
  BindPool(m);
}

}  // namespace ps::python
