#pragma once
/// @file sequential.hpp
/// `Sequential`: a chain of modules run in order (PyTorch `nn.Sequential`; children are
/// named "0", "1", ..., so parameter names match PyTorch's, e.g. "0.weight").

#include <memory>
#include <vector>

#include "herd/nn/module.hpp"

namespace herd::nn {

/// Runs its children in order in `forward` and in reverse in `backward`; owns them.
/// Host or CUDA device (children on the container's device); thread-safety as `Module`.
class Sequential : public Module {
 public:
  /// An empty container for children of `dtype` on `device`.
  explicit Sequential(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}

  /// Appends `m` (named by its position) and returns it.
  /// @throws InputError when its dtype or device differs from this container's.
  Module& add(std::unique_ptr<Module> m);
  /// Constructs a `M(args...)` in place and appends it.
  template <class M, class... Args>
  M& emplace(Args&&... args) {
    return static_cast<M&>(add(std::make_unique<M>(std::forward<Args>(args)...)));
  }

  /// Number of children.
  std::size_t size() const { return layers_.size(); }
  /// Child `i`. @throws std::out_of_range past the end.
  Module& operator[](std::size_t i) { return *layers_.at(i); }

  /// @throws InputError when empty or a child rejects its input.
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Sequential"; }
  /// Applies to the first child (later children always pass gradients on).
  void set_input_grad(bool on) override;

 private:
  std::vector<std::unique_ptr<Module>> layers_;
  Tensor last_output_;  // a handle on the last forward's output (to recognise it as an input)
  Tensor input_copy_;   // the input, copied when it is that output
};

}  // namespace herd::nn
