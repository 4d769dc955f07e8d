// herd-sample with device = "cpu_batched": one <prefix>.h5 with posterior
// [chain, draw] per variable and sample_stats/lp, the report, moments of a known target,
// reproducibility, global chain ids under mpiexec (2 x 128 chains == 1 x 256 chains; pooled
// adaptation 1 x 192 == 2 x 96 == 3 x 64), a
// posteriordb target, and the input errors (cuda without a device, bad keys, overwrite).
// The test itself is one process; it starts herd-sample (through mpiexec when available).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "app_runner.hpp"
#include "nested_rhat_by_hand.hpp"

#include "herd/examples/model_targets.hpp"
#include "herd/io/hdf5.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

using herd::testing::run_shell;

/// herd-sample with `args` in `dir`, under `mpiexec -n ranks` when ranks > 0.
Run sample(const fs::path& dir, int ranks, const std::string& args, const std::string& env = "") {
  const std::string exe = std::string("'") + HERD_SAMPLE_EXE + "' ";
#ifdef HERD_MPIEXEC
  if (ranks > 0) return run_shell(dir, env + "'" + HERD_MPIEXEC + "' -n " + std::to_string(ranks) + " " + exe + args);
#endif
  return run_shell(dir, env + exe + args);
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A 5-D normal, mean mu, unit variances, AR(1) correlation 0.5; one DR stage.
const char* kToml = R"(device = "cpu_batched"
chains_per_rank = 256
warmup = 500
chain_size = 1000
thin = 5
random_seed = 2026
output_prefix = "out/run"
start_point = [0.5, 0.5, 0.5, 0.5, 0.5]
delayed_rejection_count = 1
[target]
builtin = "normal"
ndim = 5
mean = [1.0, -1.0, 0.0, 2.0, 0.5]
rho = 0.5
)";
const double kMu[5] = {1.0, -1.0, 0.0, 2.0, 0.5};
const char* const kVars[5] = {"x1", "x2", "x3", "x4", "x5"};

/// Every dataset of the run's posterior and sample_stats/lp, in a fixed order.
std::vector<std::vector<double>> datasets(const fs::path& h5) {
  const auto f = herd::io::H5File::open(h5.string());
  std::vector<std::vector<double>> out;
  for (const char* v : kVars) out.push_back(f.open_dataset(std::string("posterior/") + v).read<double>());
  out.push_back(f.open_dataset("sample_stats/lp").read<double>());
  return out;
}

}  // namespace

TEST_CASE("herd-sample device = cpu_batched: one HDF5 file, the report, the target's moments", "[apps][mcmc]") {
  const auto dir = workdir("normal");
  write(dir / "run.toml", kToml);
  const Run r = sample(dir, 0, "run.toml");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("ess_bulk") && Contains("256 chains x 200 draws") && Contains("chain-steps/s"));
  // The terminal ends with the output files, listed as a serial run lists them.
  CHECK_THAT(r.out,
             Catch::Matchers::EndsWith("\noutputs:\n  out/run_report.txt\n  out/run_report.html\n  out/run.h5\n"));
  // Exactly the listed outputs.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir / "out")) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"run.h5", "run_report.html", "run_report.txt",
                                          "run_restart"});  // checkpoints by default
  std::vector<std::string> record;
  for (const auto& e : fs::directory_iterator(dir / "out" / "run_restart"))
    record.push_back(e.path().filename().string());
  std::sort(record.begin(), record.end());
  CHECK(record == std::vector<std::string>{"run.ckpt"});  // complete: draws.bin and batched.ckpt removed
  const std::string rep = slurp(dir / "out" / "run_report.txt");
  CHECK_THAT(rep, Contains("== resolved input ==") && Contains("device = \"cpu_batched\"") &&
                      Contains("nested R-hat") && Contains("chain-steps/s") && Contains("acceptance after warm-up") &&
                      Contains("checkpoints: ") && Contains("_restart/ (every 5 s)") && Contains("rhat"));

  const auto f = herd::io::H5File::open((dir / "out" / "run.h5").string());
  const std::size_t m = 256, n = 200;
  CHECK(f.open_dataset("posterior/chain").read<std::int64_t>() == [] {
    std::vector<std::int64_t> v(256);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }());
  CHECK(f.open_dataset("posterior/draw").read<std::int64_t>().size() == n);
  CHECK(f.open_dataset("sample_stats/lp").shape() == std::vector<hsize_t>{m, n});
  // Moments: chains are independent given the frozen proposal, so the spread of the chain
  // means (variances) gives the standard error of their average. |error| < 5 SE: a
  // false-failure rate below 6e-7 per check (10 checks).
  for (int j = 0; j < 5; ++j) {
    const auto ds = f.open_dataset(std::string("posterior/") + kVars[j]);
    REQUIRE(ds.shape() == std::vector<hsize_t>{m, n});
    const std::vector<double> v = ds.read<double>();
    std::vector<double> cm(m), cv(m);
    double sum = 0.0, sq = 0.0;
    for (std::size_t c = 0; c < m; ++c) {
      double s = 0.0, s2 = 0.0;
      for (std::size_t t = 0; t < n; ++t) {
        s += v[c * n + t];
        s2 += (v[c * n + t] - kMu[j]) * (v[c * n + t] - kMu[j]);
      }
      cm[c] = s / n;
      cv[c] = s2 / n;
      sum += s;
      sq += s2;
    }
    auto se = [&](const std::vector<double>& x) {
      const double mu = std::accumulate(x.begin(), x.end(), 0.0) / x.size();
      double q = 0.0;
      for (double a : x) q += (a - mu) * (a - mu);
      return std::sqrt(q / (x.size() - 1) / x.size());
    };
    INFO("variable " << kVars[j]);
    CHECK(std::abs(sum / (m * n) - kMu[j]) < 5.0 * se(cm));
    CHECK(std::abs(sq / (m * n) - 1.0) < 5.0 * se(cv));
  }

  // h5py (ArviZ's reader), when this machine has it: the netCDF dimensions are (chain, draw).
  if (std::system("python3 -c 'import h5py' > /dev/null 2>&1") == 0) {
    const Run p = run_shell(dir,
                            "python3 -c \"import h5py; f = h5py.File('out/run.h5', 'r'); d = f['posterior/x3']; "
                            "assert d.shape == (256, 200), d.shape; "
                            "assert [s[0].name for s in d.dims] == ['/posterior/chain', '/posterior/draw']; "
                            "assert f['sample_stats/lp'].shape == (256, 200)\"");
    INFO(p.err);
    CHECK(p.rc == 0);
  }

  SECTION("the same seed gives byte-identical datasets; another seed does not") {
    // A temporary of a killed run (its process is gone: pid above any pid_max) is removed;
    // one of a live process (this test) is kept.
    fs::create_directories(dir / "out2");
    const fs::path stale = dir / "out2" / "run.h5.tmp.2147483000.0";
    const fs::path live = dir / "out2" / ("run.h5.tmp." + std::to_string(::getpid()) + ".7");
    write(stale, "x");
    write(live, "x");
    // Without checkpoints: no restart record, the same datasets.
    const Run again = sample(dir, 0, "run.toml --output out2/run --set checkpoint_period_seconds=0");
    REQUIRE(again.rc == 0);
    CHECK(!fs::exists(stale));
    CHECK(fs::exists(live));
    fs::remove(live);
    CHECK(datasets(dir / "out" / "run.h5") == datasets(dir / "out2" / "run.h5"));
    CHECK(!fs::exists(dir / "out2" / "run_restart"));
    CHECK_THAT(slurp(dir / "out2" / "run_report.txt"), Contains("checkpoints: none"));
    const Run other = sample(dir, 0, "run.toml --output out3/run --seed 5");
    REQUIRE(other.rc == 0);
    CHECK(datasets(dir / "out" / "run.h5") != datasets(dir / "out3" / "run.h5"));
  }
  SECTION("a complete run is not redone; another input does not replace its outputs without overwrite") {
    const auto before = slurp(dir / "out" / "run_report.txt");
    const Run same = sample(dir, 0, "run.toml");
    CHECK(same.rc == 0);
    CHECK_THAT(same.out, Contains("is complete"));
    CHECK(slurp(dir / "out" / "run_report.txt") == before);
    const Run again = sample(dir, 0, "run.toml --seed 5");
    CHECK(again.rc == 2);
    CHECK_THAT(again.err, Contains("out/run_report.txt") && Contains("overwrite"));
    CHECK(slurp(dir / "out" / "run_report.txt") == before);
  }
}

TEST_CASE("herd-sample device = cpu_batched: the reports describe the adaptation the run used", "[apps][mcmc]") {
  // The report said "pooled adaptation pools the chains of all processes" whatever
  // batched_adaptation was, and the HTML report showed an unadapted proposal twice.
  const auto dir = workdir("adaptation_line");
  write(dir / "run.toml", kToml);
  struct Case {
    std::string args, out, sentence;
    bool adapted;
  };
  const std::vector<Case> cases = {
      {"--set batched_adaptation=pooled", "pooled", "pooled adaptation pools the chains of all processes", true},
      {"--set batched_adaptation=per_chain", "per_chain",
       "per-chain adaptation: each chain adapts its own proposal from its own warm-up", true},
      {"--set batched_adaptation=none", "none",
       "no adaptation (batched_adaptation = \"none\"): every chain keeps the start proposal", false},
      {"--set batched_adaptation=pooled --set warmup=0", "warmup0",
       "no adaptation (warmup = 0): every chain keeps the start proposal", false},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    const Run r = sample(dir, 0,
                         "run.toml --quiet --set chains_per_rank=8 --set chain_size=200 --set thin=1 " + c.args +
                             " --output " + c.out + "/run");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const std::string rep = slurp(dir / c.out / "run_report.txt");
    CHECK_THAT(rep, Contains(c.sentence + " (") && Contains("; nested R-hat: 4 superchains"));
    if (c.out != "pooled") CHECK_THAT(rep, !Contains("pools the chains"));
    const std::string html = slurp(dir / c.out / "run_report.html");
    if (c.adapted) {
      CHECK_THAT(html, Contains("proposal after the warm-up (") && Contains("the figure shows those two"));
    } else {
      CHECK_THAT(html, !Contains("proposal after the warm-up (") && !Contains("the figure shows those two") &&
                           Contains("This run did not adapt its proposal"));
    }
  }
}

#ifdef HERD_MPIEXEC
TEST_CASE("herd-sample device = cpu_batched: 2 processes x 128 chains == 1 process x 256 chains", "[apps][mcmc][mpi]") {
  // Per-chain (or no) adaptation: a chain depends only on its global id (pooled: below).
  const auto dir = workdir("mpi");
  write(dir / "run.toml", kToml);
  for (const char* mode : {"per_chain", "none"}) {
    INFO(mode);
    const std::string common = std::string("run.toml --quiet --set batched_adaptation=") + mode;
    const Run one = sample(dir, 1, common + " --set chains_per_rank=256 --output one_" + mode + "/run");
    INFO(one.err);
    REQUIRE(one.rc == 0);
    const Run two = sample(dir, 2, common + " --set chains_per_rank=128 --output two_" + mode + "/run");
    INFO(two.err);
    REQUIRE(two.rc == 0);
    CHECK(datasets(dir / ("one_" + std::string(mode)) / "run.h5") ==
          datasets(dir / ("two_" + std::string(mode)) / "run.h5"));
    CHECK_THAT(slurp(dir / ("two_" + std::string(mode)) / "run_report.txt"), Contains("on 2 processes"));
  }
}

TEST_CASE("herd-sample device = cpu_batched: pooled adaptation gives the same chains on 1, 2 and 3 processes",
          "[apps][mcmc][mpi]") {
  // Pooled adaptation over all ranks through a fixed summation tree over global chain ids:
  // 1 x 192, 2 x 96 and 3 x 64 chains give byte-identical datasets.
  const auto dir = workdir("mpi_pooled");
  write(dir / "run.toml", kToml);
  const std::string common = "run.toml --quiet --set batched_adaptation=pooled";
  std::vector<std::vector<std::vector<double>>> got;
  for (const int ranks : {1, 2, 3}) {
    INFO(ranks << " processes");
    const std::string out = "pooled_" + std::to_string(ranks);
    const Run r =
        sample(dir, ranks, fmt::format("{} --set chains_per_rank={} --output {}/run", common, 192 / ranks, out));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    got.push_back(datasets(dir / out / "run.h5"));
    const std::string rep = slurp(dir / out / "run_report.txt");
    CHECK_THAT(rep, Contains("pooled adaptation pools the chains of all processes"));
  }
  CHECK(got[0] == got[1]);
  CHECK(got[0] == got[2]);
}
#endif

TEST_CASE("herd-sample device = cpu_batched runs a posteriordb model and a plugin", "[apps][mcmc]") {
  const auto dir = workdir("posteriordb");
  // The embedded default input: posteriordb kidiq-kidscore_interaction (thread-safe: pool).
  const Run r = sample(dir, 0,
                       "--set device=cpu_batched --set chains_per_rank=16 --set warmup=300 --set chain_size=300 "
                       "--set thin=3 --output pdb/run");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("beta[1]") && Contains("log_sigma"));
  const auto f = herd::io::H5File::open((dir / "pdb" / "run.h5").string());
  // beta[1..4] is one ArviZ variable beta [chain, draw, beta_dim_0] (coordinates 0..3).
  CHECK(f.open_dataset("posterior/beta").shape() == std::vector<hsize_t>{16, 100, 4});
  CHECK(f.open_dataset("posterior/beta_dim_0").read<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3});
  CHECK(f.open_dataset("posterior/log_sigma").shape() == std::vector<hsize_t>{16, 100});
  {
    const Run x = run_shell(dir,
                            "/usr/bin/python3 -W error -c \"import xarray as xr; "
                            "p = xr.open_dataset('pdb/run.h5', group='posterior', engine='h5netcdf'); "
                            "assert p['beta'].dims == ('chain', 'draw', 'beta_dim_0'), p['beta'].dims; "
                            "assert 'beta[1]' not in p.data_vars; print('ok')\"");
    INFO(x.out << x.err);
    CHECK(x.rc == 0);
  }
  // The posterior of log sigma is near the least-squares fit's (2.884; posteriordb's
  // reference posterior mean 2.89, sd 0.034): a loose check that the chains moved right.
  const auto ls = f.open_dataset("posterior/log_sigma").read<double>();
  const double mean = std::accumulate(ls.begin(), ls.end(), 0.0) / ls.size();
  CHECK(std::abs(mean - 2.89) < 0.05);
  // The derived quantity sigma = exp(log_sigma), draw for draw, as the serial run reports it.
  const auto sg = f.open_dataset("posterior/sigma").read<double>();
  REQUIRE(sg.size() == ls.size());
  for (std::size_t i = 0; i < sg.size(); ++i) CHECK(sg[i] == Approx(std::exp(ls[i])).epsilon(1e-12));
  CHECK_THAT(r.out, Contains("sigma "));

  // A plugin that is not declared thread-safe: evaluated in stage rounds on one thread.
  const Run p = sample(dir, 0,
                       std::string("--set device=cpu_batched --set chains_per_rank=8 --set warmup=200 "
                                   "--set chain_size=200 --set target.library='") +
                           HERD_TEST_PLUGIN_PATH + "' --set target.ndim=2 --output plugin/run --quiet");
  INFO(p.err);
  REQUIRE(p.rc == 0);
  CHECK(herd::io::H5File::open((dir / "plugin" / "run.h5").string()).open_dataset("posterior/x1").shape() ==
        std::vector<hsize_t>{8, 200});
  CHECK_THAT(herd::testing::slurp(dir / "plugin" / "run_report.txt"), !Contains("WARNING: the log density was NaN"));
#ifdef HERD_TEST_FAIL_PLUGIN
  // A log density that is NaN where x1 > 1: counted as -inf, and said once at the end (the
  // count was only in the report).
  const Run n = sample(dir, 0,
                       std::string("--set device=cpu_batched --set chains_per_rank=8 --set warmup=200 "
                                   "--set chain_size=200 --set target.library='") +
                           HERD_TEST_FAIL_PLUGIN + "' --set target.ndim=2 --output nan/run",
                       "HERD_TEST_FAIL_RANK=0 HERD_TEST_FAIL_AFTER=0 HERD_TEST_FAIL_MODE=nan ");
  INFO(n.err);
  REQUIRE(n.rc == 0);
  CHECK_THAT(n.out, Contains("WARNING: the log density was NaN at ") && Contains("each counted as -inf (rejected)"));
  CHECK_THAT(herd::testing::slurp(dir / "nan" / "run_report.txt"), Contains("WARNING: the log density was NaN at "));
  const auto x1 = herd::io::H5File::open((dir / "nan" / "run.h5").string()).open_dataset("posterior/x1").read<double>();
  CHECK(*std::max_element(x1.begin(), x1.end()) <= 1.0);
#endif
}

TEST_CASE("herd-sample batched devices: input errors exit 2 and write nothing", "[apps][mcmc]") {
  const auto dir = workdir("errors");
  write(dir / "run.toml", kToml);
  struct Case {
    std::string args, env, message;
  };
  const std::vector<Case> cases = {
      // No usable device (CUDA_VISIBLE_DEVICES empty hides any), or a CPU-only build.
      // Each names where device was set.
      {"run.toml --set device=cuda", "CUDA_VISIBLE_DEVICES= ", "error: --set device=cuda: key \"device\" is \"cuda\""},
      {"--set device=cuda", "", "device = \"cuda\" needs a built-in target (normal, banana, rosenbrock, funnel)"},
      {"run.toml --set batched_adaptation=pool", "", "\"batched_adaptation\" is \"pool\""},
      {"run.toml --set thin=5000", "", "key \"thin\" is 5000, but must be at most chain_size = 1000"},
      {"run.toml --set proposal_model=uniform", "", "needs \"normal\""},
      {"run.toml --set delayed_rejection_count=5", "",
       "error: --set delayed_rejection_count=5: key \"delayed_rejection_count\" is 5, but device = \"cpu_batched\" "
       "allows at most 4"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const Run r = sample(dir, 0, c.args, c.env);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains(c.message));
    CHECK(!fs::exists(dir / "out"));
  }
}

TEST_CASE("herd-sample device = cpu_batched: a 100-D normal with the default proposal samples it; a stuck run warns",
          "[apps][mcmc]") {
  // New-user report item 2: the default start proposal (the identity) accepted nothing in
  // 100-D and the run ended with exit 0 and no warning. The batched path starts from
  // ParaDRAM's scaled proposal (identity x (2.38/sqrt(d))^2): at 100-D a random walk at that
  // scale accepts about 0.23; fixed seed, so [0.05, 0.6] cannot fail by chance.
  const auto dir = workdir("normal100");
  write(dir / "run.toml",
        "device = \"cpu_batched\"\nchains_per_rank = 16\nwarmup = 400\nchain_size = 400\n"
        "random_seed = 11\noutput_prefix = \"out/n\"\n[target]\nbuiltin = \"normal\"\nndim = 100\n");
  const Run r = sample(dir, 0, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const std::string rep = slurp(dir / "out/n_report.txt");
  const auto pos = rep.find("acceptance after warm-up: ");
  REQUIRE(pos != std::string::npos);
  const double acc = std::stod(rep.substr(pos + 26));
  CHECK(acc > 0.05);
  CHECK(acc < 0.6);
  CHECK_THAT(r.out + rep, !Contains("WARNING: the mean acceptance rate"));
  // A proposal 10^4 times too wide without adaptation accepts (next to) nothing: the
  // terminal and the report say so.
  const auto stuck = workdir("stuck");
  write(stuck / "run.toml",
        "device = \"cpu_batched\"\nchains_per_rank = 8\nwarmup = 100\nchain_size = 200\n"
        "random_seed = 3\noutput_prefix = \"out/s\"\nbatched_adaptation = \"none\"\n"
        "delayed_rejection_count = 0\nproposal_std = [1e4, 1e4, 1e4, 1e4]\n"
        "[target]\nbuiltin = \"normal\"\nndim = 4\n");
  const Run s = sample(stuck, 0, "run.toml");
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  CHECK_THAT(s.out, Contains("WARNING: the mean acceptance rate is") && Contains("proposal_std"));
  CHECK_THAT(slurp(stuck / "out/s_report.txt"), Contains("WARNING: the mean acceptance rate is"));
}

#ifdef HERD_MPIEXEC
TEST_CASE("herd-sample device = cpu_batched: a restart record of another layout names the device, not single_chain",
          "[apps][mcmc][mpi]") {
  // New-user report item 11: "... is of a single_chain run with 512 chain(s), but this run
  // is single_chain with 256 chain(s)" for a batched record. A complete 2 x 32 record, then
  // the same input on one process (32 chains).
  const auto dir = workdir("layout");
  write(dir / "run.toml", std::string("checkpoint_period = 100\n") + kToml);
  REQUIRE(sample(dir, 2, "run.toml --quiet --set chains_per_rank=32").rc == 0);
  const Run r = sample(dir, 0, "run.toml --quiet --set chains_per_rank=32");
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("is of a cpu_batched run with 64 chain(s), but this run is cpu_batched with 32 chain(s)"));
}
#endif

#ifdef HERD_MPIEXEC
TEST_CASE("herd-sample under mpiexec: a prefix in use is refused by rank 0 in one line; every rank exits 2",
          "[apps][mcmc][mpi]") {
  // New-user report item 10: a second `mpiexec -n 2 herd-sample` of a running prefix
  // resumed from the same record. The test holds the lock a running herd-sample would.
  const auto dir = workdir("lock_np2");
  write(dir / "run.toml", kToml);
  fs::create_directories(dir / "out");
  const int fd = ::open((dir / "out/run.lock").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const Run r = sample(dir, 2, "run.toml --set chains_per_rank=16");
  ::close(fd);
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err,
             Contains("herd-sample: error: rank 0: output_prefix \"out/run\" is in use by another herd-sample run"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(dir / "out/run.h5"));
}
#endif

#ifdef HERD_MPIEXEC
TEST_CASE("herd-sample under mpiexec: an input error is one line, not one per rank", "[apps][mcmc][mpi]") {
  // New-user report item 5: "rank 0: ..." and "rank 1: ..." for the same input error.
  const auto dir = workdir("input_error_np2");
  write(dir / "run.toml", std::string("proposal_cov = [[1, 0.5], [0.1, 1]]\n") +
                              "chain_size = 10\noutput_prefix = \"out/e\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  for (const char* device : {"cpu", "cpu_batched"}) {
    const Run r = sample(dir, 2, std::string("run.toml --set device=") + device);
    INFO(device << "\n" << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("key \"proposal_cov\" is not symmetric"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(dir / "out"));
  }
}
#endif

TEST_CASE("herd-sample cpu_batched: unconverged chains get convergence warnings with what to try (terminal, report)",
          "[apps][mcmc]") {
  // A batched run that had not converged (R-hat 1.23, acceptance 0.0037 on posteriordb arK
  // after a short warm-up) said nothing. Here: 16 chains from starts spread over [-20, 20]^2,
  // no warm-up and a proposal 20 times too small: they cannot meet in 400 proposals (R-hat
  // about 8, ESS about 17, acceptance above 0.8). Deterministic (fixed seed).
  const auto dir = workdir("warnings");
  write(dir / "run.toml",
        "device = \"cpu_batched\"\nchains_per_rank = 16\nwarmup = 0\nchain_size = 400\nthin = 2\n"
        "random_seed = 2026\noutput_prefix = \"out/run\"\nrandom_start_point = true\n"
        "random_start_point_domain_lower = [-20.0, -20.0]\n"
        "random_start_point_domain_upper = [20.0, 20.0]\nproposal_std = [0.05, 0.05]\n"
        "scale_factor = \"1\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = sample(dir, 0, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const std::string rep = slurp(dir / "out/run_report.txt");
  for (const std::string& text : {r.out, rep}) {
    // 16 chains: 8 superchains of 2 (the automatic choice), so nested R-hat is the test.
    CHECK_THAT(text, Contains("WARNING: Nested R-hat over 8 superchains of 2 chains") &&
                         Contains("is above 1.01 for x1") && Contains("raise warmup"));
    // The threshold with the run's 16 chains (it said "100 per chain for 4 chains").
    CHECK_THAT(text, Contains("WARNING: Bulk- or tail-ESS is below 400 (for 16 chains: 100 per chain up to 4 "
                              "chains, 400 in all with more) for x1"));
    CHECK_THAT(text, !Contains("for 4 chains"));
    CHECK_THAT(text, Contains("WARNING: The mean acceptance rate is 0.8") && Contains("above 0.8"));
  }
  CHECK_THAT(rep, Contains("== convergence warnings =="));
  const std::string html = slurp(dir / "out/run_report.html");
  CHECK_THAT(html, Contains("Bulk- or tail-ESS is below 400 (for 16 chains: 100 per chain up to 4 chains") &&
                       !Contains("for 4 chains"));
  // The converged run of the first test case (256 chains, R-hat about 1.00) warns of nothing.
  const auto ok = workdir("warnings_ok");
  write(ok / "run.toml", kToml);
  const Run r2 = sample(ok, 0, "run.toml");
  INFO(r2.out);
  REQUIRE(r2.rc == 0);
  CHECK_THAT(r2.out, !Contains("WARNING"));
  CHECK_THAT(slurp(ok / "out/run_report.txt"), !Contains("WARNING"));
}

// Many short chains (256 x 100 draws of a 4-D normal) warned that R-hat was above 1.01
// (about 1.13) while nested R-hat over the 16 superchains, the statistic that applies to
// them (Margossian et al. 2024), was at most 1.0084: the warning is on nested R-hat.
TEST_CASE("herd-sample cpu_batched: many short chains are judged on nested R-hat, not R-hat", "[apps][mcmc]") {
  const auto dir = workdir("short_chains");
  const std::string common =
      "--set target.builtin=normal --set target.ndim=4 --set device=cpu_batched --set chains_per_rank=256 "
      "--set thin=1 --set random_seed=3";
  const Run r = sample(dir, 0, common + " --set chain_size=100 --output out/ok");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  const auto f = herd::io::H5File::open((dir / "out/ok.h5").string());
  const auto rhat = f.open_dataset("diagnostics/rhat").read<double>();
  const auto nested = f.open_dataset("diagnostics/nested_rhat").read<double>();
  REQUIRE(rhat.size() == 4);
  REQUIRE(nested.size() == 4);
  for (std::size_t j = 0; j < 4; ++j) {
    CHECK(rhat[j] > 1.05);    // each chain's halves do not agree yet ...
    CHECK(nested[j] < 1.01);  // ... but the superchains do
  }
  const std::string rep = slurp(dir / "out/ok_report.txt");
  for (const std::string& text : {r.out, rep}) CHECK_THAT(text, !Contains("WARNING"));
  // The HTML report's verdicts: nested R-hat passes, R-hat's excess is a note.
  const std::string html = slurp(dir / "out/ok_report.html");
  CHECK_THAT(html, Contains("Nested R-hat over 16 superchains is at most 1.01") &&
                       Contains("but nested R-hat over 16 superchains is not"));
  // Every chain from the same start: the superchains are not dispersed, and a note says what
  // nested R-hat then cannot show and how to start them apart.
  CHECK_THAT(html, Contains("Every chain started from the same point, so the 16 superchains were not started from "
                            "dispersed points") &&
                       Contains("random_start_point_scope = &quot;superchain&quot;"));
  // 40 draws per chain: nested R-hat of x2 is above 1.01 (1.011), and the warning says so.
  const Run s = sample(dir, 0, common + " --set chain_size=40 --output out/short");
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  for (const std::string& text : {s.out, slurp(dir / "out/short_report.txt")}) {
    CHECK_THAT(text, Contains("WARNING: Nested R-hat over 16 superchains of 16 chains (Margossian et al. 2024: the "
                              "test for many short chains) is above 1.01 for x2 (1.011): the superchains do not "
                              "agree") &&
                         !Contains("R-hat is above 1.01 for x1"));
  }
}

TEST_CASE("herd-sample cpu_batched: superchains with their own random starts, and nested R-hat over them",
          "[apps][mcmc]") {
  // 8 chains in superchains = 2 (the automatic choice would be 4) with
  // random_start_point_scope = "superchain": chains 0-3 start at one point, 4-7 at another.
  // No warm-up and a tiny proposal (1e-3), so the first draw of each chain is within 0.01 of
  // its start.
  const auto dir = workdir("superchains");
  write(dir / "run.toml",
        "device = \"cpu_batched\"\nchains_per_rank = 8\nwarmup = 0\nchain_size = 200\nthin = 1\n"
        "random_seed = 31\noutput_prefix = \"out/run\"\nrandom_start_point = true\n"
        "random_start_point_scope = \"superchain\"\nsuperchains = 2\n"
        "random_start_point_domain_lower = [-5.0, -5.0]\n"
        "random_start_point_domain_upper = [5.0, 5.0]\nproposal_std = [0.001, 0.001]\n"
        "scale_factor = \"1\"\nbatched_adaptation = \"none\"\n[target]\nbuiltin = \"normal\"\nndim = 2\n");
  const Run r = sample(dir, 0, "run.toml --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto f = herd::io::H5File::open((dir / "out/run.h5").string());
  const auto x1 = f.open_dataset("posterior/x1").read<double>();
  const auto x2 = f.open_dataset("posterior/x2").read<double>();
  REQUIRE(x1.size() == 8 * 200);
  for (std::size_t c = 1; c < 8; ++c) {
    INFO("chain " << c);
    const bool same = c < 4;  // chain 0's superchain
    CHECK((std::abs(x1[c * 200] - x1[0]) < 0.01 && std::abs(x2[c * 200] - x2[0]) < 0.01) == same);
  }
  CHECK(std::abs(x1[5 * 200] - x1[4 * 200]) < 0.01);
  // The report's nested R-hat column (4 decimals) is the hand computation with K = 2.
  const std::string rep = slurp(dir / "out/run_report.txt");
  INFO(rep);
  CHECK_THAT(rep, Contains("nested R-hat: 2 superchains of 4 contiguous global chain ids (superchains), each "
                           "superchain from its own random start"));
  CHECK_THAT(slurp(dir / "out/run_report.html"), !Contains("Every chain started from the same point"));
  const auto head = rep.find("nested R-hat\n");
  REQUIRE(head != std::string::npos);
  std::istringstream rows(rep.substr(head + 13));
  for (const auto* x : {&x1, &x2}) {
    int dim = 0;
    double mean = 0, sd = 0, rhat = 0, ess = 0, nested = 0;
    rows >> dim >> mean >> sd >> rhat >> ess >> nested;
    const double by_hand = herd::testing::nested_rhat_by_hand(*x, 8, 200, 2);
    CHECK(nested == Approx(by_hand).margin(1e-4));
    CHECK(std::abs(nested - herd::testing::nested_rhat_by_hand(*x, 8, 200, 4)) > 1e-3);
  }
}

TEST_CASE("herd-sample cpu_batched: progress while it samples (log and terminal), each phase's time in the report",
          "[apps][mcmc]") {
  // device = "cpu_batched" printed nothing until its summary, on a terminal too.
  const auto dir = workdir("progress");
  write(dir / "run.toml", kToml);
  const Run r = sample(dir, 0, "run.toml");
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  // Not a terminal: a line at the first progress of sampling (then every 10 s).
  CHECK_THAT(r.out, Contains("sampling: warm-up ") && Contains("proposals per chain") && Contains("ETA "));
  // The last line reads complete when chain_size is not a multiple of thin: the proposals
  // after the last draw are made, and reported (it ended at "draws 1499/1500 ..., 200/200").
  const Run odd = sample(dir, 0, "run.toml --set chain_size=1002 --output odd/run");
  INFO(odd.out << odd.err);
  REQUIRE(odd.rc == 0);
  CHECK_THAT(odd.out, Contains("sampling: draws 1502/1502 proposals per chain, 200/200 draws"));
  CHECK_THAT(odd.out, !Contains("1500/1502"));
  const std::string rep = slurp(dir / "out/run_report.txt");
  CHECK_THAT(rep, Contains("== time per phase (this session") && Contains("\nsampling ") &&
                      Contains("\npost-processing: totals and diagnostics") && Contains("\nwriting out/run.h5 ") &&
                      Contains("\nwriting out/run_report.html ") && Contains("\ntotal "));
  // On a terminal (script(1) gives the run a pseudo-terminal): the line is rewritten in place.
  if (!fs::exists("/usr/bin/script")) {
    WARN("no /usr/bin/script: the terminal case is not checked");
    return;
  }
  const Run t = run_shell(
      dir, std::string("/usr/bin/script -qec \"'") + HERD_SAMPLE_EXE + "' run.toml --set overwrite=true\" /dev/null");
  INFO(t.out << t.err);
  REQUIRE(t.rc == 0);
  CHECK_THAT(t.out, Contains("\rsampling") && Contains("proposals per chain"));
}

TEST_CASE("herd-sample cpu_batched: every name of the target registry runs; an unknown one is one line",
          "[apps][mcmc]") {
  using herd::mcmc::TargetRegistry;
  herd::examples::register_models(TargetRegistry::global());  // as herd-sample does
  const auto dir = workdir("registry");
  const std::string common =
      "--quiet --set device=cpu_batched --set chains_per_rank=4 --set warmup=50 "
      "--set chain_size=100 --set random_seed=1 --set checkpoint_period_seconds=0 ";
  int runs = 0;
  for (auto family :
       {TargetRegistry::Family::kBuiltin, TargetRegistry::Family::kModel, TargetRegistry::Family::kPlugin}) {
    for (const auto& name : TargetRegistry::global().names(family, true)) {
      std::string target;
      if (family == TargetRegistry::Family::kModel) {
        target = "--set target.model=" + name;
      } else if (family == TargetRegistry::Family::kPlugin) {
        target = std::string("--set target.library=") + HERD_TEST_PLUGIN_PATH + " --set target.ndim=2";
      } else {
        target = "--set target.builtin=" + name + " --set target.ndim=2";
        if (name == "mixture")
          target +=
              " --set 'target.weights=[0.5, 0.5]' --set 'target.means=[-1.0, 0.0, 1.0, 0.0]' "
              "--set 'target.sigmas=[1.0, 1.0]'";
      }
      INFO(target);
      const Run r = sample(dir, 0, common + target + " --output out/" + std::to_string(runs));
      CHECK(r.rc == 0);
      CHECK(fs::exists(dir / "out" / (std::to_string(runs) + ".h5")));
      ++runs;
    }
  }
  CHECK(runs == 5 + 2 * 6 + 1);
  const Run r = sample(dir, 0, common + "--set target.builtin=funel --set target.ndim=2 --output out/bad");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("key \"target.builtin\" is \"funel\" (a string), but must be one of \"normal\", "
                             "\"banana\", \"rosenbrock\", \"mixture\", \"funnel\"; did you mean \"funnel\"?"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

namespace {

/// Every group and dataset path of an HDF5 file ("posterior", "posterior/x1", ...).
std::set<std::string> h5_paths(const fs::path& file) {
  std::set<std::string> out;
  const auto f = herd::io::H5File::open(file.string());
  std::function<void(const herd::io::H5Group&, const std::string&)> walk = [&](const herd::io::H5Group& g,
                                                                               const std::string& at) {
    for (const auto& name : g.members()) {
      const std::string path = at.empty() ? name : fmt::format("{}/{}", at, name);
      out.insert(path);
      if (g.is_group(name)) walk(g.open_group(name), path);
    }
  };
  walk(f.root(), "");
  return out;
}

/// A dataset's element type as "<class><bytes><u|s>" (e.g. "int4s", "float8"), and its rank.
std::string dtype_of(const herd::io::H5Dataset& ds) {
  const hid_t t = H5Dget_type(ds.id());
  const H5T_class_t c = H5Tget_class(t);
  std::string out = c == H5T_INTEGER ? "int" : c == H5T_FLOAT ? "float" : c == H5T_STRING ? "string" : "other";
  out += std::to_string(H5Tget_size(t));
  if (c == H5T_INTEGER) out += H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "s";
  H5Tclose(t);
  return out + "/" + std::to_string(ds.shape().size());
}

}  // namespace

TEST_CASE("herd-sample cpu_batched: the .h5 has the serial run's groups and datasets, diagnostics included",
          "[apps][mcmc]") {
  const auto dir = workdir("serial_groups");
  const std::string common =
      "--quiet --set target.builtin=normal --set target.ndim=2 --set chains_per_rank=4 "
      "--set superchains=2 --set chain_size=2000 --set random_seed=5 ";
  REQUIRE(sample(dir, 0, common + "--set parallelization_model=multi_chain --output out/serial").rc == 0);
  REQUIRE(sample(dir, 0, common + "--set device=cpu_batched --set warmup=500 --output out/batched").rc == 0);
  const std::set<std::string> serial = h5_paths(dir / "out" / "serial.h5"),
                              batched = h5_paths(dir / "out" / "batched.h5");
  // The same groups and datasets, no exceptions, the per-proposal statistics included.
  CHECK(batched == serial);
  for (const char* p :
       {"diagnostics/rhat", "diagnostics/nested_rhat", "diagnostics/ks_p_value", "sample/chain_id",
        "chain_compact/state", "sample_stats/accepted", "sample_stats/dr_stage", "sample_stats/acceptance_probability",
        "chain_compact/dr_stage", "chain_compact/acceptance_probability", "chain_compact/adaptation_measure"})
    CHECK(batched.count(p) == 1);
  const auto f = herd::io::H5File::open((dir / "out" / "batched.h5").string());
  const auto fs_ = herd::io::H5File::open((dir / "out" / "serial.h5").string());
  // The per-proposal statistics have the serial run's dtypes, ranks and dimension names.
  for (const char* p :
       {"sample_stats/accepted", "sample_stats/dr_stage", "sample_stats/acceptance_probability",
        "chain_compact/dr_stage", "chain_compact/acceptance_probability", "chain_compact/adaptation_measure"}) {
    INFO(p);
    CHECK(dtype_of(f.open_dataset(p)) == dtype_of(fs_.open_dataset(p)));
    // chain_compact's row dimension is a bare netCDF dimension whose name carries its length.
    if (std::string(p).rfind("sample_stats/", 0) == 0)
      CHECK(f.open_dataset(p).dimension_names() == fs_.open_dataset(p).dimension_names());
  }
  // ArviZ's group attributes (InferenceData schema) on posterior and sample_stats, and the
  // meaning of each sample_stats dataset (long_name), in both engines' files.
  for (const herd::io::H5File* file : {&f, &fs_}) {
    for (const char* g : {"posterior", "sample_stats"}) {
      INFO(g);
      const herd::io::H5Group grp = file->open_group(g);
      CHECK(grp.attribute_string("inference_library") == "herd");
      CHECK(grp.attribute_string("inference_library_version") == file->root().attribute_string("herd_version"));
    }
    for (const char* p :
         {"sample_stats/lp", "sample_stats/accepted", "sample_stats/dr_stage", "sample_stats/acceptance_probability"})
      CHECK_FALSE(file->open_dataset(p).attribute_string("long_name").empty());
    CHECK_THAT(file->open_dataset("sample_stats/acceptance_probability").attribute_string("long_name"),
               Contains("not ArviZ's acceptance_rate"));
  }
  // One writer makes both engines' diagnostics group: the same datasets (the summary, nested
  // R-hat, the KS table with its bare dimensions) with the same dtypes, shapes, dimension
  // names and attributes (names, kinds and sizes; superchains' value). Both runs have 4
  // chains and 2 variables, so even the shapes agree.
  {
    const herd::io::H5Group bd = f.open_group("diagnostics"), sd = fs_.open_group("diagnostics");
    REQUIRE(bd.members() == sd.members());
    for (const char* p : {"mean", "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat",
                          "nested_rhat", "variable", "ks_statistic", "ks_p_value", "ks_variable", "chain_a", "chain_b"})
      CHECK(bd.is_dataset(p));
    CHECK(bd.attribute_names() == sd.attribute_names());
    for (const auto& name : sd.members()) {
      INFO(name);
      const herd::io::H5Dataset b = bd.open_dataset(name), s = sd.open_dataset(name);
      CHECK(dtype_of(b) == dtype_of(s));
      CHECK(b.shape() == s.shape());
      CHECK(b.dimension_names() == s.dimension_names());
      REQUIRE(b.attribute_names() == s.attribute_names());
      for (const auto& a : s.attribute_names()) {
        INFO(a);
        CHECK(b.attribute_kind(a) == s.attribute_kind(a));
        CHECK(b.attribute_size(a) == s.attribute_size(a));
      }
    }
    CHECK(bd.open_dataset("variable").read_strings() == sd.open_dataset("variable").read_strings());
    CHECK(bd.open_dataset("nested_rhat").attribute<std::int64_t>("superchains") == 2);
    CHECK(sd.open_dataset("nested_rhat").attribute<std::int64_t>("superchains") == 2);
    CHECK(bd.open_dataset("ks_p_value").shape() == std::vector<hsize_t>{2, 4, 4});
    for (const char* ks : {"ks_statistic", "ks_p_value"}) {
      CHECK_FALSE(bd.open_dataset(ks).attribute_string("tested").empty());
      CHECK_FALSE(sd.open_dataset(ks).attribute_string("tested").empty());
    }
  }
  CHECK(f.open_dataset("sample_stats/accepted").shape() == f.open_dataset("sample_stats/lp").shape());
  CHECK(f.open_dataset("chain_compact/dr_stage").shape() == f.open_dataset("chain_compact/weight").shape());
  // Their meaning: draws are accepted where a compact row starts (but for a chain's first
  // draw, which may be a state from the warm-up); accepted draws carry the row's stage (>= 1)
  // and acceptance probability, the others 0.
  {
    const auto acc = f.open_dataset("sample_stats/accepted").read<std::int64_t>();
    const auto stage = f.open_dataset("sample_stats/dr_stage").read<std::int64_t>();
    const auto alpha = f.open_dataset("sample_stats/acceptance_probability").read<double>();
    const auto w = f.open_dataset("chain_compact/weight").read<std::int64_t>();
    const auto cstage = f.open_dataset("chain_compact/dr_stage").read<std::int64_t>();
    const auto calpha = f.open_dataset("chain_compact/acceptance_probability").read<double>();
    const auto cchain = f.open_dataset("chain_compact/chain").read<std::int64_t>();
    std::size_t row = 0, bad = 0;
    std::int64_t prev_chain = -1;
    std::size_t draw = 0;
    for (; row < w.size(); ++row) {
      const std::size_t at = draw;  // the row's first draw [chain, draw] flattened
      const bool first_of_chain = cchain[row] != prev_chain;
      prev_chain = cchain[row];
      if (!first_of_chain) bad += acc[at] != 1;
      if (acc[at] == 1) bad += stage[at] != cstage[row] || alpha[at] != calpha[row] || cstage[row] < 1;
      for (std::int64_t k = 1; k < w[row]; ++k) bad += acc[at + k] != 0 || stage[at + k] != 0 || alpha[at + k] != 0.0;
      draw += static_cast<std::size_t>(w[row]);
    }
    CHECK(draw == acc.size());
    CHECK(bad == 0);
  }
  // The diagnostics are the batched draws': the mean of posterior/x1 and its compact form.
  const auto x1 = f.open_dataset("posterior/x1").read<double>();
  const double mean = std::accumulate(x1.begin(), x1.end(), 0.0) / static_cast<double>(x1.size());
  CHECK(f.open_dataset("diagnostics/mean").read<double>()[0] == Approx(mean).epsilon(1e-12));
  const auto w = f.open_dataset("chain_compact/weight").read<std::int64_t>();
  CHECK(std::accumulate(w.begin(), w.end(), std::int64_t{0}) == static_cast<std::int64_t>(x1.size()));
}

TEST_CASE("herd-sample cpu_batched: the dr_stage histogram of the .h5 is the report's acceptances per stage",
          "[apps][mcmc]") {
  // thin = 1 (every post-warm-up proposal a draw), two delayed-rejection stages, a start
  // proposal too wide for the target so that every stage accepts; under mpiexec -n 2 the
  // per-draw statistics of both ranks' chains are gathered too.
  const auto dir = workdir("dr_histogram");
  const std::string common =
      "--quiet --set device=cpu_batched --set target.builtin=normal --set target.ndim=3 --set chains_per_rank=8 "
      "--set warmup=0 --set chain_size=600 --set thin=1 --set random_seed=12 --set batched_adaptation=none "
      "--set delayed_rejection_count=2 --set 'proposal_std=[4.0, 4.0, 4.0]' ";
  for (int ranks : {0, 2}) {
#ifndef HERD_MPIEXEC
    if (ranks > 0) continue;
#endif
    INFO("ranks " << ranks);
    const std::string out = "out/h" + std::to_string(ranks);
    const Run r = sample(dir, ranks, fmt::format("{}--output {}", common, out));
    REQUIRE(r.rc == 0);
    const std::string report = slurp(dir / (out + "_report.txt"));
    const auto at = report.find("per stage:");
    REQUIRE(at != std::string::npos);
    std::istringstream line(report.substr(at + 10, report.find('\n', at) - at - 10));
    std::vector<std::int64_t> per_stage;
    for (std::int64_t v; line >> v;) per_stage.push_back(v);
    REQUIRE(per_stage.size() == 3);
    const auto f = herd::io::H5File::open((dir / (out + ".h5")).string());
    const auto stage = f.open_dataset("sample_stats/dr_stage").read<std::int64_t>();
    const auto acc = f.open_dataset("sample_stats/accepted").read<std::int64_t>();
    CHECK(stage.size() == static_cast<std::size_t>((ranks > 0 ? ranks : 1) * 8 * 600));
    std::vector<std::int64_t> hist(3, 0);
    std::int64_t accepted = 0;
    for (std::size_t q = 0; q < stage.size(); ++q) {
      if (stage[q] >= 1 && stage[q] <= 3) ++hist[static_cast<std::size_t>(stage[q] - 1)];
      accepted += acc[q];
    }
    CHECK(hist == per_stage);
    CHECK(accepted == per_stage[0] + per_stage[1] + per_stage[2]);
    CHECK(per_stage[1] > 0);
    CHECK(per_stage[2] > 0);
    // No adaptation: every row's adaptation measure is 0.
    for (double v : f.open_dataset("chain_compact/adaptation_measure").read<double>()) CHECK(v == 0.0);
  }
}
