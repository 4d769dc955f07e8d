// herd-rl: train and evaluate PPO/A2C agents (issue #10).
//   herd-rl train [CONFIG.toml] [--set key=value]... [--resume] [--stop-after N] [--quiet]
//   herd-rl eval CHECKPOINT [--episodes N] [--stochastic]
// Exit codes: 0 success; 2 bad input (nothing written); 1 other errors; 3 a non-finite
// loss stopped training (the last good checkpoint is kept).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/trainer.hpp"
#include "herd/rl/train_config.hpp"

int main(int argc, char** argv) {
  CLI::App app{"herd-rl: deep reinforcement learning (PPO, A2C) on batched environments"};
  app.require_subcommand(1);
  auto* train = app.add_subcommand("train", "train an agent (default: PPO on CartPole-v1)");
  std::string file;
  std::vector<std::string> sets;
  bool resume = false, quiet = false;
  long long stop_after = -1;
  train->add_option("config", file, "TOML configuration (default: PPO on CartPole-v1 with RL Zoo settings)");
  train->add_option("--set", sets, "override a key: key=value (repeatable)");
  train->add_flag("--resume", resume, "continue from <output_prefix>.ckpt when it exists");
  train->add_option("--stop-after", stop_after, "stop after N more iterations, writing a checkpoint")
      ->check(CLI::NonNegativeNumber);
  train->add_flag("--quiet", quiet, "no progress lines");
  auto* eval = app.add_subcommand("eval", "evaluate the policy of a checkpoint");
  std::string ckpt;
  int episodes = 100;
  bool stochastic = false;
  eval->add_option("checkpoint", ckpt, "checkpoint written by herd-rl train")->required();
  eval->add_option("--episodes", episodes, "episodes to run")->check(CLI::PositiveNumber);
  eval->add_flag("--stochastic", stochastic, "sample actions instead of the distribution's mode");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (eval->parsed()) {
    try {
      const auto r = herd::rl::evaluate_checkpoint(ckpt, episodes, stochastic);
      std::printf("episodes = %zu\nmean_return = %.6g\nstd_return = %.6g\n", r.returns.size(), r.mean, r.std);
      return 0;
    } catch (const herd::IoError& e) {
      std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
      return 1;
    }
  }

  // Everything before the first file written is input validation: its errors exit with 2.
  std::unique_ptr<herd::rl::Trainer> trainer;
  try {
    std::string text;
    const herd::rl::TrainConfig config = herd::rl::load_train_config(file, sets, &text);
    trainer = std::make_unique<herd::rl::Trainer>(config, text);
    if (resume && std::filesystem::exists(trainer->checkpoint_path())) {
      trainer->load_checkpoint(trainer->checkpoint_path());
      if (!quiet)
        std::printf("herd-rl: resumed from %s at iteration %lld\n", trainer->checkpoint_path().c_str(),
                    static_cast<long long>(trainer->iteration()));
    }
    if (!quiet) {
      std::printf("herd-rl: %s on %s, %lld env steps (%lld iterations of %d envs x %d steps), seed %llu\n",
                  config.algorithm.c_str(), config.env.c_str(), static_cast<long long>(config.total_steps),
                  static_cast<long long>(config.num_iterations()), config.sampler_options.num_envs,
                  config.sampler_options.num_steps, static_cast<unsigned long long>(config.seed));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
    return 2;
  }
  try {
    trainer->run(quiet ? nullptr : &std::cout, stop_after);
    if (!quiet && trainer->done())
      std::printf("herd-rl: wrote %s and %s\n", trainer->output_path().c_str(), trainer->checkpoint_path().c_str());
    return 0;
  } catch (const herd::NumericalError& e) {
    std::fprintf(stderr, "herd-rl: error: %s; the last good checkpoint is kept\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
    return 1;
  }
}
