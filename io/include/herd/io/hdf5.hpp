#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file hdf5.hpp
/// A thin RAII layer over the HDF5 1.10 C library: files, groups, datasets, attributes,
/// chunked datasets that grow along dimension 0, optional deflate compression, and
/// netCDF-4 style dimension scales (H5DS) so that groups open in xarray (engine h5netcdf)
/// and ArviZ.
///
/// Conventions:
/// - Arrays are row-major (C order); a dataset of shape `[n, d]` is read and written as a
///   flat `std::vector<T>` of `n * d` elements, element `(i, j)` at index `i * d + j`.
/// - Every group and dataset is created with object timestamps off
///   (`H5Pset_obj_track_times(false)`), so equal data written in the same order gives
///   byte-identical files (DESIGN.md §4).
/// - Element types: `double`, `float`, `std::int32_t`, `std::int64_t`, `std::uint8_t`,
///   `std::uint32_t`, `std::uint64_t`, and strings (variable-length UTF-8). Reads convert
///   between numeric types as HDF5 does (an int64 dataset may be read as `double`).
///
/// Thread-safety: Debian's HDF5 is the serial build, which is **not** thread-safe. Call into
/// this layer from one thread at a time (for the whole process, not per file).
///
/// Errors: every failure throws `herd::IoError` naming the file or object and the HDF5
/// message; a wrong shape or size passed by the caller throws `herd::InputError`. HDF5's
/// own error printing to stderr is switched off.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <hdf5.h>

namespace herd::io {

namespace detail {

/// Owns one HDF5 identifier and closes it with the matching `H5?close`. Move-only.
class H5Handle {
 public:
  /// The matching close function (H5Fclose, H5Gclose, ...).
  using Closer = herr_t (*)(hid_t);
  /// An empty handle; takes ownership of `id` otherwise.
  H5Handle() = default;
  H5Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), closer_(o.closer_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      closer_ = o.closer_;
      o.id_ = -1;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { reset(); }
  /// Closes the identifier (errors ignored: called from destructors).
  void reset() noexcept;
  /// Forgets the identifier without closing it (after a close that failed: HDF5 must not be
  /// asked to close it again).
  void release() noexcept { id_ = -1; }
  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

/// Switches off HDF5's clean-up at exit (once per process: a file whose close failed, on a
/// full disk, must not be closed again at exit, where HDF5 would crash; herd closes every
/// file it opens itself) and HDF5's automatic error printing (once per calling thread: a
/// per-thread setting in a thread-safe HDF5; errors become exceptions). Thread-safe.
void h5_init();

/// The numeric element types of this layer's reads and writes (`native_type_id`).
enum class NativeType : std::uint8_t { kDouble, kFloat, kInt32, kInt64, kUint8, kUint32, kUint64 };

/// The native HDF5 memory type of `t` (`H5T_NATIVE_DOUBLE`, ...). Defined in herd's library
/// rather than inline: the `H5T_NATIVE_*` macros name HDF5's globals, and code that calls this
/// layer's templates (`read<double>`, `write`, attributes) then links with herd alone
/// (`pkg-config --libs herd`), without HDF5 on its link line. Thread-safe.
hid_t native_type_id(NativeType t);

/// The native HDF5 memory type of `T`; a compile error for unsupported types.
template <class T>
hid_t native_type() {
  if constexpr (std::is_same_v<T, double>) return native_type_id(NativeType::kDouble);
  else if constexpr (std::is_same_v<T, float>) return native_type_id(NativeType::kFloat);
  else if constexpr (std::is_same_v<T, std::int32_t>) return native_type_id(NativeType::kInt32);
  else if constexpr (std::is_same_v<T, std::int64_t>) return native_type_id(NativeType::kInt64);
  else if constexpr (std::is_same_v<T, std::uint8_t>) return native_type_id(NativeType::kUint8);
  else if constexpr (std::is_same_v<T, std::uint32_t>) return native_type_id(NativeType::kUint32);
  else if constexpr (std::is_same_v<T, std::uint64_t>) return native_type_id(NativeType::kUint64);
  else static_assert(sizeof(T) == 0, "herd::io: unsupported HDF5 element type");
}

/// True for the numeric element types `native_type` supports.
template <class T>
inline constexpr bool is_h5_numeric_v =
    std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::uint64_t>;

}  // namespace detail

/// How an existing file is opened.
enum class H5Mode { kRead, kReadWrite };

/// The element type class of a dataset or attribute.
enum class H5Kind { kInteger, kFloat, kString, kOther };

/// Creation options of a dataset.
struct DatasetOptions {
  /// Make dimension 0 unlimited so the dataset can grow with `H5Dataset::append`
  /// (implies chunking).
  bool extendible = false;
  /// Chunk shape (same rank as the dataset); empty: contiguous, or for extendible or
  /// compressed datasets a chunk of about 64 KiB covering whole rows.
  std::vector<hsize_t> chunk{};  // an initializer, so `{.extendible = true, .compression = 4}` is warning-free
  /// Deflate (gzip) level 1-9; 0 means no compression. Implies chunking.
  int compression = 0;
  /// Byte shuffle before deflate (helps floating-point data); used only when compressing.
  bool shuffle = true;
};

class H5Dataset;

/// Common base of groups and datasets: the identifier, the path, and attributes.
/// Attributes are scalars, 1-D vectors of numbers, or variable-length UTF-8 strings;
/// setting an existing attribute replaces it.
class H5Object {
 public:
  /// The HDF5 identifier (valid while this object lives).
  hid_t id() const noexcept { return handle_.get(); }
  /// The object's path inside its file, e.g. "/posterior/x".
  const std::string& path() const noexcept { return path_; }
  /// True when this object refers to an open HDF5 object.
  bool valid() const noexcept { return handle_.valid(); }

  /// True when the attribute `name` exists.
  bool has_attribute(std::string_view name) const;
  /// Names of all attributes, in name order.
  std::vector<std::string> attribute_names() const;
  /// The element kind of attribute `name`. @throws IoError when it does not exist.
  H5Kind attribute_kind(std::string_view name) const;

  /// Writes a numeric scalar attribute. @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void set_attribute(std::string_view name, T value) {
    write_attribute_raw(name, detail::native_type<T>(), &value, 1, true);
  }
  /// Writes a 1-D numeric attribute. @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void set_attribute(std::string_view name, std::span<const T> values) {
    write_attribute_raw(name, detail::native_type<T>(), values.data(), values.size(), false);
  }
  /// Writes a 1-D numeric attribute from a vector. @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void set_attribute(std::string_view name, const std::vector<T>& values) {
    set_attribute(name, std::span<const T>(values));
  }
  /// Writes a scalar string attribute (variable-length UTF-8). @throws IoError
  void set_attribute(std::string_view name, std::string_view value);
  /// Writes a scalar string attribute. @throws IoError
  void set_attribute(std::string_view name, const char* value) { set_attribute(name, std::string_view(value)); }
  /// Writes a 1-D string attribute (variable-length UTF-8). @throws IoError
  void set_attribute(std::string_view name, const std::vector<std::string>& values);

  /// Reads a numeric scalar attribute, converting as HDF5 does.
  /// @throws IoError when missing, not numeric, or not one element.
  template <class T>
  requires detail::is_h5_numeric_v<T> T attribute(std::string_view name)
  const {
    T v{};
    read_attribute_raw(name, detail::native_type<T>(), &v, 1, true);
    return v;
  }
  /// Reads a numeric attribute of any size as a vector. @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T> std::vector<T> attribute_vector(std::string_view name)
  const {
    std::vector<T> v(attribute_size(name));
    read_attribute_raw(name, detail::native_type<T>(), v.data(), v.size(), false);
    return v;
  }
  /// Reads a scalar string attribute (variable or fixed length). @throws IoError
  std::string attribute_string(std::string_view name) const;
  /// Reads a string attribute of any size as a vector. @throws IoError
  std::vector<std::string> attribute_strings(std::string_view name) const;
  /// Number of elements of attribute `name`. @throws IoError
  std::size_t attribute_size(std::string_view name) const;

 protected:
  H5Object() = default;
  H5Object(detail::H5Handle h, std::string path);
  /// "file.h5:/object/path", for messages.
  std::string where() const { return where_of(path_); }
  std::string where_of(const std::string& object_path) const;
  void write_attribute_raw(std::string_view name, hid_t mem_type, const void* data, std::size_t n, bool scalar);
  void read_attribute_raw(std::string_view name, hid_t mem_type, void* data, std::size_t n, bool scalar) const;

  detail::H5Handle handle_;
  std::string path_;
  std::string file_;  // the file name, for messages
};

/// An HDF5 dataset. Obtained from `H5Group::create_dataset` or `H5Group::open_dataset`.
class H5Dataset : public H5Object {
 public:
  H5Dataset() = default;

  /// The current shape (row-major; dimension 0 is the one `append` grows).
  std::vector<hsize_t> shape() const;
  /// Number of elements (product of the shape; 1 for a scalar dataset).
  std::size_t size() const;
  /// The element kind.
  H5Kind kind() const;

  /// Writes the whole dataset; `data.size()` must equal `size()`.
  /// @throws InputError on a size mismatch, IoError on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void write(std::span<const T> data) { write_raw(detail::native_type<T>(), data.data(), data.size()); }
  /// Writes the whole dataset from a vector. @throws InputError, IoError
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void write(const std::vector<T>& data) { write(std::span<const T>(data)); }
  /// Writes a whole string dataset. @throws InputError, IoError
  void write_strings(const std::vector<std::string>& data);
  /// Writes rows `[first, first + n)` along dimension 0 (row-major; `rows.size()` = n times
  /// the row size), so that a dataset is written piece by piece without its whole data in
  /// memory: a contiguous dataset written so holds the bytes one `write` gives.
  /// @throws InputError when out of range or not whole rows, IoError on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void write_rows(hsize_t first, std::span<const T> rows) {
    write_rows_raw(detail::native_type<T>(), first, rows.data(), rows.size());
  }
  /// Writes the block of elements at `start` with lengths `count` (one per dimension;
  /// `data` row-major, the product of `count` elements), e.g. draws [a, a + n) of chain c of
  /// a [chain, draw] dataset: start {c, a}, count {1, n}. A contiguous dataset written so,
  /// block by block, holds the bytes one `write` gives.
  /// @throws InputError when the block is out of range or `data` has the wrong size, IoError
  /// on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void write_block(const std::vector<hsize_t>& start, const std::vector<hsize_t>& count, std::span<const T> data) {
    write_block_raw(detail::native_type<T>(), start, count, data.data(), data.size());
  }

  /// Reads the whole dataset (converting numeric types as HDF5 does). @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T> std::vector<T> read()
  const {
    std::vector<T> v(size());
    read_raw(detail::native_type<T>(), v.data(), v.size());
    return v;
  }
  /// Reads rows `[first, first + count)` along dimension 0, row-major.
  /// @throws InputError when out of range, IoError on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T> std::vector<T> read_rows(hsize_t first, hsize_t count)
  const {
    std::vector<T> v(count * row_size());
    read_rows_raw(detail::native_type<T>(), first, count, v.data());
    return v;
  }
  /// Reads a whole string dataset (variable or fixed length). @throws IoError
  std::vector<std::string> read_strings() const;

  /// Appends whole rows along dimension 0 of an extendible dataset; `rows.size()` must be
  /// a multiple of the row size (product of dimensions 1..). Streams a long chain to disk
  /// without holding it in memory.
  /// @throws InputError on a size mismatch or a non-extendible dataset, IoError on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void append(std::span<const T> rows) { append_raw(detail::native_type<T>(), rows.data(), rows.size()); }
  /// Appends rows from a vector. @throws InputError, IoError
  template <class T>
  requires detail::is_h5_numeric_v<T>
  void append(const std::vector<T>& rows) { append(std::span<const T>(rows)); }
  /// Number of elements in one row (product of dimensions 1..; 1 for a 1-D dataset).
  std::size_t row_size() const;

  /// Marks this dataset as a dimension scale named `dim_name` (H5DSset_scale), i.e. a
  /// netCDF-4 dimension / coordinate variable. @throws IoError
  void make_scale(std::string_view dim_name);
  /// True when this dataset is a dimension scale.
  bool is_scale() const;
  /// Attaches dimension scale `scale` to dimension `dim` of this dataset (H5DSattach_scale).
  /// @throws InputError when `dim` is out of range or the lengths differ, IoError on failure.
  void attach_scale(const H5Dataset& scale, unsigned dim);
  /// For each dimension, the name of the first attached scale (empty when none).
  std::vector<std::string> dimension_names() const;

 private:
  friend class H5Group;
  H5Dataset(detail::H5Handle h, std::string path) : H5Object(std::move(h), std::move(path)) {}
  void write_raw(hid_t mem_type, const void* data, std::size_t n);
  void read_raw(hid_t mem_type, void* data, std::size_t n) const;
  void read_rows_raw(hid_t mem_type, hsize_t first, hsize_t count, void* data) const;
  void write_rows_raw(hid_t mem_type, hsize_t first, const void* data, std::size_t n);
  void append_raw(hid_t mem_type, const void* data, std::size_t n);
  void write_block_raw(hid_t mem_type, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                       const void* data, std::size_t n);
};

/// An HDF5 group (the root group of a file is `H5File::root()`). Names may be paths
/// relative to this group ("a/b/c"); intermediate groups are created as needed.
class H5Group : public H5Object {
 public:
  H5Group() = default;

  /// Creates a child group. @throws IoError when it exists or cannot be created.
  H5Group create_group(std::string_view name);
  /// Opens an existing child group. @throws IoError when missing.
  H5Group open_group(std::string_view name) const;
  /// Opens the child group, creating it when missing. @throws IoError
  H5Group require_group(std::string_view name);
  /// True when a link `name` (path relative to this group) exists.
  bool contains(std::string_view name) const;
  /// True when `name` exists and is a group / a dataset.
  bool is_group(std::string_view name) const;
  bool is_dataset(std::string_view name) const;
  /// Names of the direct members (groups and datasets), in name order.
  std::vector<std::string> members() const;

  /// Creates a numeric dataset of element type `T` and the given shape (`{}`: scalar).
  /// For an extendible dataset `shape[0]` is the initial length (often 0).
  /// @throws InputError on bad options, IoError when it exists or on HDF5 failure.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset create_dataset(std::string_view name, const std::vector<hsize_t>& shape,
                                                               const DatasetOptions& options = {}) {
    return create_dataset_raw(name, detail::native_type<T>(), shape, options);
  }
  /// Creates a variable-length UTF-8 string dataset. @throws InputError, IoError
  H5Dataset create_string_dataset(std::string_view name, const std::vector<hsize_t>& shape,
                                  const DatasetOptions& options = {});
  /// Opens an existing dataset. @throws IoError when missing.
  H5Dataset open_dataset(std::string_view name) const;

  /// Creates and writes a dataset in one call; `shape` empty means 1-D of `data.size()`.
  /// @throws InputError when the shape does not match the data, IoError on failure.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset write(std::string_view name, std::span<const T> data,
                                                      std::vector<hsize_t> shape = {},
                                                      const DatasetOptions& options = {}) {
    if (shape.empty()) shape = {static_cast<hsize_t>(data.size())};
    H5Dataset ds = create_dataset<T>(name, shape, options);
    ds.write(data);
    return ds;
  }
  /// As above, from a vector.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset write(std::string_view name, const std::vector<T>& data,
                                                      std::vector<hsize_t> shape = {},
                                                      const DatasetOptions& options = {}) {
    return write(name, std::span<const T>(data), std::move(shape), options);
  }
  /// Writes a scalar numeric dataset.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset write_scalar(std::string_view name, T value) {
    H5Dataset ds = create_dataset<T>(name, {});
    ds.write(std::span<const T>(&value, 1));
    return ds;
  }
  /// Creates and writes a 1-D string dataset. @throws IoError
  H5Dataset write_strings(std::string_view name, const std::vector<std::string>& data);
  /// Reads a whole dataset. @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T> std::vector<T> read(std::string_view name)
  const { return open_dataset(name).read<T>(); }

  /// Writes a netCDF-4 coordinate variable: a 1-D dataset `name` holding `values`, made a
  /// dimension scale of the same name. Attach it with `attach_dimensions`.
  /// @throws IoError
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset create_coordinate(std::string_view name, std::span<const T> values) {
    H5Dataset ds = write(name, values);
    ds.make_scale(name);
    return ds;
  }
  /// As above, from a vector.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset create_coordinate(std::string_view name, const std::vector<T>& values) {
    return create_coordinate(name, std::span<const T>(values));
  }
  /// Creates a netCDF-4 dimension without coordinate values: a dimension scale of length
  /// `size` whose NAME attribute is netCDF's "This is a netCDF dimension but not a netCDF
  /// variable." marker, so xarray shows the dimension but no coordinate. @throws IoError
  H5Dataset create_dimension(std::string_view name, hsize_t size);
  /// Attaches the dimension scales named `dims` (datasets of this group) to the dimensions
  /// of `ds`, in order; `dims.size()` must equal the rank of `ds`.
  /// @throws InputError on a rank or length mismatch, IoError when a scale is missing.
  void attach_dimensions(H5Dataset& ds, const std::vector<std::string>& dims);
  /// Writes a netCDF-4 / ArviZ variable: a dataset whose shape is the lengths of the
  /// dimension scales `dims` of this group (e.g. `{"chain", "draw", "x_dim_0"}`), with the
  /// scales attached, so xarray sees `name(chain, draw, x_dim_0)`. `data` is row-major.
  /// @throws InputError when `data.size()` differs from the product of the lengths,
  /// IoError when a scale is missing.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset write_variable(std::string_view name, std::span<const T> data,
                                                               const std::vector<std::string>& dims,
                                                               const DatasetOptions& options = {}) {
    H5Dataset ds = create_dataset<T>(name, dimension_shape(name, data.size(), dims), options);
    ds.write(data);
    attach_dimensions(ds, dims);
    return ds;
  }
  /// As above, from a vector.
  template <class T>
  requires detail::is_h5_numeric_v<T> H5Dataset write_variable(std::string_view name, const std::vector<T>& data,
                                                               const std::vector<std::string>& dims,
                                                               const DatasetOptions& options = {}) {
    return write_variable(name, std::span<const T>(data), dims, options);
  }

 private:
  friend class H5File;
  H5Group(detail::H5Handle h, std::string path) : H5Object(std::move(h), std::move(path)) {}
  H5Dataset create_dataset_raw(std::string_view name, hid_t mem_type, const std::vector<hsize_t>& shape,
                               const DatasetOptions& options);
  std::string child_path(std::string_view name) const;
  std::vector<hsize_t> dimension_shape(std::string_view name, std::size_t size,
                                       const std::vector<std::string>& dims) const;
};

/// An HDF5 file. Move-only; closing happens in the destructor (errors ignored) or in
/// `close()` (errors thrown).
class H5File {
 public:
  H5File() = default;
  H5File(H5File&& o) noexcept
      : handle_(std::move(o.handle_)), path_(std::move(o.path_)), temp_path_(std::move(o.temp_path_)) {
    o.temp_path_.clear();  // the moved-from object must not remove the temporary file
  }
  H5File& operator=(H5File&&) noexcept;
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
  /// Closes the file; an uncommitted atomic file is removed.
  ~H5File();

  /// Creates a file, replacing an existing one when `overwrite` (else failing if it exists).
  /// @throws IoError
  static H5File create(const std::string& path, bool overwrite = true);
  /// Creates a file to be published atomically: the data go to a temporary file in the same
  /// folder, and `commit()` closes it, fsyncs it, renames it over `path` and fsyncs the
  /// folder. Without `commit()` the temporary file is removed and `path` is untouched.
  /// @throws IoError
  static H5File create_atomic(const std::string& path);
  /// Opens an existing file. @throws IoError when missing or not HDF5.
  static H5File open(const std::string& path, H5Mode mode = H5Mode::kRead);
  /// True when `path` exists and is an HDF5 file.
  static bool is_hdf5(const std::string& path);

  /// The root group "/". @throws IoError when the file is closed.
  H5Group root() const;
  /// Shorthand for `root().open_group(name)` / `require_group` / `open_dataset`.
  H5Group open_group(std::string_view name) const { return root().open_group(name); }
  H5Group require_group(std::string_view name) { return root().require_group(name); }
  H5Dataset open_dataset(std::string_view name) const { return root().open_dataset(name); }

  /// Flushes buffers to the operating system. @throws IoError
  void flush();
  /// fsyncs what the operating system already holds of the file (the temporary file of an
  /// atomic one), without calling HDF5: HDF5's own buffers (metadata) are not flushed, so
  /// the file's bytes are those it would have anyway. A writer calls it after the bulk of
  /// the data, so that commit()'s fsync then has only what follows to write. Not a
  /// durability point (commit() still fsyncs). Needs no HDF5 lock: may run on one thread
  /// while another calls HDF5, but not beside close(), commit() or a move of this object.
  /// @throws IoError when the file is closed or cannot be synced.
  void sync_data() const;
  /// Starts the disk writes of what HDF5 has written to the file so far (the temporary
  /// file of an atomic one) without waiting for them (io::start_writeback), so that a
  /// later sync_data() or commit() waits less: a writer of a large file calls it after each
  /// large dataset. A hint: never throws; the same thread rules as sync_data().
  void start_writeback() const noexcept;
  /// Closes the file (all objects of it too). @throws IoError
  void close();
  /// For a file from `create_atomic`: closes, fsyncs, renames over the final path, fsyncs
  /// the folder. Objects of this file must not be used afterwards. @throws IoError
  void commit();
  /// The path (the final path for an atomic file).
  const std::string& path() const noexcept { return path_; }
  /// True while the file is open.
  bool is_open() const noexcept { return handle_.valid(); }
  hid_t id() const noexcept { return handle_.get(); }

 private:
  detail::H5Handle handle_;
  std::string path_;
  std::string temp_path_;  // non-empty for an uncommitted atomic file
};

}  // namespace herd::io
