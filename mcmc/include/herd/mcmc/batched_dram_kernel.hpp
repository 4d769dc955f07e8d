#pragma once
/// @file batched_dram_kernel.hpp
/// The per-chain math of the batched DRAM sampler (batched_dram.hpp), written once as
/// `HERD_HOST_DEVICE` inline functions: the host path calls them in a loop over chains on
/// the thread pool, the CUDA path (herd/mcmc/cuda/batched_dram.cuh) calls them from one
/// thread per chain. No Eigen, no allocation, no exceptions: plain pointers into
/// struct-of-arrays state (`[M, ...]` row-major, chain i's rows at offset i).
///
/// Random numbers (the reproducibility contract of the serial kernel, dram.hpp, reused
/// unchanged): proposal number k of the chain with *global* id c draws
///   - its stage-1 normals with `ziggurat_normals` from `RngStream(seed, c, kProposal).at(k)`,
///   - the acceptance uniforms of its stages 1, 2, ... in order from
///     `RngStream(seed, c, kAcceptance).at(k)`,
///   - the normals of its delayed-rejection stages 2, 3, ... in order from
///     `RngStream(seed, c, kDelayedRejection).at(k)`,
/// exactly as `DramSampler` (Gaussian proposal) does. The trial point of stage s is
/// x + c_s L z with the same floating-point operations as the serial kernel, and the
/// delayed-rejection acceptance probability is the serial kernel's full-Hastings recursion
/// (Tierney & Mira 1999; Mira 2001; Haario et al. 2006) operation for operation. So with
/// the same proposal factor L, a host-path chain is bit-identical to `DramSampler`'s chain
/// of the same global id (tests/mcmc/test_batched_dram.cpp checks it); on the device
/// integers and uniforms are bit-identical and normals may differ in the last bits
/// (exp/log), so device chains are statistically equivalent.
///
/// Thread-safety: every function touches only chain i's rows (and reads shared, immutable
/// parameters), so distinct chains may be advanced concurrently.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "herd/core/host_device.hpp"
#include "herd/core/rng.hpp"
#include "herd/core/ziggurat.hpp"

namespace herd::mcmc::batched {

/// Most stages (1 + delayed-rejection stages) of the batched kernel.
inline constexpr int kMaxStages = 5;
/// Points on a delayed-rejection path (start + kMaxStages trials).
inline constexpr int kMaxPath = kMaxStages + 1;

/// Parameters shared by all chains (a trivially copyable value, passed to kernels).
struct KernelParams {
  int d = 0;                                                   ///< dimension
  int stages = 1;                                              ///< 1 + delayed-rejection stages (<= kMaxStages)
  double stage_scale[kMaxStages] = {1.0, 1.0, 1.0, 1.0, 1.0};  ///< c_1 = 1, c_2, ...
  std::uint64_t seed = 0;                                      ///< the run's seed (Philox key)
  std::uint32_t first_chain_id = 0;                            ///< global chain id of row 0
  bool has_box = false;                                        ///< whether `lower`/`upper` apply
  const double* lower = nullptr;                               ///< domain box `[d]` (host or device memory)
  const double* upper = nullptr;                               ///< `[d]`
  const ZigguratTables* zig = nullptr;                         ///< ziggurat tables (host or device memory)
  bool chol_per_chain = false;                                 ///< `chol` is `[M, d, d]` (else one shared `[d, d]`)
  bool adapting = false;                                       ///< accumulate warm-up statistics after each proposal
};

/// Struct-of-arrays state of M chains; all pointers are host or device memory.
struct ChainArrays {
  double* x = nullptr;                    ///< current states `[M, d]`
  double* lp = nullptr;                   ///< their log densities `[M]`
  double* y = nullptr;                    ///< trial point of the pending stage `[M, d]`
  double* w = nullptr;                    ///< whitened delayed-rejection path `[M, stages + 1, d]` (w_0 = 0)
  double* lpath = nullptr;                ///< log densities along the path `[M, stages + 1]`
  double* chol = nullptr;                 ///< proposal factor(s) L, lower, row-major: `[d, d]` or `[M, d, d]`
  std::int32_t* stage = nullptr;          ///< stage of the pending trial `[M]` (0: none)
  std::uint8_t* inside = nullptr;         ///< pending trial inside the domain box `[M]`
  RngCursor* dr_cursor = nullptr;         ///< delayed-rejection cursor of the proposal `[M]`
  std::int64_t* accepted = nullptr;       ///< accepted proposals per stage `[M, stages]`
  std::int64_t* out_of_domain = nullptr;  ///< trials outside the box `[M]`
  std::int64_t* nan_count = nullptr;      ///< NaN log densities (counted as -inf) `[M]`
  std::int64_t* posinf_count = nullptr;   ///< +inf log densities (an error; treated as -inf) `[M]`
  // Warm-up statistics since the last adaptive update, about a reference point:
  double* ad_n = nullptr;          ///< proposals accumulated `[M]`
  double* ad_s1 = nullptr;         ///< sum of (x - ref) `[M, d]`
  double* ad_s2 = nullptr;         ///< sum of (x - ref)(x - ref)^T, lower triangle, `[M, d, d]`
  const double* ad_ref = nullptr;  ///< reference point: `[d]` (shared) or `[M, d]` (chol_per_chain)
  // The current state's record, as the serial kernel's `ChainRecord` (dram.hpp), written at
  // each acceptance (a few stores per accepted proposal; read only at recorded draws):
  std::uint64_t* state_step = nullptr;  ///< proposals made before the current state became current `[M]` (0: start)
  std::uint8_t* state_stage = nullptr;  ///< stage that accepted it `[M]`: 0 start point, 1 first stage, 2.. DR stages
  double* state_alpha = nullptr;        ///< acceptance probability with which it was accepted `[M]` (1: start point)
  /// Largest Hellinger distance between the proposals before and after each adaptive update
  /// made while the current state was current `[M]` (reset to 0 at each acceptance); null
  /// without adaptation (the measure is then 0).
  double* adapt_measure = nullptr;
};

/// Where the per-draw statistics of a block of recorded draws go, `[M, n]` each (row-major,
/// chain i's draw t at i n + t): host or device memory. Written at recorded (thinned) draws
/// only, by `record_stats`.
struct DrawStats {
  std::uint8_t* accepted = nullptr;  ///< 1 when the state was accepted since the previous recorded draw
  std::uint8_t* stage = nullptr;     ///< `ChainArrays::state_stage` of the recorded state
  double* alpha = nullptr;           ///< `ChainArrays::state_alpha` of the recorded state
  double* measure = nullptr;         ///< `ChainArrays::adapt_measure` of the recorded state (0 without)
};

/// Global chain id of row i.
HERD_HOST_DEVICE inline std::uint32_t chain_id(const KernelParams& p, std::size_t i) {
  return p.first_chain_id + static_cast<std::uint32_t>(i);
}

/// The proposal factor of chain i.
HERD_HOST_DEVICE inline const double* chain_chol(const KernelParams& p, const ChainArrays& a, std::size_t i) {
  return p.chol_per_chain ? a.chol + i * static_cast<std::size_t>(p.d) * p.d : a.chol;
}

/// Records chain i's per-draw statistics into `out` at `slot` (i n + t), after proposals
/// `since` .. k - 1 (the interval since the previous recorded draw, or since the end of the
/// warm-up for the first): accepted = the current state became current in that interval
/// (`state_step` > since), and the state's stage, acceptance probability and adaptation
/// measure. Does nothing when `out.accepted` is null.
HERD_HOST_DEVICE inline void record_stats(const ChainArrays& a, std::size_t i, std::uint64_t since,
                                          const DrawStats& out, std::size_t slot) {
  if (out.accepted == nullptr) return;
  out.accepted[slot] = a.state_step[i] > since ? 1 : 0;
  out.stage[slot] = a.state_stage[i];
  out.alpha[slot] = a.state_alpha[i];
  out.measure[slot] = a.adapt_measure != nullptr ? a.adapt_measure[i] : 0.0;
}

/// log(1 - exp(la)) for la <= 0 (Maechler 2012); -inf for la == 0. As dram.cpp.
HERD_HOST_DEVICE inline double log1m_exp(double la) {
  if (la >= 0.0) return -std::numeric_limits<double>::infinity();
  return la > -0.6931471805599453 ? std::log(-std::expm1(la)) : std::log1p(-std::exp(la));
}

/// y = x + L w (L lower, row-major; row dot products), the serial kernel's arithmetic.
HERD_HOST_DEVICE inline void apply_factor(const double* l, const double* w, const double* x, double* y, int d) {
  for (int i = 0; i < d; ++i) {
    const double* li = l + static_cast<std::size_t>(i) * d;
    double v = 0.0;
    for (int j = 0; j <= i; ++j) v += li[j] * w[j];
    y[i] = x[i] + v;
  }
}

/// The full-Hastings delayed-rejection acceptance probabilities of the sub-paths of one path
/// of up to `MaxPath` points (Tierney & Mira 1999; Mira 2001; Haario et al. 2006): the one
/// implementation, used by the serial kernel (`dr_log_acceptance` in dram.cpp, 16 points)
/// and the batched kernel (`dr_log_alpha`, kMaxPath points, host and device). The path is
/// whitened (w_j = L^-1 (y_j - x)), so the proposal density of stage j from a to b is, up to
/// its normalising constant (equal on both sides of the ratio), exp(-|w_b - w_a|^2 / (2 c_j^2))
/// for Gaussian proposals, or the indicator of |w_b - w_a| <= c_j when `uniform` (the
/// serial kernel's uniform-ellipsoid proposal).
///
/// The acceptance probability of the sub-path s -> e (a contiguous run of the path's points,
/// forwards or backwards) needs those of the shorter sub-paths s -> s +- j and e -> e -+ j,
/// j < |e - s|. Instead of recursing (which on a GPU is real runtime recursion, whose stack
/// the driver's per-thread reservation does not cover), `log_alpha` fills a table over every
/// sub-path of the points between s and e by increasing length, both directions, then reads
/// the entry. Every entry is computed by the same floating-point operations in the same
/// order as the textbook recursion, so the results are bitwise those of the recursive form
/// (tests/mcmc/test_dram.cpp compares them on random paths). Cost O(m^3) for m + 1 points, no
/// heap, about 2 * MaxPath^2 doubles of local memory.
///
/// Fill `d`, `w` `[m + 1, d]`, `lp` `[m + 1]`, `scale` (c_1 = 1, c_2, ...) and `uniform`,
/// then call `log_alpha(0, m)`. NaN: none arise from finite inputs; -inf log densities are
/// handled (a -inf end gives -inf, a -inf denominator gives 0). Not thread-safe per object;
/// one object per thread/chain.
template <int MaxPath>
struct DrRecursion {
  int d = 0;
  const double* w = nullptr;       ///< `[m + 1, d]` whitened path
  const double* lp = nullptr;      ///< `[m + 1]`
  const double* scale = nullptr;   ///< stage scales c_1 = 1, c_2, ...
  bool uniform = false;            ///< uniform (ellipsoid) proposals instead of Gaussian ones
  double dist2[MaxPath][MaxPath];  ///< squared whitened distances of the points in [lo, hi]
  double table[MaxPath][MaxPath];  ///< log acceptance of sub-path a -> b, filled by `log_alpha`

  /// log q_j(a -> b) up to the normalising constant (dist2 must hold a, b).
  HERD_HOST_DEVICE double log_q(int j, int a, int b) const {
    const double c = scale[j - 1];
    const double r2 = dist2[a][b] / (c * c);
    if (!uniform) return -0.5 * r2;
    return r2 <= 1.0 ? 0.0 : -std::numeric_limits<double>::infinity();
  }
  /// log of the acceptance probability of the sub-path from point s to point e (s != e,
  /// both in [0, MaxPath)). Fills `dist2` and `table` for every pair of points between them.
  HERD_HOST_DEVICE double log_alpha(int s, int e) {
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    const int lo = s < e ? s : e, hi = s < e ? e : s;
    for (int a = lo; a <= hi; ++a)
      for (int b = a + 1; b <= hi; ++b) {
        const double* pa = w + static_cast<std::size_t>(a) * d;
        const double* pb = w + static_cast<std::size_t>(b) * d;
        double q = 0.0;
        for (int i = 0; i < d; ++i) q += (pa[i] - pb[i]) * (pa[i] - pb[i]);
        dist2[a][b] = dist2[b][a] = q;
      }
    for (int len = 1; len <= hi - lo; ++len)
      for (int a = lo; a + len <= hi; ++a)
        for (int dir = 1; dir >= -1; dir -= 2) {
          // The sub-path f -> t of `len` points after f, in direction dir.
          const int f = dir > 0 ? a : a + len, t = dir > 0 ? a + len : a;
          double res;
          if (lp[t] == kNegInf) {
            res = kNegInf;
          } else {
            double num = lp[t], den = lp[f];
            for (int j = 1; j < len && num != kNegInf; ++j) {
              den += log_q(j, f, f + dir * j) + log1m_exp(table[f][f + dir * j]);
              num += log_q(j, t, t - dir * j) + log1m_exp(table[t][t - dir * j]);
            }
            if (num == kNegInf) res = kNegInf;
            else if (den == kNegInf) res = 0.0;
            else res = num - den < 0.0 ? num - den : 0.0;  // min(0, num - den); NaN -> 0 as std::min(0.0, .)
          }
          table[f][t] = res;
        }
    return table[s][e];
  }
};

/// Log of the full-Hastings delayed-rejection acceptance probability of the last point of
/// the path w_0 .. w_m (`m` in [2, kMaxStages]), Gaussian proposals; see `dr_log_acceptance`
/// in dram.hpp.
HERD_HOST_DEVICE inline double dr_log_alpha(int m, int d, const double* w, const double* lp, const double* scale) {
  DrRecursion<kMaxPath> r;
  r.d = d;
  r.w = w;
  r.lp = lp;
  r.scale = scale;
  return r.log_alpha(0, m);
}

/// Whether `y` lies in the domain box (always true without one).
HERD_HOST_DEVICE inline bool in_box(const KernelParams& p, const double* y) {
  if (!p.has_box) return true;
  bool inside = true;
  for (int i = 0; i < p.d; ++i) inside &= (y[i] >= p.lower[i]) & (y[i] <= p.upper[i]);
  return inside;
}

/// The acceptance uniform of `stage` (1-based) of proposal k of global chain `cid`.
HERD_HOST_DEVICE inline double acceptance_uniform(const KernelParams& p, std::uint32_t cid, std::uint64_t k,
                                                  int stage) {
  RngCursor c = RngStream(p.seed, cid, RngPurpose::kAcceptance).at(k);
  double u = c.uniform();
  for (int s = 2; s <= stage; ++s) u = c.uniform();
  return u;
}

/// Starts proposal k of chain i: stage-1 normals into path row 1, the trial point into y.
HERD_HOST_DEVICE inline void begin_proposal(const KernelParams& p, const ChainArrays& a, std::size_t i,
                                            std::uint64_t k) {
  const int d = p.d;
  const std::size_t np = static_cast<std::size_t>(p.stages) + 1;
  double* w = a.w + i * np * d;
  double* y = a.y + i * static_cast<std::size_t>(d);
  RngCursor c = RngStream(p.seed, chain_id(p, i), RngPurpose::kProposal).at(k);
  ziggurat_normals(c, *p.zig, w + d, d);
  apply_factor(chain_chol(p, a, i), w + d, a.x + i * static_cast<std::size_t>(d), y, d);
  const bool inside = in_box(p, y);
  if (!inside) ++a.out_of_domain[i];
  a.inside[i] = inside ? 1 : 0;
  a.stage[i] = 1;
}

/// The log density of the pending trial as the kernel uses it: NaN counts as -inf
/// (counted), +inf is counted as an error (the host reports it) and treated as -inf.
HERD_HOST_DEVICE inline double checked_log_density(const ChainArrays& a, std::size_t i, double v) {
  if (std::isnan(v)) {
    ++a.nan_count[i];
    return -std::numeric_limits<double>::infinity();
  }
  if (v == std::numeric_limits<double>::infinity()) {
    ++a.posinf_count[i];
    return -std::numeric_limits<double>::infinity();
  }
  return v;
}

/// Decides the pending stage of proposal k of chain i given the log density `lp` of its
/// trial (already checked; ignored when the trial is outside the box). Returns true when
/// a further delayed-rejection trial is pending in y (evaluate it and call again).
HERD_HOST_DEVICE inline bool finish_stage(const KernelParams& p, const ChainArrays& a, std::size_t i, std::uint64_t k,
                                          double lp) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int d = p.d;
  const std::size_t du = static_cast<std::size_t>(d);
  const std::size_t np = static_cast<std::size_t>(p.stages) + 1;
  double* w = a.w + i * np * du;
  double* lpath = a.lpath + i * np;
  double* x = a.x + i * du;
  double* y = a.y + i * du;
  const int st = a.stage[i];
  if (!a.inside[i]) lp = kNegInf;
  double la;
  if (st == 1) {
    la = lp - a.lp[i] < 0.0 ? lp - a.lp[i] : 0.0;
  } else {
    lpath[st] = lp;
    la = dr_log_alpha(st, d, w, lpath, p.stage_scale);
  }
  const double u = acceptance_uniform(p, chain_id(p, i), k, st);
  const double alpha = la == 0.0 ? 1.0 : std::exp(la);
  if (u < alpha) {
    for (int j = 0; j < d; ++j) x[j] = y[j];
    a.lp[i] = lp;
    ++a.accepted[i * static_cast<std::size_t>(p.stages) + (st - 1)];
    a.state_step[i] = k + 1;
    a.state_stage[i] = static_cast<std::uint8_t>(st);
    a.state_alpha[i] = alpha;
    if (a.adapt_measure != nullptr) a.adapt_measure[i] = 0.0;
    a.stage[i] = 0;
    return false;
  }
  if (st == p.stages) {
    a.stage[i] = 0;
    return false;
  }
  if (st == 1) {
    for (int j = 0; j < d; ++j) w[j] = 0.0;
    lpath[0] = a.lp[i];
    lpath[1] = lp;
    a.dr_cursor[i] = RngStream(p.seed, chain_id(p, i), RngPurpose::kDelayedRejection).at(k);
  }
  double* ws = w + static_cast<std::size_t>(st + 1) * du;
  ziggurat_normals(a.dr_cursor[i], *p.zig, ws, d);
  const double cs = p.stage_scale[st];
  for (int j = 0; j < d; ++j) ws[j] = cs * ws[j];
  apply_factor(chain_chol(p, a, i), ws, x, y, d);
  const bool inside = in_box(p, y);
  if (!inside) ++a.out_of_domain[i];
  a.inside[i] = inside ? 1 : 0;
  a.stage[i] = st + 1;
  return true;
}

/// Adds chain i's current state to its warm-up statistics (after a proposal).
HERD_HOST_DEVICE inline void accumulate(const KernelParams& p, const ChainArrays& a, std::size_t i) {
  const int d = p.d;
  const std::size_t du = static_cast<std::size_t>(d);
  const double* x = a.x + i * du;
  const double* ref = p.chol_per_chain ? a.ad_ref + i * du : a.ad_ref;
  double* s1 = a.ad_s1 + i * du;
  double* s2 = a.ad_s2 + i * du * du;
  a.ad_n[i] += 1.0;
  for (int r = 0; r < d; ++r) {
    const double cr = x[r] - ref[r];
    s1[r] += cr;
    double* row = s2 + static_cast<std::size_t>(r) * du;
    for (int c = 0; c <= r; ++c) row[c] += cr * (x[c] - ref[c]);
  }
}

/// One pairwise step of the pooled-adaptation summation tree (docs/batched.md "Pooled across
/// ranks"): adds the warm-up statistics of row `r` (n, s1 `[d]`, s2 lower triangle `[d, d]`)
/// into row `l`, in place. Row `l` then holds the node covering both rows' chains. Touches
/// rows l and r only, so distinct pairs may be added concurrently.
HERD_HOST_DEVICE inline void pooled_pair_add(const ChainArrays& a, int d, std::size_t l, std::size_t r) {
  const std::size_t du = static_cast<std::size_t>(d);
  a.ad_n[l] += a.ad_n[r];
  for (std::size_t j = 0; j < du; ++j) a.ad_s1[l * du + j] += a.ad_s1[r * du + j];
  double* sl = a.ad_s2 + l * du * du;
  const double* sr = a.ad_s2 + r * du * du;
  for (std::size_t row = 0; row < du; ++row)
    for (std::size_t c = 0; c <= row; ++c) sl[row * du + c] += sr[row * du + c];
}

/// One whole proposal (all stages) of chain i with a point log density `f` evaluated
/// inline (`double f(const double* x, int d)`, host/device callable), then the warm-up
/// accumulation when adapting. The fused path of functor targets.
template <class F>
HERD_HOST_DEVICE inline void fused_proposal(const KernelParams& p, const ChainArrays& a, std::size_t i, std::uint64_t k,
                                            const F& f) {
  const std::size_t du = static_cast<std::size_t>(p.d);
  begin_proposal(p, a, i, k);
  for (;;) {
    const double lp =
        a.inside[i] ? checked_log_density(a, i, f(a.y + i * du, p.d)) : -std::numeric_limits<double>::infinity();
    if (!finish_stage(p, a, i, k, lp)) break;
  }
  if (p.adapting) accumulate(p, a, i);
}

/// One chain's hot state in thread-local arrays of a compile-time maximum dimension D
/// (>= d): what `segment_local` advances. On the GPU, local arrays are interleaved across
/// the threads of a warp, so their accesses coalesce, unlike rows of the `[M, d]` arrays.
template <int D>
struct LocalChain {
  double x[D];
  double y[D];
  double w[kMaxPath * D];
  double lpath[kMaxPath];
  double lp;
  std::int32_t stage;
  std::uint8_t inside;
  RngCursor dr{0, 0, 0, 0, 0};
  std::int64_t accepted[kMaxStages];
  std::int64_t out_of_domain, nan_count, posinf_count;
  std::uint64_t state_step;
  std::uint8_t state_stage;
  double state_alpha, adapt_measure;
};

/// Advances chain i through `nd` blocks of `per` proposals from k0 with its state copied
/// into a `LocalChain<D>` (d <= D), recording the state after each block into bx[i, t]
/// (`[M, nd, d]`) and blp[i, t] when bx is non-null (and its statistics into `ds` at i nd + t
/// when `ds.accepted` is non-null; `record_stats`), then writes the state and the counter
/// increments back. The same per-chain functions on the same numbers in the same order as
/// `fused_proposal` on the arrays, so the chain is bit-identical (tested on the host).
template <int D, class F>
HERD_HOST_DEVICE inline void segment_local(const KernelParams& p, const ChainArrays& a, std::size_t i, std::uint64_t k0,
                                           std::uint64_t per, std::int64_t nd, const F& f, double* bx, double* blp,
                                           const DrawStats& ds = DrawStats{}) {
  const int d = p.d;
  const std::size_t du = static_cast<std::size_t>(d);
  LocalChain<D> c;
  for (int j = 0; j < d; ++j) c.x[j] = a.x[i * du + j];
  c.lp = a.lp[i];
  c.stage = 0;
  c.inside = 1;
  for (int s = 0; s < kMaxStages; ++s) c.accepted[s] = 0;
  c.out_of_domain = c.nan_count = c.posinf_count = 0;
  c.state_step = a.state_step[i];
  c.state_stage = a.state_stage[i];
  c.state_alpha = a.state_alpha[i];
  c.adapt_measure = a.adapt_measure != nullptr ? a.adapt_measure[i] : 0.0;
  KernelParams q = p;
  q.first_chain_id = p.first_chain_id + static_cast<std::uint32_t>(i);
  q.chol_per_chain = false;
  ChainArrays la;
  la.x = c.x;
  la.lp = &c.lp;
  la.y = c.y;
  la.w = c.w;
  la.lpath = c.lpath;
  la.chol = const_cast<double*>(chain_chol(p, a, i));
  la.stage = &c.stage;
  la.inside = &c.inside;
  la.dr_cursor = &c.dr;
  la.accepted = c.accepted;
  la.out_of_domain = &c.out_of_domain;
  la.nan_count = &c.nan_count;
  la.posinf_count = &c.posinf_count;
  la.state_step = &c.state_step;
  la.state_stage = &c.state_stage;
  la.state_alpha = &c.state_alpha;
  la.adapt_measure = a.adapt_measure != nullptr ? &c.adapt_measure : nullptr;
  if (a.ad_n) {
    la.ad_n = a.ad_n + i;
    la.ad_s1 = a.ad_s1 + i * du;
    la.ad_s2 = a.ad_s2 + i * du * du;
    la.ad_ref = p.chol_per_chain ? a.ad_ref + i * du : a.ad_ref;
  }
  for (std::int64_t t = 0; t < nd; ++t) {
    const std::uint64_t ka = k0 + static_cast<std::uint64_t>(t) * per;
    for (std::uint64_t k = ka; k < ka + per; ++k) fused_proposal(q, la, 0, k, f);
    if (bx) {
      const std::size_t slot = i * static_cast<std::size_t>(nd) + static_cast<std::size_t>(t);
      for (int j = 0; j < d; ++j) bx[slot * du + j] = c.x[j];
      blp[slot] = c.lp;
      record_stats(la, 0, ka, ds, slot);
    }
  }
  for (int j = 0; j < d; ++j) a.x[i * du + j] = c.x[j];
  a.lp[i] = c.lp;
  a.state_step[i] = c.state_step;
  a.state_stage[i] = c.state_stage;
  a.state_alpha[i] = c.state_alpha;
  if (a.adapt_measure != nullptr) a.adapt_measure[i] = c.adapt_measure;
  for (int s = 0; s < p.stages; ++s) a.accepted[i * static_cast<std::size_t>(p.stages) + s] += c.accepted[s];
  a.out_of_domain[i] += c.out_of_domain;
  a.nan_count[i] += c.nan_count;
  a.posinf_count[i] += c.posinf_count;
}

/// A factor is rejected as numerically singular when some conditional variance is below
/// this fraction of the marginal one (|correlation| of 1 - 5e-13 or more).
inline constexpr double kSingularRatio = 1e-12;

/// In-place Cholesky of the symmetric `a` (`[d, d]` row-major, lower triangle read) into
/// `l` (may equal `a`; lower, upper zeroed): the one factorisation of the adaptive updates,
/// serial (dram.cpp) and batched (host and device). Returns false, with `l` partly written,
/// when a pivot is not positive and finite or a conditional variance is below
/// `kSingularRatio` of the marginal one (numerically singular); no jitter is added: the
/// callers keep their previous factor and count the failure (`chol_failures`).
HERD_HOST_DEVICE inline bool cholesky(const double* a, int d, double* l) {
  const auto du = static_cast<std::size_t>(d);
  for (int j = 0; j < d; ++j) {
    double* lj = l + static_cast<std::size_t>(j) * du;
    const double ajj = a[static_cast<std::size_t>(j) * du + j];
    double sjj = ajj;
    for (int k = 0; k < j; ++k) sjj -= lj[k] * lj[k];
    if (!(sjj > kSingularRatio * ajj) || !std::isfinite(sjj)) return false;
    const double djj = std::sqrt(sjj);
    const double inv = 1.0 / djj;  // one division per column
    lj[j] = djj;
    for (int k = j + 1; k < d; ++k) lj[k] = 0.0;
    for (int i = j + 1; i < d; ++i) {
      double* li = l + static_cast<std::size_t>(i) * du;
      double v = a[static_cast<std::size_t>(i) * du + j];
      for (int k = 0; k < j; ++k) v -= li[k] * lj[k];
      li[j] = v * inv;
    }
  }
  return true;
}

/// Sum of log of the squared diagonal of the lower factor `l` (`[d, d]`): log det(L L^T).
/// As dram.cpp's adaptation measure computes it.
HERD_HOST_DEVICE inline double log_det_lower(const double* l, int d) {
  double s = 0.0;
  for (int i = 0; i < d; ++i) s += 2.0 * std::log(l[static_cast<std::size_t>(i) * d + i]);
  return s;
}

/// An adaptive update from warm-up statistics (n, s1, s2 about `ref`, s2 lower): merges
/// them into the running estimate (run_n, run_mean `[d]`, run_m2 `[d, d]` full) by Chan,
/// Golub & LeVeque's pairwise rule, then factors scale^2 * run_m2 / run_n into `chol` using
/// `work` (`[d, d]`; may alias s2). Returns 1 when the factor was replaced, 0 when the update
/// was deferred (fewer than d + 1 proposals so far), -1 when the factorisation failed (the
/// previous factor is kept). Adaptive Metropolis of Haario, Saksman & Tamminen (2001).
/// When `measure` is not null it receives the update's adaptation measure, the serial
/// kernel's (dram.cpp): the Hellinger distance between N(0, C0) and N(0, C1), C0 = L L^T the
/// previous proposal and C1 the new one, H^2 = 1 - |C0|^(1/4) |C1|^(1/4) / |(C0 + C1)/2|^(1/2)
/// (1 when (C0 + C1)/2 does not factor; 0 when the factor is not replaced). The midpoint is
/// factored in `work` before the new factor, so no more memory is needed (one more
/// factorisation per update).
HERD_HOST_DEVICE inline int merge_and_factor(int d, double n, const double* s1, const double* s2, const double* ref,
                                             double& run_n, double* run_mean, double* run_m2, double scale,
                                             double* chol, double* work, double* measure = nullptr) {
  const auto du = static_cast<std::size_t>(d);
  if (measure != nullptr) *measure = 0.0;
  if (n > 0) {
    // Batch mean and scatter about it: M2_b = s2 - s1 s1^T / n.
    const double wa = run_n, wn = wa + n, f = wa * n / wn;
    for (int r = 0; r < d; ++r)
      for (int c = 0; c <= r; ++c) {
        const double mb_r = ref[r] + s1[r] / n, mb_c = ref[c] + s1[c] / n;
        const double m2b = s2[static_cast<std::size_t>(r) * du + c] - s1[r] * s1[c] / n;
        const double v =
            run_m2[static_cast<std::size_t>(r) * du + c] + m2b + f * (mb_r - run_mean[r]) * (mb_c - run_mean[c]);
        run_m2[static_cast<std::size_t>(r) * du + c] = v;
        run_m2[static_cast<std::size_t>(c) * du + r] = v;
      }
    for (int r = 0; r < d; ++r) run_mean[r] += (n / wn) * (ref[r] + s1[r] / n - run_mean[r]);
    run_n = wn;
  }
  if (run_n < d + 1) return 0;
  const double g = scale * scale / run_n;
  double log_det_mid = 0.0;
  bool mid_ok = false;
  if (measure != nullptr) {
    // (C0 + C1) / 2, lower triangle, C0 as dram.cpp's cached proposal covariance (row dot
    // products of the factor), then factored in place.
    for (int r = 0; r < d; ++r)
      for (int c = 0; c <= r; ++c) {
        double v = 0.0;
        for (int q = 0; q <= c; ++q)
          v += chol[static_cast<std::size_t>(r) * du + q] * chol[static_cast<std::size_t>(c) * du + q];
        work[static_cast<std::size_t>(r) * du + c] = 0.5 * (v + g * run_m2[static_cast<std::size_t>(r) * du + c]);
      }
    mid_ok = cholesky(work, d, work);
    if (mid_ok) log_det_mid = log_det_lower(work, d);
  }
  for (std::size_t q = 0; q < du * du; ++q) work[q] = g * run_m2[q];
  if (!cholesky(work, d, work)) return -1;
  if (measure != nullptr) {
    double h = 1.0;
    if (mid_ok) {
      const double lbc = 0.25 * log_det_lower(chol, d) + 0.25 * log_det_lower(work, d) - 0.5 * log_det_mid;
      const double e = 1.0 - std::exp(lbc < 0.0 ? lbc : 0.0);
      h = std::sqrt(e > 0.0 ? e : 0.0);
    }
    *measure = h;
  }
  for (std::size_t q = 0; q < du * du; ++q) chol[q] = work[q];
  return 1;
}

}  // namespace herd::mcmc::batched
