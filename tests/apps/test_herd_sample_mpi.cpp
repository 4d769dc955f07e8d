// herd-sample under mpiexec: fork-join chains equal the serial chain byte for
// byte; multi_chain chains depend only on their global ids (any ranks x chains_per_rank
// layout); different inputs on different ranks and a failing rank end every rank; the
// restart record resumes, refuses another input, and reports a completed run.
// The test itself is one process; it starts herd-sample through mpiexec (MPICH).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "app_runner.hpp"

#include "herd/io/hdf5.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

using herd::testing::run_shell;

/// herd-sample with `args` in `dir`, under `mpiexec -n ranks` when ranks > 0, with the
/// environment assignments `env` ("A=1 B=2 ").
Run sample(const fs::path& dir, int ranks, const std::string& args, const std::string& env = "") {
  const std::string exe = std::string("'") + HERD_SAMPLE_EXE + "' ";
  if (ranks == 0) return run_shell(dir, env + exe + args);
  return run_shell(dir, env + "'" + HERD_MPIEXEC + "' -n " + std::to_string(ranks) + " " + exe + args);
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A correlated 3-D banana with delayed rejection and a domain box: every kernel path.
const char* kToml = R"(chain_size = 2500
random_seed = 99
start_point = [0.5, 0.5, 0.5]
proposal_std = [0.7, 0.7, 0.7]
delayed_rejection_count = 2
domain_lower = [-30, -30, -30]
domain_upper = [30, 30, 8]
variable_names = ["a", "b", "c"]
[target]
builtin = "banana"
ndim = 3
)";

const std::vector<const char*> kDoubleSets = {"posterior/a",
                                              "posterior/b",
                                              "sample_stats/lp",
                                              "sample_stats/acceptance_probability",
                                              "chain_compact/state",
                                              "chain_compact/log_density",
                                              "sample/a",
                                              "sample/lp",
                                              "diagnostics/ess_bulk",
                                              "diagnostics/rhat"};

void check_same_h5(const fs::path& a, const fs::path& b) {
  auto fa = herd::io::H5File::open(a.string());
  auto fb = herd::io::H5File::open(b.string());
  for (const char* ds : kDoubleSets) {
    INFO(ds);
    const auto x = fa.open_dataset(ds);
    CHECK(x.shape() == fb.open_dataset(ds).shape());
    CHECK(x.read<double>() == fb.open_dataset(ds).read<double>());
  }
  CHECK(fa.open_dataset("chain_compact/weight").read<std::int64_t>() ==
        fb.open_dataset("chain_compact/weight").read<std::int64_t>());
}

}  // namespace

TEST_CASE("herd-sample single_chain under mpiexec -n 2 and -n 3 (fork-join) writes the serial run's bytes",
          "[apps][mcmc][mpi]") {
  const auto dir = workdir("forkjoin");
  write(dir / "run.toml", kToml);
  // Short: a fork-join round waits for every rank, slow on oversubscribed cores.
  const Run s = sample(dir, 0, "run.toml --quiet --set chain_size=400 --output serial/run");
  INFO(s.err);
  REQUIRE(s.rc == 0);
  for (int n : {2, 3}) {
    INFO("ranks " << n);
    const std::string out = "np" + std::to_string(n);
    const Run r = sample(dir, n, "run.toml --set chain_size=400 --output " + out + "/run");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    // Rank 0 alone prints: one summary table.
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') < 40);
    for (const char* f : {"run_chain.txt", "run_sample.txt"}) {
      INFO(f);
      const std::string a = slurp(dir / "serial" / f);
      CHECK(a.size() > 500);
      CHECK(a == slurp(dir / out / f));
    }
    check_same_h5(dir / "serial" / "run.h5", dir / out / "run.h5");
    const std::string report = slurp(dir / out / "run_report.txt");
    CHECK_THAT(report, Contains("single_chain (fork-join)") && Contains("predicted speedup") &&
                           Contains("measured speedup") && Contains("stage-1 acceptances"));
  }
}

TEST_CASE("herd-sample multi_chain: -n 1 x 4, -n 2 x 2 and -n 4 x 1 give bit-identical chains", "[apps][mcmc][mpi]") {
  const auto dir = workdir("multi");
  write(dir / "run.toml", std::string(kToml) + "\n");
  const std::string common = "run.toml --quiet --set parallelization_model=multi_chain --set chain_size=1500";
  struct Layout {
    int ranks, per_rank;
  };
  for (const Layout l : {Layout{0, 4}, Layout{2, 2}, Layout{4, 1}}) {
    const Run r = sample(dir, l.ranks,
                         common + " --set chains_per_rank=" + std::to_string(l.per_rank) + " --output n" +
                             std::to_string(l.ranks) + "/run");
    INFO(r.err);
    REQUIRE(r.rc == 0);
  }
  for (int k = 1; k <= 4; ++k) {
    for (const char* kind : {"chain", "sample"}) {
      const std::string f = "run_process_" + std::to_string(k) + "_" + kind + ".txt";
      INFO(f);
      const std::string a = slurp(dir / "n0" / f);
      CHECK(a.size() > 500);
      CHECK(a == slurp(dir / "n2" / f));
      CHECK(a == slurp(dir / "n4" / f));
      // ParaDRAM's ProcessID column holds the 1-based chain id.
      if (std::string(kind) == "chain") CHECK(a.substr(a.find('\n') + 1, 2) == std::to_string(k) + ",");
    }
  }
  CHECK_FALSE(fs::exists(dir / "n0" / "run_chain.txt"));
  // Every rank held the prefix lock; released in order, the last holder removed its file.
  for (const char* n : {"n0", "n2", "n4"}) CHECK_FALSE(fs::exists(dir / n / "run.lock"));
  // The chains differ from each other.
  CHECK(slurp(dir / "n0" / "run_process_1_chain.txt") != slurp(dir / "n0" / "run_process_2_chain.txt"));
  check_same_h5(dir / "n0" / "run.h5", dir / "n2" / "run.h5");
  check_same_h5(dir / "n0" / "run.h5", dir / "n4" / "run.h5");
  auto f = herd::io::H5File::open((dir / "n2" / "run.h5").string());
  const auto shape = f.open_dataset("posterior/a").shape();
  REQUIRE(shape.size() == 2);
  CHECK(shape[0] == 4);
  CHECK(f.open_dataset("posterior/a").dimension_names() == std::vector<std::string>{"chain", "draw"});
  const std::string report = slurp(dir / "n2" / "run_report.txt");
  CHECK_THAT(report, Contains("across chains") && Contains("Kolmogorov") && Contains("2 x 2 = 4 chains"));
  // ArviZ/xarray opens it with a chain dimension of 4.
  if (std::system("/usr/bin/python3 -c 'import xarray, h5netcdf' > /dev/null 2>&1") == 0) {
    write(dir / "check.py",
          "import sys, xarray as xr\n"
          "ds = xr.open_dataset(sys.argv[1], group='posterior', engine='h5netcdf')\n"
          "assert ds.sizes['chain'] == 4, ds.sizes\n"
          "st = xr.open_dataset(sys.argv[1], group='sample_stats', engine='h5netcdf')\n"
          "assert st['lp'].shape == ds['a'].shape\n");
    CHECK(std::system(
              ("/usr/bin/python3 '" + (dir / "check.py").string() + "' '" + (dir / "n2" / "run.h5").string() + "'")
                  .c_str()) == 0);
  } else {
    WARN("python3 xarray/h5netcdf not installed: xarray check skipped");
  }
}

TEST_CASE("herd-sample: different inputs on different ranks are refused at start-up", "[apps][mcmc][mpi]") {
  const auto dir = workdir("mismatch");
  write(dir / "a.toml", kToml);
  write(dir / "b.toml", std::string(kToml) + "\n");
  // MPMD launch: rank 0 and rank 1 read different seeds.
  const Run r = run_shell(dir, std::string(HERD_MPIEXEC) + " -n 1 " + HERD_SAMPLE_EXE + " a.toml --seed 1 : -n 1 " +
                                   HERD_SAMPLE_EXE + " a.toml --seed 2");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("differs between ranks") && Contains("rank(s) 1"));
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("herd-sample: a failing rank ends every rank; resuming the run completes it exactly", "[apps][mcmc][mpi]") {
  const auto dir = workdir("fault");
  const std::string input = std::string(
                                "chain_size = 30000\nrandom_seed = 5\nparallelization_model = \"multi_chain\"\n"
                                "checkpoint_period = 2000\n[target]\nlibrary = \"") +
                            HERD_TEST_FAIL_PLUGIN + "\"\nndim = 2\n";
  write(dir / "run.toml", input);
  const Run ref = sample(dir, 2, "run.toml --quiet --output ref/run");
  INFO(ref.err);
  REQUIRE(ref.rc == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const Run bad =
      sample(dir, 2, "run.toml --quiet --output x/run", "HERD_TEST_FAIL_RANK=1 HERD_TEST_FAIL_AFTER=15000 ");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(bad.rc != 0);
  CHECK_THAT(bad.err, Contains("rank 1 of 2 failed") && Contains("+inf"));
  CHECK(secs < 30);
  CHECK(fs::exists(dir / "x" / "run_restart" / "chain_1.ckpt"));
  const Run resumed = sample(dir, 2, "run.toml --output x/run");
  INFO(resumed.err);
  REQUIRE(resumed.rc == 0);
  CHECK_THAT(resumed.out, Contains("resuming"));
  for (const char* f : {"run_process_1_chain.txt", "run_process_2_chain.txt", "run_process_2_sample.txt"}) {
    INFO(f);
    CHECK(slurp(dir / "ref" / f) == slurp(dir / "x" / f));
  }
}

TEST_CASE("herd-sample restart: another input is refused, the same resumes, a complete run is reported",
          "[apps][mcmc]") {
  const auto dir = workdir("restart");
  const std::string input = std::string(
                                "chain_size = 20000\nrandom_seed = 3\ncheckpoint_period = 1000\n"
                                "variable_names = [\"a\", \"b\"]\n[target]\nlibrary = \"") +
                            HERD_TEST_FAIL_PLUGIN + "\"\nndim = 2\n";
  write(dir / "run.toml", input);
  REQUIRE(sample(dir, 0, "run.toml --quiet --output ref/run").rc == 0);
  // An interrupted run (the log density fails after 9000 calls).
  const Run bad = sample(dir, 0, "run.toml --quiet --output x/run", "HERD_TEST_FAIL_RANK=0 HERD_TEST_FAIL_AFTER=9000 ");
  CHECK(bad.rc == 1);
  CHECK(fs::exists(dir / "x" / "run_restart" / "run.ckpt"));
  // The text chain is streamed while sampling: the interrupted run's rows are there.
  const std::string partial = slurp(dir / "x" / "run_chain.txt");
  CHECK(std::count(partial.begin(), partial.end(), '\n') > 500);
  // Another input on its record: refused, saying how to start afresh; nothing changed.
  const Run other = sample(dir, 0, "run.toml --quiet --output x/run --set chain_size=25000");
  CHECK(other.rc == 2);
  CHECK_THAT(other.err, Contains("restart record") && Contains("overwrite = true"));
  // The same input resumes and ends with the uninterrupted run's bytes.
  const Run again = sample(dir, 0, "run.toml --output x/run");
  INFO(again.err);
  REQUIRE(again.rc == 0);
  CHECK_THAT(again.out, Contains("resuming"));
  CHECK(slurp(dir / "ref" / "run_chain.txt") == slurp(dir / "x" / "run_chain.txt"));
  CHECK(slurp(dir / "ref" / "run_sample.txt") == slurp(dir / "x" / "run_sample.txt"));
  check_same_h5(dir / "ref" / "run.h5", dir / "x" / "run.h5");
  // Complete: reported, not redone (exit 0, the report untouched).
  const std::string report = slurp(dir / "x" / "run_report.txt");
  const Run done = sample(dir, 0, "run.toml --output x/run");
  CHECK(done.rc == 0);
  CHECK_THAT(done.out, Contains("is complete"));
  CHECK(slurp(dir / "x" / "run_report.txt") == report);
  // overwrite = true starts afresh.
  const Run fresh = sample(dir, 0, "run.toml --quiet --output x/run --set overwrite=true --set chain_size=21000");
  CHECK(fresh.rc == 0);
  CHECK(slurp(dir / "x" / "run_chain.txt") != slurp(dir / "ref" / "run_chain.txt"));
}

TEST_CASE("herd-sample: a prefix whose lock a rank of an earlier run still holds is refused", "[apps][mcmc][mpi]") {
  // After `mpiexec` alone is killed, its ranks may live on for a while and write their restart
  // records. Every rank joins rank 0's lock, so a new run is refused until the last one ends.
  // Here the test holds the shared lock such a rank would hold; the pid in the file (rank 0's)
  // has ended.
  const auto dir = workdir("rank_lock");
  write(dir / "run.toml", std::string(kToml) + "\n");
  fs::create_directories(dir / "out");
  const int fd = ::open((dir / "out/run.lock").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_SH | LOCK_NB) == 0);
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  REQUIRE(::waitpid(gone, nullptr, 0) == gone);
  const std::string pid = std::to_string(gone) + "\n";
  REQUIRE(::write(fd, pid.data(), pid.size()) == static_cast<ssize_t>(pid.size()));
  const std::string args = "run.toml --quiet --set parallelization_model=multi_chain --output out/run";
  const Run r = sample(dir, 2, args);
  INFO(r.err);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("output_prefix \"out/run\" is in use by another herd-sample run (its rank 0, pid " +
                             std::to_string(gone) +
                             ", has ended; other processes of that run still hold the lock "
                             "file \"out/run.lock\")"));
  CHECK_FALSE(fs::exists(dir / "out/run.h5"));
  ::close(fd);  // the last rank of the earlier run ended
  // While the run goes, both ranks hold the lock (shared): /proc/locks lists one FLOCK READ
  // entry per process on the lock file's inode.
  std::set<std::string> holders;
  std::atomic<bool> done{false};
  Run ok;
  std::thread job([&] {
    ok = sample(dir, 2, args + " --set chain_size=400000");
    done = true;
  });
  while (!done && holders.size() < 2) {
    struct stat st {};
    if (::stat((dir / "out/run.lock").c_str(), &st) == 0) {
      std::string inode(1, ':');  // maj:min:inode, then a space
      inode.append(std::to_string(st.st_ino)).push_back(' ');
      std::ifstream locks("/proc/locks");
      std::set<std::string> now;
      for (std::string line; std::getline(locks, line);) {
        std::istringstream in(line);
        std::string id, kind, advisory, mode, pid;
        in >> id >> kind >> advisory >> mode >> pid;
        if (kind == "FLOCK" && mode == "READ" && line.find(inode) != std::string::npos) now.insert(pid);
      }
      holders.insert(now.begin(), now.end());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  job.join();
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK(holders.size() == 2);
  CHECK(fs::exists(dir / "out/run.h5"));
  CHECK_FALSE(fs::exists(dir / "out/run.lock"));
}
