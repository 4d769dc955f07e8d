// herd-rl with a user's C environment named in the configuration ([env] library and
// symbol): train, eval and resume for vector and image observations, and one clear line
// for a missing library, a missing symbol, a failing entry point and an invalid spec.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "app_runner.hpp"

#include "herd/io/hdf5.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

using Run = herd::testing::AppRun;
using herd::testing::slurp;

fs::path workdir(const std::string& name) { return herd::testing::fresh_dir(HERD_TEST_WORK_DIR, name); }

Run run(const fs::path& dir, const std::string& args) { return herd::testing::run_app(HERD_RL_EXE, dir, args); }

/// A small PPO run on the corridor; `env` is the [env] table's body.
std::string config(const std::string& env) {
  return "total_steps = 512\noutput_prefix = \"run\"\ncheckpoint_period = 1\nprogress_period = 1\n"
         "[env]\n" +
         env + "[sampler]\nnum_envs = 4\nnum_steps = 32\n[algo]\nepochs = 2\nminibatch_size = 64\n";
}

/// The progress CSV without its wall-clock columns (2, 17, 18).
std::vector<std::string> steady_rows(const fs::path& csv) {
  std::vector<std::string> out;
  std::istringstream in(slurp(csv));
  for (std::string line; std::getline(in, line);) {
    std::stringstream ss(line);
    std::string kept;
    int c = 0;
    for (std::string x; std::getline(ss, x, ','); ++c)
      if (c != 2 && c < 17) kept += x + ",";
    out.push_back(kept);
  }
  return out;
}

/// The library copied into `dir/lib/`, so that the configuration names it relatively.
void copy_library(const fs::path& dir) {
  fs::create_directories(dir / "lib");
  fs::copy_file(HERD_TEST_ENV_LIBRARY, dir / "lib" / "libcorridor.so", fs::copy_options::overwrite_existing);
}

}  // namespace

TEST_CASE("herd-rl trains, resumes and evaluates a C environment from a shared library", "[rl][apps]") {
  const std::string symbol = GENERATE(std::string("corridor_env"), std::string("corridor_image_env"));
  INFO(symbol);
  const fs::path d = workdir("c_env_" + symbol);
  copy_library(d);
  std::ofstream(d / "c.toml") << config("library = \"lib/libcorridor.so\"\nsymbol = \"" + symbol + "\"\n");
  fs::create_directories(d / "whole");
  std::ofstream(d / "whole" / "c.toml") << config("library = \"../lib/libcorridor.so\"\nsymbol = \"" + symbol + "\"\n");

  // An uninterrupted run, and one stopped after 2 of 4 iterations and resumed.
  const Run whole = run(d / "whole", "train c.toml --quiet");
  INFO(whole.err);
  REQUIRE(whole.rc == 0);
  const Run part = run(d, "train c.toml --stop-after 2");
  INFO(part.err);
  REQUIRE(part.rc == 0);
  CHECK_THAT(part.out, Contains("ppo on " + symbol));
  const Run rest = run(d, "train c.toml --resume");
  INFO(rest.err);
  REQUIRE(rest.rc == 0);
  CHECK_THAT(rest.out, Contains("resumed from run.ckpt at iteration 2"));
  const auto a = steady_rows(d / "whole" / "run_progress.csv"), b = steady_rows(d / "run_progress.csv");
  REQUIRE(a.size() == 5u);  // header and 4 iterations
  CHECK(a == b);

  // The output records the library by its absolute path; eval finds it from any folder.
  auto f = herd::io::H5File::open((d / "run.h5").string());
  const std::string text = f.root().attribute_string("config");
  CHECK_THAT(text, Contains("env.library = \"" + (fs::canonical(d) / "lib" / "libcorridor.so").string() + "\""));
  CHECK_THAT(text, Contains("env.symbol = \"" + symbol + "\""));
  CHECK(f.root().attribute_string("env") == symbol);
  const fs::path elsewhere = workdir("c_env_eval_" + symbol);
  const Run e = run(elsewhere, "eval " + (d / "run.ckpt").string() + " --episodes 3");
  INFO(e.err);
  REQUIRE(e.rc == 0);
  CHECK_THAT(e.out, Contains("episodes = 3"));
  // A library that moved since training: one line naming the checkpoint and the path, exit 2.
  fs::rename(d / "lib", d / "moved");
  const Run m = run(elsewhere, "eval " + (d / "run.ckpt").string());
  fs::rename(d / "moved", d / "lib");
  CHECK(m.rc == 2);
  CHECK_THAT(m.err, Contains("herd-rl: error: " + (d / "run.ckpt").string() + ": <checkpoint config>:") &&
                        Contains("cannot load '" + (fs::canonical(d) / "lib" / "libcorridor.so").string() + "'"));
  // Every corridor episode returns between 1 - 0.01 * 49 (reaching the end at step 50) and
  // -0.5 (50 steps without reaching it); a finite mean in that range.
  const auto at = e.out.find("mean_return = ");
  REQUIRE(at != std::string::npos);
  const double mean = std::stod(e.out.substr(at + 14));
  CHECK(mean >= -0.5);
  CHECK(mean <= 1.0);
}

TEST_CASE("herd-rl names the file, key and value of a C environment that cannot be loaded", "[rl][apps]") {
  const fs::path d = workdir("c_env_errors");
  copy_library(d);
  struct Case {
    std::string env, expect;
  };
  const std::vector<Case> cases = {
      {"library = \"lib/nope.so\"\n", "c.toml:6: env.library \"lib/nope.so\" (env.symbol \"herd_env\"): cannot load"},
      {"library = \"lib/libcorridor.so\"\nsymbol = \"nope\"\n", "has no symbol 'nope'"},
      {"library = \"lib/libcorridor.so\"\nsymbol = \"failing_env\"\n",
       "failing_env in '" + (fs::canonical(d) / "lib" / "libcorridor.so").string() + "' returned status 5"},
      {"library = \"lib/libcorridor.so\"\nsymbol = \"no_obs_env\"\n", "obs_dim is 0, but must be >= 1"},
      // Refused before training (it trained to the end and then failed writing the checkpoint).
      {"library = \"lib/libcorridor.so\"\nsymbol = \"no_state_env\"\n",
       "the spec has state_dim 0 (no get_state/set_state), but herd-rl writes a checkpoint"},
      // Built against a newer header: it wrote past herd's struct (on the stack) before.
      {"library = \"lib/libcorridor.so\"\nsymbol = \"newer_header_env\"\n",
       "bytes of this herd's herd_env_spec: the library was built against a newer herd/rl/c_env.h"},
      // Bounds in [0, 255] but real values: uint8 batches would round them (it trained on 0s and 1s).
      {"library = \"lib/libcorridor.so\"\nsymbol = \"real_bounded_env\"\nobs_dtype = \"uint8\"\n",
       "key \"env.obs_dtype\" is \"uint8\", but real_bounded_env has real-valued observations"},
      {"library = \"lib/libcorridor.so\"\nsymbol = \"corridor_env\"\nid = \"CartPole-v1\"\n",
       "c.toml:8: the environment of env.library would be registered as \"CartPole-v1\", but that is a built-in"},
  };
  for (const Case& c : cases) {
    std::ofstream(d / "c.toml") << config(c.env);
    const Run r = run(d, "train c.toml");
    INFO(c.env << r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Contains("herd-rl: error: ") && Contains(c.expect));
    CHECK(!fs::exists(d / "run.ckpt"));
  }
  // The legacy spelling `env = "<id>"` is still read, and an unknown id says so by that key.
  std::ofstream(d / "c.toml") << "env = \"Nope-v0\"\n";
  const Run r = run(d, "train c.toml");
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Contains("c.toml:1: key \"env\" is \"Nope-v0\"") && Contains("[env] library"));
}

TEST_CASE("herd-rl [env] wrappers: frame stack, reward clipping, time limit; episodic life needs lives", "[rl][apps]") {
  const fs::path d = workdir("wrappers");
  const std::string body =
      "id = \"MinAtar/Breakout-v1\"\nframe_stack = 2\nclip_reward = true\nmax_episode_steps = 200\n";
  std::string c = config(body);
  c.replace(c.find("total_steps = 512"), 17, "total_steps = 128");
  std::ofstream(d / "w.toml") << c;
  const Run r = run(d, "train w.toml");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Contains("ppo on MinAtar/Breakout-v1[frame_stack=2,clip_reward,max_episode_steps=200]"));
  auto f = herd::io::H5File::open((d / "run.h5").string());
  CHECK(f.root().read<double>("obs_rms/mean").size() == 800u);  // [2 * 4, 10, 10]
  CHECK(f.root().attribute_string("env") == "MinAtar/Breakout-v1[frame_stack=2,clip_reward,max_episode_steps=200]");
  const Run e = run(d, "eval run.ckpt --episodes 2");
  INFO(e.err);
  CHECK(e.rc == 0);
  CHECK_THAT(e.out, Contains("episodes = 2"));
  // uint8 env batches (converted to float32 for the network) train the same run.
  const Run u = run(d, "train w.toml --set env.obs_dtype=uint8 --set output_prefix=u8");
  INFO(u.err);
  REQUIRE(u.rc == 0);
  CHECK(steady_rows(d / "u8_progress.csv") == steady_rows(d / "run_progress.csv"));
  const Run cu = run(d, "train w.toml --overwrite --set env.id=CartPole-v1 --set env.obs_dtype=uint8");
  CHECK(cu.rc == 2);
  CHECK_THAT(cu.err, Contains("--set env.obs_dtype=uint8: key \"env.obs_dtype\" is \"uint8\", but CartPole-v1"));
  // The stack size fixes the saved shapes: it cannot change on resume.
  const Run k = run(d, "train w.toml --resume --set env.frame_stack=3 --set total_steps=256");
  CHECK(k.rc == 2);
  CHECK_THAT(k.err, Contains("env.frame_stack = 3 (the checkpoint has 2)"));
  // Under the frame stack's wrapper reward clipping may change; where it alone wraps the env,
  // switching it changes the saved states' size and is refused by name.
  const Run kc = run(d, "train w.toml --resume --set env.clip_reward=false --set total_steps=256 --quiet");
  INFO(kc.err);
  CHECK(kc.rc == 0);
  REQUIRE(run(d, "train w.toml --set env.frame_stack=1 --set output_prefix=one --quiet --stop-after 1").rc == 0);
  const Run kf = run(d,
                     "train w.toml --resume --set env.frame_stack=1 --set output_prefix=one --set "
                     "env.clip_reward=false");
  CHECK(kf.rc == 2);
  CHECK_THAT(kf.err, Contains("herd-rl: error: cannot resume one.ckpt with env.clip_reward = false (the checkpoint "
                              "has true)") &&
                         !Contains("values per environment"));
  // Where the stack size changes too, it alone is named: restoring it lets reward clipping change.
  REQUIRE(run(d, "train w.toml --set output_prefix=two --quiet --stop-after 1").rc == 0);
  const Run ks = run(d,
                     "train w.toml --resume --set env.frame_stack=1 --set output_prefix=two --set "
                     "env.clip_reward=false");
  CHECK(ks.rc == 2);
  CHECK_THAT(ks.err, Contains("env.frame_stack = 1 (the checkpoint has 2)") && !Contains("env.clip_reward"));

  std::ofstream(d / "life.toml") << config("id = \"MinAtar/Breakout-v1\"\nepisodic_life = true\n");
  const Run l = run(d, "train life.toml --overwrite");
  CHECK(l.rc == 2);
  CHECK_THAT(l.err, Contains("life.toml:7: key \"env.episodic_life\": MinAtar/Breakout-v1: episodic_life is true, "
                             "but this environment has no lives"));
  const Run z = run(d, "train w.toml --overwrite --set env.frame_stack=0");
  CHECK(z.rc == 2);
  CHECK_THAT(z.err, Contains("env.frame_stack"));
}

TEST_CASE("docs/rl.md shows examples/rl/c_env/corridor.c as it is", "[rl][apps]") {
  // The listing had fallen behind the file (its image env's bounds and obs_integer, the
  // build line), so a user copying it from the page built another environment.
  auto slurp = [](const char* path) {
    std::ifstream in(path);
    REQUIRE(in);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string doc = slurp(HERD_RL_DOC), source = slurp(HERD_CORRIDOR_C);
  const std::string open = "```c\n/* A user environment in C for herd-rl";
  const auto from = doc.find(open);
  REQUIRE(from != std::string::npos);
  const auto to = doc.find("```\n", from + 4);
  REQUIRE(to != std::string::npos);
  CHECK(doc.substr(from + 5, to - from - 5) == source);
}
