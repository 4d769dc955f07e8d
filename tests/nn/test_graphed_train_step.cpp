// GraphedTrainStep on the host ([nn]): every step is the eager step, bit-identical to the
// same calls written out; bad inputs are InputErrors. The CUDA-graph path is tested in
// test_graphed_train_step_gpu.cpp.
#include <catch2/catch.hpp>

#include <vector>

#include "herd/core/rng.hpp"
#include "herd/nn/graphed_train_step.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd;
using namespace herd::nn;

namespace {
Tensor rand_host(const Shape& s, DType dt, std::uint32_t stream) {
  RngCursor c = RngStream(5, stream, RngPurpose::kUser).at(0);
  Tensor t(s, dt);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, c.normal());
  return t;
}
}  // namespace

TEST_CASE("GraphedTrainStep on the host equals the written-out step bit for bit", "[nn]") {
  const DType dt = GENERATE(DType::kFloat32, DType::kFloat64);
  MlpOptions o;
  o.sizes = {5, 16, 3};
  o.dtype = dt;
  o.activation = Activation::kTanh;
  Mlp a(o), b(o);
  Adam oa(a.named_parameters(), 1e-2), ob(b.named_parameters(), 1e-2);
  MseLoss la, lb;
  GraphedTrainStep step(b, lb, ob);
  for (int s = 0; s < 6; ++s) {
    const std::int64_t batch = s < 3 ? 8 : 3;  // a shape change on the way
    const Tensor x = rand_host({batch, 5}, dt, 10 + static_cast<std::uint32_t>(s));
    const Tensor y = rand_host({batch, 3}, dt, 20 + static_cast<std::uint32_t>(s));
    oa.zero_grad();
    const double want = la.forward(a.forward(x), y);
    a.backward(la.backward());
    oa.step();
    const LossValue got = step.step(x, y);
    CHECK(got.ready());
    CHECK(got.value() == want);
    CHECK(fmt::format("{:.6f}", got) == fmt::format("{:.6f}", want));  // formats as its double
  }
  CHECK(step.eager_steps() == 6);
  CHECK(step.graph_steps() == 0);
  CHECK_FALSE(step.captured());
  CHECK(ob.steps() == 6);
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pb[i].param->value.to_vector() == pa[i].param->value.to_vector());
  // A dtype mismatch is an InputError naming the step.
  const DType other = dt == DType::kFloat32 ? DType::kFloat64 : DType::kFloat32;
  CHECK_THROWS_WITH(step.step(Tensor({2, 5}, other), Tensor({2, 3}, other)),
                    Catch::Contains("GraphedTrainStep") && Catch::Contains(dtype_name(dt)));
  CHECK_THROWS_AS(step.step(Tensor({2, 4}, dt), Tensor({2, 3}, dt)), InputError);
  // A model wrapped by DataParallel (a grad-ready hook) is refused: the step would skip
  // DataParallel::finish and train on unreduced gradients.
  b.set_grad_ready_hook([](Parameter&) {});
  const auto steps_before = ob.steps();
  CHECK_THROWS_WITH(step.step(rand_host({2, 5}, dt, 1), rand_host({2, 3}, dt, 2)), Catch::Contains("DataParallel"));
  CHECK(ob.steps() == steps_before);  // nothing ran
  b.set_grad_ready_hook({});
  CHECK_NOTHROW(step.step(rand_host({2, 5}, dt, 1), rand_host({2, 3}, dt, 2)));
}
