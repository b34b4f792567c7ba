// ps._native.xfer, part two: Endpoint (blocking and post_* forms), its
// RemoteRegions, Request and Batch. Every transfer, wait and flush runs with
// the GIL released; the arrays and remote regions an operation names are
// held by its Request (or Batch) until it completed (xfer_handles.h).
//
// The blocking forms are the post_* forms waited for, as in core/endpoint.cc.
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "core/access.h"
#include "core/transport_kind.h"
#include "python/src/status_error.h"
#include "python/src/xfer_handles.h"

namespace ps::python {

RequestHandle::~RequestHandle() {
  // Its status has no one left to read it.
  if (!done) WithoutGil([this] { (void)request.Wait(); });
}

void RequestHandle::Finish(Status status) {
  if (done) return;  // another thread's wait got there first
  done = std::move(status);
  arrays.clear();
  remotes.clear();
  batch.reset();
}

py::object RequestHandle::Outcome() const {
  if (!done->ok()) throw StatusError(*done);
  if (result) return py::int_(*result);
  return py::none();
}

namespace {

using RequestPtr = std::unique_ptr<RequestHandle>;
using Remote = std::shared_ptr<RemoteRegionHandle>;

// Posts with the GIL released (a post may block on a full socket). `post`
// reaches what `r` owns through pointers taken before the call.
template <typename Fn>
RequestPtr Posted(RequestPtr r, Fn&& post) {
  {
    py::gil_scoped_release release;
    r->request = post();
  }
  return r;
}

py::object Wait(RequestHandle& r) {
  if (!r.done) {
    Status s;
    {
      py::gil_scoped_release release;
      s = r.request.Wait();
    }
    r.Finish(std::move(s));
  }
  return r.Outcome();
}

bool Test(RequestHandle& r) {
  if (!r.done) {
    Status s;
    if (!r.request.Test(&s)) return false;
    r.Finish(std::move(s));
  }
  r.Outcome();  // raises a failure
  return true;
}

RequestPtr KeepingRemotes(std::initializer_list<Remote> remotes) {
  auto r = std::make_unique<RequestHandle>();
  r->remotes.assign(remotes.begin(), remotes.end());
  return r;
}

RequestPtr PostPut(EndpointHandle& ep, const py::object& src, const Remote& dst,
                   int64_t offset) {
  ByteView b = ArrayBytes(src, false, "src");
  uint64_t off = ByteOffset(offset, "offset");
  RequestPtr r = KeepingRemotes({dst});
  r->arrays.push_back(src);
  return Posted(std::move(r), [&] {
    return ep.endpoint->PostPut(b.data, b.length, dst->remote, off);
  });
}

RequestPtr PostGet(EndpointHandle& ep, const py::object& dst, const Remote& src,
                   int64_t offset) {
  ByteView b = ArrayBytes(dst, true, "dst");
  uint64_t off = ByteOffset(offset, "offset");
  RequestPtr r = KeepingRemotes({src});
  r->arrays.push_back(dst);
  return Posted(std::move(r), [&] {
    return ep.endpoint->PostGet(b.data, b.length, src->remote, off);
  });
}

// `segments`: (array, remote offset) pairs.
void AddSegments(RequestHandle& r, const py::iterable& segments,
                 bool writable) {
  for (py::handle item : segments) {
    if (!py::isinstance<py::sequence>(item) || py::len(item) != 2) {
      ThrowInvalidArgument(
          "each segment must be an (array, remote offset) pair");
    }
    auto pair = py::reinterpret_borrow<py::sequence>(item);
    py::object array = pair[0];
    ByteView b = ArrayBytes(array, writable, writable ? "dst" : "src");
    uint64_t off = ByteOffset(pair[1].cast<int64_t>(), "remote offset");
    r.segments.push_back(xfer::Segment{b.data, off, b.length});
    r.arrays.push_back(std::move(array));
  }
}

RequestPtr PostWriteV(EndpointHandle& ep, const py::iterable& segments,
                      const Remote& dst) {
  RequestPtr r = KeepingRemotes({dst});
  AddSegments(*r, segments, false);
  const std::vector<xfer::Segment>& s = r->segments;
  return Posted(std::move(r),
                [&] { return ep.endpoint->PostWriteV(s, dst->remote); });
}

RequestPtr PostReadV(EndpointHandle& ep, const py::iterable& segments,
                     const Remote& src) {
  RequestPtr r = KeepingRemotes({src});
  AddSegments(*r, segments, true);
  const std::vector<xfer::Segment>& s = r->segments;
  return Posted(std::move(r),
                [&] { return ep.endpoint->PostReadV(s, src->remote); });
}

RequestPtr PostFetchAdd(EndpointHandle& ep, const Remote& dst, int64_t offset,
                        const py::object& value) {
  uint64_t off = ByteOffset(offset, "offset");
  uint64_t v = Word(value);
  RequestPtr r = KeepingRemotes({dst});
  r->result = std::make_unique<uint64_t>(0);
  uint64_t* p = r->result.get();
  return Posted(std::move(r), [&] {
    return ep.endpoint->PostFetchAdd64(dst->remote, off, v, p);
  });
}

RequestPtr PostCompareSwap(EndpointHandle& ep, const Remote& dst,
                           int64_t offset, const py::object& expected,
                           const py::object& desired) {
  uint64_t off = ByteOffset(offset, "offset");
  uint64_t e = Word(expected), d = Word(desired);
  RequestPtr r = KeepingRemotes({dst});
  r->result = std::make_unique<uint64_t>(0);
  uint64_t* p = r->result.get();
  return Posted(std::move(r), [&] {
    return ep.endpoint->PostCompareSwap64(dst->remote, off, e, d, p);
  });
}

RequestPtr PostPutWithNotify(EndpointHandle& ep, const py::object& src,
                             const Remote& dst, int64_t offset,
                             const Remote& notify, int64_t notify_offset,
                             const py::object& notify_value) {
  ByteView b = ArrayBytes(src, false, "src");
  uint64_t off = ByteOffset(offset, "offset");
  uint64_t noff = ByteOffset(notify_offset, "notify_offset");
  uint64_t nv = Word(notify_value);
  RequestPtr r = KeepingRemotes({dst, notify});
  r->arrays.push_back(src);
  return Posted(std::move(r), [&] {
    return ep.endpoint->PostPutWithNotify(b.data, b.length, dst->remote, off,
                                          notify->remote, noff, nv);
  });
}

RequestPtr PostBatch(EndpointHandle& ep,
                     const std::shared_ptr<BatchHandle>& batch) {
  auto r = std::make_unique<RequestHandle>();
  r->batch = batch;
  // A copy, taken with the GIL held, is posted: another thread may add to
  // the batch meanwhile. The operations need not outlive the post (core
  // transports encode or execute them there); what they name does, and the
  // request keeps the batch that keeps it.
  xfer::Batch ops = batch->batch;
  return Posted(std::move(r), [&] { return ep.endpoint->Post(ops); });
}

// The blocking form of a post_* function: posts, waits, returns the outcome.
template <typename... Args>
auto Blocking(RequestPtr (*post)(EndpointHandle&, Args...)) {
  return [post](EndpointHandle& ep, Args... args) {
    RequestPtr r = post(ep, std::forward<Args>(args)...);
    return Wait(*r);
  };
}

// An endpoint call that waits (flush, the fences), made without the GIL;
// its failure raised.
auto Waiting(Status (xfer::Endpoint::*call)()) {
  return [call](EndpointHandle& e) {
    Status s;
    {
      py::gil_scoped_release release;
      s = (e.endpoint.get()->*call)();
    }
    ThrowIfError(s);
  };
}

void BindEndpoint(py::module_& m) {
  py::class_<EndpointHandle, std::shared_ptr<EndpointHandle>> c(
      m, "Endpoint", "core/endpoint.h: the connection to one peer context.");
  c.def_property_readonly(
       "peer_name",
       [](const EndpointHandle& e) { return e.endpoint->peer_name(); })
      .def_property_readonly(
          "peer_instance",
          [](const EndpointHandle& e) { return e.endpoint->peer_instance(); })
      .def_property_readonly(
          "transport",
          [](const EndpointHandle& e) {
            return std::string(xfer::TransportName(e.endpoint->transport()));
          })
      .def_property_readonly(
          "lost", [](const EndpointHandle& e) { return e.endpoint->lost(); })
      .def(
          "import_region",
          [](const std::shared_ptr<EndpointHandle>& self,
             const py::bytes& descriptor) {
            auto r = std::make_shared<RemoteRegionHandle>();
            r->endpoint = self;
            r->remote =
                ValueOrThrow(self->endpoint->Import(std::string(descriptor)));
            return r;
          },
          py::arg("descriptor"))
      .def("flush", Waiting(&xfer::Endpoint::Flush))
      .def("write_fence", Waiting(&xfer::Endpoint::WriteFence))
      .def("read_fence", Waiting(&xfer::Endpoint::ReadFence));
  const py::arg src("src"), dst("dst"), remote("remote"), segments("segments");
  const py::arg_v offset = py::arg("offset") = 0;
  c.def("post_put", &PostPut, src, remote, offset)
      .def("put", Blocking(&PostPut), src, remote, offset)
      .def("post_get", &PostGet, dst, remote, offset)
      .def("get", Blocking(&PostGet), dst, remote, offset)
      .def("post_writev", &PostWriteV, segments, remote)
      .def("writev", Blocking(&PostWriteV), segments, remote)
      .def("post_readv", &PostReadV, segments, remote)
      .def("readv", Blocking(&PostReadV), segments, remote)
      .def("post_fetch_add", &PostFetchAdd, remote, py::arg("offset"),
           py::arg("value"))
      .def("fetch_add", Blocking(&PostFetchAdd), remote, py::arg("offset"),
           py::arg("value"))
      .def("post_compare_swap", &PostCompareSwap, remote, py::arg("offset"),
           py::arg("expected"), py::arg("desired"))
      .def("compare_swap", Blocking(&PostCompareSwap), remote,
           py::arg("offset"), py::arg("expected"), py::arg("desired"))
      .def("post_put_with_notify", &PostPutWithNotify, src, remote,
           py::arg("offset"), py::arg("notify_remote"),
           py::arg("notify_offset"), py::arg("notify_value"))
      .def("put_with_notify", Blocking(&PostPutWithNotify), src, remote,
           py::arg("offset"), py::arg("notify_remote"),
           py::arg("notify_offset"), py::arg("notify_value"))
      .def("post", &PostBatch, py::arg("batch"));
}

void BindRemoteRegion(py::module_& m) {
  py::class_<RemoteRegionHandle, Remote>(
      m, "RemoteRegion", "core/remote_region.h: a peer's imported region.")
      .def_property_readonly(
          "id", [](const RemoteRegionHandle& r) { return r.remote.id(); })
      .def_property_readonly(
          "key", [](const RemoteRegionHandle& r) { return r.remote.key(); })
      .def_property_readonly(
          "size", [](const RemoteRegionHandle& r) { return r.remote.size(); })
      .def_property_readonly(
          "access",
          [](const RemoteRegionHandle& r) { return r.remote.access(); })
      .def_property_readonly(
          "instance",
          [](const RemoteRegionHandle& r) { return r.remote.instance(); })
      .def_property_readonly(
          "owner", [](const RemoteRegionHandle& r) { return r.remote.owner(); })
      .def("__repr__", [](const RemoteRegionHandle& r) {
        return "<ps.xfer.RemoteRegion id=" + std::to_string(r.remote.id()) +
               " of " + r.remote.owner() +
               " size=" + std::to_string(r.remote.size()) +
               " access=" + xfer::AccessToString(r.remote.access()) + ">";
      });
}

void BindRequest(py::module_& m) {
  py::class_<RequestHandle>(m, "Request",
                            "core/request.h: a non-blocking operation.")
      .def("wait", &Wait)
      .def("test", &Test)
      .def_property_readonly(
          "done", [](const RequestHandle& r) { return r.done.has_value(); });
}

void BindBatch(py::module_& m) {
  py::class_<BatchHandle, std::shared_ptr<BatchHandle>>(
      m, "Batch", "core/batch.h: operations to one peer posted together.")
      .def(py::init<>())
      .def(
          "put",
          [](BatchHandle& b, const py::object& src, const Remote& dst,
             int64_t offset) {
            ByteView v = ArrayBytes(src, false, "src");
            b.batch.Put(v.data, v.length, dst->remote,
                        ByteOffset(offset, "offset"));
            b.arrays.push_back(src);
            b.remotes.push_back(dst);
          },
          py::arg("src"), py::arg("remote"), py::arg("offset") = 0)
      .def(
          "get",
          [](BatchHandle& b, const py::object& dst, const Remote& src,
             int64_t offset) {
            ByteView v = ArrayBytes(dst, true, "dst");
            b.batch.Get(v.data, v.length, src->remote,
                        ByteOffset(offset, "offset"));
            b.arrays.push_back(dst);
            b.remotes.push_back(src);
          },
          py::arg("dst"), py::arg("remote"), py::arg("offset") = 0)
      .def(
          "fetch_add",
          [](BatchHandle& b, const Remote& dst, int64_t offset,
             const py::object& value) {
            uint64_t off = ByteOffset(offset, "offset");
            b.results.push_back(0);
            b.batch.FetchAdd64(dst->remote, off, Word(value),
                               &b.results.back());
            b.remotes.push_back(dst);
            return b.results.size() - 1;
          },
          py::arg("remote"), py::arg("offset"), py::arg("value"))
      .def_property_readonly("results",
                             [](const BatchHandle& b) {
                               return std::vector<uint64_t>(b.results.begin(),
                                                            b.results.end());
                             })
      .def("__len__", [](const BatchHandle& b) { return b.batch.size(); });
}

}  // namespace

void BindXferEndpoint(py::module_& m) {
  BindRemoteRegion(m);  // before the signatures that name it
  BindRequest(m);
  BindBatch(m);
  BindEndpoint(m);
}

}  // namespace ps::python
