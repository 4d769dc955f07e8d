#include "herd/core/launch.hpp"

#include <atomic>

#include <fmt/format.h>

#include "herd/core/config.hpp"

namespace herd::gpu {
namespace {

struct Atomics {
  std::atomic<std::uint64_t> kernel{0}, graph{0}, wait{0}, h2d{0}, d2h{0}, d2d{0}, h2d_bytes{0}, d2h_bytes{0},
      memset{0};
};

Atomics& atomics() {
  static Atomics a;
  return a;
}

std::atomic<bool> g_host_backend{false};

}  // namespace

Backend active_backend() {
  if (g_host_backend.load(std::memory_order_acquire)) return Backend::kHost;
#if HERD_HAVE_CUDA
  return Backend::kCuda;
#else
  return Backend::kNone;
#endif
}

std::string to_string(Backend b) {
  switch (b) {
    case Backend::kCuda:
      return "cuda";
    case Backend::kHost:
      return "host";
    default:
      return "none";
  }
}

LaunchCounters LaunchCounters::operator-(const LaunchCounters& o) const {
  LaunchCounters r;
  r.kernel_launches = kernel_launches - o.kernel_launches;
  r.graph_launches = graph_launches - o.graph_launches;
  r.host_waits = host_waits - o.host_waits;
  r.h2d_copies = h2d_copies - o.h2d_copies;
  r.d2h_copies = d2h_copies - o.d2h_copies;
  r.d2d_copies = d2d_copies - o.d2d_copies;
  r.h2d_bytes = h2d_bytes - o.h2d_bytes;
  r.d2h_bytes = d2h_bytes - o.d2h_bytes;
  r.memsets = memsets - o.memsets;
  return r;
}

std::string LaunchCounters::str() const {
  return fmt::format("launches={} graphs={} waits={} h2d={}({}B) d2h={}({}B) d2d={} memsets={}", kernel_launches,
                     graph_launches, host_waits, h2d_copies, h2d_bytes, d2h_copies, d2h_bytes, d2d_copies, memsets);
}

LaunchCounters launch_counters() {
  const Atomics& a = atomics();
  LaunchCounters c;
  c.kernel_launches = a.kernel.load();
  c.graph_launches = a.graph.load();
  c.host_waits = a.wait.load();
  c.h2d_copies = a.h2d.load();
  c.d2h_copies = a.d2h.load();
  c.d2d_copies = a.d2d.load();
  c.h2d_bytes = a.h2d_bytes.load();
  c.d2h_bytes = a.d2h_bytes.load();
  c.memsets = a.memset.load();
  return c;
}

void reset_launch_counters() {
  Atomics& a = atomics();
  for (auto* f : {&a.kernel, &a.graph, &a.wait, &a.h2d, &a.d2h, &a.d2d, &a.h2d_bytes, &a.d2h_bytes, &a.memset})
    f->store(0);
}

namespace detail {

void count(Count what, std::uint64_t bytes) {
  Atomics& a = atomics();
  switch (what) {
    case Count::kKernel:
      a.kernel.fetch_add(1);
      break;
    case Count::kGraph:
      a.graph.fetch_add(1);
      break;
    case Count::kWait:
      a.wait.fetch_add(1);
      break;
    case Count::kH2D:
      a.h2d.fetch_add(1);
      a.h2d_bytes.fetch_add(bytes);
      break;
    case Count::kD2H:
      a.d2h.fetch_add(1);
      a.d2h_bytes.fetch_add(bytes);
      break;
    case Count::kD2D:
      a.d2d.fetch_add(1);
      break;
    case Count::kMemset:
      a.memset.fetch_add(1);
      break;
  }
}

void register_host_backend() { g_host_backend.store(true, std::memory_order_release); }

}  // namespace detail
}  // namespace herd::gpu
