#include "table/index_spares.h"

#include <utility>

namespace ps::table {

IndexSpares::~IndexSpares() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  asked_cv_.notify_one();
  thread_.join();
}

void IndexSpares::Ask(size_t slots, Deliver deliver) {
  {
    std::lock_guard lock(mu_);
    asked_.push_back({slots, std::move(deliver)});
  }
  asked_cv_.notify_one();
}

void IndexSpares::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    asked_cv_.wait(lock, [&] { return stop_ || !asked_.empty(); });
    if (stop_) return;
    Asked next = std::move(asked_.front());
    asked_.pop_front();
    lock.unlock();
    next.deliver(RowIndex::EmptySlots(next.slots));
    lock.lock();
  }
}

}  // namespace ps::table
