#include "herd/nn/data_parallel.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device_context.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif
#if HERD_HAVE_NCCL
#include "herd/core/nccl_communicator.hpp"
#endif
namespace herd::nn {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

herd::DataType comm_type(DType t) { return t == DType::kFloat64 ? herd::DataType::kFloat64 : herd::DataType::kFloat32; }

}  // namespace

DataParallel::DataParallel(Module& module, Communicator& comm, DataParallelOptions options)
    : module_(module), comm_(comm), options_(options), dtype_(module.dtype()) {
  on_device_ = module.device().is_cuda();
  if (on_device_) {
#if HERD_HAVE_CUDA
    nn_stream_ = compute_stream(module.device());
    comm_stream_ = nn_stream_;
#if HERD_HAVE_NCCL
    if (auto* nccl = dynamic_cast<NcclCommunicator*>(&comm)) comm_stream_ = nccl->stream();
    const bool nccl_ok = dynamic_cast<NcclCommunicator*>(&comm) != nullptr;
#else
    const bool nccl_ok = false;
#endif
    HERD_REQUIRE(nccl_ok || comm.size() == 1,
                 "nn::DataParallel: the module is on {}, which needs an NcclCommunicator, but the "
                 "communicator is '{}' with {} ranks",
                 module.device().str(), comm.backend(), comm.size());
#endif
  }
  elem_size_ = dtype_size(dtype_);
  const std::size_t per_bucket = options_.bucket_bytes / elem_size_;
  HERD_REQUIRE(per_bucket >= 1, "nn::DataParallel: bucket_bytes is {}, but must hold one {} element",
               options_.bucket_bytes, dtype_name(dtype_));
  auto params = module.parameters();
  HERD_REQUIRE(!params.empty(), "nn::DataParallel: the {} has no parameters", module.type_name());

  // Reverse registration order: the order in which backward completes gradients.
  std::size_t offset = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    Slot s;
    s.param = *it;
    s.offset = offset;
    s.count = static_cast<std::size_t>((*it)->value.numel());
    offset += s.count;
    slots_.push_back(s);
  }
  const std::size_t total = offset;
  for (std::size_t b = 0; b * per_bucket < total; ++b) {
    Bucket k;
    k.offset = b * per_bucket;
    k.count = std::min(per_bucket, total - k.offset);
    buckets_.push_back(std::move(k));
  }
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.count == 0) {  // empty parameter: belongs to no bucket
      s.first_bucket = 1;
      s.last_bucket = 0;
    } else {
      s.first_bucket = s.offset / per_bucket;
      s.last_bucket = (s.offset + s.count - 1) / per_bucket;
      for (std::size_t b = s.first_bucket; b <= s.last_bucket; ++b) ++buckets_[b].pending_total;
    }
    slot_of_[s.param] = i;
  }
  if (on_device_) {
#if HERD_HAVE_CUDA
    detail::DevGuard guard(module.device());
    flat_dev_ = Tensor({static_cast<std::int64_t>(total)}, dtype_, module.device());
    bucket_events_.assign(buckets_.size(), nullptr);
    for (auto& e : bucket_events_) HERD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    HERD_CUDA_CHECK(cudaEventCreateWithFlags(&done_event_, cudaEventDisableTiming));
    HERD_CUDA_CHECK(cudaEventCreate(&wait_begin_));
    HERD_CUDA_CHECK(cudaEventCreate(&wait_end_));
    synchronize(module.device());  // parameters complete before the broadcast reads them
#endif
  } else {
    flat_.assign(total * elem_size_, 0);
  }
  if (options_.broadcast_parameters && comm_.size() > 1) {
    for (Parameter* p : params)
      comm_.broadcast(p->value.raw(), static_cast<std::size_t>(p->value.numel()), comm_type(dtype_), 0);
  }
  module_.set_grad_ready_hook([this](Parameter& p) { on_ready(p); });
}

DataParallel::~DataParallel() {
  for (auto& b : buckets_) {
    try {
      if (b.request) b.request->wait();
    } catch (...) {
    }
    b.request.reset();
  }
  module_.set_grad_ready_hook({});
#if HERD_HAVE_CUDA
  if (on_device_) {
    if (comm_stream_) cudaStreamSynchronize(comm_stream_);
    for (auto* e : bucket_events_)
      if (e) cudaEventDestroy(e);
    if (done_event_) cudaEventDestroy(done_event_);
    if (wait_begin_) cudaEventDestroy(wait_begin_);
    if (wait_end_) cudaEventDestroy(wait_end_);
  }
#endif
}

const DataParallelStats& DataParallel::stats() const {
#if HERD_HAVE_CUDA
  if (wait_pending_ && cudaEventQuery(wait_end_) == cudaSuccess) {
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, wait_begin_, wait_end_) == cudaSuccess) stats_.wait_seconds = 1e-3 * ms;
    wait_pending_ = false;
  }
#endif
  return stats_;
}

void DataParallel::begin_pass() {
  for (auto& s : slots_) s.ready = false;
  for (auto& b : buckets_) b.pending = b.pending_total;
  next_launch_ = 0;
  stats_ = {};
  wait_pending_ = false;
  in_pass_ = true;
  pass_start_ = Clock::now();
}

void DataParallel::on_ready(Parameter& p) {
  if (!in_pass_) begin_pass();
  auto it = slot_of_.find(&p);
  if (it == slot_of_.end()) return;  // not ours (a module added after construction)
  mark_ready(slots_[it->second]);
  launch_ready_buckets();
  // Drive the progress of requests in flight (MPI progresses non-blocking collectives
  // only inside MPI calls unless it runs a progress thread).
  for (std::size_t b = 0; b < next_launch_; ++b)
    if (buckets_[b].request) buckets_[b].request->test();
}

void DataParallel::mark_ready(Slot& s) {
  if (s.ready) return;
  s.ready = true;
  if (s.count == 0) return;
  if (on_device_) {
#if HERD_HAVE_CUDA
    HERD_CUDA_CHECK(cudaMemcpyAsync(static_cast<unsigned char*>(flat_dev_.raw()) + s.offset * elem_size_,
                                    s.param->grad.raw(), s.count * elem_size_, cudaMemcpyDeviceToDevice, nn_stream_));
#endif
  } else {
    std::memcpy(flat_.data() + s.offset * elem_size_, s.param->grad.raw(), s.count * elem_size_);
  }
  for (std::size_t b = s.first_bucket; b <= s.last_bucket; ++b) --buckets_[b].pending;
}

void DataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    unsigned char* base = flat_.data();
#if HERD_HAVE_CUDA
    if (on_device_) {
      // The communicator's stream waits (on the device) for this bucket's copies.
      base = static_cast<unsigned char*>(flat_dev_.raw());
      HERD_CUDA_CHECK(cudaEventRecord(bucket_events_[next_launch_], nn_stream_));
      HERD_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, bucket_events_[next_launch_], 0));
    }
#endif
    if (comm_.size() > 1)
      b.request = comm_.allreduce_async(base + b.offset * elem_size_, b.count, comm_type(dtype_), ReduceOp::kSum);
    ++next_launch_;
  }
}

const Tensor& DataParallel::backward(const Tensor& grad_output) {
  if (!in_pass_) begin_pass();
  const Tensor& gin = module_.backward(grad_output);
  stats_.backward_seconds = seconds_since(pass_start_);
  stats_.buckets_in_backward = next_launch_;
  finish();
  return gin;
}

void DataParallel::finish() {
  const auto t0 = Clock::now();
  if (!in_pass_) begin_pass();
  for (auto& s : slots_) mark_ready(s);  // parameters the hook never reported
  launch_ready_buckets();
  const auto tw = Clock::now();
#if HERD_HAVE_CUDA
  if (on_device_) {
    // Device path: the nn stream waits for every all-reduce, then averages and copies
    // back; no host wait. The requests are dropped without blocking (an NCCL request's
    // completion is ordered on the communicator's stream, which done_event_ covers), and
    // the stall of the nn stream is timed by events around its wait.
    HERD_CUDA_CHECK(cudaEventRecord(done_event_, comm_stream_));
    HERD_CUDA_CHECK(cudaEventRecord(wait_begin_, nn_stream_));
    HERD_CUDA_CHECK(cudaStreamWaitEvent(nn_stream_, done_event_, 0));
    HERD_CUDA_CHECK(cudaEventRecord(wait_end_, nn_stream_));
    for (auto& b : buckets_) b.request.reset();
    stats_.wait_seconds = std::numeric_limits<double>::quiet_NaN();
    stats_.wait_on_device = true;
    wait_pending_ = true;
    detail::DevGuard guard(module_.device());
    const double inv = 1.0 / comm_.size();
    const auto n = flat_dev_.numel();
    if (dtype_ == DType::kFloat64) cuda::scale(flat_dev_.data<double>(), inv, n, nn_stream_);
    else cuda::scale(flat_dev_.data<float>(), inv, n, nn_stream_);
    for (const auto& s : slots_) {
      if (s.count == 0) continue;
      HERD_CUDA_CHECK(cudaMemcpyAsync(s.param->grad.raw(),
                                      static_cast<const unsigned char*>(flat_dev_.raw()) + s.offset * elem_size_,
                                      s.count * elem_size_, cudaMemcpyDeviceToDevice, nn_stream_));
    }
    in_pass_ = false;
    stats_.finish_seconds = seconds_since(t0);
    return;
  }
#endif
  for (auto& b : buckets_) {
    if (b.request) b.request->wait();
    b.request.reset();
  }
  stats_.wait_seconds = seconds_since(tw);
  const double inv = 1.0 / comm_.size();
  for (const auto& s : slots_) {
    if (s.count == 0) continue;
    const unsigned char* src = flat_.data() + s.offset * elem_size_;
    if (dtype_ == DType::kFloat64) {
      const auto* f = reinterpret_cast<const double*>(src);
      double* g = s.param->grad.data<double>();
      for (std::size_t i = 0; i < s.count; ++i) g[i] = f[i] * inv;
    } else {
      const auto* f = reinterpret_cast<const float*>(src);
      float* g = s.param->grad.data<float>();
      const auto invf = static_cast<float>(inv);
      for (std::size_t i = 0; i < s.count; ++i) g[i] = f[i] * invf;
    }
  }
  in_pass_ = false;
  stats_.finish_seconds = seconds_since(t0);
}

}  // namespace herd::nn
