// PushQueue: queued pushes run in order on the queue's thread, their
// handles return their Status, Drain waits for what was queued before it,
// and destroying the queue runs what is still queued.
#include "client/push_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace ps::worker {
namespace {

TEST(PushQueueTest, PushesRunInOrderOffTheCallersThread) {
  PushQueue queue;
  std::vector<int> ran;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> elsewhere{true};
  std::vector<PendingOp> handles;
  for (int i = 0; i < 100; ++i) {
    handles.push_back(queue.Queue([&, i] {
      if (std::this_thread::get_id() == caller) elsewhere = false;
      ran.push_back(i);
      return i == 7 ? InvalidArgument("push 7") : Status::OK();
    }));
  }
  for (int i = 0; i < 100; ++i) {
    Status s = handles[i].Wait();
    EXPECT_EQ(s.ok(), i != 7) << i;
  }
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_TRUE(elsewhere);
}

TEST(PushQueueTest, QueueReturnsBeforeThePushRunsAndDrainWaitsForIt) {
  PushQueue queue;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> done{false};
  PendingOp op = queue.Queue([&] {
    released.wait();
    done = true;
    return Status::OK();
  });
  EXPECT_FALSE(done);  // queued, not run: the push waits for `release`
  std::thread drainer([&] {
    queue.Drain();
    EXPECT_TRUE(done);
  });
  release.set_value();
  drainer.join();
  EXPECT_TRUE(op.Wait().ok());
}

TEST(PushQueueTest, DestroyingTheQueueRunsWhatIsQueuedAndHandlesOutliveIt) {
  std::atomic<int> ran{0};
  std::vector<PendingOp> handles;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  {
    PushQueue queue;
    handles.push_back(queue.Queue([&] {
      open.wait();
      ++ran;
      return Status::OK();
    }));
    for (int i = 0; i < 9; ++i) {
      handles.push_back(queue.Queue([&] {
        ++ran;
        return Status::OK();
      }));
    }
    EXPECT_EQ(ran, 0);  // the first push still waits at the gate
    gate.set_value();
  }  // the destructor runs all ten before it returns
  EXPECT_EQ(ran, 10);
  for (PendingOp& op : handles) EXPECT_TRUE(op.Wait().ok());
}

TEST(PushQueueTest, DrainOfAnEmptyQueueReturnsAtOnce) {
  PushQueue queue;
  queue.Drain();
}

}  // namespace
}  // namespace ps::worker
