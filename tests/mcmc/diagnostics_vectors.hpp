#pragma once
// The five deterministic test vectors of tests/mcmc/data/diagnostics_reference.md (a copy of
// shared/validation/diagnostics.md): an LCG-driven AR(1) per chain, exact in IEEE double.
#include <cmath>
#include <cstddef>
#include <vector>

namespace herd_test {

/// X[c][t], [M, N] row-major.
inline std::vector<double> lcg_ar1(std::size_t m, std::size_t n, double phi, double seed0, double offset) {
  const double a = 1664525.0, c = 1013904223.0, mod = 4294967296.0;
  std::vector<double> x(m * n);
  for (std::size_t ch = 0; ch < m; ++ch) {
    double s = seed0 + 1000.0 * static_cast<double>(ch);
    double v = 0;
    for (std::size_t t = 0; t < n; ++t) {
      s = std::fmod(a * s + c, mod);
      const double e = (s + 0.5) / mod - 0.5;
      v = phi * v + e;
      x[ch * n + t] = v + offset * static_cast<double>(ch);
    }
  }
  return x;
}

struct TestVector {
  std::vector<double> x;
  std::size_t m, n;
};

/// TV1..TV5 (index 1..5).
inline TestVector test_vector(int k) {
  switch (k) {
    case 1:
      return {lcg_ar1(4, 1000, 0.9, 12345, 0.1), 4, 1000};
    case 2:
      return {lcg_ar1(4, 999, 0.5, 777, 0.0), 4, 999};
    case 3: {
      auto x = lcg_ar1(4, 1000, 0.9, 12345, 0.1);
      for (double& v : x) v = std::floor(4.0 * v) / 4.0;
      return {x, 4, 1000};
    }
    case 4: {
      auto x = lcg_ar1(4, 1000, 0.9, 12345, 0.1);
      for (double& v : x) v = std::sinh(3.0 * v);
      return {x, 4, 1000};
    }
    default:
      return {lcg_ar1(4, 500, 0.95, 4242, 1.0), 4, 500};
  }
}

/// R posterior 1.4.0 values: Rhat, rhat_tail, ess_bulk, ess_tail, ess_mean, mcse_mean,
/// mcse_sd, mcse_q05, rhat_basic (split).
struct Reference {
  double rhat, rhat_tail, ess_bulk, ess_tail, ess_mean, mcse_mean, mcse_sd, mcse_q05, rhat_basic;
};

inline const Reference kReference[5] = {
    {1.0317598934682206, 1.0142961279125058, 171.5898230623142, 351.60787752110252, 169.40880080351562,
     0.0519495948158517, 0.023756623828914036, 0.065812660274631951, 1.0322317060564563},
    {1.002138542279063, 1.0007329184547191, 1161.5884821279333, 1957.9699142458046, 1185.0651641399688,
     0.0097845233431657647, 0.004054700332857839, 0.012630608186168346, 1.0020997784571619},
    {1.0314879158916708, 1.0140448312438273, 170.3967691548151, 313.835652287426, 168.26344471145552,
     0.052415663450779998, 0.023394651507158141, 0.125, 1.0319135109398074},
    {1.0317598934682206, 1.0102061700175708, 171.5898230623142, 351.60787752110252, 398.82900894469105,
     1.0202352662896812, 2.7952984540141141, 1.8391709826544371, 1.0144680984006449},
    {1.5932505699769774, 1.1123443087477016, 7.0441103755768921, 39.27967343788751, 6.972498514195359,
     0.50794599177932154, 0.16521189125589369, 0.38710585488534555, 1.605100423390996},
};

}  // namespace herd_test
