// HttpConnection: one accepted connection of the metrics exporter
// (exporter.h), non-blocking, driven by the exporter's poll loop: it reads
// request heads (http_request.h), answers each whole one (http_response.h)
// and writes the answer as the socket takes it, so that no peer can make
// the loop wait on it. Its deadline() is the loop's to enforce:
//   - kAwaitingRequest: a whole request head by `request` after the accept
//     or the end of the previous answer, however its bytes trickle in (a
//     per-read timeout would let a peer that drips a byte now and then hold
//     the connection for ever: slowloris);
//   - kResponding: the whole answer taken by `response` after it began (a
//     peer that does not read cannot hold it either);
//   - kLingering: after the last answer our side is shut and what the peer
//     still sends is discarded until it closes, at most `linger`, since
//     closing with unread input sends a reset that can destroy the answer
//     before the peer read it.
// Requests pipelined behind one are answered in order, one per round of the
// loop; none is read while an answer is being written, so a peer's backlog
// stays in its own socket.
//
// Thread-compatible: one thread (the exporter's) owns and drives it.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "metrics/http_request.h"
#include "metrics/http_response.h"
#include "net/unique_fd.h"

namespace ps::metrics {

class HttpConnection {
 public:
  using Clock = std::chrono::steady_clock;
  // Makes the answer to a parsed head (metrics/http_response.h's Respond
  // with the registry bound).
  using Responder = std::function<HttpResponse(const ParsedHead&)>;

  struct Deadlines {
    Clock::duration request = std::chrono::seconds(2);
    Clock::duration response = std::chrono::seconds(5);
    Clock::duration linger = std::chrono::seconds(1);
  };

  enum class State {
    kAwaitingRequest,
    kResponding,
    kLingering,
    kClosed,
  };

  // `fd`: a non-blocking accepted socket.
  HttpConnection(net::UniqueFd fd, Clock::time_point now,
                 const Deadlines& deadlines);
  HttpConnection(HttpConnection&&) = default;
  HttpConnection& operator=(HttpConnection&&) = default;

  // poll(2) reported the socket (revents): reads or writes what it can,
  // answers every whole request, never blocks.
  void OnEvents(short revents, Clock::time_point now, const Responder& respond);
  // Also right after the accept, as the request may be there already.
  void OnReadable(Clock::time_point now, const Responder& respond);
  // Answers the next request already read, if any (see pending_input()).
  void Continue(Clock::time_point now, const Responder& respond);
  // True while a request it read may wait to be answered (pipelined behind
  // the last one): each call answers one, so the loop calls Continue in its
  // next round without waiting for the socket.
  bool pending_input() const {
    return pending_input_ && state_ == State::kAwaitingRequest;
  }
  void Close();

  int fd() const { return fd_.get(); }
  // The peer's address, for log lines (taken at the accept: it stays known
  // after the connection closed).
  const std::string& peer() const { return peer_; }
  State state() const { return state_; }
  // The events to poll for; 0 once closed.
  short poll_events() const;
  Clock::time_point deadline() const { return deadline_; }
  // When the current wait (for a request, or for the peer to close while
  // lingering) began: the exporter makes room by closing the connection
  // that has waited longest.
  Clock::time_point waiting_since() const { return waiting_since_; }
  // Whether it waits for a next request after an answer and holds no byte
  // of one: a kept-alive client between scrapes (its deadline passing is no
  // news), not one that trickles.
  bool idle_after_answer() const {
    return state_ == State::kAwaitingRequest && answered_ && in_.empty();
  }
  // Why the last request that got an error answer could not be served (a
  // parse error, quoting the peer: see base/printable.h), then "".
  std::string TakeRejection();

 private:
  // Answers the whole requests in in_ while the answers go out at once.
  void Advance(Clock::time_point now, const Responder& respond);
  void StartResponse(Clock::time_point now, HttpResponse response);
  void Write(Clock::time_point now);
  void Discard();

  net::UniqueFd fd_;
  std::string peer_;
  Deadlines deadlines_;
  State state_ = State::kAwaitingRequest;
  Clock::time_point deadline_;
  Clock::time_point waiting_since_;
  std::string in_;      // received, not consumed; <= the head limit + 1
  size_t scanned_ = 0;  // in_'s bytes FindHeadEnd looked at
  bool saw_first_line_ = false;
  bool peer_done_ = false;      // end of stream read
  bool pending_input_ = false;  // in_ may hold another whole request
  std::string out_;             // the answer being written
  size_t sent_ = 0;
  bool close_after_ = false;
  bool answered_ = false;  // an answer went out whole
  std::string rejection_;
};

}  // namespace ps::metrics
