#include "herd/nn/module.hpp"

#include <set>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"

namespace herd::nn {

namespace {

// Validates names and shapes, then copies `state` into `targets` (load_state_dict).
void load_named(const std::vector<NamedParameter>& targets, const std::vector<NamedTensor>& state, bool strict,
                const char* who) {
  std::set<std::string> wanted;
  for (const auto& t : targets) wanted.insert(t.name);
  if (strict) {
    for (const auto& s : state)
      HERD_REQUIRE(wanted.count(s.name), "{}: state has '{}' (shape {}), which the model does not have", who, s.name,
                   s.tensor.shape().str());
  }
  // Validate everything before copying anything.
  std::vector<const Tensor*> src(targets.size(), nullptr);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    for (const auto& s : state)
      if (s.name == targets[i].name) src[i] = &s.tensor;
    HERD_REQUIRE(src[i] != nullptr, "{}: the model's '{}' (shape {}) is missing from the state", who, targets[i].name,
                 targets[i].param->value.shape().str());
    HERD_REQUIRE(src[i]->shape() == targets[i].param->value.shape(),
                 "{}: '{}' has shape {} in the model but {} in the state", who, targets[i].name,
                 targets[i].param->value.shape().str(), src[i]->shape().str());
    HERD_REQUIRE(src[i]->dtype() != DType::kInt64, "{}: '{}' is int64 in the state, but must be float32 or float64",
                 who, targets[i].name);
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    Tensor& v = targets[i].param->value;
    // Copies to or from a device need one dtype: convert on the host first.
    if ((v.is_cuda() || src[i]->is_cuda()) && src[i]->dtype() != v.dtype())
      v.copy_from(src[i]->to(Device::cpu()).to(v.dtype()));
    else v.copy_from(*src[i]);
  }
}

}  // namespace

Module::Module(DType dtype, Device device) : dtype_(dtype), device_(device) {
  HERD_REQUIRE(dtype != DType::kInt64, "nn::Module: dtype is int64, but must be float32 or float64");
#if HERD_HAVE_CUDA
  HERD_REQUIRE(device.is_cpu() || device.is_cuda(), "nn::Module: device {} is not supported", device.str());
#else
  HERD_REQUIRE(device.is_cpu(),
               "nn::Module: device {} needs the CUDA backend, which this build lacks (configure "
               "with CUDA, see docs/nn.md)",
               device.str());
#endif
}

Module::~Module() = default;

Parameter& Module::register_parameter(const std::string& name, const Shape& shape) {
  auto p = std::make_unique<Parameter>();
  p->value = Tensor(shape, dtype_, device_);
  p->grad = Tensor(shape, dtype_, device_);
  params_.emplace_back(name, std::move(p));
  return *params_.back().second;
}

void Module::register_module(const std::string& name, Module* child) { children_.emplace_back(name, child); }

void Module::collect(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (auto& [n, p] : params_) out.push_back({prefix + n, p.get()});
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", out);
}

std::vector<NamedParameter> Module::named_parameters() {
  std::vector<NamedParameter> out;
  collect("", out);
  return out;
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  for (auto& np : named_parameters()) out.push_back(np.param);
  return out;
}

std::int64_t Module::parameter_count() {
  std::int64_t n = 0;
  for (auto& np : named_parameters()) n += np.param->value.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& [n, p] : params_) p->grad.zero();
  for (auto& [n, c] : children_) c->zero_grad();
}

void Module::set_grad_ready_hook(GradReadyHook hook) {
  for (auto& [n, c] : children_) c->set_grad_ready_hook(hook);
  grad_ready_hook_ = std::move(hook);
}

void Module::notify_grads_ready() {
  if (!grad_ready_hook_) return;
  auto params = parameters();
  for (auto it = params.rbegin(); it != params.rend(); ++it) grad_ready_hook_(**it);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

std::vector<NamedTensor> Module::state_dict() {
  std::vector<NamedTensor> out;
  for (auto& np : named_parameters()) out.push_back({np.name, np.param->value.clone()});
  return out;
}

void Module::load_state_dict(const std::vector<NamedTensor>& state, bool strict) {
  load_named(named_parameters(), state, strict, "nn::Module::load_state_dict");
}

void Module::check_input(const Tensor& x, int ndim, const char* who, const char* what) const {
  HERD_REQUIRE(x.defined(), "{}: {} is an undefined tensor", who, what);
  HERD_REQUIRE(x.dtype() == dtype_, "{}: {} is {}, but the module is {}", who, what, dtype_name(x.dtype()),
               dtype_name(dtype_));
  HERD_REQUIRE(x.device() == device_, "{}: {} is on {}, but the module is on {}", who, what, x.device().str(),
               device_.str());
  HERD_REQUIRE(ndim < 0 || x.ndim() == ndim, "{}: {} has shape {}, but must have {} dimensions", who, what,
               x.shape().str(), ndim);
}

void set_num_threads(int n) {
  HERD_REQUIRE(n >= 1, "nn::set_num_threads: n is {}, but must be at least 1", n);
  detail::set_pool_threads(n);
}

int num_threads() { return detail::pool_threads(); }

}  // namespace herd::nn
