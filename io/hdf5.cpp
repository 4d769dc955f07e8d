#include "herd/io/hdf5.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/ranges.h>
#include <hdf5_hl.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace detail {

void H5Handle::reset() noexcept {
  if (id_ >= 0 && closer_ != nullptr) {
    // Objects of a file closed with H5F_CLOSE_STRONG are already gone; ignore the error.
    if (H5Iis_valid(id_) > 0) closer_(id_);
  }
  id_ = -1;
}

void h5_init() {
  static const bool done = [] {
    H5dont_atexit();  // fails (harmlessly) when another HDF5 call came first
    return true;
  }();
  (void)done;
  // HDF5's automatic error printing is a per-thread setting in a thread-safe build (Debian's
  // is one): switched off on every thread that calls HDF5 through herd, since errors are
  // reported as exceptions (a file written by one thread and committed by another printed
  // HDF5's error stack on a full disk).
  thread_local const bool silenced = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)silenced;
}

hid_t native_type_id(NativeType t) {
  switch (t) {
    case NativeType::kDouble:
      return H5T_NATIVE_DOUBLE;
    case NativeType::kFloat:
      return H5T_NATIVE_FLOAT;
    case NativeType::kInt32:
      return H5T_NATIVE_INT32;
    case NativeType::kInt64:
      return H5T_NATIVE_INT64;
    case NativeType::kUint8:
      return H5T_NATIVE_UINT8;
    case NativeType::kUint32:
      return H5T_NATIVE_UINT32;
    case NativeType::kUint64:
      return H5T_NATIVE_UINT64;
  }
  return H5T_NATIVE_DOUBLE;  // not reached: every enumerator is handled above
}

}  // namespace detail

namespace {

using detail::H5Handle;

herr_t collect_first_error(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n == 0 && err != nullptr && err->desc != nullptr) *out = err->desc;
  return 0;
}

/// One line from HDF5's innermost message: a failed write's multi-line report (time, file
/// descriptor, buffer address, ...) becomes the system's error text, "no space left on
/// device" first when the disk is full.
std::string one_line_detail(std::string msg) {
  if (msg.find("errno = 28,") != std::string::npos || msg.find("No space left on device") != std::string::npos)
    return "no space left on device";
  if (const auto p = msg.find("error message = '"); p != std::string::npos) {
    const auto b = p + std::strlen("error message = '");
    const auto e = msg.find('\'', b);
    if (e != std::string::npos) {
      std::string sys = msg.substr(b, e - b);
      if (!sys.empty()) sys[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(sys[0])));
      const auto t = msg.find(':');
      return (t != std::string::npos && t < p ? msg.substr(0, t) + ": " : std::string()) + sys;
    }
  }
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  return msg;
}

/// Throws IoError "<where>: <what> failed (<innermost HDF5 message>)".
[[noreturn]] void h5_fail(const std::string& where, std::string_view what) {
  std::string detail_msg;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_first_error, &detail_msg);
  H5Eclear2(H5E_DEFAULT);
  detail_msg = one_line_detail(std::move(detail_msg));
  if (detail_msg == "no space left on device")
    throw IoError(fmt::format("{}: no space left on device ({} failed)", where, what));
  if (detail_msg.empty()) throw IoError(fmt::format("{}: {} failed", where, what));
  throw IoError(fmt::format("{}: {} failed ({})", where, what, detail_msg));
}

H5Handle check_id(hid_t id, H5Handle::Closer closer, const std::string& where, std::string_view what) {
  if (id < 0) h5_fail(where, what);
  return H5Handle(id, closer);
}

void check(herr_t rc, const std::string& where, std::string_view what) {
  if (rc < 0) h5_fail(where, what);
}

H5Handle vlen_string_type() {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return H5Handle(t, H5Tclose);
}

H5Handle make_space(const std::vector<hsize_t>& shape, const std::vector<hsize_t>* maxdims = nullptr) {
  hid_t s = shape.empty() ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(shape.size()), shape.data(),
                                             maxdims != nullptr ? maxdims->data() : nullptr);
  return check_id(s, H5Sclose, "hdf5", "H5Screate");
}

std::vector<hsize_t> space_shape(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank <= 0) return {};
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

std::size_t product(const std::vector<hsize_t>& v, std::size_t from = 0) {
  std::size_t p = 1;
  for (std::size_t i = from; i < v.size(); ++i) p *= static_cast<std::size_t>(v[i]);
  return p;
}

H5Kind kind_of_type(hid_t type) {
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      return H5Kind::kInteger;
    case H5T_FLOAT:
      return H5Kind::kFloat;
    case H5T_STRING:
      return H5Kind::kString;
    default:
      return H5Kind::kOther;
  }
}

/// Reads strings from an attribute (is_attr) or dataset, whatever their storage.
std::vector<std::string> read_strings_from(hid_t obj, bool is_attr, std::size_t n, const std::string& where) {
  H5Handle ftype(is_attr ? H5Aget_type(obj) : H5Dget_type(obj), H5Tclose);
  if (!ftype.valid()) h5_fail(where, "get type");
  if (H5Tget_class(ftype.get()) != H5T_STRING) throw IoError(fmt::format("{}: holds no strings", where));
  std::vector<std::string> out(n);
  if (n == 0) return out;
  if (H5Tis_variable_str(ftype.get()) > 0) {
    H5Handle mtype = vlen_string_type();
    std::vector<char*> ptrs(n, nullptr);
    herr_t rc = is_attr ? H5Aread(obj, mtype.get(), ptrs.data())
                        : H5Dread(obj, mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
    check(rc, where, "read strings");
    for (std::size_t i = 0; i < n; ++i) out[i] = ptrs[i] != nullptr ? ptrs[i] : "";
    H5Handle space(is_attr ? H5Aget_space(obj) : H5Dget_space(obj), H5Sclose);
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const std::size_t len = H5Tget_size(ftype.get());
    H5Handle mtype(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mtype.get(), len);
    H5Tset_strpad(mtype.get(), H5T_STR_NULLPAD);
    std::vector<char> buf(len * n, '\0');
    herr_t rc = is_attr ? H5Aread(obj, mtype.get(), buf.data())
                        : H5Dread(obj, mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
    check(rc, where, "read strings");
    for (std::size_t i = 0; i < n; ++i) {
      const char* s = buf.data() + i * len;
      out[i].assign(s, strnlen(s, len));
    }
  }
  return out;
}

std::vector<std::string> split_path(std::string_view name) {
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= name.size()) {
    const std::size_t j = std::min(name.find('/', i), name.size());
    if (j > i) parts.emplace_back(name.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool link_exists(hid_t loc, std::string_view name) {
  std::string prefix;
  for (const auto& part : split_path(name)) {
    prefix += prefix.empty() ? part : "/" + part;
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
  }
  return !prefix.empty();
}

H5I_type_t object_type(hid_t loc, std::string_view name) {
  if (!link_exists(loc, name)) return H5I_BADID;
  hid_t o = H5Oopen(loc, std::string(name).c_str(), H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  const H5I_type_t t = H5Iget_type(o);
  H5Oclose(o);
  return t;
}

// Links and attributes track creation order, as netCDF-4 files written by netCDF-C do
// (its reader expects it); no time is recorded, so files stay byte-identical.
constexpr unsigned kCreationOrder = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;

H5Handle group_create_plist() {
  hid_t p = H5Pcreate(H5P_GROUP_CREATE);
  H5Pset_obj_track_times(p, false);
  H5Pset_link_creation_order(p, kCreationOrder);
  H5Pset_attr_creation_order(p, kCreationOrder);
  return H5Handle(p, H5Pclose);
}

}  // namespace

// --- H5Object ---------------------------------------------------------------------------

H5Object::H5Object(detail::H5Handle h, std::string path) : handle_(std::move(h)), path_(std::move(path)) {
  char buf[4096];
  const ssize_t n = handle_.valid() ? H5Fget_name(handle_.get(), buf, sizeof buf) : -1;
  if (n > 0) file_.assign(buf, static_cast<std::size_t>(std::min<ssize_t>(n, sizeof buf - 1)));
  H5Eclear2(H5E_DEFAULT);
}

std::string H5Object::where_of(const std::string& object_path) const {
  return file_.empty() ? object_path : file_ + ":" + object_path;
}

bool H5Object::has_attribute(std::string_view name) const {
  const htri_t r = H5Aexists(id(), std::string(name).c_str());
  if (r < 0) h5_fail(where(), "H5Aexists");
  return r > 0;
}

namespace {
herr_t collect_attr_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> H5Object::attribute_names() const {
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Aiterate2(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_attr_name, &names), where(), "list attributes");
  return names;
}

namespace {
H5Handle open_attribute(hid_t obj, std::string_view name, const std::string& where) {
  const std::string n(name);
  if (H5Aexists(obj, n.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw IoError(fmt::format("{}: no attribute \"{}\"", where, name));
  }
  return check_id(H5Aopen(obj, n.c_str(), H5P_DEFAULT), H5Aclose, where, "open attribute " + n);
}
}  // namespace

H5Kind H5Object::attribute_kind(std::string_view name) const {
  H5Handle a = open_attribute(id(), name, where());
  H5Handle t(H5Aget_type(a.get()), H5Tclose);
  return kind_of_type(t.get());
}

std::size_t H5Object::attribute_size(std::string_view name) const {
  H5Handle a = open_attribute(id(), name, where());
  H5Handle s(H5Aget_space(a.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(s.get());
  if (n < 0) h5_fail(where(), "attribute size");
  return static_cast<std::size_t>(n);
}

void H5Object::write_attribute_raw(std::string_view name, hid_t mem_type, const void* data, std::size_t n,
                                   bool scalar) {
  const std::string n_str(name);
  if (has_attribute(name)) check(H5Adelete(id(), n_str.c_str()), where(), "replace attribute " + n_str);
  H5Handle space = scalar ? make_space({}) : make_space({static_cast<hsize_t>(n)});
  H5Handle a = check_id(H5Acreate2(id(), n_str.c_str(), mem_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                        where(), "create attribute " + n_str);
  check(H5Awrite(a.get(), mem_type, data), where(), "write attribute " + n_str);
}

void H5Object::read_attribute_raw(std::string_view name, hid_t mem_type, void* data, std::size_t n, bool scalar) const {
  H5Handle a = open_attribute(id(), name, where());
  H5Handle t(H5Aget_type(a.get()), H5Tclose);
  const H5Kind k = kind_of_type(t.get());
  if (k != H5Kind::kInteger && k != H5Kind::kFloat)
    throw IoError(fmt::format("{}: attribute \"{}\" is not numeric", where(), name));
  H5Handle s(H5Aget_space(a.get()), H5Sclose);
  const auto count = static_cast<std::size_t>(H5Sget_simple_extent_npoints(s.get()));
  if (count != n)
    throw IoError(fmt::format("{}: attribute \"{}\" has {} elements, but {} {} expected", where(), name, count, n,
                              scalar ? "(a scalar) was" : "were"));
  check(H5Aread(a.get(), mem_type, data), where(), fmt::format("read attribute \"{}\"", name));
}

void H5Object::set_attribute(std::string_view name, std::string_view value) {
  const std::string n_str(name);
  if (has_attribute(name)) check(H5Adelete(id(), n_str.c_str()), where(), "replace attribute " + n_str);
  H5Handle type = vlen_string_type();
  H5Handle space = make_space({});
  H5Handle a = check_id(H5Acreate2(id(), n_str.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                        where(), "create attribute " + n_str);
  const std::string v(value);
  const char* p = v.c_str();
  check(H5Awrite(a.get(), type.get(), &p), where(), "write attribute " + n_str);
}

void H5Object::set_attribute(std::string_view name, const std::vector<std::string>& values) {
  const std::string n_str(name);
  if (has_attribute(name)) check(H5Adelete(id(), n_str.c_str()), where(), "replace attribute " + n_str);
  H5Handle type = vlen_string_type();
  H5Handle space = make_space({static_cast<hsize_t>(values.size())});
  H5Handle a = check_id(H5Acreate2(id(), n_str.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                        where(), "create attribute " + n_str);
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const auto& s : values) ptrs.push_back(s.c_str());
  check(H5Awrite(a.get(), type.get(), ptrs.data()), where(), "write attribute " + n_str);
}

std::string H5Object::attribute_string(std::string_view name) const {
  auto v = attribute_strings(name);
  if (v.size() != 1)
    throw IoError(fmt::format("{}: attribute \"{}\" has {} strings, but one was expected", where(), name, v.size()));
  return v[0];
}

std::vector<std::string> H5Object::attribute_strings(std::string_view name) const {
  H5Handle a = open_attribute(id(), name, where());
  H5Handle s(H5Aget_space(a.get()), H5Sclose);
  const auto count = static_cast<std::size_t>(H5Sget_simple_extent_npoints(s.get()));
  return read_strings_from(a.get(), true, count, fmt::format("{} attribute \"{}\"", where(), name));
}

// --- H5Dataset --------------------------------------------------------------------------

std::vector<hsize_t> H5Dataset::shape() const {
  H5Handle s(H5Dget_space(id()), H5Sclose);
  if (!s.valid()) h5_fail(where(), "get shape");
  return space_shape(s.get());
}

std::size_t H5Dataset::size() const { return product(shape()); }

std::size_t H5Dataset::row_size() const { return product(shape(), 1); }

H5Kind H5Dataset::kind() const {
  H5Handle t(H5Dget_type(id()), H5Tclose);
  return kind_of_type(t.get());
}

void H5Dataset::write_raw(hid_t mem_type, const void* data, std::size_t n) {
  const std::size_t expected = size();
  HERD_REQUIRE(n == expected, "hdf5: writing {} elements to {}, which holds {}", n, where(), expected);
  if (n == 0) return;
  check(H5Dwrite(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where(), "write");
}

void H5Dataset::read_raw(hid_t mem_type, void* data, std::size_t n) const {
  if (n == 0) return;
  const H5Kind k = kind();
  if (k != H5Kind::kInteger && k != H5Kind::kFloat) throw IoError(fmt::format("{}: dataset is not numeric", where()));
  check(H5Dread(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where(), "read");
}

namespace {

/// The file and memory dataspaces of rows [first, first + count) of dataset `dset` of shape
/// `dims` (a hyperslab of whole rows; the memory space is those rows, contiguous).
struct RowSelection {
  H5Handle file, mem;
};
RowSelection select_rows(hid_t dset, const std::vector<hsize_t>& dims, hsize_t first, hsize_t count,
                         const std::string& where) {
  RowSelection sel{H5Handle(H5Dget_space(dset), H5Sclose), {}};
  std::vector<hsize_t> start(dims.size(), 0), cnt = dims;
  start[0] = first;
  cnt[0] = count;
  check(H5Sselect_hyperslab(sel.file.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr), where,
        "select rows");
  sel.mem = make_space(cnt);
  return sel;
}

}  // namespace

void H5Dataset::read_rows_raw(hid_t mem_type, hsize_t first, hsize_t count, void* data) const {
  std::vector<hsize_t> dims = shape();
  HERD_REQUIRE(!dims.empty(), "hdf5: read_rows on scalar dataset {}", where());
  HERD_REQUIRE(first <= dims[0] && count <= dims[0] - first, "hdf5: read_rows({}, {}) on {} with {} rows", first, count,
               where(), dims[0]);
  if (count == 0 || product(dims, 1) == 0) return;
  const RowSelection sel = select_rows(id(), dims, first, count, where());
  check(H5Dread(id(), mem_type, sel.mem.get(), sel.file.get(), H5P_DEFAULT, data), where(), "read rows");
}

void H5Dataset::write_rows_raw(hid_t mem_type, hsize_t first, const void* data, std::size_t n) {
  std::vector<hsize_t> dims = shape();
  HERD_REQUIRE(!dims.empty(), "hdf5: write_rows on scalar dataset {}", where());
  const std::size_t row = product(dims, 1);
  HERD_REQUIRE(row > 0 && n % row == 0, "hdf5: write_rows of {} elements to {}, whose rows hold {}", n, where(), row);
  const hsize_t count = n / row;
  HERD_REQUIRE(first <= dims[0] && count <= dims[0] - first, "hdf5: write_rows({}, {}) on {} with {} rows", first,
               count, where(), dims[0]);
  if (count == 0) return;
  const RowSelection sel = select_rows(id(), dims, first, count, where());
  check(H5Dwrite(id(), mem_type, sel.mem.get(), sel.file.get(), H5P_DEFAULT, data), where(), "write rows");
}

void H5Dataset::write_block_raw(hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                                const void* data, std::size_t n) {
  const std::vector<hsize_t> dims = shape();
  HERD_REQUIRE(!dims.empty(), "hdf5: write_block on scalar dataset {}", where());
  HERD_REQUIRE(start.size() == dims.size() && count.size() == dims.size(),
               "hdf5: write_block with start of rank {} and count of rank {} on {} of rank {}", start.size(),
               count.size(), where(), dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i)
    HERD_REQUIRE(start[i] <= dims[i] && count[i] <= dims[i] - start[i],
                 "hdf5: write_block: dimension {} from {} for {} on {}, which has {}", i, start[i], count[i], where(),
                 dims[i]);
  const std::size_t elements = product(count, 0);
  HERD_REQUIRE(n == elements, "hdf5: write_block of {} elements to a block of {} in {}", n, elements, where());
  if (n == 0) return;
  H5Handle file(H5Dget_space(id()), H5Sclose);
  check(H5Sselect_hyperslab(file.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), where(),
        "select block");
  const H5Handle mem = make_space(count);
  check(H5Dwrite(id(), mem_type, mem.get(), file.get(), H5P_DEFAULT, data), where(), "write block");
}

void H5Dataset::append_raw(hid_t mem_type, const void* data, std::size_t n) {
  std::vector<hsize_t> dims = shape();
  HERD_REQUIRE(!dims.empty(), "hdf5: append to scalar dataset {}", where());
  {
    H5Handle s(H5Dget_space(id()), H5Sclose);
    std::vector<hsize_t> maxd(dims.size());
    H5Sget_simple_extent_dims(s.get(), nullptr, maxd.data());
    HERD_REQUIRE(maxd[0] == H5S_UNLIMITED, "hdf5: append to {}, which was not created extendible", where());
  }
  const std::size_t row = product(dims, 1);
  HERD_REQUIRE(row > 0 && n % row == 0, "hdf5: appending {} elements to {}, but rows hold {} elements", n, where(),
               row);
  if (n == 0) return;
  const hsize_t new_rows = n / row;
  std::vector<hsize_t> ext = dims;
  ext[0] += new_rows;
  check(H5Dset_extent(id(), ext.data()), where(), "extend");
  H5Handle fspace(H5Dget_space(id()), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0), cnt = dims;
  start[0] = dims[0];
  cnt[0] = new_rows;
  check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr), where(),
        "select rows");
  H5Handle mspace = make_space(cnt);
  check(H5Dwrite(id(), mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, data), where(), "append");
}

void H5Dataset::write_strings(const std::vector<std::string>& data) {
  const std::size_t expected = size();
  HERD_REQUIRE(data.size() == expected, "hdf5: writing {} strings to {}, which holds {}", data.size(), where(),
               expected);
  if (data.empty()) return;
  H5Handle type = vlen_string_type();
  std::vector<const char*> ptrs;
  ptrs.reserve(data.size());
  for (const auto& s : data) ptrs.push_back(s.c_str());
  check(H5Dwrite(id(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), where(), "write strings");
}

std::vector<std::string> H5Dataset::read_strings() const { return read_strings_from(id(), false, size(), where()); }

void H5Dataset::make_scale(std::string_view dim_name) {
  check(H5DSset_scale(id(), std::string(dim_name).c_str()), where(), "H5DSset_scale");
}

bool H5Dataset::is_scale() const { return H5DSis_scale(id()) > 0; }

void H5Dataset::attach_scale(const H5Dataset& scale, unsigned dim) {
  const auto dims = shape();
  HERD_REQUIRE(dim < dims.size(), "hdf5: attach_scale: dimension {} of {}, which has rank {}", dim, where(),
               dims.size());
  const auto sdims = scale.shape();
  HERD_REQUIRE(sdims.size() == 1, "hdf5: attach_scale: scale {} is not 1-D", scale.path());
  HERD_REQUIRE(sdims[0] == dims[dim],
               "hdf5: attach_scale: scale {} has length {}, but dimension {} of {} has length {}", scale.path(),
               sdims[0], dim, where(), dims[dim]);
  check(H5DSattach_scale(id(), scale.id(), dim), where(), "H5DSattach_scale " + scale.path());
}

namespace {
herr_t first_scale_name(hid_t, unsigned, hid_t scale, void* data) {
  char buf[256] = {0};
  const ssize_t n = H5DSget_scale_name(scale, buf, sizeof buf);
  if (n > 0) *static_cast<std::string*>(data) = std::string(buf, strnlen(buf, sizeof buf));
  return 1;  // stop after the first
}
}  // namespace

std::vector<std::string> H5Dataset::dimension_names() const {
  const auto dims = shape();
  std::vector<std::string> out(dims.size());
  for (unsigned d = 0; d < dims.size(); ++d) {
    if (H5DSget_num_scales(id(), d) > 0) H5DSiterate_scales(id(), d, nullptr, first_scale_name, &out[d]);
    H5Eclear2(H5E_DEFAULT);
  }
  return out;
}

// --- H5Group ----------------------------------------------------------------------------

std::string H5Group::child_path(std::string_view name) const {
  std::string out;
  out.reserve(path_.size() + name.size() + 1);
  if (path_ != "/") out.append(path_);
  out.push_back('/');
  out.append(name);
  return out;
}

H5Group H5Group::create_group(std::string_view name) {
  HERD_REQUIRE(!name.empty(), "hdf5: empty group name in {}", where());
  const auto parts = split_path(name);
  HERD_REQUIRE(!parts.empty(), "hdf5: group name \"{}\" in {} has only slashes, but must name a group", name, where());
  H5Group parent;
  hid_t loc = id();
  const std::string& leaf = parts.back();
  if (parts.size() > 1) {
    std::string head(name.substr(0, name.rfind('/')));
    parent = require_group(head);
    loc = parent.id();
  }
  const std::string full = where_of(child_path(name));
  if (H5Lexists(loc, leaf.c_str(), H5P_DEFAULT) > 0)
    throw IoError(fmt::format("{}: cannot create group, it exists", full));
  H5Eclear2(H5E_DEFAULT);
  H5Handle gcpl = group_create_plist();
  return H5Group(
      check_id(H5Gcreate2(loc, leaf.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose, full, "create group"),
      child_path(name));
}

H5Group H5Group::open_group(std::string_view name) const {
  const std::string full = where_of(child_path(name));
  if (object_type(id(), name) != H5I_GROUP) throw IoError(fmt::format("{}: no such group", full));
  return H5Group(check_id(H5Gopen2(id(), std::string(name).c_str(), H5P_DEFAULT), H5Gclose, full, "open group"),
                 child_path(name));
}

H5Group H5Group::require_group(std::string_view name) {
  H5Group cur(check_id(H5Oopen(id(), ".", H5P_DEFAULT), H5Oclose, where(), "reopen"), path_);
  for (const auto& part : split_path(name)) {
    if (cur.contains(part)) cur = cur.open_group(part);
    else cur = cur.create_group(part);
  }
  return cur;
}

bool H5Group::contains(std::string_view name) const { return link_exists(id(), name); }

bool H5Group::is_group(std::string_view name) const { return object_type(id(), name) == H5I_GROUP; }

bool H5Group::is_dataset(std::string_view name) const { return object_type(id(), name) == H5I_DATASET; }

namespace {
herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> H5Group::members() const {
  std::vector<std::string> names;
  hsize_t idx = 0;
  check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, &names), where(), "list members");
  return names;
}

H5Dataset H5Group::create_dataset_raw(std::string_view name, hid_t type, const std::vector<hsize_t>& shape,
                                      const DatasetOptions& opt) {
  HERD_REQUIRE(!name.empty(), "hdf5: empty dataset name in {}", where());
  const std::string full = where_of(child_path(name));
  HERD_REQUIRE(opt.compression >= 0 && opt.compression <= 9, "hdf5: {}: compression is {}, but must be 0 (off) to 9",
               full, opt.compression);
  const bool chunked = opt.extendible || opt.compression > 0 || !opt.chunk.empty();
  HERD_REQUIRE(!(chunked && shape.empty()), "hdf5: {}: a scalar dataset cannot be chunked, extendible or compressed",
               full);
  HERD_REQUIRE(opt.chunk.empty() || opt.chunk.size() == shape.size(),
               "hdf5: {}: chunk has rank {}, but the dataset has rank {}", full, opt.chunk.size(), shape.size());

  const auto parts = split_path(name);
  HERD_REQUIRE(!parts.empty(), "hdf5: dataset name \"{}\" in {} has only slashes, but must name a dataset", name,
               where());
  H5Group parent;
  hid_t loc = id();
  if (parts.size() > 1) {
    parent = require_group(name.substr(0, name.rfind('/')));
    loc = parent.id();
  }
  if (H5Lexists(loc, parts.back().c_str(), H5P_DEFAULT) > 0)
    throw IoError(fmt::format("{}: cannot create dataset, it exists", full));
  H5Eclear2(H5E_DEFAULT);

  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_obj_track_times(dcpl.get(), false);
  H5Pset_attr_creation_order(dcpl.get(), kCreationOrder);
  std::vector<hsize_t> maxdims = shape;
  if (opt.extendible) maxdims[0] = H5S_UNLIMITED;
  if (chunked) {
    std::vector<hsize_t> chunk = opt.chunk;
    if (chunk.empty()) {
      const std::size_t elem = std::max<std::size_t>(H5Tget_size(type), 1);
      std::size_t row_bytes = elem;
      chunk.assign(shape.size(), 1);
      for (std::size_t i = 1; i < shape.size(); ++i) {
        chunk[i] = std::max<hsize_t>(shape[i], 1);
        row_bytes *= static_cast<std::size_t>(chunk[i]);
      }
      hsize_t rows = std::max<hsize_t>(1, static_cast<hsize_t>(65536 / row_bytes));
      if (!opt.extendible && shape[0] > 0) rows = std::min(rows, shape[0]);
      chunk[0] = rows;
    }
    for (auto c : chunk) HERD_REQUIRE(c > 0, "hdf5: {}: chunk dimensions must be positive", full);
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), full, "set chunk");
    if (opt.compression > 0) {
      if (opt.shuffle) check(H5Pset_shuffle(dcpl.get()), full, "set shuffle");
      check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opt.compression)), full, "set deflate");
    }
  }
  H5Handle space = make_space(shape, shape.empty() ? nullptr : &maxdims);
  return H5Dataset(
      check_id(H5Dcreate2(loc, parts.back().c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose,
               full, "create dataset"),
      child_path(name));
}

H5Dataset H5Group::create_string_dataset(std::string_view name, const std::vector<hsize_t>& shape,
                                         const DatasetOptions& options) {
  H5Handle type = vlen_string_type();
  return create_dataset_raw(name, type.get(), shape, options);
}

H5Dataset H5Group::open_dataset(std::string_view name) const {
  const std::string full = where_of(child_path(name));
  if (object_type(id(), name) != H5I_DATASET) throw IoError(fmt::format("{}: no such dataset", full));
  return H5Dataset(check_id(H5Dopen2(id(), std::string(name).c_str(), H5P_DEFAULT), H5Dclose, full, "open dataset"),
                   child_path(name));
}

H5Dataset H5Group::write_strings(std::string_view name, const std::vector<std::string>& data) {
  H5Dataset ds = create_string_dataset(name, {static_cast<hsize_t>(data.size())});
  ds.write_strings(data);
  return ds;
}

H5Dataset H5Group::create_dimension(std::string_view name, hsize_t size) {
  H5Dataset ds = create_dataset<float>(name, {size});
  ds.make_scale(fmt::format("This is a netCDF dimension but not a netCDF variable.{:>10}", size));
  return ds;
}

void H5Group::attach_dimensions(H5Dataset& ds, const std::vector<std::string>& dims) {
  const auto shape = ds.shape();
  HERD_REQUIRE(dims.size() == shape.size(), "hdf5: {} has rank {}, but {} dimension names were given", ds.path(),
               shape.size(), dims.size());
  for (unsigned d = 0; d < dims.size(); ++d) {
    H5Dataset scale = open_dataset(dims[d]);
    ds.attach_scale(scale, d);
  }
}

std::vector<hsize_t> H5Group::dimension_shape(std::string_view name, std::size_t size,
                                              const std::vector<std::string>& dims) const {
  std::vector<hsize_t> shape;
  for (const auto& d : dims) {
    const auto s = open_dataset(d).shape();
    HERD_REQUIRE(s.size() == 1, "hdf5: dimension {} of {} is not 1-D", d, where_of(child_path(name)));
    shape.push_back(s[0]);
  }
  HERD_REQUIRE(product(shape) == size, "hdf5: {} has {} elements, but its dimensions ({}) hold {}",
               where_of(child_path(name)), size, fmt::join(dims, ", "), product(shape));
  return shape;
}

// --- H5File -----------------------------------------------------------------------------

namespace {
H5Handle file_access_plist(bool strong) {
  hid_t p = H5Pcreate(H5P_FILE_ACCESS);
  if (strong) H5Pset_fclose_degree(p, H5F_CLOSE_STRONG);
  return H5Handle(p, H5Pclose);
}
H5Handle file_create_plist() {
  hid_t p = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_obj_track_times(p, false);
  H5Pset_link_creation_order(p, kCreationOrder);
  H5Pset_attr_creation_order(p, kCreationOrder);
  return H5Handle(p, H5Pclose);
}
}  // namespace

H5File& H5File::operator=(H5File&& o) noexcept {
  if (this != &o) {
    this->~H5File();
    new (this) H5File(std::move(o));
  }
  return *this;
}

namespace {

/// Closes a file whose data are to be thrown away (an uncommitted temporary file, e.g.
/// after a write failed because the disk is full): its descriptor is pointed at /dev/null
/// first, so that the writes HDF5 makes while closing succeed instead of failing again and
/// leaving the file half-closed (HDF5 then crashes in its shutdown at exit).
void abandon_file(hid_t fid) {
  hid_t fapl = H5Fget_access_plist(fid);
  void* handle = nullptr;
  if (fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle(fid, fapl, &handle) >= 0 &&
      handle != nullptr) {
    const int fd = *static_cast<int*>(handle);
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd >= 0) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
  if (fapl >= 0) H5Pclose(fapl);
  H5Fclose(fid);
  H5Eclear2(H5E_DEFAULT);
}

}  // namespace

H5File::~H5File() {
  if (is_open()) detail::h5_init();
  if (!temp_path_.empty() && is_open()) {
    abandon_file(handle_.get());
    handle_.release();  // closed once, successfully or not: never again
  }
  handle_.reset();
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

H5File H5File::create(const std::string& path, bool overwrite) {
  detail::h5_init();
  H5Handle fcpl = file_create_plist();
  H5Handle fapl = file_access_plist(false);
  H5File f;
  f.handle_ = check_id(H5Fcreate(path.c_str(), overwrite ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), fapl.get()),
                       H5Fclose, path, "create HDF5 file");
  f.path_ = path;
  return f;
}

H5File H5File::create_atomic(const std::string& path) {
  detail::h5_init();
  H5Handle fcpl = file_create_plist();
  H5Handle fapl = file_access_plist(true);
  H5File f;
  const std::string tmp = temp_path_for(path);
  f.handle_ = check_id(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()), H5Fclose, tmp, "create HDF5 file");
  f.path_ = path;
  f.temp_path_ = tmp;
  return f;
}

H5File H5File::open(const std::string& path, H5Mode mode) {
  detail::h5_init();
  if (::access(path.c_str(), F_OK) != 0) throw IoError(fmt::format("{}: no such file", path));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw IoError(fmt::format("{}: not an HDF5 file (or truncated)", path));
  }
  H5Handle fapl = file_access_plist(false);
  H5File f;
  f.handle_ = check_id(H5Fopen(path.c_str(), mode == H5Mode::kRead ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.get()),
                       H5Fclose, path, "open HDF5 file");
  f.path_ = path;
  return f;
}

bool H5File::is_hdf5(const std::string& path) {
  detail::h5_init();
  if (::access(path.c_str(), F_OK) != 0) return false;
  const htri_t r = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

H5Group H5File::root() const {
  detail::h5_init();  // this thread's error printing off (the file may come from another thread)
  if (!is_open()) throw IoError(fmt::format("{}: file is closed", path_));
  return H5Group(check_id(H5Gopen2(id(), "/", H5P_DEFAULT), H5Gclose, path_, "open root group"), "/");
}

void H5File::flush() {
  if (!is_open()) throw IoError(fmt::format("{}: file is closed", path_));
  check(H5Fflush(id(), H5F_SCOPE_GLOBAL), path_, "flush");
}

void H5File::sync_data() const {
  if (!is_open()) throw IoError(fmt::format("{}: file is closed", path_));
  fsync_path(temp_path_.empty() ? path_ : temp_path_);
}

void H5File::start_writeback() const noexcept {
  if (is_open()) io::start_writeback(temp_path_.empty() ? path_ : temp_path_);
}

void H5File::close() {
  if (!is_open()) return;
  detail::h5_init();
  const herr_t rc = H5Fclose(handle_.get());
  handle_.release();  // closed, or a close that failed: HDF5 must not be asked again
  check(rc, path_, "close");
}

void H5File::commit() {
  HERD_REQUIRE(!temp_path_.empty(), "hdf5: commit() on {}, which was not created with create_atomic", path_);
  detail::h5_init();
  if (is_open()) {
    if (H5Fflush(id(), H5F_SCOPE_GLOBAL) < 0) {
      // A full disk, say: the temporary file is thrown away (the destructor removes it).
      try {
        check(-1, path_, "flush");
      } catch (...) {
        abandon_file(handle_.get());
        handle_.release();
        throw;
      }
    }
    close();  // strong close degree: every object of the file closes too
  }
  publish_file(temp_path_, path_);
  temp_path_.clear();
}

}  // namespace herd::io
