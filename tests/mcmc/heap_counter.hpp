#pragma once
/// @file heap_counter.hpp
/// Counting replacements of the global allocation functions for memory-bound tests: the
/// bytes live through operator new and their high-water mark. Include in exactly one
/// translation unit of a test program (it defines the replaceable `operator new` and
/// `operator delete`; the array and nothrow forms call these). Thread-safe (atomics).
/// Each block carries its size in a 16-byte header, so returned blocks stay 16-byte aligned.

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace herd_test {

inline std::atomic<std::size_t> g_heap_live{0}, g_heap_peak{0};
/// Calls of operator new for exactly `g_sized_bytes` bytes (see count_news_of).
inline std::atomic<std::size_t> g_sized_bytes{0}, g_sized_news{0};

/// Starts counting (from 0) the calls of operator new for exactly `bytes` bytes (a block of
/// a size that a test's buffers have and no other allocation has); 0 stops it.
inline void count_news_of(std::size_t bytes) {
  g_sized_news.store(0);
  g_sized_bytes.store(bytes);
}
/// Calls of operator new of count_news_of's bytes since it was called.
inline std::size_t sized_news() { return g_sized_news.load(); }

/// Bytes live through operator new now.
inline std::size_t live_bytes() { return g_heap_live.load(); }
/// Their high-water mark since the last `reset_peak` (or the start).
inline std::size_t peak_bytes() { return g_heap_peak.load(); }
/// Starts a new high-water mark at the bytes live now.
inline void reset_peak() { g_heap_peak.store(g_heap_live.load()); }

inline constexpr std::size_t kHeapHeader = 16;

}  // namespace herd_test

void* operator new(std::size_t n) {
  void* p = std::malloc(n + herd_test::kHeapHeader);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<std::size_t*>(p) = n;
  if (n == herd_test::g_sized_bytes.load(std::memory_order_relaxed)) herd_test::g_sized_news.fetch_add(1);
  const std::size_t now = herd_test::g_heap_live.fetch_add(n) + n;
  std::size_t peak = herd_test::g_heap_peak.load();
  while (now > peak && !herd_test::g_heap_peak.compare_exchange_weak(peak, now)) {
  }
  return static_cast<char*>(p) + herd_test::kHeapHeader;
}
// Not inlined: inlined where GCC sees the block's operator new, its header arithmetic reads
// as out of bounds and free() as mismatched (-Warray-bounds, -Wmismatched-new-delete).
[[gnu::noinline]] void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - herd_test::kHeapHeader;
  herd_test::g_heap_live.fetch_sub(*reinterpret_cast<std::size_t*>(base));
  std::free(base);
}
void operator delete(void* p, std::size_t /*n*/) noexcept { operator delete(p); }
