#include "metrics/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "net/connect.h"

namespace ps::metrics {

HttpConnection::HttpConnection(net::UniqueFd fd, Clock::time_point now,
                               const Deadlines& deadlines)
    : fd_(std::move(fd)),
      peer_(net::PeerAddress(fd_.get())),
      deadlines_(deadlines),
      deadline_(now + deadlines.request),
      waiting_since_(now) {}

short HttpConnection::poll_events() const {
  switch (state_) {
    case State::kAwaitingRequest:
    case State::kLingering:
      return POLLIN;
    case State::kResponding:
      return POLLOUT;
    case State::kClosed:
      break;
  }
  return 0;
}

void HttpConnection::OnEvents(short revents, Clock::time_point now,
                              const Responder& respond) {
  // POLLERR and POLLHUP come whatever was asked: the read or write that
  // follows reports them.
  if (state_ == State::kResponding) {
    if (revents & (POLLOUT | POLLERR | POLLHUP)) {
      Write(now);
      Advance(now, respond);
    }
  } else if (revents & (POLLIN | POLLERR | POLLHUP)) {
    OnReadable(now, respond);
  }
}

void HttpConnection::OnReadable(Clock::time_point now,
                                const Responder& respond) {
  if (state_ == State::kLingering) {
    Discard();
    return;
  }
  if (state_ != State::kAwaitingRequest) return;
  // At most one byte past the limit: enough to tell a head too large, and
  // no peer makes this read more than that per request.
  char buf[4096];
  while (in_.size() <= kMaxRequestHeadBytes) {
    const size_t want =
        std::min(sizeof(buf), kMaxRequestHeadBytes + 1 - in_.size());
    const ssize_t n = recv(fd_.get(), buf, want, 0);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      peer_done_ = true;
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else {
      Close();  // reset by the peer, or worse: nobody to answer
      return;
    }
  }
  Advance(now, respond);
}

void HttpConnection::Continue(Clock::time_point now, const Responder& respond) {
  Advance(now, respond);
}

void HttpConnection::Advance(Clock::time_point now, const Responder& respond) {
  // One request per call: a peer that pipelines hundreds gets one answer
  // per round of the loop, as every other connection does (the loop calls
  // Continue while pending_input() says there may be more).
  if (state_ == State::kAwaitingRequest) {
    pending_input_ = false;
    // Parse only when that can decide something: the first line became
    // whole (a bad one is refused at once), the head did, or the buffer
    // reached the limit. A head sent a byte at a time costs O(bytes).
    bool decide = in_.size() >= kMaxRequestHeadBytes;
    if (!saw_first_line_ && in_.find('\n', scanned_) != std::string::npos) {
      saw_first_line_ = true;
      decide = true;
    }
    if (FindHeadEnd(in_, scanned_) != std::string::npos) decide = true;
    scanned_ = in_.size();
    ParsedHead head;
    if (decide) head = ParseRequestHead(in_);
    if (decide && head.outcome != ParseOutcome::kIncomplete) {
      if (head.outcome == ParseOutcome::kComplete) {
        in_.erase(0, head.request.head_bytes);
      } else {
        rejection_ = head.error;
        in_.clear();
      }
      scanned_ = 0;
      saw_first_line_ = false;
      pending_input_ = !in_.empty();
      StartResponse(now, respond(head));
    }
  }
  // The peer sent its last byte and every request it held is answered.
  if (state_ == State::kAwaitingRequest && peer_done_ && !pending_input_) {
    Close();
  }
}

void HttpConnection::StartResponse(Clock::time_point now,
                                   HttpResponse response) {
  out_ = std::move(response.bytes);
  sent_ = 0;
  close_after_ = response.close;
  state_ = State::kResponding;
  deadline_ = now + deadlines_.response;
  Write(now);
}

void HttpConnection::Write(Clock::time_point now) {
  while (sent_ < out_.size()) {
    // MSG_NOSIGNAL: a peer gone away is an error here, not a SIGPIPE.
    const ssize_t n =
        send(fd_.get(), out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (n >= 0) {
      sent_ += static_cast<size_t>(n);
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;  // the rest when poll says POLLOUT
    } else {
      Close();
      return;
    }
  }
  std::string().swap(out_);  // an idle connection holds no answer's memory
  sent_ = 0;
  answered_ = true;
  waiting_since_ = now;
  if (close_after_) {
    // FIN now; the peer reads the answer, then closes its side.
    shutdown(fd_.get(), SHUT_WR);
    state_ = State::kLingering;
    deadline_ = now + deadlines_.linger;
    std::string().swap(in_);
    if (peer_done_) Close();
    return;
  }
  state_ = State::kAwaitingRequest;
  deadline_ = now + deadlines_.request;
}

void HttpConnection::Discard() {
  // A few reads per wakeup: a peer that floods us while we linger gets no
  // more of the loop than one that does not.
  char buf[4096];
  for (int i = 0; i < 4; ++i) {
    const ssize_t n = recv(fd_.get(), buf, sizeof(buf), 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close();  // its end of stream (or an error): done
    return;
  }
}

void HttpConnection::Close() {
  fd_.Reset();
  state_ = State::kClosed;
  std::string().swap(in_);
  std::string().swap(out_);
}

std::string HttpConnection::TakeRejection() {
  std::string r;
  r.swap(rejection_);
  return r;
}

}  // namespace ps::metrics
