// A C++ program that uses herd::io's HDF5 layer (its templates included) and links with
// `pkg-config --libs herd` alone: no HDF5 on its link line. Its designated initializer of
// DatasetOptions is the one docs/io.md shows, compiled with -Wall -Wextra -Werror.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <herd/io/hdf5.hpp>

int main() {
  using namespace herd::io;
  const std::string path = "io_only.h5";
  {
    H5File f = H5File::create_atomic(path);
    H5Group post = f.require_group("posterior");
    post.create_coordinate("chain", std::vector<std::int64_t>{0, 1});
    post.create_coordinate("draw", std::vector<std::int64_t>{0, 1, 2});
    post.write_variable("x", std::vector<double>{0, 1, 2, 3, 4, 5}, {"chain", "draw"});
    post.set_attribute("inference_library", "herd");
    post.set_attribute("count", std::int64_t{6});
    DatasetOptions opt{.extendible = true, .compression = 4};
    H5Dataset chain = f.root().create_dataset<double>("chain", {0, 2}, opt);
    chain.append(std::vector<double>{1, 2, 3, 4});
    f.commit();
  }
  H5File f = H5File::open(path);
  const std::vector<double> x = f.open_dataset("posterior/x").read<double>();
  const std::vector<float> rows = f.open_dataset("chain").read_rows<float>(1, 1);
  const auto count = f.open_group("posterior").attribute<std::int64_t>("count");
  std::printf("x[5] %.1f rows %.1f %.1f count %lld\n", x.at(5), rows.at(0), rows.at(1), static_cast<long long>(count));
  return (x.size() == 6 && x[5] == 5.0 && rows == std::vector<float>{3, 4} && count == 6) ? 0 : 1;
}
