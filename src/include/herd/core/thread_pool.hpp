#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file thread_pool.hpp
/// A fixed-size pool of worker threads with a blocking `parallel_for` (the EnvPool and the
/// multi-chain sampler step their walkers on it; Stooke & Abbeel 2018, EnvPool 2022).

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace herd {

/// Fixed workers pulling tasks from one queue.
///
/// Thread-safety: every member function may be called from any thread, including from
/// inside a task (nested `parallel_for` cannot deadlock: the calling thread always works
/// on its own loop's chunks, so it completes even when every worker is busy).
/// Exceptions thrown by a loop body are carried to the caller of `parallel_for`
/// (the first one is rethrown after all chunks have finished); exceptions of `submit`
/// tasks are delivered through the returned future.
/// The destructor finishes queued tasks, then joins the workers; it never throws.
class ThreadPool {
 public:
  /// @param num_threads number of workers; 0 means `std::thread::hardware_concurrency()`.
  ///        A pool of 1 worker still runs loops on the calling thread as well.
  explicit ThreadPool(std::size_t num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Number of worker threads.
  std::size_t size() const { return workers_.size(); }

  /// Calls `body(begin_i, end_i)` on disjoint chunks covering [begin, end), on the workers
  /// and the calling thread, and returns when all have finished. `grain` is the chunk
  /// size (0: about 4 chunks per thread). Which thread runs a chunk is unspecified, so the
  /// body must not depend on it.
  /// @throws whatever `body` threw (the first exception observed).
  void parallel_for(std::size_t begin, std::size_t end, const std::function<void(std::size_t, std::size_t)>& body,
                    std::size_t grain = 0);

  /// Calls `body(i)` for every i in [begin, end); see the chunked overload.
  void parallel_for_each(std::size_t begin, std::size_t end, const std::function<void(std::size_t)>& body,
                         std::size_t grain = 0);

  /// Runs `task` on a worker; the future carries its result or exception.
  template <class F>
  auto submit(F&& task) -> std::future<decltype(task())> {
    using R = decltype(task());
    auto pt = std::make_shared<std::packaged_task<R()>>(std::forward<F>(task));
    std::future<R> fut = pt->get_future();
    enqueue([pt] { (*pt)(); });
    return fut;
  }

 private:
  void enqueue(std::function<void()> task);
  void worker_loop();

  std::vector<std::thread> workers_;
  std::deque<std::function<void()>> queue_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace herd
