// Shared by the update-dump tools (ppo_update_dump.cpp, dqn_update_dump.cpp): a network's
// parameters written to an .h5 group in float32 with their shapes, the layout that
// ppo_update_compare.py and dqn_update_compare.py read.
#pragma once

#include <hdf5.h>

#include <vector>

#include "herd/io/hdf5.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::bench {

/// A tensor's shape as HDF5 dimensions (row-major, as the tensor stores it).
inline std::vector<hsize_t> shape_of(const nn::Tensor& t) {
  std::vector<hsize_t> s;
  s.reserve(static_cast<std::size_t>(t.shape().ndim()));
  for (int i = 0; i < t.shape().ndim(); ++i) s.push_back(static_cast<hsize_t>(t.shape()[i]));
  return s;
}

/// Doubles rounded to float32 (the networks' own precision, so nothing is lost).
inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

/// Writes each named tensor of `state` as a float32 dataset of its shape into `g`. Host only;
/// @throws herd::IoError from the HDF5 layer.
inline void write_state(io::H5Group&& g, const std::vector<nn::NamedTensor>& state) {
  for (const auto& t : state) g.write(t.name, to_float(t.tensor.to_vector()), shape_of(t.tensor));
}

}  // namespace herd::bench
