// Evaluation during training (eval.every_steps): when it runs, what it records (curve,
// progress CSV, <prefix>.h5's /eval, the best checkpoint), that its numbers are those of an
// evaluation of the policy at that iteration, that it leaves the training's trajectory
// unchanged, and that a resumed run records the same evaluations as an uninterrupted one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/io/checkpoint.hpp"
#include "herd/io/config.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/train_config.hpp"
#include "herd/rl/trainer.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

// Six iterations of CartPole: PPO/A2C 4 envs x 16 steps, DQN 2 envs x 50 steps.
TrainConfig config(const std::string& algo, const std::string& prefix, std::vector<std::string> extra,
                   std::string* text) {
  std::vector<std::string> sets = {"algorithm=" + algo, "seed=5", "output_prefix=" + prefix, "progress_period=0",
                                   "checkpoint_period_seconds=0"};
  if (algo == "dqn")
    sets.insert(sets.end(), {"sampler.num_envs=2", "sampler.num_steps=50", "total_steps=600", "network.hidden=[16, 16]",
                             "dqn.learning_starts=60", "dqn.batch_size=8", "dqn.target_update_interval=40"});
  else sets.insert(sets.end(), {"sampler.num_envs=4", "sampler.num_steps=16", "total_steps=384", "normalize.obs=true"});
  if (algo == "ppo") sets.insert(sets.end(), {"algo.epochs=2", "algo.minibatch_size=32"});
  sets.insert(sets.end(), extra.begin(), extra.end());
  return resolve_train_config(io::Config("<test>"), sets, text);
}

std::vector<std::string> eval_on(const TrainConfig& plain) {
  return {"eval.every_steps=" + std::to_string(2 * plain.steps_per_iteration()), "eval.episodes=3"};
}

bool same(double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

bool is_eval_column(const std::string& c) { return c.rfind("eval_", 0) == 0; }

void remove_outputs(const std::string& prefix) {
  for (const char* s : {".ckpt", ".h5", "_progress.csv", "_best.ckpt"}) std::filesystem::remove(prefix + s);
}

}  // namespace

TEST_CASE("Evaluation during training: when, what it records, unchanged trajectory, resume", "[rl]") {
  for (const std::string algo : {"ppo", "a2c", "dqn"}) {
    INFO(algo);
    const std::string pa = "test_eval_a_" + algo, pb = "test_eval_b_" + algo, pd = "test_eval_d_" + algo;
    std::string ta, tb, td;
    const TrainConfig plain = config(algo, pb, {}, &tb);
    const TrainConfig with = config(algo, pa, eval_on(plain), &ta);
    REQUIRE(with.num_iterations() == 6);
    const std::int64_t spi = with.steps_per_iteration();

    // With evaluation (progress lines captured) and without.
    std::ostringstream lines;
    auto a = make_training_run(with, ta);
    CHECK(a->run(&lines) == RunEnd::kDone);
    auto b = make_training_run(plain, tb);
    CHECK(b->run(nullptr) == RunEnd::kDone);

    // The training's trajectory is the same: every curve column but the wall clock's and
    // the evaluation's, and the final networks.
    const io::H5File fa = io::H5File::open(pa + ".h5"), fb = io::H5File::open(pb + ".h5");
    const std::vector<std::string> columns =
        algo == "dqn" ? std::vector<std::string>(kDqnCurveColumns.begin(), kDqnCurveColumns.end())
                      : std::vector<std::string>(kCurveColumns.begin(), kCurveColumns.end());
    for (const auto& c : columns) {
      INFO(c);
      const auto x = fa.root().read<double>("curve/" + c), y = fb.root().read<double>("curve/" + c);
      REQUIRE(x.size() == 6u);
      REQUIRE(y.size() == 6u);
      for (std::size_t r = 0; r < 6; ++r) {
        if (is_eval_column(c)) {
          // After iterations 2, 4, 6 (each passes a multiple of 2 iterations' steps); NaN
          // in the others and in the run without evaluation.
          CHECK(std::isfinite(x[r]) == (r % 2 == 1));
          CHECK(std::isnan(y[r]));
        } else if (!is_wall_clock_column(c)) {
          CHECK(same(x[r], y[r]));
        }
      }
    }
    const std::string net = algo == "dqn" ? "q_network" : "policy";
    for (const auto& name : fb.root().open_group(net).members())
      CHECK(fa.root().read<float>(net + "/" + name) == fb.root().read<float>(net + "/" + name));
    CHECK_FALSE(fb.root().contains("eval"));

    // /eval: three evaluations of three episodes, their means those of the curve.
    const io::H5Group ev = fa.root().open_group("eval");
    CHECK(ev.read<double>("env_steps") == std::vector<double>{2.0 * spi, 4.0 * spi, 6.0 * spi});
    CHECK(ev.read<double>("iteration") == std::vector<double>{2, 4, 6});
    CHECK(ev.read<double>("evaluation") == std::vector<double>{1, 2, 3});
    CHECK(ev.open_dataset("returns").shape() == std::vector<hsize_t>{3, 3});
    const auto means = ev.read<double>("return_mean"), returns = ev.read<double>("returns");
    const auto curve_means = fa.root().read<double>("curve/eval_return_mean");
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(means[k] == curve_means[2 * k + 1]);
      CHECK(means[k] == Approx((returns[3 * k] + returns[3 * k + 1] + returns[3 * k + 2]) / 3).epsilon(1e-15));
    }
    const double best = *std::max_element(means.begin(), means.end());
    CHECK(ev.attribute<double>("best_return_mean") == best);
    CHECK(ev.attribute<std::int64_t>("episodes") == 3);

    // Known answer: the first evaluation is the evaluation (seed 5 + 1 + 1) of the policy
    // after two iterations.
    {
      std::string tc;
      const TrainConfig c = config(algo, "test_eval_c_" + algo, {}, &tc);
      EvalResult e;
      if (algo == "dqn") {
        DqnTrainer t(c, tc);
        t.iterate();
        t.iterate();
        e = evaluate_q_network(t.q_network(), c.env, 3, 0.0, 7, c.eval_max_episode_steps);
      } else {
        Trainer t(c, tc);
        t.iterate();
        t.iterate();
        e = evaluate_policy(t.agent(), c.env, &t.sampler().obs_rms(), 3, false, 7, c.eval_max_episode_steps);
      }
      CHECK(e.mean == means[0]);
      CHECK(e.returns == std::vector<double>(returns.begin(), returns.begin() + 3));
    }

    // The best checkpoint holds the first evaluation with the best mean.
    std::size_t first_best = 0;
    while (means[first_best] != best) ++first_best;
    REQUIRE(std::filesystem::exists(pa + "_best.ckpt"));
    CHECK(io::CheckpointReader(pa + "_best.ckpt").value<std::int64_t>("iteration") ==
          2 * static_cast<std::int64_t>(first_best) + 2);
    CHECK_FALSE(std::filesystem::exists(pb + "_best.ckpt"));

    // A progress line per evaluation; the CSV's evaluation columns.
    std::size_t n_lines = 0;
    for (std::size_t at = 0; (at = lines.str().find("eval  steps ", at)) != std::string::npos; ++at) ++n_lines;
    CHECK(n_lines == 3);
    CHECK(lines.str().find("new best -> " + pa + "_best.ckpt") != std::string::npos);
    {
      std::ifstream csv(pa + "_progress.csv");
      std::string header;
      std::getline(csv, header);
      CHECK(header.size() > 60);
      CHECK(header.substr(header.size() - 82) ==
            ",eval_return_mean,eval_return_std,eval_return_min,eval_return_max,eval_length_mean");
      std::ifstream plain_csv(pb + "_progress.csv");
      std::getline(plain_csv, header);
      CHECK(header.find("eval_") == std::string::npos);
    }

    // Stopped after three iterations and resumed: the same evaluations.
    {
      const TrainConfig d = config(algo, pd, eval_on(plain), &td);
      auto first = make_training_run(d, td);
      CHECK(first->run(nullptr, 3) == RunEnd::kStopped);
      auto second = make_training_run(d, td);
      second->load_checkpoint(second->checkpoint_path());
      CHECK(second->iteration() == 3);
      CHECK(second->run(nullptr) == RunEnd::kDone);
      const io::H5Group ed = io::H5File::open(pd + ".h5").root().open_group("eval");
      for (const char* name : {"env_steps", "returns", "lengths", "return_mean", "return_std", "truncated", "capped"}) {
        INFO(name);
        const auto x = ev.read<double>(name), y = ed.read<double>(name);
        REQUIRE(x.size() == y.size());
        for (std::size_t i = 0; i < x.size(); ++i) CHECK(same(x[i], y[i]));
      }
    }
    for (const auto& p : {pa, pb, pd}) remove_outputs(p);
  }
}

TEST_CASE("Evaluation during training: eval.stop_return ends training after the evaluation that reaches it", "[rl]") {
  for (const std::string algo : {"ppo", "dqn"}) {
    INFO(algo);
    const std::string prefix = "test_eval_stop_" + algo;
    std::string plain_text, text;
    const TrainConfig plain = config(algo, prefix, {}, &plain_text);
    auto sets = eval_on(plain);
    // Every evaluation's mean is at least 1 (CartPole pays 1 per step): the first stops.
    sets.push_back("eval.stop_return=1");
    const TrainConfig c = config(algo, prefix, sets, &text);
    std::ostringstream lines;
    auto a = make_training_run(c, text);
    CHECK(a->run(&lines) == RunEnd::kDone);
    CHECK(a->done());
    CHECK(a->iteration() == 2);
    CHECK_THAT(lines.str(), Catch::Contains(">= eval.stop_return = 1: training stops after iteration 2"));
    CHECK(io::H5File::open(prefix + ".h5").root().read<double>("curve/iteration").size() == 2u);
    // Resumed with the same threshold: complete. Raised beyond reach: it trains on to the end.
    auto same = make_training_run(c, text);
    same->load_checkpoint(same->checkpoint_path());
    CHECK(same->done());
    sets.back() = "eval.stop_return=1e9";
    const TrainConfig higher = config(algo, prefix, sets, &text);
    auto more = make_training_run(higher, text);
    more->load_checkpoint(more->checkpoint_path());
    CHECK(more->changed_on_resume().empty());
    CHECK_FALSE(more->done());
    CHECK(more->run(nullptr) == RunEnd::kDone);
    CHECK(more->iteration() == 6);
    remove_outputs(prefix);
  }
}

TEST_CASE("Evaluation during training: /eval's attributes are the settings of the evaluations", "[rl]") {
  // Evaluated with 3 stochastic episodes capped at 7 steps, then resumed without
  // evaluation (and with other eval.* values): the attributes still describe the
  // evaluations recorded, not the settings the resumed run happened to have.
  for (const std::string algo : {"ppo", "dqn"}) {
    INFO(algo);
    const std::string prefix = "test_eval_attrs_" + algo;
    std::string text;
    const TrainConfig plain = config(algo, prefix, {}, &text);
    const TrainConfig c = config(algo, prefix,
                                 {"eval.every_steps=" + std::to_string(plain.steps_per_iteration()), "eval.episodes=3",
                                  "eval.stochastic=true", "eval.max_episode_steps=7"},
                                 &text);
    auto first = make_training_run(c, text);
    CHECK(first->run(nullptr, 2) == RunEnd::kStopped);
    for (const bool eval_on : {false, true}) {
      INFO("resumed with evaluation " << (eval_on ? "on, other settings" : "off"));
      std::string resumed_text;
      const TrainConfig r =
          eval_on ? config(algo, prefix, {"eval.every_steps=1000000", "eval.episodes=4", "eval.max_episode_steps=9"},
                           &resumed_text)
                  : config(algo, prefix, {}, &resumed_text);
      auto second = make_training_run(r, resumed_text);
      second->load_checkpoint(second->checkpoint_path());
      CHECK(second->run(nullptr) == RunEnd::kDone);
      const io::H5Group ev = io::H5File::open(prefix + ".h5").root().open_group("eval");
      CHECK(ev.read<double>("iteration") == std::vector<double>{1, 2});
      CHECK(ev.attribute<std::int64_t>("episodes") == 3);
      CHECK(ev.attribute<std::int64_t>("stochastic") == 1);
      CHECK(ev.attribute<std::int64_t>("max_episode_steps") == 7);
      std::filesystem::remove(prefix + ".h5");
    }
    remove_outputs(prefix);
  }
}

TEST_CASE("Evaluation during training: episodes cut off at eval.max_episode_steps are counted and said", "[rl]") {
  // A CartPole episode lasts at least 8 steps: every episode is cut off at 5.
  std::string plain_text, text;
  const std::string prefix = "test_eval_capped";
  const TrainConfig plain = config("ppo", prefix, {}, &plain_text);
  auto sets = eval_on(plain);
  sets.push_back("eval.max_episode_steps=5");
  const TrainConfig c = config("ppo", prefix, sets, &text);
  std::ostringstream lines;
  auto a = make_training_run(c, text);
  CHECK(a->run(&lines) == RunEnd::kDone);
  CHECK_THAT(lines.str(), Catch::Contains("(3 cut off at eval.max_episode_steps = 5)"));
  const io::H5Group ev = io::H5File::open(prefix + ".h5").root().open_group("eval");
  CHECK(ev.read<double>("capped") == std::vector<double>{3, 3, 3});
  CHECK(ev.read<double>("truncated") == std::vector<double>{3, 3, 3});
  CHECK(ev.read<double>("lengths") == std::vector<double>(9, 5.0));
  remove_outputs(prefix);
}

TEST_CASE("Evaluation during training: its keys are refused without eval.every_steps", "[rl]") {
  const io::Config none("<t>");
  for (const std::string key :
       {"eval.episodes=3", "eval.stochastic=true", "eval.save_best=false", "eval.stop_return=5"})
    CHECK_THROWS_WITH(resolve_train_config(none, {key}),
                      Catch::Contains(key.substr(0, key.find('='))) && Catch::Contains("eval.every_steps = 0"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"eval.every_steps=100", "eval.episodes=0"}),
                    Catch::Contains("eval.episodes") && Catch::Contains("0"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"eval.every_steps=-1"}), Catch::Contains("eval.every_steps"));
  // A NaN threshold is never reached (every comparison is false) and an infinite one is
  // never or always reached: each would silently misread the setting.
  for (const std::string v : {"nan", "inf", "-inf"})
    CHECK_THROWS_WITH(resolve_train_config(none, {"eval.every_steps=100", "eval.stop_return=" + v}),
                      Catch::Contains("eval.stop_return") && Catch::Contains("finite"));
  // A period longer than the run would evaluate nothing without a word: a warning says so.
  const auto warned = [&](const std::string& every) {
    const TrainConfig w = resolve_train_config(none, {"total_steps=1000", "eval.every_steps=" + every});
    return std::any_of(w.warnings.begin(), w.warnings.end(), [](const std::string& m) {
      return m.find("eval.every_steps") != std::string::npos && m.find("no evaluation") != std::string::npos;
    });
  };
  const TrainConfig d = resolve_train_config(none, {"total_steps=1000"});
  const std::int64_t run_steps = d.num_iterations() * d.steps_per_iteration();
  CHECK_FALSE(warned(std::to_string(run_steps)));
  CHECK(warned(std::to_string(run_steps + 1)));
  const TrainConfig c =
      resolve_train_config(none, {"eval.every_steps=1000", "eval.episodes=7", "eval.stochastic=true"});
  CHECK(c.eval_every_steps == 1000);
  CHECK(c.eval_episodes == 7);
  CHECK(c.eval_stochastic);
  CHECK(c.eval_save_best);
}
