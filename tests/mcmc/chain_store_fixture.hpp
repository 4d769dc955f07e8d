// Fixtures shared by the chain-store test program's sources (test_chain_store.cpp,
// test_h5_writer_memory.cpp): a scratch folder, a standard-normal log density and the DRAM
// options both sample with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

#include "herd/mcmc/dram.hpp"

namespace herd_test {

/// A fresh folder `<temp>/<prefix><pid>`, removed with its contents by the destructor.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    path = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// Log density of the d-dimensional standard normal, up to a constant.
inline double gauss(const double* x, int d) {
  double q = 0;
  for (int i = 0; i < d; ++i) q += x[i] * x[i];
  return -0.5 * q;
}

/// DRAM options of a d-dimensional run of `chain_size` states: start 0.1 in every
/// coordinate, seed 7, one delayed-rejection stage.
inline herd::mcmc::DramOptions options(int d, std::int64_t chain_size) {
  herd::mcmc::DramOptions o;
  o.start_point.assign(static_cast<std::size_t>(d), 0.1);
  o.chain_size = chain_size;
  o.seed = 7;
  o.delayed_rejection_count = 1;
  return o;
}

}  // namespace herd_test
