// Steady-state forward/backward/Adam steps allocate nothing (small RL minibatches
// are dominated by overhead). Counts calls of malloc (which Eigen, operator new and
// shared_ptr all reach on glibc) by interposing it in this executable.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/distributions.hpp"
#include "herd/nn/layer_norm.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

// Sanitizers interpose malloc themselves; there the counts stay 0 and the test is vacuous.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
#define HERD_TEST_NO_MALLOC_HOOK 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HERD_TEST_NO_MALLOC_HOOK 1
#endif

namespace {
std::atomic<long> g_mallocs{0};
std::atomic<bool> g_counting{false};
}  // namespace
#if !defined(HERD_TEST_NO_MALLOC_HOOK) && defined(__GLIBC__)
// glibc's own allocator, which the hook below calls; the reserved name is glibc's.
extern "C" void* __libc_malloc(std::size_t);  // NOLINT(bugprone-reserved-identifier)
extern "C" void* malloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_mallocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
#endif

using namespace herd;
using namespace herd::nn;

namespace {
Tensor filled(const Shape& s, std::uint32_t stream) {
  Tensor t(s, DType::kFloat32);
  RngCursor c = RngStream(1, stream, RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, c.normal());
  return t;
}

template <class Model>
long mallocs_per_step(Model& net, const Tensor& x, const Tensor& y) {
  Adam adam(net.named_parameters(), 1e-3);
  MseLoss mse;
  auto step = [&] {
    adam.zero_grad();
    mse.forward(net.forward(x), y);
    net.backward(mse.backward());
    clip_grad_norm(net.parameters(), 1.0);
    adam.step();
  };
  step();
  step();
  std::vector<Parameter*> ps = net.parameters();  // allocate outside the counted region
  g_mallocs = 0;
  g_counting = true;
  adam.zero_grad();
  mse.forward(net.forward(x), y);
  net.backward(mse.backward());
  clip_grad_norm(ps, 1.0);
  adam.step();
  g_counting = false;
  return g_mallocs.load();
}
}  // namespace

TEST_CASE("the malloc counter works", "[nn]") {
#if !defined(HERD_TEST_NO_MALLOC_HOOK) && defined(__GLIBC__)
  g_mallocs = 0;
  g_counting = true;
  static std::vector<int>* volatile sink = nullptr;  // volatile: the allocation cannot be elided
  sink = new std::vector<int>(100);
  g_counting = false;
  delete sink;
  CHECK(g_mallocs.load() >= 2);
#endif
}

TEST_CASE("no allocation after the first call (1 thread)", "[nn]") {
  for (std::int64_t batch : {32, 256}) {
    MlpOptions o;
    o.sizes = {64, 256, 256, 16};
    Mlp mlp(o);
    CHECK(mallocs_per_step(mlp, filled({batch, 64}, 1), filled({batch, 16}, 2)) == 0);
  }
  Sequential net;
  net.emplace<Conv2d>(3, 8, 3, 3, 2, 1);
  net.emplace<ReLU>();
  net.emplace<Flatten>();
  net.emplace<Linear>(8 * 8 * 8, 16);
  net.emplace<LayerNorm>(16);
  net.emplace<ELU>();
  CHECK(mallocs_per_step(net, filled({5, 3, 16, 16}, 3), filled({5, 16}, 4)) == 0);
}

TEST_CASE("no allocation in steady-state PPO-style head updates", "[nn]") {
  MlpOptions o;
  o.sizes = {8, 32, 4};
  Mlp pi(o);
  Gaussian head(4);
  Categorical cat;
  const Tensor obs = filled({64, 8}, 5), act = filled({64, 4}, 6), weights = filled({64}, 7);
  Tensor disc_actions, sampled;
  const RngStream rng(1, 0, RngPurpose::kPolicy);
  auto step = [&](std::uint64_t k) {
    pi.zero_grad();
    head.zero_grad();
    const Tensor& mean = head.forward(pi.forward(obs));
    head.log_prob(act);
    head.entropy();
    head.sample(rng, k, sampled);
    head.backward_log_prob(weights);
    head.backward_entropy(weights);
    pi.backward(head.backward(mean));  // any downstream gradient of the mean's shape
    cat.set_logits(pi.forward(obs));
    cat.sample(rng, k, disc_actions);
    cat.log_prob(disc_actions);
    cat.entropy();
    cat.backward_log_prob(weights);
    cat.backward_entropy(weights);
    pi.backward(cat.grad_logits());
  };
  step(0);
  step(1);
  g_mallocs = 0;
  g_counting = true;
  step(2);
  g_counting = false;
  CHECK(g_mallocs.load() == 0);
}
