#include "herd/nn/sequential.hpp"

#include <string>

#include "cpu_compute.hpp"

namespace herd::nn {

Module& Sequential::add(std::unique_ptr<Module> m) {
  HERD_REQUIRE(m != nullptr, "nn::Sequential::add: module is null");
  HERD_REQUIRE(m->dtype() == dtype() && m->device() == device(),
               "nn::Sequential::add: {} is {} on {}, but the container is {} on {}", m->type_name(),
               dtype_name(m->dtype()), m->device().str(), dtype_name(dtype()), device().str());
  if (layers_.empty()) m->set_input_grad(input_grad());
  layers_.push_back(std::move(m));
  register_module(std::to_string(layers_.size() - 1), layers_.back().get());
  return *layers_.back();
}

void Sequential::set_input_grad(bool on) {
  Module::set_input_grad(on);
  if (!layers_.empty()) layers_.front()->set_input_grad(on);
}

const Tensor& Sequential::forward(const Tensor& x) {
  HERD_REQUIRE(!layers_.empty(), "nn::Sequential::forward: the container is empty");
  const Tensor* h = &x;
  // Fed its own last output (or a view of it) back in: the last child would overwrite that
  // input while the first child still needs it (for this forward's reads and for
  // backward), so the chain runs on a copy.
  if (detail::overlaps(x, last_output_)) {
    input_copy_.resize_like(x);
    input_copy_.copy_from(x);
    h = &input_copy_;
  }
  for (auto& l : layers_) h = &l->forward(*h);
  last_output_ = *h;
  return *h;
}

const Tensor& Sequential::backward(const Tensor& g) {
  HERD_REQUIRE(!layers_.empty(), "nn::Sequential::backward: the container is empty");
  const Tensor* h = &g;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    h = &(*it)->backward(*h);
    (*it)->notify_grads_ready();
  }
  return *h;
}

}  // namespace herd::nn
