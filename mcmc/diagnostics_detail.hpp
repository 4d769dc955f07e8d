#pragma once
// Internal helpers shared by the diagnostics sources (not installed): the thread-local
// workspace, FFT autocovariance, Geyer's ESS, split R-hat.

#include <array>
#include <atomic>
#include <bit>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#if !HERD_HAVE_FFTW
#include <unsupported/Eigen/FFT>
#endif

#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc::detail {

/// The huge-page blocks of BigAllocator (`bytes` a multiple of 2 MiB): on Linux mapped from
/// the kernel (2 MiB aligned, marked for transparent huge pages) and unmapped by free_huge, so
/// that freed scratch leaves the resident set at once. @throws std::bad_alloc
void* allocate_huge(std::size_t bytes);
/// Frees a block of allocate_huge.
void free_huge(void* p, std::size_t bytes) noexcept;

/// Asks for the 2 MiB pages inside [p, p + bytes) of memory that is already written (a
/// caller's vector) to be backed by huge pages now (Linux: MADV_HUGEPAGE, then MADV_COLLAPSE,
/// Linux 6.1 and later, which copies them into huge pages; the contents stay). Advice only:
/// errors (an older kernel, huge pages off) are ignored; elsewhere it does nothing. For
/// buffers that take random writes (the z-scores per slot), whose TLB misses on 4 KiB pages
/// cost more than the copy.
void advise_huge(void* p, std::size_t bytes) noexcept;

/// Allocator of the workspace's large buffers: blocks of 2 MiB or more are 2 MiB aligned and,
/// on Linux, marked for transparent huge pages (madvise), so the radix sort's and the z-score
/// scatter's random accesses over tens of megabytes miss the TLB far less often and the
/// buffers take 512x fewer page faults. Smaller blocks come from std::allocator.
/// Stateless; thread-safe as malloc is. @throws std::bad_alloc
template <class T>
struct BigAllocator {
  using value_type = T;
  BigAllocator() = default;
  template <class U>
  BigAllocator(const BigAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
    if (n * sizeof(T) < kHuge) return std::allocator<T>().allocate(n);
    return static_cast<T*>(allocate_huge(rounded(n)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHuge) std::allocator<T>().deallocate(p, n);
    else free_huge(p, rounded(n));
  }
  template <class U>
  bool operator==(const BigAllocator<U>& /*other*/) const noexcept {
    return true;
  }

 private:
  static constexpr std::size_t kHuge = std::size_t{1} << 21;
  static std::size_t rounded(std::size_t n) { return (n * sizeof(T) + kHuge - 1) / kHuge * kHuge; }
};

/// A vector of the workspace.
template <class T>
using BigVector = std::vector<T, BigAllocator<T>>;

/// A real-to-complex FFT of one length and its inverse: through FFTW 3 when herd is built with
/// it (HERD_WITH_FFTW; plans made with FFTW_ESTIMATE: the same plan, so the same rounding, on
/// every run of a machine; plans are made and destroyed under a process-wide mutex, since
/// FFTW's planner is not thread-safe, and executed without one), otherwise through Eigen's
/// kiss FFT (half spectrum, unscaled). Owns the buffers `real()` [len] and `spectrum()`
/// [len / 2 + 1]. `forward` transforms real() into spectrum(); `inverse` transforms
/// spectrum() (overwritten) back into real(), unnormalised (times len). One object per thread.
class RealFft {
 public:
  RealFft() = default;
  ~RealFft();
  RealFft(const RealFft&) = delete;
  RealFft& operator=(const RealFft&) = delete;
  /// Takes `o`'s buffers and plans (`o` is left empty).
  RealFft(RealFft&& o) noexcept { *this = std::move(o); }
  /// Releases this object's buffers and plans, then takes `o`'s.
  RealFft& operator=(RealFft&& o) noexcept;
  /// Plans for length `len` (kept when it is the current one). @throws std::bad_alloc
  void prepare(std::size_t len);
  std::size_t length() const { return len_; }
  double* real() { return real_; }
  std::complex<double>* spectrum() { return spec_; }
  void forward();
  void inverse();
  /// Frees the buffers and plans.
  void release();

 private:
  std::size_t len_ = 0;
  double* real_ = nullptr;
  std::complex<double>* spec_ = nullptr;
#if HERD_HAVE_FFTW
  void* fwd_ = nullptr;  // fftw_plan
  void* inv_ = nullptr;  // fftw_plan
#else
  std::vector<double> real_buf_;
  std::vector<std::complex<double>> spec_buf_;
  std::unique_ptr<Eigen::FFT<double>> kiss_;
#endif
};

/// The normal quantiles z(i) = Phi^-1((i / 2 - 3/8) / (S + 1/4)) of the z-scaled ranks r = i /
/// 2 of S draws (Blom offsets, posterior's z_scale), for i in [1, S + 1], each evaluated once
/// (boost::math::quantile) and kept in 1 byte instead of 8: every K-th quantile (a knot; K =
/// 32 entries, 16 for S < 2^18) is kept whole, as its order-preserving key (zkey), and entry i
/// as the 8-bit difference between its key and the cubic through the four knots around it,
/// evaluated in integers (wrapping; the same key for the same i, whatever the knots). Within a
/// binade the key is linear in the quantile, which is smooth on the scale of K entries, so the
/// difference is a few units of the last place. The tail (the first S / 64 entries, the
/// extreme ranks, where the quantile bends too fast for the cubic) keeps 32-bit differences
/// from the line between the two knots around each entry instead. Where a difference does not
/// fit (the first block; the most extreme ranks; the blocks where the quantile crosses a power
/// of two; the entries around the median, where z crosses 0) the entry is marked and the
/// quantile evaluated on every call. The value returned is the evaluated quantile, bit for
/// bit, either way. About 1.3 bytes per
/// draw. Entries are evaluated on first use and read and written through std::atomic_ref
/// (relaxed; two threads that both find one unevaluated store the same number): operator() is
/// thread-safe, reset() is not.
class ZQuantiles {
 public:
  /// Makes the table of S = `s` draws (s + 2 entries, no quantile evaluated but the knots'),
  /// unless it is of s already. @throws std::bad_alloc
  void reset(std::size_t s);
  /// The S of the table (0 when empty).
  std::size_t draws() const { return s_; }
  /// z(i), 1 <= i <= S + 1 (inline: a stored entry is a load, the knots' cubic and an
  /// addition).
  double operator()(std::size_t i) {
    if (i >= tail_n_) [[likely]] {
      const std::int8_t d = std::atomic_ref<std::int8_t>(delta_[i - tail_n_]).load(std::memory_order_relaxed);
      if (d > kEscape) [[likely]]
        return zval(interpolated(i) + static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
    } else if (i >= (std::size_t{1} << shift_)) {
      const std::int32_t d = std::atomic_ref<std::int32_t>(tail_[i]).load(std::memory_order_relaxed);
      if (d > kEscape32) [[likely]]
        return zval(linear(i) + static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
    }
    return evaluate(i);
  }
  /// Bytes held.
  std::size_t bytes() const;

  // The encoding's parts, shared with ZQuantileFile (the same entries, kept on disk).
  using Poly = std::array<std::uint64_t, 32>;
  static constexpr std::int8_t kUnset = std::numeric_limits<std::int8_t>::min();
  static constexpr std::int8_t kEscape = kUnset + 1;
  static constexpr std::int32_t kUnset32 = std::numeric_limits<std::int32_t>::min();
  static constexpr std::int32_t kEscape32 = kUnset32 + 1;
  /// Order-preserving bijection of doubles to unsigned keys (-0 below +0), and its inverse.
  static std::uint64_t zkey(double x) {
    const auto b = std::bit_cast<std::uint64_t>(x);
    return (b >> 63) ? ~b : (b | (std::uint64_t{1} << 63));
  }
  static double zval(std::uint64_t k) {
    return std::bit_cast<double>((k >> 63) ? (k & ~(std::uint64_t{1} << 63)) : ~k);
  }
  /// log2 K of the table of S = s draws (K entries between knots).
  static unsigned shift_of(std::size_t s) { return s < (std::size_t{1} << 18) ? 4 : 5; }
  /// The tail's entries of the table of S = s draws, K = 2^shift (see the class comment).
  static std::size_t tail_of(std::size_t s, unsigned shift) {
    return std::min(s + 2, std::max(std::size_t{2} << shift, ((s / 64) >> shift) << shift));
  }
  /// Knots of the table of S = s draws (knot b at b K; b = 0 unused).
  static std::size_t knots_of(std::size_t s, unsigned shift) { return ((s + 1) >> shift) + 3; }
  /// poly2 and poly3 of interpolated() for K = 2^shift.
  static void polys(unsigned shift, Poly& poly2, Poly& poly3);
  /// z(i) of S = s draws, evaluated (boost::math::quantile).
  static double quantile_of(std::size_t s, std::size_t i);
  /// interpolated() of entry i from the knots k[-1], k[0], k[1], k[2] around it (k: knot i / K).
  static std::uint64_t cubic(const std::uint64_t* k, std::size_t i, unsigned shift, const Poly& poly2,
                             const Poly& poly3) {
    const std::uint64_t d0 = k[0] - k[-1], d1 = k[1] - k[0], d2 = k[2] - k[1];
    const std::size_t r = i & ((std::size_t{1} << shift) - 1);
    const auto signed_of = [](std::uint64_t x) { return static_cast<std::int64_t>(x); };
    const std::int64_t t1 = signed_of(r * d1) >> shift;
    const std::int64_t t2 = signed_of(poly2[r] * (d1 - d0)) >> (2 * shift + 1);
    const std::int64_t t3 = signed_of(poly3[r] * (d2 - 2 * d1 + d0)) >> (3 * shift);
    return k[0] + static_cast<std::uint64_t>(t1) + static_cast<std::uint64_t>(t2) + static_cast<std::uint64_t>(t3);
  }
  /// linear() of entry i from its knots k0 = knot i / K and k1 the next.
  static std::uint64_t line(std::uint64_t k0, std::uint64_t k1, std::size_t i, unsigned shift) {
    return k0 + (((k1 - k0) * (i & ((std::size_t{1} << shift) - 1))) >> shift);
  }

 private:
  /// The key of entry i >= 2K from the cubic through knots b - 1, b, b + 1 and b + 2 (b = i /
  /// K; Newton's form in the knots' differences, t = (i - b K) / K): k_b + t d1 + t (t - 1) /
  /// 2 (d1 - d0) + (t + 1) t (t - 1) / 6 (d2 - 2 d1 + d0), each term rounded down (the
  /// polynomials in r = i - b K from poly2_ and poly3_, the latter's / 6 rounded down too). Unsigned
  /// products (wrapping where the knots are far apart: a key that does not fit the entry's
  /// difference, never undefined behaviour), read as signed; the same key for the same i.
  std::uint64_t interpolated(std::size_t i) const {
    return cubic(knots_.data() + (i >> shift_), i, shift_, poly2_, poly3_);
  }
  /// The key of tail entry K <= i < tail_n_ interpolated linearly between knots b = i / K and
  /// b + 1 (in integers, wrapping).
  std::uint64_t linear(std::size_t i) const {
    const std::size_t b = i >> shift_;
    return line(knots_[b], knots_[b + 1], i, shift_);
  }
  /// z(i) of an entry not stored (evaluated; then stored if it fits) or not storable.
  double evaluate(std::size_t i);
  double exact(std::size_t i) const { return quantile_of(s_, i); }
  std::size_t s_ = 0;
  unsigned shift_ = 5;                     // K = 2^shift_ entries between knots
  std::size_t tail_n_ = 0;                 // entries [0, tail_n_) are the tail's (tail_), the others delta_'s
  std::array<std::uint64_t, 32> poly2_{};  // r (r - K) for r < K (two's complement)
  std::array<std::uint64_t, 32> poly3_{};  // floor(r (r - K) (r + K) / 6) for r < K (two's complement)
  BigVector<std::uint64_t> knots_;         // zkey(z(b K)) for b >= 1 (b = 0: unused)
  BigVector<std::int8_t> delta_;           // zkey(z(i)) - interpolated(i) at delta_[i - tail_n_], kUnset or kEscape
  BigVector<std::int32_t> tail_;           // zkey(z(i)) - linear(i), kUnset32 or kEscape32 (i < K: unused)
};

/// ZQuantiles' table of one S kept on disk instead of in memory, for the z-scalings of a
/// streamed view: every entry z(i), 1 <= i <= S + 1, evaluated once when the file is made, in
/// ZQuantiles' encoding (its knots, 8 bytes per K entries; the tail's 32-bit and the other
/// entries' 8-bit differences from the knots' line and cubic, kEscape where they do not fit,
/// whose quantile is evaluated on every call, as ZQuantiles does), about 1.3 bytes per draw in
/// an unlinked scratch file (io::create_unlinked_scratch, ".herd-ztable-") in
/// diagnostics_scratch_dir(). A Reader returns z(i), the evaluated quantile, bit for bit (as
/// ZQuantiles), through a window of kWindow entries read when i leaves it: the z-scalings ask
/// for i in increasing order up to the median's rank, then (mirrored) in decreasing order, so
/// each window is read about twice per z-scaling. Memory: a Reader's window (about 330 KiB),
/// whatever S. Read-only once made: thread-safe (one Reader per thread). Not copyable.
class ZQuantileFile {
 public:
  /// Entries per window of a Reader (a multiple of every K).
  static constexpr std::size_t kWindow = std::size_t{1} << 16;
  /// Evaluates the table of S = `s` (S + 1 quantiles and its knots' S / K) and writes it, a
  /// window at a time. @throws IoError when the scratch file cannot be created or written;
  /// std::bad_alloc
  explicit ZQuantileFile(std::size_t s);
  ~ZQuantileFile();
  ZQuantileFile(const ZQuantileFile&) = delete;
  ZQuantileFile& operator=(const ZQuantileFile&) = delete;
  /// The S of the table.
  std::size_t draws() const { return s_; }
  /// Bytes of the file.
  std::size_t file_bytes() const { return knots_ * 8 + tail_n_ * 4 + (s_ + 2 - tail_n_); }

  /// z(i) of a ZQuantileFile through a window of its entries. One per thread.
  class Reader {
   public:
    explicit Reader(const ZQuantileFile& file) : f_(&file) {}
    /// z(i), 1 <= i <= S + 1. @throws IoError when the file cannot be read.
    double operator()(std::size_t i) {
      if (i - first_ >= kWindow) [[unlikely]]
        load(i);
      const ZQuantileFile& f = *f_;
      if (i >= f.tail_n_) [[likely]] {
        const std::int8_t d = delta_[i - delta_first_];
        if (d > ZQuantiles::kEscape) [[likely]]
          return ZQuantiles::zval(
              ZQuantiles::cubic(knots_.data() + ((i >> f.shift_) - knot_first_), i, f.shift_, f.poly2_, f.poly3_) +
              static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
      } else if (i >= (std::size_t{1} << f.shift_)) {
        const std::int32_t d = tail_[i - first_];
        if (d > ZQuantiles::kEscape32) [[likely]] {
          const std::size_t b = (i >> f.shift_) - knot_first_;
          return ZQuantiles::zval(ZQuantiles::line(knots_[b], knots_[b + 1], i, f.shift_) +
                                  static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
        }
      }
      return ZQuantiles::quantile_of(f.s_, i);
    }

   private:
    /// Reads the window of entry i.
    void load(std::size_t i);
    const ZQuantileFile* f_;
    std::size_t first_ = std::numeric_limits<std::size_t>::max() / 2;  // the window: [first_, first_ + kWindow)
    std::size_t delta_first_ = 0, knot_first_ = 0;                     // delta_[0]'s entry, knots_[0]'s knot
    std::vector<std::uint64_t> knots_;
    std::vector<std::int32_t> tail_;
    std::vector<std::int8_t> delta_;
  };

 private:
  /// Reads `n` bytes at `offset` of the file into p. @throws IoError
  void read(void* p, std::size_t n, std::uint64_t offset) const;
  /// Writes `n` bytes from p at `offset`. @throws IoError
  void write(const void* p, std::size_t n, std::uint64_t offset) const;
  [[noreturn]] void fail(const char* what) const;
  std::uint64_t tail_offset() const { return std::uint64_t{knots_} * 8; }
  std::uint64_t delta_offset() const { return tail_offset() + std::uint64_t{tail_n_} * 4; }
  std::size_t s_ = 0;
  unsigned shift_ = 5;
  std::size_t tail_n_ = 0, knots_ = 0;
  ZQuantiles::Poly poly2_{}, poly3_{};
  int fd_ = -1;
  std::string path_;
};

/// The normal quantiles of z-scaled ranks (ZQuantiles) that the threads of one summarize_all
/// call share: one table for one draw count S, made by the first thread that asks (about 1.3
/// bytes per draw); and, for streamed views, one ZQuantileFile. Thread-safe.
class SharedZTable {
 public:
  /// The table of S = `s`, or nullptr when it was made for another S (the caller then uses
  /// its own). @throws std::bad_alloc
  ZQuantiles* table(std::size_t s);
  /// The table on disk of S = `s`, made by the first thread that asks (the others wait), or
  /// nullptr when it was made for another S (the caller then uses its own).
  /// @throws as ZQuantileFile's constructor
  std::shared_ptr<const ZQuantileFile> file(std::size_t s);

 private:
  std::mutex mu_;
  bool made_ = false;
  ZQuantiles z_;
  std::mutex file_mu_;
  std::shared_ptr<const ZQuantileFile> file_;
};

/// The split layout [2M, h] of a weighted view's draws (split_chains of its expansion: h = N /
/// 2, an odd chain's middle draw left out) as 2M series of h values that are generated in
/// order, a window at a time (Cursor), from one value per compact state instead of being
/// stored: the slot values `vals[slot]` (Kind::kSlot: one per state with draws in the split
/// layout, numbered in state order, as sort_compact numbers them), the view's values
/// (kState) or their squares about `mean`, (x - mean)^2 (kSquare). Holds the view's spans
/// and `vals` (not owned: they must outlive it) and where each split chain starts (2M
/// records). Read-only once made: thread-safe to read. Streamed (a streamed view's layout,
/// or one given a `source`): the values per state (kState, kSquare; not kSlot) are read
/// through the DrawsReader `source` instead, each cursor holding a window of kWindow of them
/// (the same values, so the same bits), and a view whose weights are read too (a
/// WeightsReader) has them read likewise, by the constructor's walk in blocks and by each
/// cursor in its window beside the values; then one thread reads it.
class SplitSeries {
 public:
  enum class Kind { kSlot, kState, kSquare };
  /// The layout of `v` (weighted, or streamed unweighted: one draw per state, no walk);
  /// walks its weights once. `vals` is the slot values for kSlot (unused otherwise).
  SplitSeries(const DrawsView& v, Kind kind, const double* vals = nullptr, double mean = 0.0);
  /// The same layout with other values (no walk of the weights); a streamed layout stays
  /// streamed from its source.
  SplitSeries with(Kind kind, const double* vals = nullptr, double mean = 0.0) const {
    SplitSeries s = *this;
    s.kind_ = kind;
    s.vals_ = vals;
    s.mean_ = mean;
    return s;
  }
  /// The same layout streamed: the values per state (kState, or kSquare about `mean`) read
  /// through `source` (not owned: it must outlive the copy and its cursors).
  SplitSeries with_source(Kind kind, const DrawsReader* source, double mean = 0.0) const {
    SplitSeries s = with(kind, nullptr, mean);
    s.source_ = source;
    return s;
  }
  /// States per window of a streamed cursor (8 bytes each: 256 KiB, a few of a reader's
  /// blocks, so that a window's read seldom reads a block that the next one reads again).
  static constexpr std::size_t kWindow = 32768;
  /// Split chains (2M) and values per split chain (h).
  std::size_t chains() const { return 2 * m_; }
  std::size_t length() const { return h_; }
  /// Whether a state of weight wj, its first draw at verbose index t0 of its chain, has draws
  /// in the split layout: all its draws but an odd chain's middle one.
  bool has_slot(std::size_t wj, std::size_t t0) const { return wj > (odd_ && t0 <= h_ && h_ < t0 + wj ? 1U : 0U); }
  /// The value of state j whose slot is `slot` (not streamed).
  double value(std::size_t j, std::size_t slot) const {
    if (kind_ == Kind::kSlot) return vals_[slot];
    if (kind_ == Kind::kState) return x_[j];
    return (x_[j] - mean_) * (x_[j] - mean_);
  }
  /// The values of one split chain in order, each minus `mu` (the same bits as the stored
  /// layout's value - mu; mu = 0 gives the values themselves).
  class Cursor {
   public:
    /// Writes the next `len` values to out[0, len); at most h values in all.
    void next(double* out, std::size_t len);

   private:
    friend class SplitSeries;
    template <Kind K, bool Streamed, bool WeightsStreamed>
    void next_impl(double* out, std::size_t len);
    /// next() of a unit layout (a streamed unweighted view: one draw per state).
    void next_unit(double* out, std::size_t len);
    /// Streamed: reads the window of states from j on (values, and weights when they are
    /// read too).
    void load(std::size_t j);
    /// The value of state j (kind's, streamed: through the window).
    double streamed_value(std::size_t j);
    const SplitSeries* s_ = nullptr;
    std::vector<double> win_;          // streamed: the values of states [base_, wend_)
    std::vector<std::uint32_t> wwin_;  // weights read too: their weights
    std::size_t base_ = 0, wend_ = 0;
    std::size_t wcap_ = std::numeric_limits<std::size_t>::max();  // no window reaches past this state
    std::size_t half_ = 0;
    std::size_t j_ = 0, slot_ = 0, t0_ = 0;  // the next state not started: its slot, its first draw
    std::size_t pend_ = 0;                   // draws of the last state started still to write
    double pend_value_ = 0;                  // their value (minus mu)
    double mu_ = 0;
  };
  /// A cursor at the start of split chain c2 (chain c2 / 2, half c2 % 2), values minus mu.
  Cursor cursor(std::size_t c2, double mu) const;

 private:
  /// Where a split chain starts: its first state j, the draws of j it holds, j's slot and the
  /// verbose index of j's first draw.
  struct Start {
    std::size_t j = 0, left = 0, slot = 0, t0 = 0, w = 0;  // w: j's weight
  };
  const std::uint32_t* w_ = nullptr;
  const double* x_ = nullptr;
  const double* vals_ = nullptr;
  const DrawsReader* source_ = nullptr;            // streamed: the values per state
  const WeightsReader* weights_source_ = nullptr;  // and the weights, when the view reads them
  Kind kind_ = Kind::kSlot;
  double mean_ = 0;
  std::size_t m_ = 0, d_ = 0, n_ = 0, h_ = 0;
  bool odd_ = false;
  bool unit_ = false;          // a streamed unweighted view: every weight 1, none stored (w_ nullptr)
  std::vector<Start> starts_;  // [2M]
};

struct SharedRanks;

/// Scratch buffers and FFT plans, one per thread.
struct Workspace {
  RealFft fft;  // a transform of whole series: autocovariance_fft's, piece_lags_stored's of one piece
  /// The ESS's piecewise transforms (piece_lags), one per power-of-two length 2^i (empty until
  /// used), so that a length planned once is kept for the next series.
  std::array<RealFft, 48> piece_fft;
  /// piece_fft(len): the transform of length len (a power of two), planned on first use.
  RealFft& piece_transform(std::size_t len);
  BigVector<double> expanded;    // verbose [M, N] of a weighted view
  BigVector<double> split;       // [2M, h] split layout (z-scores, then the split draws); unweighted views
  BigVector<double> slotz;       // z-scores per slot of a weighted view (sort_compact's slots)
  std::vector<double> window;    // windows of split chains generated by SplitSeries (with their lags' halo)
  std::vector<double> lag_sums;  // per-chain sums of the lags of one request (direct_lags_series)
  BigVector<double> sorted;      // sorted values
  /// A sort record: a draw's order-preserving sort key and its position in the split layout
  /// (unweighted views), or a run of equal draws of a weighted view (a compact state's draws,
  /// or the part that the split layout keeps): their key and the slot of the compact state
  /// (its number among the states with draws in the split layout), its draws counted in
  /// wcount. kDropped (one draw) marks an odd chain's middle draw. 12 bytes: the radix sort
  /// moves these records, so their size is its memory traffic, and a weighted view holds one
  /// per state.
#pragma pack(push, 4)
  struct Rec {
    std::uint64_t key;
    std::uint32_t pos;
  };
#pragma pack(pop)
  static_assert(sizeof(Rec) == 12);
  BigVector<Rec> recs;           // sorted records
  BigVector<Rec> radix_scratch;  // the radix sort's scratch: its largest bucket (a few thousand records)
  /// A weighted view's draws per slot (its state's draws in the split layout, >= 1), 1 byte
  /// per state: kBigCount for 255 draws or more, whose count is in wcount_big.
  static constexpr std::uint8_t kBigCount = 255;
  BigVector<std::uint8_t> wcount;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> wcount_big;  // (slot, draws), by slot
  /// Draws in the records before each block of kWBlock records of a weighted view's recs
  /// (wblock[b]: draws in recs[0, b kWBlock)): the order statistics' index, 4 bytes per
  /// block instead of a cumulative count per record.
  static constexpr std::size_t kWBlock = 64;
  std::vector<std::uint32_t> wblock;
  std::size_t wslots = 0;                      // slots of a weighted view (states with draws in the split layout)
  ZQuantiles ztab;                             // normal quantiles of ranks, kept between calls
  std::shared_ptr<const ZQuantileFile> zfile;  // streamed views' table on disk, kept between calls
  SharedZTable* shared_z = nullptr;            // summarize_all's table, used instead of ztab when set
  std::size_t rank_threads = 1;                // summarize_all's threads, which share the rank budget out of core
  /// summarize_all's rank buffers (recs, radix_scratch, radix_count, wcount, wcount_big,
  /// wblock), lent to this workspace by a RankLease while it ranks a quantity; nullptr: its own.
  SharedRanks* shared_ranks = nullptr;
  std::vector<std::uint32_t> radix_count;
  std::vector<double> centered;                // one centred chain (ess_chains, and the indicator ESS's FFT)
  std::vector<double> acov;                    // chain-averaged autocovariance at the directly summed lags
  std::vector<std::complex<double>> lag_spec;  // piece_lags: summed cross spectra and the last piece's spectrum
  std::vector<double> means;
  std::size_t geyer_lag = 0;              // the largest lag the last ESS of a generated series asked for (ess_series)
  BigVector<std::uint64_t> bits;          // packed split indicators [2M, indicator_words(h)]
  std::vector<std::uint64_t> bit_prefix;  // ones before the first and from the last words, per chain
  std::vector<std::uint64_t> bit_counts;  // pairs of ones per lag of one chain, one block of lags
  /// Bytes held: the buffers' capacities and the FFT's buffers (diagnostics_workspace_bytes).
  std::size_t bytes() const;
};

/// The rank side's buffers of a workspace (the sort records, the radix sort's scratch and
/// counts, the draws per slot and the records' block index: 13 bytes per compact state of a
/// weighted view, 12 per draw unweighted) that the threads of one summarize_all call share:
/// one thread at a time ranks a quantity in them (RankLease), while the others are on the
/// passes over their values, which need none of them. Thread-safe through RankLease.
struct SharedRanks {
  std::mutex mu;
  BigVector<Workspace::Rec> recs, radix_scratch;
  std::vector<std::uint32_t> radix_count;
  BigVector<std::uint8_t> wcount;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> wcount_big;
  std::vector<std::uint32_t> wblock;
};

/// Holds a workspace's rank buffers for one quantity's rank part (sort, order statistics,
/// z-scalings): with ws.shared_ranks set, locks its mutex and swaps the shared buffers into
/// `ws` until release() or destruction (which swap them back and unlock); otherwise `ws`
/// keeps its own and the lease does nothing. The holder must not read ws's rank buffers
/// after release(). Not copyable; one lease per workspace at a time.
class RankLease {
 public:
  explicit RankLease(Workspace& ws) : ws_(ws), shared_(ws.shared_ranks) {
    if (shared_ != nullptr) {
      shared_->mu.lock();
      swap();
    }
  }
  RankLease(const RankLease&) = delete;
  RankLease& operator=(const RankLease&) = delete;
  ~RankLease() { release(); }
  /// Gives the shared buffers back (no-op when none are held).
  void release() {
    if (shared_ == nullptr) return;
    swap();
    shared_->mu.unlock();
    shared_ = nullptr;
  }

 private:
  void swap() noexcept {
    ws_.recs.swap(shared_->recs);
    ws_.radix_scratch.swap(shared_->radix_scratch);
    ws_.radix_count.swap(shared_->radix_count);
    ws_.wcount.swap(shared_->wcount);
    ws_.wcount_big.swap(shared_->wcount_big);
    ws_.wblock.swap(shared_->wblock);
  }
  Workspace& ws_;
  SharedRanks* shared_;
};

/// The calling thread's workspace.
Workspace& workspace();

/// Smallest even length >= n whose prime factors are 2, 3, 5 and that is a multiple of 4
/// (a length FFTW transforms fast).
std::size_t fft_length(std::size_t n);

/// Whether every value is finite.
bool all_finite(const double* x, std::size_t n);
/// Whether max - min < DBL_EPSILON (posterior's is_constant).
bool is_constant(const double* x, std::size_t n);

/// Biased (divisor n) autocovariance of one series at lags 0..n-1 by FFT, into `out` (size n).
void autocovariance_fft(const double* x, std::size_t n, double* out, Workspace& ws);

/// The piece length P of the ESS's FFT pass (piece_lags_stored) for a request of lag `lag`:
/// the power of two at least 4 (lag + 1), 1024 and 16 `prev` (the previous pass's P, 0 for
/// the first pass: a sequence that outlasts a pass grows the pieces 16-fold, so a few
/// passes at most).
std::size_t piece_length(std::size_t lag, std::size_t prev);

/// The chain-averaged autocovariance (divisor m n) of m centred chains stored [m, n]
/// (row-major) at lags [0, *valid), *valid > lag, by FFT in pieces, as the ESS takes the lags
/// past its directly summed ones. With P = piece_length(lag, prev) and 2P <= n, each chain
/// is read in pieces of P values, in order, each piece zero-padded to 2P points and
/// transformed once (real-to-complex, ws.piece_transform(2P)); the sum over chains and
/// pieces j of conj(X_j) X_j + (-1)^f conj(X_j) X_{j+1} (at frequency f: piece j+1 shifted by
/// P points) is the spectrum of sum_{t < n - k} x_t x_{t+k} at every lag k <= P, and one
/// inverse transform gives them: *valid = P + 1. When 2P > n (two pieces or one), each chain
/// is one piece zero-padded to fft_length(2 n) points (ws.fft, which costs less): *valid = n.
/// Memory: the transform's 2P doubles and P + 1 complex, ws.lag_spec's 2 (P + 1) complex:
/// 64 P bytes (P >= 4 (lag + 1): 256 bytes or more per lag), whatever n (one piece: 24 bytes
/// per point of fft_length(2 n), about 2n < 4P points). CPU: m n / P transforms of 2P points
/// and one inverse (a pass costs about as much as 100 to 250 lags summed directly for P =
/// 1024 to 65536). Rounding: not that of the direct sums (a lag's last bits differ; about
/// 1e-15 of lag 0 on the tests' series). Returns the lags (the transform's real buffer: valid
/// until ws's next transform of that length). n >= 1.
const double* piece_lags_stored(const double* y, std::size_t m, std::size_t n, std::size_t lag, Workspace& ws,
                                std::size_t* valid, std::size_t prev = 0);

/// ESS of m chains of n draws stored contiguously ([m, n] row-major), posterior's `.ess`.
/// NaN when n < 3, a value is non-finite or the values are constant; `checked` = true
/// skips those two checks (the caller knows the values are finite and not constant).
double ess_chains(const double* y, std::size_t m, std::size_t n, Workspace& ws, bool checked = false);

/// acc[k] += sum_{t < n - k} z[t] z[t + k] for k in [k0, k1), k1 <= n, as summed by
/// ess_chains for the lags it does not take from the FFT.
void direct_lags(const double* z, std::size_t n, std::size_t k0, std::size_t k1, double* acc);

/// direct_lags of m chains [m, n] at once, bit for bit: acc[k] += (chain 0's sum at lag k) +
/// (chain 1's) + ... (added in chain order) for k in [k0, k1), each lag's sum in the order
/// direct_lags gives it when called on whole blocks of 32 lags from multiples of 32 (as
/// ess_chains calls it). k0 must be a multiple of 16, and k1 one too unless k1 >= n. Lags in
/// half blocks of 16, two chains at a time (8 vectors of sums, as direct_lags' 32 lags of one
/// chain), so that a caller can stop 16 lags after the last one it needs instead of 32.
void direct_lags_chains(const double* y, std::size_t m, std::size_t n, std::size_t k0, std::size_t k1, double* acc);

/// 64-bit words of one packed indicator chain of n draws: ceil(n / 64) words of draws and one
/// zero word after them (the lag sums read one word past the draws).
std::size_t indicator_words(std::size_t n);

/// Packs I(x[t] <= q) for t in [0, n) into bits [indicator_words(n)]: draw t is bit t % 64 of
/// word t / 64; the bits past n and the last word are zero.
void pack_indicator(const double* x, std::size_t n, double q, std::uint64_t* bits);

/// out[k - k0] = sum_{t < n - k} I_t I_{t + k} for k in [k0, k1), k1 <= n: the pairs of ones k
/// draws apart of one packed chain (pack_indicator's layout), by popcount of the words and
/// the words shifted by k (about n / 64 word operations per lag).
void indicator_lag_counts(const std::uint64_t* bits, std::size_t n, std::size_t k0, std::size_t k1, std::uint64_t* out);

/// ess_chains of m indicator chains of n draws packed as pack_indicator writes them ([m,
/// indicator_words(n)] words), without unpacking them: each lag's autocovariance comes from
/// integer counts of pairs (indicator_lag_counts, prefix counts of ones) and the products of
/// the centred values 1 - mean and -mean, summed in double-double and rounded once (so it is
/// the exactly rounded sum that ess_chains approximates term by term); lags beyond 2048 come
/// from the FFT in pieces (piece_lags_stored's sums of the centred 0/1 values). NaN when
/// n < 3; the caller makes sure the indicator is not constant. Uses ws (not its `bits`).
double ess_indicator_bits(const std::uint64_t* bits, std::size_t m, std::size_t n, Workspace& ws);

/// ess_chains on scratch values: the same result, but `y` is centred in place (each chain
/// minus its mean) instead of chain by chain into a buffer for every block of lags, so the
/// values are left changed.
double ess_chains_overwrite(double* y, std::size_t m, std::size_t n, Workspace& ws, bool checked = false);

/// posterior's `.rhat` of m chains of n draws, [m, n] row-major. NaN when m < 2, n < 2,
/// a value is non-finite or the values are constant (`checked` as for ess_chains).
double rhat_chains(const double* y, std::size_t m, std::size_t n, bool checked = false);

/// rhat_chains(y, m, n, true) into *rhat and ess_chains_overwrite(y, m, n, ws, true) into
/// *ess, bit for bit, with one pass of chain means and one pass that centres the values in
/// place and sums their squares (instead of two each). The values must be finite and not
/// constant (both are computed as `checked`); y is left centred.
void rhat_ess_overwrite(double* y, std::size_t m, std::size_t n, Workspace& ws, double* rhat, double* ess);

/// Split draws (2 M h) up to which summarize() stores a weighted view's split layout (each
/// series generated once into ws.split, 8 bytes per split draw: at most 2 MiB by default,
/// 2^18 draws) and runs the unweighted view's code on it, instead of generating the series
/// window by window for every pass (ess_series): the same bits either way, and for small
/// views the stored layout costs less CPU while the memory stays bounded. Process-wide
/// (relaxed atomic); tests set it to 0 (always per window) or SIZE_MAX (always stored).
std::atomic<std::size_t>& stored_split_limit();

/// Writes the split layout [2M, h] that `s` generates to out (split chain c at out + c h).
void fill_series(const SplitSeries& s, double* out);

/// ess_chains_overwrite(y, 2M, h, ws, true) of the split layout y that `s` generates, bit for
/// bit, without storing it: its lags are summed window by window (direct_lags_chains' sums,
/// each carried across windows in the same order), its FFT (if any) generates each chain
/// piece by piece (piece_lags_stored's pieces, the same bits). The values must be finite.
/// `check` = true first checks the values as summarize checks ess_sd's squares: NaN when
/// the largest is not finite or the values are constant (or there are none).
/// A series' split chain means (mean_of's four lanes over each split chain, [2M]) and its
/// smallest and largest value (+inf and -inf when it has none), as ess_series computes them
/// in a pass of its own: for a caller that has them from a pass it makes anyway.
struct SeriesMeans {
  std::vector<double> means;
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
};

/// `hint` (0: none) is the lag at which a similar series' Geyer sequence stopped
/// (ws.geyer_lag after it): the first pass of lags goes that far, so one pass usually serves;
/// the result is the same bits whatever the hint. Sets ws.geyer_lag to the largest lag this
/// series' sequence asked for. `known` (nullptr: computed here) is the series' SeriesMeans,
/// which must be those of `s`, bit for bit.
double ess_series(const SplitSeries& s, Workspace& ws, bool check = false, std::size_t hint = 0,
                  const SeriesMeans* known = nullptr);

/// rhat_ess_overwrite(y, 2M, h, ws, rhat, ess) of the split layout that `s` generates, bit
/// for bit, without storing it (as ess_series). The values must be finite and, unless
/// `check` = true (both NaN when the values are constant, detail::is_constant), not constant.
/// `hint` and `known` as for ess_series (ws.geyer_lag is set likewise when the ESS is computed).
void rhat_ess_series(const SplitSeries& s, Workspace& ws, double* rhat, double* ess, bool check = false,
                     std::size_t hint = 0, const SeriesMeans* known = nullptr);

/// rhat_chains(y, 2M, h, true) of the split layout that `s` generates, bit for bit.
double rhat_series(const SplitSeries& s, Workspace& ws);

/// The verbose [M, N] draws of a view: the values themselves when unweighted, else the
/// expansion in ws.expanded.
const double* verbose_values(const DrawsView& v, Workspace& ws);

/// Copies [M, N] to the split layout [2M, h], h = N / 2 (odd N drops the middle draw).
void split_chains(const double* x, std::size_t m, std::size_t n, double* out);

}  // namespace herd::mcmc::detail
