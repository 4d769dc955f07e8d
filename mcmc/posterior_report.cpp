// The HTML report of MCMC draws (see posterior_report.hpp).
#include "herd/mcmc/posterior_report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <future>
#include <limits>
#include <numbers>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "diagnostics_detail.hpp"
#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/html_report.hpp"
#include "order_statistics.hpp"
#include "posterior_report_detail.hpp"

namespace herd::mcmc {

detail::SampleRange detail::sample_range(std::span<const double> sample) {
  // Four independent lanes (no loop-carried dependency between neighbours); v < lo ? v : lo
  // keeps lo when v is NaN, which `nan` records.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::array<double, 4> lo{kInf, kInf, kInf, kInf}, hi{-kInf, -kInf, -kInf, -kInf};
  std::array<bool, 4> nan{};
  const std::size_t n = sample.size();
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (std::size_t k = 0; k < 4; ++k) {
      const double v = sample[i + k];
      lo[k] = v < lo[k] ? v : lo[k];
      hi[k] = v > hi[k] ? v : hi[k];
      nan[k] = nan[k] || std::isnan(v);
    }
  for (; i < n; ++i) {
    const double v = sample[i];
    lo[0] = v < lo[0] ? v : lo[0];
    hi[0] = v > hi[0] ? v : hi[0];
    nan[0] = nan[0] || std::isnan(v);
  }
  SampleRange r;
  r.min = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
  r.max = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
  r.finite = !(nan[0] || nan[1] || nan[2] || nan[3]) && std::isfinite(r.min) && std::isfinite(r.max);
  return r;
}

namespace {

/// Type-7 quantiles at `probs` of `n` draws as herd::mcmc::quantiles interpolates them, from
/// the order statistics `value[i]` of the 0-based ranks `ranks[i]` (type7_ranks).
std::vector<double> type7_interpolate(std::size_t n, std::span<const double> probs,
                                      const std::vector<std::size_t>& ranks, const std::vector<double>& value) {
  const auto xs = [&](std::size_t r) {
    return value[static_cast<std::size_t>(std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin())];
  };
  std::vector<double> out(probs.size());
  for (std::size_t i = 0; i < probs.size(); ++i) {
    const double index = 1.0 + static_cast<double>(n - 1) * probs[i];
    const double lo = std::floor(index);
    const double hi = std::ceil(index);
    double q = xs(static_cast<std::size_t>(lo) - 1);
    if (index > lo && xs(static_cast<std::size_t>(hi) - 1) != q) {
      const double h = index - lo;
      q = (1.0 - h) * q + h * xs(static_cast<std::size_t>(hi) - 1);
    }
    out[i] = q;
  }
  return out;
}

}  // namespace

std::vector<double> detail::binned_quantiles(std::span<const double> sample, std::span<const double> probs) {
  return binned_quantiles(sample, probs, sample_range(sample));
}

std::vector<double> detail::binned_quantiles(std::span<const double> sample, std::span<const double> probs,
                                             const SampleRange& range) {
  const std::size_t n = sample.size();
  const bool probs_ok = std::all_of(probs.begin(), probs.end(), [](double p) { return p >= 0.0 && p <= 1.0; });
  if (n < kBinnedQuantilesMin || n > std::numeric_limits<std::uint32_t>::max() || probs.empty() || !probs_ok)
    return quantiles(sample, probs);
  const double mn = range.min, mx = range.max;
  // 2048 bins, counted in 4 interleaved copies (draw i into copy i % 4): repeated draws (a
  // compact chain's expansion) then do not wait on each other's increments; 32 KiB in all.
  constexpr std::size_t kCopies = 4;
  const std::size_t nb = std::min<std::size_t>(n / 16, 2048);
  const double scale = static_cast<double>(nb) / (mx - mn);
  if (!range.finite || !(mx > mn) || !std::isfinite(scale) || !(scale > 0)) return quantiles(sample, probs);
  // The bin of a value: each step (subtraction, product, min, truncation) is monotone, so a
  // draw in a lower bin is smaller than every draw in a higher one.
  const double top = static_cast<double>(nb - 1);
  const auto bin = [mn, scale, top](double v) { return static_cast<std::size_t>(std::min((v - mn) * scale, top)); };
  std::vector<std::uint32_t> copies(kCopies * nb, 0);
  {
    std::size_t i = 0;
    for (; i + kCopies <= n; i += kCopies)
      for (std::size_t k = 0; k < kCopies; ++k) ++copies[k * nb + bin(sample[i + k])];
    for (; i < n; ++i) ++copies[bin(sample[i])];
  }
  std::vector<std::uint32_t> count(nb);
  for (std::size_t b = 0; b < nb; ++b) count[b] = copies[b] + copies[nb + b] + copies[2 * nb + b] + copies[3 * nb + b];
  // The 0-based order statistics type 7 interpolates between (as quantiles() selects them).
  const std::vector<std::size_t> ranks = detail::type7_ranks(n, probs);
  // Each rank's bin and its rank within the bin; the wanted bins get consecutive segments of
  // `held` (slot: a bin's segment, -1 when not wanted).
  struct Segment {
    std::size_t bin, begin, end, done;
  };
  std::vector<Segment> segments;
  std::vector<std::size_t> rank_segment(ranks.size()), rank_within(ranks.size());
  {
    std::size_t b = 0, below = 0;  // draws in bins < b
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      while (below + count[b] <= ranks[i]) below += count[b++];
      if (segments.empty() || segments.back().bin != b) {
        const std::size_t begin = segments.empty() ? 0 : segments.back().end;
        segments.push_back({b, begin, begin + count[b], begin});
      }
      rank_segment[i] = segments.size() - 1;
      rank_within[i] = segments.back().begin + (ranks[i] - below);
    }
  }
  std::vector<std::int32_t> slot(nb, -1);
  std::vector<std::size_t> fill(segments.size());
  for (std::size_t s = 0; s < segments.size(); ++s) {
    slot[segments[s].bin] = static_cast<std::int32_t>(s);
    fill[s] = segments[s].begin;
  }
  std::vector<double> held(segments.back().end);
  for (double v : sample) {
    const std::int32_t s = slot[bin(v)];
    if (s >= 0) held[fill[static_cast<std::size_t>(s)]++] = v;
  }
  // Select each rank within its segment, ascending (each selection right of the previous one).
  std::vector<double> value(ranks.size());
  const auto at = [&held](std::size_t i) { return held.begin() + static_cast<std::ptrdiff_t>(i); };
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    Segment& seg = segments[rank_segment[i]];
    std::nth_element(at(seg.done), at(rank_within[i]), at(seg.end));
    value[i] = held[rank_within[i]];
    seg.done = rank_within[i] + 1;
  }
  return type7_interpolate(n, probs, ranks, value);
}

namespace {

/// The draws of weighted states expanded (`values[i]` `weights[i]` times), for the cases
/// that go to herd::mcmc::quantiles.
std::vector<double> expand_states(std::span<const double> values, std::span<const std::uint32_t> weights) {
  std::vector<double> out;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (weights[i] > 0) out.insert(out.end(), static_cast<std::size_t>(weights[i]), values[i]);
  return out;
}

}  // namespace

detail::SampleRange detail::sample_range(std::span<const double> values, std::span<const std::uint32_t> weights) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo = kInf, hi = -kInf;
  bool nan = false, any = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (weights[i] == 0) continue;
    const double v = values[i];
    any = true;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    nan = nan || std::isnan(v);
  }
  SampleRange r;
  r.min = lo;
  r.max = hi;
  r.finite = any && !nan && std::isfinite(lo) && std::isfinite(hi);
  return r;
}

namespace detail {

StateQuantiles::StateQuantiles(std::span<const double> probs, const SampleRange& range, std::size_t n)
    : probs_(probs.begin(), probs.end()), n_(n), mn_(range.min) {
  const bool probs_ok = std::all_of(probs.begin(), probs.end(), [](double p) { return p >= 0.0 && p <= 1.0; });
  const double mx = range.max;
  nb_ = std::min<std::size_t>(n / 16, 2048);
  scale_ = static_cast<double>(nb_) / (mx - mn_);
  // binned_quantiles' cases for herd::mcmc::quantiles, on the expanded draws.
  binned_ = !(n < kBinnedQuantilesMin || n > std::numeric_limits<std::uint32_t>::max() || probs.empty() || !probs_ok ||
              !range.finite || !(mx > mn_) || !std::isfinite(scale_) || !(scale_ > 0));
  if (!binned_) return;
  top_ = static_cast<double>(nb_ - 1);
  copies_.assign(kCopies * nb_, 0);
}

void StateQuantiles::count(std::span<const double> values, std::span<const std::uint32_t> weights) {
  // The bins of binned_quantiles (the same monotone map), each state adding its weight; 4
  // interleaved copies, so that neighbouring states in one bin do not wait on each other.
  // A padding state (weight 0) adds 0 to bin 0: its value need not be in the range.
  const auto add = [&](std::size_t copy, std::size_t i) {
    const std::int64_t w = weights[i];
    copies_[copy * nb_ + bin(w > 0 ? values[i] : mn_)] += static_cast<std::uint32_t>(w > 0 ? w : 0);
  };
  const std::size_t ns = values.size();
  std::size_t i = 0;
  for (; i + kCopies <= ns; i += kCopies)
    for (std::size_t k = 0; k < kCopies; ++k) add(k, i + k);
  for (; i < ns; ++i) add(0, i);
}

void StateQuantiles::select() {
  std::vector<std::uint32_t> count(nb_);
  for (std::size_t b = 0; b < nb_; ++b)
    count[b] = copies_[b] + copies_[nb_ + b] + copies_[2 * nb_ + b] + copies_[3 * nb_ + b];
  copies_ = {};
  ranks_ = detail::type7_ranks(n_, probs_);
  // Each rank's bin and its rank within the bin (draws of lower bins are smaller).
  rank_bin_.resize(ranks_.size());
  rank_within_.resize(ranks_.size());
  slot_.assign(nb_, -1);
  std::size_t wanted = 0;
  std::size_t b = 0, below = 0;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    while (below + count[b] <= ranks_[i]) below += count[b++];
    if (slot_[b] < 0) slot_[b] = static_cast<std::int32_t>(wanted++);
    rank_bin_[i] = static_cast<std::size_t>(slot_[b]);
    rank_within_[i] = ranks_[i] - below;
  }
  held_.resize(wanted);
}

void StateQuantiles::collect(std::span<const double> values, std::span<const std::uint32_t> weights) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (weights[i] == 0) continue;
    const std::int32_t s = slot_[bin(values[i])];
    if (s >= 0) held_[static_cast<std::size_t>(s)].emplace_back(values[i], weights[i]);
  }
}

std::vector<double> StateQuantiles::result() {
  for (auto& h : held_) std::sort(h.begin(), h.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // The draw of rank r within a bin: the first pair whose cumulative weight passes r.
  std::vector<double> value(ranks_.size());
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    const auto& h = held_[rank_bin_[i]];
    std::size_t k = 0;
    for (auto cum = static_cast<std::size_t>(h[0].second); cum <= rank_within_[i];)
      cum += static_cast<std::size_t>(h[++k].second);
    value[i] = h[k].first;
  }
  return type7_interpolate(n_, probs_, ranks_, value);
}

std::size_t StateQuantiles::held() const {
  std::size_t s = 0;
  for (const auto& h : held_) s += h.size();
  return s;
}

}  // namespace detail

std::vector<double> detail::binned_quantiles(std::span<const double> values, std::span<const std::uint32_t> weights,
                                             std::span<const double> probs, const SampleRange& range) {
  std::size_t n = 0;
  for (const std::int64_t w : weights) n += static_cast<std::size_t>(std::max<std::int64_t>(w, 0));
  StateQuantiles sq(probs, range, n);
  if (!sq.binned()) return quantiles(expand_states(values, weights), probs);
  sq.count(values, weights);
  sq.select();
  sq.collect(values, weights);
  return sq.result();
}

detail::RepeatedCovariance::RepeatedCovariance(std::span<const double> mean)
    : mean_(mean.begin(), mean.end()),
      dev_(mean.size()),
      prod_(mean.size() * (mean.size() + 1) / 2),
      tri_(prod_.size(), 0.0) {}

namespace {

/// tri[e] += prod[e], `weight` times over e < n, each element's additions in order (the
/// elements are independent: vector lanes give the same sums as one at a time).
void add_repeated(double* tri, const double* prod, std::size_t n, std::int64_t weight) {
  for (std::int64_t rep = 0; rep < weight; ++rep)
    for (std::size_t e = 0; e < n; ++e) tri[e] += prod[e];
}

/// add_repeated in 4-wide AVX2 lanes (plain additions: no FMA, so the same doubles).
__attribute__((target("avx2"))) void add_repeated_avx2(double* tri, const double* prod, std::size_t n,
                                                       std::int64_t weight) {
  for (std::int64_t rep = 0; rep < weight; ++rep)
    for (std::size_t e = 0; e < n; ++e) tri[e] += prod[e];
}

const bool kHaveAvx2 = __builtin_cpu_supports("avx2");

}  // namespace

void detail::RepeatedCovariance::add(const double* x, std::int64_t weight) {
  const std::size_t d = mean_.size(), nt = tri_.size();
  for (std::size_t i = 0; i < d; ++i) dev_[i] = x[i] - mean_[i];
  for (std::size_t i = 0, e = 0; i < d; ++i)
    for (std::size_t j = 0; j <= i; ++j) prod_[e++] = dev_[i] * dev_[j];
  if (kHaveAvx2) add_repeated_avx2(tri_.data(), prod_.data(), nt, weight);
  else add_repeated(tri_.data(), prod_.data(), nt, weight);
}

std::vector<double> detail::RepeatedCovariance::matrix(double divisor) const {
  const std::size_t d = mean_.size();
  std::vector<double> cov(d * d);
  for (std::size_t i = 0, e = 0; i < d; ++i)
    for (std::size_t j = 0; j <= i; ++j, ++e) cov[i * d + j] = cov[j * d + i] = tri_[e] / divisor;
  return cov;
}

namespace {

using io::HtmlReport;
using io::Plot;
using io::PlotSeries;
using io::vega_spec;
using Level = HtmlReport::Level;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kRankBins = 20;
constexpr std::size_t kDensityGrid = 128;
constexpr std::size_t kAcfDraws = 65536;  // autocorrelation from at most this many draws per chain

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.4g}", v) : std::string("NA"); }

/// `v` with `decimals` decimals, or with more (up to 6) while the text would not show on
/// which side of `limit` the value lies: R-hat 1.0102 against the limit 1.01 printed "1.010"
/// in "R-hat is above 1.01 for x (1.010)", and an ESS of 399.6 "400" in "below 400".
std::string beside_limit(double v, double limit, int decimals) {
  if (!std::isfinite(v)) return "NA";
  const auto side = [limit](double x) { return (x > limit) - (x < limit); };
  std::string s = fmt::format("{:.{}f}", v, decimals);
  while (decimals < 6 && side(std::strtod(s.c_str(), nullptr)) != side(v)) s = fmt::format("{:.{}f}", v, ++decimals);
  return s;
}

std::string chain_label(const PosteriorReportData& d, std::size_t c) {
  return fmt::format("chain {}", (d.chain_ids.empty() ? c : d.chain_ids[c]) + 1);
}

std::size_t plotted_chains(const PosteriorReportData& d) { return std::min(d.chains, kPlotChains); }

double ess_threshold(std::size_t chains) { return kEssPerChain * static_cast<double>(std::min(chains, kEssChains)); }

/// How `ess_threshold(chains)` follows from the chain count, for the warning: "100 per chain
/// for 2 chains"; past kEssChains chains the per-chain count stops (the total ESS sets the
/// Monte Carlo errors), which the text says rather than quoting a count of chains the run
/// does not have.
std::string ess_threshold_reason(std::size_t chains) {
  if (chains <= kEssChains)
    return fmt::format("{:.0f} per chain for {} chain{}", kEssPerChain, chains, chains == 1 ? "" : "s");
  return fmt::format("for {} chains: {:.0f} per chain up to {} chains, {:.0f} in all with more", chains, kEssPerChain,
                     kEssChains, ess_threshold(chains));
}

/// The probabilities of the order statistics the panels need: the quartiles (the density's
/// bandwidth), then with 2 or more chains the rank plot's cuts at b / kRankBins.
std::vector<double> panel_probs(std::size_t chains) {
  std::vector<double> probs{0.25, 0.75};
  if (chains >= 2)
    for (std::size_t b = 1; b < kRankBins; ++b) probs.push_back(static_cast<double>(b) / kRankBins);
  return probs;
}

/// The counts of a Gaussian kernel density (`density`): draws counted into 512 fine bins
/// over [lo, hi], added state by state (in any order: whole counts). Not thread-safe.
class DensityCounts {
 public:
  static constexpr std::size_t kBins = 512;
  DensityCounts(double lo, double hi) : lo_(lo), hi_(hi), width_((hi - lo) / kBins) {}
  /// Adds `x` (with `weights`, same length: x[i] counts weights[i] times; empty: 1 each).
  void add(std::span<const double> x, std::span<const std::uint32_t> weights) {
    // Whole counts in 4 interleaved copies (draw i into copy i % 4), so that repeated draws
    // do not wait on each other's increments; their sums are the counts exactly.
    const auto count = [&](std::size_t copy, double v, std::uint64_t w) {
      if (!std::isfinite(v)) return;
      const auto b = static_cast<std::size_t>(std::clamp((v - lo_) / width_, 0.0, static_cast<double>(kBins - 1)));
      copies_[copy * kBins + b] += w;
    };
    const auto weight = [&weights](std::size_t i) {
      return weights.empty() ? std::uint64_t{1} : static_cast<std::uint64_t>(std::max<std::int64_t>(weights[i], 0));
    };
    std::size_t i = 0;
    for (; i + 4 <= x.size(); i += 4)
      for (std::size_t k = 0; k < 4; ++k) count(k, x[i + k], weight(i + k));
    for (; i < x.size(); ++i) count(0, x[i], weight(i));
  }
  /// The curve on kDensityGrid points over [lo, hi] with bandwidth `bw`.
  PlotSeries series(double bw, std::string name) const {
    std::vector<double> counts(kBins, 0.0);
    std::size_t n = 0;
    for (std::size_t b = 0; b < kBins; ++b) {
      const std::uint64_t c = copies_[b] + copies_[kBins + b] + copies_[2 * kBins + b] + copies_[3 * kBins + b];
      counts[b] = static_cast<double>(c);
      n += c;
    }
    PlotSeries s(std::move(name), {}, {});
    if (n == 0) return s;
    const double lo = lo_, hi = hi_, width = width_;
    const double norm = 1.0 / (static_cast<double>(n) * bw * std::sqrt(2.0 * std::numbers::pi));
    for (std::size_t g = 0; g < kDensityGrid; ++g) {
      const double at = lo + (hi - lo) * static_cast<double>(g) / (kDensityGrid - 1);
      double sum = 0.0;
      for (std::size_t b = 0; b < kBins; ++b) {
        if (counts[b] == 0.0) continue;
        const double z = (at - (lo + (static_cast<double>(b) + 0.5) * width)) / bw;
        if (std::abs(z) < 8.0) sum += counts[b] * std::exp(-0.5 * z * z);
      }
      s.x.push_back(at);
      s.y.push_back(sum * norm);
    }
    return s;
  }

 private:
  double lo_, hi_, width_;
  std::array<std::uint64_t, 4 * kBins> copies_{};
};

/// Gaussian kernel density on `grid` points over [lo, hi] with bandwidth `bw`, binned:
/// the draws are counted into 512 fine bins first (exact to a small fraction of bw).
/// With `weights` (same length as `x`; empty: 1 each), x[i] counts weights[i] times: the
/// counts, and so the curve, are those of the expanded draws.
PlotSeries density(std::span<const double> x, std::span<const std::uint32_t> weights, double lo, double hi, double bw,
                   std::string name) {
  DensityCounts counts(lo, hi);
  counts.add(x, weights);
  return counts.series(bw, std::move(name));
}

/// Silverman's rule-of-thumb bandwidth 0.9 min(sd, IQR/1.34) n^(-1/5) from the summary.
double bandwidth(const DiagnosticSummary& s, double iqr, std::size_t n) {
  double spread = std::min(s.sd, iqr / 1.34);
  if (!(spread > 0)) spread = s.sd > 0 ? s.sd : 1.0;
  return 0.9 * spread * std::pow(static_cast<double>(std::max<std::size_t>(n, 2)), -0.2);
}

/// Points (x, y) of the 1-sigma contour of the 2x2 covariance [a b; b c] around (mx, my);
/// empty when it is not positive definite.
PlotSeries ellipse(double a, double b, double c, double mx, double my, std::string name) {
  PlotSeries s(std::move(name), {}, {});
  if (!(a > 0) || !(c - b * b / a > 0)) return s;
  const double l11 = std::sqrt(a), l21 = b / l11, l22 = std::sqrt(c - l21 * l21);
  for (int k = 0; k <= 96; ++k) {
    const double t = 2.0 * std::numbers::pi * k / 96.0;
    s.x.push_back(mx + l11 * std::cos(t));
    s.y.push_back(my + l21 * std::cos(t) + l22 * std::sin(t));
  }
  return s;
}

/// Evenly thinned pooled draws of quantity q: the same draw indices in every chain, at most
/// `max_points` in all.
std::vector<std::size_t> pooled_thin(const PosteriorReportData& d, std::size_t max_points) {
  const auto per_chain =
      io::thin_indices(d.draws, std::max<std::size_t>(2, max_points / std::max<std::size_t>(d.chains, 1)));
  std::vector<std::size_t> idx;
  for (std::size_t c = 0; c < d.chains && idx.size() < max_points; ++c)
    for (std::size_t t : per_chain) idx.push_back(c * d.draws + t);
  return idx;
}

void check(const PosteriorReportData& d) {
  HERD_REQUIRE(d.chains >= 1 && d.draws >= 1, "posterior report: {} chains x {} draws, but needs at least 1 x 1",
               d.chains, d.draws);
  HERD_REQUIRE(d.values.empty() || !d.fill_values, "posterior report: both values and fill_values given");
  for (const ReportTable& t : d.tables)
    for (const auto& row : t.rows)
      HERD_REQUIRE(row.size() == t.header.size(),
                   "posterior report: a row of the table \"{}\" has {} cells, but its header has {}", t.title,
                   row.size(), t.header.size());
  if (d.open_states) {
    HERD_REQUIRE(d.values.empty() && !d.fill_values && !d.fill_states && d.state_weights.empty(),
                 "posterior report: open_states given with values, fill_values, fill_states or state_weights (give "
                 "one of them)");
    HERD_REQUIRE(!d.summary.empty(), "posterior report: open_states needs the summary given");
    HERD_REQUIRE(d.states >= 1, "posterior report: open_states needs at least 1 state per chain, not {}", d.states);
  }
  if (d.fill_states) {
    HERD_REQUIRE(d.values.empty() && !d.fill_values,
                 "posterior report: fill_states given with values or fill_values (give one of the three)");
    HERD_REQUIRE(!d.summary.empty(), "posterior report: fill_states needs the summary given");
    HERD_REQUIRE(d.states >= 1 && d.state_weights.size() == d.chains * d.states,
                 "posterior report: {} state weights, not {} chains x {} states", d.state_weights.size(), d.chains,
                 d.states);
    for (std::size_t c = 0; c < d.chains; ++c) {
      std::uint64_t sum = 0;
      for (std::size_t i = 0; i < d.states; ++i) sum += d.state_weights[c * d.states + i];
      HERD_REQUIRE(sum == static_cast<std::uint64_t>(d.draws),
                   "posterior report: the state weights of chain {} sum to {}, not {} draws", c, sum, d.draws);
    }
  }
  if (!d.order_stats.empty()) {
    HERD_REQUIRE(d.open_states, "posterior report: order_stats given without open_states");
    HERD_REQUIRE(d.order_stats.size() >= std::min(d.names.size(), kPlotQuantities),
                 "posterior report: order_stats of {} quantities, not of the {} plotted", d.order_stats.size(),
                 std::min(d.names.size(), kPlotQuantities));
    const std::size_t probs = panel_probs(d.chains).size();
    for (std::size_t q = 0; q < std::min(d.names.size(), kPlotQuantities); ++q)
      HERD_REQUIRE(d.order_stats[q].quantiles.size() == probs,
                   "posterior report: order_stats of quantity {} has {} quantiles, not {}", d.names[q],
                   d.order_stats[q].quantiles.size(), probs);
  }
  if (!d.fill_values && !d.fill_states && !d.open_states)
    HERD_REQUIRE(d.values.size() == d.names.size(), "posterior report: {} quantities but {} names", d.values.size(),
                 d.names.size());
  for (std::size_t q = 0; q < d.values.size(); ++q)
    HERD_REQUIRE(d.values[q].size() == d.chains * d.draws, "posterior report: quantity {} has {} draws, not {} x {}",
                 d.names[q], d.values[q].size(), d.chains, d.draws);
  HERD_REQUIRE(d.summary.empty() || d.summary.size() == d.names.size(),
               "posterior report: {} summaries for {} quantities", d.summary.size(), d.names.size());
  HERD_REQUIRE(d.chain_ids.empty() || d.chain_ids.size() == d.chains, "posterior report: {} chain ids for {} chains",
               d.chain_ids.size(), d.chains);
}

/// One quantity's draws: `[chains, draws]` values (`w` empty), or weighted states
/// `[chains, per]` (values `v`, weights `w`: state i of chain c stands for w[c per + i]
/// consecutive draws).
struct QuantityDraws {
  std::span<const double> v;
  std::span<const std::uint32_t> w;  ///< empty: unweighted
  std::size_t per = 0;               ///< entries of `v` per chain
  bool weighted() const { return !w.empty(); }
  std::span<const double> values(std::size_t c) const { return v.subspan(c * per, per); }
  std::span<const std::uint32_t> weights(std::size_t c) const {
    return weighted() ? w.subspan(c * per, per) : std::span<const std::uint32_t>();
  }
};

/// Draw t of chain c of a QuantityDraws, for increasing t within a chain (a walk over the
/// states' cumulative weights when weighted; any order when not).
class DrawWalker {
 public:
  explicit DrawWalker(const QuantityDraws& q) : q_(q) {}
  double at(std::size_t c, std::size_t t) {
    if (!q_.weighted()) return q_.v[c * q_.per + t];
    if (c != c_ || t < begin_) {
      c_ = c;
      i_ = c * q_.per;
      begin_ = 0;
    }
    // State i_ covers draws [begin_, begin_ + w).
    while (begin_ + static_cast<std::size_t>(q_.w[i_]) <= t) begin_ += static_cast<std::size_t>(q_.w[i_++]);
    return q_.v[i_];
  }

 private:
  const QuantityDraws& q_;
  std::size_t c_ = std::numeric_limits<std::size_t>::max(), i_ = 0, begin_ = 0;
};

/// The first `n` draws of chain c (a view when unweighted; else expanded into `buf`).
std::span<const double> first_draws(const QuantityDraws& q, std::size_t c, std::size_t n, std::vector<double>& buf) {
  if (!q.weighted()) return q.values(c).first(n);
  const auto v = q.values(c);
  const auto w = q.weights(c);
  buf.resize(n);  // filled state by state (one fill per state, not one insert)
  std::size_t filled = 0;
  for (std::size_t i = 0; i < v.size() && filled < n; ++i) {
    const std::size_t k = std::min(static_cast<std::size_t>(std::max<std::int64_t>(w[i], 0)), n - filled);
    std::fill_n(buf.begin() + static_cast<std::ptrdiff_t>(filled), k, v[i]);
    filled += k;
  }
  buf.resize(filled);
  return buf;
}

/// The autocorrelation of one series (about its mean, biased: lag 0 is 1) at the lags a
/// panel asks for, by direct sums (detail::direct_lags) in blocks of 32 lags, computed only
/// as far as asked: the panel shows at most 1001 lags of up to kAcfDraws draws, for which a
/// few blocks of sums cost less than the FFT of all lags (an FFTW plan of 2^17 points alone
/// takes 2-8 ms on this machine). NaN at every lag when a value is not finite or the series
/// is constant (0 / 0), as the FFT's autocorrelation gives; the values agree with it to
/// rounding. `z` holds the centred series (a caller's buffer, reused from one series to the
/// next: its pages are not faulted in again); valid while `z` is unchanged.
class DirectAcf {
 public:
  DirectAcf(std::span<const double> x, std::vector<double>& z)
      : finite_(detail::all_finite(x.data(), x.size())), n_(x.size()), z_(z) {
    if (!finite_) return;
    double s = 0;
    for (double v : x) s += v;
    const double mu = s / static_cast<double>(n_);
    z_.resize(n_);
    for (std::size_t i = 0; i < n_; ++i) z_[i] = x[i] - mu;
  }
  /// The number of lags there are (the series' length).
  std::size_t size() const { return n_; }
  /// The autocorrelation at lag k < size().
  double at(std::size_t k) {
    if (!finite_) return kNaN;
    if (k >= acc_.size()) {
      // Whole blocks of 32 lags (direct_lags sums a partial block's lags one at a time).
      const std::size_t k0 = acc_.size(), k1 = std::min(n_, (k / 32 + 1) * 32);
      acc_.resize(k1, 0.0);
      detail::direct_lags(z_.data(), n_, k0, k1, acc_.data());
    }
    return acc_[k] / acc_[0];
  }

 private:
  bool finite_;
  std::size_t n_;
  std::vector<double>& z_;   // the centred series
  std::vector<double> acc_;  // sum_t z[t] z[t + k] of the lags summed so far
};

/// Quantity q's draws: a view of `values[q]`, or `fill_values` into `buf` (`[chains,
/// draws]`), or `fill_states` into `buf` with `state_weights` (`[chains, states]`); valid
/// while `buf` is unchanged.
QuantityDraws quantity_draws(const PosteriorReportData& d, std::size_t q, std::vector<double>& buf) {
  if (!d.values.empty()) return {d.values[q], {}, d.draws};
  if (d.fill_states) {
    d.fill_states(q, buf);
    HERD_REQUIRE(buf.size() == d.chains * d.states, "posterior report: quantity {} has {} states, not {} x {}",
                 d.names[q], buf.size(), d.chains, d.states);
    return {buf, d.state_weights, d.states};
  }
  d.fill_values(q, buf);
  HERD_REQUIRE(buf.size() == d.chains * d.draws, "posterior report: quantity {} has {} draws, not {} x {}", d.names[q],
               buf.size(), d.chains, d.draws);
  return {buf, {}, d.draws};
}

/// What the plots show of one plotted quantity, made in one pass over its draws; small
/// (thinned points, density grids, histograms), kept while the next quantities are read.
struct QuantityPlots {
  Plot trace, density, autocorrelation, rank;  ///< its panels (rank: with 2 or more chains)
  PlotSeries pooled;                           ///< density of all draws (the corner plot's diagonal)
  double lo = 0, hi = 0;                       ///< the density grid's range (the corner plot's axes)
  std::vector<double> thinned;                 ///< the draws at `pooled_thin` (scatter panels)
};

/// The trace panel of quantity q: plotted chain c's draws at `trace_idx` are ys[c] (moved out).
Plot trace_panel(const PosteriorReportData& d, std::size_t q, const std::vector<std::size_t>& trace_idx,
                 std::vector<std::vector<double>>& ys) {
  const std::size_t pc = plotted_chains(d);
  Plot p;
  p.title = d.names[q];
  p.x_label = "draw";
  p.legend = q == 0 && pc > 1;
  for (std::size_t c = 0; c < pc; ++c) {
    // A line through one draw draws nothing: chains of one draw each left every trace
    // panel empty. One draw is a point.
    PlotSeries series(chain_label(d, c), {}, {},
                      trace_idx.size() < 2 ? PlotSeries::Mark::kPoint : PlotSeries::Mark::kLine);
    series.x.reserve(trace_idx.size());
    for (std::size_t t : trace_idx) series.x.push_back(static_cast<double>(t));
    series.y = std::move(ys[c]);
    series.opacity = pc > 1 ? 0.75 : 1.0;
    p.series.push_back(std::move(series));
  }
  return p;
}

/// The density grid [lo, hi] and bandwidth of a quantity whose finite draws span [mn, mx]
/// (Silverman's bandwidth from its summary `s` and quartiles qs[0], qs[1]; [mn - bw, mx + bw]).
struct DensityGrid {
  double lo = 0, hi = 0, bw = 0;
};
DensityGrid density_grid(const PosteriorReportData& d, double mn, double mx, const DiagnosticSummary& s,
                         const std::vector<double>& qs) {
  double bw = bandwidth(s, qs[1] - qs[0], d.chains * d.draws);
  if (!(mx > mn)) mn -= 0.5, mx += 0.5;
  if (!(bw > 0) || !std::isfinite(bw)) bw = (mx - mn) / 50.0;
  return {mn - bw, mx + bw, bw};
}

/// The density panel of quantity q and the corner plot's diagonal (`out.density`,
/// `out.pooled`): a curve per plotted chain (`per_chain`, with 2 or more plotted), then `all`.
void density_panel(const PosteriorReportData& d, std::size_t q, std::vector<PlotSeries> per_chain, PlotSeries all,
                   QuantityPlots& out) {
  Plot& p = out.density;
  p.title = d.names[q];
  p.x_label = d.names[q];
  p.y_label = "density";
  p.zero = true;
  p.legend = q == 0 && plotted_chains(d) > 1;
  for (PlotSeries& series : per_chain) {
    series.opacity = 0.6;
    p.series.push_back(std::move(series));
  }
  out.pooled = PlotSeries(d.names[q], all.x, all.y);
  all.color = "#222222";
  p.series.push_back(std::move(all));
}

/// The autocorrelation panel of quantity q without its series (acf_series adds them).
Plot acf_panel(const PosteriorReportData& d, std::size_t q) {
  Plot p;
  p.title = d.names[q];
  p.x_label = "lag";
  p.y_label = "autocorrelation";
  p.legend = q == 0 && plotted_chains(d) > 1;
  p.y_rules = {0.0};
  return p;
}

/// Plotted chain c's autocorrelation series from its first min(draws, kAcfDraws) draws `x`
/// (not read when there are fewer than 2 of them). Chain 0's sets `lags`, the lags shown:
/// three times the first lag below 0.05, in [50, 1000]. `acf_scratch`: any buffer.
PlotSeries acf_series(const PosteriorReportData& d, std::size_t c, std::span<const double> x, std::size_t& lags,
                      std::vector<double>& acf_scratch) {
  std::optional<DirectAcf> acf;
  if (std::min(d.draws, kAcfDraws) >= 2) {
    HERD_REQUIRE(!x.empty(), "autocovariance: the series is empty");
    acf.emplace(x, acf_scratch);
  }
  const std::size_t size = acf ? acf->size() : 0;
  // Past lag 333 the first one below 0.05 gives 1000 whichever it is.
  if (c == 0) {
    const std::size_t searched = std::min<std::size_t>(size, 334);
    std::size_t first = searched;
    for (std::size_t l = 0; l < searched; ++l)
      if (acf->at(l) < 0.05) {
        first = l;
        break;
      }
    lags = std::clamp<std::size_t>(3 * first, 50, 1000);
  }
  PlotSeries series(chain_label(d, c), {}, {});
  for (std::size_t l = 0; l < size && l <= lags; ++l) {
    series.x.push_back(static_cast<double>(l));
    series.y.push_back(acf->at(l));
  }
  return series;
}

/// Adds states (`values`; `weights` of the same length, or empty: 1 each) to a rank
/// histogram: bin b counts the draws with b of `cuts` at or below them. Whole counts, so
/// the same doubles in any order.
void add_rank_counts(std::vector<double>& counts, std::span<const double> cuts, std::span<const double> values,
                     std::span<const std::uint32_t> weights) {
  const auto bin = [&cuts](double x) {
    return static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), x) - cuts.begin());
  };
  if (!weights.empty()) {  // whole counts: += w is exact, as w times += 1
    for (std::size_t i = 0; i < values.size(); ++i)
      if (weights[i] > 0) counts[bin(values[i])] += static_cast<double>(weights[i]);
  } else {
    for (double x : values) counts[bin(x)] += 1.0;
  }
}

/// The rank panel of quantity q from each plotted chain's histogram `counts[c]` (kRankBins).
Plot rank_panel(const PosteriorReportData& d, std::size_t q, const std::vector<std::vector<double>>& counts) {
  Plot p;
  p.title = d.names[q];
  p.x_label = "rank bin";
  p.y_label = "draws";
  p.zero = true;
  p.legend = q == 0;
  p.y_rules = {static_cast<double>(d.draws) / kRankBins};
  for (const std::vector<double>& cc : counts) {
    PlotSeries series(chain_label(d, static_cast<std::size_t>(&cc - counts.data())), {}, {}, PlotSeries::Mark::kStep);
    for (std::size_t b = 0; b < kRankBins; ++b) {
      series.x.push_back(static_cast<double>(b));
      series.y.push_back(cc[b]);
    }
    series.x.push_back(static_cast<double>(kRankBins));  // closes the last step
    series.y.push_back(cc.back());
    p.series.push_back(std::move(series));
  }
  return p;
}

/// The panels of quantity q (draws `v`, summary `s`): its trace at `trace_idx` per plotted
/// chain, its densities (Silverman's bandwidth on the grid [min - bw, max + bw]), the
/// autocorrelation per chain, the rank histograms per chain (2 or more chains) and its
/// draws at `scatter_idx`. `acf_scratch`: the autocorrelation's buffer (any content).
QuantityPlots plot_quantity(const PosteriorReportData& d, std::size_t q, const QuantityDraws& v,
                            const DiagnosticSummary& s, const std::vector<std::size_t>& trace_idx,
                            const std::vector<std::size_t>& scatter_idx, std::vector<double>& acf_scratch) {
  const std::size_t pc = plotted_chains(d);
  QuantityPlots out;
  // The order statistics the panels need, from one pass.
  const std::vector<double> probs = panel_probs(d.chains);
  const detail::SampleRange range = v.weighted() ? detail::sample_range(v.v, v.w) : detail::sample_range(v.v);
  const std::vector<double> qs =
      v.weighted() ? detail::binned_quantiles(v.v, v.w, probs, range) : detail::binned_quantiles(v.v, probs, range);
  DrawWalker walk(v);
  {
    std::vector<std::vector<double>> ys(pc);
    for (std::size_t c = 0; c < pc; ++c)
      for (std::size_t t : trace_idx) ys[c].push_back(walk.at(c, t));
    out.trace = trace_panel(d, q, trace_idx, ys);
  }
  {
    double mn = range.min, mx = range.max;
    if (!range.finite) {  // the range of the finite draws
      mn = INFINITY, mx = -INFINITY;
      for (std::size_t i = 0; i < v.v.size(); ++i)
        if ((!v.weighted() || v.w[i] > 0) && std::isfinite(v.v[i]))
          mn = std::min(mn, v.v[i]), mx = std::max(mx, v.v[i]);
    }
    const DensityGrid g = density_grid(d, mn, mx, s, qs);
    out.lo = g.lo;
    out.hi = g.hi;
    std::vector<PlotSeries> per_chain;
    if (pc > 1)
      for (std::size_t c = 0; c < pc; ++c)
        per_chain.push_back(density(v.values(c), v.weights(c), g.lo, g.hi, g.bw, chain_label(d, c)));
    density_panel(d, q, std::move(per_chain), density(v.v, v.w, g.lo, g.hi, g.bw, "all chains"), out);
  }
  {
    out.autocorrelation = acf_panel(d, q);
    const std::size_t n = std::min(d.draws, kAcfDraws);
    std::size_t lags = 0;
    std::vector<double> expanded;
    for (std::size_t c = 0; c < pc; ++c)
      out.autocorrelation.series.push_back(
          acf_series(d, c, n >= 2 ? first_draws(v, c, n, expanded) : std::span<const double>(), lags, acf_scratch));
  }
  if (d.chains >= 2) {
    const auto cuts = std::span<const double>(qs).subspan(2);
    std::vector<std::vector<double>> counts(pc, std::vector<double>(kRankBins, 0.0));
    for (std::size_t c = 0; c < pc; ++c) add_rank_counts(counts[c], cuts, v.values(c), v.weights(c));
    out.rank = rank_panel(d, q, counts);
  }
  for (std::size_t t : scatter_idx) out.thinned.push_back(walk.at(t / d.draws, t % d.draws));
  return out;
}

/// Sums of squared and crossed deviations (saa, sab, sbb) of two quantities' draws from
/// their means `ma`, `mb`, in draw order, added block by block (the same sums as in one go).
/// Weighted states (the same weights for both) add their products w times, one after the
/// other: the same sums, bit for bit, as the expanded draws give.
class PairSums {
 public:
  PairSums(double ma, double mb) : ma_(ma), mb_(mb) {}
  /// Adds the next draws or states `va`, `vb` (weights `w` of the same length; empty: 1 each).
  void add(std::span<const double> va, std::span<const double> vb, std::span<const std::uint32_t> w) {
    double saa = saa_, sab = sab_, sbb = sbb_;
    const std::size_t n = va.size();
    for (std::size_t t = 0; t < n; ++t) {
      const double xa = va[t] - ma_, xb = vb[t] - mb_;
      if (w.empty()) {
        saa += xa * xa, sab += xa * xb, sbb += xb * xb;
        continue;
      }
      const double paa = xa * xa, pab = xa * xb, pbb = xb * xb;
      for (std::int64_t k = 0; k < w[t]; ++k) saa += paa, sab += pab, sbb += pbb;
    }
    saa_ = saa, sab_ = sab, sbb_ = sbb;
  }
  std::array<double, 3> sums() const { return {saa_, sab_, sbb_}; }

 private:
  double ma_, mb_, saa_ = 0, sab_ = 0, sbb_ = 0;
};

/// pair_sums of two whole quantities (the same weights, if any).
std::array<double, 3> pair_sums(const QuantityDraws& a, const QuantityDraws& b, double ma, double mb) {
  PairSums s(ma, mb);
  s.add(a.v, b.v, a.w);
  return s.sums();
}

/// Buffers of the blocks that plot_blocked reads (values of up to two quantities, weights),
/// kept across its passes and quantities. The autocorrelation's first draws per quantity.
struct BlockBuffers {
  std::array<std::vector<double>, 2> values, first;
  std::vector<std::uint32_t> weights;
};

/// For each chain c < `chains` in order and each block of its states in order, reads the
/// block of the quantities `qs` (one or two; the first with the weights) through
/// `open_states` and calls f(c, values (one span per quantity), weights, last block of the
/// chain). `reading`: the quantity being read (for the error's position).
template <class F>
void for_state_blocks(const PosteriorReportData& d, std::span<const std::size_t> qs, std::size_t chains,
                      BlockBuffers& buf, std::size_t& reading, F&& f) {
  const std::size_t block = std::min(d.block_states == 0 ? kReportBlockStates : d.block_states, d.states);
  buf.weights.resize(block);
  for (std::size_t k = 0; k < qs.size(); ++k) buf.values[k].resize(block);
  std::array<std::unique_ptr<PosteriorStateSource>, 2> src;
  std::array<std::span<const double>, 2> v;
  for (std::size_t c = 0; c < chains; ++c) {
    for (std::size_t k = 0; k < qs.size(); ++k) {
      reading = qs[k];
      src[k] = d.open_states(qs[k], c, k == 0);
      HERD_REQUIRE(src[k] != nullptr, "posterior report: open_states gave no states of quantity {}, chain {}",
                   d.names[qs[k]], c);
    }
    for (std::size_t first = 0; first < d.states; first += block) {
      const std::size_t len = std::min(block, d.states - first);
      const std::span<std::uint32_t> w(buf.weights.data(), len);
      for (std::size_t k = 0; k < qs.size(); ++k) {
        reading = qs[k];
        const std::span<double> out(buf.values[k].data(), len);
        src[k]->read(out, k == 0 ? w : std::span<std::uint32_t>());
        v[k] = out;
      }
      f(c, std::span<const std::span<const double>>(v.data(), qs.size()), std::span<const std::uint32_t>(w),
        first + len == d.states);
    }
  }
}

/// Picks a chain's draws at increasing draw indices from its states as they come in order
/// (the draw of index t is the value of the state whose weights cover it; as DrawWalker).
class DrawPicker {
 public:
  /// Draws at `at` (increasing; each minus `offset`) into `out`.
  DrawPicker(std::span<const std::size_t> at, std::size_t offset, std::vector<double>& out)
      : at_(at), offset_(offset), out_(&out) {}
  void add(std::span<const double> values, std::span<const std::uint32_t> weights) {
    const std::size_t n = values.size(), picks = at_.size();
    std::size_t next = next_, begin = begin_, i = 0;
    while (next < picks) {
      // The states before the one holding the next draw: their weights only.
      const std::size_t want = at_[next] - offset_;
      while (i < n && begin + weights[i] <= want) begin += weights[i++];
      if (i == n) break;
      out_->push_back(values[i]);
      ++next;
    }
    for (; i < n; ++i) begin += weights[i];  // (past the last draw picked)
    next_ = next, begin_ = begin;
  }

 private:
  std::span<const std::size_t> at_;
  std::size_t offset_, next_ = 0, begin_ = 0;
  std::vector<double>* out_;
};

/// One quantity of plot_blocked: what its passes gather.
struct BlockedQuantity {
  std::size_t q = 0;
  std::span<const std::size_t> scatter;  ///< pooled draw indices of its scatter points (or none)
  QuantityPlots out;
  // The range of the states of positive weight (as sample_range of weighted states) and that
  // of the finite ones, the draws: found by pass 1 (unless given).
  double lo = INFINITY, hi = -INFINITY, finite_lo = INFINITY, finite_hi = -INFINITY;
  bool nan = false, any = false;
  std::size_t n = 0;
  detail::SampleRange range;
  // The traces' draws per plotted chain, the pickers of the chain being read.
  std::vector<std::vector<double>> trace;
  std::size_t lags = 0;
  std::optional<DrawPicker> trace_pick, scatter_pick;
  std::vector<double> qs;  ///< the quantiles at panel_probs
  // Densities (per plotted chain with 2 or more, then all) and rank histograms.
  DensityGrid grid;
  std::vector<DensityCounts> density;
  std::vector<std::vector<double>> rank;

  /// Adds a block of chain c's states to the range and the draws.
  void add_range(std::span<const double> x, std::span<const std::uint32_t> w) {
    double l = lo, h = hi, fl = finite_lo, fh = finite_hi;
    bool a = any, na = nan;
    std::size_t draws = n;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (w[i] == 0) continue;
      const double xi = x[i];
      a = true;
      l = xi < l ? xi : l;
      h = xi > h ? xi : h;
      na = na || std::isnan(xi);
      if (std::isfinite(xi)) fl = std::min(fl, xi), fh = std::max(fh, xi);
      draws += w[i];
    }
    lo = l, hi = h, finite_lo = fl, finite_hi = fh, any = a, nan = na, n = draws;
  }
  /// The range once every state is added.
  void finish_range() {
    range.min = lo;
    range.max = hi;
    range.finite = any && !nan && std::isfinite(lo) && std::isfinite(hi);
  }
  /// Adds a block of chain c's states to the traces, scatter draws and autocorrelation (whose
  /// first draws go to `first`); `last`: the chain's last block.
  void add_picks(const PosteriorReportData& d, std::size_t c, std::span<const double> x,
                 std::span<const std::uint32_t> w, const std::vector<std::size_t>& trace_idx, bool last,
                 std::vector<double>& first, std::vector<double>& acf_scratch) {
    const std::size_t pc = plotted_chains(d), acf_n = std::min(d.draws, kAcfDraws);
    if (c < pc) {
      if (!trace_pick) trace_pick.emplace(trace_idx, 0, trace[c]);
      trace_pick->add(x, w);
      if (acf_n >= 2)
        for (std::size_t i = 0; i < x.size() && first.size() < acf_n; ++i)
          first.insert(first.end(), std::min<std::size_t>(w[i], acf_n - first.size()), x[i]);
    }
    if (!scatter.empty()) {
      if (!scatter_pick) {  // chain c's scatter draws: a range of the increasing pooled indices
        const auto from = std::lower_bound(scatter.begin(), scatter.end(), c * d.draws);
        const auto to = std::lower_bound(from, scatter.end(), (c + 1) * d.draws);
        scatter_pick.emplace(
            scatter.subspan(static_cast<std::size_t>(from - scatter.begin()), static_cast<std::size_t>(to - from)),
            c * d.draws, out.thinned);
      }
      scatter_pick->add(x, w);
    }
    if (last) {
      if (c < pc) {
        out.autocorrelation.series.push_back(acf_series(d, c, first, lags, acf_scratch));
        first.clear();
      }
      trace_pick.reset();
      scatter_pick.reset();
    }
  }
  /// The density grid, the histograms (once the range and quantiles are known).
  void start_histograms(const PosteriorReportData& d, const DiagnosticSummary& s) {
    const std::size_t pc = plotted_chains(d);
    grid = density_grid(d, range.finite ? range.min : finite_lo, range.finite ? range.max : finite_hi, s, qs);
    density.assign(pc > 1 ? pc + 1 : 1, DensityCounts(grid.lo, grid.hi));
    if (d.chains >= 2) rank.assign(pc, std::vector<double>(kRankBins, 0.0));
  }
  /// Adds a block of chain c's states to the densities and rank histograms.
  void add_histograms(const PosteriorReportData& d, std::size_t c, std::span<const double> x,
                      std::span<const std::uint32_t> w) {
    const std::size_t pc = plotted_chains(d);
    if (pc > 1 && c < pc) density[c].add(x, w);
    density.back().add(x, w);
    if (!rank.empty() && c < pc) add_rank_counts(rank[c], std::span<const double>(qs).subspan(2), x, w);
  }
  /// The panels, into plotted[q].
  void finish(const PosteriorReportData& d, const std::vector<std::size_t>& trace_idx,
              std::vector<QuantityPlots>& plotted) {
    const std::size_t pc = plotted_chains(d);
    out.trace = trace_panel(d, q, trace_idx, trace);
    out.lo = grid.lo;
    out.hi = grid.hi;
    std::vector<PlotSeries> per_chain;
    if (pc > 1)
      for (std::size_t c = 0; c < pc; ++c) per_chain.push_back(density[c].series(grid.bw, chain_label(d, c)));
    density_panel(d, q, std::move(per_chain), density.back().series(grid.bw, "all chains"), out);
    if (d.chains >= 2) out.rank = rank_panel(d, q, rank);
    plotted[q] = std::move(out);
  }
};

/// The quantiles at panel_probs of a quantity whose states' range is `r` and draws `n`, as
/// binned_quantiles of its whole states gives them, from its states read block by block
/// (`read(f)` calls f(values, weights) for each block of every chain, in order): by bins,
/// two passes (detail::StateQuantiles); else as herd::mcmc::quantiles of the expanded draws:
/// NaN for a NaN draw, the value of equal nonzero draws, or from the whole states read.
template <class Read>
std::vector<double> blocked_quantiles(std::span<const double> probs, const detail::SampleRange& r, bool nan,
                                      std::size_t n, Read&& read) {
  detail::StateQuantiles sq(probs, r, n);
  if (sq.binned()) {
    read([&](std::span<const double> v, std::span<const std::uint32_t> w) { sq.count(v, w); });
    sq.select();
    read([&](std::span<const double> v, std::span<const std::uint32_t> w) { sq.collect(v, w); });
    return sq.result();
  }
  if (nan) return std::vector<double>(probs.size(), kNaN);  // quantiles() of draws with a NaN
  if (r.finite && r.min == r.max && r.min != 0)             // equal draws (nonzero: the same bits)
    return std::vector<double>(probs.size(), r.min);
  std::vector<double> values;  // the whole states
  std::vector<std::uint32_t> weights;
  read([&](std::span<const double> v, std::span<const std::uint32_t> w) {
    values.insert(values.end(), v.begin(), v.end());
    weights.insert(weights.end(), w.begin(), w.end());
  });
  return detail::binned_quantiles(values, weights, probs, r);
}

/// The panels of plotted quantities q0 (and q0 + 1 when `count` is 2; with `pair` also their
/// covariance sums into `pair_out`) from their weighted states read block by block through
/// `open_states`: the same panels, bit for bit, as plot_quantity and pair_sums of the whole
/// states (each step is theirs, over the states in the same order, or adds whole counts).
/// With the quantities' order statistics given (`d.order_stats`): one pass over both. Else
/// pass 1: the range, the traces' and scatter draws, the autocorrelation's first draws
/// (chain by chain), the pair's sums and the weights' check; then the quantiles
/// (blocked_quantiles: two passes, or none); then a pass for the densities and rank
/// histograms. `reading`: the quantity being read (for an error's position).
void plot_blocked(const PosteriorReportData& d, std::size_t q0, std::size_t count,
                  const std::vector<DiagnosticSummary>& summary, const std::vector<std::size_t>& trace_idx,
                  const std::array<std::span<const std::size_t>, 2>& scatter, bool pair,
                  std::vector<QuantityPlots>& plotted, std::array<double, 3>* pair_out, std::size_t& reading,
                  BlockBuffers& buf, std::vector<double>& acf_scratch) {
  const bool given = !d.order_stats.empty();
  std::array<BlockedQuantity, 2> bq;
  std::array<std::size_t, 2> all{q0, q0 + 1};
  const std::span<const std::size_t> both(all.data(), count);
  for (std::size_t k = 0; k < count; ++k) {
    BlockedQuantity& b = bq[k];
    b.q = q0 + k;
    b.scatter = scatter[k];
    b.trace.resize(plotted_chains(d));
    b.out.autocorrelation = acf_panel(d, b.q);
    if (given) {
      const ReportOrderStats& s = d.order_stats[b.q];
      b.range.min = s.min;
      b.range.max = s.max;
      b.range.finite = s.finite;
      b.finite_lo = s.finite_min;
      b.finite_hi = s.finite_max;
      b.qs = s.quantiles;
      b.start_histograms(d, summary[b.q]);
    }
  }
  std::optional<PairSums> sums;
  if (pair) sums.emplace(summary[q0].mean, summary[q0 + 1].mean);
  std::uint64_t chain_weight = 0;
  for_state_blocks(d, both, d.chains, buf, reading, [&](std::size_t c, auto v, auto w, bool last) {
    for (std::size_t k = 0; k < count; ++k) {
      BlockedQuantity& b = bq[k];
      if (given) b.add_histograms(d, c, v[k], w);
      else b.add_range(v[k], w);
      b.add_picks(d, c, v[k], w, trace_idx, last, buf.first[k], acf_scratch);
    }
    if (sums) sums->add(v[0], v[1], w);
    for (const std::uint32_t wi : w) chain_weight += wi;
    if (last) {
      HERD_REQUIRE(chain_weight == static_cast<std::uint64_t>(d.draws),
                   "posterior report: the state weights of chain {} sum to {}, not {} draws", c, chain_weight, d.draws);
      chain_weight = 0;
    }
  });
  if (pair_out != nullptr && sums) *pair_out = sums->sums();
  if (!given) {
    const std::vector<double> probs = panel_probs(d.chains);
    for (std::size_t k = 0; k < count; ++k) {
      BlockedQuantity& b = bq[k];
      b.finish_range();
      const std::size_t one = b.q;
      b.qs = blocked_quantiles(probs, b.range, b.nan, b.n, [&](auto f) {
        for_state_blocks(d, std::span<const std::size_t>(&one, 1), d.chains, buf, reading,
                         [&](std::size_t, auto v, auto w, bool) { f(v[0], w); });
      });
      b.start_histograms(d, summary[b.q]);
    }
    for_state_blocks(d, both, d.chains, buf, reading, [&](std::size_t c, auto v, auto w, bool) {
      for (std::size_t k = 0; k < count; ++k) bq[k].add_histograms(d, c, v[k], w);
    });
  }
  for (std::size_t k = 0; k < count; ++k) bq[k].finish(d, trace_idx, plotted);
}

}  // namespace

ReportOrderStats report_order_stats(std::span<const double> values, std::span<const std::uint32_t> weights,
                                    std::size_t chains) {
  HERD_REQUIRE(values.size() == weights.size(), "report_order_stats: {} values but {} weights", values.size(),
               weights.size());
  ReportOrderStats s;
  const detail::SampleRange r = detail::sample_range(values, weights);
  s.min = r.min;
  s.max = r.max;
  s.finite = r.finite;
  // The range of the finite draws (as the report's density grid takes it): the range when
  // every draw is finite.
  s.finite_min = r.min, s.finite_max = r.max;
  if (!r.finite) {
    s.finite_min = INFINITY, s.finite_max = -INFINITY;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (weights[i] > 0 && std::isfinite(values[i]))
        s.finite_min = std::min(s.finite_min, values[i]), s.finite_max = std::max(s.finite_max, values[i]);
  }
  s.quantiles = detail::binned_quantiles(values, weights, panel_probs(chains), r);
  return s;
}

namespace {

std::string name_list(const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size() && i < 6; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > 6) s += fmt::format(" and {} more", items.size() - 6);
  return s;
}

}  // namespace

ChainHistory chain_history(const MemoryChainSink& chain, std::size_t windows) {
  ChainHistory h;
  h.chain_id = chain.chain_id;
  if (chain.size() == 0 || windows == 0) return h;
  ChainReader rd(chain, kStepColumn | kWeightColumn | kAdaptMeasureColumn);
  const std::size_t last = chain.size() - 1;
  const std::uint64_t total =
      rd.step(last) + static_cast<std::uint64_t>(std::max<std::int64_t>(rd.weight(last), 1)) - 1;
  if (total == 0) return h;
  const std::uint64_t width = std::max<std::uint64_t>(1, (total + windows - 1) / windows);
  const std::size_t n = static_cast<std::size_t>((total + width - 1) / width);
  std::vector<double> accepted(n, 0.0), adapt(n, kNaN);
  for (std::size_t i = 0; i <= last; ++i) {
    const std::uint64_t step = rd.step(i);
    if (step == 0) continue;
    const auto w = std::min<std::size_t>(n - 1, static_cast<std::size_t>((step - 1) / width));
    accepted[w] += 1.0;
    const double a = rd.adapt_measure(i);
    if (std::isfinite(a) && (std::isnan(adapt[w]) || a > adapt[w])) adapt[w] = a;
  }
  for (std::size_t w = 0; w < n; ++w) {
    const std::uint64_t end = std::min<std::uint64_t>(total, (w + 1) * width);
    const std::uint64_t len = end - w * width;
    h.proposals.push_back(static_cast<double>(end));
    h.acceptance.push_back(accepted[w] / static_cast<double>(std::max<std::uint64_t>(len, 1)));
    h.adaptation.push_back(adapt[w]);
  }
  return h;
}

std::vector<ReportVerdict> convergence_verdicts(const PosteriorReportData& d, const std::vector<DiagnosticSummary>& s) {
  return convergence_verdicts(d.names, s, d.chains, d.acceptance_rate, d.run_longer, d.nested_rhat, d.superchains);
}

std::vector<ReportVerdict> convergence_verdicts(const std::vector<std::string>& names,
                                                const std::vector<DiagnosticSummary>& s, std::size_t chains,
                                                double acceptance_rate, std::string_view run_longer,
                                                std::span<const double> nested_rhat, std::size_t superchains) {
  std::vector<ReportVerdict> out;
  std::vector<std::string> high_rhat, low_ess, undefined, high_nested, rhat_only;
  const double ess_min = ess_threshold(chains);
  const auto nested = [&](std::size_t q) {
    return superchains >= 2 && q < nested_rhat.size() && std::isfinite(nested_rhat[q]);
  };
  bool judged_nested = false;
  for (std::size_t q = 0; q < s.size() && q < names.size(); ++q) {
    if (!std::isfinite(s[q].rhat) || !std::isfinite(s[q].ess_bulk) || !std::isfinite(s[q].ess_tail)) {
      undefined.push_back(names[q]);
      continue;
    }
    if (nested(q)) {  // many short chains: their superchains must agree, not each chain's halves
      judged_nested = true;
      if (nested_rhat[q] > kRhatLimit)
        high_nested.push_back(fmt::format("{} ({})", names[q], beside_limit(nested_rhat[q], kRhatLimit, 3)));
      else if (s[q].rhat > kRhatLimit)
        rhat_only.push_back(fmt::format("{} ({})", names[q], beside_limit(s[q].rhat, kRhatLimit, 3)));
    } else if (s[q].rhat > kRhatLimit) {
      high_rhat.push_back(fmt::format("{} ({})", names[q], beside_limit(s[q].rhat, kRhatLimit, 3)));
    }
    const double ess = std::min(s[q].ess_bulk, s[q].ess_tail);
    if (ess < ess_min) low_ess.push_back(fmt::format("{} ({})", names[q], beside_limit(ess, ess_min, 0)));
  }
  const std::size_t per_super = superchains >= 2 ? chains / superchains : 0;
  if (!high_nested.empty())
    out.push_back(
        {3, fmt::format("Nested R-hat over {} superchains of {} chains (Margossian et al. 2024: the test for many "
                        "short chains) is above {} for {}: the superchains do not agree, so the draws are not yet "
                        "a sample of the target. Run longer ({}), start the superchains from dispersed points "
                        "(random_start_point = true, random_start_point_scope = \"superchain\"), and look at the "
                        "trace and rank plots of the HTML report for stuck or separated chains; several modes need "
                        "another parameterization or proposal.",
                        superchains, per_super, kRhatLimit, name_list(high_nested), run_longer)});
  if (!high_rhat.empty())
    out.push_back(
        {3, fmt::format(
                "R-hat is above {} for {}: the {} not agree, so the draws are not yet a sample of the "
                "target. Run longer ({}), start chains from dispersed points, and look at the trace "
                "and rank plots of the HTML report for stuck or separated chains; several modes need "
                "another parameterization or proposal.",
                kRhatLimit, name_list(high_rhat),
                chains > 1 ? "chains (and the halves of each chain) do" : "two halves of the chain (split R-hat) do",
                run_longer)});
  if (!low_ess.empty())
    out.push_back(
        {2, fmt::format("Bulk- or tail-ESS is below {:.0f} ({}) for {}: the "
                        "Monte Carlo errors (MCSE) of means and quantiles are large. Run longer ({}), or make "
                        "the chain mix faster: {}",
                        ess_min, ess_threshold_reason(chains), name_list(low_ess), run_longer,
                        // No acceptance rate: draws of another sampler (herd-diagnose), whose
                        // settings are not herd-sample's.
                        std::isfinite(acceptance_rate)
                            ? "tune the proposal (scale_factor, proposal_std or proposal_cov), enable delayed "
                              "rejection (delayed_rejection_count), or reparameterize."
                            : "tune the sampler (its proposal or step size), or reparameterize.")});
  const double a = acceptance_rate;
  if (std::isfinite(a) && a < kAcceptanceLow)
    out.push_back({2, fmt::format("The mean acceptance rate is {:.3g}, below {}: most proposals are rejected and the "
                                  "chain rarely moves. Make the proposal smaller (a smaller scale_factor such as "
                                  "\"0.5*gelman\", or smaller proposal_std), enable delayed rejection "
                                  "(delayed_rejection_count = 2 to 4), and check start_point and the domain.",
                                  a, kAcceptanceLow)});
  if (std::isfinite(a) && a > kAcceptanceHigh)
    out.push_back({2, fmt::format("The mean acceptance rate is {:.3g}, above {}: the steps are so small that the chain "
                                  "explores slowly. Make the proposal larger (a larger scale_factor or proposal_std).",
                                  a, kAcceptanceHigh)});
  if (!rhat_only.empty())
    out.push_back({1, fmt::format("R-hat is above {} for {}, but nested R-hat over {} superchains is not: with many "
                                  "short chains each chain and its halves need not agree yet, only the superchains "
                                  "(Margossian et al. 2024), so nested R-hat is the test that applies.",
                                  kRhatLimit, name_list(rhat_only), superchains)});
  // With no quantity judged, nothing was checked: a problem to fix, not a note beside a
  // green "OK" (4 chains of 1 draw each read "OK: R-hat is at most 1.01 ... for every
  // quantity with defined diagnostics", and the terminal warned of nothing).
  const std::size_t nq = std::min(s.size(), names.size());
  if (!undefined.empty() && undefined.size() == nq)
    out.push_back({2, fmt::format("R-hat and ESS are undefined (NA) for every quantity ({}): too few draws (ESS "
                                  "needs at least 6 per chain), constant draws or a non-finite draw, so convergence "
                                  "cannot be judged. Run longer ({}) and check that the chains move.",
                                  name_list(undefined), run_longer)});
  else if (!undefined.empty())
    out.push_back({1, fmt::format("R-hat or ESS is undefined (NA) for {}: constant draws, a non-finite draw, too "
                                  "few draws (ESS needs at least 6 per chain), or for the tail ESS a 5% or 95% "
                                  "quantile at the smallest or largest draw (discrete draws).",
                                  name_list(undefined))});
  if (std::all_of(out.begin(), out.end(), [](const ReportVerdict& v) { return v.level <= 1; })) {
    std::string acc = std::isfinite(a) ? fmt::format("; the mean acceptance rate {:.3g} is within [{}, {}]", a,
                                                     kAcceptanceLow, kAcceptanceHigh)
                                       : std::string();
    out.insert(out.begin(), {0, fmt::format("{} is at most {} and bulk- and tail-ESS at least {:.0f} for every "
                                            "quantity with defined diagnostics{}.",
                                            judged_nested ? fmt::format("Nested R-hat over {} superchains", superchains)
                                                          : std::string("R-hat"),
                                            kRhatLimit, ess_min, acc)});
  }
  return out;
}

void write_posterior_report(const std::string& path, const PosteriorReportData& d) {
  const std::string html = posterior_report_html(d);
  io::write_file_atomic(path, std::as_bytes(std::span<const char>(html.data(), html.size())));
}

std::string posterior_report_html(const PosteriorReportData& d) {
  check(d);
  const std::size_t nq = d.names.size();
  const bool summarize_here = d.summary.empty();
  std::vector<DiagnosticSummary> summary = d.summary;
  summary.resize(nq);
  const std::size_t ns = d.sampled == 0 ? nq : std::min(d.sampled, nq);
  const std::size_t pc = plotted_chains(d);
  const std::size_t pq = std::min(nq, kPlotQuantities);
  const bool thinned = d.draws > kTracePoints;
  // The corner plot's quantities (with 2 or more sampled coordinates) and the covariance
  // figure's pairs (0, 1), (2, 3), (4, 5) of sampled coordinates: all among the plotted ones.
  static_assert(kCornerQuantities <= kPlotQuantities && 6 <= kPlotQuantities);
  const std::size_t corner = ns >= 2 ? std::min(ns, kCornerQuantities) : 0;
  const bool have_cov = !d.final_covariances.empty() || !d.start_covariance.empty();
  const std::size_t pairs = have_cov ? std::min<std::size_t>(3, ns / 2) : 0;

  // One pass over the quantities, each expanded once: its summary (when not given), its
  // panels and thinned draws, and with the one before it the pair's covariance sums; the
  // quantities go in pairs (0, 1), (2, 3), ... to the threads in turn, each thread holding
  // at most two quantities' draws (the current and the one before). Every result has its
  // own slot, so any number of threads gives the same numbers.
  const auto trace_idx = io::thin_indices(d.draws, kTracePoints);
  const auto scatter_idx = pooled_thin(d, kCornerPoints);
  const std::vector<std::size_t> no_idx;
  std::vector<QuantityPlots> plotted(pq);
  std::vector<std::array<double, 3>> pair_sum(pairs);
  {
    const std::size_t passes = summarize_here ? nq : pq;
    const std::size_t units = (passes + 1) / 2;
    const std::size_t nthreads = std::clamp<std::size_t>(d.threads, 1, std::max<std::size_t>(units, 1));
    std::vector<std::exception_ptr> error(nthreads);
    std::vector<std::size_t> error_at(nthreads, passes);
    std::vector<std::vector<double>> own;
    std::vector<std::vector<double>>& buffer_set = d.buffers != nullptr ? *d.buffers : own;
    if (buffer_set.size() < 2 * nthreads) buffer_set.resize(2 * nthreads);
    const auto work = [&](std::size_t t) {
      const std::array<std::vector<double>*, 2> buffers{&buffer_set[2 * t], &buffer_set[2 * t + 1]};
      std::vector<double> acf_scratch;
      std::size_t q = 0;
      try {
        if (d.open_states) {  // the states block by block (passes == pq: the summary is given)
          BlockBuffers blocks;
          for (std::size_t u = t; u < units; u += nthreads) {
            q = 2 * u;
            const std::size_t count = std::min<std::size_t>(2, passes - q);
            const auto scatter = [&](std::size_t k) {
              return std::span<const std::size_t>(q + k < std::max(corner, 2 * pairs) ? scatter_idx : no_idx);
            };
            plot_blocked(d, q, count, summary, trace_idx, {scatter(0), scatter(1)}, count == 2 && u < pairs, plotted,
                         u < pairs ? &pair_sum[u] : nullptr, q, blocks, acf_scratch);
          }
          return;
        }
        for (std::size_t u = t; u < units; u += nthreads) {
          QuantityDraws before;
          for (q = 2 * u; q < std::min(2 * u + 2, passes); ++q) {
            const QuantityDraws v = quantity_draws(d, q, *buffers[q % 2]);
            if (summarize_here) summary[q] = summarize(DrawsView(v.v, d.chains, d.draws));  // (values only)
            if (q < pq)
              plotted[q] = plot_quantity(d, q, v, summary[q], trace_idx,
                                         q < std::max(corner, 2 * pairs) ? scatter_idx : no_idx, acf_scratch);
            if (q % 2 == 1 && q / 2 < pairs)
              pair_sum[q / 2] = pair_sums(before, v, summary[q - 1].mean, summary[q].mean);
            before = v;
          }
        }
      } catch (...) {
        error[t] = std::current_exception();
        error_at[t] = q;
      }
    };
    {
      std::vector<std::jthread> helpers;
      for (std::size_t t = 1; t < nthreads; ++t) helpers.emplace_back(work, t);
      work(0);
    }  // joined
    const auto first = std::min_element(error_at.begin(), error_at.end());
    if (*first < passes) std::rethrow_exception(error[static_cast<std::size_t>(first - error_at.begin())]);
  }

  // The panels of one kind, one per plotted quantity (moved out of `plotted`).
  auto panels = [&](Plot QuantityPlots::*kind) {
    std::vector<Plot> plots;
    plots.reserve(plotted.size());
    for (auto& qp : plotted) plots.push_back(std::move(qp.*kind));
    return plots;
  };
  // The corner plot's Vega spec (its scatter panels: most of the document's numbers to
  // format) on a second thread while this one lays out the rest: the same bytes.
  const auto corner_spec = [&]() -> std::string {
    if (corner < 2) return {};
    const std::size_t k = corner;
    // Each column takes its cell plus about 81 px (the y axis's ticks and labels, the axis
    // title and the grid's padding; measured in Chromium): with 900 / k the 6-coordinate grid
    // was 1380 px wide and the 10-coordinate one 1690 px, past the page's 1200 px, and
    // their last columns were scrolled out of view. Cells of at least 60 px: up to 8
    // columns fit about 1130 px.
    const int cell = std::clamp(static_cast<int>(1080 / k) - 81, 60, 170);
    std::vector<Plot> plots;
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        Plot p;
        p.width = p.height = cell;
        if (j > i) {
          p.empty = true;
        } else if (i == j) {
          p.title = d.names[i];
          p.zero = true;
          p.series.push_back(plotted[i].pooled);
        } else {
          p.series.emplace_back(d.names[j] + " vs " + d.names[i], plotted[j].thinned, plotted[i].thinned,
                                PlotSeries::Mark::kPoint);
          p.series.back().opacity = 0.35;
        }
        // Shared ranges: column j's x and row i's y are the same in every panel.
        p.x_min = plotted[j].lo;
        p.x_max = plotted[j].hi;
        if (i != j) {
          p.y_min = plotted[i].lo;
          p.y_max = plotted[i].hi;
        }
        if (i == k - 1) p.x_label = d.names[j];
        if (j == 0 && i > 0) p.y_label = d.names[i];
        plots.push_back(std::move(p));
      }
    return vega_spec(plots, static_cast<int>(k));
  };
  // (Reads plotted[].pooled, .thinned, .lo, .hi, which the figures below do not move.)
  std::future<std::string> corner_ready =
      std::async(d.threads >= 2 ? std::launch::async : std::launch::deferred, corner_spec);

  HtmlReport r(d.title, d.subtitle);
  // --- run facts and verdicts
  r.heading("Run");
  if (!d.facts.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, v] : d.facts) rows.push_back({k, v});
    r.table({"", ""}, rows);
  }
  r.heading("Convergence");
  for (const ReportVerdict& v : convergence_verdicts(d, summary))
    r.note(v.level == 0   ? Level::kOk
           : v.level == 1 ? Level::kInfo
           : v.level == 2 ? Level::kWarning
                          : Level::kProblem,
           v.text);
  for (const std::string& w : d.warnings) r.note(Level::kWarning, w);
  if (d.superchains_share_start && d.superchains >= 2 && !d.nested_rhat.empty())
    r.note(Level::kInfo,
           fmt::format("Every chain started from the same point, so the {} superchains were not started from "
                       "dispersed points, as nested R-hat assumes (Margossian et al. 2024): they share whatever "
                       "is left of that start, which nested R-hat then cannot show (R-hat and the trace plots "
                       "can). To check it, start each superchain from its own point: random_start_point = true "
                       "with a start box wider than the posterior (random_start_point_domain_lower/upper) and "
                       "random_start_point_scope = \"superchain\".",
                       d.superchains));
  for (const std::string& n : d.notes) r.note(Level::kInfo, n);

  // --- summary table
  r.heading("Summary");
  {
    std::vector<std::vector<std::string>> rows;
    std::vector<Level> levels;
    const double ess_min = ess_threshold(d.chains);
    // With superchains the verdicts judge nested R-hat (R-hat alone above the limit is a
    // note): the table shows it and colours by it, as the verdicts do. Before, it had no such
    // column (a note pointed to _report.txt) and coloured rows red by R-hat beside "OK".
    const bool nested = d.superchains >= 2 && !d.nested_rhat.empty();
    const auto nested_of = [&](std::size_t q) { return q < d.nested_rhat.size() ? d.nested_rhat[q] : kNaN; };
    for (std::size_t q = 0; q < nq; ++q) {
      const auto& s = summary[q];
      rows.push_back({d.names[q], num(s.mean), num(s.sd), num(s.q5), num(s.q50), num(s.q95), num(s.mcse_mean),
                      num(s.mcse_sd), beside_limit(s.ess_bulk, ess_min, 0), beside_limit(s.ess_tail, ess_min, 0),
                      beside_limit(s.rhat, kRhatLimit, 4)});
      if (nested) rows.back().push_back(beside_limit(nested_of(q), kRhatLimit, 4));
      const double judged = nested && std::isfinite(nested_of(q)) ? nested_of(q) : s.rhat;
      const bool bad_rhat = std::isfinite(judged) && judged > kRhatLimit;
      const bool bad_ess = std::isfinite(s.ess_bulk) && std::min(s.ess_bulk, s.ess_tail) < ess_min;
      levels.push_back(bad_rhat ? Level::kProblem : bad_ess ? Level::kWarning : Level::kInfo);
    }
    std::vector<std::string> header{"quantity",  "mean",    "sd",       "q5",       "q50", "q95",
                                    "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat"};
    if (nested) header.emplace_back("nested_rhat");
    r.table(header, rows, levels);
    r.paragraph(fmt::format(
        "{} chain{} x {} draws. R-hat: rank-normalized split R-hat, the larger of bulk and tail; "
        "ESS and MCSE as R posterior and ArviZ compute them (Vehtari et al. 2021).{} Rows in red "
        "have {} > {}, in yellow bulk- or tail-ESS < {:.0f}.",
        d.chains, d.chains == 1 ? "" : "s", d.draws,
        nested ? fmt::format(" nested_rhat: nested R-hat over {} superchains of {} chains (Margossian et al. "
                             "2024), the test for many short chains, judged instead of R-hat.",
                             d.superchains, d.chains / d.superchains)
               : std::string(),
        nested ? "nested R-hat" : "R-hat", kRhatLimit, ess_min));
  }
  for (const ReportTable& t : d.tables) {
    r.heading(t.title);
    r.table(t.header, t.rows);
    if (!t.caption.empty()) r.paragraph(t.caption);
  }

  r.heading("Plots");
  const std::string shown_q =
      nq > pq ? fmt::format(" The first {} of {} quantities are shown.", pq, nq) : std::string();
  const std::string shown_c =
      d.chains > pc ? fmt::format(" The first {} of {} chains are drawn.", pc, d.chains) : std::string();
  // --- traces
  r.figure(panels(&QuantityPlots::trace), 2,
           "Trace of each quantity per chain (draw number after burn-in). Chains that wander apart or stay flat "
           "for long stretches have not mixed." +
               (thinned ? fmt::format(" Thinned for plotting to {} evenly spaced draws per chain.", trace_idx.size())
                        : std::string()) +
               shown_q + shown_c,
           "trace");
  // --- marginal densities
  r.figure(panels(&QuantityPlots::density), 3,
           fmt::format("Marginal posterior densities: Gaussian kernel density estimates (Silverman's bandwidth) of "
                       "all draws{}.",
                       pc > 1 ? " (black) and of each chain (colours): per-chain curves that differ mean the chains "
                                "have not converged to the same distribution"
                              : "") +
               shown_q + shown_c,
           "density");
  // --- corner plot
  const std::string corner_json = corner_ready.get();
  if (corner >= 2) {
    const std::size_t k = corner;
    r.figure_spec(
        corner_json,
        fmt::format("Corner plot: pairwise scatter of {} draws (evenly thinned over all chains) below the "
                    "diagonal, marginal densities on it.{}",
                    scatter_idx.size(),
                    ns > k ? fmt::format(" The first {} of {} sampled coordinates are shown.", k, ns) : std::string()),
        "corner");
  }
  // --- autocorrelation
  r.figure(
      panels(&QuantityPlots::autocorrelation), 3,
      "Autocorrelation of each chain's draws by lag (direct sums about the chain's mean)" +
          (d.draws > kAcfDraws ? fmt::format(", from the first {} draws of each chain", kAcfDraws) : std::string()) +
          ". Slow decay means few effective draws per draw." + shown_q + shown_c,
      "autocorrelation");
  // --- rank plots
  if (d.chains >= 2)
    r.figure(panels(&QuantityPlots::rank), 3,
             fmt::format("Rank plots (Vehtari et al. 2021): histograms of each chain's draws over {} bins of the "
                         "ranks of all draws pooled. Mixed chains give flat histograms near the dashed line ({} "
                         "draws per bin); a chain above it at one end and below at the other sits apart from the "
                         "rest.",
                         kRankBins,
                         // Whole draws from 100 up ({:.4g} wrote 14878.5 as "1.488e+04").
                         d.draws >= 100 * kRankBins ? fmt::format("{:.0f}", static_cast<double>(d.draws) / kRankBins)
                                                    : fmt::format("{:.4g}", static_cast<double>(d.draws) / kRankBins)) +
                 shown_q + shown_c,
             "rank");
  // --- the sampler over the run
  r.heading("Sampler");
  if (!d.history.empty()) {
    const std::size_t hc = std::min(d.history.size(), kPlotChains);
    Plot acc, ad;
    acc.title = "acceptance rate";
    acc.x_label = "proposal";
    acc.y_label = "acceptance rate";
    acc.y_rules = {kAcceptanceLow, kAcceptanceHigh};
    acc.zero = true;
    acc.legend = hc > 1;
    acc.width = ad.width = 480;
    acc.height = ad.height = 200;
    ad.title = "adaptation measure";
    ad.x_label = "proposal";
    ad.y_label = "adaptation measure";
    ad.log_y = true;
    for (std::size_t c = 0; c < hc; ++c) {
      const ChainHistory& h = d.history[c];
      const std::string label = fmt::format("chain {}", h.chain_id + 1);
      acc.series.emplace_back(label, h.proposals, h.acceptance);
      ad.series.emplace_back(label, h.proposals, h.adaptation);
    }
    r.figure({acc}, 1,
             fmt::format(
                 "Acceptance rate over the run, in windows of proposals{}; dashed: the range [{}, {}] outside "
                 "which the report warns.",
                 d.history.size() > hc ? fmt::format(" (first {} of {} chains)", hc, d.history.size()) : std::string(),
                 kAcceptanceLow, kAcceptanceHigh),
             "acceptance");
    r.figure({ad}, 1,
             "Adaptation measure over the run (largest in each window, log scale): how much each adaptive update "
             "changed the proposal (an upper bound of the Hellinger distance between successive proposal "
             "distributions, as ParaDRAM reports it). It should fall towards 0 as the proposal settles; windows "
             "without an accepted state or with measure 0 are not drawn.",
             "adaptation");
  } else {
    r.note(Level::kInfo,
           d.history_note.empty() ? "The sampler's course over the run was not recorded." : d.history_note);
  }
  // --- proposal covariance ellipses
  const std::size_t dc = ns;
  if (pairs > 0) {
    std::vector<Plot> plots;
    for (std::size_t pair = 0; pair < pairs; ++pair) {
      const std::size_t a = 2 * pair, b = a + 1;
      const double ma = summary[a].mean, mb = summary[b].mean;
      Plot p;
      p.title = d.names[a] + " - " + d.names[b];
      p.x_label = d.names[a];
      p.y_label = d.names[b];
      p.legend = plots.empty();
      p.width = p.height = 260;
      PlotSeries pts("draws", plotted[a].thinned, plotted[b].thinned, PlotSeries::Mark::kPoint);
      pts.color = "#bbbbbb";
      pts.opacity = 0.5;
      p.series.push_back(std::move(pts));
      // Posterior covariance of the two coordinates (all draws).
      const auto [saa, sab, sbb] = pair_sum[pair];
      const double div = std::max<double>(1.0, static_cast<double>(d.chains * d.draws) - 1.0);
      PlotSeries post = ellipse(saa / div, sab / div, sbb / div, ma, mb, "posterior covariance");
      post.color = "#222222";
      post.dashed = true;
      p.series.push_back(std::move(post));
      auto at = [dc](const std::vector<double>& m, std::size_t i, std::size_t j) { return m[i * dc + j]; };
      if (d.start_covariance.size() == dc * dc) {
        PlotSeries s = ellipse(at(d.start_covariance, a, a), at(d.start_covariance, a, b), at(d.start_covariance, b, b),
                               ma, mb, "start proposal");
        s.color = "#54a24b";
        p.series.push_back(std::move(s));
      }
      std::size_t shown = 0;
      for (const auto& [label, cov] : d.final_covariances) {
        if (cov.size() != dc * dc || shown == 4) continue;
        PlotSeries s = ellipse(at(cov, a, a), at(cov, a, b), at(cov, b, b), ma, mb, label);
        s.color = std::array<const char*, 4>{"#e45756", "#4c78a8", "#f58518", "#b279a2"}[shown++];
        p.series.push_back(std::move(s));
      }
      plots.push_back(std::move(p));
    }
    r.figure(plots, 3,
             "Proposal covariance in 2-D slices of consecutive coordinates: 1-sigma contours of the start and final "
             "proposal covariances (centred on the posterior mean), over the posterior's own covariance (dashed) "
             "and thinned draws. An adapted proposal has the posterior's orientation, scaled by scale_factor. " +
                 d.covariance_note,
             "covariance");
  } else {
    r.note(Level::kInfo, dc < 2 ? "Proposal-covariance ellipses need at least 2 sampled coordinates."
                         : d.covariance_note.empty() ? "The proposal covariance of this run is not known."
                                                     : d.covariance_note);
  }
  if (!d.resolved_input.empty()) {
    r.heading("Input");
    r.preformatted(d.resolved_input);
  }
  return r.html();
}

}  // namespace herd::mcmc
