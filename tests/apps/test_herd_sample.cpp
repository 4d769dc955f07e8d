// herd-sample end to end: outputs, reproducibility, namelist = TOML, input errors.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app_runner.hpp"
#include "nested_rhat_by_hand.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "herd/core/config.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/schema.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

/// A fresh working folder per test case.
fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

Run run(const fs::path& dir, const std::string& args) { return herd::testing::run_app(HERD_SAMPLE_EXE, dir, args); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

const char* kToml = R"(description = "2-D correlated normal"
chain_size = 3000
random_seed = 7
output_prefix = "out/run"
proposal_std = [0.5, 0.5]
delayed_rejection_count = 2
delayed_rejection_scale_factors = [0.5, 0.3]
variable_names = ["a", "b"]

[target]
builtin = "normal"
ndim = 2
rho = 0.6
)";

const char* kNamelist = R"(! The same run as a ParaMonte namelist (v1 names, and one v2 alias).
&ParaDRAM
    description = '2-D correlated normal'
    chainSize = 3000
    randomSeed = 7
    outputFileName = "out/run"
    proposalStartStdVec = 2*0.5d0
    proposalDelayedRejectionCount = 2
    delayedRejectionScaleFactorVec = 0.5, 0.3
    variableNameList = 'a', 'b'
/
)";

const std::string kTarget = " --set target.builtin=normal --set target.ndim=2 --set target.rho=0.6";

}  // namespace

TEST_CASE("herd-sample writes ParaDRAM text files and an ArviZ-style HDF5 file", "[apps][mcmc]") {
  const auto dir = workdir("outputs");
  write(dir / "run.toml", kToml);
  const Run r = run(dir, "run.toml");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("ess_bulk") && Contains("out/run.h5"));
  // The terminal ends with the output files (batched runs list theirs alike).
  CHECK_THAT(r.out, Catch::Matchers::EndsWith("\noutputs:\n  out/run_chain.txt\n  out/run_sample.txt\n  "
                                              "out/run_progress.txt\n  out/run_report.txt\n  out/run_report.html\n  "
                                              "out/run.h5\n"));
  for (const char* f :
       {"run_chain.txt", "run_sample.txt", "run_progress.txt", "run_report.txt", "run_report.html", "run.h5"})
    CHECK(fs::exists(dir / "out" / f));
  // Chain file: ParaDRAM's columns, 17 significant digits.
  std::ifstream chain(dir / "out" / "run_chain.txt");
  std::string header, first;
  std::getline(chain, header);
  std::getline(chain, first);
  CHECK(header ==
        "ProcessID,DelayedRejectionStage,MeanAcceptanceRate,AdaptationMeasure,BurninLocation,SampleWeight,"
        "SampleLogFunc,a,b");
  CHECK(std::count(first.begin(), first.end(), ',') == 8);
  CHECK_THAT(first, Contains("e+00") || Contains("e-0"));
  std::size_t rows = 1, weight_sum = 0;
  {
    std::ifstream c2(dir / "out" / "run_chain.txt");
    std::string line;
    std::getline(c2, line);
    rows = 0;
    while (std::getline(c2, line)) {
      ++rows;
      std::vector<std::string> cells;
      std::stringstream ss(line);
      std::string cell;
      while (std::getline(ss, cell, ',')) cells.push_back(cell);
      REQUIRE(cells.size() == 9);
      CHECK(cells[0] == "1");
      weight_sum += std::stoul(cells[5]);
    }
  }
  CHECK(rows == 3000);  // chain_size counts accepted (unique) states
  std::ifstream sample(dir / "out" / "run_sample.txt");
  std::getline(sample, header);
  CHECK(header == "SampleLogFunc,a,b");

  // HDF5: groups, shapes, dimension scales, attributes.
  auto f = herd::io::H5File::open((dir / "out" / "run.h5").string());
  for (const char* g : {"posterior", "sample_stats", "chain_compact", "sample", "diagnostics", "input"})
    CHECK(f.root().is_group(g));
  auto a = f.open_dataset("posterior/a");
  REQUIRE(a.shape().size() == 2);
  CHECK(a.shape()[0] == 1);
  CHECK(a.dimension_names() == std::vector<std::string>{"chain", "draw"});
  const auto w = f.open_dataset("chain_compact/weight").read<std::int64_t>();
  CHECK(w.size() == 3000);
  std::int64_t total = 0;
  for (auto x : w) total += x;
  CHECK(static_cast<std::size_t>(total) == weight_sum);
  const auto burnin = f.open_group("chain_compact").attribute<std::int64_t>("burnin");
  std::int64_t post = 0;
  for (std::size_t i = static_cast<std::size_t>(burnin); i < w.size(); ++i) post += w[i];
  CHECK(a.shape()[1] == static_cast<hsize_t>(post));
  CHECK(f.open_dataset("sample_stats/lp").shape() == a.shape());
  {
    // sample_stats from the compact chain: each post-burn-in state's draws (its weight of
    // them) repeat its log density; the first draw is where it was accepted (accepted, DR
    // stage, acceptance probability), the others are rejections (0), and so is the start
    // point (step 0), whose compact row has acceptance probability 1.
    const auto step = f.open_dataset("chain_compact/step").read<std::uint64_t>();
    const auto lpc = f.open_dataset("chain_compact/log_density").read<double>();
    const auto stc = f.open_dataset("chain_compact/dr_stage").read<std::int32_t>();
    const auto apc = f.open_dataset("chain_compact/acceptance_probability").read<double>();
    std::vector<double> lp, ap;
    std::vector<std::uint8_t> acc;
    std::vector<std::int32_t> st;
    for (std::size_t i = static_cast<std::size_t>(burnin); i < w.size(); ++i)
      for (std::int64_t k = 0; k < w[i]; ++k) {
        lp.push_back(lpc[i]);
        acc.push_back(k == 0 && step[i] > 0 ? 1 : 0);
        st.push_back(k == 0 ? stc[i] : 0);
        ap.push_back(k == 0 && step[i] > 0 ? apc[i] : 0.0);
      }
    CHECK(f.open_dataset("sample_stats/lp").read<double>() == lp);
    CHECK(f.open_dataset("sample_stats/accepted").read<std::uint8_t>() == acc);
    CHECK(f.open_dataset("sample_stats/dr_stage").read<std::int32_t>() == st);
    CHECK(f.open_dataset("sample_stats/acceptance_probability").read<double>() == ap);
    CHECK(std::count(acc.begin(), acc.end(), std::uint8_t{1}) > 100);
    REQUIRE(burnin == 0);  // the start point is the first draw
    CHECK(apc[0] == 1.0);
    CHECK(ap[0] == 0.0);
  }
  CHECK(f.open_group("input").attribute_string("chain_size") == "3000");
  CHECK(f.open_group("input").attribute_string("target.builtin") == "\"normal\"");
  const auto names = f.open_dataset("diagnostics/variable").read_strings();
  CHECK(names == std::vector<std::string>{"a", "b"});
  const auto ess = f.open_dataset("diagnostics/ess_bulk").read<double>();
  CHECK(ess[0] > 100);
}

TEST_CASE(
    "herd-sample: same seed, same input => byte-identical chain, sample and datasets; "
    "namelist = TOML",
    "[apps][mcmc]") {
  const auto d1 = workdir("repro1"), d2 = workdir("repro2"), d3 = workdir("repro3");
  write(d1 / "run.toml", kToml);
  write(d2 / "run.toml", kToml);
  write(d3 / "run.nml", kNamelist);
  REQUIRE(run(d1, "run.toml --quiet").rc == 0);
  REQUIRE(run(d2, "run.toml --quiet").rc == 0);
  const Run r3 = run(d3, "run.nml --quiet" + kTarget);
  INFO(r3.err);
  REQUIRE(r3.rc == 0);
  for (const char* f : {"run_chain.txt", "run_sample.txt"}) {
    INFO(f);
    const std::string a = slurp(d1 / "out" / f);
    CHECK(a.size() > 1000);
    CHECK(a == slurp(d2 / "out" / f));
    CHECK(a == slurp(d3 / "out" / f));
  }
  auto f1 = herd::io::H5File::open((d1 / "out" / "run.h5").string());
  auto f3 = herd::io::H5File::open((d3 / "out" / "run.h5").string());
  for (const char* ds :
       {"posterior/a", "posterior/b", "sample_stats/lp", "chain_compact/state", "sample/a", "diagnostics/ess_bulk"}) {
    INFO(ds);
    CHECK(f1.open_dataset(ds).read<double>() == f3.open_dataset(ds).read<double>());
  }
  // Different seed: different chain.
  const auto d4 = workdir("repro4");
  write(d4 / "run.toml", kToml);
  REQUIRE(run(d4, "run.toml --quiet --seed 8").rc == 0);
  CHECK(slurp(d1 / "out" / "run_chain.txt") != slurp(d4 / "out" / "run_chain.txt"));
}

TEST_CASE("herd-sample: input errors exit 2 with one clear line and write nothing", "[apps][mcmc]") {
  struct Case {
    std::string file_text, args, expect;
  };
  const std::vector<Case> cases = {
      {"chain_sise = 10\n[target]\nbuiltin = \"normal\"\nndim = 2\n", "", "did you mean \"chain_size\""},
      {"chain_size = \"many\"\n", "", "chain_size"},
      {"chain_size = 0\n", "", "chain_size"},
      {"[target]\nmodel = \"nope\"\n", "", "target.model"},
      {"start_point = [1.0]\n[target]\nbuiltin = \"normal\"\nndim = 2\n", "", "start_point"},
      {"proposal_model = \"cauchy\"\n", "", "proposal_model"},
      {"chain_size = 10\n", "--set delayed_rejection_count=-1", "delayed_rejection_count"},
      {"scale_factor = \"huge\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n", "", "scale_factor"},
      {"&ParaDRAM chainSize = 10, nosuchKey = 3 /\n", "", "unknown key \"nosuchKey\""},
      {"chain_size = [\n", "", "run.in"},
  };
  int k = 0;
  for (const auto& c : cases) {
    const auto dir = workdir("err" + std::to_string(k++));
    write(dir / "run.in", c.file_text);
    const Run r = run(dir, "run.in --output out/x " + c.args);
    INFO(c.file_text << c.args << "\nstderr: " << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains(c.expect) && Contains("herd-sample: error:"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  // A missing input file.
  const auto dir = workdir("err_missing");
  const Run r = run(dir, "nofile.toml");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("nofile.toml"));
}

TEST_CASE("herd-sample never overwrites outputs unless overwrite = true", "[apps][mcmc]") {
  const auto dir = workdir("overwrite");
  write(dir / "run.toml", std::string(kToml));
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=200").rc == 0);
  const std::string before = slurp(dir / "out" / "run_chain.txt");
  const Run again = run(dir, "run.toml --quiet --set chain_size=300");
  CHECK(again.rc == 2);
  CHECK_THAT(again.err, Contains("exists") && Contains("overwrite"));
  CHECK(slurp(dir / "out" / "run_chain.txt") == before);
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=300 --set overwrite=true").rc == 0);
  CHECK(slurp(dir / "out" / "run_chain.txt") != before);
}

TEST_CASE("herd-sample's posterior group opens in xarray (h5netcdf)", "[apps][mcmc]") {
  const auto dir = workdir("xarray");
  write(dir / "run.toml", kToml);
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=500").rc == 0);
  write(dir / "check.py", R"(import sys, warnings, xarray as xr
warnings.simplefilter("error")
ds = xr.open_dataset(sys.argv[1], group="posterior", engine="h5netcdf")
assert ds["a"].dims == ("chain", "draw"), ds["a"].dims
assert ds.sizes["chain"] == 1 and ds.sizes["draw"] > 100
st = xr.open_dataset(sys.argv[1], group="sample_stats", engine="h5netcdf")
assert st["lp"].shape == ds["a"].shape
# ArviZ's InferenceData schema: each group names the library and its version.
for g in (ds, st):
    assert g.attrs["inference_library"] == "herd", g.attrs
    assert g.attrs["inference_library_version"], g.attrs
for v in ("lp", "accepted", "dr_stage", "acceptance_probability"):
    assert st[v].attrs["long_name"], v
assert "not ArviZ's acceptance_rate" in st["acceptance_probability"].attrs["long_name"]
s = xr.open_dataset(sys.argv[1], group="sample", engine="h5netcdf")
assert s["a"].dims == ("sample",)
print("ok")
)");
  const std::string cmd = "/usr/bin/python3 '" + (dir / "check.py").string() + "' '" +
                          (dir / "out" / "run.h5").string() + "' > '" + (dir / "py.txt").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(slurp(dir / "py.txt"));
  CHECK(rc == 0);
}

TEST_CASE("herd-sample: model data from JSON and HDF5 files equal the embedded data", "[apps][mcmc]") {
  const auto dir = workdir("data");
  // eight schools' data, as JSON and as an HDF5 group.
  write(dir / "data.json", R"({"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]})");
  {
    auto f = herd::io::H5File::create((dir / "data.h5").string());
    auto g = f.root().create_group("schools");
    g.write_scalar<std::int64_t>("J", 8);
    g.write<double>("y", std::vector<double>{28, 8, -3, 7, -1, 1, 18, 12});
    g.write<double>("sigma", std::vector<double>{15, 10, 16, 11, 9, 11, 10, 18});
    auto t = f.root().create_group("text");  // y stored as text
    t.write_scalar<std::int64_t>("J", 8);
    t.write_strings("y", {"28", "8", "-3", "7", "-1", "1", "18", "12"});
    t.write<double>("sigma", std::vector<double>{15, 10, 16, 11, 9, 11, 10, 18});
    f.close();
  }
  const std::string common =
      "--quiet --set chain_size=500 --set random_seed=3 --set target.model=eight_schools_noncentered";
  REQUIRE(run(dir, common + " --output out/embedded").rc == 0);
  const Run rj = run(dir, common + " --output out/json --set data.file=data.json");
  INFO(rj.err);
  REQUIRE(rj.rc == 0);
  const Run rh = run(dir, common + " --output out/h5 --set data.file=data.h5 --set data.group=schools");
  INFO(rh.err);
  REQUIRE(rh.rc == 0);
  const std::string a = slurp(dir / "out" / "embedded_chain.txt");
  CHECK(a == slurp(dir / "out" / "json_chain.txt"));
  CHECK(a == slurp(dir / "out" / "h5_chain.txt"));
  // Bad data: a missing field and a missing file are input errors.
  write(dir / "bad.json", R"({"J": 8, "y": [1, 2]})");
  const Run bad = run(dir, common + " --output out/bad --set data.file=bad.json");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.err, Contains("eight_schools_noncentered") && Contains("\"y\""));
  const Run text = run(dir, common + " --output out/text --set data.file=data.h5 --set data.group=text");
  CHECK(text.rc == 2);
  CHECK_THAT(text.err, Contains("no field \"y\" (the file has a dataset \"y\", but it holds text, not numbers)"));
  const Run none = run(dir, common + " --output out/none --set data.file=nope.json");
  CHECK(none.rc == 2);
  CHECK_THAT(none.err, Contains("nope.json"));
  CHECK_FALSE(fs::exists(dir / "out" / "bad_chain.txt"));
  // In an input file a relative data.file is that file's folder's (as target.library is),
  // from whatever working directory.
  fs::create_directories(dir / "model");
  fs::copy_file(dir / "data.json", dir / "model" / "schools.json", fs::copy_options::overwrite_existing);
  write(dir / "model" / "run.toml",
        "chain_size = 500\nrandom_seed = 3\noutput_prefix = \"out/file\"\n[target]\nmodel = "
        "\"eight_schools_noncentered\"\n[data]\nfile = \"schools.json\"\n");
  const Run rf = run(dir, "model/run.toml --quiet");
  INFO(rf.err);
  REQUIRE(rf.rc == 0);
  CHECK(a == slurp(dir / "out" / "file_chain.txt"));
}

TEST_CASE("herd-sample: a plugin log density from a shared library (ParaMonte C signature)", "[apps][mcmc]") {
  const auto dir = workdir("plugin");
  const std::string lib = HERD_TEST_PLUGIN_PATH;
  const std::string common =
      "--quiet --set chain_size=2000 --set random_seed=5 --set target.ndim=3 --set target.library=" + lib;
  const Run r = run(dir, common + " --output out/p");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  auto f = herd::io::H5File::open((dir / "out" / "p.h5").string());
  CHECK(f.root().attribute_string("target").find("plugin getLogFunc") != std::string::npos);
  const auto x = f.open_dataset("posterior/x1").read<double>();
  REQUIRE(x.size() > 1000);
  // The plugin scribbles on its input: herd must pass a copy, so the chain stays finite.
  for (double v : x) REQUIRE(std::abs(v) < 10.0);
  // Same chain as the built-in standard normal (log densities differ by a constant only).
  REQUIRE(run(dir,
              "--quiet --set chain_size=2000 --set random_seed=5 --set target.builtin=normal --set target.ndim=3 "
              "--output out/n")
              .rc == 0);
  auto g = herd::io::H5File::open((dir / "out" / "n.h5").string());
  CHECK(g.open_dataset("chain_compact/state").read<double>() == f.open_dataset("chain_compact/state").read<double>());
  // A missing symbol or library is an input error naming it.
  const Run bad = run(dir, common + " --output out/bad --set target.symbol=nope");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.err, Contains("nope"));
  const Run nolib = run(dir, "--quiet --set target.ndim=3 --set target.library=/nonexistent/lib.so --output out/bad");
  CHECK(nolib.rc == 2);
  CHECK_THAT(nolib.err, Contains("/nonexistent/lib.so"));
}

TEST_CASE("herd-sample: chain_file_format = binary and verbose", "[apps][mcmc]") {
  const auto dir = workdir("formats");
  write(dir / "run.toml", kToml);
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=400 --output out/c").rc == 0);
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=400 --output out/b --set chain_file_format=binary").rc == 0);
  REQUIRE(run(dir, "run.toml --quiet --set chain_size=400 --output out/v --set chain_file_format=verbose").rc == 0);
  CHECK_FALSE(fs::exists(dir / "out" / "b_chain.txt"));
  const auto bin = herd::mcmc::read_binary_chain((dir / "out" / "b_chain.bin").string());
  CHECK(bin.size() == 400);
  CHECK(bin.ndim == 2);
  // The binary chain holds the same states as the compact text chain and the HDF5 file.
  auto f = herd::io::H5File::open((dir / "out" / "c.h5").string());
  CHECK(f.open_dataset("chain_compact/state").read<double>() == bin.points);
  CHECK(f.open_dataset("chain_compact/weight").read<std::int64_t>() == bin.weight);
  // Verbose: one row per step, each of weight 1.
  std::ifstream v(dir / "out" / "v_chain.txt");
  std::string line;
  std::getline(v, line);
  std::int64_t rows = 0;
  while (std::getline(v, line)) ++rows;
  std::int64_t steps = 0;
  for (auto w : bin.weight) steps += w;
  CHECK(rows == steps);
}

TEST_CASE("herd-sample: a chain that barely moves says so and what to do (report and terminal)", "[apps][mcmc]") {
  // A proposal 100 times too wide, adaptation off: about one proposal in 10^4 is accepted.
  const auto dir = workdir("low_acceptance");
  write(dir / "run.toml",
        "chain_size = 3\nrandom_seed = 3\noutput_prefix = \"out/stuck\"\nadaptive_update_count = 0\n"
        "proposal_std = [100, 100]\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = run(dir, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("WARNING: the mean acceptance rate is") && Contains("proposal_std"));
  CHECK_THAT(slurp(dir / "out/stuck_report.txt"),
             Contains("WARNING: the mean acceptance rate is") && Contains("scale_factor"));
  // A healthy run has no such line.
  const auto ok = workdir("ok_acceptance");
  write(ok / "run.toml", std::string(kToml));
  const Run r2 = run(ok, "run.toml --set chain_size=500");
  REQUIRE(r2.rc == 0);
  CHECK_THAT(r2.out, !Contains("WARNING: the mean acceptance rate"));
}

// chain_size = 1 makes no proposal: its acceptance rate is 0 / 0, and the run read "the mean
// acceptance rate is 0, below 0.001: the chain barely moved ... Give proposal_std ...".
TEST_CASE("herd-sample: a run that made no proposal gets no acceptance-rate verdict", "[apps][mcmc]") {
  const auto dir = workdir("no_proposal");
  write(dir / "run.toml",
        "chain_size = 1\nrandom_seed = 3\noutput_prefix = \"out/one\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = run(dir, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("1 chain, 0 steps"));
  const std::string html = slurp(dir / "out/one_report.html");
  for (const std::string& text : {r.out, slurp(dir / "out/one_report.txt"), html}) {
    CHECK_THAT(text, !Contains("acceptance rate is 0") && !Contains("barely moved"));
    // What it does say: nothing can be judged from one draw.
    CHECK_THAT(text, Contains("R-hat and ESS are undefined (NA) for every quantity (x1, x2)"));
  }
  CHECK_THAT(html, !Contains("class=\"note ok\""));
}

TEST_CASE("herd-sample: a 100-D standard normal with the default proposal samples it", "[apps][mcmc]") {
  // The identity start proposal, unscaled, accepted nothing in 100-D (the run never ended);
  // ParaDRAM's rule (times scale_factor^2) gives a normal acceptance. Fixed seed; the
  // acceptance of a 100-D random walk at 2.38/sqrt(d) is about 0.23, far inside [0.1, 0.5].
  const auto dir = workdir("normal100");
  write(dir / "run.toml",
        "chain_size = 1000\nrandom_seed = 5\noutput_prefix = \"out/n\"\ncheckpoint_period_seconds = 0\n"
        "[target]\nbuiltin = \"normal\"\nndim = 100\n");
  const Run r = run(dir, "run.toml --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string rep = slurp(dir / "out/n_report.txt");
  const auto pos = rep.find("mean acceptance rate");
  REQUIRE(pos != std::string::npos);
  const double acc = std::stod(rep.substr(pos + 20));
  CHECK(acc > 0.1);
  CHECK(acc < 0.5);
  // The resolved input comments out the target keys the normal target does not read, so
  // that the text read back as input sets none of them.
  CHECK_THAT(rep, Contains("\n# target.b = 0.03  # default; not read by target.builtin = \"normal\"; curvature"));
  CHECK_THAT(rep, Contains("\n# target.symbol = \"getLogFunc\"  # default; not read by target.builtin = \"normal\""));
  CHECK_THAT(rep, Contains("\ntarget.rho = 0.0  # default; AR(1)"));
  CHECK_THAT(rep, Contains("\ntarget.ndim = 100  # run.toml:7;"));
}

TEST_CASE("herd-sample: model data of the wrong shape is rejected naming file, key and shapes", "[apps][mcmc]") {
  // Before: a [8, 1] matrix or a [2, 4] matrix where a vector is expected was read flattened.
  const auto dir = workdir("data_shape");
  struct Case {
    std::string file, text, expect;
  };
  const std::vector<Case> cases = {
      {"col.json",
       R"({"J": 8, "y": [[28], [8], [-3], [7], [-1], [1], [18], [12]], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]})",
       "data field \"y\" has shape [8, 1], but must be a vector of J = 8 numbers (shape [8])"},
      {"mat.json", R"({"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [[15, 10, 16, 11], [9, 11, 10, 18]]})",
       "data field \"sigma\" has shape [2, 4], but must be a vector of J = 8 numbers (shape [8])"},
      {"ragged.json", R"({"J": 8, "y": [[28, 8, -3], [7, -1, 1, 18, 12]], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]})",
       "\"y[1]\" (indices from 0) is ragged: 5 elements, but must have 3"},
      {"scalar.json", R"({"J": [8], "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18]})",
       "data field \"J\" is an array of shape [1], but must be an integer scalar (shape [])"},
  };
  const std::string common = "--quiet --set chain_size=100 --set target.model=eight_schools_noncentered";
  for (const auto& c : cases) {
    write(dir / c.file, c.text);
    const Run r = run(dir, common + " --output out/x --set data.file=" + c.file);
    INFO(c.file << "\nstderr: " << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err,
               Contains("herd-sample: error:") && Contains("data.file \"" + c.file + "\"") && Contains(c.expect));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  // The same from an HDF5 group: y written as [8, 1].
  {
    auto f = herd::io::H5File::create((dir / "col.h5").string());
    f.root().write_scalar<std::int64_t>("J", 8);
    f.root().write<double>("y", std::vector<double>{28, 8, -3, 7, -1, 1, 18, 12}, {8, 1});
    f.root().write<double>("sigma", std::vector<double>{15, 10, 16, 11, 9, 11, 10, 18});
    f.close();
  }
  const Run r = run(dir, common + " --output out/x --set data.file=col.h5");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("data.file \"col.h5\"") && Contains("data field \"y\" has shape [8, 1]"));
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("herd-sample: errors name the input file (or --set/--seed), the user's key, the value and the rule",
          "[apps][mcmc]") {
  struct Case {
    std::string file_text, args, expect;
  };
  const std::string normal2 = "[target]\nbuiltin = \"normal\"\nndim = 2\n";
  const std::vector<Case> cases = {
      // Before: "dram: proposal_start_cov is not symmetric" (kernel names, no file).
      {"chain_size = 10\nproposal_cov = [1, 2, 0.5, 1]\n" + normal2, "",
       "run.in:2: key \"proposal_cov\" is not symmetric: element (2,1) is 0.5, but element (1,2) is 2"},
      {"&ParaDRAM\n  chainSize = 10\n  proposalStartCovMat = 1, 2, 0.5, 1\n/\n", kTarget,
       "run.in:3: key \"proposalStartCovMat\" is not symmetric"},
      {"chain_size = 10\n" + normal2, "--set proposal_cov=[1,2,2,1]",
       "--set proposal_cov=[1,2,2,1]: key \"proposal_cov\" is not positive definite"},
      {"chain_size = 10\n" + normal2, "--set proposal_cor=[1,0.5,0.5,2]",
       "key \"proposal_cor\" element (2,2) is 2, but a correlation matrix has 1 on its diagonal"},
      // Before: "(text)" instead of the number, and no key for a too large integer.
      {"chain_size = 10\n" + normal2, "--set output_real_precision=40",
       "--set output_real_precision=40: key \"output_real_precision\" is 40 (an integer), but must be an integer in "
       "[1, 17]"},
      {"chain_size = 10\n" + normal2, "--set chain_size=99999999999999999999",
       "key \"chain_size\" is 1e+20 (a float), but must be an integer >= 1"},
      // Before: CLI11's "Value -1 not in range 0.000000 to 1797693134862315708...".
      {"chain_size = 10\n" + normal2, "--seed -1",
       "--seed is \"-1\", but must be an integer in [0, 9223372036854775807]"},
      // New-user report item 3: 2^63 and above were clamped to 2^63-1 (distinct seeds, one
      // chain); --set random_seed=2^63 was "a float".
      {"chain_size = 10\n" + normal2, "--seed 9223372036854775808",
       "--seed is \"9223372036854775808\", but must be an integer in [0, 9223372036854775807]"},
      {"chain_size = 10\n" + normal2, "--seed 18446744073709551616",
       "--seed is \"18446744073709551616\", but must be an integer in [0, 9223372036854775807]"},
      {"chain_size = 10\n" + normal2, "--set random_seed=9223372036854775808",
       "--set random_seed=9223372036854775808: key \"random_seed\" is \"9223372036854775808\", but must be an integer "
       "in [0, 9223372036854775807]"},
      {"chain_size = 10\n" + normal2, "--set random_seed=1.5",
       "key \"random_seed\" is \"1.5\", but must be an integer in [0, 9223372036854775807]"},
      // Before: the kernel's "dram: delayed_rejection_count is 20, but must be in [0, 14]".
      {"chain_size = 10\n" + normal2, "--set delayed_rejection_count=20",
       "--set delayed_rejection_count=20: key \"delayed_rejection_count\" is 20, but must be at most 14"},
      {"&ParaDRAM\n  chainSize = 10\n  targetAcceptanceRate = 0.5, 0.2\n/\n", kTarget,
       "run.in:3: key \"targetAcceptanceRate\" is [0.5, 0.2], but must be a range [lo, hi] with 0 < lo <= hi <= 1"},
      {"chain_size = 10\nrandom_start_point = true\n" + normal2, "",
       "run.in:2: key \"random_start_point\" is true, but random_start_point_domain_lower/upper"},
      {"chain_size = 10\n[target]\nbuiltin = \"banana\"\n", "",
       "run.in:3: target.builtin is \"banana\", but target.ndim is not given"},
      {"chain_size = 10\n" + normal2, "--set target.model=arK",
       "target.model, target.builtin and target.library are exclusive, but more than one is given (target.model, "
       "target.builtin)"},
      {"chain_size = 10\n" + normal2, "--set target.cov=[1,2,2,1]",
       "--set target.cov=[1,2,2,1]: key \"target.cov\" is not positive definite"},
      {"chain_size = 10\n[target]\nlibrary = \"nope.so\"\nndim = 2\n", "", "run.in:3: target.library \"nope.so\""},
      // A symbol the library lacks is named where the symbol was set (it was the library's line).
      {std::string("chain_size = 10\n[target]\nlibrary = \"") + HERD_TEST_KILL_PLUGIN + "\"\nndim = 2\n",
       "--set target.symbol=nosuch", "--set target.symbol=nosuch: target.symbol \"nosuch\" (target.library"},
      // An empty prefix (a folder ending in '/' is ParaMonte's folder form, tested below).
      {"chain_size = 10\n" + normal2, "--set output_prefix= --output ''",
       "--set output_prefix=: key \"output_prefix\" is \"\", but must name a file prefix (or a folder ending in '/')"},
      // A namelist's messages name ParaDRAM's keys, also those it does not set. Before:
      // "delayed_rejection_count = 3", "random_start_point_domain_lower/upper (or ...)",
      // "dram: start_point is outside the ball domain ... (domain_ball_*)" after the file alone.
      {"&ParaDRAM\n  chainSize = 10\n  delayedRejectionCount = 3\n  delayedRejectionScaleFactorVec = 0.5, 0.2\n/\n",
       kTarget,
       "run.in:4: key \"delayedRejectionScaleFactorVec\" has 2 values, but must have 1 or delayedRejectionCount = 3"},
      {"&ParaDRAM\n  chainSize = 10\n  randomStartPointRequested = true\n/\n", kTarget,
       "run.in:3: key \"randomStartPointRequested\" is true, but randomStartPointDomainLowerLimitVec / "
       "randomStartPointDomainUpperLimitVec (or domainLowerLimitVec / domainUpperLimitVec) are not both given"},
      {"&ParaDRAM\n  chainSize = 10\n  domain = 'ball'\n  domainBallStdVec = 2*0.1\n  startPointVec = 1, 1\n/\n",
       kTarget, "run.in:5: dram: startPointVec is outside the ball domain (x - c)^T C^-1 (x - c) <= 1 (domainBall*)"},
      {"&ParaDRAM\n  chainSize = 10\n  domain = 'ball'\n  domainBallStdVec = 2*0.1\n  domainBallAvg = 1, 1\n/\n",
       kTarget, "run.in: dram: startPointVec (default) is outside the ball domain"},
  };
  int k = 0;
  for (const auto& c : cases) {
    const auto dir = workdir("err_names" + std::to_string(k++));
    write(dir / "run.in", c.file_text);
    const Run r = run(
        dir, std::string("run.in ") + (c.args.find("--output") == std::string::npos ? "--output out/x " : "") + c.args);
    INFO(c.file_text << c.args << "\nstderr: " << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("herd-sample: error: " +
                               (c.expect.rfind("--", 0) == 0 || c.expect.rfind("run.in", 0) == 0 ? c.expect
                                                                                                 : std::string())) &&
                          Contains(c.expect));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}

TEST_CASE("herd-sample: the chain's DelayedRejectionStage counts as ParaDRAM's, the first stage 0", "[apps][mcmc]") {
  // Before: every state accepted at the first stage had DelayedRejectionStage 1 (ParaDRAM
  // writes 0; its chain without delayed rejection is all 0), the first delayed-rejection
  // stage 2.
  const auto dir = workdir("dr_stage_column");
  std::map<int, std::map<std::string, int>> counts;  // delayedRejectionCount -> stage -> rows
  for (const int dr : {0, 1}) {
    write(dir / "run.nml", fmt::format("&ParaDRAM\n  chainSize = 500\n  randomSeed = 3\n  outputFileName = 'out/d{}'\n"
                                       "  delayedRejectionCount = {}\n/\n",
                                       dr, dr));
    REQUIRE(run(dir, "run.nml --quiet" + kTarget).rc == 0);
    std::istringstream chain(slurp(dir / "out" / fmt::format("d{}_chain.txt", dr)));
    std::string line;
    std::getline(chain, line);
    REQUIRE(line.rfind("ProcessID,DelayedRejectionStage,", 0) == 0);
    while (std::getline(chain, line)) {
      const auto a = line.find(',');
      ++counts[dr][line.substr(a + 1, line.find(',', a + 1) - a - 1)];
    }
  }
  CHECK(counts[0].size() == 1);
  CHECK(counts[0]["0"] == 500);
  CHECK(counts[1].size() == 2);
  CHECK(counts[1]["0"] > 0);
  CHECK(counts[1]["1"] > 0);
}

TEST_CASE("herd-sample: a namelist's advice about existing outputs names overwriteRequested and outputFileName",
          "[apps][mcmc]") {
  // Before: "set overwrite = true or choose another output_prefix", herd's TOML names, to a
  // ParaDRAM namelist's user.
  const auto dir = workdir("nml_overwrite_names");
  write(dir / "run.nml", "&ParaDRAM\n  chainSize = 10\n  randomSeed = 3\n  outputFileName = 'out/x'\n/\n");
  REQUIRE(run(dir, "run.nml --quiet" + kTarget).rc == 0);
  const Run again = run(dir, "run.nml" + kTarget);
  CHECK(again.rc == 0);
  CHECK_THAT(again.out,
             Contains("is complete; its outputs are out/x.* (set overwriteRequested = true to run it again)"));
  // Without the restart record, the outputs are refused: one line, the namelist's names.
  fs::remove_all(dir / "out" / "x_restart");
  const std::string before = slurp(dir / "out" / "x_chain.txt");
  const Run refused = run(dir, "run.nml" + kTarget);
  INFO(refused.err);
  CHECK(refused.rc == 2);
  CHECK(refused.err ==
        "herd-sample: error: run.nml:4: outputFileName = \"out/x\": output file \"out/x_chain.txt\" "
        "exists; set overwriteRequested = true or choose another outputFileName\n");
  CHECK(slurp(dir / "out" / "x_chain.txt") == before);
  // Overwriting says which key removed the earlier outputs, as the namelist spelled it.
  write(dir / "run.nml",
        "&ParaDRAM\n  chainSize = 10\n  randomSeed = 3\n  outputFileName = 'out/x'\n"
        "  OverwriteRequested = .true.\n/\n");
  const Run over = run(dir, "run.nml" + kTarget);
  CHECK(over.rc == 0);
  CHECK_THAT(over.out, Contains("herd-sample: OverwriteRequested = true: removed the "));
}

namespace {

/// The number after `label` in a report (the first occurrence); NaN when missing.
double report_value(const std::string& report, const std::string& label) {
  const auto pos = report.find(label);
  if (pos == std::string::npos) return std::nan("");
  return std::stod(report.substr(pos + label.size()));
}

}  // namespace

TEST_CASE("herd-sample: a resumed run reports this invocation's and the whole chain's times consistently",
          "[apps][mcmc]") {
  // Before: the resumed run's "steps per second" divided the whole chain's proposals by the
  // resumed part's time, and the earlier invocations' time was lost.
  const auto dir = workdir("resume_times");
  write(dir / "run.toml", std::string("chain_size = 30000\nrandom_seed = 4\noutput_prefix = \"out/r\"\n"
                                      "checkpoint_period = 10000\ncheckpoint_period_seconds = 0\n"
                                      "sample_refinement_count = 1\n[target]\nlibrary = \"") +
                              HERD_TEST_KILL_PLUGIN + "\"\nndim = 2\n");
  // Killed (SIGKILL) at its 45001st evaluation: the last checkpoint is at proposal 40000.
  const Run killed = herd::testing::run_shell(
      dir, std::string("HERD_TEST_SPIN_US=4 HERD_TEST_KILL_AFTER=45000 '") + HERD_SAMPLE_EXE + "' run.toml --quiet");
  REQUIRE(killed.rc != 0);
  REQUIRE(fs::exists(dir / "out/r_restart"));
  const Run resumed =
      herd::testing::run_shell(dir, std::string("HERD_TEST_SPIN_US=4 '") + HERD_SAMPLE_EXE + "' run.toml --quiet");
  INFO(resumed.err);
  REQUIRE(resumed.rc == 0);
  const std::string rep = slurp(dir / "out/r_report.txt");
  INFO(rep.substr(rep.find("== run ==")));
  const double total = report_value(rep, "proposals (steps)");
  const double at = report_value(rep, "resumed from the restart record at proposal");
  const double now = report_value(rep, "proposals (this invocation)");
  const double t_now = report_value(rep, "sampling time (this invocation)");
  const double rate_now = report_value(rep, "steps per second (this invocation)");
  const double t_whole = report_value(rep, "sampling time (whole chain)");
  const double rate_whole = report_value(rep, "steps per second (whole chain)");
  CHECK(at == 40000);
  CHECK(now == total - at);
  CHECK(total > 60000);  // 30000 unique states of a 2-D normal: about 80000 proposals
  // Rates are the proposals over the time of the same span (up to the printed digits).
  CHECK(rate_now == Approx(now / t_now).epsilon(0.01));
  CHECK(rate_whole == Approx(total / t_whole).epsilon(0.01));
  // The whole chain's time holds the earlier invocation's 40000 proposals' time: per
  // proposal, within a factor of 5 of this invocation's (the machine's load varies).
  REQUIRE(t_whole > t_now);
  const double per_before = (t_whole - t_now) / at, per_now = t_now / now;
  CHECK(per_before < 5 * per_now);
  CHECK(per_now < 5 * per_before);
  // A fresh, uninterrupted run reports no resume and no whole-chain lines.
  const auto fresh = workdir("resume_times_fresh");
  write(fresh / "run.toml", slurp(dir / "run.toml"));
  REQUIRE(herd::testing::run_shell(fresh, std::string("'") + HERD_SAMPLE_EXE + "' run.toml --quiet").rc == 0);
  const std::string rep2 = slurp(fresh / "out/r_report.txt");
  CHECK(rep2.find("resumed from") == std::string::npos);
  CHECK(report_value(rep2, "proposals (steps)") == total);  // the same chain
  // The same outputs: the resumed run read its chain back from the chain file (its first
  // 40000 proposals are an earlier process's), the fresh one kept the chain it sampled.
  for (const char* f : {"out/r_chain.txt", "out/r_sample.txt"}) {
    INFO(f);
    CHECK(slurp(dir / f) == slurp(fresh / f));
  }
  auto h_resumed = herd::io::H5File::open((dir / "out/r.h5").string());
  auto h_fresh = herd::io::H5File::open((fresh / "out/r.h5").string());
  for (const char* ds : {"chain_compact/state", "chain_compact/log_density", "posterior/x1", "sample_stats/lp"}) {
    INFO(ds);
    CHECK(h_resumed.open_dataset(ds).read<double>() == h_fresh.open_dataset(ds).read<double>());
  }
}

TEST_CASE("herd-sample: a record killed before its first checkpoint is not announced as a resume", "[apps][mcmc]") {
  // Before: the rerun printed "resuming from the restart record", then started from the
  // first proposal (the record held no checkpoint).
  const auto dir = workdir("no_checkpoint_yet");
  write(dir / "run.toml",
        std::string("chain_size = 3000\nrandom_seed = 4\noutput_prefix = \"out/r\"\n"
                    "checkpoint_period = 1000\ncheckpoint_period_seconds = 0\n[target]\nlibrary = \"") +
            HERD_TEST_KILL_PLUGIN + "\"\nndim = 2\n");
  const std::string exe = std::string("'") + HERD_SAMPLE_EXE + "'";
  REQUIRE(herd::testing::run_shell(dir, exe + " run.toml --quiet --output ref/r").rc == 0);
  // SIGKILLed at its 301st evaluation: the run record is written, the first checkpoint
  // (proposal 1000) is not.
  REQUIRE(herd::testing::run_shell(dir, "HERD_TEST_KILL_AFTER=300 " + exe + " run.toml --quiet").rc != 0);
  REQUIRE(fs::exists(dir / "out/r_restart/run.ckpt"));
  REQUIRE_FALSE(fs::exists(dir / "out/r_restart/chain_0.ckpt"));
  const Run fresh = run(dir, "run.toml");
  INFO(fresh.out << fresh.err);
  REQUIRE(fresh.rc == 0);
  CHECK_THAT(fresh.out, Contains("herd-sample: the restart record in out/r_restart holds no checkpoint yet (the "
                                 "earlier run stopped before its first), so the run starts from the first proposal "
                                 "with the recorded seed 4\n"));
  CHECK_THAT(fresh.out, !Contains("resuming"));
  CHECK_THAT(slurp(dir / "out/r_report.txt"), !Contains("resumed"));
  CHECK(slurp(dir / "out/r_chain.txt") == slurp(dir / "ref/r_chain.txt"));
  // SIGKILLed after its checkpoint at proposal 2000: a resume, and the terminal and the
  // report say so.
  REQUIRE(herd::testing::run_shell(dir, "HERD_TEST_KILL_AFTER=2500 " + exe + " run.toml --quiet --output x/r").rc != 0);
  REQUIRE(fs::exists(dir / "x/r_restart/chain_0.ckpt"));
  const Run resumed = run(dir, "run.toml --output x/r");
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.rc == 0);
  CHECK_THAT(resumed.out, Contains("herd-sample: resuming from the restart record in x/r_restart\n"));
  CHECK_THAT(resumed.out, !Contains("no checkpoint"));
  CHECK(report_value(slurp(dir / "x/r_report.txt"), "resumed from the restart record at proposal") == 2000);
  CHECK(slurp(dir / "x/r_chain.txt") == slurp(dir / "ref/r_chain.txt"));
}

TEST_CASE("herd-sample: an interrupted overwrite = true rerun leaves none of the earlier run's outputs",
          "[apps][mcmc]") {
  // Before: the earlier run's .h5, reports and sample file stayed next to the new partial
  // chain until the rerun finished: a complete-looking but stale set of results.
  const auto dir = workdir("overwrite_interrupted");
  write(dir / "run.toml",
        std::string("chain_size = 3000\nrandom_seed = 4\noutput_prefix = \"out/r\"\n"
                    "checkpoint_period = 1000\ncheckpoint_period_seconds = 0\n[target]\nlibrary = \"") +
            HERD_TEST_KILL_PLUGIN + "\"\nndim = 2\n");
  const std::string exe = std::string("'") + HERD_SAMPLE_EXE + "'";
  REQUIRE(herd::testing::run_shell(dir, exe + " run.toml --quiet").rc == 0);
  // A per-chain file of an earlier multi_chain run, and a file of the user's.
  write(dir / "out/r_process_3_sample.txt", "an earlier multi_chain run's sample\n");
  write(dir / "out/r_notes.txt", "the user's notes\n");
  const std::vector<std::string> earlier = {"r.h5",        "r_report.txt",   "r_report.html",         "r_sample.txt",
                                            "r_chain.txt", "r_progress.txt", "r_process_3_sample.txt"};
  std::vector<std::string> before;
  for (const auto& f : earlier) {
    REQUIRE(fs::exists(dir / "out" / f));
    before.push_back(slurp(dir / "out" / f));
  }
  // Bad input with overwrite = true: refused, every earlier output intact.
  const Run bad = run(dir, "run.toml --quiet --set overwrite=true --set 'variable_names=[\"a\",\"a\"]'");
  CHECK(bad.rc == 2);
  for (std::size_t i = 0; i < earlier.size(); ++i) {
    INFO(earlier[i]);
    CHECK(slurp(dir / "out" / earlier[i]) == before[i]);
  }
  // SIGKILLed at its 1501st evaluation: the earlier run's outputs were removed when it
  // started sampling, its own partial chain is there, the user's file is untouched.
  const Run killed =
      herd::testing::run_shell(dir, "HERD_TEST_KILL_AFTER=1500 " + exe + " run.toml --set overwrite=true --seed 5");
  CHECK(killed.rc != 0);
  CHECK_THAT(killed.out, Contains("herd-sample: overwrite = true: removed the 7 output file(s) of an earlier run of "
                                  "out/r\n"));
  for (const auto& f : {"r.h5", "r_report.txt", "r_report.html", "r_sample.txt", "r_process_3_sample.txt"}) {
    INFO(f);
    CHECK_FALSE(fs::exists(dir / "out" / f));
  }
  CHECK(fs::exists(dir / "out/r_chain.txt"));
  CHECK(slurp(dir / "out/r_chain.txt") != before[4]);
  CHECK(slurp(dir / "out/r_notes.txt") == "the user's notes\n");
  // The interrupted rerun resumes (overwrite = false) and writes every output again.
  const Run resumed = run(dir, "run.toml --quiet --seed 5");
  INFO(resumed.err);
  CHECK(resumed.rc == 0);
  for (const auto& f : {"r.h5", "r_report.txt", "r_report.html", "r_sample.txt"}) {
    INFO(f);
    CHECK(fs::exists(dir / "out" / f));
  }
}

TEST_CASE("herd-sample: a resume with another input names the settings that changed", "[apps][mcmc]") {
  // New-user report item 12: the refusal did not say which key differed.
  const auto dir = workdir("changed_input");
  write(dir / "run.toml",
        std::string("chain_size = 3000\nrandom_seed = 4\noutput_prefix = \"out/r\"\n"
                    "checkpoint_period = 1000\ncheckpoint_period_seconds = 0\n[target]\nlibrary = \"") +
            HERD_TEST_KILL_PLUGIN + "\"\nndim = 2\n");
  const Run killed = herd::testing::run_shell(
      dir, std::string("HERD_TEST_KILL_AFTER=5000 '") + HERD_SAMPLE_EXE + "' run.toml --quiet");
  REQUIRE(killed.rc != 0);
  REQUIRE(fs::exists(dir / "out/r_restart/run.ckpt"));
  const std::string record = slurp(dir / "out/r_restart/run.ckpt");
  const Run r = run(dir, "run.toml --quiet --set chain_size=3001 --seed 5");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("belongs to a run with another input (changed: chain_size (3000 in the record, 3001 now), "
                             "random_seed (4 in the record, 5 now))"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(slurp(dir / "out/r_restart/run.ckpt") == record);  // nothing earlier destroyed
  // The same input resumes (the killed run's lock file is taken over).
  const Run ok = run(dir, "run.toml --quiet");
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK_FALSE(fs::exists(dir / "out/r.lock"));
}

TEST_CASE("herd-sample: a second run of an output prefix in use is refused", "[apps][mcmc]") {
  // New-user report item 10: two runs of one prefix both ran and appended to one record.
  // Here the test holds the lock (flock) a running herd-sample would hold.
  const auto dir = workdir("prefix_lock");
  write(dir / "run.toml", std::string(kToml));
  fs::create_directories(dir / "out");
  const int fd = ::open((dir / "out/run.lock").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string me = std::to_string(::getpid());  // the holder's pid, alive
  REQUIRE(::write(fd, (me + "\n").data(), me.size() + 1) == static_cast<ssize_t>(me.size() + 1));
  const Run r = run(dir, "run.toml");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("herd-sample: error: output_prefix \"out/run\" is in use by another herd-sample run "
                             "(pid " +
                             me + ", lock file \"out/run.lock\")"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(dir / "out/run.h5"));
  ::close(fd);  // released: the run goes ahead and removes the lock file at the end
  const Run ok = run(dir, "run.toml --quiet");
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK(fs::exists(dir / "out/run.h5"));
  CHECK_FALSE(fs::exists(dir / "out/run.lock"));
}

TEST_CASE("herd-sample: a temporary of a zombie process is stale and removed; a live process's is kept",
          "[apps][mcmc]") {
  // New-user report item 9: a killed rank not yet reaped by mpiexec (state Z) kept its
  // 42 MB .h5 temporary next to the final file.
  const auto dir = workdir("zombie_tmp");
  write(dir / "run.toml", std::string(kToml));
  fs::create_directories(dir / "out");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);  // a zombie until waitpid below
  // Wait until the child has exited (state Z), without reaping it.
  for (int i = 0; i < 200; ++i) {
    std::ifstream st("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(st, line);
    if (line.find(") Z") != std::string::npos) break;
    ::usleep(10000);
  }
  const std::string zombie = "out/run.h5.tmp." + std::to_string(child) + ".1";
  const std::string live = "out/run.h5.tmp." + std::to_string(::getpid()) + ".1";
  write(dir / zombie, "stale");
  write(dir / live, "live");
  const Run r = run(dir, "run.toml --quiet");
  ::waitpid(child, nullptr, 0);
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK_FALSE(fs::exists(dir / zombie));
  CHECK(fs::exists(dir / live));
}

TEST_CASE("herd-sample: command-line syntax errors are one line in the herd form", "[apps][mcmc]") {
  // New-user report item 14: CLI11's two lines without the program's name.
  const auto dir = workdir("cli_errors");
  write(dir / "run.toml", std::string(kToml));
  for (const char* args : {"run.toml --set", "run.toml --bogus", "run.toml --seed"}) {
    const Run r = run(dir, args);
    INFO(args << "\nstderr: " << r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.rfind("herd-sample: error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  CHECK(run(dir, "--help").rc == 0);
}

TEST_CASE("herd-sample: progress is reported while a chain accepts nothing", "[apps][mcmc]") {
  // New-user report item 4: rows of _progress.txt (and terminal lines) were written only at
  // accepted states, so a stuck chain showed nothing at all. Now also every 4096 proposals
  // (ChainSink::tick). A proposal 100 times too wide without adaptation: about 20000
  // proposals between the 1st and 2nd recorded states (fixed seed), so several rows show
  // the same accepted count with growing proposal counts.
  const auto dir = workdir("progress_stuck");
  write(dir / "run.toml",
        "chain_size = 3\nrandom_seed = 3\noutput_prefix = \"out/stuck\"\nadaptive_update_count = 0\n"
        "proposal_std = [100, 100]\nprogress_report_period = 10\n"
        "[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = run(dir, "run.toml");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The first terminal line comes before any acceptance: no time left is guessed from the
  // start state alone (it said "ETA 0.1 s" for a chain that had accepted nothing).
  CHECK_THAT(r.out, Contains("ETA unknown"));
  std::ifstream in(dir / "out/stuck_progress.txt");
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::pair<long, long>> rows;
  while (std::getline(in, line)) {
    const auto c = line.find(',');
    rows.emplace_back(std::stol(line.substr(0, c)), std::stol(line.substr(c + 1)));
  }
  INFO(slurp(dir / "out/stuck_progress.txt"));
  // Rows at multiples of 4096 proposals between acceptances.
  const auto ticks = std::count_if(rows.begin(), rows.end(), [](const auto& p) { return p.first % 4096 == 0; });
  CHECK(ticks >= 3);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    CHECK(rows[i].first > rows[i - 1].first);
    CHECK(rows[i].second >= rows[i - 1].second);
  }
}

namespace {

/// Lines of `text`.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("herd-sample: a ParaMonte 1 namelist in the style of its examples runs as ParaMonte reads it",
          "[apps][mcmc]") {
  const auto dir = workdir("paramonte_nml");
  // Keys ParaMonte's examples set that herd does not act on are accepted with a note; values
  // in any case and with blanks (as Fortran reads them); a folder as outputFileName; a
  // variableNameList shorter than ndim is padded with ParaMonte's default names.
  write(dir / "paramonte.in", R"(! a ParaDRAM input in the style of ParaMonte's examples
&ParaDRAM
    description             = "three-dimensional normal, verbose chain"
    outputFileName          = "./outputs/"
    chainSize               = 1500
    randomSeed              = 2468
    restartFileFormat       = "ascii"
    inputFileHasPriority    = .true.
    systemInfoFilePath      = "./sysinfo.cache"
    chainFileFormat         = "Verbose"
    proposalModel           = "UNIFORM"
    parallelizationModel    = "single chain"
    variableNameList        = "alpha"
    proposalStartCovMat     = 1, 0, 0, 0, 1, 0, 0, 0, 1
    proposalStartStdVec     = 2, 2, 2
    delayedRejectionScaleFactorVec = 0.5
/
&ParaDISE
    chainSize               = 10
/
)");
  const Run r = run(dir, "paramonte.in --set target.builtin=normal --set target.ndim=3 --set warmup=10");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("herd-sample: note: paramonte.in:7: restartFileFormat = \"ascii\" is accepted, but"));
  CHECK_THAT(r.out, Contains("herd-sample: note: paramonte.in:8: inputFileHasPriority = true is accepted, but"));
  CHECK_THAT(r.out,
             Contains("herd-sample: note: paramonte.in:9: systemInfoFilePath = \"./sysinfo.cache\" is accepted"));
  // Keys this configuration does not read get a note each (not refused: ParaMonte's
  // namelists set such keys freely), and the resolved input comments them out.
  CHECK_THAT(r.out, Contains("herd-sample: note: paramonte.in:15: proposalStartStdVec = [2.0, 2.0, 2.0] is not read: "
                             "proposal_cov is given"));
  CHECK_THAT(r.out, Contains("herd-sample: note: paramonte.in:16: delayedRejectionScaleFactorVec = [0.5] is not "
                             "read: delayed_rejection_count is 0"));
  // Another sampler's group beside &ParaDRAM is not read, as ParaDRAM does not read it; said.
  CHECK_THAT(r.out, Contains("herd-sample: note: paramonte.in:18: namelist group &ParaDISE is not read (herd-sample "
                             "reads &ParaDRAM only, as ParaDRAM does)"));
  CHECK_THAT(r.out, Contains("herd-sample: note: --set warmup=10: warmup = 10 is not read: it applies to device = "
                             "\"cpu_batched\" and \"cuda\", and device is \"cpu\""));
  // The notes come in input order: the file's lines, then --set.
  const auto at = [&](const char* origin) { return r.out.find(std::string("herd-sample: note: ") + origin); };
  CHECK(at("paramonte.in:7:") < at("paramonte.in:8:"));
  CHECK(at("paramonte.in:9:") < at("paramonte.in:15:"));
  CHECK(at("paramonte.in:16:") < at("paramonte.in:18:"));
  CHECK(at("paramonte.in:18:") < at("--set warmup=10:"));
  CHECK(at("--set warmup=10:") != std::string::npos);
  const std::string resolved = slurp(dir / "outputs" / "ParaDRAM_run_report.txt");
  CHECK_THAT(resolved, Contains("\n# warmup = 10  # --set warmup=10; not read: it applies to device"));
  CHECK_THAT(resolved,
             Contains("\n# proposal_std = [2.0, 2.0, 2.0]  # paramonte.in:15; not read: proposal_cov is given"));
  const fs::path chain = dir / "outputs" / "ParaDRAM_run_chain.txt";
  REQUIRE(fs::exists(chain));
  const auto rows = lines_of(slurp(chain));
  REQUIRE(rows.size() > 1500);
  CHECK(rows[0].substr(rows[0].find("SampleLogFunc")) == "SampleLogFunc,alpha,SampleVariable2,SampleVariable3");
  // Verbose: every row has weight 1 (the sixth column), one row per proposal.
  for (std::size_t i = 1; i < rows.size(); i += 97) {
    std::istringstream row(rows[i]);
    std::string field;
    for (int k = 0; k < 6; ++k) std::getline(row, field, ',');
    REQUIRE(field == "1");
  }
  // The uniform proposal and the single-chain model were read (the input record says so).
  auto f = herd::io::H5File::open((dir / "outputs" / "ParaDRAM_run.h5").string());
  const std::string report = slurp(dir / "outputs" / "ParaDRAM_run_report.txt");
  CHECK_THAT(report, Contains("proposal_model = \"uniform\"") && Contains("parallelization_model = \"single_chain\"") &&
                         Contains("chain_file_format = \"verbose\""));
}

TEST_CASE("herd-sample: ParaMonte's sampleRefinementMethod qualifiers choose the refinement's chain and summary",
          "[apps][mcmc]") {
  const auto dir = workdir("refinement_method");
  // The report's refinement table: the method when not the default, and each round's stage;
  // `html_rows`: its rows as the HTML report's table should have them.
  const auto stages = [&](const std::string& prefix, std::string& header, std::string& html_rows) {
    const std::string report = slurp(dir / "out" / (prefix + "_report.txt"));
    const std::size_t at = report.find("\n== sample refinement (");
    REQUIRE(at != std::string::npos);
    const std::size_t eol = report.find('\n', at + 1);
    header = report.substr(at + 1, eol - at - 1);
    std::set<std::string> seen;
    std::istringstream rows(report.substr(report.find('\n', eol + 1) + 1));
    std::string line;
    while (std::getline(rows, line) && !line.empty()) {
      std::istringstream row(line);
      std::string round, stage, compact, verbose, iac;
      row >> round >> stage >> compact >> verbose >> iac;
      seen.insert(stage);
      html_rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", round, stage,
                               compact, verbose, iac);
    }
    return seen;
  };
  const std::string target = " --set target.builtin=normal --set target.ndim=2 --set target.rho=0.9";
  int runs = 0;
  for (const auto& [method, want_header, want_stages] :
       std::vector<std::tuple<std::string, std::string, std::set<std::string>>>{
           {"BatchMeans", "== sample refinement (batch-means integrated autocorrelation) ==", {"compact", "verbose"}},
           {"BatchMeans compact-Max",
            "== sample refinement (batch-means integrated autocorrelation, "
            "batch_means-compact-max) ==",
            {"compact"}},
           {"batchmeans-verbose",
            "== sample refinement (batch-means integrated autocorrelation, batch_means-verbose) ==",
            {"verbose"}},
           {"MaxCumSumAutoCorr-median",
            "== sample refinement (integrated autocorrelation, max_cumsum_autocorr-median) ==",
            {"compact", "verbose"}},
           {"CutOffAutoCorr compact",
            "== sample refinement (integrated autocorrelation, cutoff_autocorr-compact) ==",
            {"compact"}}}) {
    INFO(method);
    const std::string prefix = fmt::format("r{}", ++runs);
    write(dir / "run.nml",
          fmt::format("&ParaDRAM\n  chainSize = 4000\n  randomSeed = 11\n  outputFileName = 'out/{}'\n  "
                      "sampleRefinementMethod = '{}'\n/\n",
                      prefix, method));
    const Run r = run(dir, "run.nml --quiet" + target);
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    std::string header, html_rows;
    CHECK(stages(prefix, header, html_rows) == want_stages);
    CHECK(header == want_header);
    // The HTML report has the same table (it had none), the method in its caption.
    const std::string page = slurp(dir / "out" / (prefix + "_report.html"));
    const std::string open = "== sample refinement (", close = ") ==";
    const std::string label = want_header.substr(open.size(), want_header.size() - open.size() - close.size());
    CHECK_THAT(page, Contains(">Sample refinement</h2>") &&
                         Contains(html_rows + "</tbody></table>\n<p>Estimator: " + label + ". The refined sample"));
  }
  // A qualifier ParaMonte does not have, and an estimator it does not have, are refused.
  write(dir / "bad.nml", "&ParaDRAM\n  chainSize = 400\n  sampleRefinementMethod = 'BatchMeans-maxx'\n/\n");
  Run r = run(dir, "bad.nml" + target);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("herd-sample: error: bad.nml:3: key \"sampleRefinementMethod\" is \"BatchMeans-maxx\", "
                             "but \"maxx\" is not a qualifier: expected compact or verbose"));
  r = run(dir, "bad.nml --set sample_refinement_method=MaxCumSum" + target);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("herd-sample: error: --set sample_refinement_method=MaxCumSum: key "
                             "\"sample_refinement_method\" is \"MaxCumSum\", but \"maxcumsum\" is not an estimator: "
                             "expected BatchMeans, CutOffAutoCorr or MaxCumSumAutoCorr"));
}

TEST_CASE("herd-sample: every problem of an input is reported at once, one line each", "[apps][mcmc]") {
  const auto dir = workdir("all_errors");
  write(dir / "bad.nml",
        "&ParaDRAM\n  chainSize = -3\n  proposalModel = 'cauchy'\n  nosuchKey = 1\n"
        "  outputRealPrecision = 40\n/\n");
  const Run r = run(dir, "bad.nml --set target.builtin=normal --set target.ndim=2 --output out/x");
  INFO(r.err);
  CHECK(r.rc == 2);
  const auto lines = lines_of(r.err);
  REQUIRE(lines.size() == 4);
  CHECK_THAT(lines[0], Contains("herd-sample: error: bad.nml:2: key \"chainSize\""));
  CHECK_THAT(lines[1], Contains("herd-sample: error: bad.nml:3: key \"proposalModel\""));
  CHECK_THAT(lines[2], Contains("herd-sample: error: bad.nml:4: unknown key \"nosuchKey\""));
  CHECK_THAT(lines[3], Contains("herd-sample: error: bad.nml:5: key \"outputRealPrecision\""));
  CHECK_FALSE(fs::exists(dir / "out"));
  // Problems found across keys (lengths, ranges that depend on ndim) come together too.
  write(dir / "bad.toml",
        "start_point = [1.0]\ndelayed_rejection_count = 20\nvariable_names = [\"a\", \"b\", \"c\"]\n"
        "[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run t = run(dir, "bad.toml --output out/y");
  INFO(t.err);
  CHECK(t.rc == 2);
  const auto tl = lines_of(t.err);
  REQUIRE(tl.size() == 3);
  CHECK_THAT(t.err, Contains("key \"start_point\" has 1 value,") && Contains("key \"delayed_rejection_count\" is 20") &&
                        Contains("key \"variable_names\" has 3 names"));
  for (const auto& l : tl) CHECK(l.rfind("herd-sample: error: bad.toml:", 0) == 0);
  // In the input's line order (the checks' own order put start_point first).
  write(dir / "order.toml", "proposal_std = [1.0]\nstart_point = [1.0]\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run o = run(dir, "order.toml --output out/z");
  const auto ol = lines_of(o.err);
  REQUIRE(ol.size() == 2);
  CHECK_THAT(ol[0], Contains("order.toml:1: key \"proposal_std\""));
  CHECK_THAT(ol[1], Contains("order.toml:2: key \"start_point\""));
}

TEST_CASE("herd-sample --version and --help-keys", "[apps][mcmc]") {
  const auto dir = workdir("help_keys");
  const Run v = run(dir, "--version");
  CHECK(v.rc == 0);
  CHECK(v.out == std::string("herd-sample (herd) ") + HERD_VERSION_STRING + "\n");
  const Run h = run(dir, "--help-keys");
  REQUIRE(h.rc == 0);
  // Type, default, ParaMonte names and meaning of a key, and every key of the schema.
  CHECK_THAT(h.out, Contains("chain_size : an integer >= 1 (default 100000) (also \"chainSize\", \"outputChainSize\")\n"
                             "    accepted (unique) states"));
  herd::io::Schema schema("herd-sample");
  herd::mcmc::declare_sampler_specs(schema);
  auto listed = [&](const std::string& key) {
    std::string needle(1, '\n');
    needle.append(key).append(" : ");
    return h.out.find(needle) != std::string::npos;
  };
  for (const auto& k : schema.keys()) CHECK(listed(k.name()));
  for (const char* k : {"target.model", "target.library", "data.file", "restart_file_format", "domain_ball_cov"})
    CHECK(listed(k));
  // A relative output_prefix is relative to the working directory, a relative
  // target.library to the input file's folder: the help says which (it said neither).
  CHECK_THAT(h.out, Contains("output_prefix : ") && Contains("a relative prefix is relative to the working directory"));
  fs::create_directories(dir / "job");
  write(dir / "job" / "run.toml",
        "chain_size = 500\nrandom_seed = 3\noutput_prefix = \"out/rel\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run rel = run(dir, "job/run.toml --quiet");
  INFO(rel.err);
  CHECK(rel.rc == 0);
  CHECK(fs::exists(dir / "out" / "rel.h5"));
  CHECK(!fs::exists(dir / "job" / "out"));
  // The installed example input runs as it is.
  const fs::path example = fs::path(HERD_SOURCE_DIR) / "examples" / "sample" / "run.toml";
  std::string args = example.string();
  args.insert(args.begin(), '\'');
  args.append("' --quiet --set chain_size=2000 --output out/ex");
  const Run e = run(dir, args);
  INFO(e.err);
  CHECK(e.rc == 0);
  CHECK(fs::exists(dir / "out" / "ex.h5"));
}

TEST_CASE("herd-sample: a plugin library path is relative to the input file's folder", "[apps][mcmc]") {
  const auto dir = workdir("plugin_relative");
  fs::create_directories(dir / "model");
  fs::copy_file(HERD_TEST_PLUGIN_PATH, dir / "model" / "gauss_plugin.so");
  write(dir / "model" / "run.toml",
        "chain_size = 500\nrandom_seed = 3\noutput_prefix = \"out/p\"\n"
        "[target]\nlibrary = \"gauss_plugin.so\"\nndim = 2\n");
  // Run from the parent folder: the library is found next to the input file.
  const Run r = run(dir, "model/run.toml --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(fs::exists(dir / "out" / "p.h5"));
  // Under --set a relative path is the working directory's.
  const Run s = run(dir, "model/run.toml --quiet --set target.library=gauss_plugin.so --output out/q");
  CHECK(s.rc == 2);
  CHECK_THAT(s.err, Contains("gauss_plugin.so"));
  // Run from the input's own folder: a bare name is that folder's file, not one dlopen looks
  // up in the system's library folders (which did not find it).
  const Run t = run(dir / "model", "run.toml --quiet --output out/t");
  INFO(t.err);
  CHECK(t.rc == 0);
  CHECK(fs::exists(dir / "model" / "out" / "t.h5"));
  // Nor is a system library's name looked up there: a file of that name here is meant.
  const Run u = run(dir, "model/run.toml --quiet --set target.library=libm.so.6 --output out/u");
  CHECK(u.rc == 2);
  CHECK_THAT(u.err, Contains("libm.so.6"));
  CHECK_THAT(u.err, Contains("No such file"));
}

#ifdef HERD_DIAGNOSE_EXE
TEST_CASE("herd-diagnose reads herd-sample's own chain and sample files as one chain each", "[apps][mcmc]") {
  const auto dir = workdir("diagnose_own");
  write(dir / "run.toml", kToml);
  REQUIRE(run(dir, "run.toml --quiet").rc == 0);
  const Run d = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/run_chain.txt --json");
  INFO(d.err);
  REQUIRE(d.rc == 0);
  const auto j = nlohmann::ordered_json::parse(d.out);
  REQUIRE(j.size() == 3);  // SampleLogFunc, a, b: not 10 "chains" of every column
  // Direct computation: the compact chain's rows expanded by their weights.
  std::vector<double> a;
  const auto rows = lines_of(slurp(dir / "out" / "run_chain.txt"));
  for (std::size_t i = 1; i < rows.size(); ++i) {
    std::vector<double> v;
    std::istringstream row(rows[i]);
    for (std::string f; std::getline(row, f, ',');) v.push_back(std::stod(f));
    for (int k = 0; k < static_cast<int>(v[5]); ++k) a.push_back(v[7]);
  }
  const auto s = herd::mcmc::summarize(herd::mcmc::DrawsView(a, 1, a.size()));
  CHECK(j["a"]["mean"].get<double>() == s.mean);
  CHECK(j["a"]["rhat"].get<double>() == s.rhat);
  CHECK(j["a"]["ess_bulk"].get<double>() == s.ess_bulk);
  CHECK(j["a"]["rhat"].get<double>() < 1.1);
  const Run ds = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/run_sample.txt --json");
  REQUIRE(ds.rc == 0);
  CHECK(nlohmann::json::parse(ds.out).size() == 3);
}

TEST_CASE("herd-diagnose on herd-sample's .h5: herd-sample's names, order and numbers (serial and cpu_batched)",
          "[apps][mcmc]") {
  // kidscore_interaction (the default target): a vector beta[1..4] beside log_sigma and the
  // derived sigma; a 10-D normal: x1..x10, which HDF5's name order puts as x1, x10, x2, ...
  const auto dir = workdir("diagnose_h5");
  const char* normal10 = " --set target.builtin=normal --set target.ndim=10";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"kid", "--set chain_size=5000"},
      {"n10", std::string("--set chain_size=5000") + normal10},
      {"b10", std::string("--set device=cpu_batched --set chains_per_rank=8 --set chain_size=500") + normal10}};
  for (const auto& [prefix, args] : runs) {
    INFO(prefix);
    REQUIRE(run(dir, fmt::format("{} --quiet --output out/{}", args, prefix)).rc == 0);
    const std::string h5 = (dir / "out" / (prefix + ".h5")).string();
    const Run d = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/" + prefix + ".h5 --json");
    INFO(d.err);
    REQUIRE(d.rc == 0);
    const auto j = nlohmann::ordered_json::parse(d.out);
    auto f = herd::io::H5File::open(h5);
    const auto names = f.open_dataset("diagnostics/variable").read_strings();
    std::vector<std::string> got;
    for (auto it = j.begin(); it != j.end(); ++it) got.push_back(it.key());
    CHECK(got == names);
    // The same draws, so herd-sample's diagnostics to the last bit.
    for (const char* field : {"mean", "sd", "q50", "ess_bulk", "ess_tail", "rhat"}) {
      const auto v = f.open_dataset(std::string("diagnostics/") + field).read<double>();
      REQUIRE(v.size() == names.size());
      for (std::size_t k = 0; k < names.size(); ++k) {
        INFO(field << " of " << names[k]);
        CHECK(j[names[k]][field].get<double>() == v[k]);
      }
    }
  }
  // The vector's elements as herd-sample names them, 1-based.
  auto kid = herd::io::H5File::open((dir / "out" / "kid.h5").string());
  CHECK(kid.open_dataset("diagnostics/variable").read_strings() ==
        std::vector<std::string>{"beta[1]", "beta[2]", "beta[3]", "beta[4]", "log_sigma", "sigma"});
}

// herd-sample's summary table said `name` where herd-diagnose's says `parameter`, with the
// MCSE to 6 significant digits instead of 3; its banner said "5 variables" above a table of
// 6 rows (the derived sigma uncounted).
TEST_CASE("herd-sample's banner counts the table's rows, and its table is herd-diagnose's on the same draws",
          "[apps][mcmc]") {
  const auto dir = workdir("table_as_diagnose");
  // kidscore_interaction (the default target): 5 variables and the derived sigma.
  const Run s = run(dir, "--set chain_size=5000 --output out/kid");
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  CHECK_THAT(s.out, Contains(", 5 variables, 1 derived quantity, chain_size 5000,"));
  // Piped, the sampling's progress still ends with its final counts (it showed only its first
  // line, the next being due 10 s later).
  CHECK_THAT(s.out, Contains("sampling: steps 1000 ") && Contains(" accepted 5000/5000 "));
  const Run d = herd::testing::run_app(HERD_DIAGNOSE_EXE, dir, "out/kid.h5");
  INFO(d.err);
  REQUIRE(d.rc == 0);
  // herd-sample's table: from its header to the blank line after its rows.
  const auto lines = lines_of(s.out);
  auto head =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("parameter ", 0) == 0; });
  REQUIRE(head != lines.end());
  std::string table;
  for (auto it = head; it != lines.end() && !it->empty(); ++it) table += *it + "\n";
  CHECK(std::count(table.begin(), table.end(), '\n') == 7);  // the header and 6 rows
  CHECK(table == d.out);
  CHECK_THAT(table, Contains("mcse_mean") && Contains("\nsigma "));
}
#endif

TEST_CASE(
    "herd-sample: vector parameters are ArviZ variables with a dimension; every group opens in xarray "
    "without phony_dims",
    "[apps][mcmc]") {
  // eight_schools_noncentered: theta_trans[1..8] (sampled) and theta[1..8] (derived) are
  // vectors; mu and tau scalars. Two chains (multi_chain) so that the KS tables are written.
  const auto dir = workdir("xarray_vectors");
  REQUIRE(run(dir,
              "--quiet --set target.model=eight_schools_noncentered --set chain_size=1500 --set random_seed=9 "
              "--set parallelization_model=multi_chain --set chains_per_rank=2 --output out/es")
              .rc == 0);
  write(dir / "check.py", R"(import sys, warnings
import numpy as np, h5py, xarray as xr
warnings.simplefilter("error")  # a phony_dims or any other warning fails the check
path = sys.argv[1]
with h5py.File(path) as f:
    groups = [k for k in f if isinstance(f[k], h5py.Group)]
assert set(groups) >= {"posterior", "sample_stats", "sample", "chain_compact", "diagnostics", "input"}, groups
for g in groups:
    xr.open_dataset(path, group=g, engine="h5netcdf").load()
post = xr.open_dataset(path, group="posterior", engine="h5netcdf")
assert post["theta_trans"].dims == ("chain", "draw", "theta_trans_dim_0"), post["theta_trans"].dims
assert post["theta"].dims == ("chain", "draw", "theta_dim_0"), post["theta"].dims
np.testing.assert_array_equal(post["theta_dim_0"].values, np.arange(8))
assert post["mu"].dims == ("chain", "draw")
assert not any("[" in v for v in post.data_vars), list(post.data_vars)
# Values: element j of chain c is the compact chain's column theta_trans[j+1] expanded by
# its weights after the burn-in (the chains cut to the shortest).
cc = xr.open_dataset(path, group="chain_compact", engine="h5netcdf")
names = [n.decode() if isinstance(n, bytes) else str(n) for n in cc["variable"].values]
chain_of, weight, state = cc["chain"].values, cc["weight"].values, cc["state"].values
burnin = cc["burnin"].values
ndraw = post.sizes["draw"]
for c in range(2):
    rows = np.flatnonzero(chain_of == c)[burnin[c]:]
    for j in (0, 5):
        col = names.index("theta_trans[%d]" % (j + 1))
        verbose = np.repeat(state[rows, col], weight[rows])[:ndraw]
        np.testing.assert_array_equal(post["theta_trans"].values[c, :, j], verbose)
s = xr.open_dataset(path, group="sample", engine="h5netcdf")
assert s["theta"].dims == ("sample", "theta_dim_0"), s["theta"].dims
d = xr.open_dataset(path, group="diagnostics", engine="h5netcdf")
assert "theta[1]" in [str(v) for v in d["variable"].values]
print("ok")
)");
  const std::string cmd = "/usr/bin/python3 '" + (dir / "check.py").string() + "' '" +
                          (dir / "out" / "es.h5").string() + "' > '" + (dir / "py.txt").string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(slurp(dir / "py.txt"));
  CHECK(rc == 0);
}

TEST_CASE("herd-sample: a complete run keeps only run.ckpt of its restart record; rerun and extend still work",
          "[apps][mcmc]") {
  // Before, <prefix>_restart/ kept the chain record and its checkpoint (the bulk of the
  // run's disk footprint) after the run had completed.
  const auto dir = workdir("restart_trim");
  write(dir / "run.toml", kToml);
  const Run r = run(dir, "run.toml --quiet --set checkpoint_period=1000");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::vector<std::string> record;
  for (const auto& e : fs::directory_iterator(dir / "out/run_restart")) record.push_back(e.path().filename().string());
  CHECK(record == std::vector<std::string>{"run.ckpt"});
  // The same input again: reported complete from run.ckpt, nothing redone.
  const std::string chain = slurp(dir / "out/run_chain.txt");
  const Run again = run(dir, "run.toml --set checkpoint_period=1000");
  CHECK(again.rc == 0);
  CHECK_THAT(again.out, Contains("is complete"));
  CHECK(slurp(dir / "out/run_chain.txt") == chain);
  // outputStatus = "extend" continues the complete run in out/run_run2 from its last state.
  const Run ext = run(dir, "run.toml --quiet --set checkpoint_period=1000 --set output_status=extend");
  INFO(ext.err);
  REQUIRE(ext.rc == 0);
  REQUIRE(fs::exists(dir / "out/run_run2.h5"));
  const auto first_row = [](const std::string& text) {
    const auto a = text.find('\n') + 1;
    return text.substr(a, text.find('\n', a) - a);
  };
  const auto last_row = [](const std::string& text) {
    const auto b = text.rfind('\n', text.size() - 2) + 1;
    return text.substr(b);
  };
  // The extension's first state is the complete run's last one (the variables: the last two
  // columns of the compact chain rows).
  const auto tail_cols = [](const std::string& row) {
    const auto b = row.rfind(',', row.rfind(',') - 1);
    return row.substr(b + 1, row.find_last_not_of('\n') - b);
  };
  CHECK(tail_cols(first_row(slurp(dir / "out/run_run2_chain.txt"))) == tail_cols(last_row(chain)));
  // With the given random_seed = 7 the extension takes a seed of its own: before, it drew the
  // same random numbers as the run it continues (its draws correlated 0.7 with that run's).
  const std::string report2 = slurp(dir / "out/run_run2_report.txt");
  CHECK_THAT(report2, Contains("derived from random_seed and the run number 2"));
  CHECK_THAT(slurp(dir / "out/run_report.txt"), Contains("\nrandom seed                       7\n"));
  CHECK_THAT(report2, !Contains("\nrandom seed                       7\n"));
  std::vector<std::string> record2;
  for (const auto& e : fs::directory_iterator(dir / "out/run_run2_restart"))
    record2.push_back(e.path().filename().string());
  CHECK(record2 == std::vector<std::string>{"run.ckpt"});
}

TEST_CASE("herd-sample multi_chain: the pairwise KS table tests the refined samples, and converged chains pass it",
          "[apps][mcmc]") {
  // The table tested the whole post-burn-in verbose chains: their draws are autocorrelated
  // (an integrated autocorrelation time of about 10 here), so the KS test's independence
  // assumption fails and four converged chains (R-hat 1.000x) got p-values of 0.000x. The
  // refined samples are thinned by their integrated autocorrelation time (ParaDRAM tests
  // these), so under convergence each p-value is close to uniform on [0, 1]: the median of
  // the 12 (6 pairs x 2 variables) is below 0.05 only with a probability far below 1%
  // (12 independent uniforms: about 2e-5; the pairs share chains, which widens it a little).
  // Seed fixed up front.
  const auto dir = workdir("ks_refined");
  write(dir / "run.toml", kToml);
  const Run r = run(dir,
                    "run.toml --quiet --set chain_size=20000 --set parallelization_model=multi_chain --set "
                    "chains_per_rank=4");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  herd::io::H5File f = herd::io::H5File::open((dir / "out/run.h5").string());
  const auto p = f.open_group("diagnostics").read<double>("ks_p_value");  // [variable, chain, chain]
  const auto rhat = f.open_group("diagnostics").read<double>("rhat");
  REQUIRE(p.size() == 2 * 4 * 4);
  for (double x : rhat) CHECK(x < 1.01);
  std::vector<double> off;
  for (std::size_t v = 0; v < 2; ++v)
    for (std::size_t a = 0; a < 4; ++a)
      for (std::size_t b = a + 1; b < 4; ++b) off.push_back(p[v * 16 + a * 4 + b]);
  std::sort(off.begin(), off.end());
  INFO("p-values: " << off[0] << " .. " << off.back());
  CHECK((off[5] + off[6]) / 2 > 0.05);
  const std::string rep = slurp(dir / "out/run_report.txt");
  CHECK_THAT(rep, Contains("refined samples"));
}

TEST_CASE("herd-sample: convergence warnings (R-hat, ESS, acceptance) with what to try, terminal and report",
          "[apps][mcmc]") {
  // The serial run warned only below an acceptance rate of 1e-3. Now every engine warns
  // through one helper (convergence_warnings) for R-hat > 1.01, bulk- or tail-ESS < 100 per
  // chain (up to 4 chains) and an acceptance rate outside [0.05, 0.8]. 300 states of a
  // 2-D normal (fixed seed): ESS far below 100.
  const auto dir = workdir("warnings");
  write(dir / "run.toml", kToml);
  const Run r = run(dir, "run.toml --set chain_size=300");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const std::string rep = slurp(dir / "out/run_report.txt");
  for (const std::string& text : {r.out, rep})
    CHECK_THAT(text, Contains("WARNING: Bulk- or tail-ESS is below 100 (100 per chain for 1 chain)") &&
                         Contains("Run longer (raise chain_size)"));
  CHECK_THAT(rep, Contains("== convergence warnings =="));
  // A long run of the same target passes every check: no warning.
  const auto ok = workdir("warnings_ok");
  write(ok / "run.toml", kToml);
  const Run r2 = run(ok, "run.toml --set chain_size=5000");
  INFO(r2.out);
  REQUIRE(r2.rc == 0);
  CHECK_THAT(r2.out, !Contains("WARNING"));
  CHECK_THAT(slurp(ok / "out/run_report.txt"), !Contains("WARNING"));
}

TEST_CASE("herd-sample multi_chain: superchains with their own random starts, and nested R-hat over them",
          "[apps][mcmc]") {
  // Chains were grouped into superchains by contiguous index, but either all chains shared
  // one start or each had its own: Margossian et al. (2024) need K superchains, each from one
  // start shared by its M chains. 2 superchains x 2 chains of a 2-D normal.
  const auto dir = workdir("superchains");
  write(dir / "run.toml",
        "chain_size = 2000\nrandom_seed = 5\noutput_prefix = \"out/run\"\n"
        "parallelization_model = \"multi_chain\"\nchains_per_rank = 4\nsuperchains = 2\n"
        "random_start_point = true\nrandom_start_point_scope = \"superchain\"\n"
        "random_start_point_domain_lower = [-5.0, -5.0]\n"
        "random_start_point_domain_upper = [5.0, 5.0]\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = run(dir, "run.toml --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  herd::io::H5File f = herd::io::H5File::open((dir / "out/run.h5").string());
  // The start states (step 0) of the compact chains: chains {0, 1} and {2, 3} share theirs.
  const auto cc = f.open_group("chain_compact");
  const auto step = cc.read<std::uint64_t>("step");
  const auto chain = cc.read<std::int64_t>("chain");
  const auto state = cc.read<double>("state");
  std::vector<std::vector<double>> start(4);
  for (std::size_t i = 0; i < step.size(); ++i)
    if (step[i] == 0) start[static_cast<std::size_t>(chain[i])] = {state[2 * i], state[2 * i + 1]};
  CHECK(start[0] == start[1]);
  CHECK(start[2] == start[3]);
  CHECK(start[0] != start[2]);
  // Nested R-hat of the report and the .h5 is the hand computation with this grouping
  // (K = 2 of contiguous chains), not with another one.
  const auto nested = f.open_group("diagnostics").read<double>("nested_rhat");
  REQUIRE(nested.size() == 2);
  const auto post = f.open_group("posterior");
  const char* names[2] = {"x1", "x2"};
  for (std::size_t j = 0; j < 2; ++j) {
    const auto x = post.read<double>(names[j]);
    const std::size_t draws = x.size() / 4;
    CHECK(nested[j] == Approx(herd::testing::nested_rhat_by_hand(x, 4, draws, 2)).epsilon(1e-12));
    CHECK(nested[j] != Approx(herd::testing::nested_rhat_by_hand(x, 4, draws, 4)).epsilon(1e-9));
  }
  CHECK_THAT(slurp(dir / "out/run_report.txt"),
             Contains("nested R-hat (Margossian et al. 2024): 2 superchains of 2 contiguous chains, each superchain "
                      "from its own random start"));
  // Superchains that do not divide the chains: one line, exit 2.
  const Run bad = run(dir, "run.toml --quiet --set superchains=3 --output out/bad");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.err, Contains("superchains") && Contains("4 chains"));
}

TEST_CASE("herd-sample: text chain and sample values are printf's %.{p-1}e of the .h5's values, padded",
          "[apps][mcmc]") {
  // The text files format reals without fmt (std::to_chars): every value of every row must be
  // exactly what "%.{p-1}e" prints (fmt's "{:.{p-1}e}"), right-aligned in the column width.
  const auto dir = workdir("real_format");
  std::string toml = kToml;
  toml += "\n";
  toml.insert(toml.find("[target]"), "output_real_precision = 9\noutput_column_width = 19\noutput_delimiter = \";\"\n");
  write(dir / "run.toml", toml);
  const Run r = run(dir, "run.toml --quiet");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  auto f = herd::io::H5File::open((dir / "out" / "run.h5").string());
  const auto state = f.open_dataset("chain_compact/state").read<double>();
  const auto lp = f.open_dataset("chain_compact/log_density").read<double>();
  auto cell = [](double v) {
    std::string s = fmt::format("{:.8e}", v);
    return std::string(s.size() < 19 ? 19 - s.size() : 0, ' ') + s;
  };
  std::ifstream chain(dir / "out" / "run_chain.txt");
  std::string line;
  std::getline(chain, line);  // header
  std::size_t i = 0;
  for (; std::getline(chain, line); ++i) {
    REQUIRE(i < lp.size());
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ';');) cells.push_back(c);
    REQUIRE(cells.size() == 9);
    INFO("row " << i << ": " << line);
    CHECK(cells[6] == cell(lp[i]));
    CHECK(cells[7] == cell(state[2 * i]));
    CHECK(cells[8] == cell(state[2 * i + 1]));
    if (!(cells[6] == cell(lp[i]) && cells[7] == cell(state[2 * i]))) break;
  }
  CHECK(i == lp.size());
  // The sample file: rows of compact states (log density, then the variables).
  std::ifstream sample(dir / "out" / "run_sample.txt");
  std::getline(sample, line);
  REQUIRE(std::getline(sample, line));
  const std::string first_lp = line.substr(0, line.find(';'));
  CHECK(std::find_if(lp.begin(), lp.end(), [&](double v) { return cell(v) == first_lp; }) != lp.end());
}

TEST_CASE("herd-sample: progress for every phase, and the report gives each phase's time", "[apps][mcmc]") {
  // The run printed its last sampling line and then nothing while it refined, diagnosed and
  // wrote its files; the report had no time per phase.
  const auto dir = workdir("phases");
  write(dir / "run.toml", kToml);
  const Run r = run(dir, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  // Not a terminal: the first progress line of sampling at once (then every 10 s).
  CHECK_THAT(r.out, Contains("sampling: steps ") && Contains("ETA "));
  const std::string rep = slurp(dir / "out/run_report.txt");
  CHECK_THAT(rep, Contains("== time per phase (this invocation") && Contains("\nsampling ") &&
                      Contains("\npost-processing: burn-in, posterior draws, refined sample ") &&
                      Contains("\npost-processing: diagnostics") &&
                      Contains("\nwriting the chain and sample text files ") && Contains("\nwriting out/run.h5 ") &&
                      Contains("\nwriting out/run_report.html ") && Contains("\ntotal "));
}

TEST_CASE("docs/dram.md's Python example reading the .h5 runs as written on herd-sample's default run",
          "[apps][mcmc]") {
  // The first ```python block of "Reading the `.h5` in Python" (h5py and xarray; the ArviZ
  // block needs ArviZ, which the test machine lacks), run with warnings as errors in the
  // folder where herd-sample without an input file wrote out/kidscore_interaction.h5.
  const std::string doc = slurp(fs::path(HERD_SOURCE_DIR) / "docs" / "dram.md");
  const auto section = doc.find("### Reading the `.h5` in Python");
  REQUIRE(section != std::string::npos);
  const std::string open = "```python\n";
  const auto begin = doc.find(open, section);
  REQUIRE(begin != std::string::npos);
  const auto end = doc.find("```", begin + open.size());
  REQUIRE(end != std::string::npos);
  const auto dir = workdir("doc_python");
  write(dir / "example.py", doc.substr(begin + open.size(), end - begin - open.size()));
  REQUIRE(run(dir, "--quiet --set chain_size=2000").rc == 0);
  const std::string cmd = "cd '" + dir.string() + "' && /usr/bin/python3 -W error example.py > py.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(slurp(dir / "py.txt"));
  CHECK(rc == 0);
}
