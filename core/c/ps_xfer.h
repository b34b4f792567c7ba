/* ps_xfer.h: the C API of the one-sided transfer core (core/, namespace
 * ps::xfer), for programs and language bindings that cannot use C++.
 *
 * What it is for: a process makes one context, puts memory into regions that
 * peers may read, write or update atomically, and sends each region's
 * descriptor (a few bytes) to its peers over any channel. A peer connects an
 * endpoint to the context's address, imports the descriptor and then moves
 * bytes with put / get / writev / readv / atomics, none of which needs the
 * owner's application code to take part.
 *
 * How it maps to C++ (core/context.h, core/endpoint.h):
 *   ps_xfer_context   Context          (ps_xfer_context_create = Create)
 *   ps_xfer_region    MemoryRegion     (ps_xfer_allocate / ps_xfer_register)
 *   ps_xfer_endpoint  Endpoint         (ps_xfer_connect = Context::Connect)
 *   ps_xfer_remote    RemoteRegion     (ps_xfer_import = Endpoint::Import)
 *   ps_xfer_request   Request          (from every ps_xfer_put, _get, ...)
 *   ps_xfer_batch     Batch            (ps_xfer_batch_post = Endpoint::Post)
 *   ps_xfer_pool      RegisteredPool   (ps_xfer_pool_alloc = Allocate)
 *   ps_xfer_notification  Notification (ps_xfer_wait_notification)
 *   ps_xfer_status    ps::StatusCode   (the same numbers)
 * The semantics are the C++ ones: no ordering between operations unless
 * separated by ps_xfer_flush or tied by ps_xfer_put_with_notify; every
 * operation is checked against the target's bounds, access flags and key.
 *
 * Errors: every function returns a ps_xfer_status (PS_XFER_OK = 0) and hands
 * objects back through out-parameters. On failure, ps_xfer_last_error() is
 * the full message ("out of range: region 3 on a: offset 4096 + 8 is past its
 * end (4096 bytes)"). A NULL handle or out-pointer, or another malformed
 * argument, fails with PS_XFER_INVALID_ARGUMENT; it never crashes. What the
 * C layer cannot see (a dangling handle, a buffer too short for the length
 * given) is undefined, as in C.
 *
 * Ownership: each handle is released by its own function (_destroy,
 * ps_xfer_deregister or ps_xfer_region_release, ps_xfer_request_free);
 * releasing NULL does nothing.
 * Handles keep what they need alive: a region, endpoint, remote or request
 * keeps its context (and a remote or request its endpoint) until it is
 * released itself, so a context really stops (closes its listener, drops its
 * peers) only once every handle made from it is released. Memory named by
 * pointers (ps_xfer_register's data, operation buffers) stays the caller's.
 *
 * Thread safety: as in C++, a context and an endpoint may be used by any
 * number of threads at once, and region and remote handles are immutable. A
 * request or batch belongs to one thread at a time. ps_xfer_last_error() is
 * per thread.
 */
#ifndef PS_XFER_C_PS_XFER_H_
#define PS_XFER_C_PS_XFER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same numbers as ps::StatusCode (base/status.h). */
typedef enum ps_xfer_status {
  PS_XFER_OK = 0,
  PS_XFER_INVALID_ARGUMENT,   /* the caller passed something malformed */
  PS_XFER_NOT_REGISTERED,     /* the region does not exist (or no longer) */
  PS_XFER_ACCESS_DENIED,      /* the region does not allow this access */
  PS_XFER_INVALID_KEY,        /* the remote key does not match the region */
  PS_XFER_OUT_OF_RANGE,       /* offset/length outside the region */
  PS_XFER_STALE_DESCRIPTOR,   /* from an earlier life of the peer */
  PS_XFER_TIMEOUT,            /* no answer within the configured time */
  PS_XFER_PEER_LOST,          /* the peer closed, crashed or is unreachable */
  PS_XFER_NETWORK,            /* a socket-level failure, not a lost peer */
  PS_XFER_NOT_INITIALIZED,    /* used before it was set up */
  PS_XFER_CORRUPTION,         /* data failed validation */
  PS_XFER_NOT_FOUND,          /* a named thing does not exist */
  PS_XFER_IO_ERROR,           /* a file-system or device error */
  PS_XFER_RESOURCE_EXHAUSTED, /* a bounded resource (memory) is used up */
  PS_XFER_NOT_SUPPORTED,      /* not built or not available here */
  PS_XFER_INTERNAL,           /* a bug in this library; report it */
  PS_XFER_UNAUTHENTICATED,    /* the peer did not prove the secret */
  PS_XFER_CANCELLED           /* given up because the process is stopping */
} ps_xfer_status;

/* The code's stable lower-case name ("out of range"); "unknown" for a number
 * that is no code. Never NULL; static storage. An int, as strerror takes:
 * any number is allowed, and a C++ caller's out-of-range enum value would be
 * undefined behaviour. */
const char* ps_xfer_strerror(int status);
/* The full message of the last failure of a ps_xfer_ call on this thread
 * ("" before any). Valid until the next ps_xfer_ call on the same thread. */
const char* ps_xfer_last_error(void);

/* What a peer may do to a region (core/access.h); OR them together. */
enum {
  PS_XFER_LOCAL_ONLY = 0,
  PS_XFER_REMOTE_READ = 1u << 0,   /* get, readv */
  PS_XFER_REMOTE_WRITE = 1u << 1,  /* put, writev, put_with_notify */
  PS_XFER_REMOTE_ATOMIC = 1u << 2, /* fetch_add64, compare_swap64 */
  PS_XFER_REMOTE_ALL = 7u,
  /* Grants nothing: a put_with_notify whose notify word lies in the region
   * also queues a notification at the owner (ps_xfer_wait_notification).
   * Not over verbs yet (PS_XFER_NOT_SUPPORTED). */
  PS_XFER_NOTIFY_EVENTS = 1u << 3
};

/* Which transport carries an endpoint; AUTO lets connect choose (shm on the
 * same host, verbs where both have RDMA, tcp otherwise; $XFER_TRANSPORT
 * overrides AUTO). */
typedef enum ps_xfer_transport {
  PS_XFER_TRANSPORT_AUTO = 0,
  PS_XFER_TRANSPORT_SHM,
  PS_XFER_TRANSPORT_TCP,
  PS_XFER_TRANSPORT_VERBS
} ps_xfer_transport;

typedef struct ps_xfer_context ps_xfer_context;
typedef struct ps_xfer_region ps_xfer_region;
typedef struct ps_xfer_endpoint ps_xfer_endpoint;
typedef struct ps_xfer_remote ps_xfer_remote;
typedef struct ps_xfer_request ps_xfer_request;
typedef struct ps_xfer_batch ps_xfer_batch;

/* ps::xfer::ContextOptions. Strings are copied by ps_xfer_context_create;
 * NULL means "" (for name and listen_host: the default). */
typedef struct ps_xfer_context_options {
  const char* name;           /* in logs and messages; default "xfer" */
  const char* listen_host;    /* default "127.0.0.1"; "0.0.0.0" for all */
  uint16_t listen_port;       /* 0: a free port (see context_address) */
  const char* advertise_host; /* the host peers dial; NULL: derived */
  ps_xfer_transport transport;
  int peer_timeout_ms; /* silent this long: peer lost; default 10000 */
  /* The cluster's shared secret (at least 16 bytes); NULL/0: none, which a
   * context may only have when listening on loopback. */
  const void* secret;
  size_t secret_length;
  const char* ib_device; /* RDMA device for verbs; NULL: $XFER_IB_DEV/first */
  int ib_port;           /* 0: $XFER_IB_PORT or the first active port */
  int ib_gid_index;      /* -1: $XFER_IB_GID_INDEX or chosen */
  /* Cells of the notification queue: a power of two from 2 to 2^20;
   * default 4096. */
  uint32_t notification_capacity;
  /* Threads copying one large same-host write together, the caller
   * included: 1 .. 64; default 1. */
  int copy_threads;
  /* Wake every CPU within this many microseconds while the context lives
   * (PM QoS; 0: idle CPUs poll, which speeds up tcp round trips to idle
   * peers; needs root); -1 (default): leave the machine as it is. */
  int cpu_wakeup_latency_us;
} ps_xfer_context_options;

/* Fills *options with the C++ defaults. */
ps_xfer_status ps_xfer_context_options_init(ps_xfer_context_options* options);

/* Starts listening and the progress threads. */
ps_xfer_status ps_xfer_context_create(const ps_xfer_context_options* options,
                                      ps_xfer_context** out);
/* Releases the caller's handle; the context stops once the regions,
 * endpoints, remotes and requests made from it are released too. */
ps_xfer_status ps_xfer_context_destroy(ps_xfer_context* context);
/* "host:port" for peers to connect to; owned by the context handle. */
ps_xfer_status ps_xfer_context_address(const ps_xfer_context* context,
                                       const char** address);
/* Flushes every endpoint the context connected. */
ps_xfer_status ps_xfer_context_fence(ps_xfer_context* context);

/* A new zero-filled region of `length` bytes owned by the context. */
ps_xfer_status ps_xfer_allocate(ps_xfer_context* context, size_t length,
                                uint32_t access, ps_xfer_region** out);
/* Makes the caller's `length` bytes at `data` reachable by peers; they must
 * stay valid until ps_xfer_deregister. */
ps_xfer_status ps_xfer_register(ps_xfer_context* context, void* data,
                                size_t length, uint32_t access,
                                ps_xfer_region** out);
/* Peers can no longer reach the region (their later operations fail with
 * PS_XFER_NOT_REGISTERED), and the handle is freed, whatever the result;
 * except for PS_XFER_INVALID_ARGUMENT (a NULL context, or the region of
 * another context): then nothing happened and the handle stays valid. An
 * allocated region's memory goes when no operation is copying into it. */
ps_xfer_status ps_xfer_deregister(ps_xfer_context* context,
                                  ps_xfer_region* region);
/* Frees the handle without deregistering, like dropping the C++ shared_ptr:
 * the region stays reachable by peers (and registered memory must stay
 * valid) until its context stops. For a region whose context handle is
 * already destroyed. */
ps_xfer_status ps_xfer_region_release(ps_xfer_region* region);
ps_xfer_status ps_xfer_region_data(const ps_xfer_region* region, void** data);
ps_xfer_status ps_xfer_region_size(const ps_xfer_region* region, size_t* size);
/* The remote key a peer's operations must present (inside the descriptor). */
ps_xfer_status ps_xfer_region_key(const ps_xfer_region* region, uint64_t* key);
/* The descriptor to send to peers (~100 bytes of binary, not a string);
 * owned by the region handle. */
ps_xfer_status ps_xfer_region_descriptor(const ps_xfer_region* region,
                                         const void** data, size_t* length);

/* Connects to the context listening at `address` ("host:port"). */
ps_xfer_status ps_xfer_connect(ps_xfer_context* context, const char* address,
                               ps_xfer_endpoint** out);
/* Releases the handle; the connection closes once the remotes and requests
 * made through it are released too. */
ps_xfer_status ps_xfer_endpoint_destroy(ps_xfer_endpoint* endpoint);
/* The transport connect chose (never AUTO). */
ps_xfer_status ps_xfer_endpoint_transport(const ps_xfer_endpoint* endpoint,
                                          ps_xfer_transport* transport);
/* Waits until every operation posted through the endpoint before the call
 * completed and is visible; returns the first error the peer reported for
 * them since the last flush, if any (also one their requests returned). */
ps_xfer_status ps_xfer_flush(ps_xfer_endpoint* endpoint);

/* Parses a peer's region descriptor: PS_XFER_INVALID_ARGUMENT if it is none
 * or belongs to another peer, PS_XFER_STALE_DESCRIPTOR if from an earlier
 * life of the peer. */
ps_xfer_status ps_xfer_import(ps_xfer_endpoint* endpoint,
                              const void* descriptor, size_t length,
                              ps_xfer_remote** out);
ps_xfer_status ps_xfer_remote_destroy(ps_xfer_remote* remote);
ps_xfer_status ps_xfer_remote_size(const ps_xfer_remote* remote,
                                   uint64_t* size);

/* One piece of a scatter-gather list (core/segment.h): `length` bytes at
 * `local` and at `remote_offset` in the remote region. */
typedef struct ps_xfer_segment {
  void* local;
  uint64_t remote_offset;
  size_t length;
} ps_xfer_segment;

/* Non-blocking operations. Each posts the operation and sets *out to its
 * request; the operation's own result (PS_XFER_OUT_OF_RANGE, _ACCESS_DENIED,
 * _PEER_LOST, ...) comes from ps_xfer_request_test / _wait, even when it is
 * known at once. The call itself fails (and *out is NULL) only for arguments
 * the C layer rejects. `out` may be NULL: then the call waits and returns the
 * operation's result. Source buffers (and the segment array) may be reused
 * once the call returns; destination buffers (get, readv, `previous`) must
 * stay valid until the request completes. The remote must be one imported
 * through the same endpoint. */
ps_xfer_status ps_xfer_put(ps_xfer_endpoint* endpoint, const void* src,
                           size_t length, const ps_xfer_remote* dst,
                           uint64_t offset, ps_xfer_request** out);
ps_xfer_status ps_xfer_get(ps_xfer_endpoint* endpoint, void* dst, size_t length,
                           const ps_xfer_remote* src, uint64_t offset,
                           ps_xfer_request** out);
ps_xfer_status ps_xfer_writev(ps_xfer_endpoint* endpoint,
                              const ps_xfer_segment* segments, size_t count,
                              const ps_xfer_remote* dst, ps_xfer_request** out);
ps_xfer_status ps_xfer_readv(ps_xfer_endpoint* endpoint,
                             const ps_xfer_segment* segments, size_t count,
                             const ps_xfer_remote* src, ps_xfer_request** out);
/* Adds `value` to the 8-byte aligned word at `offset`; *previous gets the
 * word's earlier value. */
ps_xfer_status ps_xfer_fetch_add64(ps_xfer_endpoint* endpoint,
                                   const ps_xfer_remote* dst, uint64_t offset,
                                   uint64_t value, uint64_t* previous,
                                   ps_xfer_request** out);
/* Stores `desired` if the word equals `expected`; *previous gets the earlier
 * value (equal to `expected` when the swap happened). */
ps_xfer_status ps_xfer_compare_swap64(ps_xfer_endpoint* endpoint,
                                      const ps_xfer_remote* dst,
                                      uint64_t offset, uint64_t expected,
                                      uint64_t desired, uint64_t* previous,
                                      ps_xfer_request** out);
/* Writes the data, then `notify_value` into the 8-byte aligned word at
 * `notify_offset` of `notify`: a reader who sees the new word sees the data.
 */
ps_xfer_status ps_xfer_put_with_notify(
    ps_xfer_endpoint* endpoint, const void* src, size_t length,
    const ps_xfer_remote* dst, uint64_t offset, const ps_xfer_remote* notify,
    uint64_t notify_offset, uint64_t notify_value, ps_xfer_request** out);

/* *done = 1 when the operation has finished, and then returns its result;
 * *done = 0 and PS_XFER_OK while it runs. */
ps_xfer_status ps_xfer_request_test(ps_xfer_request* request, int* done);
/* Blocks until the operation finished (at the latest the peer timeout after
 * the peer went silent: PS_XFER_PEER_LOST); returns its result. May be called
 * again. */
ps_xfer_status ps_xfer_request_wait(ps_xfer_request* request);
/* Waits for the operation if it is still running (its buffers are in use
 * until then), frees the handle and returns the operation's result. */
ps_xfer_status ps_xfer_request_free(ps_xfer_request* request);

/* Several operations to one peer posted at once (one system call on tcp).
 * The remotes and buffers named must stay valid until the request posted
 * from the batch completes; the batch itself may be cleared, refilled or
 * destroyed right after ps_xfer_batch_post. */
ps_xfer_status ps_xfer_batch_create(ps_xfer_batch** out);
ps_xfer_status ps_xfer_batch_destroy(ps_xfer_batch* batch);
ps_xfer_status ps_xfer_batch_put(ps_xfer_batch* batch, const void* src,
                                 size_t length, const ps_xfer_remote* dst,
                                 uint64_t offset);
ps_xfer_status ps_xfer_batch_get(ps_xfer_batch* batch, void* dst, size_t length,
                                 const ps_xfer_remote* src, uint64_t offset);
ps_xfer_status ps_xfer_batch_fetch_add64(ps_xfer_batch* batch,
                                         const ps_xfer_remote* dst,
                                         uint64_t offset, uint64_t value,
                                         uint64_t* previous);
ps_xfer_status ps_xfer_batch_size(const ps_xfer_batch* batch, size_t* size);
ps_xfer_status ps_xfer_batch_clear(ps_xfer_batch* batch);
/* Posts every operation of the batch; the request completes when all have,
 * with the first failure if any. `out` NULL: waits, as for ps_xfer_put. */
ps_xfer_status ps_xfer_batch_post(ps_xfer_endpoint* endpoint,
                                  const ps_xfer_batch* batch,
                                  ps_xfer_request** out);

/* Fences (core/endpoint.h), cheaper than ps_xfer_flush where the transport
 * allows. write_fence: every put, writev, put_with_notify and atomic posted
 * before takes effect at the target before any operation posted after it
 * (it orders; it does not wait on tcp). read_fence: every get, readv and
 * atomic posted before has its data in local memory. Each returns
 * PS_XFER_PEER_LOST once the peer is lost; an operation's own error comes
 * from its request and the next flush. */
ps_xfer_status ps_xfer_write_fence(ps_xfer_endpoint* endpoint);
ps_xfer_status ps_xfer_read_fence(ps_xfer_endpoint* endpoint);

/* A completion event (core/notification.h): a put_with_notify stored
 * `value` into the word at `offset` of region `region_id` (its id at the
 * owner) of a PS_XFER_NOTIFY_EVENTS region; `sender` is the sending
 * context's instance. The put's data and word are visible before it is. */
typedef struct ps_xfer_notification {
  uint64_t sender;
  uint64_t region_id;
  uint64_t offset;
  uint64_t value;
} ps_xfer_notification;

/* The next notification to this context, waiting up to `timeout_us`
 * microseconds for one (the thread sleeps, it does not spin);
 * PS_XFER_TIMEOUT when none came. Any number of threads may wait; each
 * notification goes to one of them. */
ps_xfer_status ps_xfer_wait_notification(ps_xfer_context* context,
                                         int64_t timeout_us,
                                         ps_xfer_notification* out);
/* The next notification if one is queued: *got = 1 and *out set, else
 * *got = 0; never waits. */
ps_xfer_status ps_xfer_poll_notification(ps_xfer_context* context,
                                         ps_xfer_notification* out, int* got);
/* The id of a region at its owner, as notifications name it. */
ps_xfer_status ps_xfer_region_id(const ps_xfer_region* region, uint64_t* id);

/* A registered pool (core/registered_pool.h): one region of `bytes`
 * allocated and registered once, handed out in blocks that peers address
 * by (the pool's descriptor, the block's offset). Blocks are aligned to
 * `alignment` (a power of two from 8 to the page size; 0: 64) or more.
 * The pool keeps its context; destroying it deregisters the region. */
typedef struct ps_xfer_pool ps_xfer_pool;
typedef struct ps_xfer_block {
  uint64_t offset; /* in the pool's region: what peers address */
  size_t size;     /* as asked */
  void* data;      /* this process's address of the block */
} ps_xfer_block;

ps_xfer_status ps_xfer_pool_create(ps_xfer_context* context, size_t bytes,
                                   uint32_t access, size_t alignment,
                                   ps_xfer_pool** out);
ps_xfer_status ps_xfer_pool_destroy(ps_xfer_pool* pool);
/* A block of `bytes`; `alignment` 0: the pool's. PS_XFER_RESOURCE_EXHAUSTED
 * when no free range holds it (the message says what is free). */
ps_xfer_status ps_xfer_pool_alloc(ps_xfer_pool* pool, size_t bytes,
                                  size_t alignment, ps_xfer_block* out);
/* PS_XFER_INVALID_ARGUMENT for a block that is not live in this pool (freed
 * twice, or another pool's); the pool is unchanged then. */
ps_xfer_status ps_xfer_pool_free(ps_xfer_pool* pool,
                                 const ps_xfer_block* block);
/* The pool region's descriptor (as ps_xfer_region_descriptor), owned by the
 * pool handle. */
ps_xfer_status ps_xfer_pool_descriptor(const ps_xfer_pool* pool,
                                       const void** data, size_t* length);
/* Bytes in live blocks, and the pool's size. */
ps_xfer_status ps_xfer_pool_usage(const ps_xfer_pool* pool, size_t* used,
                                  size_t* capacity);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PS_XFER_C_PS_XFER_H_ */
