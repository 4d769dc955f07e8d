// The C interface: a ParaMonte C driver (compiled as C) runs DRAM from a namelist file or
// from input text, writes ParaDRAM outputs, and reports bad input with status 2.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include <catch2/catch.hpp>

#include "herd/io/hdf5.hpp"
#include "herd/mcmc/paradram.h"

extern "C" int c_driver_paramonte(char* input_file);
extern "C" int c_driver_herd(const char* input);

namespace fs = std::filesystem;

TEST_CASE("C API: runParaDRAM from a namelist file and herd_run_dram from text", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string prefix = (dir / "sub" / "folder" / "run").string();  // missing folders are created
  const fs::path nml = dir / "paradram.nml";
  std::ofstream(nml) << "&ParaDRAM\n  chainSize = 5000\n  randomSeed = 11\n  outputFileName = '" << prefix
                     << "'\n  startPointVec = 0.0d0, 0.0d0\n  variableNameList = 'a', 'b'\n/\n";
  std::string path = nml.string();
  REQUIRE(c_driver_paramonte(path.data()) == 0);
  CHECK(fs::exists(prefix + "_chain.txt"));
  CHECK(fs::exists(prefix + "_report.txt"));
  {
    auto f = herd::io::H5File::open(prefix + ".h5");
    const auto a = f.open_dataset("posterior/a").read<double>();
    const auto b = f.open_dataset("posterior/b").read<double>();
    double ma = 0, mb = 0;
    for (double x : a) ma += x;
    for (double x : b) mb += x;
    ma /= static_cast<double>(a.size());
    mb /= static_cast<double>(b.size());
    // Loose design checks (|error| < ~0.3 and ~0.9 are over 5 MCSE for these chain lengths).
    CHECK(std::abs(ma - 1.0) < 0.3);
    CHECK(std::abs(mb + 2.0) < 0.9);
  }
  // Running the same input again: the run is complete (its restart record says so), so it is
  // reported, not redone (ParaDRAM's restart behaviour): status 0, outputs untouched.
  {
    std::ifstream in(prefix + "_report.txt");
    const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(c_driver_paramonte(path.data()) == 0);
    std::ifstream again(prefix + "_report.txt");
    CHECK(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()) == report);
  }
  // Another input on the same outputs does not overwrite them: status 2.
  std::ofstream(nml) << "&ParaDRAM\n  chainSize = 4000\n  randomSeed = 11\n  outputFileName = '" << prefix
                     << "'\n  startPointVec = 0.0d0, 0.0d0\n  variableNameList = 'a', 'b'\n/\n";
  CHECK(c_driver_paramonte(path.data()) == 2);
  // TOML text as input, with overwrite.
  const std::string toml = "chain_size = 500\nrandom_seed = 3\noverwrite = true\noutput_prefix = \"" + prefix + "\"\n";
  CHECK(c_driver_herd(toml.c_str()) == 0);
  // Namelist text as input.
  const std::string text = "&ParaDRAM chainSize = 300, overwriteRequested = T, outputFileName = '" + prefix + "' /";
  CHECK(c_driver_herd(text.c_str()) == 0);
  CHECK(herd_last_status() == 0);  // every entry point sets it, not only runParaDRAM
  // Bad input: status 2.
  CHECK(c_driver_herd("chain_size = -5\n") == 2);
  CHECK(herd_last_status() == 2);
  // No log function and no target named (the message said "ndim is 0").
  CHECK(herd_run_dram(0, nullptr, "chain_size = 2000\n") == 2);
  CHECK(herd_last_status() == 2);
  CHECK(c_driver_herd("/no/such/input.nml") == 2);
  // Batched devices run through the C API too (test_mcmc_c_api_batched); an unknown device
  // is bad input: status 2, nothing written.
  const std::string bad = "device = \"tpu\"\noutput_prefix = \"" + (dir / "bad" / "run").string() + "\"\n";
  CHECK(c_driver_herd(bad.c_str()) == 2);
  CHECK(!fs::exists(dir / "bad"));
  // A [target] key beside the log function (which reads none) is refused, not ignored.
  const std::string with_target =
      "chain_size = 300\noutput_prefix = \"" + (dir / "tgt" / "run").string() + "\"\n[target]\nb = 0.5\n";
  CHECK(c_driver_herd(with_target.c_str()) == 2);
  CHECK(!fs::exists(dir / "tgt"));
  // ndim in the input: the dimension is the driver's argument (the message said "thin?").
  CHECK(c_driver_herd("ndim = 3\nchain_size = 100\n") == 2);
}

TEST_CASE("C API: an input file whose path has '=' or blanks around it, and namelist text in any case", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_input_forms";
  fs::remove_all(dir);
  fs::create_directories(dir / "a=b");
  auto nml = [&](const std::string& group, const std::string& name) {
    return "! a comment line before the group\n&" + group +
           "\n  chainSize = 300\n  randomSeed = 5\n  outputFileName = '" + (dir / "out" / name).string() + "'\n/\n";
  };
  // A path with '=' was read as TOML text ("Error while parsing floating-point").
  const fs::path eq = dir / "a=b" / "run=1.in";
  std::ofstream(eq) << nml("ParaDRAM", "eq");
  CHECK(c_driver_herd(eq.string().c_str()) == 0);
  CHECK(fs::exists(dir / "out" / "eq_chain.txt"));
  std::string path = eq.string();
  CHECK(c_driver_paramonte(path.data()) == 0);  // complete: reported, not redone
  // Blanks around the path, as C callers may pass them (Fortran's trailing ones were trimmed).
  const fs::path plain = dir / "plain.nml";
  std::ofstream(plain) << nml("ParaDRAM", "blank");
  CHECK(c_driver_herd(("  " + plain.string() + " \n").c_str()) == 0);
  CHECK(fs::exists(dir / "out" / "blank_chain.txt"));
  // Namelist text whose group is not spelt "ParaDRAM" or "paradram", after a comment line,
  // was read as TOML ("expected keys, tables, whitespace or comments, saw '!'").
  CHECK(c_driver_herd(nml("PARADRAM", "upper").c_str()) == 0);
  CHECK(fs::exists(dir / "out" / "upper_chain.txt"));
  CHECK(c_driver_herd(nml("ParaDram", "mixed").c_str()) == 0);
  CHECK(fs::exists(dir / "out" / "mixed_chain.txt"));
  // A missing file whose name has '=' is bad input naming it, nothing written.
  CHECK(c_driver_herd((dir / "no=such.in").string().c_str()) == 2);
  CHECK(!fs::exists(dir / "no=such.in"));
}

extern "C" std::int32_t c_driver_v2(char kind, const char* input);

TEST_CASE("C API: ParaMonte 2's runParaDRAMF/D/L with v2 specification names", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_v2";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Namelist text in ParaMonte 2's style: outputStatus, the ball domain (centre (1, -2), radii
  // (1.5, 4): the ellipse cuts the target's tails), domainErrCount(Max), a target acceptance
  // range, parallelismNumThread.
  auto nml = [&](const std::string& prefix, int chain) {
    return "&paradram\n  outputFileName = '" + prefix +
           "'\n  outputStatus = 'retry'\n  outputChainSize = " + std::to_string(chain) +
           "\n  randomSeed = 5\n  domain = 'Ellipsoid'\n  domainBallAvg = 1, -2\n  domainBallStd = 1.5, 4.0\n"
           "  domainErrCount = 500\n  domainErrCountMax = 50000\n  targetAcceptanceRate = 0.2, 0.5\n"
           "  parallelismNumThread = 2\n  proposalStart = 1.0, -2.0\n  outputSplashMode = 'Silent'\n/\n";
  };
  for (char kind : {'D', 'F', 'L'}) {
    INFO("runParaDRAM" << kind);
    const std::string prefix = (dir / std::string(1, kind) / "run").string();
    REQUIRE(c_driver_v2(kind, nml(prefix, 4000).c_str()) == 0);
    auto f = herd::io::H5File::open(prefix + ".h5");
    const auto a = f.open_dataset("posterior/x1").read<double>();
    const auto b = f.open_dataset("posterior/x2").read<double>();
    REQUIRE(!a.empty());
    double outside = 0, mb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const double u = (a[i] - 1.0) / 1.5, v = (b[i] + 2.0) / 4.0;
      if (u * u + v * v > 1.0) outside += 1;
      mb += b[i];
    }
    CHECK(outside == 0);  // the ball domain is honoured
    // Without the ball some 1 - exp(-...) of the draws would lie outside; with it the
    // second coordinate's spread is cut: its mean stays near -2 by symmetry.
    CHECK(std::abs(mb / static_cast<double>(b.size()) + 2.0) < 0.6);
  }
  // The input as a file path; 'retry' starts afresh over existing outputs.
  const std::string prefix = (dir / "D" / "run").string();
  const fs::path file = dir / "input.nml";
  std::ofstream(file) << nml(prefix, 1000);
  CHECK(c_driver_v2('D', file.string().c_str()) == 0);
  // Bad input: non-zero.
  CHECK(c_driver_v2('D', "&paradram outputChainSize = -1 /") == 2);
  CHECK(c_driver_v2('D', "&paradram domainBallStd = 1, 2, 3 /") == 2);
}

TEST_CASE("C API: outputStatus = 'extend' continues a complete run in <prefix>_run<k> from its last state", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_extend";
  fs::remove_all(dir);
  const std::string prefix = (dir / "ext").string();
  const std::string nml =
      "&paradram outputFileName = '" + prefix + "', outputStatus = 'extend', outputChainSize = 2000, randomSeed = 21 /";
  REQUIRE(c_driver_v2('D', nml.c_str()) == 0);
  REQUIRE(fs::exists(prefix + ".h5"));
  CHECK_FALSE(fs::exists(prefix + "_run2.h5"));
  // The same call again: the run is complete, so it is extended in ext_run2 from its last state.
  REQUIRE(c_driver_v2('D', nml.c_str()) == 0);
  REQUIRE(fs::exists(prefix + "_run2.h5"));
  auto first = herd::io::H5File::open(prefix + ".h5");
  auto second = herd::io::H5File::open(prefix + "_run2.h5");
  const auto s1 = first.open_dataset("chain_compact/state").read<double>();
  const auto s2 = second.open_dataset("chain_compact/state").read<double>();
  REQUIRE(s1.size() >= 2);
  REQUIRE(s2.size() >= 2);
  CHECK(s2[0] == s1[s1.size() - 2]);
  CHECK(s2[1] == s1[s1.size() - 1]);
  // Its start proposal covariance is the first run's sample covariance (recorded in its input).
  CHECK(second.open_group("input").attribute_string("proposal_cov").size() > 2);
  // A third call extends the extension.
  REQUIRE(c_driver_v2('D', nml.c_str()) == 0);
  CHECK(fs::exists(prefix + "_run3.h5"));
  auto third = herd::io::H5File::open(prefix + "_run3.h5");
  const auto s3 = third.open_dataset("chain_compact/state").read<double>();
  CHECK(s3[0] == s2[s2.size() - 2]);
}

namespace {

/// Runs `f` with stderr sent to a file; returns what it printed there.
template <typename F>
std::string stderr_of(const fs::path& dir, F&& f) {
  const std::string path = (dir / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
  ::close(fd);
  f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

double log_normal(std::int32_t ndim, double point[]) {
  double q = 0;
  for (std::int32_t i = 0; i < ndim; ++i) q += point[i] * point[i];
  return -0.5 * q;
}

}  // namespace

TEST_CASE("C API: an argument error names the entry point the program called", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_entry_names";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Every entry point said "herd_run_dram: ndim is 0", also to a ParaMonte program (and to
  // Fortran's paramonte module) that called runParaDRAM.
  std::string input = "&ParaDRAM chainSize = 100, outputFileName = '" + (dir / "out" / "run").string() + "' /";
  std::string err = stderr_of(dir, [&] { runParaDRAM(0, log_normal, input.data(), (int32_t)input.size()); });
  CHECK(herd_last_status() == 2);
  CHECK_THAT(err, Catch::Contains("runParaDRAM: ndim is 0, but must be at least 1"));
  err = stderr_of(dir, [&] { CHECK(runParaDRAMD(nullptr, 2, input.c_str()) == 2); });
  CHECK_THAT(err, Catch::Contains("runParaDRAMD: the log function is NULL"));
  err = stderr_of(dir, [&] { CHECK(herd_run_dram(-1, log_normal, input.c_str()) == 2); });
  CHECK_THAT(err, Catch::Contains("herd_run_dram: ndim is -1"));
  err = stderr_of(dir, [&] { CHECK(herd_run_dram(2, log_normal, "ndim = 2\n") == 2); });
  CHECK_THAT(err, Catch::Contains("the dimension is herd_run_dram's argument ndim"));
  CHECK(!fs::exists(dir / "out"));
}

namespace {

std::string g_nested_input;
int g_nested_status = -1;

/// A log density that starts another run from inside the run in progress (once).
double log_normal_nesting(std::int32_t ndim, double point[]) {
  if (g_nested_status == -1) g_nested_status = herd_run_dram(ndim, log_normal, g_nested_input.c_str());
  return log_normal(ndim, point);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("C API: runs on two threads at once run one after the other; a run inside a run is refused", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_threads";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto input = [&](const std::string& name) {
    return "&ParaDRAM chainSize = 20000, randomSeed = 9, silentModeRequested = T, outputFileName = '" +
           (dir / name).string() + "' /";
  };
  // Two threads at once (they ran concurrently and could crash the process), then the same
  // runs one by one: the same chains.
  const std::string a = input("a"), b = input("b");
  int sa = -1, sb = -1;
  std::thread ta([&] { sa = herd_run_dram(3, log_normal, a.c_str()); });
  std::thread tb([&] { sb = herd_run_dram(3, log_normal, b.c_str()); });
  ta.join();
  tb.join();
  CHECK(sa == 0);
  CHECK(sb == 0);
  REQUIRE(herd_run_dram(3, log_normal, input("ref").c_str()) == 0);
  const std::string ref = slurp(dir / "ref_chain.txt");
  CHECK(!ref.empty());
  CHECK(slurp(dir / "a_chain.txt") == ref);
  CHECK(slurp(dir / "b_chain.txt") == ref);
  // From inside the log density: refused (status 2, one line), the outer run unharmed.
  g_nested_input = input("inner");
  g_nested_status = -1;
  const std::string outer = input("outer");
  const std::string err = stderr_of(dir, [&] { CHECK(herd_run_dram(3, log_normal_nesting, outer.c_str()) == 0); });
  CHECK(g_nested_status == 2);
  CHECK_THAT(err, Catch::Contains("herd_run_dram was called from inside the log density of a run in progress"));
  CHECK(!fs::exists(dir / "inner_chain.txt"));
  CHECK(slurp(dir / "outer_chain.txt") == ref);
  CHECK(herd_last_status() == 0);
}

namespace {

long g_calls_left = 0;

/// Fails the run (+inf) once `g_calls_left` calls are spent: an interrupted run.
double log_normal_failing(std::int32_t ndim, double point[]) {
  if (--g_calls_left < 0) return 1.0 / 0.0;
  return log_normal(ndim, point);
}

}  // namespace

TEST_CASE("C API: resuming an interrupted run with a log function of another dimension names both", "[mcmc]") {
  const fs::path dir = fs::path(HERD_TEST_WORK_DIR) / "c_api_resume_ndim";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string input =
      "&ParaDRAM chainSize = 50000, randomSeed = 2, silentModeRequested = T, checkpoint_period = "
      "1000, outputFileName = '" +
      (dir / "run").string() + "' /";
  g_calls_left = 20000;
  (void)stderr_of(dir, [&] { CHECK(herd_run_dram(2, log_normal_failing, input.c_str()) == 1); });
  REQUIRE(fs::exists(dir / "run_restart" / "run.ckpt"));
  // The message said "the settings are the same, so the target (its file, data or library)
  // differs", which names nothing a C program has.
  const std::string err = stderr_of(dir, [&] { CHECK(herd_run_dram(3, log_normal, input.c_str()) == 2); });
  CHECK_THAT(err, Catch::Contains("the target is not: C log function (ParaMonte signature) with ndim 2 in the record, "
                                  "C log function (ParaMonte signature) with ndim 3 now"));
  // The same dimension resumes it.
  CHECK(herd_run_dram(2, log_normal, input.c_str()) == 0);
}
