// h5_posterior = "compact": herd-sample's `.h5` without the verbose `posterior` and
// `sample_stats` groups (the draws once, in `chain_compact`), for a single chain, a
// multi_chain run and a cpu_batched run; herd-diagnose reads such a file from
// `chain_compact` and prints the same table as for the verbose file of the same run; an
// `outputStatus = "extend"` run continues a compact file; the key in a &ParaDRAM namelist.
// (A bad value is a row of the bad-input catalogue, test_bad_input.cpp.)
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "app_runner.hpp"
#include "herd/io/hdf5.hpp"

namespace fs = std::filesystem;
using herd::io::H5File;
using herd::io::H5Group;
using herd::io::H5Kind;

namespace {

/// Every value of dataset `name` of `g` as text (numbers at full precision, strings as they
/// are), so that two datasets compare equal exactly when their values do.
std::vector<std::string> values_of(const H5Group& g, const std::string& name) {
  const auto ds = g.open_dataset(name);
  std::vector<std::string> out;
  if (ds.kind() == H5Kind::kString) return ds.read_strings();
  if (ds.kind() == H5Kind::kInteger) {
    for (auto v : ds.read<std::int64_t>()) out.push_back(std::to_string(v));
  } else {
    for (auto v : ds.read<double>()) out.push_back(fmt::format("{:.17g}", v));
  }
  return out;
}

/// herd-sample on `args` with `--set h5_posterior=<layout>` into `dir/<layout>`.
void sample(const fs::path& dir, const std::string& args, const std::string& layout) {
  const auto r = herd::testing::run_app(
      HERD_SAMPLE_EXE, dir, args + " --quiet --seed 11 --set h5_posterior=" + layout + " --output " + layout + "/run");
  INFO(r.err);
  REQUIRE(r.rc == 0);
}

/// The stdout of herd-diagnose on `file` (with `extra` options), which must succeed.
std::string diagnose(const fs::path& dir, const std::string& file, const std::string& extra = "") {
  const auto r = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, file + " " + extra);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return r.out;
}

/// Runs `args` verbose and compact, and checks the compact file against the verbose one.
void check_layouts(const std::string& name, const std::string& args, std::size_t chains) {
  const fs::path dir = herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name);
  sample(dir, args, "verbose");
  sample(dir, args, "compact");
  const H5File v = H5File::open((dir / "verbose" / "run.h5").string());
  const H5File c = H5File::open((dir / "compact" / "run.h5").string());
  // The verbose file is today's: posterior and sample_stats, no h5_posterior attribute.
  CHECK(v.root().contains("posterior"));
  CHECK(v.root().contains("sample_stats"));
  CHECK_FALSE(v.root().has_attribute("h5_posterior"));
  CHECK(v.root().open_group("input").attribute_string("h5_posterior") == "\"verbose\"");
  // The compact file: neither group, the root attribute says why; the other groups as before.
  CHECK_FALSE(c.root().contains("posterior"));
  CHECK_FALSE(c.root().contains("sample_stats"));
  CHECK(c.root().attribute_string("h5_posterior") == "compact");
  for (const char* group : {"chain_compact", "sample", "diagnostics"}) {
    const H5Group gv = v.root().open_group(group), gc = c.root().open_group(group);
    for (const auto& member : gv.members()) {
      INFO(group << "/" << member);
      REQUIRE(gc.contains(member));
      CHECK(values_of(gv, member) == values_of(gc, member));
    }
  }
  const H5Group cc = c.root().open_group("chain_compact");
  // Only the derived quantities (sigma of the default target), which the verbose file keeps
  // in posterior, are added: expanded by the weights after the burn-in and cut to the
  // posterior's length, chain by chain, they are posterior/sigma.
  CHECK(cc.members().size() == v.root().open_group("chain_compact").members().size() + 2);
  REQUIRE(cc.open_dataset("derived_quantity").read_strings() == std::vector<std::string>{"sigma"});
  const auto sigma = v.root().open_dataset("posterior/sigma");
  const auto post = sigma.read<double>();
  const std::size_t ndraw = sigma.shape().at(1);
  REQUIRE(sigma.shape().at(0) == chains);
  const auto q = cc.read<double>("derived_quantities");
  const auto w = cc.read<std::int64_t>("weight");
  std::vector<std::int64_t> chain(w.size(), 0), burnin(1, cc.attribute<std::int64_t>("burnin"));
  if (chains > 1) {
    chain = cc.read<std::int64_t>("chain");
    burnin = cc.read<std::int64_t>("burnin");
  }
  std::vector<double> expanded;
  std::size_t row = 0;
  for (std::size_t k = 0; k < chains; ++k) {
    const std::size_t start = row, before = expanded.size();
    while (row < w.size() && (row == start || chain[row] == chain[start])) ++row;
    for (std::size_t i = start + static_cast<std::size_t>(burnin[k]); i < row; ++i)
      for (std::int64_t r = 0; r < w[i] && expanded.size() - before < ndraw; ++r) expanded.push_back(q[i]);
  }
  CHECK(expanded == post);
  // herd-diagnose: the same table and JSON from both files.
  const std::string table = diagnose(dir, "verbose/run.h5");
  CHECK(table.find("sigma") != std::string::npos);
  CHECK(diagnose(dir, "compact/run.h5") == table);
  CHECK(diagnose(dir, "compact/run.h5", "--json") == diagnose(dir, "verbose/run.h5", "--json"));
  // By their dimension names (chain, draw): the posterior's datasets one by one; the compact
  // chain's state (compact_draw, variable) is not chains x draws (it was read as thousands of
  // chains of ndim draws).
  CHECK(diagnose(dir, "verbose/run.h5", "--dataset posterior/sigma").find("sigma") != std::string::npos);
  const auto state = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "compact/run.h5 --dataset chain_compact/state");
  CHECK(state.rc == 2);
  CHECK_THAT(state.err, Catch::Contains("dataset 'chain_compact/state' has the dimensions (compact_draw, variable)") &&
                            Catch::Contains("read, weighted, when the file is given without --dataset"));
}

}  // namespace

TEST_CASE("h5_posterior = compact: one chain", "[apps][h5_posterior]") {
  check_layouts("serial", "--set chain_size=3000", 1);
}

TEST_CASE("h5_posterior = compact: multi_chain, 3 chains cut to a common length", "[apps][h5_posterior]") {
  check_layouts("multi", "--set chain_size=1500 --set parallelization_model=multi_chain --set chains_per_rank=3", 3);
}

TEST_CASE("h5_posterior = compact: cpu_batched, 4 chains", "[apps][h5_posterior]") {
  check_layouts("batched", "--set chain_size=1500 --set device=cpu_batched --set chains_per_rank=4 --set warmup=300",
                4);
}

TEST_CASE("h5_posterior = compact: outputStatus = extend continues a compact run; the key in a namelist",
          "[apps][h5_posterior]") {
  const fs::path dir = herd::testing::fresh_dir(HERD_TEST_WORK_DIR, "extend");
  std::ofstream(dir / "in.nml") << "&ParaDRAM\n  chainSize = 1500\n  randomSeed = 5\n  outputFileName = \"out/run\"\n"
                                   "  outputStatus = \"extend\"\n  h5_posterior = \"Compact\"\n"
                                   "  target%model = \"kidscore_interaction\"\n/\n";
  for (int k = 0; k < 2; ++k) {
    const auto r = herd::testing::run_app(HERD_SAMPLE_EXE, dir, "in.nml --quiet");
    INFO(r.err);
    REQUIRE(r.rc == 0);
  }
  for (const char* file : {"out/run.h5", "out/run_run2.h5"}) {
    INFO(file);
    const H5File f = H5File::open((dir / file).string());
    CHECK_FALSE(f.root().contains("posterior"));
    CHECK(f.root().attribute_string("h5_posterior") == "compact");
    CHECK(diagnose(dir, file).find("log_sigma") != std::string::npos);
  }
  // The extension starts at the last state of the first run's chain_compact.
  const auto first = H5File::open((dir / "out/run.h5").string()).root().open_group("chain_compact");
  const auto state = first.read<double>("state");
  const auto input = H5File::open((dir / "out/run_run2.h5").string()).root().open_group("input");
  CHECK(input.attribute_string("start_point").find(fmt::format("{:.17g}", state.back())) != std::string::npos);
}

TEST_CASE("herd-diagnose judges a run of superchains on its nested R-hat, as herd-sample's report does",
          "[apps][h5_posterior]") {
  // 64 short banana chains: classic R-hat 1.19 and 1.15, nested R-hat over 16 superchains 1.02
  // and 1.04 (seed 11). herd-diagnose warned on the classic R-hat, herd-sample's report on the
  // nested one.
  const fs::path dir = herd::testing::fresh_dir(HERD_TEST_WORK_DIR, "nested");
  std::ofstream(dir / "n.toml") << "device = \"cpu_batched\"\nchains_per_rank = 64\nchain_size = 300\nwarmup = 200\n"
                                   "output_prefix = \"out/n\"\n[target]\nbuiltin = \"banana\"\nndim = 2\n";
  const auto s = herd::testing::run_app(HERD_SAMPLE_EXE, dir, "n.toml --quiet --seed 11");
  REQUIRE(s.rc == 0);
  const std::string report = herd::testing::slurp(dir / "out/n_report.txt");
  const auto d = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/n.h5");
  INFO(d.err);
  REQUIRE(d.rc == 0);
  CHECK_THAT(d.out, Catch::Contains("x1") && Catch::Contains("1.1"));  // the classic R-hat stays in the table
  CHECK_THAT(d.err, !Catch::Contains("WARNING: R-hat is above"));
  CHECK_THAT(report, Catch::Contains("WARNING: Nested R-hat over 16 superchains of 4 chains"));
  CHECK_THAT(d.err, Catch::Contains("WARNING: Nested R-hat over 16 superchains of 4 chains") &&
                        Catch::Contains("for x1 (1.0") && Catch::Contains(", x2 (1.0"));  // one verdict for both
  // One dataset picked with --dataset: the same verdict.
  const auto one = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/n.h5 --dataset posterior/x2");
  CHECK_THAT(one.err, Catch::Contains("WARNING: Nested R-hat over 16") && !Catch::Contains("WARNING: R-hat is above"));
  // A variable named without its group, as ArviZ names it: the group is suggested.
  const auto bare = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/n.h5 --dataset x2");
  CHECK(bare.rc == 2);
  CHECK_THAT(bare.err, Catch::Contains("out/n.h5: no dataset 'x2'; did you mean 'posterior/x2'?"));
  const auto none = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/n.h5 --dataset nope");
  CHECK(none.rc == 2);
  CHECK_THAT(none.err, Catch::Contains("no dataset 'nope'") && !Catch::Contains("did you mean"));
}
