// herd-rl end to end: training outputs, resume, eval output format, input errors (exit 2,
// nothing overwritten), a NaN loss stops training and keeps the last checkpoint.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "app_runner.hpp"

#include "herd/io/hdf5.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

/// A fresh working folder per test case.
fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

Run run(const fs::path& dir, const std::string& args) { return herd::testing::run_app(HERD_RL_EXE, dir, args); }

const char* kSmall = R"(total_steps = 1024
output_prefix = "run"
checkpoint_period = 2
progress_period = 1
[sampler]
num_envs = 4
num_steps = 32
[algo]
epochs = 2
minibatch_size = 64
)";

}  // namespace

TEST_CASE("herd-rl train writes the curve, config and policy; eval prints the format", "[rl][apps]") {
  const fs::path d = workdir("train");
  std::ofstream(d / "small.toml") << kSmall;
  const Run r = run(d, "train small.toml");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("steps/s") && Contains("mean return") && Contains("ETA"));
  REQUIRE(fs::exists(d / "run.h5"));
  REQUIRE(fs::exists(d / "run.ckpt"));
  auto f = herd::io::H5File::open((d / "run.h5").string());
  const auto steps = f.root().read<double>("curve/env_steps");
  REQUIRE(steps.size() == 8u);
  CHECK(steps.back() == 1024.0);
  CHECK(f.root().read<double>("curve/approx_kl").size() == 8u);
  CHECK_THAT(f.root().attribute_string("config"), Contains("total_steps = 1024"));
  CHECK(f.root().is_dataset("policy/pi.0.weight"));
  const Run e = run(d, "eval run.ckpt --episodes 3");
  INFO(e.err);
  REQUIRE(e.rc == 0);
  CHECK_THAT(e.out, Contains("mean_return = ") && Contains("std_return = "));
  const Run s = run(d, "eval run.ckpt --episodes 2 --stochastic");
  CHECK(s.rc == 0);
  CHECK(run(d, "eval missing.ckpt").rc == 2);
}

TEST_CASE("herd-rl train --resume continues to the same result", "[rl][apps]") {
  const fs::path d = workdir("resume");
  std::ofstream(d / "small.toml") << kSmall;
  REQUIRE(run(d, "train small.toml --quiet --set output_prefix=full").rc == 0);
  REQUIRE(run(d, "train small.toml --quiet --set output_prefix=part --stop-after 3").rc == 0);
  REQUIRE(fs::exists(d / "part.ckpt"));
  REQUIRE_FALSE(fs::exists(d / "part.h5"));
  const Run r = run(d, "train small.toml --set output_prefix=part --resume");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("resumed from part.ckpt at iteration 3"));
  auto a = herd::io::H5File::open((d / "full.h5").string());
  auto b = herd::io::H5File::open((d / "part.h5").string());
  CHECK(a.root().read<float>("policy/pi.0.weight") == b.root().read<float>("policy/pi.0.weight"));
  CHECK(a.root().read<float>("policy/vf.2.bias") == b.root().read<float>("policy/vf.2.bias"));
  CHECK(a.root().read<double>("curve/policy_loss") == b.root().read<double>("curve/policy_loss"));
  CHECK(a.root().read<double>("curve/return_mean").size() == b.root().read<double>("curve/return_mean").size());
}

TEST_CASE("herd-rl: bad input exits 2 naming key and value, nothing overwritten", "[rl][apps]") {
  const fs::path d = workdir("errors");
  std::ofstream(d / "herd_rl.h5") << "keep";
  Run r = run(d, "train --set env=Nope-v0");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("\"env\"") && Contains("Nope-v0"));
  r = run(d, "train --set algo.clip_range=-1");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("algo.clip_range") && Contains("-1"));
  std::ofstream(d / "bad.toml") << "[sampler]\nnum_envz = 3\n";
  r = run(d, "train bad.toml");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("bad.toml:2") && Contains("num_envz"));
  r = run(d, "train missing.toml");
  CHECK(r.rc == 2);
  CHECK(slurp(d / "herd_rl.h5") == "keep");
  CHECK_FALSE(fs::exists(d / "herd_rl.ckpt"));
}

TEST_CASE("herd-rl: a NaN loss stops training naming the iteration; the checkpoint is kept", "[rl][apps]") {
  const fs::path d = workdir("nan");
  std::ofstream(d / "small.toml") << kSmall;
  REQUIRE(run(d, "train small.toml --quiet --stop-after 2").rc == 0);
  const std::string before = slurp(d / "run.ckpt");
  REQUIRE(!before.empty());
  const Run r = run(d, "train small.toml --quiet --resume --set algo.learning_rate=1e30 --set algo.max_grad_norm=0");
  INFO(r.err);
  CHECK(r.rc == 3);
  CHECK_THAT(r.err, Contains("iteration") && Contains("nan"));
  CHECK(slurp(d / "run.ckpt") == before);
  CHECK_FALSE(fs::exists(d / "run.h5"));
}
