#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file data_set.hpp
/// Model data as named numeric arrays, read from JSON files (nlohmann-json; the format of
/// Stan and posteriordb data: `{"N": 3, "y": [1.5, 2, 0.25], "X": [[1, 2], [3, 4]]}`) or
/// from the numeric datasets of an HDF5 group.
///
/// Arrays are stored row-major as doubles with their shape: a scalar has shape `{}`, `y`
/// above `{3}`, `X` `{2, 2}` with `X[i][j]` at `values[i * 2 + j]`. Integers are exact up to
/// 2^53 and flagged `integer`. Thread-safety: a `DataSet` is a plain value.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace herd::io {

/// One named array.
struct DataArray {
  std::vector<double> values;      ///< row-major elements
  std::vector<std::size_t> shape;  ///< empty for a scalar
  bool integer = true;             ///< every element was written as an integer
  std::size_t size() const noexcept { return values.size(); }
};

/// Named arrays, with the source for messages.
class DataSet {
 public:
  /// An empty data set; `source` names it in messages.
  DataSet() = default;
  explicit DataSet(std::string source) : source_(std::move(source)) {}

  bool has(std::string_view name) const { return arrays_.find(name) != arrays_.end(); }
  /// The array `name`. @throws InputError naming the source and the available names.
  const DataArray& at(std::string_view name) const;
  /// A scalar (shape `{}` or one element). @throws InputError otherwise.
  double scalar(std::string_view name) const;
  /// An integer scalar. @throws InputError when not an integer scalar.
  std::int64_t integer(std::string_view name) const;
  /// A 1-D array (or a scalar as one element). @throws InputError on higher rank.
  std::vector<double> vector(std::string_view name) const;
  /// Names in order.
  std::vector<std::string> names() const;
  /// Adds or replaces an array.
  void set(std::string name, DataArray a) { arrays_.insert_or_assign(std::move(name), std::move(a)); }
  const std::string& source() const noexcept { return source_; }
  /// Records `name` as a member of the source that is not numeric data (read_h5_data's text
  /// datasets), for messages about a missing array.
  void skip(std::string name) { skipped_.push_back(std::move(name)); }
  /// The members skip() recorded, in order.
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

 private:
  std::string source_;
  std::vector<std::string> skipped_;
  std::map<std::string, DataArray, std::less<>> arrays_;
};

/// Parses JSON model data: a top-level object whose members are numbers or rectangular
/// nested arrays of numbers (booleans, strings, null, objects and ragged arrays are errors).
/// @throws InputError "data.json:3: ..." naming the member and the problem.
DataSet parse_json_data(std::string_view text, const std::string& source);

/// Reads a JSON data file. @throws IoError when unreadable, InputError as `parse_json_data`.
DataSet read_json_data(const std::string& path);

/// Reads every numeric dataset of an HDF5 group (not recursing) as data; the others (text)
/// are skipped and listed in DataSet::skipped(). @throws IoError when the file or group is
/// missing.
DataSet read_h5_data(const std::string& path, const std::string& group = "/");

}  // namespace herd::io
