#pragma once
/// @file diagnose_input.hpp
/// Input readers of `herd-diagnose`: CSV (one column per chain, one row per draw) and HDF5
/// datasets of shape [chains, draws] or [chains, draws, params] (or every such dataset of a
/// `posterior` group, as ArviZ writes it). The HDF5 part uses the HDF5 C API directly until
/// the io layer provides readers.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::apps {

/// One named quantity group: values `[chains, draws, params]` row-major (params = 1 for a
/// 2-D dataset or a CSV file), with one name per parameter.
struct DrawsArray {
  std::vector<std::string> names;  ///< params names ("theta" or "theta[0]", "theta[1]", ...)
  std::vector<double> values;      ///< [chains, draws, params] row-major
  std::size_t chains = 0, draws = 0, params = 0;
};

/// Reads a CSV file: one column per chain, one row per draw, comma-separated; a first row
/// that is not numeric is a header and skipped. Blank lines are ignored. The quantity is
/// named after the file's stem.
/// @throws herd::InputError on a missing/unreadable file, no data rows, a ragged row, a
///         field that is not a number, or a NaN/Inf draw (each message names line and column).
DrawsArray read_csv(const std::string& path);

/// Whether `path` is an HDF5 file (by its signature).
bool is_hdf5(const std::string& path);

/// Reads HDF5 draws: the dataset `dataset` when not empty (rank 2 or 3), else every dataset
/// of rank 2 or 3 in the group `posterior` (rank-1 coordinate datasets are skipped), else the
/// only dataset of the root group.
/// @throws herd::InputError on a missing dataset or group, a wrong rank, a non-numeric type,
///         an empty dataset, or a NaN/Inf draw.
std::vector<DrawsArray> read_hdf5(const std::string& path, const std::string& dataset);

/// The memory `read_hdf5` may use for one dataset's values (bytes; 0, the default: the
/// memory available on the machine). A dataset whose values (and the per-parameter copy
/// the diagnostics make) need more is refused with herd::InputError naming it and its
/// shape, before anything is read (an HDF5 file can declare a dataset of terabytes that
/// holds no data). Not thread-safe (set it once, before reading).
void set_max_memory(std::uint64_t bytes);

}  // namespace herd::apps
