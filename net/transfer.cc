#include "net/transfer.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "net/socket_error.h"

namespace ps::net {
namespace {

// Drops the leading `n` bytes from an iovec array, and any empty entries
// that then lead it.
void Advance(iovec*& iov, size_t& count, size_t n) {
  while (count > 0 && n >= iov->iov_len) {
    n -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0) {
    iov->iov_base = static_cast<char*>(iov->iov_base) + n;
    iov->iov_len -= n;
  }
}

size_t Remaining(const iovec* iov, size_t count) {
  size_t left = 0;
  for (size_t i = 0; i < count; ++i) left += iov[i].iov_len;
  return left;
}

// Milliseconds left until `deadline` for poll(2): 0 when it passed, and
// rounded up so that poll never returns a hair early and spins.
int PollMsUntil(Deadline deadline) {
  auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// Waits for `events` on fd until the deadline: true when ready (or the
// socket has an error or hang-up to report), false at the deadline.
StatusOr<bool> WaitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, PollMsUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) return SocketError("poll", errno);
  }
}

std::string Named(std::string_view what, std::string_view text) {
  if (what.empty()) return std::string(text);
  std::string s(what);
  s += ": ";
  s += text;
  return s;
}

// Takes the SCM_RIGHTS descriptors of a received message: the last one
// into *keep, the others closed (a peer may send more than asked for).
void TakeDescriptors(msghdr* msg, UniqueFd* keep) {
  if (msg->msg_controllen == 0) return;
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
      *keep = UniqueFd(fd);
    }
  }
}

}  // namespace

Status Transfer(int fd, iovec* iov, size_t count,
                const TransferOptions& options, size_t* moved) {
  const bool sending = options.direction == Direction::kSend;
  const bool bounded = options.deadline != Deadline::max();
  int flags = options.flags;
  if (sending) flags |= MSG_NOSIGNAL;
  if (bounded || options.until_would_block) flags |= MSG_DONTWAIT;
  if (!sending && options.received_fd != nullptr) flags |= MSG_CMSG_CLOEXEC;
  bool fd_to_attach = sending && options.fd_to_send >= 0;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  size_t done = 0;
  auto finish = [&](Status s) {
    if (moved != nullptr) *moved = done;
    return s;
  };

  Advance(iov, count, 0);
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = std::min<size_t>(count, IOV_MAX);
    if (fd_to_attach) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &options.fd_to_send, sizeof(int));
    } else if (options.received_fd != nullptr && !sending) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
    }
    const ssize_t n =
        sending ? sendmsg(fd, &msg, flags) : recvmsg(fd, &msg, flags);
    if (n > 0 || (n == 0 && sending)) {
      // The descriptor went with the first bytes; the rest go plainly.
      fd_to_attach = false;
      if (!sending && options.received_fd != nullptr) {
        TakeDescriptors(&msg, options.received_fd);
      }
      if (options.watch != nullptr) options.watch->OnProgress();
      done += static_cast<size_t>(n);
      Advance(iov, count, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      return finish(PeerLost(Named(options.what, "connection closed by peer")));
    }
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      return finish(
          SocketError(Named(options.what, sending ? "send" : "recv"), err));
    }
    if (options.until_would_block) return finish(Status::OK());
    if (options.watch != nullptr) {
      Status verdict = options.watch->OnIdle();
      if (!verdict.ok()) return finish(std::move(verdict));
      continue;
    }
    auto ready = WaitFor(fd, sending ? POLLOUT : POLLIN, options.deadline);
    if (!ready.ok()) return finish(ready.status());
    if (!*ready) {
      const std::string left = std::to_string(Remaining(iov, count));
      return finish(Timeout(Named(
          options.what,
          sending ? "the peer did not take " + left + " more bytes in time"
                  : left + " bytes still missing at the deadline")));
    }
  }
  return finish(Status::OK());
}

namespace {

Status Move(int fd, Direction direction, const void* data, size_t len,
            TransferOptions options, size_t* moved = nullptr) {
  iovec iov{const_cast<void*>(data), len};
  options.direction = direction;
  return Transfer(fd, &iov, 1, options, moved);
}

}  // namespace

Status SendAll(int fd, const void* data, size_t len) {
  return Move(fd, Direction::kSend, data, len, {});
}

Status RecvAll(int fd, void* data, size_t len) {
  return Move(fd, Direction::kRecv, data, len, {.flags = MSG_WAITALL});
}

Status SendAllV(int fd, iovec* iov, size_t count) {
  return Transfer(fd, iov, count, {.direction = Direction::kSend});
}

Status RecvAllV(int fd, iovec* iov, size_t count) {
  return Transfer(fd, iov, count,
                  {.direction = Direction::kRecv, .flags = MSG_WAITALL});
}

Status Skip(int fd, uint64_t len) {
  char scratch[64 * 1024];
  while (len > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(len, sizeof(scratch)));
    PS_RETURN_IF_ERROR(RecvAll(fd, scratch, n));
    len -= n;
  }
  return Status::OK();
}

Status SendAllBefore(int fd, const void* data, size_t len, Deadline deadline,
                     std::string_view what) {
  return Move(fd, Direction::kSend, data, len,
              {.deadline = deadline, .what = what});
}

Status RecvAllBefore(int fd, void* data, size_t len, Deadline deadline,
                     std::string_view what) {
  return Move(fd, Direction::kRecv, data, len,
              {.deadline = deadline, .what = what});
}

StatusOr<size_t> SendSome(int fd, const void* data, size_t len) {
  size_t moved = 0;
  PS_RETURN_IF_ERROR(Move(fd, Direction::kSend, data, len,
                          {.until_would_block = true}, &moved));
  return moved;
}

StatusOr<size_t> RecvSome(int fd, void* data, size_t len,
                          std::string_view what) {
  size_t moved = 0;
  PS_RETURN_IF_ERROR(Move(fd, Direction::kRecv, data, len,
                          {.until_would_block = true, .what = what}, &moved));
  return moved;
}

StatusOr<bool> WaitReadable(int fd, Deadline deadline) {
  return WaitFor(fd, POLLIN, deadline);
}

Status SendWithFd(int fd, const void* data, size_t len, int fd_to_send) {
  return Move(fd, Direction::kSend, data, len, {.fd_to_send = fd_to_send});
}

Status RecvWithFd(int fd, void* data, size_t len, UniqueFd* received) {
  return Move(fd, Direction::kRecv, data, len,
              {.flags = MSG_WAITALL, .received_fd = received});
}

}  // namespace ps::net
