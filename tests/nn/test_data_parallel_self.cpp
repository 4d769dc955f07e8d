// DataParallel on one rank (SelfCommunicator): no MPI needed. The gradients are the local
// ones, the bucket plan covers every element once, and the hook is removed on destruction.
#include <catch2/catch.hpp>

#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd;
using namespace herd::nn;

TEST_CASE("DataParallel on one rank: gradients unchanged, buckets cover the parameters", "[nn]") {
  MlpOptions o;
  o.sizes = {3, 11, 7, 2};
  o.dtype = DType::kFloat64;
  Mlp a(o), b(o);
  SelfCommunicator self;
  Tensor x({5, 3}, DType::kFloat64), y({5, 2}, DType::kFloat64);
  RngCursor c = RngStream(3, 0, RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, c.normal());
  for (std::int64_t i = 0; i < y.numel(); ++i) y.set_item(i, c.normal());
  MseLoss la, lb;
  la.forward(a.forward(x), y);
  a.backward(la.backward());
  {
    DataParallelOptions opt;
    opt.bucket_bytes = 10 * sizeof(double);
    DataParallel dp(b, self, opt);
    const std::size_t total = static_cast<std::size_t>(b.parameter_count());
    CHECK(dp.bucket_count() == (total + 9) / 10);
    for (std::size_t i = 0; i + 1 < dp.bucket_count(); ++i) CHECK(dp.bucket_elements(i) == 10);
    CHECK(dp.bucket_elements(dp.bucket_count() - 1) == total - 10 * (dp.bucket_count() - 1));
    lb.forward(dp.forward(x), y);
    dp.backward(lb.backward());
    CHECK(dp.stats().buckets_in_backward == dp.bucket_count());
    auto pa = a.parameters(), pb = b.parameters();
    for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pa[i]->grad.to_vector() == pb[i]->grad.to_vector());
  }
  // Hook removed: a plain backward afterwards still works and accumulates.
  lb.forward(b.forward(x), y);
  b.backward(lb.backward());
  CHECK(b.parameters()[0]->grad.item(0) == Approx(2 * a.parameters()[0]->grad.item(0)));
}
