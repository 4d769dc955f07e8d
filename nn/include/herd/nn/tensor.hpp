#pragma once
/// @file tensor.hpp
/// `Tensor`: a contiguous, row-major array of up to 4 dimensions with a dtype and a device
/// tag, the one data type of the nn layer (DESIGN.md §1).
///
/// Layouts follow PyTorch: dense layers take `[batch, features]`, convolutions NCHW.
/// A tensor is a handle to shared storage: copying a `Tensor` is cheap and aliases the
/// same memory (use `clone()` for a deep copy); `slice()` and `reshape()` return views.
/// Storage lives on the host (`Device::cpu()`) or, in CUDA builds, on a CUDA device
/// (`Device::cuda(i)`, cudaMalloc). Construction, `clone`, `to(Device)`, `copy_from`,
/// `copy_from_async`, `zero`, `fill`, `slice` and `reshape` work on both; element access and the
/// other host-only operations throw `herd::Error` on a CUDA tensor.
///
/// Thread-safety: distinct tensors may be used from distinct threads; concurrent writes to
/// one storage (through any view) must be synchronised by the caller.

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/core/error.hpp"

/// The CUDA runtime's stream struct (`cudaStream_t` is `CUstream_st*`), declared here so
/// that the nn headers need no CUDA header.
struct CUstream_st;

namespace herd::nn {

/// Element types. Modules compute in `kFloat32` or `kFloat64`; `kInt64` holds class
/// indices (categorical actions, cross-entropy targets).
enum class DType : std::uint8_t { kFloat32 = 0, kFloat64 = 1, kInt64 = 2 };

/// Bytes per element of `t`.
constexpr std::size_t dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 8; }
/// "float32", "float64" or "int64".
const char* dtype_name(DType t);

/// The `DType` of a C++ element type (float, double, std::int64_t).
template <class T>
constexpr DType dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>,
                "herd::nn tensors hold float, double or std::int64_t");
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  else return DType::kInt64;
}

/// A shape of 0 to 4 dimensions (a fixed-size value: no allocation).
class Shape {
 public:
  /// Maximum number of dimensions.
  static constexpr int kMaxDims = 4;

  /// A 0-d shape (one element).
  Shape() = default;
  /// @throws InputError for more than 4 dimensions or a negative extent.
  Shape(std::initializer_list<std::int64_t> dims);
  /// @throws InputError for more than 4 dimensions or a negative extent.
  explicit Shape(std::span<const std::int64_t> dims);

  /// Number of dimensions (0 to 4).
  int ndim() const { return ndim_; }
  /// Extent of dimension `i`; negative `i` counts from the end (-1 is the last).
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i < 0 ? i + ndim_ : i)]; }
  /// Product of the extents (1 for a 0-d shape).
  std::int64_t numel() const;
  /// The extents.
  std::span<const std::int64_t> dims() const { return {dims_.data(), static_cast<std::size_t>(ndim_)}; }
  /// "[2, 3]".
  std::string str() const;
  /// Same number of dimensions and extents.
  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

namespace detail {
/// Owned memory of one device, zero-filled: 64-byte aligned host memory, or cudaMalloc'ed
/// device memory (CUDA builds; never managed memory). Internal to `Tensor`.
struct Storage {
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data = nullptr;
  std::size_t bytes = 0;
  Device device;
};
/// How many times `Tensor::resize` has replaced the CUDA storage of a tensor with new
/// storage (a module buffer outgrew its memory), process-wide. Captured CUDA graphs
/// (`GraphedTrainStep`) hold raw device pointers to module buffers: a change of this
/// count means one of them may have been freed, so they are captured again. Thread-safe.
std::uint64_t storage_replacements();
/// Counts one replacement (called by `Tensor::resize`).
void note_storage_replacement();
}  // namespace detail

/// A contiguous row-major tensor (see the file comment).
class Tensor {
 public:
  /// An empty (undefined) tensor: `defined()` is false, numel 0.
  Tensor() = default;
  /// A new tensor of `shape` filled with zeros.
  /// @throws InputError for a CUDA device in a CPU-only build, or one this machine does not
  ///         have (no driver or GPU, or an index past the last; named with what the CUDA
  ///         runtime found); CudaError when the allocation fails.
  Tensor(const Shape& shape, DType dtype, Device device = Device::cpu());

  /// A new tensor of zeros.
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu()) {
    return Tensor(shape, dtype, device);
  }
  /// A new host tensor holding `values` (row-major), converted to `dtype`.
  /// @throws InputError when `values.size() != shape.numel()`.
  static Tensor from_vector(const Shape& shape, std::span<const double> values, DType dtype = DType::kFloat64);
  /// A new host tensor of int64 values.
  static Tensor from_indices(const Shape& shape, std::span<const std::int64_t> values);
  /// `from_vector` of a braced list: `Tensor::from_vector({2, 2}, {1, 2, 3, 4}, DType::kFloat32)`
  /// (as `torch.tensor([[1., 2.], [3., 4.]])`, but the dtype defaults to float64 here).
  /// @throws InputError when the list's length is not `shape.numel()`.
  static Tensor from_vector(const Shape& shape, std::initializer_list<double> values, DType dtype = DType::kFloat64) {
    return from_vector(shape, std::span<const double>(values.begin(), values.size()), dtype);
  }
  /// `from_indices` of a braced list: `Tensor::from_indices({3}, {2, 0, 1})`.
  /// @throws InputError when the list's length is not `shape.numel()`.
  static Tensor from_indices(const Shape& shape, std::initializer_list<std::int64_t> values) {
    return from_indices(shape, std::span<const std::int64_t>(values.begin(), values.size()));
  }

  /// False for a default-constructed tensor.
  bool defined() const { return storage_ != nullptr; }
  /// The extents.
  const Shape& shape() const { return shape_; }
  /// Number of dimensions.
  int ndim() const { return shape_.ndim(); }
  /// Extent of dimension `i` (negative counts from the end).
  std::int64_t dim(int i) const { return shape_[i]; }
  /// Number of elements.
  std::int64_t numel() const { return numel_; }
  /// Element type.
  DType dtype() const { return dtype_; }
  /// Where the storage lives (cpu when undefined).
  Device device() const { return storage_ ? storage_->device : Device::cpu(); }
  /// True for host storage.
  bool is_cpu() const { return device().is_cpu(); }
  /// True when the storage is on a CUDA device.
  bool is_cuda() const { return device().is_cuda(); }

  /// Typed pointer to the first element (host or device memory).
  /// @throws Error when `T` does not match the dtype.
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  /// Const overload of `data`.
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw());
  }
  /// Untyped pointer to the first element (nullptr when undefined).
  void* raw() { return storage_ ? static_cast<char*>(storage_->data) + offset_ : nullptr; }
  /// Const overload of `raw`.
  const void* raw() const { return storage_ ? static_cast<const char*>(storage_->data) + offset_ : nullptr; }

  /// Element `i` of the flattened tensor as a double (host only; for tests and small reads).
  /// @throws Error on a CUDA tensor or an out-of-range index.
  double item(std::int64_t i = 0) const;
  /// Sets element `i` of the flattened tensor (host only).
  void set_item(std::int64_t i, double v);
  /// The elements as doubles (host only).
  std::vector<double> to_vector() const;

  /// A view of rows [begin, end) of dimension 0 (a batch slice); shares storage.
  /// @throws InputError unless 0 <= begin <= end <= dim(0).
  Tensor slice(std::int64_t begin, std::int64_t end) const;
  /// A view with another shape of the same numel; shares storage.
  /// @throws InputError when the numel differs.
  Tensor reshape(const Shape& shape) const;
  /// A deep copy (same dtype and device).
  Tensor clone() const;
  /// A deep copy converted to `dtype` (host only).
  Tensor to(DType dtype) const;
  /// A deep copy on `device`. Host <-> CUDA and CUDA <-> CUDA copies (CUDA builds) are
  /// synchronous (cudaMemcpy); use `copy_from_async` to copy on a stream.
  /// @throws InputError when `device` is a CUDA device in a CPU-only build or one this
  ///         machine does not have (as the constructor); CudaError when a CUDA call fails.
  Tensor to(Device device) const;
  /// Copies the elements of `src` (same numel). On the host the dtype is converted; a copy
  /// involving a CUDA tensor needs the same dtype and is synchronous (cudaMemcpy).
  /// @throws InputError when the numel differs (or the dtype, for a device copy).
  void copy_from(const Tensor& src);
  /// Copies `src` (same numel and dtype) with cudaMemcpyAsync on `stream` (a
  /// `cudaStream_t`): returns at once; both tensors must stay alive and untouched until the
  /// stream reaches the copy, and host memory should be pinned for the copy to be truly
  /// asynchronous. Host to host copies are done at once.
  /// @throws InputError on a numel or dtype mismatch or a CUDA tensor in a CPU-only build;
  ///         CudaError when the CUDA call fails.
  void copy_from_async(const Tensor& src, CUstream_st* stream);
  /// Sets every element to `v` (on a CUDA tensor: filled on the host and copied,
  /// synchronously).
  void fill(double v);
  /// Sets every element to zero (on a CUDA tensor: cudaMemsetAsync on the device's nn
  /// stream, see `compute_stream`).
  void zero();

  /// Makes this tensor `shape` with `dtype` on `device`, reusing its storage (from its
  /// offset, so a view stays a view) when it is large enough, so module buffers stop
  /// allocating after the first call; otherwise it gets new storage and other handles keep
  /// the old one. The contents are unspecified
  /// afterwards, and other handles of reused storage see the same memory (module outputs
  /// are valid until the module's next call).
  void resize(const Shape& shape, DType dtype, Device device = Device::cpu());
  /// As `resize`, keeping the dtype and device of `like` and taking its shape.
  void resize_like(const Tensor& like) { resize(like.shape(), like.dtype(), like.device()); }

  /// True when both are views of the same memory with equal offset and shape.
  bool same_as(const Tensor& o) const { return storage_ == o.storage_ && offset_ == o.offset_ && shape_ == o.shape_; }
  /// "Tensor[float32, [2, 3], cpu]".
  std::string str() const;

 private:
  void check_type(DType want) const;

  std::shared_ptr<detail::Storage> storage_;
  std::size_t offset_ = 0;  // bytes
  Shape shape_;
  std::int64_t numel_ = 0;
  DType dtype_ = DType::kFloat32;
};

/// The stream (a `cudaStream_t`) on which the nn layer enqueues all work on CUDA device
/// `device`: module, loss, head and optimizer kernels, cuBLAS calls, `zero()` and the
/// copies of `to`/`copy_from`/`clone` (which then wait for it). One blocking stream per
/// device and process, created on first use; nullptr for the host. Module calls return
/// before their device work is done; wait with `synchronize` (or copy the result to the
/// host) before timing or reading device memory by other means. Thread-safe.
/// @throws InputError for a CUDA device in a CPU-only build or one this machine does not
///         have; CudaError on CUDA failures.
CUstream_st* compute_stream(Device device);
/// Blocks until the work queued on `compute_stream(device)` is done (no-op for the host),
/// then reports input errors that kernels found on the device since the last
/// synchronisation (a cross-entropy target or categorical action out of range; the
/// synchronous copies of `to`/`copy_from` from a device to the host report them too).
/// @throws InputError for a CUDA device in a CPU-only build or one this machine does not
///         have, or a deferred input error
///         (naming the function, entry, value and range); CudaError (also for an
///         earlier asynchronous kernel failure) on CUDA failures.
void synchronize(Device device);

/// Throws `herd::Error` naming `what` unless `t` lives on the host: the CPU backend's guard.
void require_cpu(const Tensor& t, const char* what);

/// A named tensor of a state: model parameters or optimizer state, as saved to HDF5 or a
/// binary file. The shape and dtype are those of `tensor`.
struct NamedTensor {
  std::string name;  ///< dotted name, e.g. "0.weight" or "0.weight.exp_avg"
  Tensor tensor;     ///< values, shape and dtype
};

}  // namespace herd::nn
