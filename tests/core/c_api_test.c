/* The C API (core/c/ps_xfer.h), compiled as C: argument checks, two
 * contexts in this process (tcp, then auto = shm), a closed port, and a
 * second process (c_api_test_process.c) reached over tcp and over shm. Exits
 * 0 only if every check passed; a failed check prints file:line and
 * ps_xfer_last_error(). */
#define _POSIX_C_SOURCE 200809L

#include "tests/core/c_api_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const uint64_t kVecOff[3] = {1024, 2048, 3072};
static const size_t kVecLen[3] = {10, 20, 30};

static void Fill(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (uint8_t)(seed + i * 31);
}
static int Matches(const uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != (uint8_t)(seed + i * 31)) return 0;
  }
  return 1;
}

static int StrerrorOfEveryCode(void) {
  for (int c = PS_XFER_OK; c <= PS_XFER_CANCELLED; ++c) {
    const char* name = ps_xfer_strerror(c);
    CHECK(name != NULL && name[0] != '\0');
  }
  CHECK(strcmp(ps_xfer_strerror(PS_XFER_OUT_OF_RANGE), "out of range") == 0);
  CHECK(ps_xfer_strerror(999)[0] != '\0');
  return 0;
}

static int NullAndBadArguments(void) {
  ps_xfer_context_options o;
  ps_xfer_context* ctx = (ps_xfer_context*)&o; /* must be reset to NULL */
  ps_xfer_region* region = NULL;
  ps_xfer_request* req = NULL;
  ps_xfer_endpoint* ep = NULL;
  ps_xfer_remote* remote = NULL;
  uint64_t word = 0;
  int done = 0;
  char byte = 0;
  CHECK_CODE(ps_xfer_context_options_init(NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_context_create(NULL, &ctx), PS_XFER_INVALID_ARGUMENT);
  CHECK(ctx == NULL);
  /* The message says which call and which argument. */
  CHECK(strstr(ps_xfer_last_error(), "ps_xfer_context_create: options") !=
        NULL);
  CHECK_OK(ps_xfer_context_options_init(&o));
  CHECK(strcmp(o.listen_host, "127.0.0.1") == 0 && o.peer_timeout_ms > 0);
  CHECK_CODE(ps_xfer_context_create(&o, NULL), PS_XFER_INVALID_ARGUMENT);
  o.transport = (ps_xfer_transport)42;
  CHECK_CODE(ps_xfer_context_create(&o, &ctx), PS_XFER_INVALID_ARGUMENT);
  o.transport = (ps_xfer_transport)-1;
  CHECK_CODE(ps_xfer_context_create(&o, &ctx), PS_XFER_INVALID_ARGUMENT);
  o.transport = PS_XFER_TRANSPORT_AUTO;
  o.secret = "short";
  o.secret_length = 5;
  CHECK_CODE(ps_xfer_context_create(&o, &ctx), PS_XFER_INVALID_ARGUMENT);
  CHECK(strstr(ps_xfer_last_error(), "secret") != NULL);
  o.secret = NULL;
  o.secret_length = 0;
  CHECK(o.copy_threads == 1);
  o.copy_threads = 0;
  CHECK_CODE(ps_xfer_context_create(&o, &ctx), PS_XFER_INVALID_ARGUMENT);
  CHECK(strstr(ps_xfer_last_error(), "copy_threads") != NULL);
  o.copy_threads = 1;
  CHECK(o.cpu_wakeup_latency_us == -1);
  o.cpu_wakeup_latency_us = -2;
  CHECK_CODE(ps_xfer_context_create(&o, &ctx), PS_XFER_INVALID_ARGUMENT);
  CHECK(strstr(ps_xfer_last_error(), "cpu_wakeup_latency_us") != NULL);
  CHECK_CODE(ps_xfer_allocate(NULL, 64, 0, &region), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_register(NULL, &byte, 1, 0, &region),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_deregister(NULL, NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_region_data(NULL, NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_connect(NULL, "127.0.0.1:1", &ep),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_import(NULL, "x", 1, &remote), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_remote_size(NULL, &word), PS_XFER_INVALID_ARGUMENT);
  req = (ps_xfer_request*)&o;
  CHECK_CODE(ps_xfer_put(NULL, &byte, 1, NULL, 0, &req),
             PS_XFER_INVALID_ARGUMENT);
  CHECK(req == NULL);
  CHECK(strstr(ps_xfer_last_error(), "ps_xfer_put: endpoint") != NULL);
  CHECK_CODE(ps_xfer_fetch_add64(NULL, NULL, 0, 1, &word, NULL),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_writev(NULL, NULL, 0, NULL, NULL),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_request_test(NULL, &done), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_request_wait(NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_batch_post(NULL, NULL, NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_batch_put(NULL, &byte, 1, NULL, 0),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_flush(NULL), PS_XFER_INVALID_ARGUMENT);
  CHECK_CODE(ps_xfer_context_fence(NULL), PS_XFER_INVALID_ARGUMENT);
  /* Releasing nothing is fine, as with free(NULL). */
  CHECK_OK(ps_xfer_context_destroy(NULL));
  CHECK_OK(ps_xfer_endpoint_destroy(NULL));
  CHECK_OK(ps_xfer_remote_destroy(NULL));
  CHECK_OK(ps_xfer_region_release(NULL));
  CHECK_OK(ps_xfer_request_free(NULL));
  CHECK_OK(ps_xfer_batch_destroy(NULL));
  return 0;
}

int NewContext(const char* name, ps_xfer_transport transport,
               ps_xfer_context** out) {
  ps_xfer_context_options o;
  CHECK_OK(ps_xfer_context_options_init(&o));
  o.name = name;
  o.transport = transport;
  o.peer_timeout_ms = 5000; /* a lost peer is noticed within seconds */
  CHECK_OK(ps_xfer_context_create(&o, out));
  return 0;
}

int Exercise(ps_xfer_endpoint* ep, ps_xfer_remote* rw, ps_xfer_remote* ro) {
  uint8_t src[256], dst[256], vec_dst[3][32];
  uint8_t vec_src[3][32];
  ps_xfer_segment segs[3];
  ps_xfer_request* req = NULL;
  ps_xfer_batch* batch = NULL;
  ps_xfer_remote* bad = NULL;
  uint64_t word = 0, previous = 0, size = 0, batch_previous = 7;
  int done = 0;

  CHECK_OK(ps_xfer_remote_size(rw, &size));
  CHECK(size == kSize);
  /* Allocated regions start zero-filled. */
  CHECK_OK(ps_xfer_get(ep, dst, 64, rw, 0, NULL));
  for (int i = 0; i < 64; ++i) CHECK(dst[i] == 0);

  /* put, then get polled with request_test. */
  Fill(src, 100, 1);
  CHECK_OK(ps_xfer_put(ep, src, 100, rw, kPutOff, &req));
  CHECK_OK(ps_xfer_request_wait(req));
  CHECK_OK(ps_xfer_request_free(req));
  memset(dst, 0, sizeof dst);
  CHECK_OK(ps_xfer_get(ep, dst, 100, rw, kPutOff, &req));
  for (int i = 0; i < 100000 && !done; ++i) {
    struct timespec ms = {0, 1000000};
    CHECK_OK(ps_xfer_request_test(req, &done));
    if (!done) nanosleep(&ms, NULL);
  }
  CHECK(done);
  CHECK_OK(ps_xfer_request_free(req));
  CHECK(Matches(dst, 100, 1));

  /* writev, readv. */
  for (int i = 0; i < 3; ++i) {
    Fill(vec_src[i], kVecLen[i], 10 + i);
    segs[i].local = vec_src[i];
    segs[i].remote_offset = kVecOff[i];
    segs[i].length = kVecLen[i];
  }
  CHECK_OK(ps_xfer_writev(ep, segs, 3, rw, &req));
  CHECK_OK(ps_xfer_request_free(req));
  for (int i = 0; i < 3; ++i) segs[i].local = vec_dst[i];
  CHECK_OK(ps_xfer_readv(ep, segs, 3, rw, NULL));
  for (int i = 0; i < 3; ++i) CHECK(Matches(vec_dst[i], kVecLen[i], 10 + i));

  /* Atomics: 0 + 5 + 7 = 12, swapped for 100; a stale swap changes nothing. */
  CHECK_OK(ps_xfer_fetch_add64(ep, rw, kAtomicOff, 5, &previous, &req));
  CHECK_OK(ps_xfer_request_free(req));
  CHECK(previous == 0);
  CHECK_OK(ps_xfer_fetch_add64(ep, rw, kAtomicOff, 7, &previous, NULL));
  CHECK(previous == 5);
  CHECK_OK(
      ps_xfer_compare_swap64(ep, rw, kAtomicOff, 12, 100, &previous, &req));
  CHECK_OK(ps_xfer_request_wait(req));
  CHECK_OK(ps_xfer_request_free(req));
  CHECK(previous == 12);
  CHECK_OK(
      ps_xfer_compare_swap64(ep, rw, kAtomicOff, 12, 200, &previous, NULL));
  CHECK(previous == 100);
  CHECK_OK(ps_xfer_get(ep, &word, 8, rw, kAtomicOff, NULL));
  CHECK(word == 100);

  /* put_with_notify: the word and the data it announces. */
  Fill(src, 256, 3);
  CHECK_OK(ps_xfer_put_with_notify(ep, src, 256, rw, kNotifyDataOff, rw,
                                   kNotifyOff, kNotifyValue, &req));
  CHECK_OK(ps_xfer_request_free(req));
  CHECK_OK(ps_xfer_get(ep, &word, 8, rw, kNotifyOff, NULL));
  CHECK(word == kNotifyValue);
  CHECK_OK(ps_xfer_get(ep, dst, 256, rw, kNotifyDataOff, NULL));
  CHECK(Matches(dst, 256, 3));

  /* A batch of four; then cleared, and posting it empty completes. */
  Fill(src, 128, 5);
  memset(dst, 0, sizeof dst);
  CHECK_OK(ps_xfer_batch_create(&batch));
  CHECK_OK(ps_xfer_batch_put(batch, src, 64, rw, kBatchOff));
  CHECK_OK(ps_xfer_batch_put(batch, src + 64, 64, rw, kBatchOff + 64));
  CHECK_OK(
      ps_xfer_batch_fetch_add64(batch, rw, kBatchAddOff, 3, &batch_previous));
  CHECK_OK(ps_xfer_batch_get(batch, dst, 100, rw, kPutOff));
  CHECK_OK(ps_xfer_batch_size(batch, &size));
  CHECK(size == 4);
  CHECK_OK(ps_xfer_batch_post(ep, batch, &req));
  CHECK_OK(ps_xfer_batch_clear(batch)); /* fine while the request runs */
  CHECK_OK(ps_xfer_request_wait(req));
  CHECK_OK(ps_xfer_request_free(req));
  CHECK(batch_previous == 0 && Matches(dst, 100, 1));
  CHECK_OK(ps_xfer_get(ep, dst, 128, rw, kBatchOff, NULL));
  CHECK(Matches(dst, 128, 5));
  CHECK_OK(ps_xfer_batch_size(batch, &size));
  CHECK(size == 0);
  CHECK_OK(ps_xfer_batch_post(ep, batch, NULL));
  CHECK_OK(ps_xfer_batch_destroy(batch));
  CHECK_OK(ps_xfer_flush(ep));

  /* The operation's own errors come back from its request. */
  CHECK_OK(ps_xfer_put(ep, src, 16, rw, kSize - 8, &req));
  CHECK_CODE(ps_xfer_request_wait(req), PS_XFER_OUT_OF_RANGE);
  CHECK(strstr(ps_xfer_last_error(), "out of range") != NULL);
  CHECK_CODE(ps_xfer_request_free(req), PS_XFER_OUT_OF_RANGE);
  CHECK_CODE(ps_xfer_get(ep, dst, 8, rw, kSize + 8, NULL),
             PS_XFER_OUT_OF_RANGE);
  CHECK_CODE(ps_xfer_put(ep, src, 8, ro, 0, NULL), PS_XFER_ACCESS_DENIED);
  CHECK(strstr(ps_xfer_last_error(), "access denied") != NULL);
  CHECK_CODE(ps_xfer_fetch_add64(ep, ro, 0, 1, &previous, NULL),
             PS_XFER_ACCESS_DENIED);
  CHECK_OK(ps_xfer_get(ep, dst, 8, ro, 0, NULL)); /* reading is allowed */
  CHECK_CODE(ps_xfer_fetch_add64(ep, rw, 3, 1, &previous, NULL),
             PS_XFER_INVALID_ARGUMENT); /* not 8-byte aligned */
  bad = ro;
  CHECK_CODE(ps_xfer_import(ep, "garbage!", 8, &bad), PS_XFER_INVALID_ARGUMENT);
  CHECK(bad == NULL);
  /* An atomic after every write, read with acquire by CheckOwnerView,
   * orders the writes with the owner's reads (for TSan: a progress thread of
   * the owner wrote the bytes, and the owner learns that they are there from
   * another process). */
  CHECK_OK(ps_xfer_fetch_add64(ep, rw, kAtomicOff, 0, &previous, NULL));
  CHECK(previous == 100);
  return 0;
}

int CheckOwnerView(const uint8_t* mem) {
  /* Exercise's last atomic (acquire): every write came before it. */
  CHECK(__atomic_load_n((const uint64_t*)(mem + kAtomicOff),
                        __ATOMIC_ACQUIRE) == 100);
  /* The notify word, then the data it announces. */
  CHECK(__atomic_load_n((const uint64_t*)(mem + kNotifyOff),
                        __ATOMIC_ACQUIRE) == kNotifyValue);
  CHECK(Matches(mem + kNotifyDataOff, 256, 3));
  CHECK(Matches(mem + kPutOff, 100, 1));
  CHECK(Matches(mem + kBatchOff, 128, 5));
  CHECK(*(const uint64_t*)(mem + kBatchAddOff) == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(Matches(mem + kVecOff[i], kVecLen[i], 10 + i));
  }
  return 0;
}

static int Import(ps_xfer_endpoint* ep, const ps_xfer_region* region,
                  ps_xfer_remote** out) {
  const void* desc = NULL;
  size_t len = 0;
  CHECK_OK(ps_xfer_region_descriptor(region, &desc, &len));
  CHECK(desc != NULL && len > 0);
  CHECK_OK(ps_xfer_import(ep, desc, len, out));
  return 0;
}

/* Two contexts in this process; `user` connects with `transport` and
 * must get `expected`. */
static int InProcess(ps_xfer_transport transport, ps_xfer_transport expected) {
  ps_xfer_context *owner = NULL, *user = NULL;
  ps_xfer_region *rw = NULL, *ro = NULL, *reg = NULL, *mine = NULL;
  ps_xfer_region* bad = NULL;
  ps_xfer_endpoint* ep = NULL;
  ps_xfer_remote *rrw = NULL, *rro = NULL, *rreg = NULL, *rmine = NULL;
  ps_xfer_transport got = PS_XFER_TRANSPORT_AUTO;
  const char* address = NULL;
  uint8_t* app = calloc(1, kSize); /* application memory, registered */
  uint8_t buf[64];
  void* data = NULL;
  const void* desc = NULL;
  size_t size = 0;
  uint64_t key = 0;
  CHECK(app != NULL);
  RUN(NewContext("owner", PS_XFER_TRANSPORT_AUTO, &owner));
  RUN(NewContext("user", transport, &user));
  CHECK_OK(ps_xfer_allocate(owner, kSize, PS_XFER_REMOTE_ALL, &rw));
  CHECK_OK(ps_xfer_allocate(owner, kSize, PS_XFER_REMOTE_READ, &ro));
  CHECK_OK(ps_xfer_register(owner, app, kSize,
                            PS_XFER_REMOTE_READ | PS_XFER_REMOTE_WRITE, &reg));
  CHECK_OK(ps_xfer_allocate(user, 64, PS_XFER_REMOTE_ALL, &mine));
  CHECK_CODE(ps_xfer_allocate(owner, 64, 1u << 5, &bad),
             PS_XFER_INVALID_ARGUMENT); /* an unknown access flag */
  CHECK(bad == NULL);
  CHECK_OK(ps_xfer_region_data(reg, &data));
  CHECK(data == app);
  CHECK_OK(ps_xfer_region_size(rw, &size));
  CHECK(size == kSize);
  CHECK_OK(ps_xfer_region_key(rw, &key));
  CHECK(key != 0);

  CHECK_OK(ps_xfer_context_address(owner, &address));
  CHECK_OK(ps_xfer_connect(user, address, &ep));
  CHECK_OK(ps_xfer_endpoint_transport(ep, &got));
  CHECK(got == expected);
  RUN(Import(ep, rw, &rrw));
  RUN(Import(ep, ro, &rro));
  RUN(Import(ep, reg, &rreg));
  /* A descriptor of another peer (the user's own region) is refused. */
  CHECK_OK(ps_xfer_region_descriptor(mine, &desc, &size));
  CHECK_CODE(ps_xfer_import(ep, desc, size, &rmine), PS_XFER_INVALID_ARGUMENT);
  CHECK(rmine == NULL);

  RUN(Exercise(ep, rrw, rro));
  CHECK_OK(ps_xfer_region_data(rw, &data));
  RUN(CheckOwnerView(data));

  /* Registered application memory, then deregistered. */
  Fill(buf, 64, 9);
  CHECK_OK(ps_xfer_put(ep, buf, 64, rreg, 40, NULL));
  CHECK(Matches(app + 40, 64, 9));
  CHECK_CODE(ps_xfer_deregister(user, reg), PS_XFER_INVALID_ARGUMENT);
  CHECK_OK(ps_xfer_deregister(owner, reg));
  CHECK_CODE(ps_xfer_put(ep, buf, 64, rreg, 40, NULL), PS_XFER_NOT_REGISTERED);
  /* The target's refusal counts for the next flush too (the endpoint's
   * checks before sending, as in Exercise, do not). */
  CHECK_CODE(ps_xfer_flush(ep), PS_XFER_NOT_REGISTERED);
  CHECK_OK(ps_xfer_flush(ep));

  CHECK_OK(ps_xfer_context_fence(user));
  CHECK_OK(ps_xfer_remote_destroy(rreg));
  CHECK_OK(ps_xfer_remote_destroy(rro));
  CHECK_OK(ps_xfer_remote_destroy(rrw));
  CHECK_OK(ps_xfer_endpoint_destroy(ep));
  CHECK_OK(ps_xfer_deregister(owner, ro));
  CHECK_OK(ps_xfer_context_destroy(owner));
  CHECK_OK(ps_xfer_region_release(rw)); /* after its context handle */
  CHECK_OK(ps_xfer_deregister(user, mine));
  CHECK_OK(ps_xfer_context_destroy(user));
  free(app);
  return 0;
}

/* A context that is gone: connecting to its port fails, as a network error
 * or a lost peer. */
static int ClosedPort(void) {
  ps_xfer_context *gone = NULL, *user = NULL;
  ps_xfer_endpoint* ep = (ps_xfer_endpoint*)&gone;
  const char* address = NULL;
  char copy[128];
  ps_xfer_status s;
  RUN(NewContext("gone", PS_XFER_TRANSPORT_AUTO, &gone));
  CHECK_OK(ps_xfer_context_address(gone, &address));
  CHECK(strlen(address) < sizeof copy);
  strcpy(copy, address);
  CHECK_OK(ps_xfer_context_destroy(gone));
  RUN(NewContext("user", PS_XFER_TRANSPORT_TCP, &user));
  s = ps_xfer_connect(user, copy, &ep);
  CHECK(s == PS_XFER_NETWORK || s == PS_XFER_PEER_LOST);
  CHECK(ep == NULL && ps_xfer_last_error()[0] != '\0');
  CHECK_OK(ps_xfer_context_destroy(user));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--serve") == 0) {
    return Serve(atoi(argv[2]), atoi(argv[3]));
  }
  /* The auto case must see shm, whatever the caller's environment says. */
  unsetenv("XFER_TRANSPORT");
  RUN(StrerrorOfEveryCode());
  RUN(NullAndBadArguments());
  RUN(InProcess(PS_XFER_TRANSPORT_TCP, PS_XFER_TRANSPORT_TCP));
  RUN(InProcess(PS_XFER_TRANSPORT_AUTO, PS_XFER_TRANSPORT_SHM));
  RUN(ClosedPort());
  RUN(PoolsEventsAndFences(PS_XFER_TRANSPORT_TCP));
  RUN(PoolsEventsAndFences(PS_XFER_TRANSPORT_AUTO));
  RUN(WithChild());
  printf("c_api_test: all checks passed\n");
  return 0;
}
