// The file guarantees of herd-sample and herd-rl (docs/io.md "Guarantees"), run as a user
// would: no output is written through a symbolic link (lock file, text files, checkpoints),
// with or without overwrite; herd-rl holds the same prefix lock as herd-sample, checks its
// output folder before training and removes the temporaries of dead runs; a folder named
// <prefix>_restart that herd did not make is never deleted; a plugin named in the input is
// loaded (its code run) only after the output checks; a plugin that calls exit(0) ends the
// run with an error instead of a silent success.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "app_runner.hpp"

#include "herd/io/output_files.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

Run sample(const fs::path& dir, const std::string& args, const std::string& env = "") {
  return herd::testing::run_shell(dir, env + "'" + HERD_SAMPLE_EXE + "' " + args);
}

Run rl(const fs::path& dir, const std::string& args) { return herd::testing::run_app(HERD_RL_EXE, dir, args); }

std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// A short serial run of the built-in normal target, checkpointed (a restart folder).
const char* kSample = "chain_size = 300\nrandom_seed = 1\n[target]\nbuiltin = \"normal\"\nndim = 2\n";

// The plugin of the fault tests (a standard normal; fails on request; marks its loading).
std::string plugin_input() {
  return std::string("chain_size = 2000\nrandom_seed = 2\ncheckpoint_period = 500\n[target]\nlibrary = \"") +
         HERD_TEST_FAIL_PLUGIN + "\"\nndim = 2\n";
}

const char* kRl = R"(total_steps = 256
output_prefix = "out/run"
checkpoint_period = 1
[sampler]
num_envs = 4
num_steps = 32
[algo]
epochs = 1
minibatch_size = 64
)";

}  // namespace

TEST_CASE("herd-sample: a symbolic link at <prefix>.lock is refused, its target untouched", "[apps][files]") {
  const auto dir = workdir("lock_link");
  write(dir / "run.toml", kSample);
  write(dir / "victim.txt", "precious\n");
  fs::create_directories(dir / "shared");
  fs::create_symlink("../victim.txt", dir / "shared" / "run.lock");
  const Run r = sample(dir, "run.toml --quiet --output shared/run");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("shared/run.lock") && Contains("symbolic link"));
  CHECK(lines(r.err) == 1);
  CHECK(slurp(dir / "victim.txt") == "precious\n");
  CHECK_FALSE(fs::exists(dir / "shared" / "run_report.txt"));
}

TEST_CASE("herd-sample: links at the text outputs are refused, with overwrite too", "[apps][files]") {
  const auto dir = workdir("output_links");
  write(dir / "run.toml", kSample);
  for (const char* suffix : {"_chain.txt", "_sample.txt", "_report.txt", "_progress.txt"}) {
    INFO(suffix);
    const fs::path link = dir / (std::string("run") + suffix);
    const fs::path target = dir / (std::string("target") + suffix);
    // A dangling link: nothing may be created at its target.
    fs::remove(link);
    fs::remove(target);
    fs::create_symlink(target.filename(), link);
    Run r = sample(dir, "run.toml --quiet --output run");
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains(std::string("run") + suffix) && Contains("symbolic link"));
    CHECK(lines(r.err) == 1);
    CHECK_FALSE(fs::exists(target));
    // An existing target with overwrite = true: not overwritten.
    write(target, "mine\n");
    r = sample(dir, "run.toml --quiet --output run --set overwrite=true");
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("symbolic link"));
    CHECK(slurp(target) == "mine\n");
    CHECK(fs::is_symlink(link));
    fs::remove(link);
  }
  // Without links the same run writes its outputs.
  CHECK(sample(dir, "run.toml --quiet --output run --set overwrite=true").rc == 0);
  CHECK(fs::is_regular_file(dir / "run_chain.txt"));
}

TEST_CASE("herd-sample: a <prefix>_restart folder that herd did not make is never deleted", "[apps][files]") {
  const auto dir = workdir("restart_folder");
  write(dir / "run.toml", kSample);
  fs::create_directories(dir / "run_restart");
  write(dir / "run_restart" / "notes.txt", "mine\n");
  for (const char* extra : {"", " --set overwrite=true"}) {
    INFO(extra);
    const Run r = sample(dir, std::string("run.toml --quiet --output run") + extra);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("run_restart") && Contains("not deleted"));
    CHECK(lines(r.err) == 1);
    CHECK(slurp(dir / "run_restart" / "notes.txt") == "mine\n");
  }
  // A file of that name is not deleted either; an empty folder (a run killed before its
  // record) is herd's and is replaced.
  fs::remove_all(dir / "run_restart");
  write(dir / "run_restart", "a file\n");
  CHECK(sample(dir, "run.toml --quiet --output run").rc == 2);
  CHECK(slurp(dir / "run_restart") == "a file\n");
  fs::remove(dir / "run_restart");
  fs::create_directories(dir / "run_restart");
  const Run ok = sample(dir, "run.toml --quiet --output run");
  INFO(ok.err);
  CHECK(ok.rc == 0);
  CHECK(fs::exists(dir / "run_restart" / "run.ckpt"));
}

TEST_CASE("herd-sample: a plugin is loaded only after the output checks", "[apps][files]") {
  const auto dir = workdir("plugin_order");
  write(dir / "run.toml", plugin_input());
  const std::string mark = (dir / "loaded").string();
  // Control: a run with free outputs loads the plugin (its constructor makes the mark).
  Run r = sample(dir, "run.toml --quiet --output a/run", "HERD_TEST_LOAD_MARK='" + mark + "' ");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  REQUIRE(fs::exists(mark));
  fs::remove(mark);
  // Outputs exist: refused before the library is loaded.
  r = sample(dir, "run.toml --quiet --output a/run --set chain_size=2100", "HERD_TEST_LOAD_MARK='" + mark + "' ");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("exists"));
  CHECK_FALSE(fs::exists(mark));
  // The prefix is locked by another run: refused before loading too.
  fs::create_directories(dir / "b");
  const herd::io::OutputPrefixLock held((dir / "b" / "run").string(), "test");
  r = sample(dir, "run.toml --quiet --output b/run", "HERD_TEST_LOAD_MARK='" + mark + "' ");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("in use by another herd-sample run"));
  CHECK_FALSE(fs::exists(mark));
}

TEST_CASE("herd-sample: a log density that calls exit(0) ends the run with an error", "[apps][faults]") {
  const auto dir = workdir("plugin_exit");
  write(dir / "run.toml", plugin_input());
  const Run r = sample(dir, "run.toml --quiet --output run",
                       "HERD_TEST_FAIL_MODE=exit HERD_TEST_FAIL_RANK=0 HERD_TEST_FAIL_AFTER=800 ");
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Contains("the log density called exit(...)"));
  CHECK(lines(r.err) == 1);
  CHECK_FALSE(fs::exists(dir / "run.h5"));
  // The restart record is intact: the rerun resumes and completes.
  const Run again = sample(dir, "run.toml --output run");
  INFO(again.err);
  CHECK(again.rc == 0);
  CHECK_THAT(again.out, Contains("resuming"));
  CHECK(fs::exists(dir / "run.h5"));
}

TEST_CASE("herd-sample: a log density that crashes ends the run with one line saying what became of it",
          "[apps][faults]") {
  const auto dir = workdir("plugin_crash");
  write(dir / "run.toml", plugin_input());
  // ulimit -c 0: no core file of the crash.
  for (const auto& [mode, rc, name] : {std::tuple{"segv", 128 + SIGSEGV, "SIGSEGV (invalid memory access)"},
                                       std::tuple{"abort", 128 + SIGABRT, "SIGABRT (abort)"}}) {
    INFO(mode);
    const std::string prefix = std::string("run_") + mode;
    const Run r = sample(
        dir, "run.toml --quiet --output " + prefix,
        std::string("ulimit -c 0; HERD_TEST_FAIL_MODE=") + mode + " HERD_TEST_FAIL_RANK=0 HERD_TEST_FAIL_AFTER=800 ");
    CHECK(r.rc == rc);  // the signal ends the process as it would without herd's handler
    CHECK_THAT(r.err, Contains(std::string("herd-sample: error: crashed with ") + name +
                               " during the run (in the log density, a plugin it calls, or herd); the restart "
                               "record in " +
                               prefix + "_restart is kept: the same command resumes the run"));
    CHECK_FALSE(fs::exists(dir / (prefix + ".h5")));
    CHECK_FALSE(fs::exists(dir / (prefix + ".lock")));  // removed, as a run that ends removes it
    // The restart record is intact: the rerun resumes and completes.
    const Run again = sample(dir, "run.toml --output " + prefix);
    INFO(again.err);
    CHECK(again.rc == 0);
    CHECK_THAT(again.out, Contains("resuming"));
    CHECK(fs::exists(dir / (prefix + ".h5")));
  }
}

TEST_CASE("herd-rl: links refused, the prefix locked, the folder checked up front, dead temporaries removed",
          "[apps][files][rl]") {
  const auto dir = workdir("rl");
  write(dir / "small.toml", kRl);
  fs::create_directories(dir / "out");
  // A link at <prefix>.ckpt (with --overwrite too): refused, its target untouched.
  write(dir / "victim.txt", "precious\n");
  fs::create_symlink("../victim.txt", dir / "out" / "run.ckpt");
  Run r = rl(dir, "train small.toml --quiet --overwrite");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("out/run.ckpt") && Contains("symbolic link"));
  CHECK(slurp(dir / "victim.txt") == "precious\n");
  fs::remove(dir / "out" / "run.ckpt");
  // Another run holds the prefix: refused (before any training).
  {
    const herd::io::OutputPrefixLock held((dir / "out" / "run").string(), "herd-rl");
    r = rl(dir, "train small.toml --quiet --overwrite");
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("in use by another herd-rl run") && Contains(std::to_string(::getpid())));
    CHECK_FALSE(fs::exists(dir / "out" / "run.ckpt"));
  }
  // A temporary of a dead process is removed; the run trains and releases its lock.
  write(dir / "out" / "run.ckpt.tmp.99999999.0", "partial");
  r = rl(dir, "train small.toml --quiet");
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK_FALSE(fs::exists(dir / "out" / "run.ckpt.tmp.99999999.0"));
  CHECK(fs::exists(dir / "out" / "run.h5"));
  CHECK_FALSE(fs::exists(dir / "out" / "run.lock"));
  // An output folder that takes no files: refused at once (no training first). As root
  // (CI containers) a read-only mode does not stop writes, so a /proc folder stands in.
  std::string prefix = "ro/run";
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() == 0) prefix = "/proc/self/run";
  const auto t0 = std::chrono::steady_clock::now();
  r = rl(dir, "train small.toml --quiet --set output_prefix=" + prefix + " --set total_steps=1000000");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::permissions(dir / "ro", fs::perms::owner_all);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("not writable"));
  CHECK(secs < 10);
}
