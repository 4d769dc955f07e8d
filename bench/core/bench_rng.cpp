// RNG throughput: one Philox4x32-10 block, uniforms, normals (DESIGN.md §4 "normals are the
// hot spot"), against std::mt19937_64 + std::normal_distribution as the same-run baseline.
#include <random>

#include <benchmark/benchmark.h>

#include "herd/core/philox_lanes.hpp"
#include "herd/core/rng.hpp"
#include "herd/core/ziggurat.hpp"

static void BM_philox_block(benchmark::State& st) {
  const herd::RngStream s(1, 2, herd::RngPurpose::kProposal);
  std::uint64_t i = 0;
  for (auto _ : st) benchmark::DoNotOptimize(s.block(i++));
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_philox_block);

// Sixteen consecutive indices' block 0 at once (AVX-512/AVX2 lanes); items are blocks.
static void BM_philox_blocks_by_index_16(benchmark::State& st) {
  const herd::RngStream s(1, 2, herd::RngPurpose::kProposal);
  std::uint64_t i = 0;
  std::uint32_t out[64];
  for (auto _ : st) {
    herd::philox_blocks_by_index(s, i, 0, 16, out);
    i += 16;
    benchmark::DoNotOptimize(out);
  }
  st.SetItemsProcessed(st.iterations() * 16);
  st.SetLabel("width " + std::to_string(herd::philox_lanes_width()));
}
BENCHMARK(BM_philox_blocks_by_index_16);

static void BM_uniform(benchmark::State& st) {
  const herd::RngStream s(1, 2, herd::RngPurpose::kAcceptance);
  std::uint64_t i = 0;
  for (auto _ : st) benchmark::DoNotOptimize(s.uniform(i++));
  st.SetItemsProcessed(st.iterations());
}
BENCHMARK(BM_uniform);

// Ten normals per index, as one 10-D proposal.
static void BM_normals_10d(benchmark::State& st) {
  const herd::RngStream s(1, 2, herd::RngPurpose::kProposal);
  std::uint64_t i = 0;
  double z[10];
  for (auto _ : st) {
    auto c = s.at(i++);
    c.normals(z, 10);
    benchmark::DoNotOptimize(z);
  }
  st.SetItemsProcessed(st.iterations() * 10);
}
BENCHMARK(BM_normals_10d);

// Ten ziggurat normals per index (herd/core/ziggurat.hpp), the sampler's generator.
static void BM_ziggurat_normals_10d(benchmark::State& st) {
  const herd::RngStream s(1, 2, herd::RngPurpose::kProposal);
  const auto& t = herd::ziggurat_tables();
  std::uint64_t i = 0;
  double z[10];
  for (auto _ : st) {
    auto c = s.at(i++);
    herd::ziggurat_normals(c, t, z, 10);
    benchmark::DoNotOptimize(z);
  }
  st.SetItemsProcessed(st.iterations() * 10);
}
BENCHMARK(BM_ziggurat_normals_10d);

static void BM_baseline_mt19937_normals_10d(benchmark::State& st) {
  std::mt19937_64 g(1);
  std::normal_distribution<double> nd;
  double z[10];
  for (auto _ : st) {
    for (double& v : z) v = nd(g);
    benchmark::DoNotOptimize(z);
  }
  st.SetItemsProcessed(st.iterations() * 10);
}
BENCHMARK(BM_baseline_mt19937_normals_10d);

BENCHMARK_MAIN();
