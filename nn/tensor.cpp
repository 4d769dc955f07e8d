#include "herd/nn/tensor.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device_context.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#endif

namespace herd::nn {

namespace detail {
namespace {
std::atomic<std::uint64_t> g_storage_replacements{0};
}  // namespace
void note_storage_replacement() { g_storage_replacements.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t storage_replacements() { return g_storage_replacements.load(std::memory_order_relaxed); }
}  // namespace detail

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kInt64:
      return "int64";
  }
  return "unknown";
}

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  HERD_REQUIRE(dims.size() <= static_cast<std::size_t>(kMaxDims),
               "nn::Shape: {} dimensions given, but at most {} are supported", dims.size(), kMaxDims);
  ndim_ = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    HERD_REQUIRE(dims[i] >= 0, "nn::Shape: extent {} of dimension {} is negative", dims[i], i);
    dims_[i] = dims[i];
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.ndim_ != b.ndim_) return false;
  for (int i = 0; i < a.ndim_; ++i)
    if (a.dims_[static_cast<std::size_t>(i)] != b.dims_[static_cast<std::size_t>(i)]) return false;
  return true;
}

namespace {

// Same-dtype byte copy between any two devices; synchronous.
void copy_bytes(void* dst, Device dd, const void* src, Device sd, std::size_t bytes) {
  if (bytes == 0) return;
  if (dd.is_cpu() && sd.is_cpu()) {
    std::memmove(dst, src, bytes);
    return;
  }
#if HERD_HAVE_CUDA
  // On the nn stream of the CUDA side, after the work already queued there.
  const Device cd = dd.is_cuda() ? dd : sd;
  detail::DevGuard guard(cd);
  cudaStream_t s = detail::dev_stream(cd);
  HERD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  // A read back to the host is a natural synchronisation point: report input errors found
  // on the device (not on copies to or within the device, so loading a state is never cut
  // short by an earlier, unrelated error).
  if (dd.is_cpu()) detail::check_dev_errors(cd);
#else
  (void)dst;
  (void)src;
  throw InputError("nn::Tensor: CUDA copies need a CUDA build");
#endif
}

}  // namespace

namespace detail {
Storage::Storage(std::size_t nbytes, Device dev) : bytes(nbytes), device(dev) {
#if HERD_HAVE_CUDA
  if (dev.is_cuda()) {
    // Device memory: cudaMalloc on the tensor's device (no managed memory), zeroed.
    if (nbytes == 0) return;
    detail::DevGuard guard(dev);
    HERD_CUDA_CHECK(cudaMalloc(&data, nbytes));
    HERD_CUDA_CHECK(cudaMemset(data, 0, nbytes));
    return;
  }
#endif
  HERD_REQUIRE(dev.is_cpu(), "nn::Tensor: device {} needs the CUDA backend, which this build does not have", dev.str());
  const std::size_t rounded = ((nbytes + 63) / 64) * 64;
  data = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !data) throw std::bad_alloc();
  if (data) std::memset(data, 0, rounded);
}
Storage::~Storage() {
#if HERD_HAVE_CUDA
  if (device.is_cuda()) {
    if (data) cudaFree(data);
    return;
  }
#endif
  std::free(data);
}
}  // namespace detail

Tensor::Tensor(const Shape& shape, DType dtype, Device device)
    : storage_(std::make_shared<detail::Storage>(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype), device)),
      shape_(shape),
      numel_(shape.numel()),
      dtype_(dtype) {}

Tensor Tensor::from_vector(const Shape& shape, std::span<const double> values, DType dtype) {
  HERD_REQUIRE(static_cast<std::int64_t>(values.size()) == shape.numel(),
               "nn::Tensor::from_vector: {} values given for shape {} ({} elements)", values.size(), shape.str(),
               shape.numel());
  Tensor t(shape, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) t.set_item(static_cast<std::int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::from_indices(const Shape& shape, std::span<const std::int64_t> values) {
  HERD_REQUIRE(static_cast<std::int64_t>(values.size()) == shape.numel(),
               "nn::Tensor::from_indices: {} values given for shape {} ({} elements)", values.size(), shape.str(),
               shape.numel());
  Tensor t(shape, DType::kInt64);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * 8);
  return t;
}

void Tensor::check_type(DType want) const {
  HERD_CHECK(want == dtype_, "nn::Tensor::data: requested {} of a {} tensor", dtype_name(want), dtype_name(dtype_));
}

double Tensor::item(std::int64_t i) const {
  require_cpu(*this, "nn::Tensor::item");
  HERD_CHECK(i >= 0 && i < numel_, "nn::Tensor::item: index {} outside [0, {})", i, numel_);
  switch (dtype_) {
    case DType::kFloat32:
      return static_cast<const float*>(raw())[i];
    case DType::kFloat64:
      return static_cast<const double*>(raw())[i];
    case DType::kInt64:
      return static_cast<double>(static_cast<const std::int64_t*>(raw())[i]);
  }
  return 0.0;
}

void Tensor::set_item(std::int64_t i, double v) {
  require_cpu(*this, "nn::Tensor::set_item");
  HERD_CHECK(i >= 0 && i < numel_, "nn::Tensor::set_item: index {} outside [0, {})", i, numel_);
  switch (dtype_) {
    case DType::kFloat32:
      static_cast<float*>(raw())[i] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      static_cast<double*>(raw())[i] = v;
      break;
    case DType::kInt64:
      static_cast<std::int64_t*>(raw())[i] = static_cast<std::int64_t>(v);
      break;
  }
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> v(static_cast<std::size_t>(numel_));
  for (std::int64_t i = 0; i < numel_; ++i) v[static_cast<std::size_t>(i)] = item(i);
  return v;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  HERD_REQUIRE(ndim() >= 1, "nn::Tensor::slice: a 0-d tensor has no batch dimension");
  HERD_REQUIRE(0 <= begin && begin <= end && end <= dim(0),
               "nn::Tensor::slice: rows [{}, {}) requested of a tensor with {} rows", begin, end, dim(0));
  Tensor t = *this;
  const std::int64_t row = dim(0) == 0 ? 0 : numel_ / dim(0);
  std::array<std::int64_t, Shape::kMaxDims> d{};
  for (int i = 0; i < ndim(); ++i) d[static_cast<std::size_t>(i)] = dim(i);
  d[0] = end - begin;
  t.shape_ = Shape(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(ndim())));
  t.numel_ = t.shape_.numel();
  t.offset_ = offset_ + static_cast<std::size_t>(begin * row) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  HERD_REQUIRE(shape.numel() == numel_, "nn::Tensor::reshape: shape {} has {} elements, but {} has {}", shape.str(),
               shape.numel(), shape_.str(), numel_);
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t(shape_, dtype_, device());
  copy_bytes(t.raw(), t.device(), raw(), device(), static_cast<std::size_t>(numel_) * dtype_size(dtype_));
  return t;
}

Tensor Tensor::to(DType dtype) const {
  Tensor t(shape_, dtype, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  Tensor t(shape_, dtype_, device);  // throws for CUDA in a CPU-only build
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  HERD_REQUIRE(src.numel() == numel_, "nn::Tensor::copy_from: source {} has {} elements, target {} has {}",
               src.shape().str(), src.numel(), shape_.str(), numel_);
  if (!is_cpu() || !src.is_cpu()) {
    HERD_REQUIRE(src.dtype() == dtype_, "nn::Tensor::copy_from: {} to {} involves {}, but conversion is host only",
                 dtype_name(src.dtype()), dtype_name(dtype_), is_cpu() ? src.device().str() : device().str());
    copy_bytes(raw(), device(), src.raw(), src.device(), static_cast<std::size_t>(numel_) * dtype_size(dtype_));
    return;
  }
  if (numel_ == 0) return;
  if (src.dtype() == dtype_) {
    std::memmove(raw(), src.raw(), static_cast<std::size_t>(numel_) * dtype_size(dtype_));
    return;
  }
  for (std::int64_t i = 0; i < numel_; ++i) set_item(i, src.item(i));
}

void Tensor::fill(double v) {
  if (is_cuda()) {
    // Filled on the host and copied: fills happen at construction, not per step.
    Tensor h(shape_, dtype_);
    h.fill(v);
    copy_from(h);
    return;
  }
  switch (dtype_) {
    case DType::kFloat32: {
      auto* p = static_cast<float*>(raw());
      for (std::int64_t i = 0; i < numel_; ++i) p[i] = static_cast<float>(v);
      break;
    }
    case DType::kFloat64: {
      auto* p = static_cast<double*>(raw());
      for (std::int64_t i = 0; i < numel_; ++i) p[i] = v;
      break;
    }
    case DType::kInt64: {
      auto* p = static_cast<std::int64_t*>(raw());
      for (std::int64_t i = 0; i < numel_; ++i) p[i] = static_cast<std::int64_t>(v);
      break;
    }
  }
}

void Tensor::copy_from_async(const Tensor& src, CUstream_st* stream) {
  HERD_REQUIRE(src.numel() == numel_ && src.dtype() == dtype_,
               "nn::Tensor::copy_from_async: source {} {} and target {} {} differ in numel or dtype",
               dtype_name(src.dtype()), src.shape().str(), dtype_name(dtype_), shape_.str());
  const std::size_t bytes = static_cast<std::size_t>(numel_) * dtype_size(dtype_);
  if (is_cpu() && src.is_cpu()) {
    if (bytes) std::memmove(raw(), src.raw(), bytes);
    return;
  }
#if HERD_HAVE_CUDA
  if (bytes) HERD_CUDA_CHECK(cudaMemcpyAsync(raw(), src.raw(), bytes, cudaMemcpyDefault, stream));
#else
  (void)stream;
  throw InputError("nn::Tensor::copy_from_async: CUDA copies need a CUDA build");
#endif
}

void Tensor::zero() {
#if HERD_HAVE_CUDA
  if (is_cuda()) {
    detail::DevGuard guard(device());
    if (numel_)
      HERD_CUDA_CHECK(cudaMemsetAsync(raw(), 0, static_cast<std::size_t>(numel_) * dtype_size(dtype_),
                                      detail::dev_stream(device())));
    return;
  }
#endif
  require_cpu(*this, "nn::Tensor::zero");
  if (numel_) std::memset(raw(), 0, static_cast<std::size_t>(numel_) * dtype_size(dtype_));
}

void Tensor::resize(const Shape& shape, DType dtype, Device device) {
  const std::size_t need = static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  // Reuse the storage from this tensor's offset when it fits, so a view (for example a
  // slice of a rollout buffer given as an output argument) is written in place.
  if (!storage_ || storage_->device != device || offset_ + need > storage_->bytes) {
    if (storage_ && storage_->device.is_cuda()) detail::note_storage_replacement();
    storage_ = std::make_shared<detail::Storage>(need, device);
    offset_ = 0;
  }
  shape_ = shape;
  numel_ = shape.numel();
  dtype_ = dtype;
}

std::string Tensor::str() const {
  return "Tensor[" + std::string(dtype_name(dtype_)) + ", " + shape_.str() + ", " + device().str() + "]";
}

CUstream_st* compute_stream(Device device) {
  if (device.is_cpu()) return nullptr;
#if HERD_HAVE_CUDA
  return detail::dev_stream(device);
#else
  throw InputError("nn::compute_stream: device " + device.str() + " needs a CUDA build");
#endif
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#if HERD_HAVE_CUDA
  HERD_CUDA_CHECK(cudaStreamSynchronize(detail::dev_stream(device)));
  detail::check_dev_errors(device);
#else
  throw InputError("nn::synchronize: device " + device.str() + " needs a CUDA build");
#endif
}

void require_cpu(const Tensor& t, const char* what) {
  HERD_CHECK(!t.defined() || t.is_cpu(), "{}: tensor on {} but this operation has only the CPU backend in this build",
             what, t.device().str());
}

}  // namespace herd::nn
