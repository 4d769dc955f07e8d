// The C interface (herd/mcmc/paradram.h): ParaMonte-compatible entry points over the
// herd-sample pipeline (specifications -> DRAM kernel -> ParaDRAM outputs).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/io/config.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/paradram.h"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/run/program_input.hpp"
#include "herd/mcmc/run/target_registry.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace {

std::atomic<int> g_last_status{0};

/// One run at a time per process (HDF5, the output writers and MPI are not shared between
/// runs): a call from another thread waits for the run in progress; a call from inside a
/// run's log density (the same thread) cannot wait for it and is refused.
std::mutex g_run_mutex;
thread_local bool t_in_run = false;

/// The input as a configuration: a file path, namelist text, TOML text, or nothing. A line
/// that names an existing file (blanks around it ignored, as Fortran's blank-padded strings
/// need) is read as that file, whatever characters its name has ('=' included); other input
/// with no '=' and no line break, not opening a group ('&', '$'), is a file that does not
/// exist; the rest is text, a namelist or TOML by `io::parse_config`'s rule (a '&' or '$'
/// group first, or after free text).
herd::io::Config input_config(std::string_view input) {
  const std::size_t first = input.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return herd::io::parse_toml("", "(no input)");
  const std::string_view trimmed = input.substr(first, input.find_last_not_of(" \t\r\n") - first + 1);
  const bool one_line = trimmed.find('\n') == std::string_view::npos;
  if (one_line) {
    const std::string path(trimmed);
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return herd::io::read_config(path, "ParaDRAM");
    if (trimmed.find('=') == std::string_view::npos && trimmed[0] != '&' && trimmed[0] != '$')
      throw herd::InputError(fmt::format("input file \"{}\" does not exist", path));
  }
  try {
    return herd::io::parse_config(input, "(input text)", "ParaDRAM");
  } catch (const herd::InputError& e) {
    // One line that is not valid input may be meant as a path with '=' in it.
    if (one_line && trimmed.find_first_of("&$") == std::string_view::npos)
      throw herd::InputError(fmt::format("{} (the input is read as text: no file \"{}\" exists)", e.what(), trimmed));
    throw;
  }
}

/// One run through the C API: the log function `f` on `ndim` variables, or the target the
/// input names (`f` empty, `ndim` 0 or the target's), on the device the input names
/// ("cpu", the serial kernel; "cpu_batched" or "cuda", the batched run). A C log function
/// is not thread-safe: a batched run evaluates it in stage rounds on the calling thread.
/// `entry`, the C function the program called, names it in the errors of its arguments.
int run_once(const char* entry, std::int32_t ndim, herd::mcmc::PointLogDensity f, std::string_view input) {
  // MPI: under an MPI launcher, or when the caller has initialised MPI, the run is parallel
  // over MPI_COMM_WORLD (a duplicate); herd initialises MPI (MPI_Init_thread, FUNNELED)
  // when the caller has not. At the end, when mpi_finalize_requested (default true, as
  // ParaMonte's mpiFinalizeRequested) herd finalises MPI only if herd initialised it: a
  // caller that initialised MPI itself keeps it (finalising it under the caller would make
  // its later MPI calls fail); otherwise MPI stays up and is finalised at exit.
  bool finalize = true;
  int rc = 0;
  {
    std::unique_ptr<herd::Communicator> comm;
    try {
      comm = herd::make_world_communicator();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd: error: %s\n", e.what());
      return 1;
    }
    auto resolve = [&]() {
      herd::mcmc::SamplerProgramInput in;
      const herd::io::Config config = input_config(input);
      herd::io::Schema schema("ParaDRAM");
      herd::mcmc::declare_sampler_specs(schema);
      // A `[target]` table (or `data`) names a target of the registry instead of a log
      // function; without one the target keys are not part of the input (nor of its hash).
      const bool named = config.find("target") != nullptr || config.find("data") != nullptr;
      if (named) herd::mcmc::TargetRegistry::global().declare_keys(schema);
      // ParaMonte's drivers take the dimension as an argument, never from the input; a key
      // `ndim` there would otherwise get the schema's nearest name ("thin").
      if (const herd::io::ConfigValue* nd = config.find("ndim"); nd != nullptr && !named)
        throw herd::InputError(
            fmt::format("{}: key \"ndim\" is not an input key: the dimension is {}'s "
                        "argument ndim, or target.ndim of a [target] table that names a built-in target or plugin",
                        nd->where.str(), entry));
      const herd::io::Settings settings = schema.apply(config);
      herd::mcmc::MadeTarget made;
      if (named && herd::mcmc::TargetRegistry::chooses_target(settings)) {
        if (f)
          throw herd::InputError(
              fmt::format("{}: the input names a target (target.builtin, target.model or "
                          "target.library), but a log function is given too: pass NULL as the log function",
                          entry));
        made = herd::mcmc::TargetRegistry::global().make(settings);
        if (ndim != 0 && ndim != made.target.ndim)
          throw herd::InputError(
              fmt::format("{}: ndim is {}, but the input's target has {} dimensions (pass "
                          "0 to take the target's)",
                          entry, ndim, made.target.ndim));
      } else {
        if (!f)
          throw herd::InputError(
              fmt::format("{}: the log function is NULL, and the input names no target (target.builtin, "
                          "target.model or target.library in a [target] table): pass a log function, or name a "
                          "target",
                          entry));
        if (ndim < 1) throw herd::InputError(fmt::format("{}: ndim is {}, but must be at least 1", entry, ndim));
        // A log function reads no target key: one set would be ignored.
        if (named)
          for (const auto& k : schema.keys())
            if ((k.name().starts_with("target.") || k.name().starts_with("data.")) && settings.is_set(k.name()))
              throw herd::InputError(fmt::format(
                  "{}: key \"{}\" is set, but the target is the log function passed to {}, which reads "
                  "no target key (name a target with target.builtin, target.model or target.library and pass NULL, "
                  "or remove the key)",
                  settings.origin(k.name()), settings.written(k.name()), entry));
        made.target.ndim = ndim;
        made.target.log_density = f;
        made.target.description = "C log function (ParaMonte signature)";
      }
      herd::mcmc::complete_program_input(in, std::move(made), schema, settings, *comm, config.source());
      finalize = in.specs.mpi_finalize_requested;
      in.options.quiet = in.specs.silent_mode;
      return in;
    };
    rc = herd::mcmc::run_sampler_program(*comm, resolve, "herd");
  }  // the communicator is freed before MPI is finalised
  if (finalize) herd::MpiEnvironment::finalize();
  return rc;
}

/// `run_once`, its status kept for `herd_last_status` (every entry point sets it).
/// Runs are serialised (`g_run_mutex`); a nested call is bad input (2), nothing run.
int run(const char* entry, std::int32_t ndim, herd::mcmc::PointLogDensity f, std::string_view input) {
  if (t_in_run) {
    std::fprintf(stderr,
                 "herd: error: %s was called from inside the log density of a run in progress; herd's C API runs "
                 "one sampler at a time per process, so a run cannot start another\n",
                 entry);
    g_last_status = 2;  // for runParaDRAM's caller; the running call sets its own at its end
    return 2;
  }
  const std::lock_guard<std::mutex> lock(g_run_mutex);
  struct InRun {
    InRun() { t_in_run = true; }
    ~InRun() { t_in_run = false; }
    InRun(const InRun&) = delete;
    InRun& operator=(const InRun&) = delete;
  } in_run;
  const int status = run_once(entry, ndim, std::move(f), input);
  g_last_status = status;
  return status;
}

/// The log density of a C function of real type `Real`: the point is copied (converted to
/// `Real`) into a private buffer, which the function may scribble on. `call(buffer, d)`
/// calls the user's function. Empty when `fn` is NULL.
template <typename Real, typename Fn, typename Call>
herd::mcmc::PointLogDensity wrap(Fn fn, Call call) {
  if (fn == nullptr) return {};
  return [fn, call](const double* x, int d) {
    Real small[64];
    std::vector<Real> big;
    Real* buf = small;
    if (d > 64) {
      big.resize(static_cast<std::size_t>(d));
      buf = big.data();
    }
    int i = 0;
    for (; i + 2 <= d; i += 2) {
      buf[i] = static_cast<Real>(x[i]);
      buf[i + 1] = static_cast<Real>(x[i + 1]);
      asm("" : "+r"(i));  // keeps the loop a loop: as a memcpy call it cost more than the copy at d = 10
    }
    for (; i < d; ++i) buf[i] = static_cast<Real>(x[i]);
    return static_cast<double>(call(fn, buf, d));
  };
}

std::string_view c_input(const char* input) { return input ? std::string_view(input) : std::string_view(); }

}  // namespace

extern "C" int herd_run_dram(int32_t ndim, herd_log_func logfunc, const char* input) {
  return run("herd_run_dram", ndim, wrap<double>(logfunc, [](herd_log_func fn, double* p, int d) { return fn(d, p); }),
             c_input(input));
}

extern "C" int32_t runParaDRAMD(double (*getLogFunc)(double state[], int32_t ndim), const int32_t ndim,
                                const char* input) {
  using Fn = double (*)(double[], int32_t);
  return run("runParaDRAMD", ndim, wrap<double>(getLogFunc, [](Fn fn, double* p, int d) { return fn(p, d); }),
             c_input(input));
}

extern "C" int32_t runParaDRAMF(float (*getLogFunc)(float state[], int32_t ndim), const int32_t ndim,
                                const char* input) {
  using Fn = float (*)(float[], int32_t);
  return run("runParaDRAMF", ndim, wrap<float>(getLogFunc, [](Fn fn, float* p, int d) { return fn(p, d); }),
             c_input(input));
}

extern "C" int32_t runParaDRAML(long double (*getLogFunc)(long double state[], int32_t ndim), const int32_t ndim,
                                const char* input) {
  using Fn = long double (*)(long double[], int32_t);
  return run("runParaDRAML", ndim, wrap<long double>(getLogFunc, [](Fn fn, long double* p, int d) { return fn(p, d); }),
             c_input(input));
}

extern "C" void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t ndim, double Point[]), char* inputFile,
                            int32_t inputFileLen) {
  std::string_view input;
  if (inputFile != nullptr && inputFileLen > 0)
    input = std::string_view(inputFile, static_cast<std::size_t>(inputFileLen));
  // Fortran callers pass blank-padded strings.
  while (!input.empty() && (input.back() == ' ' || input.back() == '\0')) input.remove_suffix(1);
  run("runParaDRAM", ndim, wrap<double>(getLogFunc, [](herd_log_func fn, double* p, int d) { return fn(d, p); }),
      input);
}

extern "C" int herd_last_status(void) { return g_last_status.load(); }

// Fortran's module `paramonte` keeps the model of its run in a module variable, which its
// bind(C) trampoline calls: these two bracket its runParaDRAM so that one thread at a time
// sets it, and so that a call from inside its model (which would replace the variable under
// the run in progress, then null it: SIGSEGV) is refused. Not part of paradram.h.
namespace {
std::mutex g_fortran_mutex;
thread_local bool t_in_fortran_run = false;
}  // namespace

/// 0: the calling thread may set the model and run (other threads' runs of the module wait
/// here); 2: the call comes from inside a run's model, refused with one line (status 2).
extern "C" int herd_fortran_run_begin(void) {
  if (t_in_fortran_run) {
    std::fprintf(stderr,
                 "herd: error: runParaDRAM was called from inside the log density of a run in progress; herd's C "
                 "API runs one sampler at a time per process, so a run cannot start another\n");
    g_last_status = 2;
    return 2;
  }
  g_fortran_mutex.lock();
  t_in_fortran_run = true;
  return 0;
}

/// Ends what `herd_fortran_run_begin` returning 0 began, on the same thread.
extern "C" void herd_fortran_run_end(void) {
  t_in_fortran_run = false;
  g_fortran_mutex.unlock();
}
