// herd-rl: train and evaluate PPO/A2C and DQN agents.
//   [mpiexec -n N] herd-rl train [CONFIG.toml] [--set key=value]... [--resume | --overwrite] [--stop-after N] [--quiet]
//     --resume and --overwrite exclude each other; --resume of a complete run (total_steps
//     done) changes nothing and exits 0; env.id, env.library, env.symbol, env.frame_stack,
//     sampler.num_envs, network.hidden, network.shared_trunk, network.conv_* and algo.optimizer (DQN: also
//     algorithm, network.activation, dqn.buffer_size, n_step, dueling, prioritized, optimizer) cannot change on
//     resume (exit 2), nor env.clip_reward or env.episodic_life where the change adds or removes the env wrapper. Under
//     mpiexec DQN is data-parallel, as PPO (device = "cuda": one GPU per rank, NCCL).
//   [mpiexec -n N] herd-rl eval CHECKPOINT [--episodes N] [--stochastic]   (rank 0 evaluates; others exit 0)
//   herd-rl report PREFIX [--output OUT.html]   (PREFIX.ckpt or PREFIX.h5 also name the run)
//     --resume without <prefix>.ckpt trains from the start, but is refused where <prefix>.h5
//     exists (its results would be replaced).
// Exit codes: 0 success; 2 bad input (nothing written); 1 other errors; 3 a non-finite
// loss stopped training (the last good checkpoint is kept); 130 / 143 interrupted by
// SIGINT / SIGTERM (the current iteration finished, a checkpoint written, the command that
// resumes printed; under mpiexec, MPICH's launcher's own status is 0 or these).
// Under an MPI launcher `train` runs data-parallel over the ranks (rl::Trainer); a launcher
// that claims several processes while MPI reports one is refused; a rank that fails ends
// every rank (MPI_Abort) with a message naming it. Rank 0 holds <prefix>.lock for the whole
// run (a second run of the prefix is refused) and checks the output folder before training.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <time.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include "app_main.hpp"
#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/faults.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/output_files.hpp"
#if HERD_HAVE_MPI
#include "herd/core/mpi_communicator.hpp"
#endif
#include "herd/rl/train_config.hpp"
#include "herd/rl/trainer.hpp"
#include "herd/rl/training_report.hpp"

namespace {

// Reads the value of an integer option (CLI11 takes it as text): a decimal integer in
// [lo, hi], else a one-line message "--name value: must be ...".
long long int_option(const std::string& name, const std::string& text, long long lo, long long hi, std::string* error) {
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || v < lo || v > hi) {
    // The upper bound is named only when the value is an integer above it.
    if (error->empty())
      *error = name + " " + (text.empty() ? std::string("\"\"") : text) + ": must be an integer " +
               (ec == std::errc() && p == end && v > hi ? "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"
                                                        : ">= " + std::to_string(lo));
    return lo;
  }
  return v;
}

// The signal that asked training to stop (0: none), set by `on_stop_signal`.
volatile std::sig_atomic_t g_stop_signal = 0;
// Whether this process prints the acknowledgement (rank 0, not --quiet).
volatile std::sig_atomic_t g_announce = 0;

// When the first stop signal arrived (CLOCK_MONOTONIC), written by the handler only.
struct timespec g_first_stop {};

extern "C" void on_stop_signal(int sig) {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  if (g_stop_signal == 0) {
    g_stop_signal = sig;
    g_first_stop = now;
    if (g_announce) {
      static const char msg[] =
          "\nherd-rl: interrupted: finishing the current iteration and writing a checkpoint "
          "(interrupt again after 2 s to stop at once)\n";
      (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    }
    return;
  }
  // A copy of the first signal arrives within moments under an MPI launcher (MPICH's mpiexec
  // forwards the terminal's Ctrl-C, which its ranks in the same process group also got): it
  // is not a second interrupt. A later one ends the process at once, by the signal.
  const double since = static_cast<double>(now.tv_sec - g_first_stop.tv_sec) +
                       1e-9 * static_cast<double>(now.tv_nsec - g_first_stop.tv_nsec);
  if (since < 2.0) return;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// SIGINT and SIGTERM finish the current iteration and checkpoint (Trainer::run polls the
// flag); a second signal two seconds or more after the first ends the process at once
// (an earlier one is taken for a launcher's forwarded copy). A SIGINT ignored at start (a
// background job of a script, nohup) stays ignored, as shells expect.
void install_stop_handlers() {
  for (const int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN && sig == SIGINT) continue;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);  // the handler runs with both signals blocked
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, nullptr);
  }
}

// `s` quoted for a POSIX shell when it holds anything but plain characters.
std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./=:,+@%", c) != nullptr;
  });
  if (plain) return s;
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Prints `msg` as error lines "herd-rl: error: <line>", one per line of `msg` (an input with
/// several problems reports them all at once, one line each).
void print_error(const std::string& msg) {
  std::size_t start = 0;
  while (start <= msg.size()) {
    const std::size_t nl = msg.find('\n', start);
    const std::string line = msg.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if (!line.empty() || start == 0) std::fprintf(stderr, "herd-rl: error: %s\n", line.c_str());
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

/// The TensorBoard event files (`events.out.tfevents.*`, regular files or links) in `folder`,
/// sorted; none when it does not exist.
std::vector<std::filesystem::path> tensorboard_event_files(const std::string& folder) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return out;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && !e.is_directory(ec))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// A refusal of the run's checkpoint as herd-rl's users read it: starting with the checkpoint
/// file rather than the library function that refused it (a leading "rl::Trainer::load_checkpoint: "
/// or "rl::SerialSampler::load: " dropped, the file put first where the rest does not start with it).
std::string checkpoint_message(const std::string& path, std::string what) {
  if (what.rfind("rl::", 0) == 0) {
    if (const auto colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
  }
  if (what.rfind(path, 0) != 0) what = path + ": " + what;
  return what;
}

/// The program: main's body, run by main, which turns an exception that escapes it into an
/// error line.
int run_main(int argc, char** argv) {
  CLI::App app{"herd-rl: deep reinforcement learning (PPO, A2C, DQN) on batched environments"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("herd-rl (herd) ") + HERD_VERSION_STRING);
  auto* train = app.add_subcommand("train", "train an agent (default: PPO on CartPole-v1)");
  std::string file;
  std::vector<std::string> sets;
  bool resume = false, quiet = false, overwrite = false;
  std::string stop_after_text;
  train->add_option("config", file, "TOML configuration (default: PPO on CartPole-v1 with RL Zoo settings)");
  train->add_option("--set", sets, "override a key: key=value (repeatable)");
  train->add_flag("--resume", resume, "continue from <output_prefix>.ckpt when it exists (not with --overwrite)");
  train->add_flag("--overwrite", overwrite,
                  "replace the outputs of an earlier run instead of refusing (not with --resume)");
  train->add_option("--stop-after", stop_after_text, "stop after N (>= 0) more iterations, writing a checkpoint");
  train->add_flag("--quiet", quiet, "no progress lines");
  bool help_keys = false;
  train->add_flag("--help-keys", help_keys, "list every configuration key (type, default, meaning) and exit");
  auto* eval = app.add_subcommand("eval", "evaluate the policy of a checkpoint");
  std::string ckpt;
  std::string episodes_text = "100";
  bool stochastic = false;
  eval->add_option("checkpoint", ckpt,
                   "checkpoint written by herd-rl train (PREFIX.ckpt; the run's output_prefix PREFIX also names it)");
  eval->add_option("--episodes", episodes_text, "episodes to run (>= 1; default 100)");
  eval->add_flag("--stochastic", stochastic, "sample actions instead of the distribution's mode");
  std::string max_steps_text;
  eval->add_option("--max-episode-steps", max_steps_text,
                   "cut an episode off after N steps and report it as truncated (0: no cap; default: the run's "
                   "eval.max_episode_steps, 27000 unless set)");
  auto* report = app.add_subcommand("report",
                                    "write the HTML report (learning curves, losses, throughput) of a run, "
                                    "finished or not");
  std::string report_prefix, report_out;
  report
      ->add_option("prefix", report_prefix,
                   "the run's output_prefix (reads PREFIX_progress.csv and/or PREFIX.h5), or one of its files "
                   "(PREFIX.ckpt, PREFIX.h5)")
      ->required();
  report->add_option("--output,-o", report_out, "the report file (default: PREFIX_report.html)");
  // Command-line mistakes are one line "herd-rl: error: ..." (exit 2), printed by rank 0
  // once the communicator exists; --help prints the help and exits 0.
  std::string cli_error;
  long long stop_after = -1;
  int episodes = 100;
  long long eval_max_steps = -1;  // -1: the checkpoint's eval.max_episode_steps
  try {
    app.parse(argc, argv);
    if (train->parsed()) {
      if (resume && overwrite)
        cli_error =
            "--resume and --overwrite cannot be combined: --resume continues the run of output_prefix from "
            "its checkpoint, --overwrite replaces its outputs and starts afresh; pass one of them";
      if (train->count("--stop-after") > 0)
        stop_after = int_option("--stop-after", stop_after_text, 0, std::numeric_limits<long long>::max(), &cli_error);
    }
    if (eval->parsed()) {
      if (ckpt.empty())
        cli_error =
            "eval needs a checkpoint: herd-rl eval CHECKPOINT [--episodes N] [--stochastic] [--max-episode-steps N]";
      episodes =
          static_cast<int>(int_option("--episodes", episodes_text, 1, std::numeric_limits<int>::max(), &cli_error));
      if (eval->count("--max-episode-steps") > 0)
        eval_max_steps =
            int_option("--max-episode-steps", max_steps_text, 0, std::numeric_limits<long long>::max(), &cli_error);
    }
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    cli_error = e.what();
    if (e.get_name() == "RequiredError" && report->parsed())
      cli_error = "report needs the run's output prefix: herd-rl report PREFIX [--output OUT.html]";
    else if (e.get_name() == "RequiredError" && !train->parsed() && !eval->parsed())
      cli_error = std::string(argc > 1 && argv[1][0] != '-' ? "unknown command \"" + std::string(argv[1]) + "\"; "
                                                            : "a command is required: ") +
                  "herd-rl train [CONFIG.toml] ..., herd-rl eval CHECKPOINT ... or herd-rl report PREFIX";
    else if (e.get_name() == "ArgumentMismatch" && cli_error.rfind("--set", 0) == 0)
      cli_error = "--set needs a value: --set key=value";
    std::replace(cli_error.begin(), cli_error.end(), '\n', ' ');
    cli_error += " (see herd-rl --help)";
  }

  if (help_keys && cli_error.empty()) {
    std::fputs("herd-rl train configuration keys (TOML; --set key=value overrides one):\n\n", stdout);
    std::fputs(herd::rl::train_schema().help().c_str(), stdout);
    return 0;
  }

  // MPI only under a launcher (a plain run never initialises it).
  std::unique_ptr<herd::Communicator> comm;
  try {
#if HERD_HAVE_MPI
    if (herd::launcher_process_count() > 0) comm = std::make_unique<herd::MpiCommunicator>();
#endif
    if (!comm) comm = std::make_unique<herd::SelfCommunicator>();
    if (const int n = herd::launcher_process_count(); train->parsed() && comm->size() == 1 && n > 1)
      throw herd::InputError(
          "the launcher started " + std::to_string(n) +
          " processes, but MPI reports this process alone (size 1): each would train the same agent and write "
          "the same files. The program was probably launched with the mpiexec of another MPI library (herd is "
          "built with MPICH: use its mpiexec, e.g. mpiexec.mpich), or built without MPI");
  } catch (const std::exception& e) {
    print_error(e.what());
    return 2;
  }
  if (!cli_error.empty()) {
    if (comm->rank() == 0) print_error(cli_error.c_str());
    return 2;
  }
  const bool root = comm->rank() == 0;
  if (!root) quiet = true;

  if (report->parsed()) {
    if (!root) return 0;
    // A run's file named instead of its prefix ("run.ckpt", "run.h5"), as `eval` takes: its prefix.
    namespace fs = std::filesystem;
    const auto is_run = [](const std::string& p) { return fs::exists(p + "_progress.csv") || fs::exists(p + ".h5"); };
    for (const char* suffix : {".ckpt", ".h5", "_progress.csv", "_report.html"})
      if (!is_run(report_prefix) && report_prefix.ends_with(suffix)) {
        const std::string stem = report_prefix.substr(0, report_prefix.size() - std::strlen(suffix));
        if (is_run(stem)) report_prefix = stem;
      }
    try {
      std::printf("herd-rl: wrote %s\n", herd::rl::write_training_report(report_prefix, report_out).c_str());
      return 0;
    } catch (const herd::InputError& e) {
      std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-rl: error: %s\n", e.what());
      return 1;
    }
  }

  if (eval->parsed()) {
    // Under mpiexec rank 0 evaluates and prints; the other ranks have nothing to do.
    if (!root) return 0;
    // The run's output_prefix names its checkpoint too, as for `report PREFIX`: "run" reads
    // run.ckpt when there is no file "run".
    if (std::error_code ec; !std::filesystem::exists(ckpt, ec)) {
      if (!std::filesystem::is_regular_file(ckpt + ".ckpt", ec)) {
        print_error("no checkpoint " + ckpt + (ckpt.ends_with(".ckpt") ? "" : " (nor " + ckpt + ".ckpt)") +
                    ": pass the <output_prefix>.ckpt that herd-rl train wrote, or its output_prefix");
        return 2;
      }
      ckpt += ".ckpt";
    }
    try {
      const auto r = herd::rl::evaluate_checkpoint(ckpt, episodes, stochastic, eval_max_steps);
      double mean_length = 0;
      for (const auto l : r.lengths) mean_length += static_cast<double>(l) / static_cast<double>(r.lengths.size());
      std::printf("episodes = %zu\nmean_return = %.6g\nstd_return = %.6g\nmean_length = %.6g\ntruncated = %zu\n",
                  r.returns.size(), r.mean, r.std, mean_length, r.truncated);
      if (r.capped > 0) {
        long long cap = 0;
        for (const auto l : r.lengths) cap = std::max(cap, static_cast<long long>(l));
        std::fprintf(stderr,
                     "herd-rl: warning: %zu of %zu episodes did not end within %lld steps and were cut off there "
                     "(truncated; their returns are those of the steps played): --max-episode-steps or "
                     "eval.max_episode_steps sets the cap\n",
                     r.capped, r.returns.size(), cap);
      }
      return 0;
    } catch (const herd::IoError& e) {
      print_error(e.what());
      return 2;
    } catch (const herd::InputError& e) {  // e.g. the checkpoint's env.library cannot be loaded
      print_error(e.what());
      return 2;
    } catch (const std::exception& e) {
      print_error(herd::error_text(e, "evaluating the checkpoint"));
      return 1;
    }
  }

  // A signal from here on stops training after its first iteration, with a checkpoint.
  g_announce = root && !quiet ? 1 : 0;
  install_stop_handlers();

  // Everything before the first file written is input validation: its errors exit with 2.
  std::unique_ptr<herd::rl::TrainingRun> trainer;
  std::unique_ptr<herd::io::OutputPrefixLock> prefix_lock;  // rank 0, for the whole run
  std::string input_error;
  bool complete = false;  // --resume of a run that has done total_steps
  try {
    std::string text;
    const herd::rl::TrainConfig config = herd::rl::load_train_config(file, sets, &text, comm->size());
    trainer = herd::rl::make_training_run(config, text, comm.get());
    namespace fs = std::filesystem;
    // Outputs are never written through symbolic links (the files are replaced atomically,
    // but a link at an output name is refused up front, with or without --overwrite).
    for (const std::string& p : {trainer->checkpoint_path(), trainer->output_path(), trainer->best_checkpoint_path()})
      herd::io::refuse_symlink(p);
    // A folder at the best checkpoint's name would make a resumed run fail at its first new
    // best, and --overwrite would remove an empty one: refused up front.
    if (const std::string best = trainer->best_checkpoint_path(); fs::is_directory(best))
      throw herd::InputError("output file " + best + " is a folder (output_prefix \"" +
                             trainer->config().output_prefix +
                             "\" names the best checkpoint there); remove it or choose another output_prefix");
    const bool have_ckpt = fs::exists(trainer->checkpoint_path());
    // A finished run's <prefix>.h5 without its checkpoint (deleted to save space, say) has
    // nothing to resume from: training afresh would replace its results.
    if (resume && !have_ckpt && fs::exists(trainer->output_path()))
      throw herd::InputError("--resume: " + trainer->output_path() + " exists, but " + trainer->checkpoint_path() +
                             " does not: there is no checkpoint to continue, and training from the start would "
                             "replace " +
                             trainer->output_path() +
                             "; pass --overwrite (instead of --resume) to replace it, or choose another output_prefix");
    if (!resume && !overwrite) {
      for (const std::string& p : {trainer->checkpoint_path(), trainer->output_path(), trainer->progress_path(),
                                   trainer->best_checkpoint_path()})
        if (fs::exists(p))
          throw herd::InputError("output file " + p + " exists (an earlier run of output_prefix \"" +
                                 trainer->config().output_prefix +
                                 "\"); pass --resume to continue it, --overwrite to replace it, or choose another "
                                 "output_prefix");
    }
    // A fresh run's TensorBoard event files would sit beside an earlier run's in <prefix>_tb
    // (TensorBoard hides the older ones from the new file's session start on; other readers,
    // such as tbparse or a glob over the folder, do not): refused as the other outputs are,
    // removed with --overwrite (the event files only: anything else in the folder is the
    // user's). --resume keeps them: its session start hides what the resume redoes.
    const std::vector<fs::path> old_events = trainer->config().tensorboard && !resume
                                                 ? tensorboard_event_files(trainer->tensorboard_folder())
                                                 : std::vector<fs::path>{};
    if (!old_events.empty() && !overwrite)
      throw herd::InputError("output file " + old_events.front().string() +
                             " exists (TensorBoard events of an earlier run of " + "output_prefix \"" +
                             trainer->config().output_prefix +
                             "\"); pass --overwrite to replace them, or choose another output_prefix");
    // Missing folders of the output prefix are made now, so that a run never fails at its end.
    if (const fs::path dir = fs::path(trainer->checkpoint_path()).parent_path(); !dir.empty() && root) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec || !fs::is_directory(dir))
        throw herd::InputError("output_prefix \"" + trainer->config().output_prefix + "\": cannot create the folder " +
                               dir.string() + (ec ? ": " + ec.message() : std::string(": a file has that name")));
    }
    if (root) {
      // Up front, before any training: the folder takes new files (a read-only folder would
      // otherwise fail at the first checkpoint), and no other run uses this output_prefix
      // (held until exit); then the temporaries that killed runs of this prefix left.
      const fs::path dir = fs::path(trainer->checkpoint_path()).parent_path();
      const std::string what = "output_prefix \"" + trainer->config().output_prefix + "\"";
      herd::io::check_folder_writable(dir.string(), what);
      prefix_lock = std::make_unique<herd::io::OutputPrefixLock>(trainer->config().output_prefix, "herd-rl");
      herd::io::remove_stale_temporaries(dir.empty() ? std::string(".") : dir.string(),
                                         {fs::path(trainer->checkpoint_path()).filename().string(),
                                          fs::path(trainer->output_path()).filename().string(),
                                          fs::path(trainer->best_checkpoint_path()).filename().string()});
      // A fresh run with --overwrite: an earlier run's best checkpoint would pass for this
      // run's (this run writes its own at its first evaluation, or none without evaluation).
      if (!resume && fs::exists(trainer->best_checkpoint_path())) {
        std::error_code ec;
        fs::remove(trainer->best_checkpoint_path(), ec);
        if (ec)
          throw herd::InputError("--overwrite: cannot remove the earlier run's " + trainer->best_checkpoint_path() +
                                 ": " + ec.message());
      }
      for (const fs::path& f : old_events) {
        std::error_code ec;
        fs::remove(f, ec);
        if (ec)
          throw herd::InputError("--overwrite: cannot remove the earlier run's TensorBoard events " + f.string() +
                                 ": " + ec.message());
      }
    }
    if (resume && have_ckpt) {
      // Settings that fix the shapes of the saved state are compared before anything is loaded.
      if (const auto conflicts = trainer->resume_conflicts(trainer->checkpoint_path()); !conflicts.empty()) {
        std::string list;
        for (const auto& c : conflicts) list += (list.empty() ? "" : ", ") + c;
        throw herd::InputError("cannot resume " + trainer->checkpoint_path() + " with " + list +
                               ": these settings fix the shapes of the saved state and cannot change on resume; use "
                               "the checkpoint's values, or pass --overwrite (instead of --resume) to start afresh, or "
                               "choose another output_prefix");
      }
      try {
        trainer->load_checkpoint(trainer->checkpoint_path());
      } catch (const herd::InputError& e) {
        throw herd::InputError(checkpoint_message(trainer->checkpoint_path(), e.what()));
      }
      complete = trainer->done();
      if (!complete && !quiet) {
        std::printf("herd-rl: resumed from %s at iteration %lld\n", trainer->checkpoint_path().c_str(),
                    static_cast<long long>(trainer->iteration()));
        for (const auto& c : trainer->changed_on_resume())
          std::printf("herd-rl: warning: resumed with a changed setting: %s\n", c.c_str());
      }
    } else if (resume && !quiet) {
      std::printf("herd-rl: no checkpoint %s yet: training from the start\n", trainer->checkpoint_path().c_str());
    }
    if (!quiet && !complete) {
      const herd::rl::TrainConfig& rc = trainer->config();
      // Training runs whole iterations: say so when total_steps is not a multiple of one.
      const long long steps =
          static_cast<long long>(rc.num_iterations()) * static_cast<long long>(rc.steps_per_iteration());
      const std::string rounded = steps == rc.total_steps ? ""
                                                          : "; total_steps " + std::to_string(rc.total_steps) +
                                                                " rounded up to whole iterations";
      std::printf(
          "herd-rl: %s on %s, %lld env steps (%lld iteration%s of %d rank(s) x %d envs x %d steps%s), seed "
          "%llu, device %s\n",
          rc.algorithm.c_str(), rc.env.c_str(), steps, static_cast<long long>(rc.num_iterations()),
          rc.num_iterations() == 1 ? "" : "s", rc.ranks, rc.sampler_options.num_envs, rc.sampler_options.num_steps,
          rounded.c_str(), static_cast<unsigned long long>(rc.seed), trainer->device().str().c_str());
      if (rc.lr_scaling != "none")
        std::printf(
            "herd-rl: learning rate %.4g (%s scaling x%.4g from a reference batch of %lld), warm-up %d iterations\n",
            rc.algorithm == "dqn" ? rc.dqn.learning_rate : rc.ppo.learning_rate, rc.lr_scaling.c_str(), rc.lr_scale,
            static_cast<long long>(rc.lr_reference_batch), rc.algorithm == "dqn" ? 0 : rc.ppo.lr_warmup_iterations);
      for (const auto& w : rc.warnings) std::printf("herd-rl: warning: %s\n", w.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    input_error = herd::error_text(e, "reading the configuration and building the agent");
    if (input_error.empty()) input_error = "unknown error";
  }
  // Every rank learns which ranks' input failed, so none waits in a collective. The same
  // input fails the same way everywhere: rank 0 speaks for all unless it succeeded.
  const std::int32_t mine = input_error.empty() ? 0 : 1;
  const auto failed = comm->allgather(std::span<const std::int32_t>(&mine, 1));
  if (std::find(failed.begin(), failed.end(), 1) != failed.end()) {
    if (comm->size() == 1) print_error(input_error.c_str());
    else if (mine && (root || failed[0] == 0))
      std::fprintf(stderr, "herd-rl: error (rank %d of %d): %s\n", comm->rank(), comm->size(), input_error.c_str());
    return 2;
  }
  if (complete) {
    // Nothing is rewritten; only an output lost to a kill between the final checkpoint and
    // the output file is written again (rank 0).
    if (!quiet && trainer->iteration() < trainer->config().num_iterations())
      std::printf(
          "herd-rl: %s is complete (its evaluation after iteration %lld reached eval.stop_return = %g): nothing to "
          "train; raise or unset eval.stop_return to train further, or pass --overwrite (instead of --resume) to "
          "start afresh\n",
          trainer->checkpoint_path().c_str(), static_cast<long long>(trainer->iteration()),
          trainer->config().eval_stop_return.value_or(0.0));
    else if (!quiet)
      std::printf(
          "herd-rl: %s is complete (%lld iterations done; total_steps = %lld needs %lld): nothing to train; "
          "raise total_steps to train further, or pass --overwrite (instead of --resume) to start afresh\n",
          trainer->checkpoint_path().c_str(), static_cast<long long>(trainer->iteration()),
          static_cast<long long>(trainer->config().total_steps),
          static_cast<long long>(trainer->config().num_iterations()));
    if (root && !std::filesystem::exists(trainer->output_path())) {
      try {
        trainer->write_output(trainer->output_path());
        if (!quiet) std::printf("herd-rl: wrote the missing %s\n", trainer->output_path().c_str());
      } catch (const std::exception& e) {
        print_error(e.what());
        return 1;
      }
    }
    return 0;
  }
  int rc = 0;
  try {
    // With several ranks an exception on one rank prints "herd: rank R of N failed: ..."
    // and ends every rank (MPI_Abort); the last checkpoint (atomic) stays intact.
    herd::abort_all_on_error(*comm, [&] {
      try {
        const herd::rl::RunEnd end = trainer->run(quiet ? nullptr : &std::cout, stop_after, &g_stop_signal);
        if (!quiet && trainer->done())
          std::printf("herd-rl: wrote %s and %s\n", trainer->output_path().c_str(), trainer->checkpoint_path().c_str());
        // The command that continues this run from its checkpoint.
        const auto resume_command = [&] {
          std::string cmd = comm->size() > 1 ? "mpiexec -n " + std::to_string(comm->size()) + " " : "";
          cmd += shell_quote(argv[0]) + " train";
          if (!file.empty()) cmd += " " + shell_quote(file);
          for (const auto& kv : sets) cmd += " --set " + shell_quote(kv);
          cmd += " --resume";
          if (quiet) cmd += " --quiet";
          return cmd;
        };
        const auto done_of = [&] {
          return "iteration " + std::to_string(trainer->iteration()) + " of " +
                 std::to_string(trainer->config().num_iterations()) + "; checkpoint written to " +
                 trainer->checkpoint_path();
        };
        if (end == herd::rl::RunEnd::kStopped && root && !quiet && !trainer->done())
          std::printf("herd-rl: stopped after %s (--stop-after)\nherd-rl: continue with: %s\n", done_of().c_str(),
                      resume_command().c_str());
        if (end == herd::rl::RunEnd::kInterrupted) {
          // Every rank stops after the same iteration, with the signal agreed over the ranks
          // (it may have reached some only).
          const int sig = trainer->interrupted_by() == SIGTERM ? SIGTERM : SIGINT;
          rc = 128 + sig;
          if (root) {
            std::fflush(stdout);
            std::fprintf(stderr, "herd-rl: interrupted by %s after %s\nherd-rl: resume with: %s\n",
                         sig == SIGTERM ? "SIGTERM" : "SIGINT", done_of().c_str(), resume_command().c_str());
          }
        }
      } catch (const herd::NumericalError& e) {
        // Seen by every rank in the same minibatch (losses are averaged over ranks).
        if (root) {
          // Only a checkpoint written before the failure is there to keep.
          const std::string& ckpt = trainer->checkpoint_path();
          std::error_code ec;
          if (std::filesystem::exists(ckpt, ec))
            std::fprintf(stderr, "herd-rl: error: %s; the last good checkpoint, %s, is kept\n", e.what(), ckpt.c_str());
          else std::fprintf(stderr, "herd-rl: error: %s; no checkpoint was written before it\n", e.what());
        }
        rc = 3;
      }
    });
  } catch (const std::exception& e) {  // one rank: the exception comes back here
    print_error(herd::error_text(e, "training"));
    return 1;
  }
  const std::string& prefix = trainer->config().output_prefix;
  if (root && rc == 0 &&
      (std::filesystem::exists(prefix + "_progress.csv") || std::filesystem::exists(prefix + ".h5"))) {
    // <prefix>_report.html of the run so far; a failure to write it leaves the training's
    // outputs as they are and is reported, not fatal.
    try {
      const std::string path = herd::rl::write_training_report(prefix);
      if (!quiet) std::printf("herd-rl: wrote %s\n", path.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-rl: warning: the HTML report was not written: %s\n", e.what());
    }
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("herd-rl", run_main, argc, argv); }
