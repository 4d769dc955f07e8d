// Faults in parallel runs and in user code, under mpiexec -n 2 (docs/io.md "Guarantees"):
// a +inf log density on one rank of a multi_chain run ends every rank with one line and
// exit code 1 (no transport assertions or backtraces); a log density that calls exit(0) on
// one rank ends the job with an error instead of leaving the other rank waiting forever;
// a log density that never returns is caught by the stall_timeout_seconds watchdog, which
// names the rank and leaves a restart record that resumes to the uninterrupted run's bytes;
// a rank stopped by SIGSTOP is named by the rank that waits for it.
// Every run is wrapped in `timeout`, so a hang fails the test instead of blocking CI.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "app_runner.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

/// herd-sample under `timeout 60 mpiexec -n 2`, with environment assignments `env`.
Run sample2(const fs::path& dir, const std::string& args, const std::string& env = "") {
  return herd::testing::run_shell(dir,
                                  env + "timeout 60 '" + HERD_MPIEXEC + "' -n 2 '" + HERD_SAMPLE_EXE + "' " + args);
}

std::string input() {
  return std::string(
             "chain_size = 20000\nrandom_seed = 5\nparallelization_model = \"multi_chain\"\n"
             "checkpoint_period = 2000\n[target]\nlibrary = \"") +
         HERD_TEST_FAIL_PLUGIN + "\"\nndim = 2\n";
}

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

/// No transport noise: no assertion, no backtrace, at most our line and MPICH's abort line.
void check_quiet_failure(const Run& r) {
  INFO(r.err);
  CHECK(r.rc == 1);
  CHECK_FALSE(Contains("Assertion").match(r.err));
  CHECK_FALSE(Contains("backtrace").match(r.err));
  CHECK(lines(r.err) <= 2);
}

}  // namespace

TEST_CASE("multi_chain: +inf from the log density on rank 1 ends every rank with one line, exit 1",
          "[apps][mcmc][mpi][faults]") {
  const auto dir = workdir("inf");
  write(dir / "run.toml", input());
  const Run r = sample2(dir, "run.toml --quiet --output run", "HERD_TEST_FAIL_RANK=1 HERD_TEST_FAIL_AFTER=9000 ");
  check_quiet_failure(r);
  CHECK_THAT(r.err, Contains("rank 1 of 2 failed") && Contains("+inf"));
}

TEST_CASE("a log density calling exit(0) on rank 1 ends the job with an error, no hang", "[apps][mcmc][mpi][faults]") {
  const auto dir = workdir("exit");
  write(dir / "run.toml", input());
  const Run r = sample2(dir, "run.toml --quiet --output run",
                        "HERD_TEST_FAIL_MODE=exit HERD_TEST_FAIL_RANK=1 HERD_TEST_FAIL_AFTER=9000 ");
  check_quiet_failure(r);
  CHECK_THAT(r.err, Contains("rank 1: the log density called exit(...)"));
  CHECK_FALSE(fs::exists(dir / "run.h5"));
}

TEST_CASE("stall_timeout_seconds: a log density that never returns on rank 1 is named; the record resumes",
          "[apps][mcmc][mpi][faults]") {
  const auto dir = workdir("stall");
  write(dir / "run.toml", input());
  const Run ref = sample2(dir, "run.toml --quiet --output ref/run");
  INFO(ref.err);
  REQUIRE(ref.rc == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Run r = sample2(dir, "run.toml --quiet --output x/run --set stall_timeout_seconds=1.5",
                        "HERD_TEST_FAIL_MODE=hang HERD_TEST_FAIL_RANK=1 HERD_TEST_FAIL_AFTER=9000 ");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_quiet_failure(r);
  CHECK_THAT(r.err, Contains("rank 1 of 2 stalled") && Contains("the log density has not returned") &&
                        Contains("stall_timeout_seconds = 1.5"));
  CHECK(secs < 30);
  REQUIRE(fs::exists(dir / "x" / "run_restart" / "run.ckpt"));
  // The watchdog is not part of what a run computes: the rerun (without it) resumes.
  const Run again = sample2(dir, "run.toml --output x/run");
  INFO(again.err);
  REQUIRE(again.rc == 0);
  CHECK_THAT(again.out, Contains("resuming"));
  // The stalled run's heartbeat files went with it.
  CHECK_FALSE(fs::exists(dir / "x" / "run_restart" / "heartbeat.1"));
  for (const char* f : {"run_process_1_chain.txt", "run_process_2_chain.txt", "run_process_2_sample.txt"}) {
    INFO(f);
    CHECK(slurp(dir / "ref" / f) == slurp(dir / "x" / f));
  }
}

TEST_CASE("stall_timeout_seconds: a stopped rank (SIGSTOP) is named by the rank that waits for it",
          "[apps][mcmc][mpi][faults]") {
  const auto dir = workdir("stopped");
  write(dir / "run.toml", input());
  const Run r = sample2(dir, "run.toml --quiet --output run --set stall_timeout_seconds=1.5",
                        "HERD_TEST_FAIL_MODE=stop HERD_TEST_FAIL_RANK=1 HERD_TEST_FAIL_AFTER=9000 ");
  check_quiet_failure(r);
  CHECK_THAT(r.err, Contains("rank(s) 1 of 2 stalled") && Contains("no sign of life") && Contains("rank 0 waited"));
  CHECK(fs::exists(dir / "run_restart" / "run.ckpt"));
}
