// CSV and HDF5 input of herd-diagnose (see diagnose_input.hpp).
#include "diagnose_input.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <hdf5.h>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"

namespace herd::apps {

namespace {

std::uint64_t g_max_memory = 0;  // set_max_memory

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                          : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Parses a whole field as a double; false when it is not a number.
bool parse_double(std::string_view f, double& v) {
  if (f.empty()) return false;
  if (f.front() == '+') f.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  return ec == std::errc() && ptr == f.data() + f.size();
}

/// RAII for HDF5 identifiers.
struct H5Id {
  hid_t id = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;
  H5Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() {
    if (id >= 0 && close) close(id);
  }
  explicit operator bool() const { return id >= 0; }
};

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

bool is_dataset(hid_t loc, const std::string& name) {
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) <= 0) return false;
  H5O_info_t info;
#if H5_VERSION_GE(1, 12, 0)
  if (H5Oget_info_by_name3(loc, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) return false;
#else
  if (H5Oget_info_by_name(loc, name.c_str(), &info, H5P_DEFAULT) < 0) return false;
#endif
  return info.type == H5O_TYPE_DATASET;
}

/// Names of the datasets directly in group `loc`, in name order.
std::vector<std::string> dataset_names(hid_t loc) {
  std::vector<std::string> names;
  H5G_info_t gi;
  if (H5Gget_info(loc, &gi) < 0) return names;
  for (hsize_t i = 0; i < gi.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0,
                                           H5P_DEFAULT);
    if (len <= 0) continue;
    std::string name(static_cast<std::size_t>(len), '\0');
    H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                       static_cast<std::size_t>(len) + 1, H5P_DEFAULT);
    if (is_dataset(loc, name)) names.push_back(name);
  }
  return names;
}

int dataset_rank(hid_t loc, const std::string& name) {
  H5Id ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds) return -1;
  H5Id sp(H5Dget_space(ds.id), H5Sclose);
  return H5Sget_simple_extent_ndims(sp.id);
}

DrawsArray read_dataset(const std::string& path, hid_t loc, const std::string& name,
                        const std::string& shown) {
  H5Id ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
  HERD_REQUIRE(static_cast<bool>(ds), "{}: cannot open dataset '{}'", path, shown);
  H5Id type(H5Dget_type(ds.id), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id);
  HERD_REQUIRE(cls == H5T_FLOAT || cls == H5T_INTEGER,
               "{}: dataset '{}' is not numeric, but draws must be numbers", path, shown);
  H5Id space(H5Dget_space(ds.id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id);
  HERD_REQUIRE(rank == 2 || rank == 3,
               "{}: dataset '{}' has rank {}, but must have rank 2 [chains, draws] or 3 "
               "[chains, draws, params]", path, shown, rank);
  hsize_t dims[3] = {1, 1, 1};
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  DrawsArray a;
  a.chains = dims[0];
  a.draws = dims[1];
  a.params = rank == 3 ? dims[2] : 1;
  HERD_REQUIRE(a.chains > 0 && a.draws > 0 && a.params > 0,
               "{}: dataset '{}' is empty ({} x {} x {})", path, shown, a.chains, a.draws, a.params);
  // Sizes from the file are checked before anything is allocated: a file may declare a
  // dataset far larger than it holds (or than this machine has).
  const std::size_t n = checked_count({static_cast<std::int64_t>(a.chains), static_cast<std::int64_t>(a.draws),
                                       static_cast<std::int64_t>(a.params)},
                                      fmt::format("{}: dataset '{}'", path, shown));
  check_memory_need(static_cast<double>(n) * 8.0 * 2.0, g_max_memory,
                    fmt::format("{}: reading dataset '{}' ({} x {} x {} values)", path, shown, a.chains, a.draws,
                                a.params),
                    "diagnose a smaller dataset (--dataset)", "--max-memory");
  a.values.resize(n);
  HERD_REQUIRE(H5Dread(ds.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.values.data()) >= 0,
               "{}: cannot read dataset '{}'", path, shown);
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (!std::isfinite(a.values[i])) {
      const std::size_t p = i % a.params, t = (i / a.params) % a.draws, c = i / a.params / a.draws;
      throw InputError(fmt::format(
          "{}: dataset '{}' has {} at [chain {}, draw {}{}], but draws must be finite", path,
          shown, a.values[i], c, t, rank == 3 ? fmt::format(", param {}", p) : std::string()));
    }
  }
  const std::string base = name.substr(name.find_last_of('/') + 1);
  if (rank == 2) {
    a.names.push_back(base);
  } else {
    for (std::size_t p = 0; p < a.params; ++p) a.names.push_back(fmt::format("{}[{}]", base, p));
  }
  return a;
}

}  // namespace

DrawsArray read_csv(const std::string& path) {
  std::ifstream in(path);
  HERD_REQUIRE(in.good(), "{}: cannot open the file", path);
  DrawsArray a;
  std::string line;
  std::size_t lineno = 0, width = 0, first_line = 0;
  std::vector<double> rows;  // [draws, chains]
  bool first = true;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    const auto fields = split_fields(line);
    std::vector<double> vals(fields.size());
    bool numeric = true;
    std::size_t bad = 0;
    for (std::size_t k = 0; k < fields.size() && numeric; ++k) {
      if (!parse_double(fields[k], vals[k])) {
        numeric = false;
        bad = k;
      }
    }
    if (first) {
      first = false;
      width = fields.size();
      first_line = lineno;
      if (!numeric) continue;  // header
    } else {
      HERD_REQUIRE(fields.size() == width,
                   "{}: line {} has {} fields, but line {} has {} (one column per chain)", path,
                   lineno, fields.size(), first_line, width);
      HERD_REQUIRE(numeric, "{}: line {} column {} is '{}', but must be a number", path, lineno,
                   bad + 1, fields[bad]);
    }
    for (std::size_t k = 0; k < vals.size(); ++k)
      HERD_REQUIRE(std::isfinite(vals[k]),
                   "{}: line {} column {} is '{}', but draws must be finite", path, lineno, k + 1,
                   fields[k]);
    rows.insert(rows.end(), vals.begin(), vals.end());
  }
  HERD_REQUIRE(!rows.empty(), "{}: no draws (the file has no numeric rows)", path);
  a.chains = width;
  a.draws = rows.size() / width;
  a.params = 1;
  a.values.resize(rows.size());
  for (std::size_t t = 0; t < a.draws; ++t)
    for (std::size_t c = 0; c < a.chains; ++c) a.values[c * a.draws + t] = rows[t * width + c];
  a.names.push_back(std::filesystem::path(path).stem().string());
  return a;
}

bool is_hdf5(const std::string& path) {
  quiet_hdf5();
  return H5Fis_hdf5(path.c_str()) > 0;
}

std::vector<DrawsArray> read_hdf5(const std::string& path, const std::string& dataset) {
  quiet_hdf5();
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  HERD_REQUIRE(static_cast<bool>(file), "{}: cannot open the HDF5 file", path);
  std::vector<DrawsArray> out;
  if (!dataset.empty()) {
    HERD_REQUIRE(is_dataset(file.id, dataset), "{}: no dataset '{}'", path, dataset);
    out.push_back(read_dataset(path, file.id, dataset, dataset));
    return out;
  }
  if (H5Lexists(file.id, "posterior", H5P_DEFAULT) > 0) {
    H5Id group(H5Gopen2(file.id, "posterior", H5P_DEFAULT), H5Gclose);
    HERD_REQUIRE(static_cast<bool>(group), "{}: 'posterior' is not a group", path);
    for (const std::string& name : dataset_names(group.id)) {
      const int rank = dataset_rank(group.id, name);
      if (rank < 2) continue;  // coordinates (chain, draw, ...) of an ArviZ file
      out.push_back(read_dataset(path, group.id, name, "posterior/" + name));
    }
    HERD_REQUIRE(!out.empty(), "{}: the 'posterior' group has no dataset of rank 2 or 3", path);
    return out;
  }
  const auto names = dataset_names(file.id);
  HERD_REQUIRE(names.size() == 1,
               "{}: no 'posterior' group and {} datasets at the root; name one with --dataset",
               path, names.size());
  out.push_back(read_dataset(path, file.id, names[0], names[0]));
  return out;
}

void set_max_memory(std::uint64_t bytes) { g_max_memory = bytes; }

}  // namespace herd::apps
