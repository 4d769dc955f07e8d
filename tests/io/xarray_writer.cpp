// Writes an ArviZ-style InferenceData file (groups "posterior" and "sample_stats" with
// chain/draw coordinates) for check_xarray.py to open with xarray + h5netcdf.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "herd/io/hdf5.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    using namespace herd::io;
    const hsize_t chains = 4, draws = 100, d = 3;
    H5File f = H5File::create_atomic(argv[1]);
    f.root().set_attribute("created_by", "herd io test");
    for (const char* group : {"posterior", "sample_stats"}) {
      H5Group g = f.require_group(group);
      std::vector<std::int64_t> chain(chains), draw(draws);
      for (hsize_t c = 0; c < chains; ++c) chain[c] = static_cast<std::int64_t>(c);
      for (hsize_t i = 0; i < draws; ++i) draw[i] = static_cast<std::int64_t>(i);
      g.create_coordinate("chain", chain);
      g.create_coordinate("draw", draw);
      g.set_attribute("inference_library", "herd");
    }
    H5Group post = f.open_group("posterior");
    std::vector<double> x(chains * draws), theta(chains * draws * d);
    for (hsize_t c = 0; c < chains; ++c)
      for (hsize_t i = 0; i < draws; ++i) {
        x[c * draws + i] = static_cast<double>(c) + 0.001 * static_cast<double>(i);
        for (hsize_t j = 0; j < d; ++j)
          theta[(c * draws + i) * d + j] =
              100.0 * static_cast<double>(c) + static_cast<double>(i) + 0.1 * static_cast<double>(j);
      }
    post.write_variable("x", x, {"chain", "draw"});
    post.create_coordinate("theta_dim_0", std::vector<std::int64_t>{0, 1, 2});
    H5Dataset ts = post.write("theta", theta, {chains, draws, d});
    post.attach_dimensions(ts, {"chain", "draw", "theta_dim_0"});
    ts.set_attribute("units", "m");
    post.create_dimension("w_dim_0", 2);
    H5Dataset ws = post.write("w", std::vector<float>(chains * draws * 2, 0.5f), {chains, draws, 2});
    post.attach_dimensions(ws, {"chain", "draw", "w_dim_0"});

    H5Group stats = f.open_group("sample_stats");
    DatasetOptions opt;
    opt.compression = 4;
    std::vector<double> lp(chains * draws, -1.25);
    H5Dataset lps = stats.write("lp", lp, {chains, draws}, opt);
    stats.attach_dimensions(lps, {"chain", "draw"});
    f.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xarray_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
