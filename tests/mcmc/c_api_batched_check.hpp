#pragma once
// Checks of a batched run's outputs made through the C API (c_api_batched.c): the files
// exist, and the draws in <prefix>.h5 have the target's means and standard deviations.
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/io/hdf5.hpp"

extern "C" int c_batched_builtin(const char* prefix, const char* device);
extern "C" int c_batched_log_func(const char* prefix, const char* device);
extern "C" int c_batched_paramonte(const char* prefix);
extern "C" int c_batched_bad(int which, const char* prefix);

/// `<prefix>.h5`, `_report.txt` and `_report.html` exist; posterior/<names[i]> is
/// [32 chains, 2000 draws] with mean within `mean_tol[i]` of `mean[i]` and standard deviation
/// within `sd_tol[i]` of `sd[i]`.
inline void check_batched_outputs(const std::string& prefix, const std::vector<std::string>& names,
                                  const std::vector<double>& mean, const std::vector<double>& sd,
                                  const std::vector<double>& mean_tol, const std::vector<double>& sd_tol) {
  namespace fs = std::filesystem;
  CHECK(fs::exists(prefix + "_report.txt"));
  CHECK(fs::exists(prefix + "_report.html"));
  REQUIRE(fs::exists(prefix + ".h5"));
  auto f = herd::io::H5File::open(prefix + ".h5");
  CHECK(f.open_dataset("sample_stats/lp").shape() == std::vector<hsize_t>{32, 2000});
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto ds = f.open_dataset("posterior/" + names[i]);
    CHECK(ds.shape() == std::vector<hsize_t>{32, 2000});
    const std::vector<double> v = ds.read<double>();
    double m = 0.0, s = 0.0;
    for (double x : v) m += x;
    m /= static_cast<double>(v.size());
    for (double x : v) s += (x - m) * (x - m);
    s = std::sqrt(s / static_cast<double>(v.size() - 1));
    INFO(names[i] << ": mean " << m << ", sd " << s);
    CHECK(std::abs(m - mean[i]) < mean_tol[i]);
    CHECK(std::abs(s - sd[i]) < sd_tol[i]);
  }
}
