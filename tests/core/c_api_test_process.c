/* The C API across processes: this test binary, run again with "--serve",
 * owns two regions that this process exercises, one over tcp and one over
 * shm, and then checks what landed in its own memory. The child is always
 * reaped, and killed first when the parent's checks fail; it exits by
 * itself when the parent goes away (its pipe ends). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/core/c_api_test.h"

static int WriteAll(int fd, const void* data, size_t n) {
  const char* p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    CHECK(w > 0);
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int ReadAll(int fd, void* data, size_t n) {
  char* p = data;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r > 0); /* 0: the other side closed its end */
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* A length-prefixed message on a pipe. */
static int SendBlob(int fd, const void* data, size_t n) {
  uint32_t len = (uint32_t)n;
  RUN(WriteAll(fd, &len, sizeof len));
  RUN(WriteAll(fd, data, n));
  return 0;
}

static int ReadBlob(int fd, void* data, size_t capacity, size_t* n) {
  uint32_t len = 0;
  RUN(ReadAll(fd, &len, sizeof len));
  CHECK(len <= capacity);
  RUN(ReadAll(fd, data, len));
  *n = len;
  return 0;
}

static int SendDescriptor(int fd, const ps_xfer_region* region) {
  const void* desc = NULL;
  size_t len = 0;
  CHECK_OK(ps_xfer_region_descriptor(region, &desc, &len));
  RUN(SendBlob(fd, desc, len));
  return 0;
}

int Serve(int to_parent, int from_parent) {
  ps_xfer_context* ctx = NULL;
  ps_xfer_region *a = NULL, *b = NULL, *ro = NULL;
  const char* address = NULL;
  void* data = NULL;
  char verify = 0;
  alarm(120); /* a stuck parent does not keep this process for long */
  RUN(NewContext("child", PS_XFER_TRANSPORT_AUTO, &ctx));
  CHECK_OK(ps_xfer_allocate(ctx, kSize, PS_XFER_REMOTE_ALL, &a));
  CHECK_OK(ps_xfer_allocate(ctx, kSize, PS_XFER_REMOTE_ALL, &b));
  CHECK_OK(ps_xfer_allocate(ctx, kSize, PS_XFER_REMOTE_READ, &ro));
  CHECK_OK(ps_xfer_context_address(ctx, &address));
  RUN(SendBlob(to_parent, address, strlen(address)));
  RUN(SendDescriptor(to_parent, a));
  RUN(SendDescriptor(to_parent, b));
  RUN(SendDescriptor(to_parent, ro));
  /* The parent is done with both regions when it says so. */
  RUN(ReadAll(from_parent, &verify, 1));
  CHECK(verify == 'v');
  CHECK_OK(ps_xfer_region_data(a, &data));
  RUN(CheckOwnerView(data)); /* written over tcp */
  CHECK_OK(ps_xfer_region_data(b, &data));
  RUN(CheckOwnerView(data)); /* written over shm */
  CHECK_OK(ps_xfer_deregister(ctx, a));
  CHECK_OK(ps_xfer_deregister(ctx, b));
  CHECK_OK(ps_xfer_deregister(ctx, ro));
  CHECK_OK(ps_xfer_context_destroy(ctx));
  close(to_parent);
  close(from_parent);
  return 0;
}

static int Import(ps_xfer_endpoint* ep, const void* desc, size_t len,
                  ps_xfer_remote** out) {
  CHECK_OK(ps_xfer_import(ep, desc, len, out));
  return 0;
}

/* The parent's side; *reaped = 1 once it has waited for the child. */
static int TalkToChild(pid_t pid, int from_child, int to_child, int* reaped) {
  char address[256];
  uint8_t desc[3][1024];
  size_t len[4];
  ps_xfer_context *tcp = NULL, *shm = NULL;
  ps_xfer_endpoint *ep_tcp = NULL, *ep_shm = NULL;
  ps_xfer_remote *a = NULL, *ro_tcp = NULL, *b = NULL, *ro_shm = NULL;
  ps_xfer_transport got = PS_XFER_TRANSPORT_AUTO;
  uint8_t byte = 1;
  int status = 0;
  RUN(ReadBlob(from_child, address, sizeof address - 1, &len[3]));
  address[len[3]] = '\0';
  for (int i = 0; i < 3; ++i) {
    RUN(ReadBlob(from_child, desc[i], sizeof desc[i], &len[i]));
  }
  RUN(NewContext("parent-tcp", PS_XFER_TRANSPORT_TCP, &tcp));
  RUN(NewContext("parent-auto", PS_XFER_TRANSPORT_AUTO, &shm));
  CHECK_OK(ps_xfer_connect(tcp, address, &ep_tcp));
  CHECK_OK(ps_xfer_endpoint_transport(ep_tcp, &got));
  CHECK(got == PS_XFER_TRANSPORT_TCP);
  CHECK_OK(ps_xfer_connect(shm, address, &ep_shm));
  CHECK_OK(ps_xfer_endpoint_transport(ep_shm, &got));
  CHECK(got == PS_XFER_TRANSPORT_SHM);
  RUN(Import(ep_tcp, desc[0], len[0], &a));
  RUN(Import(ep_tcp, desc[2], len[2], &ro_tcp));
  RUN(Import(ep_shm, desc[1], len[1], &b));
  RUN(Import(ep_shm, desc[2], len[2], &ro_shm));

  RUN(Exercise(ep_tcp, a, ro_tcp));
  RUN(Exercise(ep_shm, b, ro_shm));
  /* A remote works only through the endpoint that imported it. */
  CHECK_CODE(ps_xfer_put(ep_tcp, &byte, 1, b, 0, NULL),
             PS_XFER_INVALID_ARGUMENT);
  CHECK_OK(ps_xfer_context_fence(tcp));
  CHECK_OK(ps_xfer_context_fence(shm));

  RUN(WriteAll(to_child, "v", 1));
  CHECK(waitpid(pid, &status, 0) == pid);
  *reaped = 1;
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* The child is gone: the peer is reported lost, nothing hangs. */
  CHECK_CODE(ps_xfer_put(ep_tcp, &byte, 1, a, 0, NULL), PS_XFER_PEER_LOST);

  CHECK_OK(ps_xfer_remote_destroy(a));
  CHECK_OK(ps_xfer_remote_destroy(ro_tcp));
  CHECK_OK(ps_xfer_remote_destroy(b));
  CHECK_OK(ps_xfer_remote_destroy(ro_shm));
  CHECK_OK(ps_xfer_endpoint_destroy(ep_tcp));
  CHECK_OK(ps_xfer_endpoint_destroy(ep_shm));
  CHECK_OK(ps_xfer_context_destroy(tcp));
  CHECK_OK(ps_xfer_context_destroy(shm));
  return 0;
}

int WithChild(void) {
  int up[2], down[2], status = 0, reaped = 0, rc;
  char exe[] = "/proc/self/exe", serve[] = "--serve";
  char up_fd[16], down_fd[16];
  char* argv[5];
  pid_t pid;
  /* A write to a dead child's pipe fails instead of killing the test. */
  signal(SIGPIPE, SIG_IGN);
  CHECK(pipe(up) == 0);
  CHECK(pipe(down) == 0);
  snprintf(up_fd, sizeof up_fd, "%d", up[1]);
  snprintf(down_fd, sizeof down_fd, "%d", down[0]);
  argv[0] = exe;
  argv[1] = serve;
  argv[2] = up_fd;
  argv[3] = down_fd;
  argv[4] = NULL;
  /* The child only closes and execs: safe in a process with threads. */
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(up[0]);
    close(down[1]); /* so that the child sees EOF when the parent ends */
    execv(exe, argv);
    _exit(127);
  }
  close(up[1]);
  close(down[0]);
  rc = TalkToChild(pid, up[0], down[1], &reaped);
  close(up[0]);
  close(down[1]);
  if (!reaped) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECK(rc == 0);
  return 0;
}
