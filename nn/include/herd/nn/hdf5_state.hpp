#pragma once
/// @file hdf5_state.hpp
/// Saving and loading model parameters and optimizer state in HDF5 (through the io layer):
/// one dataset per named tensor, named by its dotted name ("0.weight", "0.weight.exp_avg"),
/// with its shape, its element type (float32, float64, int64) and a `dtype` attribute; the
/// group's `names` attribute keeps the order. Loading into a module or optimizer goes
/// through `Module::load_state_dict` / `Optimizer::load_state`, whose errors name the
/// entry and both shapes, or the missing name.
///
/// Host tensors only (copy device tensors to the host first). Thread-safety: HDF5 is not
/// thread-safe: one thread at a time in the whole process.

#include <string>
#include <vector>

#include "herd/io/hdf5.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::nn {

/// Writes `tensors` as datasets of `group` (which must not already hold those names).
/// Device tensors are written from host copies (their values; they are read back as host
/// tensors). @throws InputError for an undefined tensor or a name containing '/'; IoError on
/// HDF5 failure.
void write_state(io::H5Group& group, const std::vector<NamedTensor>& tensors);

/// Reads the tensors `write_state` wrote, in their original order.
/// @throws IoError when the group is not such a state (names a missing dataset or a bad dtype).
std::vector<NamedTensor> read_state(const io::H5Group& group);

/// Writes parameters (group "parameters") and, if not empty, optimizer state (group
/// "optimizer") to `path` atomically (temporary file, fsync, rename).
/// @throws IoError, InputError as `write_state`.
void save_hdf5(const std::string& path, const std::vector<NamedTensor>& parameters,
               const std::vector<NamedTensor>& optimizer_state = {});

/// Parameters and optimizer state read from a file written by `save_hdf5`.
struct Hdf5State {
  std::vector<NamedTensor> parameters;
  std::vector<NamedTensor> optimizer;  ///< empty when the file has none
};

/// Reads a file written by `save_hdf5`. @throws IoError naming the file and what is missing.
Hdf5State load_hdf5(const std::string& path);

}  // namespace herd::nn
