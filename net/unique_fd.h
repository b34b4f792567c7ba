// net::UniqueFd: sole owner of a file descriptor (a socket, a memfd, an
// eventfd); closes it on destruction. net::Deadline: the point in time by
// which a socket operation must be done.
//
// Thread safety: a UniqueFd is a value; one thread at a time may change it
// (Reset, Release, assignment). Using the descriptor it holds from several
// threads is the caller's business.
#pragma once

#include <chrono>
#include <cstdint>

namespace ps::net {

using Deadline = std::chrono::steady_clock::time_point;

// Deadline `ms` milliseconds from now.
Deadline DeadlineIn(int64_t ms);
// Milliseconds left until `deadline`, rounded up, and at least 1: a timeout
// argument that must be positive (ConnectTcp's) when little or none is left.
int MsUntil(Deadline deadline);

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the descriptor (if any) and holds none.
  void Reset();

 private:
  int fd_ = -1;
};

}  // namespace ps::net
