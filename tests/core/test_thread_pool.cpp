// Tests of herd::ThreadPool.
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/thread_pool.hpp"

TEST_CASE("parallel_for covers every index exactly once", "[core][threads]") {
  for (std::size_t threads : {1u, 2u, 5u}) {
    herd::ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (std::size_t n : {0u, 1u, 7u, 1000u, 100003u}) {
      for (std::size_t grain : {0u, 1u, 64u}) {
        std::vector<std::atomic<int>> hits(n);
        // Catch2's assertions are not thread-safe: the workers count empty ranges and the
        // calling thread checks the count.
        std::atomic<int> empty_ranges{0};
        pool.parallel_for(
            0, n,
            [&](std::size_t b, std::size_t e) {
              if (b >= e) empty_ranges.fetch_add(1);
              for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
            },
            grain);
        REQUIRE(empty_ranges.load() == 0);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);
      }
    }
  }
}

TEST_CASE("parallel_for carries the body's exception to the caller", "[core][threads]") {
  herd::ThreadPool pool(3);
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(pool.parallel_for_each(
                        0, 1000,
                        [&](std::size_t i) {
                          ran.fetch_add(1);
                          if (i == 517) throw std::runtime_error("boom at 517");
                        },
                        10),
                    "boom at 517");
  // The pool is still usable afterwards.
  std::atomic<long> sum{0};
  pool.parallel_for_each(0, 100, [&](std::size_t i) { sum += static_cast<long>(i); });
  CHECK(sum.load() == 4950);
}

TEST_CASE("submit returns results and exceptions through futures", "[core][threads]") {
  herd::ThreadPool pool(2);
  auto f = pool.submit([] { return 6 * 7; });
  auto g = pool.submit([]() -> int { throw std::logic_error("bad"); });
  CHECK(f.get() == 42);
  CHECK_THROWS_AS(g.get(), std::logic_error);
}

TEST_CASE("the pool survives being hammered from several threads, with nesting", "[core][threads]") {
  herd::ThreadPool pool(3);
  constexpr int kCallers = 6, kRounds = 200;
  std::vector<long> results(kCallers, 0);
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        std::atomic<long> sum{0};
        pool.parallel_for(
            0, 64,
            [&](std::size_t b, std::size_t e) {
              for (std::size_t i = b; i < e; ++i) {
                // Nested loop from inside a task: must not deadlock.
                std::atomic<long> inner{0};
                pool.parallel_for_each(0, 4, [&](std::size_t j) { inner += static_cast<long>(j); });
                sum += static_cast<long>(i) + inner.load() - 6;
              }
            },
            3);
        results[t] += sum.load();
      }
    });
  }
  for (auto& c : callers) c.join();
  for (int t = 0; t < kCallers; ++t) CHECK(results[t] == kRounds * (63 * 64 / 2));
}

TEST_CASE("destruction drains queued tasks and joins", "[core][threads]") {
  std::atomic<int> done{0};
  {
    herd::ThreadPool pool(2);
    for (int i = 0; i < 50; ++i) pool.submit([&] { done.fetch_add(1); });
  }
  CHECK(done.load() == 50);
}
