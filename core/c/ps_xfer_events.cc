// The C API (core/c/ps_xfer.h), part three: fences, completion events and
// registered pools.
#include <chrono>
#include <memory>

#include "core/c/handles.h"
#include "core/c/ps_xfer.h"

using ps::xfer::c_api::CheckAccess;
using ps::xfer::c_api::Guard;
using ps::xfer::c_api::InvalidArg;
using ps::xfer::c_api::Report;

namespace {

void Fill(const ps::xfer::Notification& n, ps_xfer_notification* out) {
  *out = ps_xfer_notification{n.sender, n.region_id, n.offset, n.value};
}

}  // namespace

extern "C" {

ps_xfer_status ps_xfer_write_fence(ps_xfer_endpoint* endpoint) {
  return Guard(__func__, [&](const char* fn) {
    if (endpoint == nullptr) return InvalidArg(fn, "endpoint is NULL");
    return Report(endpoint->endpoint->WriteFence());
  });
}

ps_xfer_status ps_xfer_read_fence(ps_xfer_endpoint* endpoint) {
  return Guard(__func__, [&](const char* fn) {
    if (endpoint == nullptr) return InvalidArg(fn, "endpoint is NULL");
    return Report(endpoint->endpoint->ReadFence());
  });
}

ps_xfer_status ps_xfer_wait_notification(ps_xfer_context* context,
                                         int64_t timeout_us,
                                         ps_xfer_notification* out) {
  return Guard(__func__, [&](const char* fn) {
    if (context == nullptr || out == nullptr) {
      return InvalidArg(fn, "context or out is NULL");
    }
    if (timeout_us < 0) return InvalidArg(fn, "timeout_us is negative");
    auto n = context->context->WaitNotification(
        std::chrono::microseconds(timeout_us));
    if (!n.ok()) return Report(n.status());
    Fill(*n, out);
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_poll_notification(ps_xfer_context* context,
                                         ps_xfer_notification* out, int* got) {
  return Guard(__func__, [&](const char* fn) {
    if (context == nullptr || out == nullptr || got == nullptr) {
      return InvalidArg(fn, "context, out or got is NULL");
    }
    std::optional<ps::xfer::Notification> n =
        context->context->PollNotification();
    *got = n.has_value() ? 1 : 0;
    if (n.has_value()) Fill(*n, out);
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_region_id(const ps_xfer_region* region, uint64_t* id) {
  if (region == nullptr || id == nullptr) {
    return InvalidArg(__func__, "region or id is NULL");
  }
  *id = region->region->id();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_pool_create(ps_xfer_context* context, size_t bytes,
                                   uint32_t access, size_t alignment,
                                   ps_xfer_pool** out) {
  return Guard(__func__, [&](const char* fn) {
    if (out == nullptr) return InvalidArg(fn, "out is NULL");
    *out = nullptr;
    if (context == nullptr) return InvalidArg(fn, "context is NULL");
    if (ps_xfer_status s = CheckAccess(fn, access); s != PS_XFER_OK) {
      return s;
    }
    auto pool = ps::xfer::RegisteredPool::Create(
        context->context.get(), bytes, access,
        alignment != 0 ? alignment
                       : ps::xfer::RegisteredPool::kDefaultAlignment);
    if (!pool.ok()) return Report(pool.status());
    auto handle = std::make_unique<ps_xfer_pool>();
    handle->context = context->context;
    handle->pool = std::move(*pool);
    *out = handle.release();
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_pool_destroy(ps_xfer_pool* pool) {
  return Guard(__func__, [&](const char*) {
    delete pool;  // the pool (deregistering its region) before its context
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_pool_alloc(ps_xfer_pool* pool, size_t bytes,
                                  size_t alignment, ps_xfer_block* out) {
  return Guard(__func__, [&](const char* fn) {
    if (pool == nullptr || out == nullptr) {
      return InvalidArg(fn, "pool or out is NULL");
    }
    *out = ps_xfer_block{};
    auto block = pool->pool->Allocate(bytes, alignment);
    if (!block.ok()) return Report(block.status());
    *out = ps_xfer_block{block->offset, block->size, block->data};
    return PS_XFER_OK;
  });
}

ps_xfer_status ps_xfer_pool_free(ps_xfer_pool* pool,
                                 const ps_xfer_block* block) {
  return Guard(__func__, [&](const char* fn) {
    if (pool == nullptr || block == nullptr) {
      return InvalidArg(fn, "pool or block is NULL");
    }
    return Report(pool->pool->Free(
        ps::xfer::PoolBlock{block->offset, block->size, block->data}));
  });
}

ps_xfer_status ps_xfer_pool_descriptor(const ps_xfer_pool* pool,
                                       const void** data, size_t* length) {
  if (pool == nullptr || data == nullptr || length == nullptr) {
    return InvalidArg(__func__, "pool, data or length is NULL");
  }
  const std::string& d = pool->pool->descriptor();
  *data = d.data();
  *length = d.size();
  return PS_XFER_OK;
}

ps_xfer_status ps_xfer_pool_usage(const ps_xfer_pool* pool, size_t* used,
                                  size_t* capacity) {
  if (pool == nullptr || used == nullptr || capacity == nullptr) {
    return InvalidArg(__func__, "pool, used or capacity is NULL");
  }
  *used = pool->pool->used();
  *capacity = pool->pool->capacity();
  return PS_XFER_OK;
}

}  // extern "C"
