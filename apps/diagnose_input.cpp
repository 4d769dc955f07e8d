// CSV and HDF5 input of herd-diagnose (see diagnose_input.hpp).
#include "diagnose_input.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <hdf5.h>
#include <hdf5_hl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/mcmc/paradram_run.hpp"

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
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
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

/// Whether group `loc` tracks and indexes the creation order of its links (herd's io layer and
/// netCDF-4 create groups so).
bool tracks_creation_order(hid_t loc) {
  H5Id plist(H5Gget_create_plist(loc), H5Pclose);
  if (!plist) return false;
  unsigned flags = 0;
  if (H5Pget_link_creation_order(plist.id, &flags) < 0) return false;
  return (flags & H5P_CRT_ORDER_TRACKED) != 0U && (flags & H5P_CRT_ORDER_INDEXED) != 0U;
}

/// Names of the links of group `loc` in the order of `index`; empty when one cannot be read.
std::vector<std::string> link_names(hid_t loc, H5_index_t index) {
  std::vector<std::string> names;
  H5G_info_t gi;
  if (H5Gget_info(loc, &gi) < 0) return names;
  for (hsize_t i = 0; i < gi.nlinks; ++i) {
    const ssize_t len = H5Lget_name_by_idx(loc, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len <= 0) return {};
    std::string name(static_cast<std::size_t>(len), '\0');
    if (H5Lget_name_by_idx(loc, ".", index, H5_ITER_INC, i, name.data(), static_cast<std::size_t>(len) + 1,
                           H5P_DEFAULT) < 0)
      return {};
    names.push_back(std::move(name));
  }
  return names;
}

/// Names of the datasets directly in group `loc`: in creation order when the group tracks it,
/// else in name order.
std::vector<std::string> dataset_names(hid_t loc) {
  std::vector<std::string> links;
  if (tracks_creation_order(loc)) links = link_names(loc, H5_INDEX_CRT_ORDER);
  if (links.empty()) links = link_names(loc, H5_INDEX_NAME);
  std::vector<std::string> names;
  for (auto& name : links)
    if (is_dataset(loc, name)) names.push_back(std::move(name));
  return names;
}

/// The strings of the 1-D string dataset `name` of `loc` (variable- or fixed-length); empty
/// when there is none or it is not such a dataset.
std::vector<std::string> read_string_list(hid_t loc, const std::string& name) {
  if (!is_dataset(loc, name)) return {};
  H5Id ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds) return {};
  H5Id type(H5Dget_type(ds.id), H5Tclose);
  H5Id space(H5Dget_space(ds.id), H5Sclose);
  if (H5Tget_class(type.id) != H5T_STRING || H5Sget_simple_extent_ndims(space.id) != 1) return {};
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.id, &n, nullptr);
  if (n == 0 || n > (hsize_t{1} << 24U)) return {};
  std::vector<std::string> out;
  if (H5Tis_variable_str(type.id) > 0) {
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.id, H5T_VARIABLE);
    H5Tset_cset(mem.id, H5Tget_cset(type.id));
    std::vector<char*> ptrs(static_cast<std::size_t>(n), nullptr);
    if (H5Dread(ds.id, mem.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0) return {};
    for (char* p : ptrs) out.emplace_back(p != nullptr ? p : "");
    H5Dvlen_reclaim(mem.id, space.id, H5P_DEFAULT, ptrs.data());
    return out;
  }
  const std::size_t width = H5Tget_size(type.id);
  if (width == 0 || width > 4096) return {};
  std::vector<char> buf(static_cast<std::size_t>(n) * width);
  if (H5Dread(ds.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) return {};
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    const std::string_view cell(buf.data() + i * width, width);
    out.emplace_back(cell.substr(0, cell.find('\0')));
  }
  return out;
}

/// The dimensions of dataset `name` of `loc` (empty when it cannot be opened).
std::vector<hsize_t> dataset_dims(hid_t loc, const std::string& name) {
  H5Id ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds) return {};
  H5Id sp(H5Dget_space(ds.id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(sp.id);
  if (rank <= 0) return {};
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(sp.id, dims.data(), nullptr);
  return dims;
}

/// A dataset of the `posterior` group to diagnose, with the names of its parameters (empty:
/// named by ArviZ's convention, `read_dataset`).
struct PosteriorEntry {
  std::string name;
  std::vector<std::string> labels;
};

/// Whether herd wrote the file (its root attribute `herd_version`).
bool herd_written(hid_t file) { return H5Aexists(file, "herd_version") > 0; }

/// herd-sample's names of the quantities of a herd file in the order of its summary table:
/// `diagnostics/variable` (variables, then derived quantities), else `chain_compact/variable`
/// (the sampled variables); empty when the file has neither.
std::vector<std::string> recorded_names(hid_t file) {
  for (const char* group : {"diagnostics", "chain_compact"}) {
    if (H5Lexists(file, group, H5P_DEFAULT) <= 0) continue;
    H5Id g(H5Gopen2(file, group, H5P_DEFAULT), H5Gclose);
    if (!g) continue;
    auto names = read_string_list(g.id, "variable");
    if (!names.empty()) return names;
  }
  return {};
}

/// The datasets of rank 2 or more of the `posterior` group `group` of `file` (rank-1
/// coordinates, ArviZ's `chain`, `draw`, `theta_dim_0`, are skipped). In a file herd wrote:
/// first those that herd-sample's recorded names (`recorded_names`) name, in that order,
/// each parameter named as herd-sample names it (a scalar `x10` by its name, the elements
/// of a vector `beta` [chain, draw, K] by the K consecutive names `beta[...]`, so
/// `beta[1]`..`beta[K]`); then, as in any other file, the rest in the group's order
/// (`dataset_names`), named by ArviZ's convention.
std::vector<PosteriorEntry> posterior_entries(hid_t file, hid_t group) {
  struct Candidate {
    std::string name;
    std::size_t rank = 0, params = 1;
    bool taken = false;
  };
  std::vector<Candidate> candidates;
  for (const std::string& name : dataset_names(group)) {
    const std::vector<hsize_t> dims = dataset_dims(group, name);
    if (dims.size() < 2) continue;
    std::size_t params = 1;  // the trailing dimensions, flattened
    for (std::size_t k = 2; k < dims.size(); ++k) params *= static_cast<std::size_t>(dims[k]);
    candidates.push_back({name, dims.size(), params, false});
  }
  std::vector<PosteriorEntry> out;
  const std::vector<std::string> recorded = herd_written(file) ? recorded_names(file) : std::vector<std::string>();
  auto untaken = [&](const std::string& name, std::size_t rank) -> Candidate* {
    for (auto& c : candidates)
      if (!c.taken && c.rank == rank && c.name == name) return &c;
    return nullptr;
  };
  for (std::size_t i = 0; i < recorded.size();) {
    if (Candidate* c = untaken(recorded[i], 2)) {
      c->taken = true;
      out.push_back({c->name, {recorded[i]}});
      ++i;
      continue;
    }
    const std::size_t open = recorded[i].rfind('[');
    if (open != std::string::npos && open > 0) {
      const std::string prefix = recorded[i].substr(0, open + 1);
      Candidate* c = untaken(recorded[i].substr(0, open), 3);
      const auto first = recorded.begin() + static_cast<std::ptrdiff_t>(i);
      if (c != nullptr && c->params <= recorded.size() - i &&
          std::all_of(first, first + static_cast<std::ptrdiff_t>(c->params),
                      [&](const std::string& n) { return n.rfind(prefix, 0) == 0; })) {
        c->taken = true;
        out.push_back({c->name, std::vector<std::string>(first, first + static_cast<std::ptrdiff_t>(c->params))});
        i += c->params;
        continue;
      }
    }
    ++i;  // a recorded name of no posterior dataset
  }
  for (const auto& c : candidates)
    if (!c.taken) out.push_back({c.name, {}});
  return out;
}

/// Bytes of a block that a dataset is read in (unless its chunks are larger): a dataset of
/// several parameters goes through a staging buffer of this size, which stays in the 1 MiB
/// L2 cache while its rows are copied into the parameters' buffers.
constexpr std::size_t kBlockBytes = std::size_t{1} << 19;

/// One dataset to read in blocks [chains cb, draws db, all params] (blocks in chain-major
/// order), and the state of its reading.
struct BlockSource {
  std::string path, shown;
  H5Id ds{H5I_INVALID_HID, H5Dclose};
  int rank = 0;
  bool transposed = false;                        // stored [draws, chains, ...] (draws_transposed)
  std::size_t chains = 0, draws = 0, params = 0;  // params: the trailing dimensions' product
  std::vector<hsize_t> trailing;                  // the dimensions after [chains, draws]
  std::size_t cb = 1, db = 1, draw_blocks = 1, blocks = 1;
  // The reading: blocks are claimed through `next`; the rest under `mu`.
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  bool allocated = false, finished = false;
  std::size_t done = 0;
  bool read_error = false;
  std::exception_ptr error;
};

/// The block shape of `s` (a dataset [chains, draws, params] with `dcpl`): about kBlockBytes
/// of whole rows, made of whole chunks of a chunked dataset (so each chunk is read, and
/// decompressed, once): draws of one chain (of one row of chunks), or several whole chains.
void plan_blocks(BlockSource& s, hid_t dcpl) {
  const std::size_t row = s.params;  // values per draw
  std::size_t chunk_c = 1, chunk_d = 1;
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
    std::vector<hsize_t> cd(static_cast<std::size_t>(s.rank), 1);
    if (H5Pget_chunk(dcpl, s.rank, cd.data()) == s.rank) {
      chunk_c = std::clamp<std::size_t>(cd[s.transposed ? 1 : 0], 1, s.chains);
      chunk_d = std::clamp<std::size_t>(cd[s.transposed ? 0 : 1], 1, s.draws);
    }
  }
  if (s.transposed) {
    // Stored [draws, chains, ...]: whole rows of the file are draws of every chain, so a
    // block is all chains of a run of draws (whole rows of chunks).
    const std::size_t per_chunk_row = chunk_d * s.chains * row;
    s.cb = s.chains;
    s.db = std::min(s.draws, chunk_d * std::max<std::size_t>(
                                           1, kBlockBytes / sizeof(double) / std::max<std::size_t>(per_chunk_row, 1)));
    s.draw_blocks = (s.draws + s.db - 1) / s.db;
    s.blocks = s.draw_blocks;
    return;
  }
  s.cb = chunk_c;
  const std::size_t per_chunk_row = chunk_c * chunk_d * row;
  const std::size_t target = kBlockBytes / sizeof(double);
  s.db = std::min(s.draws, chunk_d * std::max<std::size_t>(1, target / std::max<std::size_t>(per_chunk_row, 1)));
  if (s.db == s.draws)  // short chains: several (rows of chunks of) chains per block
    s.cb = std::min(s.chains,
                    chunk_c * std::max<std::size_t>(1, target / std::max<std::size_t>(chunk_c * s.draws * row, 1)));
  s.draw_blocks = (s.draws + s.db - 1) / s.db;
  s.blocks = (s.chains + s.cb - 1) / s.cb * s.draw_blocks;
}

/// H5DSiterate_scales callback: the name of the first dimension scale attached (the last
/// part of its path: netCDF-4 and h5netcdf name a dimension's scale dataset after it, as
/// herd does), into the std::string `out`.
herr_t first_scale_name(hid_t, unsigned, hid_t scale, void* out) {
  const ssize_t len = H5Iget_name(scale, nullptr, 0);
  if (len > 0) {
    std::string name(static_cast<std::size_t>(len), '\0');
    if (H5Iget_name(scale, name.data(), static_cast<std::size_t>(len) + 1) > 0)
      *static_cast<std::string*>(out) = name.substr(name.rfind('/') + 1);
  }
  return 1;  // the first scale only
}

/// The names of the `rank` dimensions of dataset `ds` from the HDF5 dimension scales attached
/// to them (H5DS, as netCDF-4, h5netcdf and so xarray and ArviZ write them); "" for a
/// dimension without one.
std::vector<std::string> dimension_names(hid_t ds, int rank) {
  std::vector<std::string> names(static_cast<std::size_t>(rank));
  for (int d = 0; d < rank; ++d)
    if (H5DSget_num_scales(ds, static_cast<unsigned>(d)) > 0)
      H5DSiterate_scales(ds, static_cast<unsigned>(d), nullptr, first_scale_name, &names[static_cast<std::size_t>(d)]);
  H5Eclear2(H5E_DEFAULT);
  return names;
}

/// H5DSiterate_scales callback: the full path of the first dimension scale attached that is a
/// netCDF variable (a coordinate: netCDF-4 marks a dimension without one by the scale name
/// "This is a netCDF dimension but not a netCDF variable."), into the std::string `out`.
herr_t first_coordinate_path(hid_t, unsigned, hid_t scale, void* out) {
  char mark[64] = {0};
  if (H5DSget_scale_name(scale, mark, sizeof mark) > 0 &&
      std::string_view(mark, strnlen(mark, sizeof mark)).starts_with("This is a netCDF dimension but not"))
    return 1;
  const ssize_t len = H5Iget_name(scale, nullptr, 0);
  if (len > 0) {
    std::string path(static_cast<std::size_t>(len), '\0');
    if (H5Iget_name(scale, path.data(), static_cast<std::size_t>(len) + 1) > 0) *static_cast<std::string*>(out) = path;
  }
  return 1;  // the first scale only
}

/// ArviZ's labels of the `n` positions of axis `axis` of dataset `ds`: the values of the
/// coordinate attached to that axis as an HDF5 dimension scale (as netCDF-4, h5netcdf and so
/// xarray and ArviZ write a variable's coordinates: `theta[Choate]` for `coords={"school":
/// [...]}`), strings as they are, integers in decimal, floats as Python prints them; empty
/// when the axis has no coordinate of `n` distinct numbers or strings (its 0-based index is
/// then the label, as ArviZ's default coordinates are). Never throws.
std::vector<std::string> coordinate_labels(hid_t ds, unsigned axis, hsize_t n) {
  std::string path;
  if (H5DSget_num_scales(ds, axis) > 0) H5DSiterate_scales(ds, axis, nullptr, first_coordinate_path, &path);
  H5Eclear2(H5E_DEFAULT);
  if (path.empty()) return {};
  H5Id c(H5Dopen2(ds, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!c) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  H5Id space(H5Dget_space(c.id), H5Sclose);
  hsize_t len = 0;
  if (H5Sget_simple_extent_ndims(space.id) != 1 || (H5Sget_simple_extent_dims(space.id, &len, nullptr), len != n))
    return {};
  H5Id type(H5Dget_type(c.id), H5Tclose);
  std::vector<std::string> out;
  switch (H5Tget_class(type.id)) {
    case H5T_STRING:
      out = read_string_list(ds, path);
      break;
    case H5T_INTEGER: {
      std::vector<std::int64_t> v(static_cast<std::size_t>(n));
      if (H5Dread(c.id, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0)
        for (std::int64_t x : v) out.push_back(std::to_string(x));
      break;
    }
    case H5T_FLOAT: {
      std::vector<double> v(static_cast<std::size_t>(n));
      if (H5Dread(c.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0)
        for (double x : v)  // Python's str(): 1.0, 0.25, 1e+16
          out.push_back(std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e16 ? fmt::format("{:.1f}", x)
                                                                                      : fmt::format("{}", x));
      break;
    }
    default:
      break;
  }
  H5Eclear2(H5E_DEFAULT);
  if (out.size() != static_cast<std::size_t>(n)) return {};
  // Labels name the table's rows and the JSON's keys: repeated values (xarray allows them)
  // would name two rows alike, so such a coordinate gives way to the index.
  std::vector<std::string> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return {};
  return out;
}

/// Whether dataset `ds` (`shown` in messages) holds its draws as [draws, chains, ...] by the
/// names of its dimensions (dimension_names): (chain, draw, ...) is read as it is, (draw,
/// chain, ...) transposed; without names on its first two dimensions (and no dimension named
/// chain or draw) it is taken as [chains, draws, ...], as always. @throws herd::InputError
/// for other named dimensions, e.g. herd-sample's chain_compact/state (compact_draw,
/// variable), which were read as thousands of chains of a few draws.
bool draws_transposed(const std::string& path, const std::string& shown, hid_t ds, int rank) {
  const std::vector<std::string> names = dimension_names(ds, rank);
  const auto at = [&](const char* n) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), n) - names.begin());
  };
  const std::size_t chain = at("chain"), draw = at("draw");
  if (chain == 0 && draw == 1) return false;
  if (chain == 1 && draw == 0) return true;
  if (chain == names.size() && draw == names.size() && names[0].empty() && names[1].empty()) return false;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + (n.empty() ? std::string("unnamed") : n);
  const bool compact = shown.rfind("chain_compact/", 0) == 0 || shown.rfind("/chain_compact/", 0) == 0;
  throw InputError(fmt::format(
      "{}: dataset '{}' has the dimensions ({}), but herd-diagnose reads draws with the dimensions (chain, draw, "
      "...) or (draw, chain, ...){}",
      path, shown, list,
      compact ? "; herd-sample's compact chain is read, weighted, when the file is given without --dataset" : ""));
}

/// Opens dataset `name` of `loc` (`shown`: its name in messages) and checks it: numeric,
/// rank 2 or more ([chains, draws, ...], the dimensions after the draws flattened row-major
/// into parameters; [draws, chains, ...] when its dimension names say so: draws_transposed),
/// not empty, within the memory allowed. Its parameters are named `labels`
/// when that holds one name per parameter, else after the dataset (ArviZ's convention:
/// `theta`, or `theta[0]`, `theta[1]`, ... by the coordinate's values where the axis has a
/// coordinate (`theta[Choate]`, coordinate_labels), else by the 0-based index; a matrix
/// `L[0, 0]`, `L[0, 1]`, ...). Reads no draws.
std::unique_ptr<BlockSource> plan_dataset(const std::string& path, hid_t loc, const std::string& name,
                                          const std::string& shown, DrawsArray& a,
                                          const std::vector<std::string>& labels = {}) {
  auto s = std::make_unique<BlockSource>();
  s->path = path;
  s->shown = shown;
  s->ds.id = H5Dopen2(loc, name.c_str(), H5P_DEFAULT);
  HERD_REQUIRE(static_cast<bool>(s->ds), "{}: cannot open dataset '{}'", path, shown);
  H5Id type(H5Dget_type(s->ds.id), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id);
  HERD_REQUIRE(cls == H5T_FLOAT || cls == H5T_INTEGER, "{}: dataset '{}' is not numeric, but draws must be numbers",
               path, shown);
  H5Id space(H5Dget_space(s->ds.id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id);
  HERD_REQUIRE(rank >= 2,
               "{}: dataset '{}' has rank {}, but must have rank 2 [chains, draws] or more [chains, draws, ...]", path,
               shown, rank);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank), 1);
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  // Sizes from the file are checked before anything is allocated: a file may declare a
  // dataset far larger than it holds (or than this machine has).
  const std::string what = fmt::format("{}: dataset '{}'", path, shown);
  const auto size = [](hsize_t d) { return static_cast<std::int64_t>(std::min<hsize_t>(d, INT64_MAX)); };
  s->transposed = draws_transposed(path, shown, s->ds.id, rank);
  a.chains = dims[s->transposed ? 1 : 0];
  a.draws = dims[s->transposed ? 0 : 1];
  a.params = 1;
  for (std::size_t k = 2; k < dims.size(); ++k)
    a.params = checked_count({static_cast<std::int64_t>(a.params), size(dims[k])}, what);
  const std::size_t n = checked_count({size(dims[0]), size(dims[1]), static_cast<std::int64_t>(a.params)}, what);
  HERD_REQUIRE(a.chains > 0 && a.draws > 0 && a.params > 0, "{}: dataset '{}' is empty ({} x {} x {})", path, shown,
               a.chains, a.draws, a.params);
  check_memory_need(
      static_cast<double>(n) * 8.0 * 2.0, g_max_memory,
      fmt::format("{}: reading dataset '{}' ({} x {} x {} values)", path, shown, a.chains, a.draws, a.params),
      "diagnose a smaller dataset (--dataset)", "--max-memory");
  const std::string base = name.substr(name.find_last_of('/') + 1);
  if (labels.size() == a.params) {
    a.names = labels;
  } else if (rank == 2) {
    a.names.push_back(base);
  } else {
    // ArviZ's labels of an array parameter: per axis its coordinate's values, else the
    // 0-based indices; row-major, ", " between.
    std::vector<std::vector<std::string>> coords;
    for (std::size_t k = 2; k < dims.size(); ++k)
      coords.push_back(coordinate_labels(s->ds.id, static_cast<unsigned>(k), dims[k]));
    std::vector<std::size_t> index(dims.size() - 2, 0);
    for (std::size_t p = 0; p < a.params; ++p) {
      std::string label = base + "[";
      for (std::size_t k = 0; k < index.size(); ++k)
        label += (k ? ", " : "") + (coords[k].empty() ? std::to_string(index[k]) : coords[k][index[k]]);
      a.names.push_back(label + "]");
      for (std::size_t k = index.size(); k-- > 0;) {
        if (++index[k] < dims[k + 2]) break;
        index[k] = 0;
      }
    }
  }
  s->rank = rank;
  s->trailing.assign(dims.begin() + 2, dims.end());
  s->chains = a.chains;
  s->draws = a.draws;
  s->params = a.params;
  H5Id dcpl(H5Dget_create_plist(s->ds.id), H5Pclose);
  plan_blocks(*s, dcpl.id);
  return s;
}

/// Reads block `b` of `s` into the parameters' buffers of `a` (through `staging` when the
/// dataset has several parameters, else straight into place), HDF5 calls under `h5`; false
/// when HDF5 cannot read it. NaN and infinite values are read as they are (herd-diagnose
/// gives such a parameter NA statistics and says where its first one is).
bool read_block(BlockSource& s, std::size_t b, DrawsArray& a, std::mutex& h5, std::vector<double>& staging) {
  const std::size_t c0 = b / s.draw_blocks * s.cb, t0 = b % s.draw_blocks * s.db;
  const std::size_t nc = std::min(s.cb, s.chains - c0), nt = std::min(s.db, s.draws - t0);
  const std::size_t p_count = s.params, n = s.draws;
  // The block's rows are rows of the one buffer (a transposed dataset's are not).
  const bool direct = p_count == 1 && !s.transposed;
  if (!direct) staging.resize(nc * nt * p_count);
  {
    const std::lock_guard<std::mutex> lock(h5);
    H5Id fspace(H5Dget_space(s.ds.id), H5Sclose);
    std::vector<hsize_t> start(static_cast<std::size_t>(s.rank), 0), count{nc, nt};
    start[0] = c0;
    start[1] = t0;
    if (s.transposed) {
      std::swap(start[0], start[1]);
      std::swap(count[0], count[1]);
    }
    count.insert(count.end(), s.trailing.begin(), s.trailing.end());
    if (!fspace || H5Sselect_hyperslab(fspace.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
      return false;
    if (direct) {
      // The memory selection: the same rows of the [chains, draws] buffer.
      const hsize_t mdims[2] = {s.chains, s.draws};
      H5Id mspace(H5Screate_simple(2, mdims, nullptr), H5Sclose);
      if (!mspace || H5Sselect_hyperslab(mspace.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Dread(s.ds.id, H5T_NATIVE_DOUBLE, mspace.id, fspace.id, H5P_DEFAULT, a.columns[0].data()) < 0)
        return false;
    } else {
      const hsize_t mcount = staging.size();
      H5Id mspace(H5Screate_simple(1, &mcount, nullptr), H5Sclose);
      if (!mspace || H5Dread(s.ds.id, H5T_NATIVE_DOUBLE, mspace.id, fspace.id, H5P_DEFAULT, staging.data()) < 0)
        return false;
    }
  }
  if (direct) return true;
  if (s.transposed) {
    // The staging buffer is [nt draws, nc = all chains, params].
    const double* src = staging.data();
    for (std::size_t p = 0; p < p_count; ++p) {
      double* col = a.columns[p].data();
      for (std::size_t c = 0; c < nc; ++c) {
        const double* in = src + c * p_count + p;
        double* out = col + c * n + t0;
        for (std::size_t t = 0; t < nt; ++t) out[t] = in[t * nc * p_count];
      }
    }
    return true;
  }
  // Each parameter's rows: a strided gather from the staging buffer (in cache), written
  // contiguously into its buffer.
  const double* src = staging.data();
  for (std::size_t p = 0; p < p_count; ++p) {
    double* col = a.columns[p].data();
    for (std::size_t c = 0; c < nc; ++c) {
      const double* in = src + c * nt * p_count + p;
      double* out = col + (c0 + c) * n + t0;
      for (std::size_t t = 0; t < nt; ++t) out[t] = in[t * p_count];
    }
  }
  return true;
}

/// The shape of dataset `name` of `loc` (empty when it cannot be opened).
std::vector<hsize_t> dataset_shape(hid_t loc, const std::string& name) {
  H5Id ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds) return {};
  H5Id sp(H5Dget_space(ds.id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(sp.id);
  if (rank < 0) return {};
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(sp.id, dims.data(), nullptr);
  return dims;
}

/// Dataset `name` of group `g` (shown as `chain_compact/<name>`) read whole as `T` (HDF5
/// converts the stored type), after checking that it is numeric with `n` values.
template <typename T>
std::vector<T> read_compact_column(const std::string& path, hid_t g, const std::string& name, std::size_t n,
                                   hid_t memtype) {
  const std::string shown = "chain_compact/" + name;
  H5Id ds(H5Dopen2(g, name.c_str(), H5P_DEFAULT), H5Dclose);
  HERD_REQUIRE(static_cast<bool>(ds), "{}: no dataset '{}', which a compact-only file (h5_posterior = \"compact\") has",
               path, shown);
  H5Id type(H5Dget_type(ds.id), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id);
  HERD_REQUIRE(cls == H5T_FLOAT || cls == H5T_INTEGER, "{}: dataset '{}' is not numeric", path, shown);
  H5Id space(H5Dget_space(ds.id), H5Sclose);
  const auto have = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id));
  HERD_REQUIRE(have == n, "{}: dataset '{}' has {} values, but must have {}", path, shown, have, n);
  std::vector<T> v(n);
  HERD_REQUIRE(n == 0 || H5Dread(ds.id, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
               "{}: cannot read dataset '{}'", path, shown);
  return v;
}

/// The `n` strings of the rank-1 dataset `chain_compact/<name>` (variable-length or fixed),
/// the names of the columns of `chain_compact/<of>`.
std::vector<std::string> read_names(const std::string& path, hid_t g, const std::string& name, const std::string& of,
                                    std::size_t n) {
  const std::string shown = "chain_compact/" + name;
  H5Id ds(H5Dopen2(g, name.c_str(), H5P_DEFAULT), H5Dclose);
  HERD_REQUIRE(static_cast<bool>(ds), "{}: no dataset '{}' (the names of chain_compact/{})", path, shown, of);
  H5Id type(H5Dget_type(ds.id), H5Tclose);
  H5Id space(H5Dget_space(ds.id), H5Sclose);
  HERD_REQUIRE(H5Tget_class(type.id) == H5T_STRING, "{}: dataset '{}' does not hold strings", path, shown);
  const auto have = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id));
  HERD_REQUIRE(have == n, "{}: dataset '{}' has {} names, but 'chain_compact/{}' has {} columns", path, shown, have, of,
               n);
  std::vector<std::string> names;
  if (H5Tis_variable_str(type.id) > 0) {
    H5Id mt(H5Tcopy(type.id), H5Tclose);
    std::vector<char*> raw(n, nullptr);
    HERD_REQUIRE(H5Dread(ds.id, mt.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) >= 0, "{}: cannot read dataset '{}'",
                 path, shown);
    for (char* c : raw) names.emplace_back(c != nullptr ? c : "");
    H5Dvlen_reclaim(mt.id, space.id, H5P_DEFAULT, raw.data());
  } else {
    const std::size_t width = H5Tget_size(type.id);
    std::vector<char> buf(n * width + 1, '\0');
    HERD_REQUIRE(H5Dread(ds.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0,
                 "{}: cannot read dataset '{}'", path, shown);
    for (std::size_t i = 0; i < n; ++i) {
      const char* b = buf.data() + i * width;
      names.emplace_back(b, std::find(b, b + width, '\0'));
    }
  }
  return names;
}

/// The compact chain of a file without a `posterior` group (herd-sample's
/// `h5_posterior = "compact"`): `chain_compact/state` [n, d], `weight` [n], `variable` [d],
/// the target's derived quantities `derived_quantities` [n, q] with their names
/// `derived_quantity` [q] when it has any, and with several chains `chain` [n] (each chain's rows contiguous, in the
/// posterior's chain order) and `burnin` [chains], else the group's attribute `burnin`. Each chain's post-burn-in
/// verbose chain is cut to the shortest (as herd-sample cuts the verbose posterior), and the variables are grouped
/// (`beta[1..K]` as `beta`), named and ordered as herd-sample's summary table (the recorded names, variables then
/// derived quantities), as read_hdf5 gives the verbose file of the run: the same arrays, in compact form
/// (`DrawsArray::weights`).
std::vector<DrawsArray> read_chain_compact(const std::string& path, hid_t file) {
  H5Id g(H5Gopen2(file, "chain_compact", H5P_DEFAULT), H5Gclose);
  HERD_REQUIRE(static_cast<bool>(g), "{}: 'chain_compact' is not a group", path);
  const std::vector<hsize_t> shape = dataset_shape(g.id, "state");
  HERD_REQUIRE(shape.size() == 2 && shape[0] > 0 && shape[1] > 0,
               "{}: 'chain_compact/state' must be a dataset [compact_draw, variable] with at least one row and column",
               path);
  const std::size_t n = checked_count({static_cast<std::int64_t>(shape[0]), static_cast<std::int64_t>(shape[1])},
                                      fmt::format("{}: dataset 'chain_compact/state'", path));
  const auto rows = static_cast<std::size_t>(shape[0]), d = static_cast<std::size_t>(shape[1]);
  // The states, their weights and chains, and the expanded copy of one variable at a time.
  check_memory_need(static_cast<double>(n) * 8.0 * 2.0 + static_cast<double>(rows) * 16.0, g_max_memory,
                    fmt::format("{}: reading 'chain_compact/state' ({} x {} values)", path, rows, d),
                    "diagnose a smaller dataset (--dataset)", "--max-memory");
  const std::vector<double> state = read_compact_column<double>(path, g.id, "state", n, H5T_NATIVE_DOUBLE);
  const std::vector<std::int64_t> weight =
      read_compact_column<std::int64_t>(path, g.id, "weight", rows, H5T_NATIVE_INT64);
  std::vector<std::string> names = read_names(path, g.id, "variable", "state", d);
  for (std::size_t i = 0; i < rows; ++i)
    HERD_REQUIRE(weight[i] >= 1, "{}: 'chain_compact/weight' is {} at row {}, but weights must be positive", path,
                 weight[i], i);
  // The derived quantities on every state ([n, nq]; a compact-only file of a target with
  // quantities): columns d.. after the variables, as the verbose posterior has them.
  std::vector<double> derived;
  std::size_t nq = 0;
  if (is_dataset(g.id, "derived_quantities")) {
    const std::vector<hsize_t> qs = dataset_shape(g.id, "derived_quantities");
    HERD_REQUIRE(qs.size() == 2 && qs[0] == shape[0],
                 "{}: 'chain_compact/derived_quantities' must be a dataset [compact_draw, derived_quantity] with the "
                 "{} rows of 'chain_compact/state'",
                 path, rows);
    nq = static_cast<std::size_t>(qs[1]);
    check_memory_need(static_cast<double>(rows) * static_cast<double>(nq + d) * 16.0, g_max_memory,
                      fmt::format("{}: reading 'chain_compact/derived_quantities' ({} x {} values)", path, rows, nq),
                      "diagnose a smaller dataset (--dataset)", "--max-memory");
    derived = read_compact_column<double>(path, g.id, "derived_quantities", rows * nq, H5T_NATIVE_DOUBLE);
    const std::vector<std::string> qn = read_names(path, g.id, "derived_quantity", "derived_quantities", nq);
    names.insert(names.end(), qn.begin(), qn.end());
  }
  auto value = [&](std::size_t row, std::size_t k) { return k < d ? state[row * d + k] : derived[row * nq + k - d]; };
  // Each chain's first row and its burn-in (compact rows).
  std::vector<std::size_t> first{0};
  if (is_dataset(g.id, "chain")) {
    const std::vector<std::int64_t> chain =
        read_compact_column<std::int64_t>(path, g.id, "chain", rows, H5T_NATIVE_INT64);
    std::vector<std::int64_t> seen{chain[0]};
    for (std::size_t i = 1; i < rows; ++i) {
      if (chain[i] == chain[i - 1]) continue;
      HERD_REQUIRE(std::find(seen.begin(), seen.end(), chain[i]) == seen.end(),
                   "{}: 'chain_compact/chain' returns to chain {} at row {}, but each chain's rows must be contiguous",
                   path, chain[i], i);
      seen.push_back(chain[i]);
      first.push_back(i);
    }
  }
  const std::size_t m = first.size();
  first.push_back(rows);
  std::vector<std::int64_t> burnin;
  if (is_dataset(g.id, "burnin")) {
    burnin = read_compact_column<std::int64_t>(path, g.id, "burnin", m, H5T_NATIVE_INT64);
  } else {
    HERD_REQUIRE(H5Aexists(g.id, "burnin") > 0, "{}: 'chain_compact' has no attribute or dataset 'burnin'", path);
    H5Id a(H5Aopen(g.id, "burnin", H5P_DEFAULT), H5Aclose);
    std::int64_t b = 0;
    HERD_REQUIRE(static_cast<bool>(a) && H5Aread(a.id, H5T_NATIVE_INT64, &b) >= 0,
                 "{}: cannot read the attribute 'chain_compact/burnin'", path);
    burnin.assign(m, b);
  }
  // The posterior's common length: the shortest post-burn-in verbose chain.
  std::int64_t ndraw = -1;
  for (std::size_t c = 0; c < m; ++c) {
    const std::size_t len = first[c + 1] - first[c];
    HERD_REQUIRE(burnin[c] >= 0 && static_cast<std::size_t>(burnin[c]) < len,
                 "{}: chain_compact's burn-in of chain {} is {}, but the chain has {} rows", path, c, burnin[c], len);
    std::int64_t total = 0;
    for (std::size_t i = first[c] + static_cast<std::size_t>(burnin[c]); i < first[c + 1]; ++i) total += weight[i];
    ndraw = ndraw < 0 ? total : std::min(ndraw, total);
  }
  // Each chain's rows after the burn-in up to ndraw verbose draws (the last one's weight
  // cut), padded with weight 0 to the longest.
  std::vector<std::vector<std::int64_t>> cut(m);
  for (std::size_t c = 0; c < m; ++c) {
    std::int64_t left = ndraw;
    for (std::size_t i = first[c] + static_cast<std::size_t>(burnin[c]); i < first[c + 1] && left > 0; ++i) {
      cut[c].push_back(std::min(weight[i], left));
      left -= cut[c].back();
    }
  }
  std::size_t width = 0;
  for (const auto& w : cut) width = std::max(width, w.size());
  std::vector<std::int64_t> weights(m * width, 0);
  for (std::size_t c = 0; c < m; ++c) std::copy(cut[c].begin(), cut[c].end(), weights.begin() + c * width);
  const std::vector<mcmc::ArvizVariable> vars = mcmc::arviz_variables(names);
  std::vector<DrawsArray> out;
  for (const auto& v : vars) {
    DrawsArray a;
    a.chains = m;
    a.draws = width;
    a.params = v.columns.size();
    a.weights = weights;
    for (std::size_t p = 0; p < a.params; ++p) {
      DrawsBuffer col(m * width);
      std::fill_n(col.data(), col.size(), 0.0);  // the padding
      for (std::size_t c = 0; c < m; ++c) {
        const std::size_t r0 = first[c] + static_cast<std::size_t>(burnin[c]);
        for (std::size_t t = 0; t < cut[c].size(); ++t) col[c * width + t] = value(r0 + t, v.columns[p]);
      }
      a.columns.push_back(std::move(col));
      a.names.push_back(names[v.columns[p]]);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

namespace {

enum class TextKind { kDrawsCsv, kParaDramChain, kParaDramSample, kCmdStan };

const char* kind_name(TextKind k) {
  switch (k) {
    case TextKind::kDrawsCsv:
      return "a draws CSV (one column per chain)";
    case TextKind::kParaDramChain:
      return "a ParaDRAM chain file";
    case TextKind::kParaDramSample:
      return "a ParaDRAM sample file";
    default:
      return "a CmdStan CSV";
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '[' || c == ']';
}

/// Splits a line at `delim`, or at runs of blanks when `delim` is empty; fields trimmed.
std::vector<std::string_view> split_by(std::string_view line, const std::string& delim) {
  if (delim == ",") return split_fields(line);
  std::vector<std::string_view> out;
  if (delim.empty()) {
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      if (i >= line.size()) break;
      const std::size_t j = i;
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      out.push_back(line.substr(j, i - j));
    }
    return out;
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = line.find(delim, start);
    out.push_back(trim(line.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start)));
    if (at == std::string_view::npos) break;
    start = at + delim.size();
  }
  return out;
}

/// A CmdStan CSV column name as stansummary and CmdStanPy's summary show it: an array or
/// matrix element's 1-based indices, which the CSV writes after dots ("theta.1", "Sigma.2.1"),
/// in brackets ("theta[1]", "Sigma[2,1]"). Any other name (lp__, a scalar, a tuple's "x:1")
/// is kept as written.
std::string stan_label(std::string_view name) {
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::string(name);
  std::string label(name.substr(0, dot));
  label += '[';
  bool digits = false;
  for (std::size_t i = dot + 1; i < name.size(); ++i) {
    const char c = name[i];
    if (c >= '0' && c <= '9') {
      label += c;
      digits = true;
    } else if (c == '.' && digits) {
      label += ',';
      digits = false;
    } else {
      return std::string(name);
    }
  }
  if (!digits) return std::string(name);
  return label + ']';
}

/// The delimiter of a header: the text between its first two names, blanks trimmed (empty:
/// blanks delimit).
std::string header_delimiter(std::string_view h) {
  std::size_t i = 0;
  while (i < h.size() && std::isspace(static_cast<unsigned char>(h[i]))) ++i;
  while (i < h.size() && is_name_char(h[i])) ++i;
  std::size_t j = i;
  while (j < h.size() && !is_name_char(h[j])) ++j;
  return std::string(trim(h.substr(i, j - i)));
}

bool is_chain_name(const std::string& l) {
  std::string_view v(l);
  if (v.rfind("chain", 0) != 0) return false;
  v.remove_prefix(5);
  if (!v.empty() && (v.front() == '_' || v.front() == '.' || v.front() == ' ')) v.remove_prefix(1);
  return !v.empty() &&
         std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

/// One text file: its kind, column names and draws of the diagnosed columns ([draws, cols]).
struct TextFile {
  TextKind kind = TextKind::kDrawsCsv;
  std::vector<std::string> names;      // diagnosed columns
  std::vector<double> rows;            // [rows, names.size()] row-major, each row once
  std::vector<std::uint32_t> weights;  // a chain file's SampleWeight per row (empty: each row is one draw)
  std::size_t draws = 0;               // draws: rows, each counted SampleWeight times
  std::size_t warmup = 0;              // CmdStan warm-up rows left out (not in `rows`)
  std::string warmup_how;              // how they were told from the posterior's, for the note
  // CmdStan's sampler diagnostics per row (empty without the column): divergent__ nonzero,
  // and treedepth__ at the run's max_depth (when the configuration block gives it).
  std::vector<std::uint8_t> divergent, at_max_depth;
  std::uint64_t max_depth = 0;  // 0: not given
  // Without max_depth: rows whose treedepth__ reaches CmdStan's default max_depth, 10.
  std::vector<std::uint8_t> at_default_depth;
  std::vector<double> energy;  // CmdStan's energy__ per row (empty without the column)
  std::string method;          // CmdStan's method ("sample" when the file does not say)
};

/// A setting of CmdStan's configuration block (comment lines before the header), with its
/// line; an empty value when the file has none.
struct CmdStanSetting {
  std::string value;
  std::size_t line = 0;
};

/// The CmdStan settings herd-diagnose reads: the method (what the rows are) and those that
/// say which rows are warm-up.
struct CmdStanWarmup {
  CmdStanSetting method, save_warmup, num_warmup, thin, max_depth;
  bool adaptation_terminated = false;  // the "# Adaptation terminated" line after the header
  std::size_t rows_before = 0;         // data rows before it
};

/// Takes `name = value` from the text of a configuration comment (after `#`), e.g.
/// `    save_warmup = 1` or `    thin = 1 (Default)`: the value's first word, for the names
/// herd-diagnose uses.
void take_cmdstan_setting(std::string_view body, std::size_t lineno, CmdStanWarmup& w) {
  const std::size_t eq = body.find('=');
  if (eq == std::string_view::npos) return;
  const std::string_view name = trim(body.substr(0, eq));
  std::string_view value = trim(body.substr(eq + 1));
  value = value.substr(0, value.find_first_of(" \t"));
  CmdStanSetting* s = name == "method"        ? &w.method
                      : name == "save_warmup" ? &w.save_warmup
                      : name == "num_warmup"  ? &w.num_warmup
                      : name == "thin"        ? &w.thin
                      : name == "max_depth"   ? &w.max_depth
                                              : nullptr;
  if (s != nullptr && s->line == 0) *s = {std::string(value), lineno};
}

/// The whole number of CmdStan setting `s` (`name` in messages), at least `min`; `fallback`
/// when the file does not give it.
std::uint64_t cmdstan_count(const std::string& path, const char* name, const CmdStanSetting& s, std::uint64_t min,
                            std::uint64_t fallback) {
  if (s.line == 0) return fallback;
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.value.data(), s.value.data() + s.value.size(), v);
  if (ec != std::errc() || ptr != s.value.data() + s.value.size() || s.value.empty() || v < min)
    throw InputError(fmt::format("{}: line {}: CmdStan's {} is '{}', but must be a whole number{}", path, s.line, name,
                                 s.value, min > 0 ? " of at least 1" : ""));
  return v;
}

/// Leaves out the warm-up rows of CmdStan CSV `tf` (as stansummary and ArviZ's from_cmdstan
/// do): the rows before the `# Adaptation terminated` line that ends the warm-up, else (an
/// unadapted run: no such line) with `save_warmup` on the first ceil(num_warmup / thin).
/// @throws herd::InputError when save_warmup is on but neither tells the warm-up apart, a
///         setting is not what CmdStan writes, or every row is warm-up.
void drop_cmdstan_warmup(const std::string& path, const CmdStanWarmup& w, TextFile& tf) {
  bool save = false;
  if (w.save_warmup.line > 0) {
    const std::string& v = w.save_warmup.value;
    if (v == "1" || v == "true") save = true;
    else if (v != "0" && v != "false")
      throw InputError(fmt::format("{}: line {}: CmdStan's save_warmup is '{}', but must be 0 or 1 (false or true)",
                                   path, w.save_warmup.line, v));
  }
  std::size_t warmup = 0;
  if (w.adaptation_terminated) {
    warmup = w.rows_before;
    tf.warmup_how = "the rows before \"# Adaptation terminated\"";
  } else if (save) {
    if (w.num_warmup.line == 0)
      throw InputError(
          fmt::format("{}: line {}: save_warmup is {}, but the file has neither a \"# Adaptation terminated\" line nor "
                      "num_warmup, so its warm-up draws cannot be told from the posterior's",
                      path, w.save_warmup.line, w.save_warmup.value));
    const std::uint64_t n = cmdstan_count(path, "num_warmup", w.num_warmup, 0, 0);
    const std::uint64_t thin = cmdstan_count(path, "thin", w.thin, 1, 1);
    warmup = static_cast<std::size_t>(std::min<std::uint64_t>(n / thin + (n % thin != 0 ? 1 : 0), tf.draws));
    tf.warmup_how = fmt::format(
        "save_warmup = {} and no \"# Adaptation terminated\" line: the first ceil(num_warmup / thin) = "
        "ceil({} / {}) rows",
        w.save_warmup.value, n, thin);
  }
  if (warmup == 0) return;
  if (warmup >= tf.draws)
    throw InputError(fmt::format("{}: all its {} draws are warm-up ({}), so it has no posterior draws to diagnose",
                                 path, tf.draws, tf.warmup_how));
  tf.rows.erase(tf.rows.begin(), tf.rows.begin() + static_cast<std::ptrdiff_t>(warmup * tf.names.size()));
  for (auto* flags : {&tf.divergent, &tf.at_max_depth, &tf.at_default_depth})
    if (!flags->empty()) flags->erase(flags->begin(), flags->begin() + static_cast<std::ptrdiff_t>(warmup));
  if (!tf.energy.empty()) tf.energy.erase(tf.energy.begin(), tf.energy.begin() + static_cast<std::ptrdiff_t>(warmup));
  tf.draws -= warmup;
  tf.warmup = warmup;
}

/// The warning of `n` divergent transitions among `total` post-warm-up ones, flagged by
/// `column`; per cent with two decimals, as CmdStan's diagnose prints it; `where` (when not
/// empty) after the column says which transitions were counted.
std::string divergence_warning(std::size_t n, std::size_t total, std::string_view column, std::string_view where = {}) {
  return fmt::format(
      "{} of {} post-warm-up transitions ({:.2f}%) ended with a divergence ({}{}): the sampler could not follow the "
      "posterior's curvature there, so the draws may be biased; raise adapt delta (e.g. 0.95 or 0.99) or "
      "reparameterize the model (e.g. non-centred)",
      n, total, 100.0 * static_cast<double>(n) / static_cast<double>(total), column, where);
}

/// The warning of `n` of `total` post-warm-up transitions at the maximum tree depth (`how`
/// they were told; `where`, when not empty, which transitions were counted).
std::string max_depth_warning(std::size_t n, std::size_t total, std::string_view how, std::string_view where = {}) {
  return fmt::format(
      "{} of {} post-warm-up transitions ({:.2f}%) hit the maximum tree depth ({}{}): an efficiency problem, not a "
      "bias; raise max_depth or reparameterize the model",
      n, total, 100.0 * static_cast<double>(n) / static_cast<double>(total), how, where);
}

/// E-BFMI below this is low (Betancourt 2016; CmdStan's diagnose, ArviZ's plot_energy).
constexpr double kEbfmiLimit = 0.3;

/// The messages of the chains' (label, E-BFMI) energies from `source` (e.g. "energy__"): a
/// warning into `warned` naming each chain whose E-BFMI is below kEbfmiLimit (`suffix` after
/// it), and a note into `said` naming those whose E-BFMI is undefined (a non-finite or
/// constant energy, or fewer than 2 draws), which are not judged. `values` (when not null)
/// gets the chains' labels below the limit and the warning; its `per_chain` is the caller's.
void ebfmi_messages(const std::vector<std::pair<std::string, double>>& chains, std::string_view source,
                    std::string_view suffix, std::vector<std::string>& warned, std::vector<std::string>& said,
                    EbfmiValues* values = nullptr) {
  std::vector<std::string> low, undefined;
  for (const auto& [label, e] : chains) {
    if (!std::isfinite(e)) undefined.push_back(label);
    else if (e < kEbfmiLimit) {
      low.push_back(fmt::format("{} ({:.3f})", label, e));
      if (values != nullptr) values->low.push_back(label);
    }
  }
  if (values != nullptr) {
    values->source = std::string(source);
    values->threshold = kEbfmiLimit;
  }
  if (!low.empty()) {
    warned.push_back(fmt::format(
        "E-BFMI is below {} for {}: the momentum resampling explores the energy distribution poorly, so the draws "
        "may miss the posterior's tails (Betancourt 2016); reparameterize the model (e.g. non-centred) or change its "
        "scales{}",
        kEbfmiLimit, fmt::join(low, ", "), suffix));
    if (values != nullptr) values->message = warned.back();
  }
  if (!undefined.empty())
    said.push_back(
        fmt::format("note: E-BFMI is not computed for {} ({}: a non-finite or constant energy, or fewer "
                    "than 2 draws), so it is not judged{}",
                    fmt::join(undefined, ", "), source, suffix));
}

/// The energy Bayesian fraction of missing information of one chain's post-warm-up Hamiltonian
/// energies (Betancourt 2016), as CmdStan's diagnose and ArviZ 1.3's `bfmi` compute it: the
/// sum of squared differences of consecutive energies over the sum of squared deviations from
/// their mean (ArviZ 0.x: (n - 1) / n of that). NaN for fewer than 2 energies.
double ebfmi(std::span<const double> energy) {
  const std::size_t n = energy.size();
  if (n < 2) return std::nan("");
  double mean = 0, diff2 = 0, dev2 = 0;
  for (const double e : energy) mean += e;
  mean /= static_cast<double>(n);
  for (std::size_t t = 0; t < n; ++t) {
    dev2 += (energy[t] - mean) * (energy[t] - mean);
    if (t > 0) diff2 += (energy[t] - energy[t - 1]) * (energy[t] - energy[t - 1]);
  }
  return diff2 / dev2;
}

/// What the rows of CmdStan CSV `tf` are, by its `method` (none given: `sample`): MCMC draws
/// (`sample`, and `generate_quantities`, which follows a sample's draws) are read as they are.
/// `variational`'s first row is the approximation's mean, not a draw: left out, as CmdStanPy's
/// `variational_sample` leaves it out. `variational`, `laplace` and
/// `pathfinder` draw independently from an approximation: a note says that ESS and R-hat
/// then judge nothing about the posterior. `optimize` (a point estimate) and `log_prob`
/// (log densities at given points) hold no draws.
/// @throws herd::InputError for those two, naming the file, line and method; for a
///         variational file with no row besides the mean.
void apply_cmdstan_method(const std::string& path, const CmdStanWarmup& w, TextFile& tf,
                          std::vector<std::string>& notes) {
  const std::string& m = w.method.value;
  if (m == "optimize" || m == "log_prob")
    throw InputError(fmt::format(
        "{}: line {}: CmdStan's method is {}, so the file holds {}, not draws: there is nothing to diagnose "
        "(herd-diagnose reads the output of method = sample)",
        path, w.method.line, m,
        m == "optimize" ? "a point estimate (the mode)" : "log densities and gradients at given points"));
  if (m == "variational") {
    HERD_REQUIRE(tf.draws > 1,
                 "{}: line {}: CmdStan's method is variational, whose first row is the approximation's mean, and "
                 "the file has no draw after it",
                 path, w.method.line);
    tf.rows.erase(tf.rows.begin(), tf.rows.begin() + static_cast<std::ptrdiff_t>(tf.names.size()));
    tf.draws -= 1;
  }
  if (m == "variational" || m == "laplace" || m == "pathfinder")
    notes.push_back(fmt::format(
        "note: {}: CmdStan's method is {}: {}its {} rows are independent draws of an approximation of the "
        "posterior, so ESS and R-hat judge nothing about how close it is (they test a Markov chain's mixing)",
        path, m,
        m == "variational" ? "its first row, the approximation's mean, is left out as CmdStanPy leaves it out (and its "
                             "lp__ is 0 by construction); "
                           : "",
        tf.draws));
}

/// The largest SampleWeight of a chain file's row that herd-diagnose expands.
constexpr double kMaxSampleWeight = 1e9;

/// Bytes of workspace per draw that one thread's diagnostics of one quantity hold: summarize()'s
/// 21.25, and once its ESS uses the FFT (long chains) 32 per draw of its input and spectrum,
/// up to twice that as the FFT's length is rounded up, with a margin (herd-diagnose on one
/// chain of 1e7 and of 3e7 draws held 82 and 87 bytes per draw besides the values).
constexpr double kWorkspacePerDraw = 96;

/// The memory the text files read so far hold and will need (check_text_memory).
struct TextMemory {
  double rows = 0;    ///< values as read (a weighted row once)
  double values = 0;  ///< values once expanded into the parameters' buffers
  double draws = 0;   ///< draws of one quantity, over all chains
  std::size_t quantities = 0;
};

std::size_t g_diagnostics_threads = 1;  // set_diagnostics_threads

/// Refuses text file `tf` (`path`) when the draws of the files read so far with its own need
/// more memory than allowed (set_max_memory), before a weighted chain file's rows are
/// repeated SampleWeight times (a few rows of large weights expand to gigabytes): the rows as
/// read and the parameters' buffers read_text fills from them (8 bytes a value each), and the
/// diagnostics' workspace of the threads (kWorkspacePerDraw per draw of a quantity; at most
/// one thread per quantity). Adds its own to `held`.
void check_text_memory(const std::string& path, const TextFile& tf, TextMemory& held) {
  const bool csv = tf.kind == TextKind::kDrawsCsv;  // one quantity, one column per chain
  const auto k = static_cast<double>(tf.names.size()), draws = static_cast<double>(tf.draws);
  const bool first = held.values == 0;
  held.rows += static_cast<double>(tf.rows.size());
  held.values += draws * k;
  held.draws += csv ? draws * k : draws;
  held.quantities = csv ? 1 : tf.names.size();
  const std::size_t threads = std::max<std::size_t>(1, std::min(g_diagnostics_threads, held.quantities));
  const double need = (held.rows + held.values) * 8.0 + static_cast<double>(threads) * kWorkspacePerDraw * held.draws;
  const std::string on = fmt::format("their diagnostics on {} thread{}", threads, threads == 1 ? "" : "s");
  const std::string before = first ? "" : ", besides the files before it";
  check_memory_need(need, g_max_memory,
                    tf.weights.empty()
                        ? fmt::format("{}: its {} draws of {} column{}{} and {}", path, tf.draws, tf.names.size(),
                                      tf.names.size() == 1 ? "" : "s", before, on)
                        : fmt::format("{}: its weighted rows (SampleWeight totals {} draws, of {} columns{}), "
                                      "expanded, and {}",
                                      path, tf.draws, tf.names.size(), before, on),
                    "diagnose fewer or shorter chains, or on fewer threads (--threads)", "--max-memory");
}

/// Reads one text file of draws (formats in diagnose_input.hpp); notes on what was left out
/// go to `notes`. `held`: the memory of the files read before it (check_text_memory), to
/// which its own is added.
TextFile read_text_file(const std::string& path, std::vector<std::string>& notes, TextMemory& held) {
  // A folder opens as a stream that reads nothing, which read as "no numeric rows".
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(
        fmt::format("{}: is a folder, but herd-diagnose reads files of draws (an .h5 file, a draws CSV, or ParaDRAM "
                    "chain/sample or CmdStan CSV files, one per chain: name them, e.g. {}/*_chain.txt)",
                    path, path));
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    const int err = errno;  // why: no such file, no permission, ...
    throw InputError(fmt::format("{}: cannot open the file ({})", path, std::strerror(err)));
  }
  std::string line;
  std::size_t lineno = 0, width = 0, header_line = 0;
  bool comments = false, have_header = false, first = true;
  TextFile tf;
  std::string delim = ",";
  std::vector<std::size_t> keep;  // column indices diagnosed
  std::size_t weight_col = 0;
  std::vector<double> vals;
  std::size_t cut_line = 0;  // a last data row without a newline, left out
  CmdStanWarmup cmdstan;
  std::size_t divergent_col = std::numeric_limits<std::size_t>::max(), depth_col = divergent_col,
              energy_col = divergent_col;
  // A ParaDRAM chain file's BurninLocation column and its value on the last row read.
  std::size_t burnin_col = divergent_col;
  double last_burnin = 0;
  while (std::getline(in, line)) {
    ++lineno;
    // A UTF-8 byte order mark (a CSV saved as "CSV UTF-8" by a spreadsheet, pandas'
    // encoding="utf-8-sig") is not part of the first line: its header was not recognised.
    if (lineno == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
    // getline reached the end of the file inside this line: no newline ends it.
    const bool unterminated = in.eof();
    // netCDF-3 ("classic", what xarray's to_netcdf writes with only scipy installed) is not
    // HDF5: said as such, not as binary data in a text file.
    if (lineno == 1 && line.size() >= 4 && line.compare(0, 3, "CDF") == 0 &&
        (line[3] == '\x01' || line[3] == '\x02' || line[3] == '\x05'))
      throw InputError(
          fmt::format("{}: is a netCDF-3 (classic) file, but herd-diagnose reads netCDF-4 (HDF5) files: write it with "
                      "to_netcdf(..., engine=\"netcdf4\") or \"h5netcdf\", or convert it with nccopy -k nc4",
                      path));
    if (line.find('\0') != std::string::npos)
      throw InputError(
          fmt::format("{}: line {} holds binary data, but herd-diagnose reads text files (a ParaDRAM binary "
                      "chain: read the run's .h5 instead)",
                      path, lineno));
    const std::string_view t = trim(line);
    if (t.empty()) continue;
    if (t.front() == '#') {
      comments = true;
      const std::string_view body = trim(t.substr(1));
      if (first) take_cmdstan_setting(body, lineno, cmdstan);
      else if (body == "Adaptation terminated" && !cmdstan.adaptation_terminated) {
        cmdstan.adaptation_terminated = true;
        cmdstan.rows_before = tf.draws;
      }
      continue;
    }
    if (first) {
      first = false;
      header_line = lineno;
      // A header, or the first row of a draws CSV without one.
      auto numeric_fields = split_fields(t);
      bool numeric = true;
      for (auto f : numeric_fields) {
        double v = 0;
        numeric = numeric && parse_double(f, v);
      }
      if (numeric && !comments) {
        tf.kind = TextKind::kDrawsCsv;
        width = numeric_fields.size();
        for (std::size_t k = 0; k < width; ++k) keep.push_back(k);
      } else {
        have_header = true;
        delim = header_delimiter(t);
        const auto fields = split_by(t, delim);
        width = fields.size();
        std::vector<std::string> low;
        low.reserve(fields.size());
        for (const auto& f : fields) low.push_back(lower(f));
        auto find = [&](const char* n) {
          return static_cast<std::size_t>(std::find(low.begin(), low.end(), n) - low.begin());
        };
        const std::size_t w = find("sampleweight"), lf = find("samplelogfunc"), lp = find("lp__");
        if (w < width && lf < width && w < lf) {
          tf.kind = TextKind::kParaDramChain;
          weight_col = w;
          burnin_col = find("burninlocation");
          for (std::size_t k = lf; k < width; ++k) keep.push_back(k);
        } else if (lf == 0 && w == width) {
          tf.kind = TextKind::kParaDramSample;
          for (std::size_t k = 0; k < width; ++k) keep.push_back(k);
        } else if (lp < width || (cmdstan.method.value == "laplace" && find("log_p__") < width)) {
          // CmdStan; laplace's draws have log_p__ and log_g__ instead of lp__.
          tf.kind = TextKind::kCmdStan;
          divergent_col = find("divergent__");
          depth_col = find("treedepth__");
          energy_col = find("energy__");
          tf.max_depth = cmdstan_count(path, "max_depth", cmdstan.max_depth, 1, 0);
          for (std::size_t k = 0; k < width; ++k) {
            const std::string& n = low[k];
            if (k == lp || !(n.size() > 2 && n.compare(n.size() - 2, 2, "__") == 0)) keep.push_back(k);
          }
        } else if (!comments && (delim == "," || (delim.empty() && width == 1)) &&
                   std::all_of(low.begin(), low.end(), is_chain_name)) {
          tf.kind = TextKind::kDrawsCsv;  // one chain's header has no delimiter: "chain1"
          delim = ",";
          for (std::size_t k = 0; k < width; ++k) keep.push_back(k);
        } else {
          throw InputError(
              fmt::format("{}: line {} \"{}\" is not a header herd-diagnose knows: expected a ParaDRAM chain file "
                          "(...,SampleWeight,"
                          "SampleLogFunc,<variables>), a ParaDRAM sample file (SampleLogFunc,<variables>), a CmdStan "
                          "CSV (lp__,...), "
                          "or draws with one column per chain (no header, or chain1,chain2,...)",
                          path, lineno, std::string(t.substr(0, 120))));
        }
        // Two columns of one name would be two rows of the table under one name, and one
        // key of --json (the other lost).
        std::unordered_map<std::string, std::size_t> column_of;
        for (std::size_t k : keep) {
          tf.names.emplace_back(tf.kind == TextKind::kCmdStan ? stan_label(fields[k]) : std::string(fields[k]));
          const auto [it, fresh] = column_of.try_emplace(tf.names.back(), k);
          if (!fresh)
            throw InputError(fmt::format(
                "{}: line {} column {} is named \"{}\", as column {} is, but each column of draws must have its "
                "own name",
                path, lineno, k + 1, fields[k], it->second + 1));
        }
        continue;
      }
    }
    if (unterminated) {
      // A row the writer had not finished (a file still being written, or left by a killed
      // run) can end inside a number, which still parses: left out, never read as a draw.
      cut_line = lineno;
      break;
    }
    const auto fields = split_by(t, delim);
    if (fields.size() != width)
      throw InputError(fmt::format("{}: line {} has {} fields, but line {} has {} ({})", path, lineno, fields.size(),
                                   header_line, width,
                                   tf.kind == TextKind::kDrawsCsv ? "one column per chain" : "one per header name"));
    vals.assign(width, 0.0);
    for (std::size_t k = 0; k < width; ++k) {
      if (!parse_double(fields[k], vals[k]))
        throw InputError(
            fmt::format("{}: line {} column {} is '{}', but must be a number", path, lineno, k + 1, fields[k]));
    }
    std::size_t reps = 1;
    if (tf.kind == TextKind::kParaDramChain) {
      const double wt = vals[weight_col];
      if (!(wt >= 1 && wt == std::floor(wt)))
        throw InputError(fmt::format("{}: line {} column {} (SampleWeight) is '{}', but must be a positive integer",
                                     path, lineno, weight_col + 1, fields[weight_col]));
      if (wt > kMaxSampleWeight)
        throw InputError(fmt::format(
            "{}: line {} column {} (SampleWeight) is '{}', but must be at most {} (herd-diagnose repeats each row "
            "SampleWeight times in memory)",
            path, lineno, weight_col + 1, fields[weight_col], static_cast<std::uint64_t>(kMaxSampleWeight)));
      reps = static_cast<std::size_t>(wt);
      tf.weights.push_back(static_cast<std::uint32_t>(reps));
    }
    if (burnin_col < width) last_burnin = vals[burnin_col];
    // CmdStan writes divergent__ as 0 or 1 and treedepth__ as a count: anything else (a NaN
    // would otherwise count as a divergence) is a damaged or hand-made file.
    if (divergent_col < width && vals[divergent_col] != 0 && vals[divergent_col] != 1)
      throw InputError(fmt::format("{}: line {} column {} (divergent__) is '{}', but must be 0 or 1", path, lineno,
                                   divergent_col + 1, fields[divergent_col]));
    if (depth_col < width && !(vals[depth_col] >= 0 && vals[depth_col] == std::floor(vals[depth_col])))
      throw InputError(fmt::format("{}: line {} column {} (treedepth__) is '{}', but must be a count (0, 1, 2, ...)",
                                   path, lineno, depth_col + 1, fields[depth_col]));
    if (divergent_col < width) tf.divergent.push_back(vals[divergent_col] != 0 ? 1 : 0);
    if (energy_col < width) tf.energy.push_back(vals[energy_col]);
    if (depth_col < width && tf.max_depth > 0)
      tf.at_max_depth.push_back(vals[depth_col] >= static_cast<double>(tf.max_depth) ? 1 : 0);
    if (depth_col < width && tf.max_depth == 0) tf.at_default_depth.push_back(vals[depth_col] >= 10 ? 1 : 0);
    // A weighted row is kept once: read_text repeats it into the parameters' buffers, once
    // the memory of all of them is known to fit (check_text_memory).
    for (std::size_t k : keep) tf.rows.push_back(vals[k]);
    tf.draws += reps;
  }
  if (first && comments) throw InputError(fmt::format("{}: only '#' comment lines, no header and no draws", path));
  HERD_REQUIRE(tf.draws > 0 || cut_line == 0,
               "{}: no draws: its only data row, line {}, has no newline at its end, so it looks cut off (a file "
               "still being written, or left by a killed run)",
               path, cut_line);
  HERD_REQUIRE(tf.draws > 0, "{}: no draws (the file has no numeric rows)", path);
  if (tf.kind == TextKind::kCmdStan) {
    tf.method = cmdstan.method.line > 0 ? cmdstan.method.value : "sample";
    drop_cmdstan_warmup(path, cmdstan, tf);
    apply_cmdstan_method(path, cmdstan, tf, notes);
  }
  check_text_memory(path, tf, held);
  if (cut_line > 0)
    notes.push_back(
        fmt::format("note: {}: line {} has no newline at its end, so it looks cut off (a file still being written, "
                    "or left by a killed run): left out; end it with a newline to have it read",
                    path, cut_line));
  // The chain's burn-in (ParaDRAM's BurninLocation, 1-based, on its last row) is diagnosed
  // with the rest, where herd-sample's table and .h5 leave it out: said, so that the two
  // tables' differences are not a puzzle.
  if (tf.kind == TextKind::kParaDramChain && last_burnin > 1 && last_burnin == std::floor(last_burnin))
    notes.push_back(fmt::format(
        "note: {}: its last row's BurninLocation ({}) marks the first {} compact state(s) as burn-in; they are "
        "diagnosed with the rest (herd-sample's table and .h5 leave them out)",
        path, static_cast<std::int64_t>(last_burnin), static_cast<std::int64_t>(last_burnin) - 1));
  if (tf.kind == TextKind::kDrawsCsv && !have_header) tf.names.assign(width, "");
  return tf;
}

}  // namespace

std::vector<DrawsArray> read_text(const std::vector<std::string>& paths, std::vector<std::string>* notes,
                                  std::vector<std::string>* warnings, SamplerDiagnostics* sampler) {
  HERD_REQUIRE(!paths.empty(), "herd-diagnose: no input file");
  std::vector<std::string> own_notes, own_warnings;
  std::vector<std::string>& said = notes != nullptr ? *notes : own_notes;
  std::vector<std::string>& warned = warnings != nullptr ? *warnings : own_warnings;
  std::vector<TextFile> files;
  files.reserve(paths.size());
  TextMemory held;
  for (const auto& p : paths) files.push_back(read_text_file(p, said, held));
  const TextFile& f0 = files[0];
  if (f0.kind == TextKind::kDrawsCsv) {
    HERD_REQUIRE(files.size() == 1,
                 "{}: a draws CSV (one column per chain) holds all chains itself; several files are "
                 "several chains only for ParaDRAM chain/sample files and CmdStan CSV files",
                 paths[0]);
    DrawsArray a;
    a.chains = f0.names.size();
    a.draws = f0.draws;
    a.params = 1;
    DrawsBuffer col(f0.rows.size());
    for (std::size_t t = 0; t < a.draws; ++t)
      for (std::size_t c = 0; c < a.chains; ++c) col[c * a.draws + t] = f0.rows[t * a.chains + c];
    a.columns.push_back(std::move(col));
    a.names.push_back(std::filesystem::path(paths[0]).stem().string());
    if (sampler != nullptr) {
      *sampler = {};
      for (std::size_t c = 0; c < a.chains; ++c) sampler->chains.push_back(std::to_string(c));
      sampler->input.format = "draws_csv";
    }
    std::vector<DrawsArray> out;
    out.push_back(std::move(a));
    return out;
  }
  // The warm-up left out of CmdStan files, in one note for all chains.
  std::size_t with_warmup = 0;
  for (const auto& f : files) with_warmup += f.warmup > 0 ? 1 : 0;
  if (with_warmup > 0) {
    const bool same = std::all_of(files.begin(), files.end(), [&](const TextFile& f) { return f.warmup == f0.warmup; });
    std::string counts;
    for (const auto& f : files) counts += (counts.empty() ? "" : ", ") + std::to_string(f.warmup);
    const auto how = std::find_if(files.begin(), files.end(), [](const TextFile& f) { return f.warmup > 0; });
    said.push_back(
        fmt::format("note: left out the warm-up draws of the CmdStan CSV{} ({}), as stansummary and ArviZ do: {}",
                    files.size() == 1 ? "" : " files", how->warmup_how,
                    files.size() == 1 ? fmt::format("{} draws", f0.warmup)
                    : same            ? fmt::format("{} draws per chain", f0.warmup)
                                      : fmt::format("{} draws in the {} chains", counts, files.size())));
  }
  std::size_t n = f0.draws;
  for (std::size_t i = 1; i < files.size(); ++i) {
    if (files[i].kind != f0.kind)
      throw InputError(fmt::format("{}: this is {}, but {} is {}: the chains of one run must have one format", paths[i],
                                   kind_name(files[i].kind), paths[0], kind_name(f0.kind)));
    if (files[i].method != f0.method)
      throw InputError(
          fmt::format("{}: is the output of CmdStan's method {}, but {} is of method {}: the chains of one "
                      "run come from one method",
                      paths[i], files[i].method, paths[0], f0.method));
    if (files[i].names != f0.names)
      throw InputError(
          fmt::format("{}: its columns differ from those of {}: the chains of one run have the same "
                      "variables",
                      paths[i], paths[0]));
    n = std::min(n, files[i].draws);
  }
  bool cut = false;
  for (const auto& f : files) cut = cut || f.draws != n;
  if (cut) {
    std::string lens;
    for (const auto& f : files) lens += (lens.empty() ? "" : ", ") + std::to_string(f.draws);
    said.push_back(
        fmt::format("note: the {} chains have {} draws; each is cut to the first {} (R-hat needs equal lengths)",
                    files.size(), lens, n));
  }
  // CmdStan's sampler diagnostics of the post-warm-up transitions, as CmdStan's diagnose and
  // cmdstanr/CmdStanPy report them: divergences bias the draws; saturated trees cost time.
  // Those of the draws diagnosed: with chains of different lengths, each chain's first n
  // transitions (as ArviZ's sample_stats would hold them beside the cut posterior), so that
  // the count and its per cent speak of the same draws as the table; the flags in the rows
  // cut off are told apart (CmdStan's diagnose, which keeps every row, counts them too).
  SamplerDiagnostics sd;
  for (const auto& p : paths) sd.chains.push_back(p);
  sd.input.format = f0.kind == TextKind::kCmdStan         ? "cmdstan"
                    : f0.kind == TextKind::kParaDramChain ? "paradram_chain"
                                                          : "paradram_sample";
  for (const auto& f : files) {
    sd.input.draws_read.push_back(f.draws);
    if (f.kind == TextKind::kCmdStan) sd.input.warmup_left_out.push_back(f.warmup);
  }
  if (f0.kind == TextKind::kCmdStan) {
    sd.input.method = f0.method;
    sd.input.approximation = f0.method == "variational" || f0.method == "laplace" || f0.method == "pathfinder";
  }
  if (cut) sd.input.cut_to = n;
  const auto kept = [n](const std::vector<std::uint8_t>& flags) { return std::min<std::size_t>(flags.size(), n); };
  const auto set_in = [](const std::vector<std::uint8_t>& flags, std::size_t from, std::size_t to) {
    return static_cast<std::size_t>(std::count(flags.begin() + static_cast<std::ptrdiff_t>(from),
                                               flags.begin() + static_cast<std::ptrdiff_t>(to), 1));
  };
  const std::string where =
      cut ? fmt::format(", in the draws diagnosed: the first {} of each chain", n) : std::string();
  const auto cut_off_note = [](std::size_t more) {
    return more == 0 ? std::string() : fmt::format("; {} more in the rows cut off", more);
  };
  std::vector<std::uint64_t> depths;  // the files' max_depth, each once
  std::size_t unjudged = 0;           // transitions at depth 10 in files that give no max_depth
  bool any_divergent = false, any_depth = false;
  for (const auto& f : files) {
    any_divergent = any_divergent || !f.divergent.empty();
    any_depth = any_depth || !f.at_max_depth.empty();
  }
  // A per-row flag of every file counted over the draws kept (and in the rows cut off).
  const auto tally = [&](const char* source, std::vector<std::uint8_t> TextFile::*flags) {
    TransitionFlags t;
    t.source = source;
    for (const auto& f : files) {
      const std::vector<std::uint8_t>& v = f.*flags;
      const std::size_t k = kept(v);
      const std::size_t set = set_in(v, 0, k);
      t.per_chain.push_back(v.empty() ? -1 : static_cast<std::int64_t>(set));
      t.count += set;
      t.transitions += k;
      t.cut_off += set_in(v, k, v.size());
    }
    return t;
  };
  if (any_divergent) {
    TransitionFlags d = tally("divergent__", &TextFile::divergent);
    if (d.count > 0) {
      d.message = divergence_warning(d.count, d.transitions, "divergent__", where + cut_off_note(d.cut_off));
      warned.push_back(d.message);
    }
    sd.divergent = std::move(d);
  }
  for (const auto& f : files) {
    if (f.max_depth > 0 && std::find(depths.begin(), depths.end(), f.max_depth) == depths.end())
      depths.push_back(f.max_depth);
    unjudged += set_in(f.at_default_depth, 0, kept(f.at_default_depth));
  }
  if (any_depth) {
    TransitionFlags t = tally("treedepth__", &TextFile::at_max_depth);
    for (const auto& f : files) t.max_depth.push_back(f.at_max_depth.empty() ? 0 : f.max_depth);
    if (t.count > 0) {
      t.message = max_depth_warning(
          t.count, t.transitions,
          fmt::format("treedepth__ = max_depth = {}",
                      depths.size() == 1 ? std::to_string(depths.front())
                                         : fmt::format("{}, each chain's own", fmt::join(depths, " or "))),
          where + cut_off_note(t.cut_off));
      warned.push_back(t.message);
    }
    sd.max_treedepth = std::move(t);
  }
  if (unjudged > 0)
    said.push_back(fmt::format(
        "note: {} post-warm-up transition{} treedepth__ 10 (CmdStan's default max_depth), but {} no max_depth in "
        "{} configuration block (CmdStan writes it under nuts), so whether they hit the limit is not judged{}",
        unjudged, unjudged == 1 ? " reaches" : "s reach",
        files.size() == 1 ? "the file gives" : "the files that hold them give", files.size() == 1 ? "its" : "their",
        cut ? fmt::format(" (counted in the draws diagnosed: the first {} of each chain)", n) : std::string()));
  // Flags only in the rows cut off: no warning (the draws diagnosed have none), but a note.
  if (sd.divergent && sd.divergent->count == 0 && sd.divergent->cut_off > 0)
    said.push_back(fmt::format(
        "note: {} post-warm-up transition{} ended with a divergence (divergent__) in the rows cut off, after the "
        "first {} of each chain that are diagnosed; none did among those",
        sd.divergent->cut_off, sd.divergent->cut_off == 1 ? "" : "s", n));
  if (sd.max_treedepth && sd.max_treedepth->count == 0 && sd.max_treedepth->cut_off > 0)
    said.push_back(fmt::format(
        "note: {} post-warm-up transition{} hit the maximum tree depth (treedepth__) in the rows cut off, after the "
        "first {} of each chain that are diagnosed; none did among those",
        sd.max_treedepth->cut_off, sd.max_treedepth->cut_off == 1 ? "" : "s", n));
  std::vector<std::pair<std::string, double>> energy;  // E-BFMI per file (chain) with energy__
  std::vector<double> per_chain_ebfmi;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& e = files[i].energy;
    const double v = e.empty() ? std::nan("") : ebfmi(std::span<const double>(e.data(), std::min(e.size(), n)));
    per_chain_ebfmi.push_back(v);
    if (!e.empty()) energy.emplace_back(paths[i], v);
  }
  if (!energy.empty()) {
    EbfmiValues ev;
    ev.per_chain = std::move(per_chain_ebfmi);
    ebfmi_messages(energy, "energy__",
                   cut ? fmt::format(" (of the first {} draws of each chain, those diagnosed)", n) : "", warned, said,
                   &ev);
    sd.ebfmi = std::move(ev);
  }
  if (sampler != nullptr) *sampler = std::move(sd);
  DrawsArray a;
  a.chains = files.size();
  a.draws = n;
  a.params = f0.names.size();
  a.names = f0.names;
  for (std::size_t p = 0; p < a.params; ++p) {
    DrawsBuffer col(a.chains * n);
    for (std::size_t c = 0; c < a.chains; ++c) {
      const TextFile& f = files[c];
      double* out = col.data() + c * n;
      if (f.weights.empty()) {
        for (std::size_t t = 0; t < n; ++t) out[t] = f.rows[t * a.params + p];
        continue;
      }
      // The Markov chain: row i repeated SampleWeight times, up to n draws.
      for (std::size_t i = 0, t = 0; t < n; ++i) {
        const std::size_t r = std::min<std::size_t>(f.weights[i], n - t);
        std::fill_n(out + t, r, f.rows[i * a.params + p]);
        t += r;
      }
    }
    a.columns.push_back(std::move(col));
  }
  std::vector<DrawsArray> out;
  out.push_back(std::move(a));
  return out;
}

bool is_hdf5(const std::string& path) {
  quiet_hdf5();
  return H5Fis_hdf5(path.c_str()) > 0;
}

struct Hdf5Draws::Impl {
  std::string path;
  H5Id file{H5I_INVALID_HID, H5Fclose};
  std::mutex h5;  // HDF5 calls one at a time (a library built without thread-safety needs it)
  std::vector<DrawsArray> arrays;
  std::vector<std::unique_ptr<BlockSource>> sources;  // per array; null: read whole already

  /// Adds dataset `name` of `loc` as the next array.
  void add(hid_t loc, const std::string& name, const std::string& shown, const std::vector<std::string>& labels = {}) {
    DrawsArray a;
    auto src = plan_dataset(path, loc, name, shown, a, labels);
    arrays.push_back(std::move(a));
    sources.push_back(std::move(src));
  }
};

namespace {

/// How dataset `name` of group `g` (`shown` in messages) holds the posterior's [`chains`,
/// `draws`] transitions: 0 as [chain, draw]; 1 as [draw, chain], where its dimension names
/// say so (xarray writes a transposed variable so; the posterior's datasets are read by the
/// same rule); -1 neither: another shape, with a note into `notes` that it is not judged.
int draws_layout(const std::string& path, hid_t g, const char* name, const char* shown, std::size_t chains,
                 std::size_t draws, std::vector<std::string>& notes) {
  const std::vector<hsize_t> shape = dataset_shape(g, name);
  bool transposed = false;
  if (shape.size() == 2) {
    H5Id ds(H5Dopen2(g, name, H5P_DEFAULT), H5Dclose);
    const auto dims = ds ? dimension_names(ds.id, 2) : std::vector<std::string>();
    transposed = dims.size() == 2 && dims[0] == "draw" && dims[1] == "chain";
  }
  if (shape.size() == 2 && !transposed && shape[0] == chains && shape[1] == draws) return 0;
  if (shape.size() == 2 && transposed && shape[0] == draws && shape[1] == chains) return 1;
  notes.push_back(
      fmt::format("note: {}: '{}' has the shape [{}], but the posterior's draws are [{}, {}] (chain, "
                  "draw): not judged",
                  path, shown, fmt::join(shape, ", "), chains, draws));
  return -1;
}

/// The flags of dataset `name` of group `g` (one per transition, [`chains`, `draws`]; another
/// shape: a note into `notes`, nothing counted): how many are set in each chain. Booleans as h5py stores them
/// (an enum over an integer) or as netCDF stores them (int8), integers and floats (set: nonzero). Nothing when `g` has
/// no such dataset. @throws herd::InputError when it has one of another type, or unreadable.
std::optional<std::vector<std::size_t>> count_flags(const std::string& path, hid_t g, const char* name,
                                                    const char* shown, std::size_t chains, std::size_t draws,
                                                    std::vector<std::string>& notes) {
  if (!is_dataset(g, name)) return std::nullopt;
  const int layout = draws_layout(path, g, name, shown, chains, draws, notes);
  if (layout < 0) return std::nullopt;
  // Transition i's chain: [chain, draw] row-major, or [draw, chain].
  const auto chain_of = [&](std::size_t i) { return layout == 1 ? i % chains : i / draws; };
  H5Id ds(H5Dopen2(g, name, H5P_DEFAULT), H5Dclose);
  H5Id type(ds ? H5Dget_type(ds.id) : H5I_INVALID_HID, H5Tclose);
  H5Id space(ds ? H5Dget_space(ds.id) : H5I_INVALID_HID, H5Sclose);
  const H5T_class_t cls = type ? H5Tget_class(type.id) : H5T_NO_CLASS;
  const hssize_t n = space ? H5Sget_simple_extent_npoints(space.id) : -1;
  const bool flags = cls == H5T_ENUM || cls == H5T_INTEGER || cls == H5T_FLOAT;
  HERD_REQUIRE(flags && n >= 0, "{}: dataset '{}' must hold one flag per transition (booleans or numbers)", path,
               shown);
  const auto count = static_cast<std::size_t>(n);
  std::vector<std::size_t> set(chains, 0);  // per chain
  bool read = false;
  if (cls == H5T_ENUM) {
    // The enum's values in memory (native order): an element is set when any byte is.
    H5Id mem(H5Tget_native_type(type.id, H5T_DIR_DEFAULT), H5Tclose);
    const std::size_t size = mem ? H5Tget_size(mem.id) : 0;
    std::vector<unsigned char> bytes(count * size);
    read = size > 0 && H5Dread(ds.id, mem.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0;
    for (std::size_t i = 0; read && i < count; ++i)
      set[chain_of(i)] += std::any_of(bytes.begin() + static_cast<std::ptrdiff_t>(i * size),
                                      bytes.begin() + static_cast<std::ptrdiff_t>((i + 1) * size),
                                      [](unsigned char b) { return b != 0; });
  } else {
    std::vector<double> v(count);
    read = H5Dread(ds.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0;
    for (std::size_t i = 0; read && i < count; ++i) set[chain_of(i)] += v[i] != 0 ? 1 : 0;
  }
  HERD_REQUIRE(read, "{}: cannot read dataset '{}'", path, shown);
  return set;
}

/// The labels of the `chains` chains of the sampler diagnostics of group `g`: the values of
/// the `chain` coordinate on the first or second axis of its first dataset of `names` that has one
/// (coordinate_labels: PyMC's 0, 1, ..., or 1, 2, ...); empty when none has one.
std::vector<std::string> chain_labels(hid_t g, std::initializer_list<const char*> names, std::size_t chains) {
  for (const char* name : names) {
    if (!is_dataset(g, name)) continue;
    H5Id ds(H5Dopen2(g, name, H5P_DEFAULT), H5Dclose);
    if (!ds) continue;
    H5Id space(H5Dget_space(ds.id), H5Sclose);
    if (H5Sget_simple_extent_ndims(space.id) < 1) continue;
    const auto dims = dimension_names(ds.id, H5Sget_simple_extent_ndims(space.id));
    const auto axis = std::find(dims.begin(), dims.end(), "chain");
    if (axis == dims.end() || axis - dims.begin() > 1) continue;
    auto labels = coordinate_labels(ds.id, static_cast<unsigned>(axis - dims.begin()), chains);
    if (!labels.empty()) return labels;
  }
  return {};
}

/// A set of flags of one kind per chain as TransitionFlags (`source`, the message `message`).
TransitionFlags transition_flags(std::string_view source, const std::vector<std::size_t>& set, std::size_t draws,
                                 const std::string& message) {
  TransitionFlags t;
  t.source = std::string(source);
  for (const std::size_t k : set) {
    t.per_chain.push_back(static_cast<std::int64_t>(k));
    t.count += k;
    t.transitions += draws;
  }
  t.message = message;
  return t;
}

}  // namespace

std::vector<std::string> hdf5_sampler_warnings(const std::string& path, std::size_t chains, std::size_t draws,
                                               std::vector<std::string>& notes, SamplerDiagnostics* sampler) {
  quiet_hdf5();
  SamplerDiagnostics sd;
  for (std::size_t c = 0; c < chains; ++c) sd.chains.push_back(std::to_string(c));
  if (sampler != nullptr) *sampler = sd;
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file || H5Lexists(file.id, "sample_stats", H5P_DEFAULT) <= 0) return {};
  H5Id g(H5Gopen2(file.id, "sample_stats", H5P_DEFAULT), H5Gclose);
  if (!g) return {};
  // The chains as the file names them (its `chain` coordinate), else counted from 0.
  // Labels 0, 1, ... (ArviZ's default, PyMC's) are the positions: named as before.
  std::vector<std::string> labels = chain_labels(g.id, {"energy", "diverging", "reached_max_treedepth"}, chains);
  if (labels == sd.chains) labels.clear();
  if (!labels.empty()) sd.chains = labels;
  std::vector<std::string> out;
  const auto total = [](const std::vector<std::size_t>& v) {
    return std::accumulate(v.begin(), v.end(), std::size_t{0});
  };
  if (const auto d = count_flags(path, g.id, "diverging", "sample_stats/diverging", chains, draws, notes)) {
    std::string message;
    if (total(*d) > 0) {
      message = divergence_warning(total(*d), chains * draws, "sample_stats/diverging");
      out.push_back(message);
    }
    sd.divergent = transition_flags("sample_stats/diverging", *d, draws, message);
  }
  if (const auto t = count_flags(path, g.id, "reached_max_treedepth", "sample_stats/reached_max_treedepth", chains,
                                 draws, notes)) {
    std::string message;
    if (total(*t) > 0) {
      message = max_depth_warning(total(*t), chains * draws, "sample_stats/reached_max_treedepth");
      out.push_back(message);
    }
    sd.max_treedepth = transition_flags("sample_stats/reached_max_treedepth", *t, draws, message);
  }
  // E-BFMI per chain of sample_stats/energy [chain, draw] (or [draw, chain], by its dimension names).
  if (const int layout = is_dataset(g.id, "energy")
                             ? draws_layout(path, g.id, "energy", "sample_stats/energy", chains, draws, notes)
                             : -1;
      layout >= 0) {
    H5Id ds(H5Dopen2(g.id, "energy", H5P_DEFAULT), H5Dclose);
    std::vector<double> e(chains * draws);
    HERD_REQUIRE(H5Dread(ds.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.data()) >= 0,
                 "{}: cannot read dataset 'sample_stats/energy' as numbers", path);
    if (layout == 1) {  // to [chain, draw]
      std::vector<double> t(e.size());
      for (std::size_t d = 0; d < draws; ++d)
        for (std::size_t c = 0; c < chains; ++c) t[c * draws + d] = e[d * chains + c];
      e = std::move(t);
    }
    std::vector<std::pair<std::string, double>> per_chain;
    EbfmiValues ev;
    for (std::size_t c = 0; c < chains; ++c) {
      ev.per_chain.push_back(ebfmi(std::span<const double>(e.data() + c * draws, draws)));
      per_chain.emplace_back(labels.empty() ? fmt::format("chain {}", c) : fmt::format("chain {}", labels[c]),
                             ev.per_chain.back());
    }
    ebfmi_messages(per_chain, "sample_stats/energy",
                   labels.empty() ? " (chains counted from 0)" : " (chains named by the file's chain coordinate)", out,
                   notes, &ev);
    // The JSON's lists name chains by their labels alone (not "chain 1").
    for (auto& l : ev.low) l = l.substr(6);
    sd.ebfmi = std::move(ev);
  }
  if (sampler != nullptr) *sampler = std::move(sd);
  return out;
}

Hdf5Draws::Hdf5Draws(const std::string& path, const std::string& dataset) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.path = path;
  quiet_hdf5();
  d.file.id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  HERD_REQUIRE(static_cast<bool>(d.file),
               "{}: cannot open the HDF5 file: it has an HDF5 signature but cannot be read (cut short, as by a copy "
               "or a run that did not finish, or damaged)",
               path);
  const hid_t file = d.file.id;
  const bool has_posterior = H5Lexists(file, "posterior", H5P_DEFAULT) > 0;
  if (!dataset.empty()) {
    if (!is_dataset(file, dataset)) {
      // A name given without its group, as ArviZ names a variable: the posterior's dataset
      // of that name, or the file's other groups' (e.g. sample_stats/lp), as a suggestion.
      std::string hint;
      if (dataset.find('/') == std::string::npos)
        for (const char* group : {"posterior", "sample_stats", "chain_compact", "diagnostics"})
          if (is_dataset(file, std::string(group) + "/" + dataset)) {
            hint = fmt::format("; did you mean '{}/{}'?", group, dataset);
            break;
          }
      throw InputError(fmt::format("{}: no dataset '{}'{}", path, dataset, hint));
    }
    // posterior/<name> of a herd file: herd-sample's names of its parameters.
    std::vector<std::string> labels;
    const std::string_view in_group = std::string_view(dataset).substr(dataset.front() == '/' ? 1 : 0);
    if (has_posterior && herd_written(file) && in_group.rfind("posterior/", 0) == 0) {
      H5Id group(H5Gopen2(file, "posterior", H5P_DEFAULT), H5Gclose);
      if (group)
        for (auto& e : posterior_entries(file, group.id))
          if (e.name == in_group.substr(10)) labels = std::move(e.labels);
    }
    d.add(file, dataset, dataset, labels);
    return;
  }
  if (has_posterior) {
    H5Id group(H5Gopen2(file, "posterior", H5P_DEFAULT), H5Gclose);
    HERD_REQUIRE(static_cast<bool>(group), "{}: 'posterior' is not a group", path);
    for (const PosteriorEntry& e : posterior_entries(file, group.id)) {
      try {
        d.add(group.id, e.name, "posterior/" + e.name, e.labels);
      } catch (...) {
        // The datasets before this one come first, as when each is read before the next is
        // looked at.
        check_in_order();
        throw;
      }
    }
    HERD_REQUIRE(!d.arrays.empty(), "{}: the 'posterior' group has no dataset of rank 2 or more", path);
    return;
  }
  // A compact-only file of herd-sample (h5_posterior = "compact"): the weighted compact chain.
  if (H5Lexists(file, "chain_compact", H5P_DEFAULT) > 0) {
    d.arrays = read_chain_compact(path, file);
    d.sources.resize(d.arrays.size());
    return;
  }
  const auto names = dataset_names(file);
  HERD_REQUIRE(names.size() == 1, "{}: no 'posterior' group and {} datasets at the root; name one with --dataset", path,
               names.size());
  d.add(file, names[0], names[0]);
}

Hdf5Draws::~Hdf5Draws() = default;

std::vector<DrawsArray>& Hdf5Draws::arrays() { return impl_->arrays; }

void Hdf5Draws::read(std::size_t a) {
  BlockSource* s = impl_->sources.at(a).get();
  if (s == nullptr) return;
  DrawsArray& arr = impl_->arrays[a];
  {
    std::unique_lock<std::mutex> lock(s->mu);
    if (s->finished) {
      if (s->error) std::rethrow_exception(s->error);
      return;
    }
    if (!s->allocated) {
      s->allocated = true;
      try {
        arr.columns.reserve(arr.params);
        for (std::size_t p = 0; p < arr.params; ++p) arr.columns.emplace_back(arr.chains * arr.draws);
      } catch (...) {
        s->error = std::current_exception();
        s->failed = true;
      }
    }
  }
  // This thread's staging buffer, kept for its next blocks (released when a dataset of huge
  // chunks made it large).
  thread_local std::vector<double> staging;
  std::size_t mine = 0;
  bool read_error = false;
  for (std::size_t b = s->next++; b < s->blocks; b = s->next++) {
    ++mine;
    if (s->failed) continue;
    if (!read_block(*s, b, arr, impl_->h5, staging)) {
      read_error = true;
      s->failed = true;
    }
  }
  if (staging.capacity() * sizeof(double) > 16 * kBlockBytes) staging = std::vector<double>();
  std::unique_lock<std::mutex> lock(s->mu);
  s->read_error = s->read_error || read_error;
  s->done += mine;
  if (s->done == s->blocks && !s->finished) {
    if (!s->error && s->read_error)
      s->error = std::make_exception_ptr(InputError(fmt::format("{}: cannot read dataset '{}'", s->path, s->shown)));
    s->finished = true;
    s->cv.notify_all();
  }
  s->cv.wait(lock, [s] { return s->finished; });
  if (s->error) std::rethrow_exception(s->error);
}

void Hdf5Draws::check_in_order() {
  for (std::size_t a = 0; a < impl_->arrays.size(); ++a) read(a);
}

namespace {
constexpr std::size_t kHugePage = std::size_t{1} << 21;
constexpr std::size_t kKeptBlocks = 4;

/// Released blocks of 2 MiB or more, for the next buffer of the same size.
struct BlockCache {
  std::mutex mu;
  std::vector<std::pair<std::size_t, void*>> blocks;  // (bytes, block)
  BlockCache() = default;
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  ~BlockCache() {
    for (auto& [bytes, p] : blocks) std::free(p);
  }
};

BlockCache& block_cache() {
  static BlockCache cache;
  return cache;
}

/// The bytes of a block of n doubles: rounded up to whole huge pages from 2 MiB on.
std::size_t block_size(std::size_t n) {
  const std::size_t bytes = std::max<std::size_t>(n, 1) * sizeof(double);
  return bytes < kHugePage ? bytes : (bytes + kHugePage - 1) / kHugePage * kHugePage;
}
}  // namespace

DrawsBuffer::DrawsBuffer(std::size_t n) : size_(n) {
  const std::size_t bytes = block_size(n);
  void* p = nullptr;
  if (bytes >= kHugePage) {
    BlockCache& cache = block_cache();
    const std::lock_guard<std::mutex> lock(cache.mu);
    const auto it =
        std::find_if(cache.blocks.begin(), cache.blocks.end(), [&](const auto& b) { return b.first == bytes; });
    if (it != cache.blocks.end()) {
      p = it->second;
      cache.blocks.erase(it);
    }
  }
  if (p == nullptr) {
    p = bytes >= kHugePage ? std::aligned_alloc(kHugePage, bytes) : std::malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice only
#endif
  }
  data_ = static_cast<double*>(p);
}

DrawsBuffer& DrawsBuffer::operator=(DrawsBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  return *this;
}

void DrawsBuffer::reset() noexcept {
  if (data_ == nullptr) return;
  const std::size_t bytes = block_size(size_);
  void* p = data_;
  data_ = nullptr;
  size_ = 0;
  if (bytes >= kHugePage) {
    BlockCache& cache = block_cache();
    const std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.blocks.size() < kKeptBlocks) {
      cache.blocks.emplace_back(bytes, p);
      return;
    }
  }
  std::free(p);
}

void set_max_memory(std::uint64_t bytes) { g_max_memory = bytes; }

void set_diagnostics_threads(std::size_t threads) { g_diagnostics_threads = std::max<std::size_t>(threads, 1); }

}  // namespace herd::apps
