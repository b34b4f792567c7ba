// PushQueue: the pushes PsClient::PushAsync queued, run one after another,
// in the order they were queued, on the queue's one thread (started with
// the first push queued). Why: a push's own work (summing duplicates,
// encoding packets, waiting for inbox credit, posting and flushing) then
// overlaps what the caller does next instead of delaying it.
//
// Thread-safe: any thread queues, waits and drains. The destructor runs
// what is queued first; a handle may outlive the queue.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "base/status.h"
#include "client/pending_op.h"

namespace ps::worker {

class PushQueue {
 public:
  using Push = std::function<Status()>;

  PushQueue() = default;
  ~PushQueue();
  PushQueue(const PushQueue&) = delete;
  PushQueue& operator=(const PushQueue&) = delete;

  // Queues `push`; the handle's Wait() returns its Status once it ran.
  PendingOp Queue(Push push);
  // Returns once every push queued before the call ran.
  void Drain();

 private:
  struct Entry {
    Push push;
    std::promise<Status> result;
  };
  class Waiter;  // the PendingOp::Rest of a queued push

  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;  // a push queued, a push done, stop
  std::deque<Entry> queue_;
  uint64_t queued_ = 0;  // pushes queued so far
  uint64_t ran_ = 0;     // pushes that ran so far
  bool stop_ = false;
  std::thread thread_;  // started by the first Queue
};

}  // namespace ps::worker
