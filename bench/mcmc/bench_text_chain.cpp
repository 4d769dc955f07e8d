// Text chain formatting benchmark: the writer thread's work per row of ParaDRAM's compact
// text chain (mcmc/run/text_chain.cpp), without the file. Rows like the reference run's
// (paradram_gauss10.c): 10 standard-normal coordinates, a log density about -5, a mean
// acceptance rate in (0, 1), an adaptation measure that is zero in 92% of the rows, weights
// 1..10. Reports the thread CPU time per real formatted by `format_scientific` (or
// std::to_chars where it declines) and per row by `write_chain_row` into a 64 KiB buffer (as the writer thread), at
// precision 8 and 17; the median of `repeats` passes. Prints one JSON object.
//
// Usage: bench_text_chain [rows=1000000] [repeats=5]
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "real_format.hpp"  // mcmc/run/
#include "text_chain.hpp"   // mcmc/run/

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace herd::mcmc;
  const std::size_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  constexpr int kDim = 10;
  std::mt19937_64 g(1001);
  std::normal_distribution<double> z;
  std::uniform_real_distribution<double> u;
  std::vector<double> points(rows * kDim);
  std::vector<ChainRecord> recs(rows);
  std::uint64_t step = 0;
  for (std::size_t i = 0; i < rows; ++i) {
    for (int k = 0; k < kDim; ++k) points[i * kDim + static_cast<std::size_t>(k)] = z(g);
    ChainRecord& r = recs[i];
    r.weight = 1 + static_cast<std::int64_t>(g() % 10);
    step += static_cast<std::uint64_t>(r.weight) * 3;
    r.step = step;
    r.log_density = -5.0 + 2.0 * z(g);
    r.dr_stage = static_cast<std::int32_t>(1 + g() % 2);
    r.adapt_measure = u(g) < 0.92 ? 0.0 : u(g) * 1e-2;
    r.point = &points[i * kDim];
    r.ndim = kDim;
  }
  std::printf("{\"rows\": %zu", rows);
  for (const int precision : {8, 17}) {
    // Reals alone: the 13 of each row.
    std::vector<double> reals;
    reals.reserve(rows * 13);
    for (std::size_t i = 0; i < rows; ++i) {
      reals.push_back(static_cast<double>(i) / static_cast<double>(recs[i].step));
      reals.push_back(recs[i].adapt_measure);
      reals.push_back(recs[i].log_density);
      for (int k = 0; k < kDim; ++k) reals.push_back(recs[i].point[k]);
    }
    std::vector<double> per_real, per_row;
    std::size_t bytes = 0;
    for (int rep = 0; rep < repeats; ++rep) {
      char buf[64];
      std::size_t sum = 0;
      double t = thread_cpu_seconds();
      for (const double v : reals) {
        char* end = detail::format_scientific(buf, v, precision);
        if (end == nullptr)
          end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, precision - 1).ptr;
        sum += static_cast<std::size_t>(end - buf) + static_cast<unsigned char>(buf[1]);
      }
      per_real.push_back((thread_cpu_seconds() - t) / static_cast<double>(reals.size()) * 1e9);
      SamplerSpecs specs;
      specs.chain_file_format = "compact";
      for (int k = 0; k < kDim; ++k) {
        char name[16];
        std::snprintf(name, sizeof name, "x%d", k + 1);
        specs.variable_names.emplace_back(name);
      }
      const detail::TextFormat tf{",", precision, 0};
      detail::RunningBurnin burnin;
      bytes = 0;
      t = thread_cpu_seconds();
      // As the writer thread: rows formatted in place into a 64 KiB buffer.
      constexpr std::size_t kChunk = std::size_t{64} << 10;
      std::vector<char> text(kChunk + detail::chain_row_bytes(tf, kDim));
      std::size_t used = 0;
      for (std::size_t i = 0; i < rows; ++i) {
        used =
            static_cast<std::size_t>(detail::write_chain_row(text.data() + used, tf, burnin,
                                                             static_cast<std::int64_t>(i), recs[i], recs[i].weight, 1) -
                                     text.data());
        if (used >= kChunk) {
          bytes += used;
          used = 0;
        }
      }
      bytes += used;
      per_row.push_back((thread_cpu_seconds() - t) / static_cast<double>(rows) * 1e9);
      if (sum == 0) std::puts("");
    }
    std::printf(", \"p%d\": {\"ns_per_real\": %.2f, \"ns_per_row\": %.1f, \"bytes\": %zu}", precision, median(per_real),
                median(per_row), bytes);
  }
  std::printf("}\n");
  return 0;
}
