#include "herd/core/thread_pool.hpp"

#include <algorithm>
#include <atomic>

namespace herd {

ThreadPool::ThreadPool(std::size_t num_threads) {
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(num_threads);
  for (std::size_t i = 0; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void ThreadPool::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

/// Shared state of one parallel_for: chunks are claimed through an atomic counter.
struct Loop {
  std::size_t begin, end, grain, num_chunks;
  const std::function<void(std::size_t, std::size_t)>* body;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  std::mutex mutex;
  std::condition_variable cv;
  std::exception_ptr error;

  /// Runs chunks until none is left; returns after the last chunk this thread ran.
  void work() {
    for (;;) {
      const std::size_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return;
      const std::size_t b = begin + c * grain;
      const std::size_t e = std::min(end, b + grain);
      try {
        (*body)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        cv.notify_all();
      }
    }
  }
};

}  // namespace

void ThreadPool::parallel_for(std::size_t begin, std::size_t end,
                              const std::function<void(std::size_t, std::size_t)>& body, std::size_t grain) {
  if (end <= begin) return;
  const std::size_t n = end - begin;
  const std::size_t threads = workers_.size() + 1;
  if (grain == 0) grain = std::max<std::size_t>(1, (n + 4 * threads - 1) / (4 * threads));
  const std::size_t num_chunks = (n + grain - 1) / grain;
  if (num_chunks == 1) {
    body(begin, end);
    return;
  }
  auto loop = std::make_shared<Loop>();
  loop->begin = begin;
  loop->end = end;
  loop->grain = grain;
  loop->num_chunks = num_chunks;
  loop->body = &body;  // valid until this call returns; helpers touch it only while chunks remain
  const std::size_t helpers = std::min(workers_.size(), num_chunks - 1);
  for (std::size_t i = 0; i < helpers; ++i) enqueue([loop] { loop->work(); });
  loop->work();
  {
    std::unique_lock<std::mutex> lock(loop->mutex);
    loop->cv.wait(lock, [&] { return loop->done.load(std::memory_order_acquire) == num_chunks; });
  }
  if (loop->error) std::rethrow_exception(loop->error);
}

void ThreadPool::parallel_for_each(std::size_t begin, std::size_t end, const std::function<void(std::size_t)>& body,
                                   std::size_t grain) {
  parallel_for(
      begin, end,
      [&body](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) body(i);
      },
      grain);
}

}  // namespace herd
