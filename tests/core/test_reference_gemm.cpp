// The host backend's reference GEMM has cuBLAS's argument semantics: column-major storage,
// transposes, leading dimensions larger than the rows, alpha/beta, beta == 0 not reading C,
// alpha == 0 not reading A and B, and cuBLAS's invalid-argument rules.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/reference_gemm.hpp"

using herd::gpu::gemm_invalid_argument;
using herd::gpu::GemmOp;
using herd::gpu::reference_gemm;

namespace {

// Dense row-major r x c matrix, for the naive product.
struct Dense {
  std::int64_t r, c;
  std::vector<double> v;
  double& operator()(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * c + j)]; }
};

double value(int seed, std::int64_t i, std::int64_t j) {
  return std::sin(0.37 * static_cast<double>(seed) + 1.3 * static_cast<double>(i) + 0.71 * static_cast<double>(j));
}

// A column-major stored matrix of `rows x cols` with leading dimension ld; padding rows hold
// a sentinel that must never matter.
std::vector<double> stored(int seed, std::int64_t rows, std::int64_t cols, std::int64_t ld, double pad) {
  std::vector<double> s(static_cast<std::size_t>(ld * cols), pad);
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) s[static_cast<std::size_t>(i + j * ld)] = value(seed, i, j);
  return s;
}

// op(X) as a dense matrix, read from the column-major storage the naive way.
Dense op_of(const std::vector<double>& s, GemmOp op, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  // stored matrix is rows x cols; op(X) is rows x cols for kN, cols x rows for kT
  Dense d{op == GemmOp::kN ? rows : cols, op == GemmOp::kN ? cols : rows, {}};
  d.v.assign(static_cast<std::size_t>(d.r * d.c), 0.0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double x = s[static_cast<std::size_t>(i + j * ld)];
      if (op == GemmOp::kN) d(i, j) = x;
      else d(j, i) = x;
    }
  return d;
}

}  // namespace

TEST_CASE("reference GEMM equals a naive triple loop for every transpose and ld > rows", "[core][gemm]") {
  const GemmOp ta = GENERATE(GemmOp::kN, GemmOp::kT);
  const GemmOp tb = GENERATE(GemmOp::kN, GemmOp::kT);
  const std::int64_t m = 5, n = 3, k = 4;
  const double alpha = GENERATE(1.0, -0.75);
  const double beta = GENERATE(0.0, 1.0, 0.5);
  // Stored shapes: A is m x k (kN) or k x m (kT); B is k x n (kN) or n x k (kT).
  const std::int64_t ar = ta == GemmOp::kN ? m : k, ac = ta == GemmOp::kN ? k : m;
  const std::int64_t br = tb == GemmOp::kN ? k : n, bc = tb == GemmOp::kN ? n : k;
  const std::int64_t lda = ar + 2, ldb = br + 3, ldc = m + 1;
  const double pad = 1e30;
  const auto A = stored(1, ar, ac, lda, pad);
  const auto B = stored(2, br, bc, ldb, pad);
  auto C = stored(3, m, n, ldc, pad);
  const auto C0 = C;
  REQUIRE(std::string(gemm_invalid_argument(ta, tb, m, n, k, lda, ldb, ldc)).empty());
  reference_gemm<double>(ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);

  Dense oa = op_of(A, ta, ar, ac, lda), ob = op_of(B, tb, br, bc, ldb);
  REQUIRE(oa.r == m);
  REQUIRE(oa.c == k);
  REQUIRE(ob.r == k);
  REQUIRE(ob.c == n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t l = 0; l < k; ++l) s += oa(i, l) * ob(l, j);
      const double expect = alpha * s + beta * C0[static_cast<std::size_t>(i + j * ldc)];
      CHECK(C[static_cast<std::size_t>(i + j * ldc)] == Approx(expect).epsilon(1e-14).margin(1e-14));
    }
  // The padding rows of C (ld > m) are never written.
  for (std::int64_t j = 0; j < n; ++j) CHECK(C[static_cast<std::size_t>(m + j * ldc)] == pad);
}

TEST_CASE("reference GEMM: beta == 0 ignores C, alpha == 0 ignores A and B, empty shapes", "[core][gemm]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // C full of NaN with beta == 0: the result is alpha A B, as cuBLAS.
  std::vector<double> A = {1, 2, 3, 4};  // 2 x 2 column-major: [[1, 3], [2, 4]]
  std::vector<double> B = {5, 6, 7, 8};  // [[5, 7], [6, 8]]
  std::vector<double> C(4, nan);
  reference_gemm<double>(GemmOp::kN, GemmOp::kN, 2, 2, 2, 1.0, A.data(), 2, B.data(), 2, 0.0, C.data(), 2);
  CHECK(C == std::vector<double>{23, 34, 31, 46});
  // A and B full of NaN with alpha == 0: C = beta C.
  std::vector<double> An(4, nan), Bn(4, nan), C2 = {1, 2, 3, 4};
  reference_gemm<double>(GemmOp::kT, GemmOp::kN, 2, 2, 2, 0.0, An.data(), 2, Bn.data(), 2, 2.0, C2.data(), 2);
  CHECK(C2 == std::vector<double>{2, 4, 6, 8});
  // k == 0: C = beta C (no products), A and B not read.
  std::vector<double> C3 = {1, 2, 3, 4};
  reference_gemm<double>(GemmOp::kN, GemmOp::kN, 2, 2, 0, 1.0, nullptr, 2, nullptr, 1, 0.5, C3.data(), 2);
  CHECK(C3 == std::vector<double>{0.5, 1, 1.5, 2});
  // m == 0: nothing is touched.
  reference_gemm<double>(GemmOp::kN, GemmOp::kN, 0, 2, 2, 1.0, nullptr, 1, nullptr, 2, 0.0, nullptr, 1);
  // float, transposed B: C (1 x 2) = [1 2] * [[3, 4], [5, 6]]^T = [11, 17]
  std::vector<float> a = {1, 2}, b = {3, 5, 4, 6}, c(2, 0.f);
  reference_gemm<float>(GemmOp::kN, GemmOp::kT, 1, 2, 2, 1.f, a.data(), 1, b.data(), 2, 0.f, c.data(), 1);
  CHECK(c == std::vector<float>{11.f, 17.f});
}

TEST_CASE("reference GEMM: cuBLAS's invalid arguments are named", "[core][gemm]") {
  using std::string;
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, -1, 2, 2, 2, 2, 2)) == "m");
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 2, -1, 2, 2, 2, 2)) == "n");
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 2, 2, -1, 2, 2, 2)) == "k");
  // lda must cover the stored rows: m for kN, k for kT.
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 5, 2, 3, 4, 3, 5)) == "lda");
  CHECK(string(gemm_invalid_argument(GemmOp::kT, GemmOp::kN, 5, 2, 3, 3, 3, 5)).empty());
  CHECK(string(gemm_invalid_argument(GemmOp::kT, GemmOp::kN, 5, 2, 3, 2, 3, 5)) == "lda");
  // ldb: k for kN, n for kT.
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 5, 2, 3, 5, 2, 5)) == "ldb");
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kT, 5, 2, 3, 5, 2, 5)).empty());
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kT, 5, 4, 3, 5, 3, 5)) == "ldb");
  // ldc >= max(1, m), also for m == 0.
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 5, 2, 3, 5, 3, 4)) == "ldc");
  CHECK(string(gemm_invalid_argument(GemmOp::kN, GemmOp::kN, 0, 2, 3, 1, 3, 0)) == "ldc");
}
