#include "client/push_queue.h"

#include <exception>
#include <string>
#include <system_error>
#include <utility>

namespace ps::worker {

class PushQueue::Waiter final : public PendingOp::Rest {
 public:
  explicit Waiter(std::future<Status> result) : result_(std::move(result)) {}
  Status Finish() override { return result_.get(); }

 private:
  std::future<Status> result_;
};

PushQueue::~PushQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

PendingOp PushQueue::Queue(Push push) {
  Entry entry{std::move(push), {}};
  std::future<Status> result = entry.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error& e) {
        return PendingOp(ResourceExhausted(
            std::string("cannot start the client's push thread: ") + e.what()));
      }
    }
    queue_.push_back(std::move(entry));
    ++queued_;
  }
  cv_.notify_all();
  return PendingOp(std::make_unique<Waiter>(std::move(result)));
}

void PushQueue::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = queued_;
  cv_.wait(lock, [&] { return ran_ >= target; });
}

void PushQueue::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    // Stopping runs what is queued first: its callers wait on it.
    if (queue_.empty()) return;
    Entry entry = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Status status;
    try {
      status = entry.push();
    } catch (const std::exception& e) {  // bad_alloc, in practice
      status = Internal(std::string("push failed: ") + e.what());
    }
    entry.result.set_value(std::move(status));
    entry = {};  // what the push captured goes before Drain returns
    lock.lock();
    ++ran_;
    cv_.notify_all();
  }
}

}  // namespace ps::worker
