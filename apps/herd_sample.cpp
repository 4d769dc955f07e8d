// herd-sample: ParaDRAM-style DRAM sampling from a TOML or ParaMonte namelist input file.
//
//   herd-sample [FILE] [--set key=value]... [--output PREFIX] [--seed N] [--quiet]
//
// Without FILE it runs its embedded default input (a posteriordb model). Exit codes: 0 on
// success (or when the run recorded in <prefix>_restart/ is already complete), 2 for bad
// input (nothing is written), 1 when the run fails. Under `mpiexec -n N` (MPICH) it runs
// the parallelization_model over N processes; rerunning an interrupted run resumes it
// from its last checkpoint (docs/parallel.md). SIGINT or SIGTERM ends it with one line that
// says whether and how the run resumes (exit status 130 / 143).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "app_main.hpp"
#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/examples/model_targets.hpp"
#include "herd/io/config.hpp"
#include "herd/io/output_files.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/run/program_input.hpp"
#include "herd/mcmc/run/target_registry.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace {

/// The embedded default input: the README's first quick-start command runs exactly this.
constexpr const char* kDefaultInput = R"toml(# herd-sample's embedded default input.
description = "posteriordb kidiq-kidscore_interaction: linear regression with an interaction term"
chain_size = 20000
random_seed = 20261129
output_prefix = "out/kidscore_interaction"
overwrite = true
)toml";

/// The embedded default's target, left out when `--set target.*` chooses another.
constexpr const char* kDefaultTarget = R"toml(# Start at the least-squares fit (beta[1..4], log sigma),
# with proposal scales of the order of the posterior's; the proposal covariance then adapts.
start_point = [-11.48, 51.27, 0.969, -0.484, 2.884]
proposal_std = [1.0, 1.0, 0.01, 0.01, 0.01]

[target]
model = "kidscore_interaction"
)toml";

/// What the command line says.
struct CommandLine {
  std::string file;               ///< the input file (empty: the embedded default input)
  std::vector<std::string> sets;  ///< --set key=value
  std::string output, seed;       ///< --output, --seed (empty: not given)
  bool quiet = false, help_keys = false;
};

/// The name of the input in messages and the report.
std::string input_name(const CommandLine& cl) { return cl.file.empty() ? "(embedded default input)" : cl.file; }

/// Seeds are checked here rather than by CLI11 (whose range message prints the limits of a
/// double) or the schema (which reads 2^63 as a float): the range is TOML's integers,
/// [0, 2^63-1], for --seed, --set random_seed and the input file alike; nothing is clamped.
/// Prints one error line and returns false for a bad one.
bool seeds_valid(const CommandLine& cl) {
  auto seed_ok = [](const std::string& text) {
    long long v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size() && v >= 0;
  };
  if (!cl.seed.empty() && !seed_ok(cl.seed)) {
    std::fprintf(stderr, "herd-sample: error: --seed is \"%s\", but must be an integer in [0, 9223372036854775807]\n",
                 cl.seed.c_str());
    return false;
  }
  for (const auto& kv : cl.sets) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = kv.substr(0, eq);
    std::string value = kv.substr(eq + 1);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if ((key == "random_seed" || key == "randomSeed" || key == "outputSeed") && !seed_ok(value)) {
      std::fprintf(stderr,
                   "herd-sample: error: --set %s: key \"%s\" is \"%s\", but must be an integer in [0, "
                   "9223372036854775807]\n",
                   kv.c_str(), key.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

/// The input keys: the sampler's specifications and the target registry's keys.
herd::io::Schema input_schema() {
  herd::io::Schema schema("herd-sample");
  herd::mcmc::declare_sampler_specs(schema);
  herd::mcmc::TargetRegistry::global().declare_keys(schema);
  return schema;
}

/// The banner's count of what the summary table has a row for: "5 variables" (sampled), and
/// ", 1 derived quantity" when the target derives quantities that are not variables (the
/// table's rows are the variables, then those).
std::string quantity_counts(const herd::mcmc::SamplerProgramInput& in) {
  std::size_t derived = 0;
  if (in.target.quantities) {
    const auto& vars = in.specs.variable_names;
    for (const auto& q : in.target.quantity_names)
      if (std::find(vars.begin(), vars.end(), q) == vars.end()) ++derived;
  }
  std::string s = fmt::format("{} variable{}", in.target.ndim, in.target.ndim == 1 ? "" : "s");
  if (derived > 0) s += fmt::format(", {} derived quantit{}", derived, derived == 1 ? "y" : "ies");
  return s;
}

/// The line rank 0 prints before the run.
std::string banner(const herd::mcmc::SamplerProgramInput& in, int ranks) {
  if (in.specs.device != "cpu")
    return fmt::format(
        "herd-sample: {}, {}, device {}, {} x {} chains, warmup {}, chain_size {}, thin {}, "
        "seed {}",
        in.target.description, quantity_counts(in), in.specs.device, ranks, in.specs.chains_per_rank, in.specs.warmup,
        in.specs.chain_size, in.specs.thin, in.specs.random_seed);
  return fmt::format(
      "herd-sample: {}, {}, chain_size {}, seed {}{}", in.target.description, quantity_counts(in), in.specs.chain_size,
      in.specs.random_seed,
      ranks > 1 ? fmt::format(", {} on {} processes", in.specs.parallelization_model, ranks) : std::string());
}

/// Resolves the input on this rank: the file (or the embedded default, whose target a
/// `--set target.*` replaces) with the overrides, then the library's target, specifications
/// and checks. @throws herd::InputError
herd::mcmc::SamplerProgramInput resolve(const CommandLine& cl, const herd::Communicator& comm) {
  herd::mcmc::SamplerProgramInput in;
  std::vector<std::string> all_sets = cl.sets;
  bool sets_target = false;
  for (const auto& kv : all_sets) sets_target = sets_target || kv.rfind("target.", 0) == 0;
  herd::io::Config config = cl.file.empty()
                                ? herd::io::parse_toml(std::string(kDefaultInput) + (sets_target ? "" : kDefaultTarget),
                                                       "(embedded default input)")
                                : herd::io::read_config(cl.file, "ParaDRAM");
  if (!cl.output.empty()) all_sets.push_back("output_prefix=" + cl.output);
  if (!cl.seed.empty()) all_sets.push_back("random_seed=" + cl.seed);
  const herd::io::Schema schema = input_schema();
  // Namelist groups besides &ParaDRAM are not read (as ParaDRAM reads only its own): one
  // named as a table of the input (&target, &data) was meant for herd-sample and is refused,
  // any other (&ParaDISE, ...) gets a note.
  std::vector<std::string> group_notes;
  for (const auto& g : config.other_groups()) {
    std::string table = g.name + ".";
    std::transform(table.begin(), table.end(), table.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool herd_table = std::any_of(schema.keys().begin(), schema.keys().end(),
                                        [&](const herd::io::SchemaKey& k) { return k.name().rfind(table, 0) == 0; });
    const std::string where = fmt::format("{}:{}: namelist group &{} is not read", cl.file, g.line, g.name);
    if (herd_table)
      throw herd::InputError(fmt::format(
          "{}: herd-sample reads the &ParaDRAM group only; write its keys inside &ParaDRAM as {}%key = value", where,
          g.name));
    group_notes.push_back(where + (table == "paradram." ? " (a second &ParaDRAM group; only the first is read)"
                                                        : " (herd-sample reads &ParaDRAM only, as ParaDRAM does)"));
  }
  const herd::io::Settings settings = schema.apply(config, all_sets);
  // The target by name (built-in, posteriordb model, plugin). An input without one is
  // refused: the embedded default input names its model, and sampling that model in place
  // of a forgotten target would look like a result.
  if (!settings.has("target.model") && !settings.has("target.builtin") && !settings.has("target.library"))
    throw herd::InputError(fmt::format(
        "{}: no target is given: set target.builtin, target.model or target.library{} ({})", input_name(cl),
        config.case_insensitive() ? " (in a namelist: target%builtin = \"normal\", ...)" : "",
        cl.file.empty() ? "a --set target.* replaces the default input's target, the model kidscore_interaction"
                        : "only herd-sample without an input file samples its default model, kidscore_interaction"));
  // Then the specifications, the device and the checks of the library.
  herd::mcmc::complete_program_input(in, herd::mcmc::TargetRegistry::global().make(settings, ""), schema, settings,
                                     comm, input_name(cl));
  in.specs.notes.insert(in.specs.notes.begin(), group_notes.begin(), group_notes.end());
  herd::mcmc::sort_in_input_order(in.specs.notes);
  in.options.quiet = cl.quiet;
  in.banner = [ranks = comm.size()](const herd::mcmc::SamplerProgramInput& settled) { return banner(settled, ranks); };
  return in;
}

/// The line printed on SIGINT ([0]) and SIGTERM ([1]): what became of the run and how to go
/// on. Filled once the input is resolved (rank 0 only; empty: nothing printed), read by the
/// signal handler, which may only call async-signal-safe functions.
std::array<std::string, 2> g_stop_lines;
/// The lines for a resumable run stopped before its first checkpoint ([0] SIGINT, [1]
/// SIGTERM; empty: use `g_stop_lines`), and the checkpoint files whose presence
/// (`access`, async-signal-safe) tells the two apart: a batched run's and every chain's
/// (a resume starts from the checkpoints of whichever chains have one, as `holds_checkpoint`
/// decides, so a checkpoint of any chain, on any rank, counts).
std::array<std::string, 2> g_early_stop_lines;
std::vector<std::string> g_checkpoint_files;
/// True on the ranks other than 0 of a run of several processes: MPICH's process manager
/// kills the remaining ranks (SIGKILL) as soon as one rank ends, so these end a moment after
/// rank 0, which writes the stop line, has had the time to do so.
volatile std::sig_atomic_t g_after_rank0 = 0;

/// Waits 0.2 s: on a rank other than 0, long enough for rank 0 to write its stop line and
/// release the lock before MPICH's launcher kills the ranks left. Async-signal-safe.
void wait_for_rank0() {
  const struct timespec pause { 0, 200'000'000 };
  ::nanosleep(&pause, nullptr);
}

/// Installs `handler` for SIGINT and SIGTERM, for one signal (SA_RESETHAND restores the
/// default action), with both blocked while it runs; a signal ignored at start (a SIGINT in
/// a background job of a script) stays ignored.
void install_stop_handler(void (*handler)(int)) {
  for (const int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);  // one stop at a time: a second signal waits for the first's end
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

/// True while none of `g_checkpoint_files` exists (the run stopped before its first
/// checkpoint). Async-signal-safe (access).
bool no_checkpoint_yet() {
  for (const std::string& f : g_checkpoint_files)
    if (::access(f.c_str(), F_OK) == 0) return false;
  return true;
}

/// Writes the stop line, removes the output prefix's lock file and lets the signal end the process as it would have
/// without a handler (exit status 128 + signal; SA_RESETHAND restored the default action); a rank other than 0 of an
/// MPI run waits 0.2 s first (`g_after_rank0`). The restart record needs nothing done here: it is written so that a
/// kill -9 at any point resumes. The other stop signal is blocked meanwhile.
extern "C" void on_stop_signal(int sig) {
  const std::size_t i = sig == SIGTERM ? 1 : 0;
  const std::string& line =
      !g_early_stop_lines[i].empty() && no_checkpoint_yet() ? g_early_stop_lines[i] : g_stop_lines[i];
  if (!line.empty()) {
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  }
  herd::io::release_prefix_locks_on_signal();  // <prefix>.lock, as a run that ends removes it
  if (g_after_rank0 != 0) wait_for_rank0();
  ::raise(sig);
}

/// The end of the line printed when the process crashes during the run (after "<program>:
/// error: [rank R: ]crashed with SIGxxx"): where the fault may be and what became of the run
/// ([0]; [1] before the first checkpoint, told apart as for the stop lines). Filled by
/// `install_stop_lines` on every rank, read by `on_crash_signal`.
std::array<std::string, 2> g_crash_tails;
/// "herd-sample: error: " or "herd-sample: error: rank R: ", the crash line's start.
std::string g_crash_head;

/// The name of crash signal `sig`, for the crash line. Async-signal-safe.
const char* crash_signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGFPE:
      return "SIGFPE (arithmetic fault)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    default:
      return "SIGABRT (abort)";
  }
}

/// The crash signals and the actions they had before `install_crash_handler` (MPI's
/// transport library, a sanitizer or a debugger may have installed one), which
/// `on_crash_signal` restores and hands the signal on to.
constexpr std::array<int, 5> kCrashSignals{SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
std::array<struct sigaction, kCrashSignals.size()> g_crash_previous{};

/// Writes the crash line, removes the output prefix's lock file, restores the signal's
/// previous action and raises it again, so that the process ends as it would have without
/// this handler (the default action: exit status 128 + signal, a core dump where enabled; or
/// the earlier handler's backtrace). Async-signal-safe: write, access, unlink, sigaction,
/// raise.
extern "C" void on_crash_signal(int sig) {
  const std::string& tail = !g_crash_tails[1].empty() && no_checkpoint_yet() ? g_crash_tails[1] : g_crash_tails[0];
  if (!tail.empty()) {
    const char* name = crash_signal_name(sig);
    const auto put = [](const char* p, std::size_t n) {
      [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, p, n);
    };
    put(g_crash_head.data(), g_crash_head.size());
    put("crashed with ", 13);
    put(name, std::strlen(name));
    put(tail.data(), tail.size());
  }
  herd::io::release_prefix_locks_on_signal();
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i)
    if (kCrashSignals[i] == sig) ::sigaction(sig, &g_crash_previous[i], nullptr);
  ::raise(sig);  // delivered to the restored action once this handler returns
}

/// Installs `on_crash_signal` for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, keeping each
/// signal's previous action for it to hand on to; a signal ignored at start stays ignored.
void install_crash_handler() {
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i) {
    const int sig = kCrashSignals[i];
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || ((old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN))
      continue;
    g_crash_previous[i] = old;
    struct sigaction sa {};
    sa.sa_handler = on_crash_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

/// Until `install_stop_lines` replaces it: a rank other than 0 of an MPI run (MPICH's launcher
/// sets PMI_RANK) that is stopped while it starts ends 0.2 s after its signal, as
/// `on_stop_signal` does, so that rank 0, which may already hold the output prefix's lock, can
/// remove it before the launcher kills it. Async-signal-safe.
extern "C" void on_early_stop_signal(int sig) {
  wait_for_rank0();
  ::raise(sig);
}

/// Installs `on_early_stop_signal` on the ranks other than 0 (by PMI_RANK, before MPI is
/// initialised); a signal ignored at start stays ignored.
void install_early_stop_handler() {
  const char* rank = std::getenv("PMI_RANK");
  if (rank == nullptr || rank[0] == '\0' || std::string_view(rank) == "0") return;
  install_stop_handler(on_early_stop_signal);
}

/// Fills `g_stop_lines` for this run and installs `on_stop_signal` for SIGINT and SIGTERM
/// (a SIGINT ignored at start, as in a background job of a script, stays ignored).
void install_stop_lines(const herd::mcmc::SamplerProgramInput& in, const herd::Communicator& comm) {
  const herd::mcmc::SamplerSpecs& s = in.specs;
  const std::string folder = s.output_prefix + "_restart";
  std::string what, early;
  if (in.run && !in.run_restartable)
    what = fmt::format("device = \"{}\" keeps no restart record, so the run starts afresh when run again", s.device);
  else if (s.checkpoint_period == 0 && s.checkpoint_period_seconds == 0)
    what = "checkpoints are off (checkpoint_period = checkpoint_period_seconds = 0), so the run cannot be resumed";
  else if (s.overwrite)
    what = fmt::format(
        "overwrite = true, so the same command starts afresh (with overwrite = false it resumes from {})", folder);
  else {
    what = fmt::format("the restart record in {} is kept: the same command resumes the run", folder);
    // Before the first checkpoint the record holds only the seed: a rerun starts over.
    early = fmt::format(
        "the restart record in {} holds no checkpoint yet, so the same command starts the run again from its first "
        "proposal (with the recorded seed)",
        folder);
    // Every chain of the run (ranks x chains per rank bounds each parallelization model's
    // count), capped: past the cap the line may say "no checkpoint yet" of a record whose
    // later chains hold one, which the resume then reports correctly.
    const auto chains = std::clamp<std::int64_t>(comm.size() * std::max<std::int64_t>(s.chains_per_rank, 1), 1, 4096);
    g_checkpoint_files.assign({folder + "/batched.ckpt"});
    for (std::int64_t c = 0; c < chains; ++c) g_checkpoint_files.push_back(fmt::format("{}/chain_{}.ckpt", folder, c));
  }
  for (std::size_t i = 0; i < 2; ++i) {
    const char* name = i == 0 ? "SIGINT" : "SIGTERM";
    g_stop_lines[i] =
        comm.rank() == 0 ? fmt::format("herd-sample: interrupted by {}; {}\n", name, what) : std::string();
    g_early_stop_lines[i] = comm.rank() == 0 && !early.empty()
                                ? fmt::format("herd-sample: interrupted by {}; {}\n", name, early)
                                : std::string();
  }
  // A crash is more likely the log density's (a plugin's) than herd's: say so, and what
  // became of the run, on the rank that crashed.
  g_crash_head = comm.size() > 1 ? fmt::format("herd-sample: error: rank {}: ", comm.rank()) : "herd-sample: error: ";
  constexpr const char* kWhere = " during the run (in the log density, a plugin it calls, or herd); ";
  g_crash_tails[0] = fmt::format("{}{}\n", kWhere, what);
  g_crash_tails[1] = early.empty() ? std::string() : fmt::format("{}{}\n", kWhere, early);
  g_after_rank0 = comm.size() > 1 && comm.rank() != 0 ? 1 : 0;
  install_stop_handler(on_stop_signal);
  install_crash_handler();
}

/// `resolve`, with --output and --seed (which travel as --set overrides) named as the user
/// typed them in its messages.
herd::mcmc::SamplerProgramInput resolve_named(const CommandLine& cl, const herd::Communicator& comm) {
  try {
    herd::mcmc::SamplerProgramInput in = resolve(cl, comm);
    if (!cl.output.empty()) in.specs.output_prefix_origin = "--output " + cl.output;
    return in;
  } catch (const herd::InputError& e) {
    std::string m = e.what();
    const std::string from = "--set output_prefix=" + cl.output;
    if (!cl.output.empty() && m.rfind(from, 0) == 0) m = "--output " + cl.output + m.substr(from.size());
    const std::string seed_from = "--set random_seed=" + cl.seed;
    if (!cl.seed.empty() && m.rfind(seed_from, 0) == 0) m = "--seed " + cl.seed + m.substr(seed_from.size());
    throw herd::InputError(m);
  }
}

/// The program: main's body, run by main, which turns an exception that escapes it into an
/// error line.
int run_main(int argc, char** argv) {
  // The posteriordb models join the built-in targets and plugins of the target registry.
  herd::examples::register_models(herd::mcmc::TargetRegistry::global());
  CLI::App app{"herd-sample: delayed-rejection adaptive Metropolis (DRAM) sampling, ParaDRAM-compatible"};
  CommandLine cl;
  app.set_version_flag("--version", std::string("herd-sample (herd) ") + HERD_VERSION_STRING);
  app.add_flag("--help-keys", cl.help_keys,
               "list every input key (TOML name, ParaMonte aliases) with its type, default and meaning, and exit");
  app.add_option("file", cl.file,
                 "input file: TOML, or a ParaMonte &ParaDRAM namelist (default: the embedded default input)");
  app.add_option("--set", cl.sets, "override a specification: key=value (repeatable)");
  app.add_option("--output", cl.output, "output prefix (overrides output_prefix)");
  app.add_option("--seed", cl.seed,
                 "random seed (overrides random_seed): an integer in [0, 2^63 - 1] (9223372036854775807); larger "
                 "values are refused");
  app.add_flag("--quiet", cl.quiet, "print nothing but errors");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line in the herd form (CLI11's own text is two lines without the program name).
    std::fprintf(stderr, "herd-sample: error: %s (run herd-sample --help for the options)\n", e.what());
    return 2;
  }
  if (cl.help_keys) {
    std::fputs("herd-sample input keys (TOML; a ParaMonte namelist may use the names in \"also\", in any case):\n\n",
               stdout);
    std::fputs(input_schema().help().c_str(), stdout);
    return 0;
  }
  if (!seeds_valid(cl)) return 2;
  install_early_stop_handler();
  // Under `mpiexec -n N` (MPICH) the ranks run the model's parallel form (multi_chain, or
  // fork-join for single_chain); without a launcher, one process (no MPI initialisation).
  int rc = 0;
  {
    std::unique_ptr<herd::Communicator> comm;
    try {
      comm = herd::make_world_communicator();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-sample: error: %s\n", e.what());
      return 1;
    }
    rc = herd::mcmc::run_sampler_program(
        *comm,
        [&] {
          herd::mcmc::SamplerProgramInput in = resolve_named(cl, *comm);
          install_stop_lines(in, *comm);
          return in;
        },
        "herd-sample");
  }  // the communicator goes before MPI is finalised (at exit)
  return rc;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("herd-sample", run_main, argc, argv); }
