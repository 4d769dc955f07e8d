// [slow] The DRAM sampler, through the whole herd-sample pipeline (specifications, kernel,
// burn-in, post-burn-in verbose chain, diagnostics), passes the validation rule of
// shared/validation/README.md on all six posteriordb posteriors:
//   |mean - ref_mean| <= 4 sqrt(mcse_mean^2 + ref_mcse_mean^2),
//   |sd - ref_sd|     <= 4 mcse_sd + 0.02 ref_sd,
//   bulk-ESS >= 1000,
// for every reference quantity. Seeds are fixed before looking at results. With 4-sigma
// bounds each check fails by chance with probability ~6e-5 when the MCSE estimates are
// right; over the 2 x 44 mean/sd checks the false-failure rate is below 1%.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "herd/examples/posteriordb.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct ModelRun {
  const char* name;
  std::int64_t chain_size;
  std::uint64_t seed;
};

}  // namespace

TEST_CASE("DRAM passes the posteriordb validation rule on six posteriors", "[slow][examples][mcmc]") {
  // Chain sizes (accepted states) give a bulk-ESS of several thousand; the seeds were fixed
  // when the test was written.
  const ModelRun runs[] = {
      {"kidscore_interaction", 20000, 101},
      {"arK", 30000, 102},
      {"eight_schools_noncentered", 60000, 103},
      {"garch11", 20000, 104},
      {"gp_pois_regr", 120000, 105},
      {"low_dim_gauss_mix", 15000, 106},
  };
  const fs::path work = fs::path(HERD_TEST_WORK_DIR) / "posteriordb_validation";
  fs::remove_all(work);
  for (const auto& run : runs) {
    auto model = std::shared_ptr<herd::examples::PosteriorModel>(herd::examples::make_model(run.name));
    std::ifstream in(std::string(HERD_TEST_DATA_DIR) + "/posteriordb/" + model->posteriordb_name() + ".json");
    const json ref = json::parse(in);

    herd::io::Schema schema("validation");
    herd::mcmc::declare_sampler_specs(schema);
    herd::io::Config config("validation");
    std::vector<std::string> sets = {"chain_size=" + std::to_string(run.chain_size),
                                     "random_seed=" + std::to_string(run.seed),
                                     "output_prefix=" + (work / run.name).string(), "sample_refinement_count=0"};
    // Start at the first reference check point (a typical point, as a user starting from an
    // optimum would) with a proposal of standard deviation 0.1 in every coordinate, which then
    // adapts.
    std::string sp = "start_point=[";
    for (const auto& v : ref["logp_checks"]["points"][0]["u"]) sp += fmt::format("{:.17g},", v.get<double>());
    sp.back() = ']';
    sets.push_back(sp);
    std::string ps = "proposal_std=[";
    for (int i = 0; i < model->dim(); ++i) ps += "0.1,";
    ps.back() = ']';
    sets.push_back(ps);
    const auto settings = schema.apply(config, sets);

    herd::mcmc::SampleTarget target;
    target.ndim = model->dim();
    target.log_density = [model](const double* x, int) { return model->log_density(x); };
    target.names = model->coordinate_names();
    target.quantity_names = model->quantity_names();
    target.quantities = [model](const double* x, double* q) { model->quantities(x, q); };
    target.description = run.name;
    const auto specs = herd::mcmc::resolve_sampler_specs(settings, target.ndim, target.names);
    herd::mcmc::prepare_outputs(specs);
    herd::mcmc::SampleRunOptions opts;
    opts.quiet = true;
    const auto result = herd::mcmc::run_paradram(specs, target, opts);

    const auto names = ref["param_names"].get<std::vector<std::string>>();
    for (const auto& q : names) {
      INFO(run.name << " " << q << " (" << result.kernel.proposals << " steps, " << result.seconds << " s)");
      const auto it = std::find_if(result.summary.begin(), result.summary.end(),
                                   [&](const herd::mcmc::QuantitySummary& s) { return s.name == q; });
      REQUIRE(it != result.summary.end());
      const auto& s = it->stats;
      const double ref_mean = ref["ref_mean"][q].get<double>(), ref_sd = ref["ref_sd"][q].get<double>();
      const double ref_mcse = ref["ref_mcse_mean"][q].get<double>();
      INFO("mean " << s.mean << " ref " << ref_mean << " mcse " << s.mcse_mean << "; sd " << s.sd << " ref " << ref_sd
                   << " mcse_sd " << s.mcse_sd << "; ess_bulk " << s.ess_bulk);
      CHECK(std::abs(s.mean - ref_mean) <= 4.0 * std::sqrt(s.mcse_mean * s.mcse_mean + ref_mcse * ref_mcse));
      CHECK(std::abs(s.sd - ref_sd) <= 4.0 * s.mcse_sd + 0.02 * ref_sd);
      CHECK(s.ess_bulk >= 1000.0);
    }
  }
}
