/* What the two files of the C API test share (c_api_test.c, the checks in
 * one process; c_api_test_process.c, a second process): a check macro that
 * prints file:line and ps_xfer_last_error() and returns 1, and the
 * operations every owner of a region is checked with. */
#ifndef PS_TESTS_CORE_C_API_TEST_H_
#define PS_TESTS_CORE_C_API_TEST_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/c/ps_xfer.h"

#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, \
              __LINE__, #cond, ps_xfer_last_error());                         \
      return 1;                                                               \
    }                                                                         \
  } while (0)
/* `expr` returns `code`; a failure must also leave a message. */
#define CHECK_CODE(expr, code)                                                \
  do {                                                                        \
    ps_xfer_status got_ = (expr);                                             \
    if (got_ != (code) || (got_ != PS_XFER_OK && !*ps_xfer_last_error())) {   \
      fprintf(stderr, "%s:%d: %s gave \"%s\", not \"%s\" (last error: %s)\n", \
              __FILE__, __LINE__, #expr, ps_xfer_strerror(got_),              \
              ps_xfer_strerror(code), ps_xfer_last_error());                  \
      return 1;                                                               \
    }                                                                         \
  } while (0)
#define CHECK_OK(expr) CHECK_CODE(expr, PS_XFER_OK)
/* A sub-test: its nonzero result fails the caller at this line. */
#define RUN(call) CHECK((call) == 0)

enum {
  kSize = 4096,
  kAtomicOff = 64,      /* fetch_add / compare_swap word */
  kBatchAddOff = 72,    /* the batch's fetch_add word */
  kPutOff = 128,        /* 100 bytes */
  kNotifyOff = 256,     /* the notify word */
  kNotifyDataOff = 512, /* 256 bytes */
  kBatchOff = 3584,     /* two puts of 64 bytes */
  kNotifyValue = 0xC0FFEE
};
/* A context on loopback named `name`, connecting with `transport`. */
int NewContext(const char* name, ps_xfer_transport transport,
               ps_xfer_context** out);
/* Every operation against `rw` (a fresh kSize region allowing everything)
 * and the error paths against `ro` (remote read only), checked through the
 * endpoint alone, so that the owner may be another process. */
int Exercise(ps_xfer_endpoint* ep, ps_xfer_remote* rw, ps_xfer_remote* ro);
/* What Exercise left in the region, read in the owner's own memory. */
int CheckOwnerView(const uint8_t* mem);

/* The second process: Serve is its main (the test binary run with "--serve
 * WRITE_FD READ_FD"); WithChild starts it and checks it over tcp and shm. */
int Serve(int to_parent, int from_parent);
/* Registered pools, completion events and fences (c_api_events.c). */
int PoolsEventsAndFences(ps_xfer_transport transport);
int WithChild(void);

#endif /* PS_TESTS_CORE_C_API_TEST_H_ */
