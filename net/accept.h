// Accepting from a listener that one thread polls beside other sockets, so
// that no outcome of accept(2) can make that thread spin or stop.
//
// The outcome that matters is running out of file descriptors (EMFILE: this
// process's limit, ENFILE: the system's, or no memory for a socket): the
// connection stays in the listener's backlog and poll(2) reports the
// listener readable again at once, so a loop that simply polls again spins
// on a full core and logs without end. The caller must stop polling that
// listener for a while (kOutOfDescriptorsPause) and free a descriptor if it
// can.
//
// Thread-safety: no shared state.
#pragma once

#include <chrono>
#include <string>

#include "net/unique_fd.h"

namespace ps::net {

enum class AcceptResult {
  kAccepted,          // fd is the new connection
  kNoneWaiting,       // the backlog is empty
  kOutOfDescriptors,  // EMFILE, ENFILE, ENOBUFS or ENOMEM: pause, then retry
  kFailed,            // another error (error says which); try again later
};

struct Accepted {
  AcceptResult result = AcceptResult::kNoneWaiting;
  UniqueFd fd;  // non-blocking and close-on-exec
  int error = 0;
};

// How long a listener stays out of the poll set after kOutOfDescriptors.
inline constexpr std::chrono::milliseconds kOutOfDescriptorsPause{100};

// Accepts one connection from a non-blocking listener; EINTR and a
// connection aborted before it was taken are retried.
Accepted AcceptNonBlocking(int listen_fd);

// For the log line after kOutOfDescriptors: what ran out and this process's
// limit, e.g. "out of file descriptors (accept: Too many open files; the
// process may open 256, ulimit -n)".
std::string OutOfDescriptorsText(int error);

}  // namespace ps::net
