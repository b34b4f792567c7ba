// The C API (core/c/ps_xfer.h), part two: the operations, their requests,
// and batches.
#include <span>
#include <utility>
#include <vector>

#include "core/c/handles.h"
#include "core/c/ps_xfer.h"

using ps::xfer::Endpoint;
using ps::xfer::RemoteRegion;
using ps::xfer::Request;
using ps::xfer::Segment;
using ps::xfer::c_api::Guard;
using ps::xfer::c_api::InvalidArg;
using ps::xfer::c_api::Report;

namespace {

// The checks every operation shares; PS_XFER_OK when they pass.
ps_xfer_status CheckTarget(const char* function,
                           const ps_xfer_endpoint* endpoint,
                           const ps_xfer_remote* remote) {
  if (endpoint == nullptr) return InvalidArg(function, "endpoint is NULL");
  if (remote == nullptr) return InvalidArg(function, "remote region is NULL");
  return PS_XFER_OK;
}

// Posts an operation with `post(segments)` and hands it back: as a request
// handle in *out, or, when out is NULL, waited for. The handle is made
// before the operation is posted, so that running out of memory never leaves
// an operation running on buffers nobody waits for.
template <typename Post>
ps_xfer_status Issue(ps_xfer_endpoint* endpoint, ps_xfer_request** out,
                     std::vector<Segment> segments, Post post) {
  if (out == nullptr) return Report(post(std::span(segments)).Wait());
  auto handle = std::make_unique<ps_xfer_request>();
  handle->context = endpoint->context;
  handle->endpoint = endpoint->endpoint;
  handle->segments = std::move(segments);
  handle->request = post(std::span<const Segment>(handle->segments));
  *out = handle.release();
  return PS_XFER_OK;
}

// A C segment list as C++ segments; PS_XFER_OK when it is well-formed.
ps_xfer_status ConvertSegments(const char* function,
                               const ps_xfer_segment* segments, size_t count,
                               std::vector<Segment>* out) {
  if (segments == nullptr) return InvalidArg(function, "segments is NULL");
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (segments[i].local == nullptr) {
      return InvalidArg(function, "a segment's local pointer is NULL");
    }
    out->push_back(Segment{segments[i].local, segments[i].remote_offset,
                           segments[i].length});
  }
  return PS_XFER_OK;
}

}  // namespace

extern "C" {

ps_xfer_status ps_xfer_put(ps_xfer_endpoint* endpoint, const void* src,
                           size_t length, const ps_xfer_remote* dst,
                           uint64_t offset, ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, dst)) return s;
    if (src == nullptr) return InvalidArg(fn, "src is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->PostPut(src, length, dst->region, offset);
    });
  });
}

ps_xfer_status ps_xfer_get(ps_xfer_endpoint* endpoint, void* dst, size_t length,
                           const ps_xfer_remote* src, uint64_t offset,
                           ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, src)) return s;
    if (dst == nullptr) return InvalidArg(fn, "dst is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->PostGet(dst, length, src->region, offset);
    });
  });
}

namespace {

// writev and readv: the segments converted, then `post` (PostWriteV or
// PostReadV) of the endpoint on them.
ps_xfer_status PostSegments(const char* function, ps_xfer_endpoint* endpoint,
                            const ps_xfer_segment* segments, size_t count,
                            const ps_xfer_remote* remote, ps_xfer_request** out,
                            Request (Endpoint::*post)(std::span<const Segment>,
                                                      const RemoteRegion&)) {
  return Guard(function, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, remote)) return s;
    std::vector<Segment> segs;
    if (ps_xfer_status s = ConvertSegments(fn, segments, count, &segs)) {
      return s;
    }
    return Issue(endpoint, out, std::move(segs),
                 [&](std::span<const Segment> converted) {
                   return (endpoint->endpoint.get()->*post)(converted,
                                                            remote->region);
                 });
  });
}

}  // namespace

ps_xfer_status ps_xfer_writev(ps_xfer_endpoint* endpoint,
                              const ps_xfer_segment* segments, size_t count,
                              const ps_xfer_remote* dst,
                              ps_xfer_request** out) {
  return PostSegments(__func__, endpoint, segments, count, dst, out,
                      &Endpoint::PostWriteV);
}

ps_xfer_status ps_xfer_readv(ps_xfer_endpoint* endpoint,
                             const ps_xfer_segment* segments, size_t count,
                             const ps_xfer_remote* src, ps_xfer_request** out) {
  return PostSegments(__func__, endpoint, segments, count, src, out,
                      &Endpoint::PostReadV);
}

ps_xfer_status ps_xfer_fetch_add64(ps_xfer_endpoint* endpoint,
                                   const ps_xfer_remote* dst, uint64_t offset,
                                   uint64_t value, uint64_t* previous,
                                   ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, dst)) return s;
    if (previous == nullptr) return InvalidArg(fn, "previous is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->PostFetchAdd64(dst->region, offset, value,
                                                previous);
    });
  });
}

ps_xfer_status ps_xfer_compare_swap64(ps_xfer_endpoint* endpoint,
                                      const ps_xfer_remote* dst,
                                      uint64_t offset, uint64_t expected,
                                      uint64_t desired, uint64_t* previous,
                                      ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, dst)) return s;
    if (previous == nullptr) return InvalidArg(fn, "previous is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->PostCompareSwap64(dst->region, offset,
                                                   expected, desired, previous);
    });
  });
}

ps_xfer_status ps_xfer_put_with_notify(
    ps_xfer_endpoint* endpoint, const void* src, size_t length,
    const ps_xfer_remote* dst, uint64_t offset, const ps_xfer_remote* notify,
    uint64_t notify_offset, uint64_t notify_value, ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (ps_xfer_status s = CheckTarget(fn, endpoint, dst)) return s;
    if (notify == nullptr) return InvalidArg(fn, "notify is NULL");
    if (src == nullptr) return InvalidArg(fn, "src is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->PostPutWithNotify(src, length, dst->region,
                                                   offset, notify->region,
                                                   notify_offset, notify_value);
    });
  });
}

ps_xfer_status ps_xfer_request_test(ps_xfer_request* request, int* done) {
  return Guard(__func__, [&](const char* fn) {
    if (done == nullptr) return InvalidArg(fn, "done is NULL");
    *done = 0;
    if (request == nullptr) return InvalidArg(fn, "request is NULL");
    ps::Status status;
    if (!request->request.Test(&status)) return PS_XFER_OK;
    *done = 1;
    return Report(status);
  });
}

ps_xfer_status ps_xfer_request_wait(ps_xfer_request* request) {
  return Guard(__func__, [&](const char* fn) {
    if (request == nullptr) return InvalidArg(fn, "request is NULL");
    return Report(request->request.Wait());
  });
}

ps_xfer_status ps_xfer_request_free(ps_xfer_request* request) {
  return Guard(__func__, [&](const char*) {
    if (request == nullptr) return PS_XFER_OK;
    std::unique_ptr<ps_xfer_request> owned(request);
    // The operation may still write into the caller's buffers (and the
    // transport into the segment list) until it is done.
    return Report(owned->request.Wait());
  });
}

ps_xfer_status ps_xfer_batch_create(ps_xfer_batch** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out == nullptr) return InvalidArg(fn, "out is NULL");
    *out = new ps_xfer_batch();
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_batch_destroy(ps_xfer_batch* batch) {
  return Guard(__func__, [&](const char*) {
    delete batch;
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_batch_put(ps_xfer_batch* batch, const void* src,
                                 size_t length, const ps_xfer_remote* dst,
                                 uint64_t offset) {
  return Guard(__func__, [&](const char* fn) {
    if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
    if (src == nullptr) return InvalidArg(fn, "src is NULL");
    if (dst == nullptr) return InvalidArg(fn, "remote region is NULL");
    batch->batch.Put(src, length, dst->region, offset);
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_batch_get(ps_xfer_batch* batch, void* dst, size_t length,
                                 const ps_xfer_remote* src, uint64_t offset) {
  return Guard(__func__, [&](const char* fn) {
    if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
    if (dst == nullptr) return InvalidArg(fn, "dst is NULL");
    if (src == nullptr) return InvalidArg(fn, "remote region is NULL");
    batch->batch.Get(dst, length, src->region, offset);
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_batch_fetch_add64(ps_xfer_batch* batch,
                                         const ps_xfer_remote* dst,
                                         uint64_t offset, uint64_t value,
                                         uint64_t* previous) {
  return Guard(__func__, [&](const char* fn) {
    if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
    if (dst == nullptr) return InvalidArg(fn, "remote region is NULL");
    if (previous == nullptr) return InvalidArg(fn, "previous is NULL");
    batch->batch.FetchAdd64(dst->region, offset, value, previous);
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_batch_size(const ps_xfer_batch* batch, size_t* size) {
  if (size == nullptr) return InvalidArg(__func__, "size is NULL");
  *size = 0;
  if (batch == nullptr) return InvalidArg(__func__, "batch is NULL");
  *size = batch->batch.size();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_batch_clear(ps_xfer_batch* batch) {
  if (batch == nullptr) return InvalidArg(__func__, "batch is NULL");
  batch->batch.Clear();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_batch_post(ps_xfer_endpoint* endpoint,
                                  const ps_xfer_batch* batch,
                                  ps_xfer_request** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out != nullptr) *out = nullptr;
    if (endpoint == nullptr) return InvalidArg(fn, "endpoint is NULL");
    if (batch == nullptr) return InvalidArg(fn, "batch is NULL");
    return Issue(endpoint, out, {}, [&](std::span<const Segment>) {
      return endpoint->endpoint->Post(batch->batch);
    });
  });
}

}  // extern "C"
