#pragma once
/// @file serialize.hpp
/// A small binary file of named tensors (model parameters and optimizer state), beside the
/// HDF5 adapter of the io layer (hdf5_state.hpp); both store the same `NamedTensor` lists
/// (`Module::state_dict`, `Optimizer::state`).
///
/// Format (little-endian): "HERDNN01", u64 count, then per tensor: u64 name length, name
/// bytes, u8 dtype (0 float32, 1 float64, 2 int64), u8 ndim, ndim x i64 extents, raw
/// row-major data. Written to "<path>.tmp" and renamed, so a crash leaves the old file.
/// Thread-safety: distinct paths from distinct threads.

#include <string>
#include <vector>

#include "herd/nn/tensor.hpp"

namespace herd::nn {

/// Writes `tensors` to `path` (device tensors from host copies; read back as host tensors).
/// @throws IoError when the file cannot be written or renamed.
void save_binary(const std::string& path, const std::vector<NamedTensor>& tensors);
/// Reads a file written by `save_binary`.
/// @throws IoError when the file cannot be read or is not in this format (named).
std::vector<NamedTensor> load_binary(const std::string& path);

}  // namespace herd::nn
