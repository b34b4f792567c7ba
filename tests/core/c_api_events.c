/* The C API's registered pools, completion events and fences, in one
 * process over a given transport (part of core_c_api_test). */
#include <stdlib.h>

#include "tests/core/c_api_test.h"

enum { kPoolSize = 1 << 16, kMessages = 8 };

static int Import(ps_xfer_endpoint* ep, const void* desc, size_t len,
                  ps_xfer_remote** out) {
  CHECK(desc != NULL && len > 0);
  CHECK_OK(ps_xfer_import(ep, desc, len, out));
  return 0;
}

int PoolsEventsAndFences(ps_xfer_transport transport) {
  ps_xfer_context *owner = NULL, *user = NULL;
  ps_xfer_pool *pool = NULL, *other = NULL;
  ps_xfer_region* bell = NULL;
  ps_xfer_endpoint* ep = NULL;
  ps_xfer_remote *rpool = NULL, *rbell = NULL;
  ps_xfer_block blocks[kMessages], extra;
  ps_xfer_notification n;
  const char* address = NULL;
  const void* desc = NULL;
  size_t len = 0, used = 0, capacity = 0;
  uint64_t bell_id = 0;
  uint8_t message[256], back[256];
  int got = -1, i;

  RUN(NewContext("owner", PS_XFER_TRANSPORT_AUTO, &owner));
  RUN(NewContext("user", transport, &user));
  CHECK_OK(ps_xfer_pool_create(owner, kPoolSize,
                               PS_XFER_REMOTE_READ | PS_XFER_REMOTE_WRITE, 0,
                               &pool));
  CHECK_CODE(ps_xfer_pool_create(owner, kPoolSize, PS_XFER_REMOTE_READ, 24,
                                 &other),
             PS_XFER_INVALID_ARGUMENT); /* alignment not a power of two */
  CHECK(other == NULL);
  CHECK_OK(ps_xfer_allocate(owner, 64,
                            PS_XFER_REMOTE_WRITE | PS_XFER_NOTIFY_EVENTS,
                            &bell));
  CHECK_OK(ps_xfer_region_id(bell, &bell_id));

  /* Fill the pool; the next block is refused with a message. */
  for (i = 0; i < kMessages; ++i) {
    CHECK_OK(ps_xfer_pool_alloc(pool, kPoolSize / kMessages, 0, &blocks[i]));
    CHECK(blocks[i].offset % 64 == 0 && blocks[i].data != NULL);
  }
  CHECK_CODE(ps_xfer_pool_alloc(pool, 1, 0, &extra),
             PS_XFER_RESOURCE_EXHAUSTED);
  CHECK_OK(ps_xfer_pool_usage(pool, &used, &capacity));
  CHECK(used == kPoolSize && capacity == kPoolSize);

  /* A peer writes each block by (pool descriptor, offset) and rings. */
  CHECK_OK(ps_xfer_context_address(owner, &address));
  CHECK_OK(ps_xfer_connect(user, address, &ep));
  CHECK_OK(ps_xfer_pool_descriptor(pool, &desc, &len));
  RUN(Import(ep, desc, len, &rpool));
  CHECK_OK(ps_xfer_region_descriptor(bell, &desc, &len));
  RUN(Import(ep, desc, len, &rbell));
  CHECK_CODE(ps_xfer_wait_notification(owner, 1000, &n), PS_XFER_TIMEOUT);
  for (i = 0; i < kMessages; ++i) {
    memset(message, i + 1, sizeof message);
    CHECK_OK(ps_xfer_put_with_notify(ep, message, sizeof message, rpool,
                                     blocks[i].offset, rbell, 0,
                                     (uint64_t)i + 1, NULL));
  }
  for (i = 0; i < kMessages; ++i) {
    CHECK_OK(ps_xfer_wait_notification(owner, 10 * 1000 * 1000, &n));
    CHECK(n.region_id == bell_id && n.offset == 0 && n.value == (uint64_t)i + 1);
    memset(message, i + 1, sizeof message);
    CHECK(memcmp(blocks[n.value - 1].data, message, sizeof message) == 0);
  }
  CHECK_OK(ps_xfer_poll_notification(owner, &n, &got));
  CHECK(got == 0);

  /* Fences: a write, a write fence, then a read of it; a read fence. */
  memset(message, 0x5A, sizeof message);
  CHECK_OK(ps_xfer_put(ep, message, sizeof message, rpool, blocks[0].offset,
                       NULL));
  CHECK_OK(ps_xfer_write_fence(ep));
  CHECK_OK(ps_xfer_get(ep, back, sizeof back, rpool, blocks[0].offset, NULL));
  CHECK_OK(ps_xfer_read_fence(ep));
  CHECK(memcmp(back, message, sizeof back) == 0);

  /* Freed blocks are reused; a double free is refused. */
  CHECK_OK(ps_xfer_pool_free(pool, &blocks[3]));
  CHECK_CODE(ps_xfer_pool_free(pool, &blocks[3]), PS_XFER_INVALID_ARGUMENT);
  CHECK_OK(ps_xfer_pool_alloc(pool, 100, 0, &extra));
  CHECK(extra.offset == blocks[3].offset);

  CHECK_CODE(ps_xfer_wait_notification(NULL, 0, &n), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_write_fence(NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_pool_alloc(NULL, 1, 0, &extra), PS_XFER_INVALID_ARGUMENT);
  CHECK_OK(ps_xfer_remote_destroy(rbell));
  CHECK_OK(ps_xfer_remote_destroy(rpool));
  CHECK_OK(ps_xfer_endpoint_destroy(ep));
  CHECK_OK(ps_xfer_pool_destroy(pool));
  CHECK_OK(ps_xfer_deregister(owner, bell));
  CHECK_OK(ps_xfer_context_destroy(owner));
  CHECK_OK(ps_xfer_context_destroy(user));
  return 0;
}
