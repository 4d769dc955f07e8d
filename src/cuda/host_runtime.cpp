// The host backend of the launch layer (herd/core/cuda/launch.hpp): the CUDA runtime and
// cuBLAS calls herd uses, implemented on the CPU with the CUDA headers' own signatures, and
// the grid runner behind `emu::launch_on_host`. Linked (as objects, ahead of libcudart and
// libcublas) into the `host-emu` test executables together with the `.cu` files compiled
// as C++ (HERD_HOST_EMU); never into a library or program that runs on a GPU.
//
// Model: one emulated device (index 0). Work enqueued on a stream runs at once, in order,
// in the calling thread (the stream order CUDA guarantees is kept trivially), except:
//  - on a stream being captured, launches, copies, memsets and GEMMs are recorded into the
//    graph (arguments by value, as CUDA captures them) and run at each cudaGraphLaunch;
//    synchronising a capturing stream is cudaErrorStreamCaptureUnsupported, as in CUDA;
//  - a cudaMemcpyAsync from the device into page-locked host memory (cudaHostAlloc) is
//    delivered only when the host synchronises with the stream (stream, event or device
//    sync); until then the destination holds a poison pattern (all bits set: NaN for
//    floating point), so host code that reads it before a sync computes with NaN.
// Checked mode (the default; HERD_HOST_EMU_CHECKED=0 turns it off):
//  - every device allocation ends at a page boundary followed by an inaccessible guard
//    page, so a kernel or host access past its end faults at once; the handler names the
//    allocation, the offset and whether a kernel or host code made the access;
//  - device memory is inaccessible to host code outside the runtime's own operations, so
//    a host read or write of device memory (a missing copy) faults with the same report;
//  - new allocations hold the poison pattern (cudaMalloc does not clear);
//  - copies and memsets must lie inside one allocation and match their cudaMemcpyKind;
//  - stream order: each allocation remembers the stream and operation that last wrote it
//    (the fault handler tells reads from writes: an allocation opens read-only first); an
//    operation on another stream touching it must be ordered after that write by an event
//    wait, a host synchronisation, or the legacy default stream's implicit order with
//    blocking streams (vector clocks per stream, event and the host), else the program
//    stops with a "stream-order race" line naming both streams and the allocation.
// Counters: herd/core/launch.hpp (waits, transfers, memsets here; launches in launch()).
// HERD_HOST_EMU_TRACE_WAITS=1 prints the call stack of every host wait to stderr.
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "herd/core/cuda/host_emu.hpp"
#include "herd/core/launch.hpp"
#include "herd/core/reference_gemm.hpp"

namespace herd::gpu::emu {
namespace {

using detail::Count;
using Op = std::function<void()>;

constexpr unsigned char kPoison = 0xFF;

std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

bool checked_mode() {
  static const bool on = [] {
    const char* v = std::getenv("HERD_HOST_EMU_CHECKED");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// --- device memory ------------------------------------------------------------------

struct Stream;
// Stream-order knowledge (a vector clock): per stream, the last of its operations known to
// be ordered before what comes next.
using Clock = std::map<const Stream*, std::uint64_t>;

void merge(Clock& into, const Clock& from) {
  for (const auto& [st, e] : from) {
    auto& v = into[st];
    v = std::max(v, e);
  }
}

struct Allocation {
  char* user = nullptr;      // what cudaMalloc returned
  std::size_t size = 0;      // bytes asked for
  char* map = nullptr;       // checked mode: the mapping (data pages, then the guard page)
  std::size_t data_len = 0;  // checked mode: bytes of data pages
  // Checked mode: the stream and operation that last wrote it (stream-order checks).
  mutable const Stream* w_stream = nullptr;
  mutable std::uint64_t w_epoch = 0;
};

struct Graph {
  std::vector<Op> ops;
};

struct Stream {
  unsigned flags = 0;
  bool legacy = false;       // the legacy default stream
  std::uint64_t epoch = 0;   // operations run on it so far
  Clock clock;               // what its next operation is ordered after
  Graph* capture = nullptr;  // the graph being captured, or null
  std::uint64_t next_seq = 0;
  // Deferred deliveries into page-locked host memory: (sequence, staged bytes, destination).
  struct Delivery {
    std::uint64_t seq;
    std::vector<char> bytes;
    void* dst;
  };
  std::deque<Delivery> deliveries;
};

struct Event {
  Clock clock;  // what a wait on it orders after
  Stream* stream = nullptr;
  std::uint64_t seq = 0;
  bool recorded = false;
};

struct BlasHandle {
  cudaStream_t stream = nullptr;
};

struct Runtime {
  std::recursive_mutex mu;
  std::map<std::uintptr_t, Allocation> allocs;  // by user address
  std::map<char*, std::size_t> pinned_size;
  Stream default_stream;
  std::set<Stream*> streams;
  Clock host_clock;  // what the host has synchronised with
  Runtime() { default_stream.legacy = true; }
  int device_window = 0;  // nesting depth of runtime operations on device memory
};

// Leaked on purpose: static destructors elsewhere (device buffers of caches) call cudaFree
// after main.
Runtime& rt() {
  static Runtime* r = new Runtime;
  return *r;
}

thread_local cudaError_t tl_last_error = cudaSuccess;
thread_local bool tl_in_kernel = false;

cudaError_t fail(cudaError_t e, const std::string& why) {
  std::fprintf(stderr, "herd host-emu: %s\n", why.c_str());
  tl_last_error = e;
  return e;
}

// The allocation containing [p, p + n), or null.
const Allocation* find_alloc(const void* p, std::size_t n = 1) {
  auto& r = rt();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = r.allocs.upper_bound(a);
  if (it == r.allocs.begin()) return nullptr;
  --it;
  const Allocation& al = it->second;
  const auto base = reinterpret_cast<std::uintptr_t>(al.user);
  if (a < base || a + (n ? n : 1) > base + (al.size ? al.size : 1)) return nullptr;
  return &al;
}

// Whether p points into any device allocation (or its padding or guard page).
const Allocation* find_region(const void* p) {
  auto& r = rt();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  for (auto& [k, al] : r.allocs) {
    (void)k;
    if (!al.map) continue;
    const auto lo = reinterpret_cast<std::uintptr_t>(al.map);
    if (a >= lo && a < lo + al.data_len + page_size()) return &al;
  }
  return nullptr;
}

// Device memory is inaccessible except to the runtime's own operations. Opening every
// allocation for each operation costs two system calls per allocation; instead an operation
// runs in device mode, and the fault handler opens an allocation at its first access in
// that operation (recording it), which the end of the operation closes again.
thread_local bool tl_device_mode = false;
thread_local const Stream* tl_op_stream = nullptr;  // the stream of the running operation
thread_local bool tl_op_is_kernel = false;
constexpr std::size_t kMaxOpened = 4096;
thread_local const Allocation* tl_opened[kMaxOpened];
thread_local bool tl_opened_written[kMaxOpened];
thread_local std::size_t tl_n_opened = 0;
thread_local bool tl_opened_overflow = false;

void close_opened() {
  if (tl_opened_overflow) {
    for (auto& [k, al] : rt().allocs) {
      (void)k;
      if (al.map) mprotect(al.map, al.data_len, PROT_NONE);
    }
  } else {
    for (std::size_t i = 0; i < tl_n_opened; ++i) mprotect(tl_opened[i]->map, tl_opened[i]->data_len, PROT_NONE);
  }
  tl_n_opened = 0;
  tl_opened_overflow = false;
}

// Runs a runtime operation on device memory (see above); holds the runtime lock.
struct DeviceWindow {
  std::unique_lock<std::recursive_mutex> lock{rt().mu};
  DeviceWindow() {
    if (rt().device_window++ == 0) tl_device_mode = true;
  }
  ~DeviceWindow() {
    if (--rt().device_window == 0) {
      tl_device_mode = false;
      tl_op_stream = nullptr;
      if (checked_mode()) close_opened();
    }
  }
  DeviceWindow(const DeviceWindow&) = delete;
  DeviceWindow& operator=(const DeviceWindow&) = delete;
};

// Whether the last write of `al` is ordered before the running operation (stream order).
bool ordered_before_op(const Allocation* al) {
  const Stream* w = al->w_stream;
  if (!w || !tl_op_stream || w == tl_op_stream) return true;
  const auto& sc = tl_op_stream->clock;
  const auto& hc = rt().host_clock;
  const auto a = sc.find(w), b = hc.find(w);
  const std::uint64_t known = std::max(a == sc.end() ? 0 : a->second, b == hc.end() ? 0 : b->second);
  return al->w_epoch <= known;
}

void write_all(const char* m) {
  const ssize_t w = write(2, m, std::strlen(m));
  (void)w;
}

[[noreturn]] void report_race(const Allocation* al) {
  char buf[640];
  const int n = std::snprintf(
      buf, sizeof buf,
      "herd host-emu: stream-order race: %s on %s%p uses the %zu-byte device allocation at %p, last written by "
      "work on %s%p that is not ordered before it (no event wait, stream, event or device synchronisation "
      "between; the legacy default stream orders only against blocking streams)\n",
      tl_op_is_kernel ? "a kernel" : "a copy or memset",
      tl_op_stream->legacy ? "the legacy default stream " : "stream ", static_cast<const void*>(tl_op_stream), al->size,
      static_cast<const void*>(al->user), al->w_stream->legacy ? "the legacy default stream " : "stream ",
      static_cast<const void*>(al->w_stream));
  if (n > 0) {
    const ssize_t w = write(2, buf, static_cast<std::size_t>(n));
    (void)w;
  }
  std::abort();
}

void segv_handler(int sig, siginfo_t* info, void*) {
  const void* addr = info->si_addr;
  const Allocation* al = find_region(addr);
  if (al && tl_device_mode) {
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const auto lo = reinterpret_cast<std::uintptr_t>(al->map);
    if (a < lo + al->data_len) {
      // A data page. First touch in this operation: check the stream order and open it for
      // reading; a fault on an allocation open for reading is a write: open it for writing
      // and record the writer.
      std::size_t i = 0;
      while (i < tl_n_opened && tl_opened[i] != al) ++i;
      if (i == tl_n_opened) {
        if (!ordered_before_op(al)) report_race(al);
        if (tl_n_opened < kMaxOpened) {
          tl_opened[tl_n_opened] = al;
          tl_opened_written[tl_n_opened++] = false;
        } else {
          tl_opened_overflow = true;
          if (tl_op_stream) {
            al->w_stream = tl_op_stream;
            al->w_epoch = tl_op_stream->epoch;
          }
          if (mprotect(al->map, al->data_len, PROT_READ | PROT_WRITE) == 0) return;
        }
        if (mprotect(al->map, al->data_len, PROT_READ) == 0) return;
      } else if (!tl_opened_written[i]) {
        tl_opened_written[i] = true;
        if (tl_op_stream) {
          al->w_stream = tl_op_stream;
          al->w_epoch = tl_op_stream->epoch;
        }
        if (mprotect(al->map, al->data_len, PROT_READ | PROT_WRITE) == 0) return;
      }
    }
  }
  if (al) {
    char buf[512];
    const auto a = reinterpret_cast<std::uintptr_t>(addr);
    const auto base = reinterpret_cast<std::uintptr_t>(al->user);
    const char* who = tl_in_kernel ? "a kernel" : "host code";
    int n;
    if (a >= base + al->size)
      n = std::snprintf(buf, sizeof buf,
                        "herd host-emu: out-of-bounds device memory access by %s at %p: byte %zu past the end of "
                        "a %zu-byte allocation at %p\n",
                        who, addr, static_cast<std::size_t>(a - base - al->size), al->size, al->user);
    else if (a < base)
      n = std::snprintf(buf, sizeof buf,
                        "herd host-emu: out-of-bounds device memory access by %s at %p: %zu bytes before a "
                        "%zu-byte allocation at %p\n",
                        who, addr, static_cast<std::size_t>(base - a), al->size, al->user);
    else
      n = std::snprintf(buf, sizeof buf,
                        "herd host-emu: host code accessed device memory at %p (byte %zu of a %zu-byte allocation "
                        "at %p) outside a kernel or copy: device memory must be copied to the host first\n",
                        addr, static_cast<std::size_t>(a - base), al->size, al->user);
    if (n > 0) {
      const ssize_t w = write(2, buf, static_cast<std::size_t>(n));
      (void)w;
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_handler() {
  static bool done = [] {
    struct sigaction sa {};
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    return true;
  }();
  (void)done;
}

// Counts a host wait; with HERD_HOST_EMU_TRACE_WAITS=1 also prints the call stack of each
// (to find where an operation's round trips come from).
void count_wait() {
  detail::count(Count::kWait);
  static const bool trace = [] {
    const char* v = std::getenv("HERD_HOST_EMU_TRACE_WAITS");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (trace) {
    void* frames[24];
    const int n = backtrace(frames, 24);
    write_all("herd host-emu: host wait at\n");
    backtrace_symbols_fd(frames + 1, n - 1, 2);
  }
}

bool is_pinned(const void* p, std::size_t n) {
  auto& r = rt();
  auto it = r.pinned_size.upper_bound(static_cast<char*>(const_cast<void*>(p)));
  if (it == r.pinned_size.begin()) return false;
  --it;
  return static_cast<const char*>(p) + n <= it->first + it->second;
}

// --- streams ------------------------------------------------------------------------

Stream* stream_of(cudaStream_t s) {
  const auto v = reinterpret_cast<std::uintptr_t>(s);
  if (v == 0 || v == 1 || v == 2) return &rt().default_stream;  // null, legacy, per-thread
  return reinterpret_cast<Stream*>(s);
}

bool is_blocking(const Stream* st) { return !st->legacy && !(st->flags & cudaStreamNonBlocking); }

// The next operation on `st`: its epoch, and the implicit order of the legacy default
// stream (it waits for the work of blocking streams, and they wait for its work).
void begin_op(Stream* st, bool kernel) {
  Runtime& r = rt();
  ++st->epoch;
  if (st->legacy) {
    for (const Stream* o : r.streams)
      if (is_blocking(o)) {
        merge(st->clock, o->clock);
        st->clock[o] = std::max(st->clock[o], o->epoch);
      }
  } else if (is_blocking(st)) {
    merge(st->clock, r.default_stream.clock);
    st->clock[&r.default_stream] = std::max(st->clock[&r.default_stream], r.default_stream.epoch);
  }
  tl_op_stream = st;
  tl_op_is_kernel = kernel;
}

// The host now knows that all work of `st` so far is done.
void host_synced(const Stream* st) {
  Runtime& r = rt();
  merge(r.host_clock, st->clock);
  r.host_clock[st] = std::max(r.host_clock[st], st->epoch);
}

// Runs `op` now (inside the device window) or records it into the captured graph.
void submit(cudaStream_t s, Op op, bool kernel = true) {
  Stream* st = stream_of(s);
  if (st->capture) {
    st->capture->ops.push_back(std::move(op));
    return;
  }
  DeviceWindow w;
  begin_op(st, kernel);
  op();
}

void deliver(Stream* st, std::uint64_t upto) {
  while (!st->deliveries.empty() && st->deliveries.front().seq <= upto) {
    auto& d = st->deliveries.front();
    std::memcpy(d.dst, d.bytes.data(), d.bytes.size());
    st->deliveries.pop_front();
  }
}

// --- the grid runner ------------------------------------------------------------------

// A minimal x86-64 System V context switch for the fibers (ucontext's swapcontext makes a
// signal-mask system call on every switch, which dominated the run time): saves the
// callee-saved registers, MXCSR and the x87 control word on the current stack, stores the
// stack pointer to *from and continues on the stack `to` (the inverse of the saving).
#if !defined(__x86_64__)
#error "the host backend's fibers need x86-64"
#endif
extern "C" void herd_emu_switch(void** from, void* to);
asm(R"(
.text
.globl herd_emu_switch
.type herd_emu_switch,@function
herd_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size herd_emu_switch,.-herd_emu_switch
.section .note.GNU-stack,"",@progbits
.text
)");

// The threads of one block as fibers on the calling OS thread: every live fiber runs until
// its next __syncthreads or its end, round after round, so no thread passes a barrier
// before all live threads reached it.
struct BlockRunner {
  static constexpr std::size_t kStack = 256 * 1024;
  std::vector<void*> sp;      // saved stack pointer of each fiber
  std::vector<char*> stacks;  // each kStack bytes, lowest page inaccessible
  std::vector<unsigned char> done;
  void* main_sp = nullptr;
  const std::function<void()>* body = nullptr;
  unsigned current = 0;
  bool fibered = false;  // threads run as fibers (false: directly, no barrier allowed)
  bool barrier_seen = false;
  uint3 dims{};

  ~BlockRunner() {
    for (char* s : stacks) munmap(s, kStack);
  }

  void ensure(unsigned n) {
    while (stacks.size() < n) {
      void* s = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (s == MAP_FAILED) {
        std::fprintf(stderr, "herd host-emu: cannot map a fiber stack\n");
        std::abort();
      }
      mprotect(s, page_size(), PROT_NONE);  // a stack overflow faults
      stacks.push_back(static_cast<char*>(s));
      sp.push_back(nullptr);
    }
    done.assign(n, 0);
  }

  void set_thread(unsigned t) {
    threadIdx.x = t % dims.x;
    threadIdx.y = (t / dims.x) % dims.y;
    threadIdx.z = t / (dims.x * dims.y);
    current = t;
  }

  [[noreturn]] static void entry();

  // Prepares fiber t to start in `entry` at its first resume.
  void start(unsigned t) {
    auto* top = reinterpret_cast<std::uint64_t*>(stacks[t] + kStack);  // 16-byte aligned
    std::uint64_t* p = top - 9;
    // [mxcsr | x87 cw], r15, r14, r13, r12, rbx, rbp, return address (entry), pad
    std::uint32_t csr = 0;
    std::uint16_t cw = 0;
    asm volatile("stmxcsr %0" : "=m"(csr));
    asm volatile("fnstcw %0" : "=m"(cw));
    p[0] = csr | (static_cast<std::uint64_t>(cw) << 32);
    for (int i = 1; i <= 6; ++i) p[i] = 0;
    p[7] = reinterpret_cast<std::uint64_t>(&BlockRunner::entry);
    p[8] = 0;
    sp[t] = p;
  }

  // Runs thread t as a fiber until it ends or reaches a barrier.
  void resume(unsigned t) {
    set_thread(t);
    herd_emu_switch(&main_sp, sp[t]);
  }

  void run(const std::function<void()>& b, unsigned n) {
    body = &b;
    if (n == 1) {
      fibered = false;
      set_thread(0);
      b();
      return;
    }
    ensure(n);
    // Thread 0 first, as a fiber: a kernel that never reaches a barrier in it runs its
    // other threads directly (a barrier there is reported as divergent).
    fibered = true;
    barrier_seen = false;
    start(0);
    resume(0);
    if (!barrier_seen) {
      fibered = false;
      for (unsigned t = 1; t < n; ++t) {
        set_thread(t);
        b();
      }
      return;
    }
    for (unsigned t = 1; t < n; ++t) start(t);
    bool live = true;
    bool first_round = true;
    while (live) {
      live = false;
      for (unsigned t = 0; t < n; ++t) {
        if (done[t]) continue;
        if (!(first_round && t == 0)) resume(t);
        live = live || !done[t];
      }
      first_round = false;
    }
  }

  void barrier() {
    if (!fibered) {
      if (dims.x * dims.y * dims.z == 1) return;
      std::fprintf(stderr,
                   "herd host-emu: __syncthreads reached by thread %u of a block whose thread 0 ended without "
                   "reaching it (a divergent barrier)\n",
                   current);
      std::abort();
    }
    barrier_seen = true;
    herd_emu_switch(&sp[current], main_sp);
  }
};

thread_local BlockRunner* tl_runner = nullptr;

void BlockRunner::entry() {
  BlockRunner& r = *tl_runner;
  (*r.body)();
  r.done[r.current] = 1;
  void* dead = nullptr;
  herd_emu_switch(&dead, r.main_sp);  // never resumed
  std::abort();
}

void run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
  static thread_local BlockRunner runner;
  BlockRunner* saved = tl_runner;
  tl_runner = &runner;
  const uint3 saved_block = blockIdx, saved_thread = threadIdx;
  const dim3 saved_bd = blockDim, saved_gd = gridDim;
  const bool saved_in = tl_in_kernel;
  tl_in_kernel = true;
  gridDim = grid;
  blockDim = block;
  runner.dims = uint3{block.x, block.y, block.z};
  const unsigned n = block.x * block.y * block.z;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = uint3{x, y, z};
        runner.run(body, n);
      }
  tl_in_kernel = saved_in;
  blockIdx = saved_block;
  threadIdx = saved_thread;
  blockDim = saved_bd;
  gridDim = saved_gd;
  tl_runner = saved;
}

cudaMemcpyKind infer_kind(const void* dst, const void* src) {
  const bool dd = find_alloc(dst) != nullptr, sd = find_alloc(src) != nullptr;
  if (dd && sd) return cudaMemcpyDeviceToDevice;
  if (dd) return cudaMemcpyHostToDevice;
  if (sd) return cudaMemcpyDeviceToHost;
  return cudaMemcpyHostToHost;
}

const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost:
      return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice:
      return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost:
      return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice:
      return "cudaMemcpyDeviceToDevice";
    default:
      return "cudaMemcpyDefault";
  }
}

// Checks a copy's pointers against its kind; the kind the pointers say, or an error.
cudaError_t check_copy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind, cudaMemcpyKind* actual) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  if (n == 0) {
    *actual = kind == cudaMemcpyDefault ? cudaMemcpyHostToHost : kind;
    return cudaSuccess;
  }
  const cudaMemcpyKind k = kind == cudaMemcpyDefault ? infer_kind(dst, src) : kind;
  const bool dst_dev = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
  const bool src_dev = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
  if (checked_mode() || kind == cudaMemcpyDefault) {
    if (dst_dev && !find_alloc(dst, n))
      return fail(cudaErrorInvalidValue, std::string(kind_name(kind)) + " of " + std::to_string(n) +
                                             " bytes: the destination is not inside one device allocation");
    if (src_dev && !find_alloc(src, n))
      return fail(cudaErrorInvalidValue, std::string(kind_name(kind)) + " of " + std::to_string(n) +
                                             " bytes: the source is not inside one device allocation");
    if (!dst_dev && find_alloc(dst))
      return fail(cudaErrorInvalidValue,
                  std::string(kind_name(kind)) + ": the destination is device memory, the kind says host");
    if (!src_dev && find_alloc(src))
      return fail(cudaErrorInvalidValue,
                  std::string(kind_name(kind)) + ": the source is device memory, the kind says host");
  }
  *actual = k;
  return cudaSuccess;
}

void count_copy(cudaMemcpyKind k, std::size_t n) {
  if (k == cudaMemcpyHostToDevice) detail::count(Count::kH2D, n);
  if (k == cudaMemcpyDeviceToHost) detail::count(Count::kD2H, n);
  if (k == cudaMemcpyDeviceToDevice) detail::count(Count::kD2D, n);
}

cudaError_t sync_stream(Stream* st) {
  if (st->capture) return fail(cudaErrorStreamCaptureUnsupported, "synchronising a stream that is being captured");
  count_wait();
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  deliver(st, UINT64_MAX);
  host_synced(st);
  return cudaSuccess;
}

const bool g_registered = [] {
  detail::register_host_backend();
  return true;
}();

}  // namespace

void launch_on_host(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream, std::function<void()> body) {
  install_handler();
  const unsigned long long threads = 1ULL * block.x * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || shared_bytes > 48 * 1024) {
    fail(cudaErrorInvalidConfiguration,
         "kernel launch with grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
             std::to_string(grid.z) + "), block (" + std::to_string(block.x) + ", " + std::to_string(block.y) + ", " +
             std::to_string(block.z) + "), " + std::to_string(shared_bytes) + " bytes of shared memory");
    return;
  }
  submit(stream, [grid, block, b = std::move(body)]() { run_grid(grid, block, b); });
}

void sync_block_threads() {
  if (!tl_runner) return;
  tl_runner->barrier();
}

}  // namespace herd::gpu::emu

using namespace herd::gpu::emu;  // NOLINT: the C API below is global
using herd::gpu::detail::Count;

extern "C" {

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = tl_last_error;
  tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return tl_last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error (host backend)";
    case cudaErrorInvalidValue:
      return "invalid argument (host backend)";
    case cudaErrorMemoryAllocation:
      return "out of memory (host backend)";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument (host backend)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal (host backend)";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle (host backend)";
    case cudaErrorNotReady:
      return "device not ready (host backend)";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing (host backend)";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream (host backend)";
    default:
      return "unknown error (host backend)";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: device " + std::to_string(device));
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "herd host backend (CPU emulation)");
  prop->totalGlobalMem = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page_size();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prop->canMapHostMemory = 1;
  return cudaSuccess;
}

// The host backend's "device memory" is the machine's memory: free is what is available now.
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page_size();
  *total_bytes = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page_size();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "cudaSetDevice: device " + std::to_string(device));
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  count_wait();
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  deliver(&rt().default_stream, UINT64_MAX);
  host_synced(&rt().default_stream);
  for (Stream* s : rt().streams) {
    deliver(s, UINT64_MAX);
    host_synced(s);
  }
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t size) {
  install_handler();
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Allocation al;
  al.size = size;
  const std::size_t alloc_size = size ? size : 1;
  if (checked_mode()) {
    const std::size_t pg = page_size();
    al.data_len = (alloc_size + pg - 1) / pg * pg;
    void* m = mmap(nullptr, al.data_len + pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(size) + " bytes");
    al.map = static_cast<char*>(m);
    // The end of the data at the guard page, 16-byte aligned.
    const std::size_t rounded = (alloc_size + 15) / 16 * 16;
    al.user = al.map + al.data_len - rounded;
    mprotect(al.map, al.data_len, PROT_READ | PROT_WRITE);
    std::memset(al.map, kPoison, al.data_len);
    mprotect(al.map, al.data_len, PROT_NONE);
  } else {
    al.user = static_cast<char*>(std::aligned_alloc(256, (alloc_size + 255) / 256 * 256));
    if (!al.user) return fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(size) + " bytes");
    std::memset(al.user, kPoison, alloc_size);
  }
  rt().allocs[reinterpret_cast<std::uintptr_t>(al.user)] = al;
  *ptr = al.user;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  auto it = rt().allocs.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == rt().allocs.end()) return fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  if (it->second.map) munmap(it->second.map, it->second.data_len + page_size());
  else std::free(it->second.user);
  rt().allocs.erase(it);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int /*flags*/) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  char* p = static_cast<char*>(std::aligned_alloc(256, (size + 255) / 256 * 256 + 256));
  if (!p) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc of " + std::to_string(size) + " bytes");
  rt().pinned_size[p] = size;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, 0); }

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  auto it = rt().pinned_size.find(static_cast<char*>(ptr));
  if (it == rt().pinned_size.end())
    return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaHostAlloc did not return");
  rt().pinned_size.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void** dptr, void* hptr, unsigned int /*flags*/) {
  *dptr = hptr;  // one address space
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  auto* st = new Stream;
  st->flags = flags;
  rt().streams.insert(st);
  *s = reinterpret_cast<cudaStream_t>(st);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* st = stream_of(s);
  if (st == &rt().default_stream) return cudaSuccess;
  deliver(st, UINT64_MAX);  // CUDA completes pending work of a destroyed stream
  rt().streams.erase(st);   // kept allocated: allocations and clocks may still name it
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) { return sync_stream(stream_of(s)); }

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  merge(stream_of(s)->clock, reinterpret_cast<Event*>(e)->clock);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  *e = reinterpret_cast<cudaEvent_t>(new Event);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  auto* ev = reinterpret_cast<Event*>(e);
  Stream* st = stream_of(s);
  ev->stream = st;
  ev->seq = st->next_seq;
  ev->recorded = true;
  ev->clock = st->clock;
  ev->clock[st] = std::max(ev->clock[st], st->epoch);
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  auto* ev = reinterpret_cast<Event*>(e);
  count_wait();
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  if (ev->recorded && ev->seq > 0) deliver(ev->stream, ev->seq - 1);
  merge(rt().host_clock, ev->clock);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  // The work before the event is done (it ran at enqueue); its deliveries land now.
  auto* ev = reinterpret_cast<Event*>(e);
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  if (ev->recorded && ev->seq > 0) deliver(ev->stream, ev->seq - 1);
  merge(rt().host_clock, ev->clock);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  cudaMemcpyKind k;
  if (const cudaError_t e = check_copy(dst, src, n, kind, &k); e != cudaSuccess) return e;
  if (n == 0) return cudaSuccess;
  Stream* st = stream_of(s);
  if (st->capture) {
    st->capture->ops.push_back([dst, src, n, k] {
      std::memcpy(dst, src, n);
      count_copy(k, n);
    });
    return cudaSuccess;
  }
  DeviceWindow w;
  begin_op(st, false);
  count_copy(k, n);
  if (k == cudaMemcpyDeviceToHost && is_pinned(dst, n)) {
    // Asynchronous in CUDA: delivered at the host's next sync with this stream.
    Stream::Delivery d{st->next_seq++,
                       std::vector<char>(static_cast<const char*>(src), static_cast<const char*>(src) + n), dst};
    std::memset(dst, kPoison, n);
    st->deliveries.push_back(std::move(d));
    return cudaSuccess;
  }
  std::memcpy(dst, src, n);
  if (k == cudaMemcpyDeviceToHost) {  // pageable: CUDA returns when the copy is done
    count_wait();
    host_synced(st);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  cudaMemcpyKind k;
  if (const cudaError_t e = check_copy(dst, src, n, kind, &k); e != cudaSuccess) return e;
  if (rt().default_stream.capture) return fail(cudaErrorStreamCaptureUnsupported, "cudaMemcpy during a capture");
  // CUDA: device to device does not synchronise with the host; from pageable host memory
  // the legacy stream is synchronised before the copy (whose DMA may still be running at
  // the return); to the host the copy is complete at the return.
  Stream* legacy = &rt().default_stream;
  if (k != cudaMemcpyDeviceToDevice) {
    count_wait();
    std::lock_guard<std::recursive_mutex> lock(rt().mu);
    host_synced(legacy);
  }
  if (n == 0) return cudaSuccess;
  DeviceWindow w;
  begin_op(legacy, false);
  count_copy(k, n);
  std::memcpy(dst, src, n);
  if (k == cudaMemcpyDeviceToHost) host_synced(legacy);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  {
    std::lock_guard<std::recursive_mutex> lock(rt().mu);
    if (!find_alloc(p, n))
      return fail(cudaErrorInvalidValue,
                  "cudaMemset of " + std::to_string(n) + " bytes: not inside one device allocation");
  }
  submit(
      s,
      [p, value, n] {
        std::memset(p, value, n);
        herd::gpu::detail::count(Count::kMemset);
      },
      false);
  return cudaSuccess;
}

// Asynchronous with respect to the host for device memory, as in CUDA (legacy stream).
cudaError_t cudaMemset(void* p, int value, size_t n) { return cudaMemsetAsync(p, value, n, nullptr); }

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* st = stream_of(s);
  if (st == &rt().default_stream) return fail(cudaErrorStreamCaptureUnsupported, "capturing the legacy default stream");
  if (st->capture) return fail(cudaErrorIllegalState, "cudaStreamBeginCapture on a stream already capturing");
  st->capture = new Graph;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* st = stream_of(s);
  if (!st->capture) return fail(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture without a capture");
  *graph = reinterpret_cast<cudaGraph_t>(st->capture);
  st->capture = nullptr;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
  *status = stream_of(s)->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  herd::gpu::detail::count(Count::kGraph);
  const Graph* g = reinterpret_cast<const Graph*>(exec);
  submit(s, [g] {
    for (const Op& op : g->ops) op();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete reinterpret_cast<Graph*>(g);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t g) {
  delete reinterpret_cast<Graph*>(g);
  return cudaSuccess;
}

// --- cuBLAS ---------------------------------------------------------------------------

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = reinterpret_cast<cublasHandle_t>(new BlasHandle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  delete reinterpret_cast<BlasHandle*>(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<BlasHandle*>(h)->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"

namespace {

template <class T>
cublasStatus_t host_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                         const T* alpha, const T* A, int lda, const T* B, int ldb, const T* beta, T* C, int ldc) {
  using herd::gpu::GemmOp;
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  const GemmOp oa = ta == CUBLAS_OP_N ? GemmOp::kN : GemmOp::kT;
  const GemmOp ob = tb == CUBLAS_OP_N ? GemmOp::kN : GemmOp::kT;
  if (const char* bad = herd::gpu::gemm_invalid_argument(oa, ob, m, n, k, lda, ldb, ldc); *bad) {
    std::fprintf(stderr, "herd host-emu: cublas gemm: invalid %s (m=%d n=%d k=%d lda=%d ldb=%d ldc=%d)\n", bad, m, n, k,
                 lda, ldb, ldc);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  herd::gpu::detail::count(Count::kKernel);
  const T a = *alpha, b = *beta;  // host pointer mode: read at the call, as cuBLAS does
  submit(reinterpret_cast<BlasHandle*>(h)->stream,
         [=] { herd::gpu::reference_gemm<T>(oa, ob, m, n, k, a, A, lda, B, ldb, b, C, ldc); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  return host_gemm<float>(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const double* alpha, const double* A, int lda, const double* B, int ldb,
                              const double* beta, double* C, int ldc) {
  return host_gemm<double>(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // extern "C"
