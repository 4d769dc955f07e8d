// Convergence diagnostics (Vehtari et al. 2021, as R posterior 1.4), see diagnostics.hpp.
#include "herd/mcmc/diagnostics.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#include <tuple>
#include <type_traits>

#if HERD_HAVE_FFTW
#include <fftw3.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <unistd.h>

#include <Eigen/Core>
#include <boost/math/distributions/beta.hpp>
#include <boost/math/distributions/normal.hpp>

#include "diagnostics_detail.hpp"
#include "herd/core/error.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/io/atomic_file.hpp"
#include "order_statistics.hpp"

namespace herd::mcmc {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// MCSE(quantile) uses the Beta quantiles at Phi(-1) and Phi(1), rounded as posterior does.
constexpr double kBetaLo = 0.1586553;
constexpr double kBetaHi = 0.8413447;
// Lags summed directly (O(S) each, in blocks growing by 1.25) before switching to the FFT for
// all lags: at least kDirectLags, more for long chains (direct_lag_cap). Most series stop
// within a few dozen lags; FFTW (about 3.5x faster than Eigen's kiss FFT at 1e6 points) did
// not move the best switch point below 160 (48 and 96 were slower on a 10-D run of 1.1e6
// draws).
constexpr std::size_t kDirectLags = 160;

using BoostPolicy =
    boost::math::policies::policy<boost::math::policies::domain_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::evaluation_error<boost::math::policies::ignore_error>,
                                  boost::math::policies::promote_double<false>>;

using Rec = detail::Workspace::Rec;

/// Order-preserving map of a (non-NaN) double to an unsigned key; -0 maps like +0, so equal
/// doubles have equal keys.
inline std::uint64_t sort_key(double x) {
  const auto b = std::bit_cast<std::uint64_t>(x + 0.0);
  return (b >> 63) ? ~b : (b | (std::uint64_t{1} << 63));
}
inline double from_key(std::uint64_t k) {
  return std::bit_cast<double>((k >> 63) ? (k & ~(std::uint64_t{1} << 63)) : ~k);
}

/// NaN-propagating max (R's max).
double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return std::max(a, b);
}

double nan_min(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return std::min(a, b);
}

double sum_of(const double* x, std::size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < n; ++i) s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}

double mean_of(const double* x, std::size_t n) { return sum_of(x, n) / static_cast<double>(n); }

/// R's quantile(type = 7) on sorted data (n >= 1); xs(i) is the i-th smallest (0-based).
template <class At>
double quantile7(At xs, std::size_t n, double p) {
  const double index = 1.0 + static_cast<double>(n - 1) * p;
  const double lo = std::floor(index);
  const double hi = std::ceil(index);
  const auto ilo = static_cast<std::size_t>(lo) - 1;
  const auto ihi = static_cast<std::size_t>(hi) - 1;
  double q = xs(ilo);
  if (index > lo && xs(ihi) != q) {
    const double h = index - lo;
    q = (1.0 - h) * q + h * xs(ihi);
  }
  return q;
}

/// posterior's MCSE of a quantile from the indicator ESS and the sorted draws.
template <class At>
double mcse_quantile7(At xs, std::size_t s, double prob, double ess) {
  if (!std::isfinite(ess)) return kNaN;
  const double a1 = ess * prob + 1.0;
  const double b1 = ess * (1.0 - prob) + 1.0;
  const boost::math::beta_distribution<double, BoostPolicy> beta(a1, b1);
  const double a = boost::math::quantile(beta, kBetaLo);
  const double b = boost::math::quantile(beta, kBetaHi);
  if (!std::isfinite(a) || !std::isfinite(b)) return kNaN;
  const double sd = static_cast<double>(s);
  const double i1 = std::max(std::floor(a * sd), 1.0);
  const double i2 = std::min(std::ceil(b * sd), sd);
  return (xs(static_cast<std::size_t>(i2) - 1) - xs(static_cast<std::size_t>(i1) - 1)) / 2.0;
}

void check_prob(const char* fn, double prob) {
  HERD_REQUIRE(prob >= 0.0 && prob <= 1.0, "{}: prob is {}, but must be in [0, 1]", fn, prob);
}

/// Normal quantiles of Blom-offset ranks (r - 3/8) / (S + 1/4), cached by 2r (ranks may be
/// half-integers with ties) in the workspace (detail::ZQuantiles); z(S + 1 - r) = -z(r) halves
/// the evaluations. The cache outlives the call: the next quantity with the same S (every
/// quantity of a run) reuses the quantiles already evaluated, which are the same numbers.
/// Under summarize_all the threads share one cache (ws.shared_z) when their S is its S (its
/// entries are thread-safe), so each thread's z-scores are the same bits as with its own.
class ZTable {
 public:
  ZTable(std::size_t s, detail::Workspace& ws) : s_(s) {
    if (ws.shared_z != nullptr) z_ = ws.shared_z->table(s);
    if (z_ == nullptr) {
      ws.ztab.reset(s);
      z_ = &ws.ztab;
    }
  }
  double operator()(std::size_t two_r) {
    const std::size_t mirror = 2 * (s_ + 1) - two_r;
    if (two_r > mirror) return -(*this)(mirror);
    return (*z_)(two_r);
  }

 private:
  std::size_t s_;
  detail::ZQuantiles* z_ = nullptr;
};

/// ZTable of a streamed view: the same quantiles, bit for bit, from a detail::ZQuantileFile
/// (under summarize_all the one its threads share, ws.shared_z, when their S is its S; else
/// the thread's own, ws.zfile, kept for the next quantity of the same S) through a window of
/// its entries, so that no memory per draw is held. @throws IoError from the file.
class ZFileTable {
 public:
  ZFileTable(std::size_t s, detail::Workspace& ws) : s_(s), file_(shared_file(s, ws)), reader_(*file_) {}
  double operator()(std::size_t two_r) {
    const std::size_t mirror = 2 * (s_ + 1) - two_r;
    if (two_r > mirror) return -(*this)(mirror);
    return reader_(two_r);
  }

 private:
  static std::shared_ptr<const detail::ZQuantileFile> shared_file(std::size_t s, detail::Workspace& ws) {
    std::shared_ptr<const detail::ZQuantileFile> f = ws.shared_z != nullptr ? ws.shared_z->file(s) : nullptr;
    if (f) return f;
    if (!ws.zfile || ws.zfile->draws() != s) {
      ws.zfile.reset();  // the old one's disk space first
      ws.zfile = std::make_shared<const detail::ZQuantileFile>(s);
    }
    return ws.zfile;
  }
  std::size_t s_;
  std::shared_ptr<const detail::ZQuantileFile> file_;
  detail::ZQuantileFile::Reader reader_;
};

constexpr std::uint32_t kDropped = 0xffffffffu;

/// The smallest and largest of the z-scores written by a z-scaling (each tie group's once):
/// the extremes of the values written, so constant() is detail::is_constant of them without a
/// pass over them (true when none was written, as is_constant of nothing).
struct ZRange {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  bool any = false;
  void add(double z) {
    lo = std::min(lo, z);
    hi = std::max(hi, z);
    any = true;
  }
  bool constant() const { return !any || std::fabs(hi - lo) < std::numeric_limits<double>::epsilon(); }
};

// A record stands for 1 draw (unweighted views: UnitCounts) or for the draws of its slot at
// consecutive split positions (weighted views: SlotCounts, the counts kept per slot); the
// rank code below is written once for both. Dropped records (one draw each) are never asked.
struct UnitCounts {
  std::uint32_t operator()(const Rec& /*r*/) const { return 1; }
  void prefetch(const Rec& /*r*/) const {}
};
struct SlotCounts {
  const std::uint8_t* small = nullptr;
  const std::pair<std::uint32_t, std::uint32_t>* big = nullptr;
  std::size_t nbig = 0;
  explicit SlotCounts(const detail::Workspace& ws)
      : small(ws.wcount.data()), big(ws.wcount_big.data()), nbig(ws.wcount_big.size()) {}
  std::uint32_t operator()(std::uint32_t slot) const {
    const std::uint32_t c = small[slot];
    if (c != detail::Workspace::kBigCount) [[likely]]
      return c;
    return std::lower_bound(big, big + nbig, slot, [](const auto& e, std::uint32_t v) { return e.first < v; })->second;
  }
  void prefetch(std::uint32_t slot) const { __builtin_prefetch(small + slot); }
  std::uint32_t operator()(const Rec& r) const { return (*this)(r.pos); }
  void prefetch(const Rec& r) const { prefetch(r.pos); }
};
/// A record of the out-of-core rank side (SpilledRanks): Rec's key and slot (or kDropped)
/// with the draws it stands for (1 for kDropped), so that no array of counts per slot is held.
struct SpillRec {
  std::uint64_t key;
  std::uint32_t pos;
  std::uint32_t count;
};
static_assert(sizeof(SpillRec) == 16);
/// The counts of SpillRec records: in the record.
struct RecCounts {
  std::uint32_t operator()(const SpillRec& r) const { return r.count; }
  void prefetch(const SpillRec& /*r*/) const {}
};
/// Writes z for a (not dropped) record: at its split position (unweighted), or as its compact
/// state's z-score (weighted: the state's draws all get it, detail::SplitSeries spreads it).
template <class R>
inline void store(double* out, const R& r, double z) {
  out[r.pos] = z;
}
/// Prefetches where store() will write record position `pos`.
inline void prefetch_store(double* out, std::uint32_t pos) { __builtin_prefetch(out + pos, 1); }
class ZSpill;
/// A streamed view's z-score of the state numbered r.pos, to the out-of-core write-back.
template <class R>
inline void store(ZSpill* out, const R& r, double z);
inline void prefetch_store(ZSpill* /*out*/, std::uint32_t /*pos*/) {}
/// `take_r ? r : l` with the key replaced, branch-free.
inline Rec merged(const Rec& l, const Rec& r, bool take_r, std::uint64_t key) { return {key, take_r ? r.pos : l.pos}; }
inline SpillRec merged(const SpillRec& l, const SpillRec& r, bool take_r, std::uint64_t key) {
  return {key, take_r ? r.pos : l.pos, take_r ? r.count : l.count};
}
/// The record type of a sorted-records accessor (a pointer, or SpillAt).
template <class A>
using RecOf = std::remove_cvref_t<decltype(std::declval<A>()[0])>;

/// z-scaled average ranks (posterior's z_scale) of the split draws: `sorted` holds `count`
/// records of all draws sorted by key; the middle draws of odd chains carry kDropped and are
/// skipped. Ties (equal keys) get their average rank over the draws they stand for. `out` has
/// the s2 split positions, each written once, in random order: with the workspace on huge
/// pages direct writes (each destination's line prefetched a few records ahead) beat staging
/// them through position windows, and need no staging buffer. Returns whether the z-scores
/// written are constant (detail::is_constant of `out`, from the groups' z-scores: no pass
/// over `out`).
template <class C, class A, class Out, class Z>
bool z_scale_sorted(A sorted, std::size_t count, const C& counts, Out out, Z& ztab) {
  constexpr std::size_t kAhead = 16;
  std::size_t rank = 0;
  std::size_t i = 0;
  ZRange range;
  while (i < count) {
    if (i + kAhead < count && sorted[i + kAhead].pos != kDropped) {
      prefetch_store(out, sorted[i + kAhead].pos);
      counts.prefetch(sorted[i + kAhead]);
    }
    std::size_t j = i + 1;
    std::size_t included = sorted[i].pos != kDropped ? counts(sorted[i]) : 0;
    while (j < count && sorted[j].key == sorted[i].key) {
      included += sorted[j].pos != kDropped ? counts(sorted[j]) : 0;
      ++j;
    }
    if (included > 0) {
      const double z = ztab(2 * rank + 1 + included);  // 2 * average rank
      range.add(z);
      for (std::size_t k = i; k < j; ++k)
        if (sorted[k].pos != kDropped) store(out, sorted[k], z);
      rank += included;
    }
    i = j;
  }
  return range.constant();
}

/// The records of all draws sorted by |x - med| (the key replaced by the key of |x - med|),
/// one at a time: the sorted records merged outward from the median. Branch-free (which side
/// comes next is a coin flip for the branch predictor): an exhausted side reads a valid
/// record and is never taken. The records given so far are sorted[left(), right()).
template <class A>
class FoldMerge {
 public:
  using R = RecOf<A>;
  FoldMerge(A sorted, std::size_t s, double med) : sorted_(sorted), s_(s), med_(med) {
    const std::uint64_t kmed = sort_key(med);
    if constexpr (std::is_pointer_v<A>) {
      right_ = left_ = static_cast<std::size_t>(
          std::lower_bound(sorted, sorted + s, kmed, [](const R& r, std::uint64_t k) { return r.key < k; }) - sorted);
    } else {  // the first record of key >= kmed, by bisection
      std::size_t lo = 0, hi = s;
      while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid].key < kmed) lo = mid + 1;
        else hi = mid;
      }
      right_ = left_ = lo;
    }
  }
  /// The next record; at most s calls.
  R next() {
    const bool has_l = left_ > 0, has_r = right_ < s_;
    const auto& l = sorted_[has_l ? left_ - 1 : 0];  // a reference into memory, or a copy
    const auto& r = sorted_[has_r ? right_ : s_ - 1];
    const double fl = std::fabs(from_key(l.key) - med_);
    const double fr = std::fabs(from_key(r.key) - med_);
    const bool take_r = has_r & (!has_l | (fr <= fl));
    right_ += take_r ? 1 : 0;
    left_ -= take_r ? 0 : 1;
    return merged(l, r, take_r, sort_key(take_r ? fr : fl));
  }
  std::size_t left() const { return left_; }
  std::size_t right() const { return right_; }

 private:
  A sorted_;
  std::size_t s_;
  double med_;
  std::size_t left_ = 0, right_ = 0;
};

/// z_scale_sorted of the `count` records `sorted` folded about `med` (FoldMerge), scaled as
/// they are merged instead of stored first (no buffer of folded records: 12 bytes per draw,
/// 16 per state of a weighted view). A tie group (equal folded keys) is the records merged
/// since the last change of key: two ranges of `sorted`, one on each side of the median,
/// which get its z-score once its last record is known. The split positions a few records
/// ahead on both sides are prefetched. The same z-scores at the same positions; returns
/// whether they are constant (as z_scale_sorted).
template <class C, class A, class Out, class Z>
bool z_scale_folded(A sorted, std::size_t count, const C& counts, double med, Out out, Z& ztab) {
  using R = RecOf<A>;
  if (count == 0) return true;
  ZRange range;
  constexpr std::size_t kAhead = 16;
  FoldMerge<A> merge(sorted, count, med);
  std::size_t rank = 0;
  std::size_t l0 = merge.left(), r0 = merge.right();  // the group: sorted[l, l0) and [r0, r)
  std::size_t included = 0;
  std::size_t group = 0;  // records in the group
  R first{};              // its first record
  // Inlined: its state (rank, the group) stays in registers; a call would keep it in memory.
  auto flush = [&](std::size_t l, std::size_t r) __attribute__((always_inline)) {
    if (included == 0) return;
    const double z = ztab(2 * rank + 1 + included);  // 2 * average rank
    range.add(z);
    if (group == 1) {
      store(out, first, z);  // no need to ask which side it came from (a coin flip)
    } else {
      for (std::size_t k = l; k < l0; ++k)
        if (sorted[k].pos != kDropped) store(out, sorted[k], z);
      for (std::size_t k = r0; k < r; ++k)
        if (sorted[k].pos != kDropped) store(out, sorted[k], z);
    }
    rank += included;
  };
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t l = merge.left(), r = merge.right();
    if (r + kAhead < count && sorted[r + kAhead].pos != kDropped) {
      prefetch_store(out, sorted[r + kAhead].pos);
      counts.prefetch(sorted[r + kAhead]);
    }
    if (l > kAhead && sorted[l - kAhead - 1].pos != kDropped) {
      prefetch_store(out, sorted[l - kAhead - 1].pos);
      counts.prefetch(sorted[l - kAhead - 1]);
    }
    const R rec = merge.next();
    if (t == 0 || rec.key != first.key) {
      if (t > 0) flush(l, r);
      l0 = l;
      r0 = r;
      included = 0;
      group = 0;
      first = rec;
    }
    ++group;
    included += rec.pos != kDropped ? counts(rec) : 0;
  }
  flush(merge.left(), merge.right());
  return range.constant();
}

/// States per block of a streamed view's passes (8 bytes each: 512 KiB).
constexpr std::size_t kStateBlock = 65536;

/// kStateBlock weights of 1: the weights of every block of a streamed unweighted view.
const std::uint32_t* unit_weights() {
  static const std::vector<std::uint32_t> ones(kStateBlock, 1u);
  return ones.data();
}

/// Calls f(j0, x, w, n) on the states of a weighted view in order, x and w the values and
/// weights of states [j0, j0 + n) of the [M, D] layout: the whole view at once when its
/// values are in memory, else blocks of kStateBlock read through its reader into a buffer
/// (and its weights too, when they are read through a WeightsReader; a streamed unweighted
/// view's weights all 1: unit_weights()).
template <class F>
void for_each_state_block(const DrawsView& v, F&& f) {
  const std::uint32_t* w = v.weights().data();
  if (!v.streamed()) {
    f(std::size_t{0}, v.values().data(), w, v.values().size());
    return;
  }
  const bool unit = !v.weighted();
  const std::size_t total = v.chains() * v.draws();
  const WeightsReader* wr = v.weights_reader();
  std::vector<double> buf(std::min(total, kStateBlock));
  std::vector<std::uint32_t> wbuf(wr != nullptr ? buf.size() : 0);
  for (std::size_t j0 = 0; j0 < total; j0 += kStateBlock) {
    const std::size_t n = std::min(kStateBlock, total - j0);
    (*v.reader())(j0, std::span<double>(buf.data(), n));
    if (wr != nullptr) (*wr)(j0, std::span<std::uint32_t>(wbuf.data(), n));
    const std::uint32_t* wj = wr != nullptr ? static_cast<const std::uint32_t*>(wbuf.data())
                              : unit        ? unit_weights()
                                            : w + j0;
    f(j0, static_cast<const double*>(buf.data()), wj, n);
  }
}

/// Calls f(j0, w, n) on the weights of a weighted view's states in order, w the weights of
/// states [j0, j0 + n) of the [M, D] layout: all at once when they are in memory, else blocks
/// of kStateBlock read through its WeightsReader (a streamed unweighted view's: unit_weights()).
template <class F>
void for_each_weight_block(const DrawsView& v, F&& f) {
  const WeightsReader* wr = v.weights_reader();
  const bool unit = v.streamed() && !v.weighted();
  if (wr == nullptr && !unit) {
    f(std::size_t{0}, v.weights().data(), v.weights().size());
    return;
  }
  const std::size_t total = v.chains() * v.draws();
  std::vector<std::uint32_t> buf(wr != nullptr ? std::min(total, kStateBlock) : 0);
  for (std::size_t j0 = 0; j0 < total; j0 += kStateBlock) {
    const std::size_t n = std::min(kStateBlock, total - j0);
    if (unit) {
      f(j0, unit_weights(), n);
      continue;
    }
    (*wr)(j0, std::span<std::uint32_t>(buf.data(), n));
    f(j0, static_cast<const std::uint32_t*>(buf.data()), n);
  }
}

/// The shared state of one quantity's analysis: verbose draws, sizes, and for a weighted
/// view its compact values and weights.
struct Prepared {
  const double* x = nullptr;  // [M, N]
  std::size_t m = 0, n = 0, s = 0, h = 0;
  bool finite = true;
  const DrawsView* view = nullptr;
  /// Summarized as a compact view: weighted, or streamed (an unweighted streamed view as one
  /// of unit weights, which are not stored: for_each_state_block, detail::SplitSeries).
  bool compact() const { return view->weighted() || view->streamed(); }
};

Prepared prepare(const DrawsView& v, detail::Workspace& ws) {
  HERD_REQUIRE(!v.streamed(),
               "diagnostics: a streamed view (values read in blocks) is summarized by summarize() and "
               "summarize_all() only");
  Prepared p;
  p.x = detail::verbose_values(v, ws);
  p.m = v.chains();
  p.n = v.verbose_draws();
  p.s = p.m * p.n;
  p.h = p.n / 2;
  p.finite = detail::all_finite(p.x, p.s);
  p.view = &v;
  return p;
}

/// prepare() without the expansion, for summarize: a weighted view's draws stay compact (x is
/// nullptr; moments, detail::SplitSeries and the indicators read the compact values), an
/// unweighted view's are its values.
Prepared prepare_lean(const DrawsView& v, detail::Workspace& ws) {
  if (!v.weighted() && !v.streamed()) return prepare(v, ws);
  Prepared p;
  p.m = v.chains();
  p.n = v.verbose_draws();
  p.s = p.m * p.n;
  p.h = p.n / 2;
  p.view = &v;
  // The expansion is finite when every value of positive weight is.
  for_each_state_block(v, [&](std::size_t /*j0*/, const double* x, const std::uint32_t* w, std::size_t n) {
    bool finite = p.finite;
    for (std::size_t j = 0; j < n; ++j) finite &= w[j] == 0 || std::isfinite(x[j]);
    p.finite = finite;
  });
  return p;
}

/// posterior's is_constant of the (finite) draws: largest - smallest < DBL_EPSILON, over the
/// draws themselves or a weighted view's states of positive weight (the same extremes as its
/// sorted draws' first and last).
bool is_constant_draws(const Prepared& p) {
  if (!p.compact()) return detail::is_constant(p.x, p.s);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for_each_state_block(*p.view, [&](std::size_t /*j0*/, const double* x, const std::uint32_t* w, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
      if (w[j] == 0) continue;
      lo = x[j] < lo ? x[j] : lo;
      hi = x[j] > hi ? x[j] : hi;
    }
  });
  return std::fabs(hi - lo) < std::numeric_limits<double>::epsilon();
}

/// out[0, 8) <- v (8 stores at once; see fill_run8).
inline void store8(double* out, double v) {
#if defined(__AVX2__)
  const __m256d b = _mm256_set1_pd(v);
  _mm256_storeu_pd(out, b);
  _mm256_storeu_pd(out + 4, b);
#else
  std::fill_n(out, 8, v);
#endif
}

/// Writes w copies of v from out on and returns out + w: a run of at most 8 (nearly every
/// state of a DRAM chain) as 8 stores at once, so up to 7 values past the run are written too
/// when out + 8 <= end (the caller writes them later); no branch on the run's length, whose
/// mispredictions cost more than the stores.
inline double* fill_run8(double* out, std::size_t w, double v, const double* end) {
  if (w <= 8 && out + 8 <= end) [[likely]] {
    store8(out, v);
    return out + w;
  }
  return std::fill_n(out, w, v);
}

/// Calls f(chunk, len) on the verbose draws of a weighted view ([M, N], chain after chain) in
/// order, expanded chunk by chunk into a buffer that stays in cache: every chunk but the last
/// holds kChunk draws (a multiple of 4, so that 4-lane sums over the chunks add the same draws
/// in the same lanes and order as over the whole expansion). A state of at most 8 draws that
/// does not fill the chunk (nearly every one) is written as 8 stores, with one well-predicted
/// branch per state (the loop over a state's share of chunks mispredicted on every change of
/// weight).
template <class F>
void for_each_verbose_chunk(const DrawsView& v, F&& f) {
  constexpr std::size_t kChunk = 2048;
  static_assert(kChunk % 4 == 0);
  std::array<double, kChunk + 8> buf;  // NOLINT(cppcoreguidelines-pro-type-member-init): filled before read
  const double* end = buf.data() + buf.size();
  std::size_t fill = 0;
  for_each_state_block(v, [&](std::size_t /*j0*/, const double* x, const std::uint32_t* w, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) {
      auto left = static_cast<std::size_t>(w[j]);
      if (left <= 8 && fill + left < kChunk) [[likely]] {
        store8(buf.data() + fill, x[j]);  // fill < kChunk: the 8 stores stay in buf
        fill += left;
        continue;
      }
      while (left > 0) {
        const std::size_t take = std::min(left, kChunk - fill);
        fill_run8(buf.data() + fill, take, x[j], end);
        fill += take;
        left -= take;
        if (fill == kChunk) {
          f(buf.data(), fill);
          fill = 0;
        }
      }
    }
  });
  if (fill > 0) f(buf.data(), fill);
}

/// Four-lane sums per split chain of the verbose draws of an [M, N] layout fed in order,
/// chunk by chunk: split chain 2c holds chain c's draws [0, h), 2c + 1 its draws [N - h, N)
/// (h = N / 2; an odd N's middle draw belongs to neither), and split position t goes to lane
/// t % 4, so each lane adds the values series_means adds to it, in the same order. The
/// smallest and largest value summed are kept too. `tail0`: the split positions past the
/// last whole group of 4 (t >= h / 4 * 4) go to lane 0 instead, in order, as mean_of sums
/// them (an unweighted view's stored split chains: the same bits as in memory); without it
/// (weighted views, as before) they go to lane t % 4.
class SplitLanes {
 public:
  SplitLanes(std::size_t m, std::size_t n, bool tail0)
      : n_(n), h_(n / 2), h4_(tail0 ? n / 2 / 4 * 4 : n), lanes_(2 * m) {}
  /// Adds value(x[i]) for the next len draws.
  template <class V>
  void add(const double* x, std::size_t len, V value) {
    while (len > 0) {
      const std::size_t c = g_ / n_, t = g_ % n_;
      std::size_t c2 = 2 * c, p = t, seg = 0;
      if (t < h_) {
        seg = std::min(len, h_ - t);
      } else if (t < n_ - h_) {  // the dropped middle draw
        const std::size_t skip = std::min(len, n_ - h_ - t);
        x += skip;
        g_ += skip;
        len -= skip;
        continue;
      } else {
        c2 = 2 * c + 1;
        p = t - (n_ - h_);
        seg = std::min(len, n_ - t);
      }
      std::array<double, 4>& l = lanes_[c2];
      double a0 = l[0], a1 = l[1], a2 = l[2], a3 = l[3];
      double lo = lo_, hi = hi_;
      const auto one = [&](std::size_t lane, double v) {
        switch (lane) {
          case 0:
            a0 += v;
            break;
          case 1:
            a1 += v;
            break;
          case 2:
            a2 += v;
            break;
          default:
            a3 += v;
            break;
        }
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      };
      // Positions past h4_ (tail0) are only in the single loops: a whole group of 4 ends at
      // or before h4_.
      const auto lane = [&](std::size_t q) { return q >= h4_ ? 0 : q % 4; };
      std::size_t i = 0;
      for (; i < seg && (p + i) % 4 != 0; ++i) one(lane(p + i), value(x[i]));
      for (; i + 4 <= seg; i += 4) {
        const double v0 = value(x[i]), v1 = value(x[i + 1]), v2 = value(x[i + 2]), v3 = value(x[i + 3]);
        a0 += v0;
        a1 += v1;
        a2 += v2;
        a3 += v3;
        lo = v0 < lo ? v0 : lo;
        hi = v0 > hi ? v0 : hi;
        lo = v1 < lo ? v1 : lo;
        hi = v1 > hi ? v1 : hi;
        lo = v2 < lo ? v2 : lo;
        hi = v2 > hi ? v2 : hi;
        lo = v3 < lo ? v3 : lo;
        hi = v3 > hi ? v3 : hi;
      }
      for (; i < seg; ++i) one(lane(p + i), value(x[i]));
      l = {a0, a1, a2, a3};
      lo_ = lo;
      hi_ = hi;
      x += seg;
      g_ += seg;
      len -= seg;
    }
  }
  /// series_means' results: the split chains' means and the extremes.
  detail::SeriesMeans result() const {
    detail::SeriesMeans r;
    r.means.resize(lanes_.size());
    for (std::size_t c = 0; c < lanes_.size(); ++c) {
      const std::array<double, 4>& l = lanes_[c];
      r.means[c] = ((l[0] + l[1]) + (l[2] + l[3])) / static_cast<double>(h_);
    }
    r.lo = lo_;
    r.hi = hi_;
    return r;
  }

 private:
  std::size_t n_, h_, h4_;
  std::size_t g_ = 0;  // verbose index of the next draw, chain after chain
  std::vector<std::array<double, 4>> lanes_;
  double lo_ = std::numeric_limits<double>::infinity(), hi_ = -std::numeric_limits<double>::infinity();
};

/// The mean and the sums m2 = sum (x - mean)^2 and m4 = sum (x - mean)^4 of all draws: of
/// p.x, or of a weighted view's draws expanded chunk by chunk, with the same operations in
/// the same order (mean_of's four lanes), so the same bits. For a weighted view, when `values`
/// and `squares` are not nullptr, also series_means of its split draws and of their squares
/// about the mean (detail::SplitSeries kState and kSquare), from the same chunks: the same
/// numbers without two passes of generating the split series.
void moments(const Prepared& p, double& mean, double& m2, double& m4, detail::SeriesMeans* values = nullptr,
             detail::SeriesMeans* squares = nullptr) {
  m2 = m4 = 0;
  if (!p.compact()) {
    mean = mean_of(p.x, p.s);
    for (std::size_t i = 0; i < p.s; ++i) {
      const double d2 = (p.x[i] - mean) * (p.x[i] - mean);
      m2 += d2;
      m4 += d2 * d2;
    }
    return;
  }
  const bool split = values != nullptr && squares != nullptr;
  std::optional<SplitLanes> lanes;
  if (split) lanes.emplace(p.m, p.n, !p.view->weighted());
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for_each_verbose_chunk(*p.view, [&](const double* x, std::size_t len) {
    double a0 = s0, a1 = s1, a2 = s2, a3 = s3;  // in registers (see below)
    const std::size_t full = len / 4 * 4;
    for (std::size_t i = 0; i < full; i += 4) {
      a0 += x[i];
      a1 += x[i + 1];
      a2 += x[i + 2];
      a3 += x[i + 3];
    }
    for (std::size_t i = full; i < len; ++i) a0 += x[i];  // only in the last chunk
    s0 = a0;
    s1 = a1;
    s2 = a2;
    s3 = a3;
    if (split) lanes->add(x, len, [](double v) { return v; });
  });
  const double mu = ((s0 + s1) + (s2 + s3)) / static_cast<double>(p.s);
  mean = mu;
  if (split) {
    *values = lanes->result();
    lanes.emplace(p.m, p.n, !p.view->weighted());
  }
  // Draw by draw over the chunks again (the same d2 for a state's w draws): an inner loop of
  // w additions per state mispredicted its exit at every change of weight.
  // The sums in locals per chunk: through the references (which the chunk might alias, as
  // far as the compiler knows) they went to memory and back every draw.
  const auto sq = [mu](double v) { return (v - mu) * (v - mu); };
  for_each_verbose_chunk(*p.view, [&](const double* x, std::size_t len) {
    double a2 = m2, a4 = m4;
    for (std::size_t i = 0; i < len; ++i) {
      const double d2 = sq(x[i]);
      a2 += d2;
      a4 += d2 * d2;
    }
    m2 = a2;
    m4 = a4;
    if (split) lanes->add(x, len, sq);
  });
  if (split) *squares = lanes->result();
}

/// out [2M, h] <- the split layout of an unweighted view's draws (split_chains of p.x). A
/// weighted view's is generated window by window instead (detail::SplitSeries).
void fill_split(const Prepared& p, double* out) { detail::split_chains(p.x, p.m, p.n, out); }

/// out [2M, h] <- (x - mean)^2 of an unweighted view's split draws (split_chains, then
/// squared in place, as one pass), and lo, hi <- the smallest and largest of them (+inf, -inf
/// when there is none).
void fill_split_squares(const Prepared& p, double mean, double* out, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  const auto sq = [mean](double x) { return (x - mean) * (x - mean); };
  for (std::size_t c = 0; c < p.m; ++c) {
    const double* x = p.x + c * p.n;
    double* o = out + 2 * c * p.h;
    for (std::size_t half = 0; half < 2; ++half, x += p.n - p.h, o += p.h) {
      for (std::size_t t = 0; t < p.h; ++t) {
        const double z = sq(x[t]);
        o[t] = z;
        lo = z < lo ? z : lo;
        hi = z > hi ? z : hi;
      }
    }
  }
}

/// ws.sorted <- all draws sorted.
void sort_all(const Prepared& p, detail::Workspace& ws) {
  ws.sorted.assign(p.x, p.x + p.s);
  std::sort(ws.sorted.begin(), ws.sorted.end());
}

/// Insertion sort of a[0, len) by key.
template <class R>
void insertion_sort(R* a, std::size_t len) {
  for (std::size_t i = 1; i < len; ++i) {
    const R r = a[i];
    std::size_t q = i;
    for (; q > 0 && a[q - 1].key > r.key; --q) a[q] = a[q - 1];
    a[q] = r;
  }
}

/// Sorts a[0, len) by key, the keys' bits above the low `bits` being equal: MSD radix sort
/// on a digit of about log2(len) bits (at most 11) right below the highest bit in which the
/// keys differ, through `tmp` (len records) and back, then each run of equal digits the same
/// way (insertion sort at 32 records or fewer). Random low bits leave runs of about one
/// record after one digit, so a bucket of a few thousand records costs about one histogram,
/// one scatter and one copy instead of four of each (12-bit LSD passes over 48 bits).
/// `count` is scratch of at least 2^11 entries.
template <class R>
void msd_sort(R* a, R* tmp, std::size_t len, std::uint32_t* count) {
  if (len <= 32) {
    insertion_sort(a, len);
    return;
  }
  std::uint64_t diff = 0;
  const std::uint64_t k0 = a[0].key;
  for (std::size_t i = 1; i < len; ++i) diff |= a[i].key ^ k0;
  if (diff == 0) return;                  // all keys equal
  const int high = std::bit_width(diff);  // the keys differ in bits [0, high) only
  const int b = std::min({high, 11, static_cast<int>(std::bit_width(len))});
  const int shift = high - b;
  const std::uint64_t mask = (std::uint64_t{1} << b) - 1;
  const std::size_t digits = std::size_t{1} << b;
  std::fill_n(count, digits, 0U);
  for (std::size_t i = 0; i < len; ++i) ++count[(a[i].key >> shift) & mask];
  std::uint32_t sum = 0;
  for (std::size_t q = 0; q < digits; ++q) {
    const std::uint32_t v = count[q];
    count[q] = sum;
    sum += v;
  }
  for (std::size_t i = 0; i < len; ++i) tmp[count[(a[i].key >> shift) & mask]++] = a[i];
  std::copy(tmp, tmp + len, a);
  // The runs of equal digits, found by scanning (count[] is free for the recursion).
  for (std::size_t i = 0; i < len;) {
    const std::uint64_t dg = (a[i].key >> shift) & mask;
    std::size_t j = i + 1;
    while (j < len && ((a[j].key >> shift) & mask) == dg) ++j;
    if (j - i > 1 && shift > 0) msd_sort(a + i, tmp + i, j - i, count);
    i = j;
  }
}

/// Sorts a[0, len) by key through `tmp` (len records): LSD passes on the low 48 bits (four
/// 12-bit digits, histograms in one pass, a pass whose digit is the same for every key
/// skipped). Each pass's histogram of 4096 counters pays off for large buckets only.
template <class R>
void lsd_sort48(R* a, R* tmp, std::size_t len) {
  constexpr std::size_t kDigit = std::size_t{1} << 12;
  std::uint32_t cnt[4 * kDigit];
  R* src = a;
  R* dst = tmp;
  std::fill(std::begin(cnt), std::end(cnt), 0U);
  for (std::size_t i = 0; i < len; ++i)
    for (int d = 0; d < 4; ++d) ++cnt[d * kDigit + ((src[i].key >> (12 * d)) & (kDigit - 1))];
  for (int d = 0; d < 4; ++d) {
    std::uint32_t* c = cnt + d * kDigit;
    const int shift = 12 * d;
    if (c[(src[0].key >> shift) & (kDigit - 1)] == len) continue;
    std::uint32_t sum = 0;
    for (std::size_t q = 0; q < kDigit; ++q) {
      const std::uint32_t v = c[q];
      c[q] = sum;
      sum += v;
    }
    for (std::size_t i = 0; i < len; ++i) dst[c[(src[i].key >> shift) & (kDigit - 1)]++] = src[i];
    std::swap(src, dst);
  }
  if (src != a) std::copy(src, src + len, a);
}

/// Buckets larger than this are sorted by lsd_sort48, smaller ones by msd_sort (measured: a
/// bucket of 2,500 records, a weighted view's at 3e5 states, is about 20% faster by
/// msd_sort; one of 32,000, herd-diagnose's at 6.4e6 draws, about 45% slower).
constexpr std::size_t kLsdBucket = 8192;

/// Sorts a[0, n) by key (not stably: the order of equal keys is unspecified, and nothing
/// reads it: ranks, folds and order statistics go by key). Radix sort: one MSD pass on the
/// top 16 bits, in place (American flag sort: each record swapped into its bucket's next
/// free slot), then each bucket while it is in cache (insertion sort up to 64 records,
/// msd_sort up to kLsdBucket, lsd_sort48 beyond), with `scratch` (grown to the largest bucket of more than 64 records,
/// a few thousand for smooth data, n at worst) instead of a second buffer of n records. `start` is scratch too.
/// `Scratch` is a vector of R (the workspace's BigVector, or a std::vector).
template <class R, class Scratch>
void radix_sort(R* a, std::size_t n, std::vector<std::uint32_t>& start, Scratch& scratch) {
  constexpr std::size_t kTop = std::size_t{1} << 16;
  start.assign(kTop + 1, 0);
  for (std::size_t i = 0; i < n; ++i) ++start[(a[i].key >> 48) + 1];
  for (std::size_t k = 0; k < kTop; ++k) start[k + 1] += start[k];
  std::size_t largest = 0;
  {
    std::vector<std::uint32_t> next(start.begin(), start.end() - 1);
    for (std::size_t k = 0; k < kTop; ++k) {
      const std::uint32_t end = start[k + 1];
      if (end - start[k] > 64) largest = std::max<std::size_t>(largest, end - start[k]);
      while (next[k] < end) {
        R r = a[next[k]];
        auto b = static_cast<std::size_t>(r.key >> 48);
        while (b != k) {  // r belongs to bucket b: swap it in, and place what it displaces
          std::swap(r, a[next[b]++]);
          b = static_cast<std::size_t>(r.key >> 48);
        }
        a[next[k]++] = r;
      }
    }
  }
  if (scratch.size() < largest) scratch.resize(largest);
  std::array<std::uint32_t, std::size_t{1} << 11>
      count;  // NOLINT(cppcoreguidelines-pro-type-member-init): msd_sort's scratch
  for (std::size_t k = 0; k < kTop; ++k) {
    const std::size_t lo = start[k], len = start[k + 1] - lo;
    if (len <= 64) insertion_sort(a + lo, len);
    else if (len <= kLsdBucket) msd_sort(a + lo, scratch.data(), len, count.data());
    else lsd_sort48(a + lo, scratch.data(), len);
  }
}

/// ws.recs <- all draws' keys sorted, each with its split position (kDropped for the
/// middle draw of an odd chain). Unweighted views.
void sort_recs(const Prepared& p, detail::Workspace& ws) {
  const std::size_t s = p.s;
  auto& a = ws.recs;
  a.resize(s);
  for (std::size_t c = 0, i = 0; c < p.m; ++c) {
    for (std::size_t t = 0; t < p.n; ++t, ++i) {
      std::uint32_t pos = kDropped;
      if (t < p.h) pos = static_cast<std::uint32_t>(2 * c * p.h + t);
      else if (t >= p.n - p.h) pos = static_cast<std::uint32_t>((2 * c + 1) * p.h + (t - (p.n - p.h)));
      a[i] = {sort_key(p.x[i]), pos};
    }
  }
  radix_sort(a.data(), s, ws.radix_count, ws.radix_scratch);
}

/// ws.recs <- the runs of equal draws of a weighted view sorted by key, ws.wcount (and
/// ws.wcount_big) their draws per slot, ws.wblock the draws before each block of records, and
/// ws.wslots the slots: the compact states with draws in the split layout, numbered in state
/// order. A slot's state is one record {key, slot} of its draws in the split layout (their
/// count in wcount, 13 bytes per state in all); when a state holds an odd chain's middle draw (t = h),
/// that draw becomes its own kDropped record and the rest (w - 1 draws, if any) the state's
/// record. Zero weights give no record. (The z-scaling writes one z-score per slot, 8 bytes
/// per state; detail::SplitSeries generates the split layout from them window by window.)
void sort_compact(const Prepared& p, detail::Workspace& ws) {
  const DrawsView& v = *p.view;
  const std::size_t d = v.draws();
  const double* x = v.values().data();
  const std::uint32_t* w = v.weights().data();
  const bool odd = p.n % 2 == 1;
  auto& a = ws.recs;
  a.resize(p.m * d + p.m);  // at most one state per chain is cut at the middle
  ws.wcount.resize(p.m * d);
  ws.wcount_big.clear();
  std::size_t k = 0;
  std::uint32_t slot = 0;  // < 2^32 - 1 states (DrawsView): never kDropped
  // A record of slot `slot` for its `draws` draws (< 2^32: DrawsView).
  const auto add = [&](std::uint64_t key, std::size_t draws) {
    if (draws < detail::Workspace::kBigCount) {
      ws.wcount[slot] = static_cast<std::uint8_t>(draws);
    } else {
      ws.wcount[slot] = detail::Workspace::kBigCount;
      ws.wcount_big.emplace_back(slot, static_cast<std::uint32_t>(draws));
    }
    a[k++] = {key, slot++};
  };
  for (std::size_t c = 0; c < p.m; ++c) {
    std::size_t t0 = 0;  // verbose index of the state's first draw
    for (std::size_t j = c * d; j < (c + 1) * d; ++j) {
      if (w[j] == 0) continue;
      const auto wj = static_cast<std::size_t>(w[j]);
      const std::uint64_t key = sort_key(x[j]);
      if (odd && t0 <= p.h && p.h < t0 + wj) {
        a[k++] = {key, kDropped};
        if (wj > 1) add(key, wj - 1);
      } else {
        add(key, wj);
      }
      t0 += wj;
    }
  }
  ws.wslots = slot;
  a.resize(k);
  radix_sort(a.data(), k, ws.radix_count, ws.radix_scratch);
  constexpr std::size_t kBlock = detail::Workspace::kWBlock;
  ws.wblock.resize((k + kBlock - 1) / kBlock);
  const SlotCounts counts(ws);
  std::uint32_t total = 0;
  for (std::size_t i = 0; i < k; ++i) {
    if (i % kBlock == 0) ws.wblock[i / kBlock] = total;
    total += a[i].pos != kDropped ? counts(a[i].pos) : 1;
  }
}

/// Sorts the draws for ranks and order statistics: sort_compact for a weighted view, else
/// sort_recs.
void sort_draws(const Prepared& p, detail::Workspace& ws) {
  if (p.compact()) sort_compact(p, ws);
  else sort_recs(p, ws);
}

/// An unlinked scratch file of the out-of-core rank side (io::create_unlinked_scratch in
/// diagnostics_scratch_dir(), or the system's temporary folder), closed on destruction.
/// @throws IoError when it cannot be created, written or read.
class RankScratch {
 public:
  RankScratch() {
    std::string dir = diagnostics_scratch_dir();
    if (dir.empty()) dir = std::filesystem::temp_directory_path().string();
    fd_ = io::create_unlinked_scratch(dir, ".herd-ranks-", path_);
    if (fd_ < 0) fail("creating");
  }
  RankScratch(const RankScratch&) = delete;
  RankScratch& operator=(const RankScratch&) = delete;
  ~RankScratch() {
    if (fd_ >= 0) ::close(fd_);
  }
  /// Writes items [0, n) of `p` at item `at` (items of T: the file read as an array of T).
  template <class T>
  void write(const T* p, std::size_t n, std::uint64_t at) const {
    if (n > 0 && !io::pwrite_all(fd_, p, n * sizeof(T), at * sizeof(T))) fail("writing");
  }
  /// Reads items [at, at + n) of T into p.
  template <class T>
  void read(T* p, std::size_t n, std::uint64_t at) const {
    if (n > 0 && !io::pread_all(fd_, p, n * sizeof(T), at * sizeof(T))) fail("reading");
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    const int e = errno;
    throw IoError(fmt::format("{} the diagnostics' rank scratch file \"{}\" (unlinked once created) failed: {}", what,
                              path_, e != 0 ? std::strerror(e) : "unexpected end of file"));
  }
  int fd_ = -1;
  std::string path_;
};

/// Random access to the n records of a RankScratch through a cache of kSlots blocks of 2^kShift
/// records (least recently used replaced): the rank side's walks (forward for the bulk,
/// outward from the median for the tail, with prefetches a few records ahead and a tie
/// group's ranges read again) touch a few blocks at a time. The two blocks last found by a
/// search are checked first, inline (the bulk's walk reads one block, the tail's two). 512
/// KiB. Not thread-safe.
class SpillReader {
 public:
  static constexpr unsigned kShift = 12;
  static constexpr std::size_t kSlots = 8;
  SpillReader(const RankScratch& file, std::size_t n) : file_(&file), n_(n), buf_(kSlots << kShift) {
    block_.fill(kNone);
    used_.fill(0);
  }
  /// Record i < n.
  SpillRec operator[](std::size_t i) {
    const std::size_t b = i >> kShift;
    if (b == recent_block_[0]) [[likely]]
      return recent_[0][i & kMask];
    if (b == recent_block_[1]) return recent_[1][i & kMask];
    return recent_[find(b)][i & kMask];
  }

 private:
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  static constexpr std::size_t kMask = (std::size_t{1} << kShift) - 1;
  /// Block b (read into the least recently found slot if not held), made the most recent
  /// (recent_[0]; the previous one moves to recent_[1]). The two recent blocks hold the
  /// newest stamps, so they are never the one replaced. Returns 0.
  [[gnu::noinline]] std::size_t find(std::size_t b) {
    std::size_t k = 0;
    while (k < kSlots && block_[k] != b) ++k;
    if (k == kSlots) {
      k = static_cast<std::size_t>(std::min_element(used_.begin(), used_.end()) - used_.begin());
      const std::size_t first = b << kShift;
      file_->read(buf_.data() + (k << kShift), std::min(n_ - first, std::size_t{1} << kShift), first);
      block_[k] = b;
    }
    used_[k] = ++clock_;
    recent_block_[1] = recent_block_[0];
    recent_[1] = recent_[0];
    recent_block_[0] = b;
    recent_[0] = buf_.data() + (k << kShift);
    return 0;
  }
  const RankScratch* file_;
  std::size_t n_;
  std::vector<SpillRec> buf_;
  std::array<std::size_t, kSlots> block_{}, used_{};
  std::array<std::size_t, 2> recent_block_{kNone, kNone};
  std::array<const SpillRec*, 2> recent_{nullptr, nullptr};
  std::size_t clock_ = 0;
};

/// A SpillReader as the rank code's accessor of sorted records (sorted[i]), copied by value.
struct SpillAt {
  SpillReader* reader;
  SpillRec operator[](std::size_t i) const { return (*reader)[i]; }
};

/// A weighted view's records (sort_compact's: one per slot, one kDropped per odd chain's
/// middle draw) sorted out of core: made in state order into runs of `run` records, each
/// radix-sorted and written to a scratch file, then k-way merged into a second scratch file
/// (the first is closed then), read back through a SpillReader. The same records in the same
/// key order as sort_compact's (the order of equal keys, which nothing reads, aside), so the
/// same ranks, order statistics and z-scores. Memory: the run (16 bytes per record, reused
/// for the merge's input and output buffers), the radix sort's scratch (its largest bucket),
/// its counts (512 KiB), the reader (512 KiB) and the draws before every 2^SpillReader::kShift
/// sorted records (8 bytes each). Through operator new (std::vector). Not thread-safe.
/// `by_state`: a record's pos is its state's index in the [M, D] layout instead of its slot
/// (for ZSpill, which takes the z-scores per state; kDropped stays kDropped).
class SpilledRanks {
 public:
  SpilledRanks(const Prepared& p, std::size_t run, bool by_state = false) {
    const DrawsView& v = *p.view;
    const std::size_t d = v.draws();
    const bool odd = p.n % 2 == 1;
    std::vector<SpillRec> buf(std::max<std::size_t>(1, std::min(run, p.m * d + p.m)));
    std::vector<std::uint32_t> start;
    std::vector<SpillRec> scratch;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;  // [first, end) records of each run
    std::optional<RankScratch> spill(std::in_place);
    std::size_t fill = 0;
    const auto flush = [&] {
      if (fill == 0) return;
      radix_sort(buf.data(), fill, start, scratch);
      spill->write(buf.data(), fill, n_);
      runs.emplace_back(n_, n_ + fill);
      n_ += fill;
      fill = 0;
    };
    const auto add = [&](std::uint64_t key, std::uint32_t pos, std::size_t count) {
      buf[fill++] = {key, pos, static_cast<std::uint32_t>(count)};  // < 2^32 draws (DrawsView)
      if (fill == buf.size()) flush();
    };
    std::uint32_t slot = 0;
    std::size_t t0 = 0, chain_end = d;  // verbose index of the state's first draw; its chain's end
    for_each_state_block(v, [&](std::size_t j0, const double* x, const std::uint32_t* w, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) {
        if (j0 + i == chain_end) {
          t0 = 0;
          chain_end += d;
        }
        if (w[i] == 0) continue;
        const auto wj = static_cast<std::size_t>(w[i]);
        const std::uint64_t key = sort_key(x[i]);
        // < 2^32 - 1 states (DrawsView): never kDropped
        const auto pos = [&] { return by_state ? static_cast<std::uint32_t>(j0 + i) : slot; };
        if (odd && t0 <= p.h && p.h < t0 + wj) {
          add(key, kDropped, 1);
          if (wj > 1) {
            add(key, pos(), wj - 1);
            ++slot;
          }
        } else {
          add(key, pos(), wj);
          ++slot;
        }
        t0 += wj;
      }
    });
    slots_ = slot;
    flush();
    scratch = {};
    start = {};
    // The merge: an input buffer of `per` records per run and one for the output, carved
    // from the run's buffer; a heap of the runs' next keys.
    const std::size_t k = runs.size();
    const std::size_t per = std::max<std::size_t>(buf.size() / (k + 1), 16);
    if (buf.size() < per * (k + 1)) buf.resize(per * (k + 1));
    std::vector<std::size_t> at(k, 0), len(k, 0);
    const auto refill = [&](std::size_t r) {
      const std::size_t take = std::min<std::uint64_t>(per, runs[r].second - runs[r].first);
      spill->read(buf.data() + r * per, take, runs[r].first);
      runs[r].first += take;
      at[r] = 0;
      len[r] = take;
    };
    using Head = std::pair<std::uint64_t, std::size_t>;  // (key, run)
    std::vector<Head> heap;
    for (std::size_t r = 0; r < k; ++r) {
      refill(r);
      heap.emplace_back(buf[r * per].key, r);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>());  // heap[0]: the smallest key
    // heap[0] replaced: sifted down to its place (one pass, instead of a pop and a push).
    const auto sift = [&heap] {
      const std::size_t hn = heap.size();
      const Head top = heap[0];
      std::size_t i = 0;
      for (std::size_t c = 1; c < hn; c = 2 * i + 1) {
        if (c + 1 < hn && heap[c + 1].first < heap[c].first) ++c;
        if (!(heap[c].first < top.first)) break;
        heap[i] = heap[c];
        i = c;
      }
      heap[i] = top;
    };
    SpillRec* out = buf.data() + k * per;
    std::size_t outn = 0, written = 0;
    std::uint64_t draws = 0;
    index_.reserve((n_ >> SpillReader::kShift) + 1);
    while (!heap.empty()) {
      const std::size_t r = heap[0].second;
      const SpillRec rec = buf[r * per + at[r]++];
      if (((written + outn) & ((std::size_t{1} << SpillReader::kShift) - 1)) == 0) index_.push_back(draws);
      draws += rec.count;
      out[outn++] = rec;
      if (outn == per) {
        sorted_.write(out, outn, written);
        written += outn;
        outn = 0;
      }
      if (at[r] == len[r]) {
        if (runs[r].first == runs[r].second) {  // run r is done
          heap[0] = heap.back();
          heap.pop_back();
          if (!heap.empty()) sift();
          continue;
        }
        refill(r);
      }
      heap[0].first = buf[r * per + at[r]].key;
      sift();
    }
    sorted_.write(out, outn, written);
    spill.reset();
    buf = {};
    reader_.emplace(sorted_, n_);
  }
  /// Records, and slots (states with draws in the split layout, numbered in state order).
  std::size_t size() const { return n_; }
  std::size_t slots() const { return slots_; }
  /// The sorted records (SpillAt of the reader).
  SpillAt at() { return {&*reader_}; }
  /// The i-th smallest draw (0-based): the last block of records that starts at or before
  /// draw i, then its run of records that holds it.
  double order(std::size_t i) {
    const auto b = static_cast<std::size_t>(std::upper_bound(index_.begin(), index_.end(), i) - index_.begin()) - 1;
    std::size_t k = b << SpillReader::kShift;
    for (std::uint64_t t = index_[b]; t + (*reader_)[k].count <= i; ++k) t += (*reader_)[k].count;
    return from_key((*reader_)[k].key);
  }

 private:
  RankScratch sorted_;
  std::size_t n_ = 0, slots_ = 0;
  std::vector<std::uint64_t> index_;  // draws in the sorted records before each block of 2^kShift
  std::optional<SpillReader> reader_;
};

/// SpilledRanks::order as the accessor of quantile7 and mcse_quantile7 (copied by value).
struct SpillOrder {
  SpilledRanks* ranks;
  double operator()(std::size_t i) const { return ranks->order(i); }
};

/// The z-scores per state of a streamed view out of core: a z-scaling's (state, z) pairs,
/// which come in rank order, are appended to buckets of 2^shift consecutive states (a buffer
/// of kPairs pairs per bucket in memory, written to the bucket's region of a scratch file
/// when full); finish() then reads the buckets one at a time, scatters each bucket's pairs
/// into a window of its states and appends the window to a second scratch file, which holds
/// the z-scores in state order, read back in blocks by detail::SplitSeries' cursors
/// (reader()). A state that got no z-score (no draw in the split layout, or padding) reads 0,
/// never used. Memory: the buckets' buffers (12 kPairs bytes per bucket), in finish() 20
/// bytes per state of one bucket, and the z-scores read ahead for small requests (512 KiB);
/// disk: 12 bytes per state (the pairs) and 8 (the z-scores). Not thread-safe.
class ZSpill {
 public:
  /// For `states` states, with buckets sized from `budget` (bytes): 2^shift states, 20 of
  /// bytes each in finish(), at most budget / 2, between 2^10 and 2^20 states.
  ZSpill(std::size_t states, std::size_t budget) : states_(states) {
    shift_ = 10;
    while (shift_ < 20 && (std::size_t{40} << (shift_ + 1)) <= budget) ++shift_;
    const std::size_t buckets = (states + (std::size_t{1} << shift_) - 1) >> shift_;
    buf_.resize(buckets * kPairs);
    fill_.assign(buckets, 0);
    written_.assign(buckets, 0);
    reader_ = [this](std::size_t first, std::span<double> out) { read(first, out); };
  }
  ZSpill(const ZSpill&) = delete;
  ZSpill& operator=(const ZSpill&) = delete;
  /// Appends state j's z-score (one per state per z-scaling).
  void add(std::uint32_t j, double z) {
    const std::size_t b = j >> shift_;
    std::size_t& f = fill_[b];
    buf_[b * kPairs + f] = {z, static_cast<std::uint32_t>(j & ((std::size_t{1} << shift_) - 1))};
    if (++f == kPairs) flush(b);
  }
  /// Writes the z-scores of the pairs added since the last finish() to the z-scores' file, in
  /// state order, and starts the next z-scaling's pairs.
  void finish() {
    const std::size_t width = std::size_t{1} << shift_;
    std::vector<Pair> pairs;
    std::vector<double> window;
    for (std::size_t b = 0; b < fill_.size(); ++b) {
      flush(b);
      const std::size_t first = b << shift_, len = std::min(width, states_ - first);
      pairs.resize(written_[b]);
      pairs_.read(pairs.data(), pairs.size(), first);
      window.assign(len, 0.0);
      for (const Pair& q : pairs) window[q.j] = q.z;
      z_.write(window.data(), len, first);
      written_[b] = 0;
    }
    ahead_.clear();  // the z-scores read ahead are the last z-scaling's
  }
  /// Reads the z-scores per state of the last finish().
  const DrawsReader& reader() const { return reader_; }

 private:
#pragma pack(push, 4)
  struct Pair {
    double z;
    std::uint32_t j;  // within its bucket
  };
#pragma pack(pop)
  static_assert(sizeof(Pair) == 12);
  static constexpr std::size_t kPairs = 256;
  /// z-scores read ahead for requests of fewer than kAhead / 4 states (a unit layout's split
  /// chains: a few KiB each, in order): one read per kAhead states instead of one per request.
  static constexpr std::size_t kAhead = std::size_t{1} << 16;
  /// The reader: z-scores [first, first + out.size()) of the last finish().
  void read(std::size_t first, std::span<double> out) {
    if (first >= ahead_first_ && first + out.size() <= ahead_first_ + ahead_.size()) {
      std::copy_n(ahead_.begin() + static_cast<std::ptrdiff_t>(first - ahead_first_), out.size(), out.begin());
      return;
    }
    if (out.size() >= kAhead / 4) {
      z_.read(out.data(), out.size(), first);
      return;
    }
    ahead_first_ = first;
    ahead_.resize(std::min(kAhead, states_ - first));
    z_.read(ahead_.data(), ahead_.size(), first);
    std::copy_n(ahead_.begin(), out.size(), out.begin());
  }
  void flush(std::size_t b) {
    if (fill_[b] == 0) return;
    pairs_.write(buf_.data() + b * kPairs, fill_[b], (b << shift_) + written_[b]);
    written_[b] += fill_[b];
    fill_[b] = 0;
  }
  std::size_t states_;
  unsigned shift_;
  std::vector<Pair> buf_;                    // [bucket, kPairs]
  std::vector<std::size_t> fill_, written_;  // pairs in each bucket's buffer, in its file region
  RankScratch pairs_, z_;
  std::vector<double> ahead_;  // z-scores [ahead_first_, ...) read ahead (read())
  std::size_t ahead_first_ = 0;
  DrawsReader reader_;
};

template <class R>
inline void store(ZSpill* out, const R& r, double z) {
  out->add(r.pos, z);
}

/// Whether a view's rank side goes out of core (SpilledRanks): weighted, and streamed or its
/// in-memory records, draws per slot and index (13 bytes per state, sort_compact's sizes)
/// past diagnostics_rank_budget().
bool ranks_out_of_core(const Prepared& p) {
  return p.compact() && (p.view->streamed() || diagnostics_out_of_core(p.m, p.view->draws()));
}

/// Records per run of SpilledRanks under budget `budget`: budget / 32 (the run, and the radix
/// sort's scratch at worst as much), at least 256.
std::size_t spill_run(std::size_t budget) { return std::max<std::size_t>(budget / (2 * sizeof(SpillRec)), 256); }

/// The calling thread's share of diagnostics_rank_budget() out of core: under summarize_all,
/// whose threads may rank (and write back z-scores) out of core at the same time, the budget
/// over its threads (ws.rank_threads), so that together they hold about the budget; else the
/// budget. Only the runs' and buckets' sizes follow it, never the results.
std::size_t rank_budget_share(const detail::Workspace& ws) {
  return diagnostics_rank_budget() / std::max<std::size_t>(1, ws.rank_threads);
}

/// The i-th smallest draw (0-based) after sort_draws: a record of ws.recs, or (weighted) the
/// run of ws.recs that holds the i-th draw (binary search of the blocks' draw counts, then a walk
/// of at most one block's records).
struct OrderStats {
  const Rec* recs = nullptr;
  const std::uint32_t* block = nullptr;  // nullptr: unweighted
  std::size_t blocks = 0;
  SlotCounts counts;
  OrderStats(const Prepared& p, const detail::Workspace& ws) : recs(ws.recs.data()), counts(ws) {
    if (p.compact()) {
      block = ws.wblock.data();
      blocks = ws.wblock.size();
    }
  }
  double operator()(std::size_t i) const {
    if (block == nullptr) return from_key(recs[i].key);
    // The last block that starts at or before draw i (block 0 starts at draw 0), then the run
    // of that block that holds it: the first whose draws end past i.
    const auto b = static_cast<std::size_t>(std::upper_bound(block, block + blocks, i) - block) - 1;
    std::size_t k = b * detail::Workspace::kWBlock;
    const auto draws = [this](const Rec& r) -> std::size_t { return r.pos != kDropped ? counts(r.pos) : 1; };
    for (std::size_t t = block[b]; t + draws(recs[k]) <= i; ++k) t += draws(recs[k]);
    return from_key(recs[k].key);
  }
};

/// Accessor of the i-th smallest value of all draws sorted.
struct FromSorted {
  const double* x;
  double operator()(std::size_t i) const { return x[i]; }
};

/// Sets bits [u, v) of `words` (bit t is bit t % 64 of word t / 64).
inline void set_bits(std::uint64_t* words, std::size_t u, std::size_t v) {
  while (u < v) {
    const std::size_t b = u % 64, take = std::min(v - u, 64 - b);
    const std::uint64_t ones = take == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << take) - 1;
    words[u / 64] |= ones << b;
    u += take;
  }
}

/// The split indicators I(x <= q) of a weighted view packed as ess_indicator packs them
/// ([2M, wpc] words, pack_indicator's layout), straight from its compact states: a state's
/// run of draws sets a range of bits in one or both halves of its chain.
void pack_indicator_compact(const Prepared& p, double q, std::uint64_t* bits, std::size_t wpc) {
  const DrawsView& v = *p.view;
  const std::size_t d = v.draws();
  const std::size_t off = p.n - p.h;  // verbose index of the second half's first draw
  std::fill_n(bits, 2 * p.m * wpc, std::uint64_t{0});
  std::uint64_t* lo = bits;
  std::uint64_t* hi = lo + wpc;
  std::size_t t0 = 0, chain_end = d;  // the state's first draw in its chain; where the chain ends
  for_each_state_block(v, [&](std::size_t j0, const double* x, const std::uint32_t* w, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (j0 + i == chain_end) {  // the next chain
        lo += 2 * wpc;
        hi += 2 * wpc;
        t0 = 0;
        chain_end += d;
      }
      const auto wj = static_cast<std::size_t>(w[i]);
      if (wj > 0 && x[i] <= q) {
        const std::size_t e = t0 + wj;
        if (t0 < p.h) set_bits(lo, t0, std::min(e, p.h));
        if (e > off) set_bits(hi, std::max(t0, off) - off, e - off);
      }
      t0 += wj;
    }
  });
}

/// ESS of the indicator I(x <= q) of the split draws, from the indicators packed 64 to a
/// word (detail::ess_indicator_bits): of p.x's halves, or of a weighted view's compact
/// states (pack_indicator_compact).
double ess_indicator(const Prepared& p, double q, detail::Workspace& ws) {
  const std::size_t m2 = 2 * p.m;
  const std::size_t wpc = detail::indicator_words(p.h);
  ws.bits.resize(m2 * wpc);
  if (p.compact()) {
    pack_indicator_compact(p, q, ws.bits.data(), wpc);
  } else {
    for (std::size_t c = 0; c < p.m; ++c) {
      const double* x = p.x + c * p.n;
      std::uint64_t* lo = ws.bits.data() + 2 * c * wpc;
      detail::pack_indicator(x, p.h, q, lo);
      detail::pack_indicator(x + (p.n - p.h), p.h, q, lo + wpc);
    }
  }
  std::uint64_t ones = 0;
  for (const std::uint64_t b : ws.bits) ones += static_cast<std::uint64_t>(std::popcount(b));
  if (ones == 0 || ones == m2 * p.h) return kNaN;  // constant indicator
  return detail::ess_indicator_bits(ws.bits.data(), m2, p.h, ws);
}

/// Bulk and tail R-hat and bulk-ESS from the `count` sorted records `sorted` (ws.recs' data,
/// or SpillAt; folded about the median as they are scaled, for the tail). `slot_scratch`
/// (weighted views; nullptr: ws.slotz) is where the z-scores per slot go: `slots` doubles
/// that nothing reads any more.
/// `bulk_hint` (0: none) hints the bulk ESS's first pass of lags when its split layout is
/// generated per window (detail::ess_series; the same bits whatever the hint). The tail's
/// z-scores and R-hat come first, then the bulk's z-scores: the records are read no more
/// after them, so `lease` (nullptr: none) gives the rank buffers back before the bulk ESS,
/// the longest part. `zspill` (a streamed view's, whose records' pos are their states:
/// SpilledRanks by_state; nullptr: none) takes the z-scores per state out of core instead of
/// `slot_scratch`, and the split layout reads them back in blocks.
template <class C, class A>
void rank_diagnostics(const Prepared& p, double median, const C& counts, A sorted, std::size_t count, std::size_t slots,
                      detail::Workspace& ws, double* rhat_b, double* rhat_t, double* ess_b,
                      const detail::SplitSeries* layout, double* slot_scratch, std::size_t bulk_hint,
                      detail::RankLease* lease, ZSpill* zspill = nullptr) {
  const std::size_t s2 = 2 * p.m * p.h;
  // The normal quantiles: a table in memory (1.3 bytes per draw), or for a streamed view
  // (zspill) one on disk read through a window.
  std::optional<ZTable> ztab;
  std::optional<ZFileTable> zfile;
  if (zspill != nullptr) zfile.emplace(s2, ws);
  else ztab.emplace(s2, ws);
  // Unweighted: z-scores straight to the split positions. Weighted: one per slot (compact
  // state), 8 bytes per state, and the split layout generated from them (detail::SplitSeries):
  // window by window for every pass, or, up to detail::stored_split_limit() split draws,
  // once into the split buffer.
  constexpr bool kWeighted = !std::is_same_v<C, UnitCounts>;
  std::optional<detail::SplitSeries> series;
  bool stored = true;
  double* zout = nullptr;
  if constexpr (kWeighted) {
    if (zspill != nullptr) {
      const auto kState = detail::SplitSeries::Kind::kState;
      if (layout != nullptr) series.emplace(layout->with_source(kState, &zspill->reader()));
      else series.emplace(detail::SplitSeries(*p.view, kState).with_source(kState, &zspill->reader()));
    } else {
      if (slot_scratch == nullptr) {
        ws.slotz.resize(slots);
        slot_scratch = ws.slotz.data();
      }
      zout = slot_scratch;
      if (layout != nullptr) series.emplace(layout->with(detail::SplitSeries::Kind::kSlot, zout));
      else series.emplace(*p.view, detail::SplitSeries::Kind::kSlot, zout);
    }
    stored = s2 <= detail::stored_split_limit().load(std::memory_order_relaxed);
  } else {
    ws.split.resize(s2);
    zout = ws.split.data();
  }
  const auto to_split = [&] {
    if (kWeighted && stored) {
      ws.split.resize(s2);
      detail::fill_series(*series, ws.split.data());
    }
  };
  // The z-scores to zout, or (streamed) to the spill, written back in state order.
  const auto z_folded = [&] {
    if (zspill == nullptr) return z_scale_folded(sorted, count, counts, median, zout, *ztab);
    const bool constant = z_scale_folded(sorted, count, counts, median, zspill, *zfile);
    zspill->finish();
    return constant;
  };
  const auto z_sorted = [&] {
    if (zspill == nullptr) return z_scale_sorted(sorted, count, counts, zout, *ztab);
    return z_scale_sorted(sorted, count, counts, zspill, *zfile);
  };
  if (rhat_t) {
    // Constant z-scores give NaN (rhat_chains unchecked would find them constant).
    const bool tail_constant = z_folded();
    to_split();
    *rhat_t = tail_constant ? kNaN
                            : (stored ? detail::rhat_chains(ws.split.data(), 2 * p.m, p.h, true)
                                      : detail::rhat_series(*series, ws));
  }
  if (!rhat_b && !ess_b) return;
  // The bulk's z-scores reuse the split buffer or the slots (the tail's R-hat is done with them).
  const bool constant = z_sorted();
  if (lease != nullptr) lease->release();
  if (zspill != nullptr) zspill->finish();
  to_split();
  // z of non-constant finite draws is finite and not constant, unless an odd draw count
  // dropped the only varying (middle) draws.
  const bool ok = p.n % 2 == 0 || !constant;
  if (rhat_b && ess_b) {
    // Both from one pass of chain means and centring (the same numbers as apart).
    if (!ok) *rhat_b = *ess_b = kNaN;
    else if (stored) detail::rhat_ess_overwrite(ws.split.data(), 2 * p.m, p.h, ws, rhat_b, ess_b);
    else detail::rhat_ess_series(*series, ws, rhat_b, ess_b, false, bulk_hint);
  } else {
    if (rhat_b)
      *rhat_b =
          !ok ? kNaN
              : (stored ? detail::rhat_chains(ws.split.data(), 2 * p.m, p.h, true) : detail::rhat_series(*series, ws));
    if (ess_b)
      *ess_b = !ok ? kNaN
                   : (stored ? detail::ess_chains_overwrite(ws.split.data(), 2 * p.m, p.h, ws, true)
                             : detail::ess_series(*series, ws));
  }
}

/// rank_diagnostics on the records of sort_draws; `layout` (nullptr, or the split layout of a
/// weighted view) saves a walk of its weights; `slot_scratch`, `bulk_hint` and `lease` as above.
void rank_diagnostics(const Prepared& p, double median, detail::Workspace& ws, double* rhat_b, double* rhat_t,
                      double* ess_b, const detail::SplitSeries* layout = nullptr, double* slot_scratch = nullptr,
                      std::size_t bulk_hint = 0, detail::RankLease* lease = nullptr) {
  const Rec* sorted = ws.recs.data();
  if (p.compact())
    rank_diagnostics(p, median, SlotCounts(ws), sorted, ws.recs.size(), ws.wslots, ws, rhat_b, rhat_t, ess_b, layout,
                     slot_scratch, bulk_hint, lease);
  else
    rank_diagnostics(p, median, UnitCounts(), sorted, ws.recs.size(), 0, ws, rhat_b, rhat_t, ess_b, layout, nullptr,
                     bulk_hint, lease);
}

}  // namespace

// ---------------------------------------------------------------------------------------
namespace detail {

#if defined(__linux__)
// Straight from the kernel, not from malloc: a freed block goes back at once (malloc keeps
// freed blocks in its arenas once its mmap threshold has risen, so the memory of one phase's
// scratch stayed resident through the next ones), and is 2 MiB aligned without slack.
void* allocate_huge(std::size_t bytes) {
  constexpr std::size_t kAlign = std::size_t{1} << 21;
  void* m = mmap(nullptr, bytes + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  // The 2 MiB aligned block inside the mapping; the slack before and after it is unmapped.
  const auto head = static_cast<std::size_t>(-reinterpret_cast<std::uintptr_t>(m) & (kAlign - 1));
  char* p = static_cast<char*>(m) + head;
  if (head > 0) munmap(m, head);
  if (kAlign - head > 0) munmap(p + bytes, kAlign - head);
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the block still works
  return p;
}

void free_huge(void* p, std::size_t bytes) noexcept { munmap(p, bytes); }

void advise_huge(void* p, std::size_t bytes) noexcept {
  constexpr std::uintptr_t kAlign = std::uintptr_t{1} << 21;
  constexpr int kMadvCollapse = 25;  // MADV_COLLAPSE (Linux 6.1; not in every libc's headers)
  const auto begin = (reinterpret_cast<std::uintptr_t>(p) + kAlign - 1) & ~(kAlign - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(kAlign - 1);
  if (end <= begin) return;
  void* q = reinterpret_cast<void*>(begin);  // NOLINT(performance-no-int-to-ptr)
  (void)madvise(q, end - begin, MADV_HUGEPAGE);
  (void)madvise(q, end - begin, kMadvCollapse);
}
#else
void* allocate_huge(std::size_t bytes) {
  void* p = std::aligned_alloc(std::size_t{1} << 21, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void free_huge(void* p, std::size_t /*bytes*/) noexcept { std::free(p); }

void advise_huge(void* /*p*/, std::size_t /*bytes*/) noexcept {}
#endif

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

std::size_t Workspace::bytes() const {
  const auto of = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  const auto transform = [](const RealFft& f) {
    const std::size_t len = f.length();
    return len > 0 ? len * sizeof(double) + (len / 2 + 1) * sizeof(std::complex<double>) : 0;
  };
  std::size_t pieces = 0;
  for (const RealFft& f : piece_fft) pieces += transform(f);
  return of(expanded) + of(split) + of(slotz) + of(window) + of(lag_sums) + of(sorted) + of(recs) + of(radix_scratch) +
         of(wcount) + of(wcount_big) + of(wblock) + ztab.bytes() + of(radix_count) + of(centered) + of(acov) +
         of(lag_spec) + of(means) + of(bits) + of(bit_prefix) + of(bit_counts) + transform(fft) + pieces;
}

double ZQuantiles::quantile_of(std::size_t s, std::size_t i) {
  const double r = 0.5 * static_cast<double>(i);
  const double p = (r - 0.375) / (static_cast<double>(s) + 0.25);
  return boost::math::quantile(boost::math::normal_distribution<double, BoostPolicy>(), p);
}

void ZQuantiles::polys(unsigned shift, Poly& poly2, Poly& poly3) {
  const std::size_t k = std::size_t{1} << shift;
  for (std::size_t r = 0; r < k; ++r) {
    const auto ri = static_cast<std::int64_t>(r), ki = static_cast<std::int64_t>(k);
    const std::int64_t p3 = ri * (ri - ki) * (ri + ki);  // <= 0: rounded down by hand
    poly2[r] = static_cast<std::uint64_t>(ri * (ri - ki));
    poly3[r] = static_cast<std::uint64_t>(p3 >= 0 ? p3 / 6 : -((-p3 + 5) / 6));
  }
}

void ZQuantiles::reset(std::size_t s) {
  if (s_ == s && !delta_.empty()) return;
  s_ = s;
  shift_ = shift_of(s);
  polys(shift_, poly2_, poly3_);
  // The tail: the extreme ranks, where the quantile bends too fast for the cubic's 8-bit
  // differences, about the first S / 64 entries (and at least the first two blocks).
  tail_n_ = tail_of(s, shift_);
  tail_.assign(tail_n_, kUnset32);
  delta_.assign(s + 2 - tail_n_, kUnset);
  // Knots b - 1 .. b + 2 for every entry i <= S + 1 of block b = i / K >= 2.
  knots_.assign(knots_of(s, shift_), 0);
  for (std::size_t b = 1; b < knots_.size(); ++b) knots_[b] = zkey(exact(b << shift_));
}

double ZQuantiles::evaluate(std::size_t i) {
  if (i < (std::size_t{1} << shift_)) return exact(i);  // the first block: no knot before it
  // An entry is the difference of the key from its base (a line through the knots in the
  // tail, the cubic elsewhere): filled at its first use, kEscape* where it does not fit.
  const auto lookup = [&](auto& slot, auto unset, auto escape, std::uint64_t base) {
    using D = decltype(unset);
    const std::atomic_ref<D> e(slot);
    const D d = e.load(std::memory_order_relaxed);
    if (d == escape) return exact(i);
    if (d != unset) return zval(base + static_cast<std::uint64_t>(static_cast<std::int64_t>(d)));
    const double z = exact(i);
    const auto diff = static_cast<std::int64_t>(zkey(z) - base);
    const bool fits = diff > escape && diff <= std::numeric_limits<D>::max();
    e.store(fits ? static_cast<D>(diff) : escape, std::memory_order_relaxed);
    return z;
  };
  if (i < tail_n_) return lookup(tail_[i], kUnset32, kEscape32, linear(i));
  return lookup(delta_[i - tail_n_], kUnset, kEscape, interpolated(i));
}

std::size_t ZQuantiles::bytes() const {
  return knots_.capacity() * sizeof(std::uint64_t) + delta_.capacity() * sizeof(std::int8_t) +
         tail_.capacity() * sizeof(std::int32_t);
}

ZQuantiles* SharedZTable::table(std::size_t s) {
  const std::lock_guard<std::mutex> lock(mu_);
  if (!made_) {
    z_.reset(s);
    made_ = true;
  }
  return z_.draws() == s ? &z_ : nullptr;
}

ZQuantileFile::ZQuantileFile(std::size_t s)
    : s_(s),
      shift_(ZQuantiles::shift_of(s)),
      tail_n_(ZQuantiles::tail_of(s, shift_)),
      knots_(ZQuantiles::knots_of(s, shift_)) {
  ZQuantiles::polys(shift_, poly2_, poly3_);
  std::string dir = diagnostics_scratch_dir();
  if (dir.empty()) dir = std::filesystem::temp_directory_path().string();
  fd_ = io::create_unlinked_scratch(dir, ".herd-ztable-", path_);
  if (fd_ < 0) fail("creating");
  // The knots (knot 0 unused), as ZQuantiles::reset makes them.
  std::vector<std::uint64_t> knots(std::min(knots_, kWindow));
  for (std::size_t b0 = 0; b0 < knots_; b0 += kWindow) {
    const std::size_t n = std::min(kWindow, knots_ - b0);
    for (std::size_t b = b0; b < b0 + n; ++b)
      knots[b - b0] = b == 0 ? 0 : ZQuantiles::zkey(ZQuantiles::quantile_of(s_, b << shift_));
    write(knots.data(), n * 8, std::uint64_t{b0} * 8);
  }
  // The entries, a window at a time, as ZQuantiles::evaluate stores them (the first block, which
  // no knot precedes, unused: evaluated on every call).
  std::vector<std::int32_t> tail;
  std::vector<std::int8_t> delta;
  for (std::size_t a = 0; a < s_ + 2; a += kWindow) {
    const std::size_t e = std::min(a + kWindow, s_ + 2);
    const std::size_t k0 = (a >> shift_) > 0 ? (a >> shift_) - 1 : 0;
    const std::size_t k1 = std::min(knots_, ((e - 1) >> shift_) + 3);
    knots.resize(k1 - k0);
    read(knots.data(), knots.size() * 8, std::uint64_t{k0} * 8);
    tail.assign(a < tail_n_ ? std::min(e, tail_n_) - a : 0, ZQuantiles::kEscape32);
    const std::size_t d0 = std::max(a, tail_n_);
    delta.assign(e > d0 ? e - d0 : 0, ZQuantiles::kEscape);
    for (std::size_t i = std::max(a, std::size_t{1} << shift_); i < e; ++i) {
      const std::uint64_t key = ZQuantiles::zkey(ZQuantiles::quantile_of(s_, i));
      const std::size_t b = (i >> shift_) - k0;
      if (i < tail_n_) {
        const auto diff = static_cast<std::int64_t>(key - ZQuantiles::line(knots[b], knots[b + 1], i, shift_));
        if (diff > ZQuantiles::kEscape32 && diff <= std::numeric_limits<std::int32_t>::max())
          tail[i - a] = static_cast<std::int32_t>(diff);
      } else {
        const auto diff =
            static_cast<std::int64_t>(key - ZQuantiles::cubic(knots.data() + b, i, shift_, poly2_, poly3_));
        if (diff > ZQuantiles::kEscape && diff <= std::numeric_limits<std::int8_t>::max())
          delta[i - d0] = static_cast<std::int8_t>(diff);
      }
    }
    write(tail.data(), tail.size() * 4, tail_offset() + std::uint64_t{a} * 4);
    write(delta.data(), delta.size(), delta_offset() + (d0 - tail_n_));
  }
}

ZQuantileFile::~ZQuantileFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ZQuantileFile::read(void* p, std::size_t n, std::uint64_t offset) const {
  if (n > 0 && !io::pread_all(fd_, p, n, offset)) fail("reading");
}

void ZQuantileFile::write(const void* p, std::size_t n, std::uint64_t offset) const {
  if (n > 0 && !io::pwrite_all(fd_, p, n, offset)) fail("writing");
}

void ZQuantileFile::fail(const char* what) const {
  const int e = errno;
  throw IoError(fmt::format("{} the diagnostics' z table scratch file \"{}\" (unlinked once created) failed: {}", what,
                            path_, e != 0 ? std::strerror(e) : "unexpected end of file"));
}

void ZQuantileFile::Reader::load(std::size_t i) {
  const ZQuantileFile& f = *f_;
  first_ = i / kWindow * kWindow;
  const std::size_t e = std::min(first_ + kWindow, f.s_ + 2);
  knot_first_ = (first_ >> f.shift_) > 0 ? (first_ >> f.shift_) - 1 : 0;
  knots_.resize(std::min(f.knots_, ((e - 1) >> f.shift_) + 3) - knot_first_);
  f.read(knots_.data(), knots_.size() * 8, std::uint64_t{knot_first_} * 8);
  tail_.resize(first_ < f.tail_n_ ? std::min(e, f.tail_n_) - first_ : 0);
  f.read(tail_.data(), tail_.size() * 4, f.tail_offset() + std::uint64_t{first_} * 4);
  delta_first_ = std::max(first_, f.tail_n_);
  delta_.resize(e > delta_first_ ? e - delta_first_ : 0);
  f.read(delta_.data(), delta_.size(), f.delta_offset() + (delta_first_ - f.tail_n_));
}

std::shared_ptr<const ZQuantileFile> SharedZTable::file(std::size_t s) {
  const std::lock_guard<std::mutex> lock(file_mu_);
  if (!file_) file_ = std::make_shared<const ZQuantileFile>(s);
  return file_->draws() == s ? file_ : nullptr;
}

std::size_t fft_length(std::size_t n) {
  std::size_t k = std::max<std::size_t>((n + 3) / 4, 1);
  for (;; ++k) {
    std::size_t r = k;
    for (std::size_t f : {2, 3, 5})
      while (r % f == 0) r /= f;
    if (r == 1) return 4 * k;
  }
}

bool all_finite(const double* x, std::size_t n) {
  return Eigen::Map<const Eigen::ArrayXd>(x, static_cast<Eigen::Index>(n)).allFinite();
}

bool is_constant(const double* x, std::size_t n) {
  if (n == 0) return true;
  const Eigen::Map<const Eigen::ArrayXd> a(x, static_cast<Eigen::Index>(n));
  return std::fabs(a.maxCoeff() - a.minCoeff()) < std::numeric_limits<double>::epsilon();
}

namespace {
void check_fft_length(std::size_t len) {
  HERD_REQUIRE(len >= 2 && len <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
               "FFT: length {} is outside [2, 2^31 - 1]", len);
}

#if HERD_HAVE_FFTW
std::mutex& fftw_planner_mutex() {
  static std::mutex mu;
  return mu;
}
#endif
}  // namespace

RealFft::~RealFft() { release(); }

RealFft& RealFft::operator=(RealFft&& o) noexcept {
  if (this == &o) return *this;
  release();
  std::swap(len_, o.len_);
  std::swap(real_, o.real_);
  std::swap(spec_, o.spec_);
#if HERD_HAVE_FFTW
  std::swap(fwd_, o.fwd_);
  std::swap(inv_, o.inv_);
#else
  std::swap(real_buf_, o.real_buf_);
  std::swap(spec_buf_, o.spec_buf_);
  std::swap(kiss_, o.kiss_);
#endif
  return *this;
}

#if HERD_HAVE_FFTW
void RealFft::release() {
  if (len_ == 0) return;
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  fftw_destroy_plan(static_cast<fftw_plan>(fwd_));
  fftw_destroy_plan(static_cast<fftw_plan>(inv_));
  fftw_free(real_);
  fftw_free(spec_);
  fwd_ = inv_ = nullptr;
  real_ = nullptr;
  spec_ = nullptr;
  len_ = 0;
}

void RealFft::prepare(std::size_t len) {
  if (len == len_) return;
  release();
  check_fft_length(len);
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  real_ = fftw_alloc_real(len);
  auto* spec = fftw_alloc_complex(len / 2 + 1);
  if (real_ == nullptr || spec == nullptr) {
    fftw_free(real_);
    fftw_free(spec);
    real_ = nullptr;
    throw std::bad_alloc();
  }
  spec_ = reinterpret_cast<std::complex<double>*>(spec);  // FFTW documents the layout as equal
  const int n = static_cast<int>(len);
  fwd_ = fftw_plan_dft_r2c_1d(n, real_, spec, FFTW_ESTIMATE);
  inv_ = fftw_plan_dft_c2r_1d(n, spec, real_, FFTW_ESTIMATE);
  len_ = len;
}

void RealFft::forward() { fftw_execute(static_cast<fftw_plan>(fwd_)); }
void RealFft::inverse() { fftw_execute(static_cast<fftw_plan>(inv_)); }
#else
void RealFft::release() {
  real_buf_ = {};
  spec_buf_ = {};
  kiss_.reset();
  real_ = nullptr;
  spec_ = nullptr;
  len_ = 0;
}

void RealFft::prepare(std::size_t len) {
  if (len == len_) return;
  release();
  check_fft_length(len);
  real_buf_.assign(len, 0.0);
  spec_buf_.assign(len / 2 + 1, {});
  kiss_ = std::make_unique<Eigen::FFT<double>>();
  kiss_->SetFlag(Eigen::FFT<double>::HalfSpectrum);
  kiss_->SetFlag(Eigen::FFT<double>::Unscaled);
  real_ = real_buf_.data();
  spec_ = spec_buf_.data();
  len_ = len;
}

void RealFft::forward() { kiss_->fwd(spec_, real_, static_cast<Eigen::Index>(len_)); }
void RealFft::inverse() { kiss_->inv(real_, spec_, static_cast<Eigen::Index>(len_)); }
#endif

void autocovariance_fft(const double* x, std::size_t n, double* out, Workspace& ws) {
  const std::size_t len = fft_length(2 * n);
  ws.fft.prepare(len);
  double* r = ws.fft.real();
  std::copy(x, x + n, r);
  std::fill(r + n, r + len, 0.0);
  ws.fft.forward();
  std::complex<double>* spec = ws.fft.spectrum();
  for (std::size_t k = 0; k <= len / 2; ++k) spec[k] = std::complex<double>(std::norm(spec[k]), 0.0);
  ws.fft.inverse();
  const double scale = 1.0 / (static_cast<double>(n) * static_cast<double>(len));
  for (std::size_t k = 0; k < n; ++k) out[k] = r[k] * scale;
}

namespace {
/// Lags of one block of direct_lags: 8 vectors of 4 accumulators.
constexpr std::size_t kLagBlock = 32;

/// s[j] += sum_{t < len} z[t] z[t + k0 + j] for the 32 lags j of a block (z[t + k0 + 31] must
/// exist for t < len), by fused multiply-adds in a fixed order: draws in groups of 16, t0 +
/// r + 4i for r = 0..3 (outer) and i = 0..3, then the draws after the last group one by one.
/// Within a group, the lags' vectors and the draws 4 apart share their loads: the products of
/// z[t0 + r + 4i] with the 4-draw window at t0 + r + k0 + 4u go to the lags' vector u - i,
/// so 11 window loads and 4 broadcasts feed 32 fused multiply-adds.
void lag_block(const double* z, std::size_t len, std::size_t k0, double* s) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256d a0 = _mm256_loadu_pd(s), a1 = _mm256_loadu_pd(s + 4), a2 = _mm256_loadu_pd(s + 8),
          a3 = _mm256_loadu_pd(s + 12), a4 = _mm256_loadu_pd(s + 16), a5 = _mm256_loadu_pd(s + 20),
          a6 = _mm256_loadu_pd(s + 24), a7 = _mm256_loadu_pd(s + 28);
  std::size_t t0 = 0;
  for (; t0 + 16 <= len; t0 += 16) {
    for (std::size_t r = 0; r < 4; ++r) {
      const double* zt = z + t0 + r;
      const double* w = zt + k0;
      const __m256d b0 = _mm256_broadcast_sd(zt), b1 = _mm256_broadcast_sd(zt + 4), b2 = _mm256_broadcast_sd(zt + 8),
                    b3 = _mm256_broadcast_sd(zt + 12);
      __m256d v = _mm256_loadu_pd(w);
      a0 = _mm256_fmadd_pd(b0, v, a0);
      v = _mm256_loadu_pd(w + 4);
      a1 = _mm256_fmadd_pd(b0, v, a1);
      a0 = _mm256_fmadd_pd(b1, v, a0);
      v = _mm256_loadu_pd(w + 8);
      a2 = _mm256_fmadd_pd(b0, v, a2);
      a1 = _mm256_fmadd_pd(b1, v, a1);
      a0 = _mm256_fmadd_pd(b2, v, a0);
      v = _mm256_loadu_pd(w + 12);
      a3 = _mm256_fmadd_pd(b0, v, a3);
      a2 = _mm256_fmadd_pd(b1, v, a2);
      a1 = _mm256_fmadd_pd(b2, v, a1);
      a0 = _mm256_fmadd_pd(b3, v, a0);
      v = _mm256_loadu_pd(w + 16);
      a4 = _mm256_fmadd_pd(b0, v, a4);
      a3 = _mm256_fmadd_pd(b1, v, a3);
      a2 = _mm256_fmadd_pd(b2, v, a2);
      a1 = _mm256_fmadd_pd(b3, v, a1);
      v = _mm256_loadu_pd(w + 20);
      a5 = _mm256_fmadd_pd(b0, v, a5);
      a4 = _mm256_fmadd_pd(b1, v, a4);
      a3 = _mm256_fmadd_pd(b2, v, a3);
      a2 = _mm256_fmadd_pd(b3, v, a2);
      v = _mm256_loadu_pd(w + 24);
      a6 = _mm256_fmadd_pd(b0, v, a6);
      a5 = _mm256_fmadd_pd(b1, v, a5);
      a4 = _mm256_fmadd_pd(b2, v, a4);
      a3 = _mm256_fmadd_pd(b3, v, a3);
      v = _mm256_loadu_pd(w + 28);
      a7 = _mm256_fmadd_pd(b0, v, a7);
      a6 = _mm256_fmadd_pd(b1, v, a6);
      a5 = _mm256_fmadd_pd(b2, v, a5);
      a4 = _mm256_fmadd_pd(b3, v, a4);
      v = _mm256_loadu_pd(w + 32);
      a7 = _mm256_fmadd_pd(b1, v, a7);
      a6 = _mm256_fmadd_pd(b2, v, a6);
      a5 = _mm256_fmadd_pd(b3, v, a5);
      v = _mm256_loadu_pd(w + 36);
      a7 = _mm256_fmadd_pd(b2, v, a7);
      a6 = _mm256_fmadd_pd(b3, v, a6);
      v = _mm256_loadu_pd(w + 40);
      a7 = _mm256_fmadd_pd(b3, v, a7);
    }
  }
  for (std::size_t t = t0; t < len; ++t) {
    const __m256d b = _mm256_broadcast_sd(z + t);
    const double* w = z + t + k0;
    a0 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w), a0);
    a1 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 4), a1);
    a2 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 8), a2);
    a3 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 12), a3);
    a4 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 16), a4);
    a5 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 20), a5);
    a6 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 24), a6);
    a7 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 28), a7);
  }
  _mm256_storeu_pd(s, a0);
  _mm256_storeu_pd(s + 4, a1);
  _mm256_storeu_pd(s + 8, a2);
  _mm256_storeu_pd(s + 12, a3);
  _mm256_storeu_pd(s + 16, a4);
  _mm256_storeu_pd(s + 20, a5);
  _mm256_storeu_pd(s + 24, a6);
  _mm256_storeu_pd(s + 28, a7);
#else
  // The same operations in the same order, one lag at a time.
  for (std::size_t j = 0; j < kLagBlock; ++j) {
    const std::size_t k = k0 + j;
    double a = s[j];
    std::size_t t0 = 0;
    for (; t0 + 16 <= len; t0 += 16)
      for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t i = 0; i < 4; ++i) a = std::fma(z[t0 + r + 4 * i], z[t0 + r + 4 * i + k], a);
    for (std::size_t t = t0; t < len; ++t) a = std::fma(z[t], z[t + k], a);
    s[j] = a;
  }
#endif
}
}  // namespace

/// Lags in blocks of 32 (lag_block) over the draws where every lag of the block is in range,
/// then each lag's remaining draws one by one; lags after the last whole block one by one
/// over all draws. Each lag's sum starts at 0 and is added to acc[k] at the end.
void direct_lags(const double* z, std::size_t n, std::size_t k0, std::size_t k1, double* acc) {
  k1 = std::min(k1, n);
  std::size_t k = k0;
  for (; k + kLagBlock <= k1; k += kLagBlock) {
    const std::size_t len = n - (k + kLagBlock - 1);
    alignas(32) double s[kLagBlock] = {};
    lag_block(z, len, k, s);
    for (std::size_t j = 0; j < kLagBlock; ++j) {
      double a = s[j];
      for (std::size_t t = len; t + k + j < n; ++t) a = std::fma(z[t], z[t + k + j], a);
      acc[k + j] += a;
    }
  }
  for (; k < k1; ++k) {
    double a = 0;
    for (std::size_t t = 0; t + k < n; ++t) a = std::fma(z[t], z[t + k], a);
    acc[k] += a;
  }
}

namespace {
/// Lags of a half block of direct_lags_chains.
constexpr std::size_t kHalfBlock = kLagBlock / 2;

#if defined(__AVX2__) && defined(__FMA__)
/// One step r of lag_block's group of 16 draws (zt = z + t0 + r) for 16 lags [k0, k0 + 16)
/// instead of 32: the products of z[t0 + r + 4i] (i = 0..3, in this order for every lag)
/// with the 4-draw windows at t0 + r + k0 + 4u go to the lags' vector u - i (7 window loads,
/// 4 broadcasts, 16 fused multiply-adds).
[[gnu::always_inline]] inline void half_step(const double* zt, std::size_t k0, __m256d& a0, __m256d& a1, __m256d& a2,
                                             __m256d& a3) {
  const double* w = zt + k0;
  const __m256d b0 = _mm256_broadcast_sd(zt), b1 = _mm256_broadcast_sd(zt + 4), b2 = _mm256_broadcast_sd(zt + 8),
                b3 = _mm256_broadcast_sd(zt + 12);
  __m256d v = _mm256_loadu_pd(w);
  a0 = _mm256_fmadd_pd(b0, v, a0);
  v = _mm256_loadu_pd(w + 4);
  a1 = _mm256_fmadd_pd(b0, v, a1);
  a0 = _mm256_fmadd_pd(b1, v, a0);
  v = _mm256_loadu_pd(w + 8);
  a2 = _mm256_fmadd_pd(b0, v, a2);
  a1 = _mm256_fmadd_pd(b1, v, a1);
  a0 = _mm256_fmadd_pd(b2, v, a0);
  v = _mm256_loadu_pd(w + 12);
  a3 = _mm256_fmadd_pd(b0, v, a3);
  a2 = _mm256_fmadd_pd(b1, v, a2);
  a1 = _mm256_fmadd_pd(b2, v, a1);
  a0 = _mm256_fmadd_pd(b3, v, a0);
  v = _mm256_loadu_pd(w + 16);
  a3 = _mm256_fmadd_pd(b1, v, a3);
  a2 = _mm256_fmadd_pd(b2, v, a2);
  a1 = _mm256_fmadd_pd(b3, v, a1);
  v = _mm256_loadu_pd(w + 20);
  a3 = _mm256_fmadd_pd(b2, v, a3);
  a2 = _mm256_fmadd_pd(b3, v, a2);
  v = _mm256_loadu_pd(w + 24);
  a3 = _mm256_fmadd_pd(b3, v, a3);
}

/// The draws after the last group of 16, one by one (lag_block's order).
[[gnu::always_inline]] inline void half_rest(const double* z, std::size_t t0, std::size_t len, std::size_t k0,
                                             __m256d& a0, __m256d& a1, __m256d& a2, __m256d& a3) {
  for (std::size_t t = t0; t < len; ++t) {
    const __m256d b = _mm256_broadcast_sd(z + t);
    const double* w = z + t + k0;
    a0 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w), a0);
    a1 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 4), a1);
    a2 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 8), a2);
    a3 = _mm256_fmadd_pd(b, _mm256_loadu_pd(w + 12), a3);
  }
}
#endif

/// s[j] += sum_{t < len} z[t] z[t + k0 + j] for 16 lags j in lag_block's order of the draws,
/// len a multiple of 16 (groups only), for 2 chains (z, s and z2, s2) or 1: half_block's
/// groups with its sums carried in s (and s2) from a previous window instead of starting at 0.
void half_groups(const double* z, const double* z2, int chains, std::size_t len, std::size_t k0, double* s,
                 double* s2) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256d a0 = _mm256_loadu_pd(s), a1 = _mm256_loadu_pd(s + 4), a2 = _mm256_loadu_pd(s + 8),
          a3 = _mm256_loadu_pd(s + 12);
  if (chains == 2) {
    __m256d c0 = _mm256_loadu_pd(s2), c1 = _mm256_loadu_pd(s2 + 4), c2 = _mm256_loadu_pd(s2 + 8),
            c3 = _mm256_loadu_pd(s2 + 12);
    for (std::size_t t0 = 0; t0 + 16 <= len; t0 += 16) {
      for (std::size_t r = 0; r < 4; ++r) {
        half_step(z + t0 + r, k0, a0, a1, a2, a3);
        half_step(z2 + t0 + r, k0, c0, c1, c2, c3);
      }
    }
    _mm256_storeu_pd(s2, c0);
    _mm256_storeu_pd(s2 + 4, c1);
    _mm256_storeu_pd(s2 + 8, c2);
    _mm256_storeu_pd(s2 + 12, c3);
  } else {
    for (std::size_t t0 = 0; t0 + 16 <= len; t0 += 16)
      for (std::size_t r = 0; r < 4; ++r) half_step(z + t0 + r, k0, a0, a1, a2, a3);
  }
  _mm256_storeu_pd(s, a0);
  _mm256_storeu_pd(s + 4, a1);
  _mm256_storeu_pd(s + 8, a2);
  _mm256_storeu_pd(s + 12, a3);
#else
  for (int c = 0; c < chains; ++c) {
    const double* zc = c == 0 ? z : z2;
    double* sc = c == 0 ? s : s2;
    for (std::size_t j = 0; j < kHalfBlock; ++j) {
      const std::size_t k = k0 + j;
      double a = sc[j];
      for (std::size_t t0 = 0; t0 + 16 <= len; t0 += 16)
        for (std::size_t r = 0; r < 4; ++r)
          for (std::size_t i = 0; i < 4; ++i) a = std::fma(zc[t0 + r + 4 * i], zc[t0 + r + 4 * i + k], a);
      sc[j] = a;
    }
  }
#endif
}

/// s[j] += sum_{groups <= t < len} z[t] z[t + k0 + j] for 16 lags j, draw by draw (the draws
/// after the last group of 16, in lag_block's order).
void half_tail(const double* z, std::size_t groups, std::size_t len, std::size_t k0, double* s) {
#if defined(__AVX2__) && defined(__FMA__)
  __m256d a0 = _mm256_loadu_pd(s), a1 = _mm256_loadu_pd(s + 4), a2 = _mm256_loadu_pd(s + 8),
          a3 = _mm256_loadu_pd(s + 12);
  half_rest(z, groups, len, k0, a0, a1, a2, a3);
  _mm256_storeu_pd(s, a0);
  _mm256_storeu_pd(s + 4, a1);
  _mm256_storeu_pd(s + 8, a2);
  _mm256_storeu_pd(s + 12, a3);
#else
  for (std::size_t j = 0; j < kHalfBlock; ++j) {
    double a = s[j];
    for (std::size_t t = groups; t < len; ++t) a = std::fma(z[t], z[t + k0 + j], a);
    s[j] = a;
  }
#endif
}

/// s[j] = sum_{t < len} z[t] z[t + k0 + j] for 16 lags j, in lag_block's order of the draws
/// (z[t + k0 + 15] must exist for t < len): for `chains` = 2 chains z and z2 at once (s and
/// s2), whose 8 vectors of sums keep both fused multiply-add pipes busy as lag_block's 8 do;
/// for 1, z alone.
void half_block(const double* z, const double* z2, int chains, std::size_t len, std::size_t k0, double* s, double* s2) {
  const std::size_t groups = len / 16 * 16;
  std::fill_n(s, kHalfBlock, 0.0);
  if (chains == 2) std::fill_n(s2, kHalfBlock, 0.0);
  half_groups(z, z2, chains, groups, k0, s, s2);
  half_tail(z, groups, len, k0, s);
  if (chains == 2) half_tail(z2, groups, len, k0, s2);
}
}  // namespace

void direct_lags_chains(const double* y, std::size_t m, std::size_t n, std::size_t k0, std::size_t k1, double* acc) {
  k1 = std::min(k1, n);
  std::size_t k = k0;
  while (k < k1) {
    const std::size_t block = k / kLagBlock * kLagBlock;  // the block of 32 that direct_lags sums lag k in
    if (block + kLagBlock > n) {
      // direct_lags sums this lag alone over all draws.
      for (std::size_t c = 0; c < m; ++c) {
        const double* z = y + c * n;
        double a = 0;
        for (std::size_t t = 0; t + k < n; ++t) a = std::fma(z[t], z[t + k], a);
        acc[k] += a;
      }
      ++k;
      continue;
    }
    // Lags [k, k + 16) (k is a multiple of 16), over the draws of their block of 32.
    const std::size_t len = n - (block + kLagBlock - 1);
    for (std::size_t c = 0; c < m; c += 2) {
      const int chains = c + 1 < m ? 2 : 1;
      const double* z[2] = {y + c * n, y + (c + 1) * n};
      alignas(32) double s[2][kHalfBlock];
      half_block(z[0], z[1], chains, len, k, s[0], s[1]);
      for (int i = 0; i < chains; ++i) {
        for (std::size_t j = 0; j < kHalfBlock; ++j) {
          double a = s[i][j];
          for (std::size_t t = len; t + k + j < n; ++t) a = std::fma(z[i][t], z[i][t + k + j], a);
          acc[k + j] += a;
        }
      }
    }
    k += kHalfBlock;
  }
}

namespace {
/// piece_lags_stored of the m centred chains that fill(c, t0, k, out) writes piece by piece
/// (the k <= P values [t0, t0 + k) of chain c to out; called for t0 = 0, P, 2P, ... of
/// chain 0, then of chain 1, ...: in order, so a generated series can be read by a cursor).
/// `pass` is the previous pass's piece length (0: none) on entry, this pass's on return.
template <class Fill>
const double* piece_lags(std::size_t m, std::size_t n, std::size_t lag, Workspace& ws, Fill&& fill, std::size_t* valid,
                         std::size_t& pass) {
  const std::size_t p = piece_length(lag, pass);
  pass = p;
  // Pieces of more than n / 2 (two or one): the whole chains, zero-padded to fft_length(2 n)
  // points (fewer than 4p), cost less.
  const bool whole = 2 * p > n;
  const std::size_t len = whole ? fft_length(2 * n) : 2 * p, half = len / 2 + 1;
  RealFft& fft = whole ? ws.fft : ws.piece_transform(len);
  if (whole) fft.prepare(len);
  double* r = fft.real();
  std::complex<double>* spec = fft.spectrum();
  ws.lag_spec.assign(whole ? half : 2 * half, {});
  std::complex<double>* acc = ws.lag_spec.data();  // summed cross spectra
  std::complex<double>* prev = acc + half;         // the chain's previous piece's spectrum (not whole)
  const std::size_t step = whole ? n : p;
  for (std::size_t c = 0; c < m; ++c) {
    for (std::size_t t0 = 0; t0 < n; t0 += step) {
      const std::size_t k = std::min(step, n - t0);
      fill(c, t0, k, r);
      std::fill(r + k, r + len, 0.0);
      fft.forward();
      // Written out in real arithmetic (each operation rounded once, in this order, however
      // the loops are vectorised): conj(a) b = (ar br + ai bi) + i (ar bi - ai br), |b|^2 =
      // br^2 + bi^2.
      if (t0 > 0) {
        // Piece j (prev) against piece j + 1 shifted by P = len / 2 points: (-1)^f.
        for (std::size_t f = 0; f < half; ++f) {
          const double ar = prev[f].real(), ai = prev[f].imag(), br = spec[f].real(), bi = spec[f].imag();
          const double re = ar * br + ai * bi, im = ar * bi - ai * br;
          acc[f] += f % 2 == 0 ? std::complex<double>(re, im) : std::complex<double>(-re, -im);
        }
      }
      for (std::size_t f = 0; f < half; ++f) {
        const double br = spec[f].real(), bi = spec[f].imag();
        acc[f] += br * br + bi * bi;
      }
      if (!whole) std::copy(spec, spec + half, prev);
    }
  }
  std::copy(acc, acc + half, spec);
  fft.inverse();
  *valid = whole ? n : p + 1;
  const double scale = 1.0 / (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(len));
  for (std::size_t k = 0; k < *valid; ++k) r[k] *= scale;
  return r;
}
}  // namespace

std::size_t piece_length(std::size_t lag, std::size_t prev) {
  return std::bit_ceil(std::max({4 * (lag + 1), std::size_t{1024}, 16 * prev}));
}

const double* piece_lags_stored(const double* y, std::size_t m, std::size_t n, std::size_t lag, Workspace& ws,
                                std::size_t* valid, std::size_t prev) {
  return piece_lags(
      m, n, lag, ws,
      [&](std::size_t c, std::size_t t0, std::size_t k, double* out) { std::copy_n(y + c * n + t0, k, out); }, valid,
      prev);
}

RealFft& Workspace::piece_transform(std::size_t len) {
  HERD_REQUIRE(std::has_single_bit(len) && len >= 2, "piece_transform: length {} is not a power of two", len);
  RealFft& fft = piece_fft.at(static_cast<std::size_t>(std::countr_zero(len)));
  fft.prepare(len);
  return fft;
}

namespace {
/// The next block of directly summed lags after [0, have), for a request of `lag`: blocks
/// grow by a quarter (Geyer's sequence usually stops after a few dozen lags), capped at
/// `cap` and n.
std::size_t next_block(std::size_t have, std::size_t lag, std::size_t n, std::size_t cap) {
  return std::min({n, cap, std::max({lag + 1, have + have / 4, std::size_t{16}})});
}

/// The lags that ess_chains sums directly for m chains of n draws before it takes the lags
/// from the FFT (in pieces: piece_lags) instead. Chosen as rent-or-buy against a transform of
/// the whole chains (m forward transforms and one inverse of len = fft_length(2 n) points,
/// each about as costly as 5 len log2(len) direct products, a lag m n products; never fewer
/// than kDirectLags), and kept when the FFT went to pieces, which cost less: the switch point
/// decides which quantities' lags are rounded as direct sums. About 300 lags for 2 chains of
/// 4.7e5 draws.
std::size_t direct_lag_cap(std::size_t m, std::size_t n) {
  const double len = static_cast<double>(fft_length(2 * n));
  const double fft = static_cast<double>(m + 1) * 5.0 * len * std::log2(len);
  const auto cap = static_cast<std::size_t>(fft / (static_cast<double>(m) * static_cast<double>(n)));
  return std::max(cap, kDirectLags);
}

/// posterior's `.ess` from the chain means ws.means [m] and the chain-averaged autocovariance
/// (divisor m n) that `ensure(lag)` returns: a pointer to the lags, final at [0, lag] (and
/// perhaps beyond), valid until the next call; the lags are asked for in increasing order,
/// each read once (the pointer may change between calls, a lag read before is not read again).
/// Geyer's sequences are summed as they go, pair by pair: no buffer of lags.
template <class Ensure>
double geyer_ess(std::size_t m, std::size_t n, Workspace& ws, Ensure&& ensure) {
  const double nd = static_cast<double>(n);
  const double mean_var = ensure(1)[0] * nd / (nd - 1.0);
  double var_plus = mean_var * (nd - 1.0) / nd;
  if (m > 1) {
    const double mm = mean_of(ws.means.data(), m);
    double v = 0;
    for (double mu : ws.means) v += (mu - mm) * (mu - mm);
    var_plus += v / static_cast<double>(m - 1);
  }
  auto rho_at = [&](std::size_t k) { return 1.0 - (mean_var - ensure(k)[k]) / var_plus; };
  // Geyer's initial positive sequence (posterior's .ess, 0-based): the pairs (rho[t],
  // rho[t + 1]) for t = 0, 2, ..., max_t, a pair whose sum is negative kept as zeros. Its
  // initial monotone sequence: each pair t in [2, max_t - 2] whose sum exceeds the previous
  // (monotone) pair's becomes two copies of the previous pair's mean. Then tau = -1 +
  // 2 (rho[0] + ... + rho[max_t - 1]) + rho[max_t], rho[max_t] = rho_even when positive.
  // A pair followed by another is not the last one: it is made monotone and added at once
  // (in lag order, as a sum over the stored sequence adds it), so only the last pair and
  // the one before it are kept.
  double sum = 0;
  double prev_even = 0, prev_odd = 0;  // the last pair added (monotone)
  std::int64_t t = 0;
  double rho_even = 1.0;
  double rho_odd = rho_at(1);
  double pair_even = rho_even, pair_odd = rho_odd;  // pair t as the positive sequence keeps it
  const auto ni = static_cast<std::int64_t>(n);
  while (t < ni - 5 && !std::isnan(rho_even + rho_odd) && rho_even + rho_odd > 0) {
    if (t >= 2 && pair_even + pair_odd > prev_even + prev_odd) pair_even = pair_odd = (prev_even + prev_odd) / 2.0;
    sum += pair_even;
    sum += pair_odd;
    prev_even = pair_even;
    prev_odd = pair_odd;
    t += 2;
    rho_even = rho_at(static_cast<std::size_t>(t));
    rho_odd = rho_at(static_cast<std::size_t>(t + 1));
    const bool keep = rho_even + rho_odd >= 0;
    pair_even = keep ? rho_even : 0.0;
    pair_odd = keep ? rho_odd : 0.0;
  }
  if (rho_even > 0) pair_even = rho_even;
  double tau = -1.0 + 2.0 * sum + pair_even;
  const double total = static_cast<double>(m) * nd;
  tau = std::max(tau, 1.0 / std::log10(total));
  return total / tau;
}

double ess_centred(const double* y, double* writable, std::size_t m, std::size_t n, Workspace& ws);

/// ess_chains and ess_chains_overwrite: `writable` is y itself (centred in place, once) or
/// nullptr (each chain centred into a buffer whenever its lags are summed).
double ess_impl(const double* y, double* writable, std::size_t m, std::size_t n, Workspace& ws, bool checked) {
  if (n < 3 || m == 0) return kNaN;
  const std::size_t s = m * n;
  if (!checked && (!all_finite(y, s) || is_constant(y, s))) return kNaN;
  ws.means.resize(m);
  for (std::size_t c = 0; c < m; ++c) ws.means[c] = mean_of(y + c * n, n);
  // The same centred values either way: y[t] - mean of its chain.
  if (writable != nullptr) {
    for (std::size_t c = 0; c < m; ++c) {
      const double mu = ws.means[c];
      double* yc = writable + c * n;
      for (std::size_t t = 0; t < n; ++t) yc[t] -= mu;
    }
  }
  return ess_centred(y, writable, m, n, ws);
}

/// ess_impl after its chain means (ws.means) and, when `writable` is not nullptr, its
/// centring in place (writable == y, each chain minus its mean); n >= 3, m >= 1.
double ess_centred(const double* y, double* writable, std::size_t m, std::size_t n, Workspace& ws) {
  if (writable == nullptr) ws.centered.resize(n);
  // One chain at a time, centred into a buffer that stays in cache while its lags are summed.
  auto center = [&](std::size_t c) -> const double* {
    if (writable != nullptr) return writable + c * n;
    const double mu = ws.means[c];
    const double* yc = y + c * n;
    for (std::size_t t = 0; t < n; ++t) ws.centered[t] = yc[t] - mu;
    return ws.centered.data();
  };
  // ws.acov holds the directly summed lags [0, have), grown block by block (a few hundred
  // lags at most: direct_lag_cap); past the cap the lags come from the FFT in pieces
  // (piece_lags: a few times the lag asked for, one more pass when Geyer asks for more).
  // `have` follows the blocks of whole kLagBlock lags that decide when to switch to the FFT;
  // of them, the lags [0, done) are summed: all of them at once from a centred buffer, or,
  // when the chains are centred in place, only up to the request in half blocks of 16 lags
  // (direct_lags_chains: the same sums, and no more lags than Geyer's sequence asks for,
  // give or take 15).
  ws.acov.clear();
  std::size_t have = 0, done = 0;
  std::size_t pass = 0;  // the last FFT pass's piece length
  const double* acov = nullptr;
  const double inv_mn = 1.0 / (static_cast<double>(m) * static_cast<double>(n));
  const std::size_t cap = direct_lag_cap(m, n);
  return geyer_ess(m, n, ws, [&](std::size_t lag) {
    if (lag < done) return acov;
    if (lag < have || lag < cap) {
      if (lag >= have)  // whole blocks of kLagBlock lags
        have = std::min(n, (next_block(have, lag, n, cap) + kLagBlock - 1) / kLagBlock * kLagBlock);
      const std::size_t upto =
          writable != nullptr ? std::min(have, (lag + kHalfBlock) / kHalfBlock * kHalfBlock) : have;
      ws.acov.resize(upto, 0.0);  // the new lags [done, upto) start at 0
      if (writable != nullptr) direct_lags_chains(writable, m, n, done, upto, ws.acov.data());
      else
        for (std::size_t c = 0; c < m; ++c) direct_lags(center(c), n, done, upto, ws.acov.data());
      for (std::size_t k = done; k < upto; ++k) ws.acov[k] *= inv_mn;
      acov = ws.acov.data();
      done = upto;
    } else {
      // Lags [0, done) from the FFT in pieces (those below `lag` are not read again).
      acov = piece_lags(
          m, n, lag, ws,
          [&](std::size_t c, std::size_t t0, std::size_t k, double* r) {
            // The values center(c) gives, written straight into the transform's input.
            if (writable != nullptr) {
              std::copy_n(writable + c * n + t0, k, r);
              return;
            }
            const double mu = ws.means[c];
            const double* yc = y + c * n + t0;
            for (std::size_t t = 0; t < k; ++t) r[t] = yc[t] - mu;
          },
          &done, pass);
      have = done;
    }
    return acov;
  });
}

/// A double-double value hi + lo (|lo| <= ulp(hi) / 2), for sums rounded once at the end.
struct DoubleDouble {
  double hi = 0, lo = 0;
  /// Adds a + b exactly representable as a double-double (Knuth's two-sum, then normalised).
  void add(double a, double b) {
    const double s = hi + a;
    const double v = s - hi;
    const double e = (hi - (s - v)) + (a - v) + lo + b;
    hi = s + e;
    lo = e - (hi - s);
  }
  /// Adds the product x y exactly split into p + e (fused multiply-add).
  void add_product(double x, double y) {
    const double p = x * y;
    add(p, std::fma(x, y, -p));
  }
};

/// Lags beyond which the indicator ESS takes every lag from the FFT: a lag of n packed draws
/// costs about n / 64 word operations, a little less than an FFT of 2n points up to here.
constexpr std::size_t kBitLags = 2048;
}  // namespace

std::size_t indicator_words(std::size_t n) { return (n + 63) / 64 + 1; }

void pack_indicator(const double* x, std::size_t n, double q, std::uint64_t* bits) {
  const std::size_t full = n / 64;
  for (std::size_t w = 0; w < full; ++w) {
    const double* v = x + 64 * w;
    std::uint64_t b = 0;
    for (std::size_t i = 0; i < 64; ++i) b |= static_cast<std::uint64_t>(v[i] <= q) << i;
    bits[w] = b;
  }
  std::uint64_t b = 0;
  for (std::size_t i = 64 * full; i < n; ++i) b |= static_cast<std::uint64_t>(x[i] <= q) << (i - 64 * full);
  bits[full] = b;
  if (n % 64 != 0) bits[full + 1] = 0;
}

void indicator_lag_counts(const std::uint64_t* bits, std::size_t n, std::size_t k0, std::size_t k1,
                          std::uint64_t* out) {
  const std::size_t words = (n + 63) / 64;  // bits[words] is the zero padding word
  for (std::size_t k = k0; k < k1; ++k) {
    const std::size_t q = k / 64, r = k % 64;
    std::uint64_t count = 0;
    // Word i of the series shifted down by k: bits t + k for t in [64 i, 64 i + 64); the
    // bits past n are zero, so every pair counted has t + k < n.
    if (r == 0) {
      for (std::size_t i = 0; i + q < words; ++i)
        count += static_cast<std::uint64_t>(std::popcount(bits[i] & bits[i + q]));
    } else {
      for (std::size_t i = 0; i + q < words; ++i) {
        const std::uint64_t shifted = (bits[i + q] >> r) | (bits[i + q + 1] << (64 - r));
        count += static_cast<std::uint64_t>(std::popcount(bits[i] & shifted));
      }
    }
    out[k - k0] = count;
  }
}

double ess_indicator_bits(const std::uint64_t* bits, std::size_t m, std::size_t n, Workspace& ws) {
  if (n < 3 || m == 0) return kNaN;
  const std::size_t wpc = indicator_words(n);
  const std::size_t words = (n + 63) / 64;
  // Per chain: its ones, the ones before each of its first `ends` words and from each of its
  // last `ends` words on (the pair counts below ask for the ones before draw j only for j <=
  // kBitLags and j >= n - kBitLags: 2 (ends + 1) counts per chain, not one per word), the
  // chain mean, and the centred values a = 1 - mean (a one) and b = -mean (a zero) that
  // ess_chains would sum.
  const std::size_t ends = std::min(words, kBitLags / 64 + 2);
  ws.bit_prefix.resize(m * (2 * (ends + 1) + 1));
  ws.means.resize(m);
  const auto pop = [](std::uint64_t x) { return static_cast<std::uint64_t>(std::popcount(x)); };
  for (std::size_t c = 0; c < m; ++c) {
    const std::uint64_t* bc = bits + c * wpc;
    std::uint64_t* head = ws.bit_prefix.data() + c * (2 * (ends + 1) + 1);  // [ends + 1]: ones before word w
    std::uint64_t* tail = head + ends + 1;  // [ends + 1]: ones in words [words - ends + u, words)
    std::uint64_t total = 0;
    for (std::size_t w = 0; w < words; ++w) total += pop(bc[w]);
    head[0] = 0;
    for (std::size_t w = 0; w < ends; ++w) head[w + 1] = head[w] + pop(bc[w]);
    tail[ends] = 0;
    for (std::size_t u = ends; u-- > 0;) tail[u] = tail[u + 1] + pop(bc[words - ends + u]);
    tail[ends + 1] = total;
    ws.means[c] = static_cast<double>(total) / static_cast<double>(n);
  }
  auto ones_before = [&](std::size_t c, std::size_t j) {  // ones among draws [0, j), j <= n
    const std::uint64_t* bc = bits + c * wpc;
    const std::uint64_t* head = ws.bit_prefix.data() + c * (2 * (ends + 1) + 1);
    const std::uint64_t* tail = head + ends + 1;
    const std::size_t w = j / 64, r = j % 64;
    const std::uint64_t part = r == 0 ? 0 : pop(bc[w] & ((std::uint64_t{1} << r) - 1));  // bits past n are 0
    if (w <= ends) return head[w] + part;
    if (w >= words - ends) return tail[ends + 1] - tail[w - (words - ends)] + part;
    std::uint64_t before = head[ends];  // not asked for (see above); counted word by word
    for (std::size_t u = ends; u < w; ++u) before += pop(bc[u]);
    return before + part;
  };
  ws.acov.clear();  // lags [0, have), grown block by block up to kBitLags; then the FFT's
  std::size_t have = 0;
  std::size_t pass = 0;  // the last FFT pass's piece length
  const double* acov = nullptr;
  const double inv_mn = 1.0 / (static_cast<double>(m) * static_cast<double>(n));
  return geyer_ess(m, n, ws, [&](std::size_t lag) {
    if (lag < have) return acov;
    if (lag < kBitLags) {
      // sum_t (I_t - mu)(I_{t+k} - mu) over t < n - k from the pair counts: n11 pairs of
      // ones, n10 + n01 mixed pairs, n00 pairs of zeros, each pair's product of the centred
      // values a, b as ess_chains rounds them; the sum over chains in double-double, rounded
      // once.
      const std::size_t upto = next_block(have, lag, n, kBitLags);
      std::vector<DoubleDouble> sums(upto - have);
      ws.bit_counts.resize(upto - have);
      for (std::size_t c = 0; c < m; ++c) {
        const double mu = ws.means[c];
        const double a = 1.0 - mu, b = -mu;
        indicator_lag_counts(bits + c * wpc, n, have, upto, ws.bit_counts.data());
        const std::uint64_t ones = ones_before(c, n);
        for (std::size_t k = have; k < upto; ++k) {
          const std::uint64_t n11 = ws.bit_counts[k - have];
          const std::uint64_t head = ones_before(c, n - k);     // ones among t in [0, n - k)
          const std::uint64_t tail = ones - ones_before(c, k);  // ones among t + k in [k, n)
          const std::uint64_t mixed = head + tail - 2 * n11;
          const std::uint64_t n00 = (n - k) - head - tail + n11;
          DoubleDouble& d = sums[k - have];
          const auto cnt = [](std::uint64_t v) { return static_cast<double>(v); };
          // count * x * y: x y = p + e exactly, count * p and count * e exactly as two terms each.
          for (const auto& [count, x, y] : {std::tuple{n11, a, a}, std::tuple{mixed, a, b}, std::tuple{n00, b, b}}) {
            const double p = x * y;
            const double e = std::fma(x, y, -p);
            d.add_product(cnt(count), p);
            d.add_product(cnt(count), e);
          }
        }
      }
      ws.acov.resize(upto);
      for (std::size_t k = have; k < upto; ++k) ws.acov[k] = sums[k - have].hi * inv_mn;
      acov = ws.acov.data();
      have = upto;
    } else {
      acov = piece_lags(
          m, n, lag, ws,
          [&](std::size_t c, std::size_t t0, std::size_t k, double* r) {
            const double mu = ws.means[c];
            const double a = 1.0 - mu, b = -mu;
            const std::uint64_t* bc = bits + c * wpc;
            for (std::size_t t = t0; t < t0 + k; ++t) r[t - t0] = (bc[t / 64] >> (t % 64)) & 1U ? a : b;
          },
          &have, pass);
    }
    return acov;
  });
}

double ess_chains(const double* y, std::size_t m, std::size_t n, Workspace& ws, bool checked) {
  return ess_impl(y, nullptr, m, n, ws, checked);
}

double ess_chains_overwrite(double* y, std::size_t m, std::size_t n, Workspace& ws, bool checked) {
  return ess_impl(y, y, m, n, ws, checked);
}

namespace {
/// rhat_chains from the chain means [m] and variances [m] (divisor n - 1); m, n >= 2.
double rhat_from(const std::vector<double>& means, const std::vector<double>& vars, std::size_t m, std::size_t n) {
  const double mm = mean_of(means.data(), m);
  double vb = 0;
  for (double mu : means) vb += (mu - mm) * (mu - mm);
  const double nd = static_cast<double>(n);
  const double var_between = nd * vb / static_cast<double>(m - 1);
  const double var_within = mean_of(vars.data(), m);
  return std::sqrt((var_between / var_within + nd - 1.0) / nd);
}
}  // namespace

double rhat_chains(const double* y, std::size_t m, std::size_t n, bool checked) {
  if (m < 2 || n < 2) return kNaN;
  const std::size_t s = m * n;
  if (!checked && (!all_finite(y, s) || is_constant(y, s))) return kNaN;
  std::vector<double> means(m), vars(m);
  for (std::size_t c = 0; c < m; ++c) {
    const double* z = y + c * n;
    const double mu = mean_of(z, n);
    double v = 0;
    for (std::size_t t = 0; t < n; ++t) v += (z[t] - mu) * (z[t] - mu);
    means[c] = mu;
    vars[c] = v / static_cast<double>(n - 1);
  }
  return rhat_from(means, vars, m, n);
}

void rhat_ess_overwrite(double* y, std::size_t m, std::size_t n, Workspace& ws, double* rhat, double* ess) {
  // One pass per chain for its mean, one that centres it and sums the squares of the centred
  // values: (y - mu)^2 as rhat_chains sums it, y - mu as ess_chains_overwrite stores it.
  ws.means.resize(m);
  std::vector<double> vars(m);
  for (std::size_t c = 0; c < m; ++c) {
    double* z = y + c * n;
    const double mu = mean_of(z, n);
    double v = 0;
    for (std::size_t t = 0; t < n; ++t) {
      const double d = z[t] - mu;
      z[t] = d;
      v += d * d;
    }
    ws.means[c] = mu;
    vars[c] = v / static_cast<double>(n - 1);
  }
  *rhat = m < 2 || n < 2 ? kNaN : rhat_from(ws.means, vars, m, n);
  *ess = n < 3 || m == 0 ? kNaN : ess_centred(y, y, m, n, ws);
}

SplitSeries::SplitSeries(const DrawsView& v, Kind kind, const double* vals, double mean)
    : w_(v.weights().data()),
      x_(v.values().data()),
      vals_(vals),
      kind_(kind),
      mean_(mean),
      m_(v.chains()),
      d_(v.draws()),
      n_(v.verbose_draws()),
      h_(v.verbose_draws() / 2),
      odd_(v.verbose_draws() % 2 == 1),
      unit_(!v.weighted()),
      starts_(2 * v.chains()) {
  HERD_REQUIRE(v.weighted() || v.streamed(), "SplitSeries: the layout of a weighted or streamed view");
  if (v.streamed()) {
    HERD_REQUIRE(kind != Kind::kSlot, "SplitSeries: a streamed view's layout reads no slot values");
    source_ = v.reader();
    weights_source_ = v.weights_reader();
  }
  if (unit_) {  // split chain 2c: states [c d, c d + h); 2c + 1: [c d + n - h, (c + 1) d)
    for (std::size_t c = 0; c < m_; ++c) {
      starts_[2 * c] = {c * d_, 0, 0, 0};
      starts_[2 * c + 1] = {c * d_ + (n_ - h_), 0, 0, 0};
    }
    return;
  }
  std::size_t slot = 0;                // slots of the chains before
  const std::size_t second = n_ - h_;  // verbose index of the second half's first draw
  // One walk of the weights (in blocks when they are read): each chain's first state starts
  // its first half; the state holding draw `second` starts its second half.
  std::size_t c = 0, t0 = 0;
  bool found = false;
  for_each_weight_block(v, [&](std::size_t j0, const std::uint32_t* w, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t j = j0 + i;
      const auto wj = static_cast<std::size_t>(w[i]);
      if (j == c * d_ + d_) ++c;
      if (j == c * d_) {
        starts_[2 * c] = {j, std::min(wj, h_), slot, 0, wj};
        starts_[2 * c + 1] = {j, 0, slot, 0, wj};
        found = h_ == 0;
        t0 = 0;
      }
      if (!found && t0 + wj > second) {
        starts_[2 * c + 1] = {j, t0 + wj - second, slot, t0, wj};
        found = true;
      }
      slot += has_slot(wj, t0) ? 1 : 0;
      t0 += wj;
    }
  });
}

SplitSeries::Cursor SplitSeries::cursor(std::size_t c2, double mu) const {
  Cursor cur;
  const Start& st = starts_[c2];
  cur.s_ = this;
  cur.half_ = c2 % 2;
  cur.mu_ = mu;
  if (unit_) {  // one draw per state, from st.j on (next_unit); its windows end with the split chain
    cur.j_ = st.j;
    cur.wcap_ = st.j + h_;
    return cur;
  }
  // The first state is started: its draws in this half are pending.
  cur.pend_ = st.left;
  if (source_ != nullptr) cur.pend_value_ = st.left > 0 ? cur.streamed_value(st.j) - mu : 0.0;
  else cur.pend_value_ = st.left > 0 ? value(st.j, st.slot) - mu : 0.0;
  cur.j_ = st.j + 1;
  cur.t0_ = st.t0 + st.w;
  cur.slot_ = st.slot + (has_slot(st.w, st.t0) ? 1 : 0);
  return cur;
}

void SplitSeries::Cursor::load(std::size_t j) {
  const SplitSeries& s = *s_;
  const std::size_t total = s.m_ * s.d_;
  win_.resize(std::min(kWindow, wcap_ - j));
  base_ = j;
  wend_ = std::min({total, j + kWindow, wcap_});
  (*s.source_)(j, std::span<double>(win_.data(), wend_ - j));
  if (s.weights_source_ != nullptr) {
    wwin_.resize(kWindow);
    (*s.weights_source_)(j, std::span<std::uint32_t>(wwin_.data(), wend_ - j));
  }
}

double SplitSeries::Cursor::streamed_value(std::size_t j) {
  if (j >= wend_ || j < base_) load(j);
  const double v = win_[j - base_];
  return s_->kind_ == Kind::kSquare ? (v - s_->mean_) * (v - s_->mean_) : v;
}

template <SplitSeries::Kind K, bool Streamed, bool WeightsStreamed>
void SplitSeries::Cursor::next_impl(double* out, std::size_t len) {
  static_assert(Streamed || !WeightsStreamed);
  const SplitSeries& s = *s_;
  const double* end = out + len;
  const std::uint32_t* w = s.w_;
  const double* vals = K == Kind::kSlot ? s.vals_ : s.x_;
  const double mean = s.mean_, mu = mu_;
  // The weight of state j: from the view's weights, or (read too) through the window, which
  // is loaded when j leaves it (states in order; the value of j is read after its weight).
  const auto weight = [&](std::size_t j) -> std::size_t {
    if constexpr (WeightsStreamed) {
      if (j >= wend_) [[unlikely]]
        load(j);
      return wwin_[j - base_];
    } else {
      return w[j];
    }
  };
  const auto value = [&](std::size_t j, std::size_t slot) {
    if constexpr (Streamed) {
      // States in order: a new window when j leaves this one.
      if (j >= wend_) [[unlikely]]
        load(j);
      const double v = win_[j - base_];
      if constexpr (K == Kind::kSquare) return (v - mean) * (v - mean);
      else return v;
    } else if constexpr (K == Kind::kSlot) {
      return vals[slot];
    } else if constexpr (K == Kind::kState) {
      return vals[j];
    } else {
      return (vals[j] - mean) * (vals[j] - mean);
    }
  };
  if (pend_ > 0) {
    const std::size_t take = std::min(pend_, len);
    out = fill_run8(out, take, pend_value_, end);
    pend_ -= take;
    len -= take;
  }
  // The first half ends at h (its last state may go on in the second half, or hold the
  // dropped middle draw); the second half ends with its chain.
  const std::size_t stop = half_ == 0 ? s.h_ : std::numeric_limits<std::size_t>::max();
  std::size_t j = j_, slot = slot_, t0 = t0_;
  while (len > 0) {
    // Whole states of at most 8 draws while 8 or more draws are left in the request and the
    // half (one compare per state; every state of a DRAM chain but a few percent).
    std::size_t lim = std::min(len, stop - std::min(t0, stop));
    const std::size_t lim0 = lim;
    while (lim >= 8) {
      const std::size_t wj = weight(j);
      if (wj > 8) break;
      store8(out, value(j, slot) - mu);
      out += wj;
      lim -= wj;
      slot += wj != 0 ? 1 : 0;
      ++j;
    }
    len -= lim0 - lim;
    t0 += lim0 - lim;
    if (len == 0) break;
    const std::size_t wj = weight(j);
    if (wj <= len && t0 + wj <= stop) [[likely]] {
      // A state whose draws all lie in this half and in the request (zero weights too: none
      // written, no slot).
      out = fill_run8(out, wj, value(j, slot) - mu, end);
      len -= wj;
      slot += wj != 0 ? 1 : 0;
    } else {
      // Cut by the end of the half or of the request: the rest stays pending.
      const std::size_t here = half_ == 0 ? std::min(wj, stop - std::min(t0, stop)) : wj;
      const std::size_t take = std::min(here, len);
      pend_value_ = value(j, slot) - mu;
      out = fill_run8(out, take, pend_value_, end);
      pend_ = here - take;
      len -= take;
      slot += s.has_slot(wj, t0) ? 1 : 0;
    }
    t0 += wj;
    ++j;
  }
  j_ = j;
  slot_ = slot;
  t0_ = t0;
}

void SplitSeries::Cursor::next_unit(double* out, std::size_t len) {
  // The states of a split chain are consecutive: value - mu of each, through the window.
  const bool square = s_->kind_ == Kind::kSquare;
  const double mean = s_->mean_, mu = mu_;
  while (len > 0) {
    if (j_ >= wend_ || j_ < base_) load(j_);
    const std::size_t take = std::min(len, wend_ - j_);
    const double* v = win_.data() + (j_ - base_);
    if (square) {
      for (std::size_t i = 0; i < take; ++i) out[i] = (v[i] - mean) * (v[i] - mean) - mu;
    } else {
      for (std::size_t i = 0; i < take; ++i) out[i] = v[i] - mu;
    }
    out += take;
    len -= take;
    j_ += take;
  }
}

void SplitSeries::Cursor::next(double* out, std::size_t len) {
  if (s_->unit_) {  // streamed, unit weights
    next_unit(out, len);
    return;
  }
  if (s_->source_ != nullptr) {  // streamed (never kSlot)
    const bool square = s_->kind_ == Kind::kSquare;
    if (s_->weights_source_ != nullptr) {
      if (square) next_impl<Kind::kSquare, true, true>(out, len);
      else next_impl<Kind::kState, true, true>(out, len);
    } else {
      if (square) next_impl<Kind::kSquare, true, false>(out, len);
      else next_impl<Kind::kState, true, false>(out, len);
    }
    return;
  }
  switch (s_->kind_) {
    case Kind::kSlot:
      next_impl<Kind::kSlot, false, false>(out, len);
      break;
    case Kind::kState:
      next_impl<Kind::kState, false, false>(out, len);
      break;
    case Kind::kSquare:
      next_impl<Kind::kSquare, false, false>(out, len);
      break;
  }
}

namespace {
/// Split draws generated per window by direct_lags_series (a multiple of 16: the groups of
/// lag_block's order start at multiples of 16 in every window): two chains' windows, 256 KiB,
/// stay in L2 while their lags are summed (4096 was about 2% slower: more halo copies and
/// loop overhead per window).
constexpr std::size_t kSeriesWindow = 16384;

/// direct_lags_chains(y, m, n, k0, k1, acc) of the split layout y that `s` generates, chains
/// centred by ws.means (m = 2M, n = h), bit for bit, without y: two chains at a time, their
/// draws generated kSeriesWindow at a time into ws.window with the halo of the lags summed;
/// each lag's sum of each chain (ws.lag_sums) is carried from window to window in the order
/// direct_lags_chains sums it (groups of 16 draws up to its last whole group, then draw by
/// draw), then added to acc in chain order.
void direct_lags_series(const SplitSeries& s, std::size_t m, std::size_t n, std::size_t k0, std::size_t k1, double* acc,
                        Workspace& ws, double* sq_sums = nullptr) {
  k1 = std::min(k1, n);
  if (k0 >= k1) return;
  // The lags summed: half blocks of 16 where direct_lags_chains sums them so, else single lags.
  std::size_t kend = k0;
  while (kend < k1) kend += (kend / kLagBlock * kLagBlock + kLagBlock > n) ? 1 : kHalfBlock;
  const std::size_t halo = kend + 2 * kHalfBlock;  // the farthest read past a window's last draw
  const std::size_t span = kSeriesWindow + halo;
  const std::size_t nl = kend - k0;
  ws.window.resize(2 * span);
  ws.lag_sums.resize(2 * nl);
  const std::size_t tmax = n - k0;  // draws t with a lag in range
  for (std::size_t c = 0; c < m; c += 2) {
    const int chains = c + 1 < m ? 2 : 1;
    double* buf[2] = {ws.window.data(), ws.window.data() + span};
    double* sums[2] = {ws.lag_sums.data(), ws.lag_sums.data() + nl};
    std::fill(ws.lag_sums.begin(), ws.lag_sums.end(), 0.0);
    const std::size_t c1 = c + static_cast<std::size_t>(chains) - 1;
    SplitSeries::Cursor cur[2] = {s.cursor(c, ws.means[c]), s.cursor(c1, ws.means[c1])};
    std::size_t gen = 0;  // buf holds the draws [t, gen) of the window starting at t
    for (std::size_t t = 0; t < tmax; t += kSeriesWindow) {
      const std::size_t target = std::min(n, t + span);
      for (int i = 0; i < chains; ++i) {
        if (t > 0) std::copy(buf[i] + kSeriesWindow, buf[i] + (gen - (t - kSeriesWindow)), buf[i]);
        cur[i].next(buf[i] + (gen - t), target - gen);
      }
      gen = target;
      const std::size_t wend = t + kSeriesWindow;
      if (sq_sums != nullptr) {
        // The window's own draws (k0 = 0: the windows cover every draw), in order.
        // Both chains in one loop (independent additions; each chain's in its order).
        const std::size_t len = std::min(kSeriesWindow, n - t);
        if (chains == 2) {
          double va = sq_sums[c], vb = sq_sums[c + 1];
          for (std::size_t u = 0; u < len; ++u) {
            va += buf[0][u] * buf[0][u];
            vb += buf[1][u] * buf[1][u];
          }
          sq_sums[c] = va;
          sq_sums[c + 1] = vb;
        } else {
          double v = sq_sums[c];
          for (std::size_t u = 0; u < len; ++u) v += buf[0][u] * buf[0][u];
          sq_sums[c] = v;
        }
      }
      for (std::size_t k = k0; k < kend;) {
        const std::size_t block = k / kLagBlock * kLagBlock;
        if (block + kLagBlock > n) {
          // A lag summed alone, draw by draw.
          for (int i = 0; i < chains; ++i) {
            const double* z = buf[i];
            double a = sums[i][k - k0];
            for (std::size_t u = t; u < std::min(wend, n - k); ++u) a = std::fma(z[u - t], z[u - t + k], a);
            sums[i][k - k0] = a;
          }
          ++k;
          continue;
        }
        // Lags [k, k + 16): groups of 16 draws below gend, then draw by draw.
        const std::size_t gend = (n - (block + kLagBlock - 1)) / 16 * 16;
        if (gend > t)
          half_groups(buf[0], buf[1], chains, std::min(wend, gend) - t, k, sums[0] + (k - k0), sums[1] + (k - k0));
        for (int i = 0; i < chains; ++i) {
          const double* z = buf[i];
          for (std::size_t j = 0; j < kHalfBlock; ++j) {
            double a = sums[i][k - k0 + j];
            for (std::size_t u = std::max(t, gend); u < std::min(wend, n - k - j); ++u)
              a = std::fma(z[u - t], z[u - t + k + j], a);
            sums[i][k - k0 + j] = a;
          }
        }
        k += kHalfBlock;
      }
    }
    for (int i = 0; i < chains; ++i)
      for (std::size_t k = k0; k < kend; ++k) acc[k] += sums[i][k - k0];
  }
}

/// The chain means of the series (mean_of's four lanes over each split chain) into ws.means;
/// the smallest and largest value into *lo and *hi (+inf and -inf when there is none) when
/// lo is not nullptr. Two split chains at a time (there are 2M), their windows generated
/// together and summed in one loop: each chain's lanes add its values in its order, and the
/// two chains' eight lanes are independent additions (four alone wait on the adder's latency).
void series_means(const SplitSeries& s, Workspace& ws, double* lo = nullptr, double* hi = nullptr) {
  double vlo = std::numeric_limits<double>::infinity(), vhi = -vlo;
  const std::size_t m = s.chains(), n = s.length();
  ws.means.resize(m);
  ws.window.resize(2 * kSeriesWindow);
  double* a = ws.window.data();
  double* b = a + kSeriesWindow;
  for (std::size_t c = 0; c < m; c += 2) {
    const bool two = c + 1 < m;
    SplitSeries::Cursor ca = s.cursor(c, 0.0);
    SplitSeries::Cursor cb = two ? s.cursor(c + 1, 0.0) : SplitSeries::Cursor{};
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    for (std::size_t t = 0; t < n; t += kSeriesWindow) {
      const std::size_t len = std::min(kSeriesWindow, n - t);
      ca.next(a, len);
      if (two) cb.next(b, len);
      else std::fill_n(b, len, 0.0);  // summed into lanes that are not read
      std::size_t i = 0;
      for (; i + 4 <= len; i += 4) {
        a0 += a[i];
        a1 += a[i + 1];
        a2 += a[i + 2];
        a3 += a[i + 3];
        b0 += b[i];
        b1 += b[i + 1];
        b2 += b[i + 2];
        b3 += b[i + 3];
      }
      for (; i < len; ++i) {  // only in the last window (kSeriesWindow % 4 == 0)
        a0 += a[i];
        b0 += b[i];
      }
      if (lo != nullptr) {
        for (i = 0; i < len; ++i) {
          vlo = a[i] < vlo ? a[i] : vlo;
          vhi = a[i] > vhi ? a[i] : vhi;
        }
        if (two)
          for (i = 0; i < len; ++i) {
            vlo = b[i] < vlo ? b[i] : vlo;
            vhi = b[i] > vhi ? b[i] : vhi;
          }
      }
    }
    ws.means[c] = ((a0 + a1) + (a2 + a3)) / static_cast<double>(n);
    if (two) ws.means[c + 1] = ((b0 + b1) + (b2 + b3)) / static_cast<double>(n);
  }
  if (lo != nullptr) {
    *lo = vlo;
    *hi = vhi;
  }
}

/// Each split chain's sum of squares about its mean (ws.means), divided by n - 1; two split
/// chains at a time, each summed in its order (as series_means).
std::vector<double> series_vars(const SplitSeries& s, Workspace& ws) {
  const std::size_t m = s.chains(), n = s.length();
  std::vector<double> vars(m);
  ws.window.resize(2 * kSeriesWindow);
  double* a = ws.window.data();
  double* b = a + kSeriesWindow;
  for (std::size_t c = 0; c < m; c += 2) {
    const bool two = c + 1 < m;
    SplitSeries::Cursor ca = s.cursor(c, ws.means[c]);
    SplitSeries::Cursor cb = two ? s.cursor(c + 1, ws.means[c + 1]) : SplitSeries::Cursor{};
    double va = 0, vb = 0;
    for (std::size_t t = 0; t < n; t += kSeriesWindow) {
      const std::size_t len = std::min(kSeriesWindow, n - t);
      ca.next(a, len);
      if (two) cb.next(b, len);
      else std::fill_n(b, len, 0.0);
      for (std::size_t i = 0; i < len; ++i) {
        va += a[i] * a[i];
        vb += b[i] * b[i];
      }
    }
    vars[c] = va / static_cast<double>(n - 1);
    if (two) vars[c + 1] = vb / static_cast<double>(n - 1);
  }
  return vars;
}

/// Lags summed beyond a request by a pass of ess_series_centred (at least 32, fewer than 64):
/// a pass generates the series once, which costs about as much as 15 lags.
constexpr std::size_t kSeriesAhead = 2 * kLagBlock;

/// Lags summed past a hint by ess_series_centred's first pass: two more pairs of Geyer's
/// sequence than the similar series needed.
constexpr std::size_t kHintSlack = 4;

/// ess_centred's writable path on the series, chains centred by ws.means (n >= 3), bit for
/// bit: Geyer's sequence asks for every lag in turn, so ess_centred sums directly exactly the
/// lags below min(n, cap rounded up to a multiple of 32) (its blocks of 32 lags stop there)
/// and takes every lag from the FFT once one at or beyond it is asked for. Each lag's direct
/// sum is the same however the lags are grouped; here each pass over the series sums
/// kSeriesAhead lags or so past the request (ess_centred sums 16 past it per pass of its
/// stored chains). When `sq_sums` is not nullptr (m entries), the first pass (lags from 0,
/// every draw) also sums each chain's squares of its centred values into it, in order
/// (series_vars' sums).
///
/// `hint` (0: none) is the lag at which a similar series' Geyer sequence stopped (the bulk
/// ESS's for ess_mean: ranks and values decorrelate alike): the first pass sums the lags up
/// to it and a few more, so that one pass serves the whole sequence instead of two or three
/// of kSeriesAhead lags. The lags are the same sums whatever the passes, so the hint changes
/// no bit, only the passes and how many lags past the last one asked for are summed.
/// ws.geyer_lag is set to the largest lag the sequence asked for.
double ess_series_centred(const SplitSeries& s, Workspace& ws, double* sq_sums = nullptr, std::size_t hint = 0) {
  const std::size_t m = s.chains(), n = s.length();
  ws.acov.clear();
  std::size_t done = 0;
  std::size_t pass = 0;  // the last FFT pass's piece length
  const double* acov = nullptr;
  const double inv_mn = 1.0 / (static_cast<double>(m) * static_cast<double>(n));
  const std::size_t direct = std::min(n, (direct_lag_cap(m, n) + kLagBlock - 1) / kLagBlock * kLagBlock);
  ws.geyer_lag = 0;
  return geyer_ess(m, n, ws, [&](std::size_t lag) {
    ws.geyer_lag = std::max(ws.geyer_lag, lag);
    if (lag < done) return acov;
    if (lag < direct) {
      std::size_t upto = std::min(direct, (lag + 1 + kLagBlock - 1) / kLagBlock * kLagBlock + kSeriesAhead / 2);
      // Up to the hint and kHintSlack lags past it, in half blocks (direct_lags_series' k1).
      if (done == 0 && hint > 0)
        upto = std::min(direct, (hint + 1 + kHintSlack + kHalfBlock - 1) / kHalfBlock * kHalfBlock);
      ws.acov.resize(upto, 0.0);  // the new lags [done, upto) start at 0
      direct_lags_series(s, m, n, done, upto, ws.acov.data(), ws, done == 0 ? sq_sums : nullptr);
      for (std::size_t k = done; k < upto; ++k) ws.acov[k] *= inv_mn;
      acov = ws.acov.data();
      done = upto;
    } else {
      SplitSeries::Cursor cur;
      acov = piece_lags(
          m, n, lag, ws,
          [&](std::size_t c, std::size_t t0, std::size_t k, double* r) {
            if (t0 == 0) cur = s.cursor(c, ws.means[c]);
            cur.next(r, k);
          },
          &done, pass);
    }
    return acov;
  });
}
}  // namespace

std::atomic<std::size_t>& stored_split_limit() {
  static std::atomic<std::size_t> limit{std::size_t{1} << 18};
  return limit;
}

void fill_series(const SplitSeries& s, double* out) {
  for (std::size_t c = 0; c < s.chains(); ++c) s.cursor(c, 0.0).next(out + c * s.length(), s.length());
}

namespace {
/// series_means(s, ws, lo, hi), or `known`'s means and extremes when it is not nullptr.
void series_means_or(const SplitSeries& s, Workspace& ws, double* lo, double* hi, const SeriesMeans* known) {
  if (known == nullptr) {
    series_means(s, ws, lo, hi);
    return;
  }
  ws.means.assign(known->means.begin(), known->means.end());
  if (lo != nullptr) {
    *lo = known->lo;
    *hi = known->hi;
  }
}
}  // namespace

double ess_series(const SplitSeries& s, Workspace& ws, bool check, std::size_t hint, const SeriesMeans* known) {
  const std::size_t m = s.chains(), n = s.length();
  if (n < 3 || m == 0) return kNaN;
  double lo = 0, hi = 0;
  series_means_or(s, ws, check ? &lo : nullptr, &hi, known);
  // Constant, as summarize checks ess_sd's squares (which overflow only for |x| > 1e154).
  if (check && !(std::isfinite(hi) && !(std::fabs(hi - lo) < std::numeric_limits<double>::epsilon()))) return kNaN;
  return ess_series_centred(s, ws, nullptr, hint);
}

void rhat_ess_series(const SplitSeries& s, Workspace& ws, double* rhat, double* ess, bool check, std::size_t hint,
                     const SeriesMeans* known) {
  const std::size_t m = s.chains(), n = s.length();
  double lo = 0, hi = 0;
  series_means_or(s, ws, check ? &lo : nullptr, &hi, known);
  // detail::is_constant of the values (true when there are none).
  if (check && (m * n == 0 || std::fabs(hi - lo) < std::numeric_limits<double>::epsilon())) {
    *rhat = *ess = kNaN;
    return;
  }
  if (n < 3 || m == 0) {
    *rhat = m < 2 || n < 2 ? kNaN : rhat_from(ws.means, series_vars(s, ws), m, n);
    *ess = kNaN;
    return;
  }
  // The sums of squares from the ESS's first pass (it sums lags from 0 over every draw).
  std::vector<double> vars(m, 0.0);
  *ess = ess_series_centred(s, ws, vars.data(), hint);
  for (double& v : vars) v /= static_cast<double>(n - 1);
  *rhat = m < 2 ? kNaN : rhat_from(ws.means, vars, m, n);
}

double rhat_series(const SplitSeries& s, Workspace& ws) {
  const std::size_t m = s.chains(), n = s.length();
  if (m < 2 || n < 2) return kNaN;
  series_means(s, ws);
  return rhat_from(ws.means, series_vars(s, ws), m, n);
}

const double* verbose_values(const DrawsView& v, Workspace& ws) {
  if (!v.weighted()) return v.values().data();
  const std::size_t m = v.chains(), d = v.draws(), n = v.verbose_draws();
  ws.expanded.resize(m * n);
  const double* x = v.values().data();
  const std::uint32_t* w = v.weights().data();
  double* out = ws.expanded.data();
  for (std::size_t i = 0; i < m * d; ++i) out = std::fill_n(out, w[i], x[i]);
  return ws.expanded.data();
}

void split_chains(const double* x, std::size_t m, std::size_t n, double* out) {
  const std::size_t h = n / 2;
  for (std::size_t c = 0; c < m; ++c) {
    std::copy(x + c * n, x + c * n + h, out + 2 * c * h);
    std::copy(x + c * n + (n - h), x + c * n + n, out + (2 * c + 1) * h);
  }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
DrawsView::DrawsView(std::span<const double> values, std::size_t chains, std::size_t draws)
    : values_(values), chains_(chains), draws_(draws), verbose_draws_(draws) {
  HERD_REQUIRE(chains > 0 && draws > 0, "DrawsView: chains is {} and draws is {}, but both must be positive", chains,
               draws);
  HERD_REQUIRE(values.size() == chains * draws, "DrawsView: values has {} elements, but chains * draws is {}",
               values.size(), chains * draws);
  HERD_REQUIRE(chains * draws <= std::numeric_limits<std::uint32_t>::max(),
               "DrawsView: {} draws in all, but at most 2^32 - 1 are supported", chains * draws);
}

DrawsView::DrawsView(std::span<const double> values, std::span<const std::int64_t> weights, std::size_t chains,
                     std::size_t draws)
    : DrawsView(values, chains, draws) {
  HERD_REQUIRE(weights.size() == values.size(), "DrawsView: weights has {} elements, but values has {}", weights.size(),
               values.size());
  // Every weight of an accepted view is at most its draws in all (< 2^32): one above that is
  // refused here, before the copy narrows it (set_weights refuses the sums).
  for (std::size_t c = 0; c < chains; ++c) {
    for (std::size_t t = 0; t < draws; ++t) {
      const std::int64_t w = weights[c * draws + t];
      HERD_REQUIRE(w >= 0, "DrawsView: weights[{}][{}] is {}, but must be >= 0", c, t, w);
      HERD_REQUIRE(w <= std::int64_t{std::numeric_limits<std::uint32_t>::max()},
                   "DrawsView: weights[{}][{}] is {}, but at most 2^32 - 1 verbose draws in all are supported", c, t,
                   w);
    }
  }
  auto owned = std::make_shared<std::vector<std::uint32_t>>(weights.size());
  std::transform(weights.begin(), weights.end(), owned->begin(),
                 [](std::int64_t w) { return static_cast<std::uint32_t>(w); });
  set_weights(*owned);
  owned_weights_ = std::move(owned);
}

DrawsView::DrawsView(std::span<const double> values, std::span<const std::uint32_t> weights, std::size_t chains,
                     std::size_t draws)
    : DrawsView(values, chains, draws) {
  HERD_REQUIRE(weights.size() == values.size(), "DrawsView: weights has {} elements, but values has {}", weights.size(),
               values.size());
  set_weights(weights);
}

DrawsView::DrawsView(DrawsReader values, std::size_t chains, std::size_t draws)
    : chains_(chains), draws_(draws), verbose_draws_(draws) {
  HERD_REQUIRE(chains > 0 && draws > 0, "DrawsView: chains is {} and draws is {}, but both must be positive", chains,
               draws);
  HERD_REQUIRE(chains * draws <= std::numeric_limits<std::uint32_t>::max(),
               "DrawsView: {} draws in all, but at most 2^32 - 1 are supported", chains * draws);
  HERD_REQUIRE(static_cast<bool>(values), "DrawsView: a streamed view needs a reader of its values");
  reader_ = std::make_shared<const DrawsReader>(std::move(values));
}

DrawsView::DrawsView(DrawsReader values, std::span<const std::uint32_t> weights, std::size_t chains, std::size_t draws)
    : DrawsView(std::move(values), chains, draws) {
  HERD_REQUIRE(weights.size() == chains * draws, "DrawsView: weights has {} elements, but chains * draws is {}",
               weights.size(), chains * draws);
  set_weights(weights);
}

DrawsView::DrawsView(DrawsReader values, WeightsReader weights, std::size_t chains, std::size_t draws)
    : DrawsView(std::move(values), chains, draws) {
  HERD_REQUIRE(static_cast<bool>(weights), "DrawsView: a streamed view of read weights needs a reader of its weights");
  weights_reader_ = std::make_shared<const WeightsReader>(std::move(weights));
  check_read_weights();
}

void DrawsView::check_read_weights() {
  std::vector<std::uint64_t> sums(chains_, 0);  // at most 2^32 draws of 2^32 - 1: no wrap
  const std::size_t total = chains_ * draws_;
  std::vector<std::uint32_t> buf(std::min(total, kStateBlock));
  for (std::size_t j0 = 0; j0 < total; j0 += kStateBlock) {
    const std::size_t n = std::min(kStateBlock, total - j0);
    (*weights_reader_)(j0, std::span<std::uint32_t>(buf.data(), n));
    for (std::size_t i = 0; i < n; ++i) sums[(j0 + i) / draws_] += buf[i];
  }
  set_verbose_draws(sums);
}

void DrawsView::set_weights(std::span<const std::uint32_t> weights) {
  std::vector<std::uint64_t> sums(chains_, 0);  // at most 2^32 draws of 2^32 - 1: no wrap
  for (std::size_t c = 0; c < chains_; ++c)
    for (std::size_t t = 0; t < draws_; ++t) sums[c] += weights[c * draws_ + t];
  set_verbose_draws(sums);
  weights_ = weights;
}

void DrawsView::set_verbose_draws(std::span<const std::uint64_t> sums) {
  std::uint64_t first = 0;
  for (std::size_t c = 0; c < chains_; ++c) {
    const std::uint64_t total = sums[c];
    HERD_REQUIRE(total > 0, "DrawsView: the weights of chain {} sum to 0, but must be positive", c);
    if (c == 0) first = total;
    HERD_REQUIRE(total == first,
                 "DrawsView: the weights of chain {} sum to {}, but chain 0's sum to {}; all "
                 "chains must have the same verbose length",
                 c, total, first);
  }
  HERD_REQUIRE(first * chains_ <= std::numeric_limits<std::uint32_t>::max(),
               "DrawsView: {} verbose draws in all, but at most 2^32 - 1 are supported", first * chains_);
  verbose_draws_ = static_cast<std::size_t>(first);
}

namespace {
/// summarize(v); `values_scratch` (nullptr, or v's values, writable: v.values().size()
/// doubles) may be overwritten once the values are read no more.
DiagnosticSummary summarize_with(const DrawsView& v, double* values_scratch) {
  detail::Workspace& ws = detail::workspace();
  // A weighted view is never expanded (8 bytes per draw less scratch): its moments, split
  // draws and indicators come from the compact values, the same numbers in the same order.
  const Prepared p = prepare_lean(v, ws);
  DiagnosticSummary r;
  if (!p.finite) {
    return DiagnosticSummary{kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN,
                             kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN};
  }
  const double sd_s = static_cast<double>(p.s);
  double m2 = 0, m4 = 0;
  // A weighted view past stored_split_limit generates its split series per window: the
  // series means of ess_mean's values and ess_sd's squares come from moments' passes.
  const std::size_t s2 = 2 * p.m * p.h;
  const bool stored = !p.compact() || s2 <= detail::stored_split_limit().load(std::memory_order_relaxed);
  detail::SeriesMeans value_means, square_means;
  moments(p, r.mean, m2, m4, stored ? nullptr : &value_means, stored ? nullptr : &square_means);
  r.sd = p.s > 1 ? std::sqrt(m2 / (sd_s - 1.0)) : kNaN;
  // posterior's is_constant from the extremes of the draws (the sorted draws' first and last).
  if (is_constant_draws(p)) {
    // The quantiles of the sorted draws, every other field NaN.
    const detail::RankLease lease(ws);
    const auto quantiles = [&](auto xs) {
      r.q5 = quantile7(xs, p.s, 0.05);
      r.q50 = quantile7(xs, p.s, 0.5);
      r.q95 = quantile7(xs, p.s, 0.95);
    };
    if (ranks_out_of_core(p)) {
      SpilledRanks spilled(p, spill_run(rank_budget_share(ws)));
      quantiles(SpillOrder{&spilled});
    } else {
      sort_draws(p, ws);
      quantiles(OrderStats(p, ws));
    }
    r.mcse_mean = r.mcse_sd = r.mcse_q5 = r.mcse_q95 = kNaN;
    r.ess_bulk = r.ess_tail = r.ess_mean = r.ess_sd = kNaN;
    r.rhat = r.rhat_bulk = r.rhat_tail = r.rhat_basic = kNaN;
    return r;
  }
  // A weighted view's split layout, generated window by window from its compact states
  // (detail::SplitSeries) for every quantity below that reads the split draws.
  std::optional<detail::SplitSeries> layout;
  if (p.compact()) layout.emplace(v, detail::SplitSeries::Kind::kState);
  std::size_t mean_lag = 0;  // where ess_mean's Geyer sequence stopped (0: not computed)
  if (!stored) {
    // The basic R-hat, ess_mean and ess_sd of the split layout generated window by window
    // from the compact states (detail::SplitSeries): no buffer per draw. ess_mean's stopping
    // lag hints the others' first pass of lags (the same bits whatever the hint): the bulk
    // ESS's Geyer sequence stops where ess_mean's did, nearly always (the ranks of the values
    // decorrelate as the values do); ess_sd's squares decorrelate faster (rho^2 for a
    // Gaussian chain), and stopped at 0.4 to 1.5 times the bulk's lag on a 10-D DRAM run, so
    // 0.6 times it (the fewest lags and passes summed over its 10 variables).
    // With an even draw count the split draws are all draws: finite and not constant (checked
    // above); an odd count drops the middle draws, which may leave constant split draws.
    ws.geyer_lag = 0;
    detail::rhat_ess_series(*layout, ws, &r.rhat_basic, &r.ess_mean, p.n % 2 == 1, 0, &value_means);
    mean_lag = ws.geyer_lag;
    r.ess_sd = detail::ess_series(layout->with(detail::SplitSeries::Kind::kSquare, nullptr, r.mean), ws, true,
                                  mean_lag * 3 / 5, &square_means);
  } else {
    ws.split.resize(s2);
    // (x - mean)^2 of the split draws for ess_sd; then the split draws for the basic R-hat and
    // ess_mean (which centres them in place). One split buffer instead of two: 8 bytes per
    // draw less scratch for one more fill.
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    if (p.compact()) {
      detail::fill_series(layout->with(detail::SplitSeries::Kind::kSquare, nullptr, r.mean), ws.split.data());
      for (const double z : ws.split) {
        lo = z < lo ? z : lo;
        hi = z > hi ? z : hi;
      }
    } else {
      fill_split_squares(p, r.mean, ws.split.data(), lo, hi);
    }
    // (x - mean)^2 is constant when x takes two values symmetric about the mean; it overflows
    // only for |x| > 1e154.
    const bool sq_ok = std::isfinite(hi) && !(std::fabs(hi - lo) < std::numeric_limits<double>::epsilon());
    r.ess_sd = sq_ok ? detail::ess_chains_overwrite(ws.split.data(), 2 * p.m, p.h, ws, true) : kNaN;
    if (p.compact()) detail::fill_series(*layout, ws.split.data());
    else fill_split(p, ws.split.data());
    // With an even draw count the split draws are all draws: finite and not constant (checked
    // above); an odd count drops the middle draws, which may leave constant split draws.
    const bool split_ok = p.n % 2 == 0 || !detail::is_constant(ws.split.data(), s2);
    if (split_ok) detail::rhat_ess_overwrite(ws.split.data(), 2 * p.m, p.h, ws, &r.rhat_basic, &r.ess_mean);
    else r.rhat_basic = r.ess_mean = kNaN;
  }
  r.mcse_mean = r.sd / std::sqrt(r.ess_mean);
  const double evar = m2 / sd_s;
  const double varvar = (m4 / sd_s - evar * evar) / r.ess_sd;
  r.mcse_sd = std::sqrt(varvar / evar / 4.0);
  // The rank part: the sort records (of a weighted view: of its compact states, each standing
  // for its weight in draws) are held from the sort to the last z-scaling, under summarize_all
  // in the rank buffers that its threads share (one thread at a time: the lease); the value
  // passes above need none of them.
  // Past diagnostics_rank_budget() a weighted view's records are sorted out of core
  // (SpilledRanks: runs spilled to a scratch file and merged into another, read back block
  // by block): the same ranks, so the same numbers.
  detail::RankLease lease(ws);
  const auto order_part = [&](auto xs) {
    r.q5 = quantile7(xs, p.s, 0.05);
    r.q50 = quantile7(xs, p.s, 0.5);
    r.q95 = quantile7(xs, p.s, 0.95);
    const double e05 = ess_indicator(p, r.q5, ws);
    const double e95 = ess_indicator(p, r.q95, ws);
    r.ess_tail = nan_min(e05, e95);
    r.mcse_q5 = mcse_quantile7(xs, p.s, 0.05, e05);
    r.mcse_q95 = mcse_quantile7(xs, p.s, 0.95, e95);
  };
  // The ranks last: the values are read no more, so their buffer, when the caller lends it,
  // takes the z-scores per slot (no buffer of 8 bytes per state of the workspace's own). The
  // lease ends after the last z-scaling, before the bulk ESS.
  const detail::SplitSeries* split_layout = layout ? &*layout : nullptr;
  if (ranks_out_of_core(p)) {
    // A streamed view's records carry their states, whose z-scores go out of core (ZSpill).
    const std::size_t budget = rank_budget_share(ws);
    SpilledRanks spilled(p, spill_run(budget), v.streamed());
    order_part(SpillOrder{&spilled});
    std::optional<ZSpill> zspill;
    if (v.streamed()) zspill.emplace(p.m * v.draws(), budget);
    rank_diagnostics(p, r.q50, RecCounts(), spilled.at(), spilled.size(), spilled.slots(), ws, &r.rhat_bulk,
                     &r.rhat_tail, &r.ess_bulk, split_layout, values_scratch, mean_lag, &lease,
                     zspill ? &*zspill : nullptr);
  } else {
    sort_draws(p, ws);
    order_part(OrderStats(p, ws));
    rank_diagnostics(p, r.q50, ws, &r.rhat_bulk, &r.rhat_tail, &r.ess_bulk, split_layout,
                     p.compact() ? values_scratch : nullptr, mean_lag, &lease);
  }
  r.rhat = nan_max(r.rhat_bulk, r.rhat_tail);
  return r;
}

}  // namespace

DiagnosticSummary summarize(const DrawsView& v) { return summarize_with(v, nullptr); }

namespace {

/// summarize_all over the buffers `buffers` (one per thread, grown to the threads used):
/// `keep` passes each thread's buffer to `draws` as its previous quantity left it (size and
/// contents), else emptied (its capacity kept).
std::vector<DiagnosticSummary> summarize_all_in(
    std::size_t count, const std::function<DrawsView(std::size_t, std::vector<double>&)>& draws, std::size_t threads,
    std::vector<std::vector<double>>& buffers, bool keep) {
  std::vector<DiagnosticSummary> out(count);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, count);
  if (count == 0) return out;
  if (buffers.size() < threads) buffers.resize(threads);
  // Each buffer's block as last advised: a block kept from one quantity to the next is
  // advised (and collapsed into huge pages) once, not once per quantity.
  std::vector<std::pair<const double*, std::size_t>> advised(threads, {nullptr, 0});
  // A weighted view's values in the buffer given to `draws` are its own: summarize overwrites
  // them with the z-scores per slot once it has read them.
  const auto summarize_in = [&](std::size_t slot, const DrawsView& v) {
    std::vector<double>& buffer = buffers[slot];
    const bool lent =
        v.weighted() && !v.values().empty() && v.values().data() == buffer.data() && v.values().size() <= buffer.size();
    // The z-scores are scattered over it: on huge pages, as the workspace's own buffer was.
    if (lent) {
      const std::pair<const double*, std::size_t> block{buffer.data(), v.values().size()};
      if (advised[slot] != block) detail::advise_huge(buffer.data(), v.values().size() * sizeof(double));
      advised[slot] = block;
    }
    return summarize_with(v, lent ? buffer.data() : nullptr);
  };
  const auto claim = [&](std::size_t slot) -> std::vector<double>& {
    if (!keep) buffers[slot].clear();
    return buffers[slot];
  };
  // A thread's buffer is kept from one of its quantities to the next: its pages are faulted
  // in (and collapsed into huge pages) once per thread, not once per quantity.
  if (threads <= 1) {
    for (std::size_t q = 0; q < count; ++q) out[q] = summarize_in(0, draws(q, claim(0)));
    return out;
  }
  std::mutex slots_mu;
  std::vector<std::thread::id> owners;  // owners[slot]: the thread of buffers[slot]
  const auto thread_slot = [&]() -> std::size_t {
    const std::lock_guard<std::mutex> lock(slots_mu);
    const std::thread::id id = std::this_thread::get_id();
    const auto it = std::find(owners.begin(), owners.end(), id);
    if (it != owners.end()) return static_cast<std::size_t>(it - owners.begin());
    owners.push_back(id);
    return owners.size() - 1;
  };
  // Quantities are claimed one at a time, so a slow one does not hold up a fixed share. The
  // threads share one table of normal quantiles (1.25 bytes per draw, not one per thread) and
  // one set of rank buffers (sort records and counts, 13 bytes per compact state of a weighted
  // view), which one thread at a time holds for its rank part (detail::RankLease) while the
  // others are on their values' passes.
  detail::SharedZTable shared_z;
  detail::SharedRanks shared_ranks;
  ThreadPool pool(threads - 1);
  pool.parallel_for_each(
      0, count,
      [&](std::size_t q) {
        const std::size_t slot = thread_slot();
        detail::Workspace& ws = detail::workspace();
        ws.shared_z = &shared_z;
        ws.shared_ranks = &shared_ranks;
        ws.rank_threads = threads;
        try {
          out[q] = summarize_in(slot, draws(q, claim(slot)));
        } catch (...) {
          ws.shared_z = nullptr;
          ws.shared_ranks = nullptr;
          ws.rank_threads = 1;
          throw;
        }
        ws.shared_z = nullptr;
        ws.shared_ranks = nullptr;
        ws.rank_threads = 1;
      },
      1);
  return out;
}

}  // namespace

std::vector<DiagnosticSummary> summarize_all(std::size_t count,
                                             const std::function<DrawsView(std::size_t, std::vector<double>&)>& draws,
                                             std::size_t threads) {
  std::vector<std::vector<double>> buffers;  // freed on return
  return summarize_all_in(count, draws, threads, buffers, false);
}

std::vector<DiagnosticSummary> summarize_all(std::size_t count,
                                             const std::function<DrawsView(std::size_t, std::vector<double>&)>& draws,
                                             std::size_t threads, std::vector<std::vector<double>>& buffers) {
  return summarize_all_in(count, draws, threads, buffers, true);
}

void release_diagnostics_workspace() { detail::workspace() = detail::Workspace(); }

namespace {
std::atomic<std::size_t>& rank_budget() {
  static std::atomic<std::size_t> budget{[] {
    const char* env = std::getenv("HERD_DIAGNOSTICS_RANK_BUDGET");
    if (env == nullptr || *env == '\0') return kDiagnosticsRankBudget;
    char* end = nullptr;
    errno = 0;
    const unsigned long long b = std::strtoull(env, &end, 10);
    // strtoull takes "-5" as a huge number and saturates past its range: both refused.
    HERD_REQUIRE(end != env && *end == '\0' && env[0] >= '0' && env[0] <= '9' && errno != ERANGE,
                 "HERD_DIAGNOSTICS_RANK_BUDGET is \"{}\", but must be a number of bytes (digits only)", env);
    return static_cast<std::size_t>(b);
  }()};
  return budget;
}
std::mutex& scratch_dir_mutex() {
  static std::mutex mu;
  return mu;
}
std::string& scratch_dir_value() {
  static std::string dir;
  return dir;
}
}  // namespace

std::size_t diagnostics_rank_budget() { return rank_budget().load(std::memory_order_relaxed); }

void set_diagnostics_rank_budget(std::size_t bytes) { rank_budget().store(bytes, std::memory_order_relaxed); }

bool diagnostics_out_of_core(std::size_t chains, std::size_t draws) {
  return 13 * (chains * draws + chains) > diagnostics_rank_budget();
}

void set_diagnostics_scratch_dir(std::string dir) {
  const std::lock_guard<std::mutex> lock(scratch_dir_mutex());
  scratch_dir_value() = std::move(dir);
}

std::string diagnostics_scratch_dir() {
  const std::lock_guard<std::mutex> lock(scratch_dir_mutex());
  return scratch_dir_value();
}

std::size_t diagnostics_workspace_bytes() { return detail::workspace().bytes(); }

double rhat(const DrawsView& v) { return summarize(v).rhat; }

double rhat_bulk(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || detail::is_constant(p.x, p.s)) return kNaN;
  sort_draws(p, ws);
  double rb = kNaN;
  rank_diagnostics(p, 0.0, ws, &rb, nullptr, nullptr);
  return rb;
}

double rhat_tail(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || detail::is_constant(p.x, p.s)) return kNaN;
  sort_draws(p, ws);
  double rt = kNaN;
  rank_diagnostics(p, quantile7(OrderStats(p, ws), p.s, 0.5), ws, nullptr, &rt, nullptr);
  return rt;
}

double rhat_basic(const DrawsView& v, bool split) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!split) return detail::rhat_chains(p.x, p.m, p.n);
  ws.split.resize(2 * p.m * p.h);
  detail::split_chains(p.x, p.m, p.n, ws.split.data());
  return detail::rhat_chains(ws.split.data(), 2 * p.m, p.h);
}

double ess_bulk(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || detail::is_constant(p.x, p.s)) return kNaN;
  sort_draws(p, ws);
  double eb = kNaN;
  rank_diagnostics(p, 0.0, ws, nullptr, nullptr, &eb);
  return eb;
}

double ess_quantile(const DrawsView& v, double prob) {
  check_prob("ess_quantile", prob);
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || detail::is_constant(p.x, p.s)) return kNaN;
  sort_all(p, ws);
  return ess_indicator(p, quantile7(FromSorted{ws.sorted.data()}, p.s, prob), ws);
}

double ess_tail(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || detail::is_constant(p.x, p.s)) return kNaN;
  sort_all(p, ws);
  const double q05 = quantile7(FromSorted{ws.sorted.data()}, p.s, 0.05);
  const double q95 = quantile7(FromSorted{ws.sorted.data()}, p.s, 0.95);
  return nan_min(ess_indicator(p, q05, ws), ess_indicator(p, q95, ws));
}

double ess_mean(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  ws.split.resize(2 * p.m * p.h);
  detail::split_chains(p.x, p.m, p.n, ws.split.data());
  return detail::ess_chains_overwrite(ws.split.data(), 2 * p.m, p.h, ws);
}

double ess_sd(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite) return kNaN;
  const double mu = mean_of(p.x, p.s);
  ws.split.resize(2 * p.m * p.h);
  detail::split_chains(p.x, p.m, p.n, ws.split.data());
  for (double& z : ws.split) z = (z - mu) * (z - mu);
  return detail::ess_chains_overwrite(ws.split.data(), 2 * p.m, p.h, ws);
}

double mcse_mean(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite || p.s < 2) return kNaN;
  const double mu = mean_of(p.x, p.s);
  double m2 = 0;
  for (std::size_t i = 0; i < p.s; ++i) m2 += (p.x[i] - mu) * (p.x[i] - mu);
  const double sd = std::sqrt(m2 / static_cast<double>(p.s - 1));
  return sd / std::sqrt(ess_mean(v));
}

double mcse_sd(const DrawsView& v) {
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite) return kNaN;
  const double mu = mean_of(p.x, p.s);
  double m2 = 0, m4 = 0;
  for (std::size_t i = 0; i < p.s; ++i) {
    const double d2 = (p.x[i] - mu) * (p.x[i] - mu);
    m2 += d2;
    m4 += d2 * d2;
  }
  const double sd_s = static_cast<double>(p.s);
  const double evar = m2 / sd_s;
  const double varvar = (m4 / sd_s - evar * evar) / ess_sd(v);
  return std::sqrt(varvar / evar / 4.0);
}

double mcse_quantile(const DrawsView& v, double prob) {
  check_prob("mcse_quantile", prob);
  const double ess = ess_quantile(v, prob);
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite) return kNaN;
  sort_all(p, ws);
  return mcse_quantile7(FromSorted{ws.sorted.data()}, p.s, prob, ess);
}

double quantile(const DrawsView& v, double prob) {
  check_prob("quantile", prob);
  detail::Workspace& ws = detail::workspace();
  const Prepared p = prepare(v, ws);
  if (!p.finite) return kNaN;
  sort_all(p, ws);
  return quantile7(FromSorted{ws.sorted.data()}, p.s, prob);
}

namespace detail {
std::vector<std::size_t> type7_ranks(std::size_t n, std::span<const double> probs) {
  std::vector<std::size_t> ranks;
  for (double pr : probs) {
    const double index = 1.0 + static_cast<double>(n - 1) * pr;
    ranks.push_back(static_cast<std::size_t>(std::floor(index)) - 1);
    ranks.push_back(static_cast<std::size_t>(std::ceil(index)) - 1);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}
}  // namespace detail

std::vector<double> quantiles(std::span<const double> sample, std::span<const double> probs) {
  HERD_REQUIRE(!sample.empty(), "quantiles: the sample is empty");
  for (double pr : probs) check_prob("quantiles", pr);
  std::vector<double> out(probs.size(), kNaN);
  if (!detail::all_finite(sample.data(), sample.size())) {
    bool has_nan = false;
    for (double x : sample) has_nan |= std::isnan(x);
    if (has_nan) return out;
  }
  // Only the order statistics that type 7 interpolates between are needed: select them
  // (ascending, each selection on what is right of the previous one), O(n log k) for k
  // distinct ranks instead of a full sort; the values are exactly those of the sorted sample.
  std::vector<double> xs(sample.begin(), sample.end());
  const std::size_t n = xs.size();
  const std::vector<std::size_t> ranks = detail::type7_ranks(n, probs);
  std::size_t done = 0;  // xs[0, done) hold the smallest values, xs[r] for every selected r < done is final
  for (std::size_t r : ranks) {
    std::nth_element(xs.begin() + static_cast<std::ptrdiff_t>(done), xs.begin() + static_cast<std::ptrdiff_t>(r),
                     xs.end());
    done = r + 1;
  }
  for (std::size_t i = 0; i < probs.size(); ++i) out[i] = quantile7(FromSorted{xs.data()}, n, probs[i]);
  return out;
}

namespace {
/// Each chain's mean (mean_of of its verbose draws) and sum of squared deviations from it (in
/// draw order) of a streamed view, in two passes over its states, block by block: each lane
/// of mean_of and the squares' sum take the same draws in the same order as over the
/// expansion, so the same bits. Sets `finite` as prepare_lean does (no sums then).
void streamed_chain_moments(const DrawsView& v, std::vector<double>& mean, std::vector<double>& sq, bool& finite) {
  const std::size_t m = v.chains(), d = v.draws(), n = v.verbose_draws();
  const std::size_t n4 = n / 4 * 4;  // mean_of's lanes take draws [0, n4); the rest go to lane 0
  finite = true;
  for_each_state_block(v, [&](std::size_t /*j0*/, const double* x, const std::uint32_t* w, std::size_t count) {
    bool f = finite;
    for (std::size_t j = 0; j < count; ++j) f &= w[j] == 0 || std::isfinite(x[j]);
    finite = f;
  });
  if (!finite) return;
  std::vector<std::array<double, 4>> lanes(m, {0.0, 0.0, 0.0, 0.0});
  std::size_t t = 0;  // the state's first draw within its chain
  for_each_state_block(v, [&](std::size_t j0, const double* x, const std::uint32_t* w, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      if ((j0 + i) % d == 0) t = 0;
      std::array<double, 4>& l = lanes[(j0 + i) / d];
      for (std::size_t e = t + w[i]; t < e; ++t) l[t < n4 ? t % 4 : 0] += x[i];
    }
  });
  mean.resize(m);
  for (std::size_t c = 0; c < m; ++c)
    mean[c] = ((lanes[c][0] + lanes[c][1]) + (lanes[c][2] + lanes[c][3])) / static_cast<double>(n);
  sq.assign(m, 0.0);
  for_each_state_block(v, [&](std::size_t j0, const double* x, const std::uint32_t* w, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t c = (j0 + i) / d;
      double s2 = sq[c];
      for (std::uint32_t u = 0; u < w[i]; ++u) s2 += (x[i] - mean[c]) * (x[i] - mean[c]);
      sq[c] = s2;
    }
  });
}
}  // namespace

double nested_rhat(const DrawsView& v, std::size_t num_superchains) {
  const std::size_t k = num_superchains;
  HERD_REQUIRE(k >= 2, "nested_rhat: num_superchains is {}, but must be >= 2", k);
  HERD_REQUIRE(v.chains() % k == 0, "nested_rhat: num_superchains is {}, but must divide the {} chains", k, v.chains());
  // Chain c's draws: of the view's values (a weighted view's expanded), or of a streamed
  // unweighted view read a group of whole chains at a time (in chain order), about
  // kStateBlock draws: the same numbers. A streamed weighted view: its chains' moments from
  // its states read in blocks (never expanded).
  const double* x = nullptr;
  std::size_t m = 0, n = 0;
  bool finite = true;
  std::vector<double> group;
  std::size_t g0 = 0, gn = 0;  // the chains in `group`: [g0, g0 + gn)
  std::vector<double> chain_mean, chain_sq;
  const bool weighted_stream = v.streamed() && v.weighted();
  if (weighted_stream) {
    streamed_chain_moments(v, chain_mean, chain_sq, finite);
    if (!finite) return kNaN;
    m = v.chains() / k;
    n = v.verbose_draws();
  } else if (v.streamed()) {
    m = v.chains() / k;
    n = v.draws();
  } else {
    detail::Workspace& ws = detail::workspace();
    const Prepared p = prepare(v, ws);
    if (!p.finite) return kNaN;
    x = p.x;
    m = p.m / k;
    n = p.n;
  }
  const auto chain = [&](std::size_t c) -> const double* {
    if (x != nullptr) return x + c * n;
    if (c >= g0 + gn) {
      g0 = c;
      gn = std::min(std::max<std::size_t>(1, kStateBlock / n), v.chains() - c);
      group.resize(gn * n);
      (*v.reader())(g0 * n, std::span<double>(group.data(), gn * n));
      finite = finite && detail::all_finite(group.data(), gn * n);
    }
    return group.data() + (c - g0) * n;
  };
  std::vector<double> super_means(k);
  double w_total = 0;
  for (std::size_t sk = 0; sk < k; ++sk) {
    std::vector<double> cm(m);
    double within = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (weighted_stream) {
        cm[j] = chain_mean[sk * m + j];
        if (n > 1) within += chain_sq[sk * m + j] / static_cast<double>(n - 1);
        continue;
      }
      const double* z = chain(sk * m + j);
      const double mu = mean_of(z, n);
      cm[j] = mu;
      if (n > 1) {
        double s2 = 0;
        for (std::size_t t = 0; t < n; ++t) s2 += (z[t] - mu) * (z[t] - mu);
        within += s2 / static_cast<double>(n - 1);
      }
    }
    within /= static_cast<double>(m);
    const double smu = mean_of(cm.data(), m);
    double between = 0;
    if (m > 1) {
      for (double mu : cm) between += (mu - smu) * (mu - smu);
      between /= static_cast<double>(m - 1);
    }
    super_means[sk] = smu;
    w_total += between + within;
  }
  const double w = w_total / static_cast<double>(k);
  const double grand = mean_of(super_means.data(), k);
  double b = 0;
  for (double mu : super_means) b += (mu - grand) * (mu - grand);
  b /= static_cast<double>(k - 1);
  if (!finite || !(w > 0)) return kNaN;
  return std::sqrt(1.0 + b / w);
}

}  // namespace herd::mcmc
