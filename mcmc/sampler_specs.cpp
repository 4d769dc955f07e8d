#include "herd/mcmc/sampler_specs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Eigen/Dense>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/core/rng.hpp"
#include "herd/mcmc/batched_dram_kernel.hpp"
#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

void declare_sampler_specs(io::Schema& s) {
  using std::nullopt;
  s.add_int("chain_size", 100000,
            "accepted (unique) states of each chain, as ParaDRAM counts them (device cpu_batched/cuda: proposals per "
            "chain after the warm-up)")
      .min(1)
      .alias("chainSize")
      .alias("outputChainSize");
  s.add_int("sample_size", -1,
            "size of the final sample: -1 the refined sample; n > 0 n evenly spaced draws of the post-burn-in chain")
      .alias("sampleSize")
      .alias("outputSampleSize");
  s.add_float_list("start_point", nullopt,
                   "start point of each chain [ndim]; default: centre of the domain box, or 0 (an element a namelist "
                   "leaves unset: its default, or with random_start_point a random draw, as in ParaDRAM)")
      .alias("startPointVec")
      .alias("proposalStart")
      .finite()
      .unset_elements();
  s.add_bool("random_start_point", false, "draw the start point uniformly in the random-start-point box")
      .alias("randomStartPointRequested")
      .alias("proposalStartRandomized");
  s.add_string("random_start_point_scope", "chain",
               "with random_start_point and several chains (multi_chain, cpu_batched, cuda): chain: every chain draws "
               "its own start; superchain: each of the `superchains` groups draws one start shared by its chains "
               "(nested R-hat, Margossian et al. 2024)")
      .choices({"chain", "superchain"});
  s.add_int("superchains", 0,
            "nested R-hat over K superchains of contiguous global chain ids (chains / K each; multi_chain, "
            "cpu_batched, cuda); 0: batched devices choose the largest of 16, 8, 4, 2 with >= 2 chains each, "
            "multi_chain computes none")
      .min(0);
  s.add_float_list("random_start_point_domain_lower", nullopt,
                   "lower corner of the random start box [ndim]; default (also of an element a namelist leaves "
                   "unset): domain_lower")
      .alias("randomStartPointDomainLowerLimitVec")
      .alias("proposalStartDomainCubeLimitLower")
      .finite()
      .unset_elements();
  s.add_float_list("random_start_point_domain_upper", nullopt,
                   "upper corner of the random start box [ndim]; default (also of an element a namelist leaves "
                   "unset): domain_upper")
      .alias("randomStartPointDomainUpperLimitVec")
      .alias("proposalStartDomainCubeLimitUpper")
      .finite()
      .unset_elements();
  s.add_float_list("domain_lower", nullopt,
                   "lower corner of the domain box [ndim]; proposals outside are rejected (an element a namelist "
                   "leaves unset: -inf)")
      .alias("domainLowerLimitVec")
      .alias("domainCubeLimitLower")
      .unset_elements();
  s.add_float_list("domain_upper", nullopt,
                   "upper corner of the domain box [ndim] (an element a namelist leaves unset: +inf)")
      .alias("domainUpperLimitVec")
      .alias("domainCubeLimitUpper")
      .unset_elements();
  s.add_string("proposal_model", "normal", "proposal distribution")
      .choices({"normal", "uniform"})
      .alias("proposalModel")
      .alias("proposal");
  s.add_float_list("proposal_cov", nullopt,
                   "initial proposal covariance [ndim, ndim] row-major, times scale_factor^2 (as ParaDRAM's "
                   "proposalStartCovMat); default: the identity (also of an element a namelist leaves unset)")
      .alias("proposalStartCovMat")
      .alias("proposalCov")
      .finite()
      .unset_elements();
  s.add_float_list("proposal_cor", nullopt,
                   "initial proposal correlation [ndim, ndim] (with proposal_std; times scale_factor^2; an element "
                   "a namelist leaves unset: the identity's)")
      .alias("proposalStartCorMat")
      .alias("proposalCor")
      .finite()
      .unset_elements();
  s.add_float_list("proposal_std", nullopt,
                   "initial proposal standard deviations [ndim] (default 1, also of an element a namelist leaves "
                   "unset; times scale_factor)")
      .alias("proposalStartStdVec")
      .alias("proposalStd")
      .min(0.0, true)
      .finite()
      .unset_elements();
  s.add_int("adaptive_update_period", 0, "proposals between adaptive updates; 0 means 4 ndim")
      .min(0)
      .alias("adaptiveUpdatePeriod")
      .alias("proposalAdaptationPeriod");
  s.add_int("adaptive_update_count", std::numeric_limits<std::int32_t>::max(), "maximum number of adaptive updates")
      .min(0)
      .alias("adaptiveUpdateCount")
      .alias("proposalAdaptationCount");
  s.add_int("greedy_adaptation_count", 0, "early updates that use unique states only")
      .min(0)
      .alias("greedyAdaptationCount")
      .alias("proposalAdaptationCountGreedy");
  s.add_float("burnin_adaptation_measure", 1.0,
              "burn-in ends after the last state whose adaptation measure exceeds this")
      .range(0.0, 1.0)
      .alias("burninAdaptationMeasure")
      .alias("proposalAdaptationBurnin");
  s.add_int("delayed_rejection_count", 0, "delayed-rejection stages after the first")
      .range(0, 1000)
      .alias("delayedRejectionCount")
      .alias("proposalDelayedRejectionCount");
  s.add_float_list("delayed_rejection_scale_factors", nullopt,
                   "per-stage factors of the previous stage's Cholesky factor; default 0.5^(1/ndim)")
      .min(0.0, true)
      .alias("delayedRejectionScaleFactorVec")
      .alias("proposalDelayedRejectionScale");
  s.add_string("scale_factor", "gelman",
               "scale of the proposal: the start and the adapted covariance are multiplied by its square; a "
               "number, \"gelman\" (2.38/sqrt(ndim)) or \"a*gelman\"")
      .number_as_text()
      .alias("scaleFactor")
      .alias("proposalScale");
  s.add_float_list("target_acceptance_rate", nullopt, "desired acceptance rate: a value or a [lo, hi] range in (0, 1]")
      .min(0.0, true)
      .max(1.0)
      .length(1, 2)
      .alias("targetAcceptanceRate")
      .alias("outputAcceptanceRate");
  s.add_int(
       "random_seed", nullopt,
       "seed of the run: an integer in [0, 2^63-1] (TOML's integer range); default: drawn from the system and reported")
      .min(0)
      .alias("randomSeed")
      .alias("outputSeed");
  s.add_string("output_prefix", "out/herd_sample",
               "path prefix of the output files; missing folders are created; a relative prefix is relative to "
               "the working directory (as ParaMonte's outputFileName), not to the input file's folder as "
               "target.library and data.file are")
      .alias("outputFileName");
  s.add_string("chain_file_format", "compact",
               "format of the chain file: compact or verbose (<prefix>_chain.txt) or binary (<prefix>_chain.bin)")
      .choices({"compact", "verbose", "binary"})
      .alias("chainFileFormat")
      .alias("outputChainFileFormat");
  s.add_string("h5_posterior", "verbose",
               "draws in <prefix>.h5 (d variables, q derived quantities): verbose: the groups posterior [chain, "
               "draw(, dim)] (8 (d + q) + 8 bytes per verbose draw after the burn-in) and sample_stats (lp, accepted, "
               "dr_stage, acceptance_probability: 29 bytes per verbose draw) beside chain_compact (every compact "
               "state once with its weight, burn-in included: 44 + 8 d bytes per state); compact: no posterior and "
               "no sample_stats, the root attribute h5_posterior = \"compact\", and chain_compact also holds the "
               "derived quantities (+ 8 q bytes per state); herd-diagnose reads either; chain_compact's other "
               "datasets, sample and diagnostics are the same in both (docs/dram.md)")
      .choices({"verbose", "compact"});
  s.add_bool("overwrite", false, "replace existing output files").alias("overwriteRequested");
  s.add_int("progress_report_period", 1000,
            "proposals between rows of _progress.txt: a row at the first accepted state after each "
            "multiple (ParaDRAM), or at the next multiple of 4096 proposals when nothing is accepted")
      .min(1)
      .alias("progressReportPeriod")
      .alias("outputReportPeriod");
  s.add_int("sample_refinement_count", 20, "maximum thinning rounds of the sample refinement (0: no refinement)")
      .min(0)
      .alias("sampleRefinementCount")
      .alias("outputRefinementCount")
      .alias("outputSampleRefinementCount");
  s.add_string("sample_refinement_method", "batch_means",
               "IAC estimator of the refinement, with ParaMonte's qualifiers: batch_means (BatchMeans), "
               "cutoff_autocorr (CutOffAutoCorr) or max_cumsum_autocorr (MaxCumSumAutoCorr), then "
               "optionally -compact or -verbose (refine on that chain only; default both, compact first) and -avg, "
               "-med, -min or -max (the summary of the variables' IACs; default avg), e.g. \"BatchMeans-max\"")
      .alias("sampleRefinementMethod")
      .alias("outputRefinementMethod")
      .alias("outputSampleRefinementMethod");
  s.add_string_list("variable_names", nullopt,
                    "names of the variables [ndim]; one a namelist leaves unset, or past a short list: "
                    "SampleVariable<i>, as ParaMonte names it")
      .alias("variableNameList")
      .alias("domainAxisName")
      .unset_elements();
  s.add_string("description", "", "free text copied to the report and the HDF5 file").alias("description");
  s.add_string("output_delimiter", ",", "column separator of the text files")
      .alias("outputDelimiter")
      .alias("outputSeparator");
  s.add_int("output_real_precision", 17, "significant digits of real numbers in text files")
      .range(1, 17)
      .alias("outputRealPrecision")
      .alias("outputPrecision");
  s.add_int("output_column_width", 0, "minimum column width of text files (0: no padding)")
      .range(0, 1000)
      .alias("outputColumnWidth");
  s.add_bool("silent_mode", false, "write no progress or summary to the terminal").alias("silentModeRequested");
  s.add_string("parallelization_model", "single_chain", "ParaDRAM's parallelism model")
      .choices({"single_chain", "multi_chain", "singleChain", "multiChain"})
      .alias("parallelizationModel")
      .alias("parallelism");
  s.add_int("chains_per_rank", 1,
            "multi_chain: chains run by each process, on its threads (total: processes x this; at most 4096); "
            "device cpu_batched/cuda: chains run in lock-step by each process (at most 16777216)")
      .min(1)
      .range(1, 16777216)
      .alias("chainsPerRank");
  s.add_string("device", "cpu",
               "cpu: the serial DRAM kernel (parallelization_model applies); cpu_batched: the batched DRAM sampler on "
               "the host threads; cuda: the batched DRAM sampler on one CUDA device per process (built-in targets)")
      .choices({"cpu", "cpu_batched", "cuda"});
  s.add_int("warmup", 1000, "cpu_batched/cuda: proposals per chain before chain_size, adapting, discarded").min(0);
  s.add_int("thin", 1, "cpu_batched/cuda: keep every thin-th proposal's state after the warm-up").min(1);
  s.add_string(
       "batched_adaptation", "pooled",
       "cpu_batched/cuda: proposal adaptation during the warm-up, frozen after it: pooled over the chains of all "
       "processes, per_chain, or none")
      .choices({"pooled", "per_chain", "none"});
  s.add_int("checkpoint_period", 0,
            "proposals between checkpoints of the restart record <prefix>_restart/ (0: by time only)")
      .min(0);
  s.add_float(
       "checkpoint_period_seconds", 5.0,
       "seconds between checkpoints of the restart record (0 with checkpoint_period = 0: no checkpoints, no restart)")
      .min(0.0);
  s.add_float("stall_timeout_seconds", 0.0,
              "watchdog: end the job when one log-density call has not returned, or a process shows no sign of life, "
              "for this many seconds, naming the stalled rank (0: no watchdog)")
      .min(0.0);
  s.add_int("max_num_domain_check_to_warn", 1000,
            "device cpu: trials in a row outside the domain or with a NaN log density before a warning (again at "
            "every multiple)")
      .min(1)
      .alias("maxNumDomainCheckToWarn")
      .alias("domainErrCount");
  s.add_int("max_num_domain_check_to_stop", 100000,
            "device cpu: trials in a row outside the domain or with a NaN log density before the run stops with an "
            "error")
      .min(1)
      .alias("maxNumDomainCheckToStop")
      .alias("domainErrCountMax");
  s.add_bool("mpi_finalize_requested", true, "finalise MPI at the end of a C/Fortran API call")
      .alias("mpiFinalizeRequested")
      .alias("parallelismMpiFinalizeEnabled");
  // ParaMonte specifications that herd accepts (so that ParaMonte's inputs run) and explains.
  s.add_string("restart_file_format", "binary",
               "ParaMonte's restart file format; accepted, but herd's restart record is always <prefix>_restart/ in "
               "its own binary form (a note says so)")
      .choices({"binary", "ascii"})
      .alias("restartFileFormat")
      .alias("outputRestartFileFormat");
  s.add_bool("input_file_has_priority", false,
             "ParaMonte: input file values override values set in code; herd has no specifications set in code "
             "(herd-sample's --set always overrides the file), so this is accepted and has no effect")
      .alias("inputFileHasPriority");
  s.add_string("system_info_file_path", nullopt,
               "ParaMonte's cache of the system information; accepted, herd writes no such cache")
      .alias("systemInfoFilePath")
      .alias("sysInfoFilePath");
  s.add_int("parallelism_num_thread", 0,
            "ParaMonte 2: threads evaluating proposals in a shared-memory fork-join (0: all); herd's single-chain "
            "fork-join runs over MPI processes (mpiexec), multi_chain over threads (chains_per_rank)")
      .min(0)
      .alias("parallelismNumThread");
  s.add_string("output_splash_mode", "normal",
               "ParaMonte 2's outputSplashMode: \"silent\" writes nothing to the terminal (as silent_mode = true); "
               "\"normal\" and \"quiet\" print herd's usual lines (herd prints no splash banner)")
      .choices({"normal", "quiet", "silent"})
      .alias("outputSplashMode");
  s.add_string("output_status", nullopt,
               "ParaMonte 2's outputStatus: \"retry\" or \"repeat\" start afresh (as overwrite = true); \"extend\" "
               "resumes an interrupted run and continues a complete one from its last state and sample covariance "
               "in <prefix>_run<k>")
      .choices({"extend", "repeat", "retry"})
      .alias("outputStatus");
  s.add_string("domain", "cube",
               "domain of the target: \"cube\" (domain_lower/upper) or \"ball\" (also \"sphere\", "
               "\"ellipsoid\"): the ellipsoid (x - c)^T C^-1 (x - c) <= 1 of domain_ball_*, inside the cube")
      .choices({"cube", "ball", "sphere", "ellipsoid"});
  s.add_float_list("domain_ball_center", nullopt,
                   "centre c of the ball domain [ndim] (default 0, also of an element a namelist leaves unset)")
      .alias("domainBallAvg")
      .alias("domainBallCenter")
      .unset_elements();
  s.add_float_list("domain_ball_cov", nullopt,
                   "matrix C of the ball domain [ndim, ndim] row-major, positive definite (no default: a namelist "
                   "gives every element)")
      .alias("domainBallCov")
      .alias("domainBallCovMat")
      .unset_elements();
  s.add_float_list("domain_ball_cor", nullopt,
                   "correlation of the ball domain [ndim, ndim] (with domain_ball_std; "
                   "ignored when domain_ball_cov is given; an element a namelist leaves unset: the identity's)")
      .alias("domainBallCor")
      .alias("domainBallCorMat")
      .unset_elements();
  s.add_float_list("domain_ball_std", nullopt,
                   "radii of the ball domain [ndim] (default +inf: no bound, also of an element a namelist leaves "
                   "unset)")
      .min(0.0, true)
      .alias("domainBallStd")
      .alias("domainBallStdVec")
      .unset_elements();
  s.add_string("max_memory", "0",
               "memory a run may hold, e.g. \"16GiB\" or \"500MB\" (0: the memory available on the machine); a run "
               "that needs more is refused before it starts")
      .alias("maxMemory");
}

namespace {

std::vector<double> floats_or_empty(const io::Settings& st, const char* key) {
  return st.has(key) ? st.get_float_list(key) : std::vector<double>{};
}

void check_length(const io::Settings& st, const char* key, const std::vector<double>& v, std::size_t n,
                  const char* what) {
  if (st.partial(key) && v.size() > n)
    throw InputError(fmt::format("{}: key \"{}\" sets element {}, but there are only {} ({})", st.origin(key),
                                 st.written(key), v.size(), n, what));
  if (!v.empty() && v.size() != n) {
    throw InputError(fmt::format("{}: key \"{}\" has {} value{}, but must have {} ({})", st.origin(key),
                                 st.written(key), v.size(), v.size() == 1 ? "" : "s", n, what));
  }
}

/// `s` with control characters written as C escapes ("\\n"), for messages.
std::string printable_text(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out.push_back(c);
  }
  return out;
}

/// Refuses a column separator that can appear inside a number (digits, signs, '.', the
/// letters of exponents, "nan" and "inf") or ends a row: the text files would not parse.
void check_delimiter(const io::Settings& st, const std::string& delim) {
  for (const char c : delim) {
    const auto u = static_cast<unsigned char>(c);
    const bool bad = std::isalnum(u) != 0 || c == '+' || c == '-' || c == '.' || (u < 0x20 && c != '\t') || u == 0x7f;
    if (bad)
      throw InputError(
          fmt::format("{}: key \"{}\" is \"{}\", but must not contain digits, letters, '+', '-', '.', line "
                      "breaks or control characters (they appear in numbers or end rows); use e.g. \",\" "
                      "or \" \"",
                      st.origin("output_delimiter"), st.written("output_delimiter"), printable_text(delim)));
  }
}

/// Refuses names the outputs cannot hold: empty or repeated names, names HDF5 reads as
/// paths ('/', ".", ".."), control characters, leading or trailing blanks (netCDF and
/// xarray refuse them), names that contain the text files' column separator, and the
/// coordinate names "chain" and "draw" of the `.h5`'s posterior group.
void check_variable_names(const io::Settings& st, const std::vector<std::string>& names, const std::string& delim) {
  const std::string origin = st.has("variable_names") ? st.origin("variable_names") : std::string("variable_names");
  const std::string key = st.has("variable_names") ? st.written("variable_names") : std::string("variable_names");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    std::string why;
    if (n.empty()) why = "is empty";
    else if (n == "." || n == "..") why = "is a path (HDF5 reads it as a folder)";
    else if (n.find('/') != std::string::npos) why = "contains '/' (HDF5 reads it as a path)";
    else if (n.front() == ' ' || n.back() == ' ' || n.front() == '\t' || n.back() == '\t')
      why = "begins or ends with a blank (netCDF and xarray refuse it)";
    else if (std::any_of(n.begin(), n.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      why = "contains a control character";
    else if (n == "chain" || n == "draw")
      why = "is a coordinate of the .h5's posterior group (\"chain\" and \"draw\" are reserved)";
    else if (n.find(delim) != std::string::npos)
      why = fmt::format("contains the column separator output_delimiter = \"{}\"", printable_text(delim));
    for (std::size_t j = 0; j < i && why.empty(); ++j)
      if (names[j] == n) why = fmt::format("repeats name {} (names must be unique)", j + 1);
    if (!why.empty())
      throw InputError(fmt::format("{}: key \"{}\": name {} \"{}\" {}", origin, key, i + 1, printable_text(n), why));
  }
}

/// A partial matrix key of a namelist (`Settings::partial`) as the flat row-major
/// ndim x ndim list, NaN at the elements left unset: given by elements (`m(2,1) = 0.5`:
/// `Settings::matrix_columns` rows of that many columns) it is placed in the matrix; given as
/// a list (`m = 1, , 0.5, 1`), its holes stay where they are.
/// @throws InputError naming the key when an element lies past ndim.
void lay_out_partial_matrix(const io::Settings& st, const char* key, std::vector<double>& v, std::size_t d) {
  const std::size_t cols = st.matrix_columns(key);
  if (cols == 0) return;  // a list: check_matrix_key checks its length
  const std::size_t rows = v.size() / cols;
  if (rows > d || cols > d) {
    // The last element set past ndim, in row-major order.
    std::size_t at = 0;
    for (std::size_t k = 0; k < v.size(); ++k)
      if (!std::isnan(v[k]) && (k / cols >= d || k % cols >= d)) at = k;
    throw InputError(fmt::format("{}: key \"{}\" sets element ({},{}), but the matrix is {} x {} (ndim x ndim)",
                                 st.origin(key), st.written(key), at / cols + 1, at % cols + 1, d, d));
  }
  std::vector<double> m(d * d, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) m[i * d + j] = v[i * cols + j];
  v = std::move(m);
}

}  // namespace

void check_matrix_key(const io::Settings& st, const char* key, const std::vector<double>& v, std::size_t d,
                      bool correlation) {
  if (v.empty()) return;
  // The length first: the checks below index the matrix by dimension.
  check_length(st, key, v, d * d, "ndim x ndim");
  const std::string where = st.origin(key);
  const std::string& name = st.written(key);
  Eigen::MatrixXd m(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(d));
  double big = 0.0;
  for (std::size_t i = 0; i < d; ++i)
    for (std::size_t j = 0; j < d; ++j) {
      const double x = v[i * d + j];
      if (!std::isfinite(x))
        throw InputError(
            fmt::format("{}: key \"{}\" element ({},{}) is {}, but must be finite", where, name, i + 1, j + 1, x));
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = x;
      big = std::max(big, std::fabs(x));
    }
  for (std::size_t i = 0; i < d; ++i) {
    if (correlation && v[i * d + i] != 1.0)
      throw InputError(
          fmt::format("{}: key \"{}\" element ({},{}) is {}, but a correlation matrix has 1 on its diagonal", where,
                      name, i + 1, i + 1, v[i * d + i]));
    for (std::size_t j = 0; j < i; ++j)
      if (std::fabs(v[i * d + j] - v[j * d + i]) > 1e-12 * big)
        throw InputError(
            fmt::format("{}: key \"{}\" is not symmetric: element ({},{}) is {}, but element ({},{}) is {} "
                        "(a {} matrix [ndim, ndim], row-major, is symmetric)",
                        where, name, i + 1, j + 1, v[i * d + j], j + 1, i + 1, v[j * d + i],
                        correlation ? "correlation" : "covariance"));
  }
  Eigen::LLT<Eigen::MatrixXd> llt(m);
  if (llt.info() != Eigen::Success)
    throw InputError(
        fmt::format("{}: key \"{}\" is not positive definite (its Cholesky factorisation fails), but a {} "
                    "matrix must be",
                    where, name, correlation ? "correlation" : "covariance"));
}

std::size_t diagnostics_threads_used(std::size_t threads, std::size_t quantities) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return std::max<std::size_t>(1, std::min(threads, quantities));
}

namespace {

/// sampler_memory_need of a batched device. Rank 0 holds, in bytes (d = ndim; M its own
/// chains, A = processes x M every chain, D draws per chain, B = min(D, 256) draws per chain
/// in a block; docs/batched.md "What max_memory counts"):
///  - the program: kBatchedProgramBytes;
///  - per own chain, the kernel's state (batched::ChainArrays: x, y, the delayed-rejection
///    path w [stages + 1, d] and its log densities, lp, counters, the current state's record,
///    the random-number cursor), the options' and the engine's copies of its start point, and
///    while adapting its sums (and, per chain, its running estimate and factor);
///  - per chain of the run, the draw store's run count and last draw, and with the posterior
///    group HDF5's bookkeeping of each block's write to chunks of 64 chains (measured: about
///    80 bytes per chain and 12 per dataset and chain);
///  - the larger of the sampling's blocks (the engine's draws with their statistics,
///    8 (d + 3) + 2 bytes per draw, for the own chains, and with several processes a gathered
///    copy of every chain's; the store's transposed copy and the posterior's slab, 8 each)
///    and the post-processing's summaries of one quantity per thread: in memory
///    (kDiagnosticsScratchBytes per draw and thread, kDiagnosticsSharedBytes shared),
///    out of core past diagnostics_rank_budget() (half the budget per thread for the rank
///    side's runs, kDiagnosticsStreamedBytes per draw); the sampling's buffers are free by then.
double batched_memory_need(const SamplerSpecs& s, double d, double ranks, double threads) {
  const double own = static_cast<double>(s.chains_per_rank), all = ranks * own;
  const double draws =
      std::floor(static_cast<double>(s.chain_size) / static_cast<double>(std::max<std::int64_t>(s.thin, 1)));
  const double block = std::min(draws, 256.0);  // BatchedDramOptions::block_draws
  const double stages = 1.0 + static_cast<double>(std::max<std::int64_t>(s.delayed_rejection_count, 0));
  const double path = stages + 1.0;
  const bool per_chain = s.batched_adaptation == "per_chain";
  const bool adapt = s.batched_adaptation != "none" && s.warmup > 0;
  const bool posterior = s.h5_posterior != "compact";
  // Each own chain: x, y, w, lp, lpath, state_alpha (doubles); stage, inside, state_stage;
  // the cursor; accepted and its copy at the warm-up's end (per stage); out_of_domain,
  // nan_count, posinf_count, state_step; two copies of the start point.
  double chain =
      8 * (d * (2 + path) + path + 2) + 6 + static_cast<double>(sizeof(RngCursor)) + 16 * stages + 32 + 16 * d;
  if (adapt) chain += 8 * (2 + d + d * d);                   // adapt_measure, ad_n, ad_s1, ad_s2
  if (adapt && per_chain) chain += 8 * (2 * d + 1 + d * d);  // ad_ref, run_n, run_mean, run_m2
  if (per_chain) chain += 8 * d * d;                         // its factor
  const double every = 8 * (d + 2) + (posterior ? 80 + 12 * (d + 1) : 0.0);
  const double per_draw = 8 * (d + 3) + 2;
  const double sampling = block * (own * per_draw + (ranks > 1 ? all * per_draw : 0.0) + all * (posterior ? 16 : 8));
  const double entries = all * draws;  // of one quantity
  const double budget = static_cast<double>(diagnostics_rank_budget());
  const double post =
      13 * (entries + all) > budget  // diagnostics_out_of_core
          ? threads * budget / 2 + static_cast<double>(kDiagnosticsStreamedBytes) * entries
          : (static_cast<double>(kDiagnosticsSharedBytes) + threads * static_cast<double>(kDiagnosticsScratchBytes)) *
                entries;
  return static_cast<double>(kBatchedProgramBytes) + own * chain + all * every + std::max(sampling, post);
}

}  // namespace

double sampler_memory_need(const SamplerSpecs& s, int ndim, int ranks, std::size_t diagnostics_threads) {
  const double d = ndim, n = static_cast<double>(s.chain_size), r = std::max(ranks, 1);
  if (s.device != "cpu")
    return batched_memory_need(
        s, d, r, static_cast<double>(diagnostics_threads_used(diagnostics_threads, static_cast<std::size_t>(ndim))));
  // Each chain held compactly (unique states, weights, lp) and copied once for the
  // outputs (posterior, refined sample); rank 0 gathers every chain of multi_chain.
  const double chains = s.parallelization_model == "multi_chain" ? r * static_cast<double>(s.chains_per_rank) : 1.0;
  // The refinement's autocorrelation estimators hold one variable's verbose series and its
  // FFT, about 40 bytes per verbose draw: 4 draws per state assumed (acceptance rate 0.25).
  std::string why;
  const std::optional<RefinementOptions> ro = parse_refinement_method(s.sample_refinement_method, why);
  const bool autocorr = ro && ro->estimator != IacEstimator::kBatchMeans && s.sample_refinement_count != 0;
  return 2 * chains * n * (d + 4) * 8 + chains * 4 * d * d * 8 + (autocorr ? 40.0 * 4 * n : 0.0);
}

void check_sampler_memory(const SamplerSpecs& s, int ndim, int ranks, std::size_t diagnostics_threads) {
  const double chains = s.device != "cpu" || s.parallelization_model == "multi_chain"
                            ? static_cast<double>(std::max(ranks, 1)) * static_cast<double>(s.chains_per_rank)
                            : 1.0;
  check_memory_need(sampler_memory_need(s, ndim, ranks, diagnostics_threads), s.max_memory,
                    fmt::format("the run ({:.0f} chain(s) x chain_size {} x ndim {}{})", chains, s.chain_size, ndim,
                                s.device != "cpu" && s.thin > 1 ? fmt::format(", thin {}", s.thin) : std::string()),
                    "lower chain_size or chains_per_rank");
}

SamplerSpecs resolve_sampler_specs(const io::Settings& st, int ndim, const std::vector<std::string>& default_names) {
  HERD_REQUIRE(ndim >= 1, "sampler: ndim is {}, but must be at least 1", ndim);
  const auto d = static_cast<std::size_t>(ndim);
  SamplerSpecs s;
  // Every problem is collected and reported at once, one per line.
  std::vector<std::string> errs;
  auto fail = [&](std::string e) { errs.push_back(std::move(e)); };
  auto guard = [&](auto&& check) {
    try {
      check();
    } catch (const InputError& e) {
      errs.emplace_back(e.what());
    }
  };
  s.chain_size = st.get_int("chain_size");
  s.sample_size = st.get_int("sample_size");
  if (s.sample_size == 0 || s.sample_size < -1)
    fail(fmt::format("{}: key \"{}\" is {}, but must be -1 or a positive integer", st.origin("sample_size"),
                     st.written("sample_size"), s.sample_size));
  s.start_point = floats_or_empty(st, "start_point");
  s.random_start_point = st.get_bool("random_start_point");
  s.random_start_point_domain_lower = floats_or_empty(st, "random_start_point_domain_lower");
  s.random_start_point_domain_upper = floats_or_empty(st, "random_start_point_domain_upper");
  s.domain_lower = floats_or_empty(st, "domain_lower");
  s.domain_upper = floats_or_empty(st, "domain_upper");
  s.proposal_model = st.get_string("proposal_model");
  s.proposal_cov = floats_or_empty(st, "proposal_cov");
  s.proposal_cor = floats_or_empty(st, "proposal_cor");
  s.proposal_std = floats_or_empty(st, "proposal_std");
  s.adaptive_update_period = st.get_int("adaptive_update_period");
  s.adaptive_update_count = st.get_int("adaptive_update_count");
  s.greedy_adaptation_count = st.get_int("greedy_adaptation_count");
  s.burnin_adaptation_measure = st.get_float("burnin_adaptation_measure");
  s.delayed_rejection_count = st.get_int("delayed_rejection_count");
  s.delayed_rejection_scale_factors = floats_or_empty(st, "delayed_rejection_scale_factors");
  s.scale_factor = st.get_string("scale_factor");
  s.target_acceptance_rate = floats_or_empty(st, "target_acceptance_rate");
  if (st.has("random_seed")) {
    s.random_seed = static_cast<std::uint64_t>(st.get_int("random_seed"));
  } else {
    std::random_device rd;
    s.random_seed = (static_cast<std::uint64_t>(rd()) << 31) ^ rd();
  }
  s.output_prefix = st.get_string("output_prefix");
  s.overwrite_name = spec_name(st, "overwrite", "overwriteRequested");
  s.output_prefix_name = spec_name(st, "output_prefix", "outputFileName");
  s.output_prefix_origin =
      st.is_default("output_prefix") ? fmt::format("{} = \"{}\" (its default)", s.output_prefix_name, s.output_prefix)
      : st.origin("output_prefix").rfind("--set ", 0) == 0
          ? st.origin("output_prefix")
          : fmt::format("{}: {} = \"{}\"", st.origin("output_prefix"), st.written("output_prefix"), s.output_prefix);
  // ParaMonte: a name ending in '/' is a folder, and the files get the default name in it.
  // herd's default name has no date, so that running the same command again resumes the run.
  if (!s.output_prefix.empty() && s.output_prefix.back() == '/') s.output_prefix += "ParaDRAM_run";
  if (s.output_prefix.empty())
    fail(fmt::format("{}: key \"{}\" is \"\", but must name a file prefix (or a folder ending in '/')",
                     st.origin("output_prefix"), st.written("output_prefix")));
  s.chain_file_format = st.get_string("chain_file_format");
  s.h5_posterior = st.get_string("h5_posterior");
  s.overwrite = st.get_bool("overwrite");
  s.progress_report_period = st.get_int("progress_report_period");
  s.sample_refinement_count = st.get_int("sample_refinement_count");
  {
    std::string why;
    const std::optional<RefinementOptions> ro = parse_refinement_method(st.get_string("sample_refinement_method"), why);
    if (!ro)
      fail(fmt::format("{}: key \"{}\" is \"{}\", but {}", st.origin("sample_refinement_method"),
                       st.written("sample_refinement_method"), st.get_string("sample_refinement_method"), why));
    s.sample_refinement_method = refinement_method_name(*ro);
  }
  s.variable_names = st.has("variable_names") ? st.get_string_list("variable_names") : default_names;
  if (s.variable_names.empty()) {
    for (int i = 1; i <= ndim; ++i) s.variable_names.push_back(fmt::format("x{}", i));
  }
  // A short list (ParaMonte's variableNameList given for the first variables only) is padded
  // with ParaMonte's default names.
  while (st.has("variable_names") && s.variable_names.size() < d)
    s.variable_names.push_back(fmt::format("SampleVariable{}", s.variable_names.size() + 1));
  // The names a namelist leaves unset (variableNameList(2) = 'b' leaves 1): the same default.
  const bool names_partial = st.partial("variable_names");
  for (std::size_t i = 0; names_partial && i < s.variable_names.size(); ++i)
    if (s.variable_names[i].empty()) s.variable_names[i] = fmt::format("SampleVariable{}", i + 1);
  if (names_partial && s.variable_names.size() > d)
    fail(fmt::format("{}: key \"{}\" sets element {}, but there are only {} (ndim)", st.origin("variable_names"),
                     st.written("variable_names"), s.variable_names.size(), d));
  else if (s.variable_names.size() != d)
    fail(fmt::format("{}: key \"{}\" has {} names, but must have {} (ndim)", st.origin("variable_names"),
                     st.written("variable_names"), s.variable_names.size(), d));
  s.description = st.get_string("description");
  s.output_delimiter = st.get_string("output_delimiter");
  if (s.output_delimiter.empty()) s.output_delimiter.push_back(' ');
  check_delimiter(st, s.output_delimiter);
  check_variable_names(st, s.variable_names, s.output_delimiter);
  s.max_memory = st.get_memory_size("max_memory");
  s.output_real_precision = static_cast<int>(st.get_int("output_real_precision"));
  s.output_column_width = static_cast<int>(st.get_int("output_column_width"));
  s.silent_mode = st.get_bool("silent_mode") || st.get_string("output_splash_mode") == "silent";
  s.parallelization_model = st.get_string("parallelization_model");
  if (s.parallelization_model == "singleChain") s.parallelization_model = "single_chain";
  if (s.parallelization_model == "multiChain") s.parallelization_model = "multi_chain";
  s.chains_per_rank = st.get_int("chains_per_rank");
  s.device = st.get_string("device");
  s.warmup = st.get_int("warmup");
  s.thin = st.get_int("thin");
  s.batched_adaptation = st.get_string("batched_adaptation");
  s.random_start_point_scope = st.get_string("random_start_point_scope");
  s.superchains = st.get_int("superchains");
  // The keys checked against the number of processes, later (check_superchains,
  // batched_options): where the input set them.
  for (const char* k : {"superchains", "chains_per_rank"})
    if (st.is_set(k)) s.key_references[k] = fmt::format("{}: key \"{}\"", st.origin(k), st.written(k));
  const bool several = s.device != "cpu" || s.parallelization_model == "multi_chain";
  if (s.superchains > 0 && !several)
    fail(
        fmt::format("{}: key \"{}\" is {}, but superchains need several chains: parallelization_model = "
                    "\"multi_chain\" or device = \"cpu_batched\" / \"cuda\"",
                    st.origin("superchains"), st.written("superchains"), s.superchains));
  if (s.superchains == 1)
    fail(fmt::format("{}: key \"{}\" is 1, but must be 0 (none or automatic) or at least 2", st.origin("superchains"),
                     st.written("superchains")));
  if (s.random_start_point_scope == "superchain" && (!st.get_bool("random_start_point") || s.superchains < 2))
    fail(
        fmt::format("{}: key \"{}\" is \"superchain\", but needs random_start_point = true and superchains >= 2 "
                    "(now {} and {})",
                    st.origin("random_start_point_scope"), st.written("random_start_point_scope"),
                    st.get_bool("random_start_point") ? "true" : "false", s.superchains));
  if (s.device == "cpu" && s.parallelization_model == "multi_chain" && s.chains_per_rank > 4096)
    fail(
        fmt::format("{}: key \"{}\" is {}, but must be at most 4096 with device = \"cpu\" "
                    "(use device = \"cpu_batched\" or \"cuda\" for more chains)",
                    st.origin("chains_per_rank"), st.written("chains_per_rank"), s.chains_per_rank));
  if (s.device != "cpu" && s.warmup > std::numeric_limits<std::int64_t>::max() - s.chain_size)
    fail(fmt::format("{}: key \"{}\" is {}, but warmup + chain_size ({} + {}) must stay below 2^63",
                     st.origin("warmup"), st.written("warmup"), s.warmup, s.warmup, s.chain_size));
  if (s.device != "cpu" && s.thin > s.chain_size)
    fail(fmt::format("{}: key \"{}\" is {}, but must be at most chain_size = {} (no draws otherwise)",
                     st.origin("thin"), st.written("thin"), s.thin, s.chain_size));
  if (s.device != "cpu" && s.proposal_model != "normal")
    fail(fmt::format("{}: key \"{}\" is \"{}\", but device = \"{}\" needs \"normal\"", st.origin("proposal_model"),
                     st.written("proposal_model"), s.proposal_model, s.device));
  s.checkpoint_period = st.get_int("checkpoint_period");
  s.checkpoint_period_seconds = st.get_float("checkpoint_period_seconds");
  if (s.checkpoint_period == 0 && s.checkpoint_period_seconds == 0) {
    // checkpoint_period is 0 by default, so the seconds' setting turned them off, unless a
    // --set of checkpoint_period (applied last) did.
    const bool period_set = st.origin("checkpoint_period").rfind("--set ", 0) == 0;
    const bool seconds_set = st.origin("checkpoint_period_seconds").rfind("--set ", 0) == 0;
    const char* k = (period_set && !seconds_set) || st.is_default("checkpoint_period_seconds")
                        ? "checkpoint_period"
                        : "checkpoint_period_seconds";
    const std::string o = st.origin(k);
    s.checkpoints_off_origin = o.rfind("--set ", 0) == 0 ? o : fmt::format("{}: {} = 0", o, st.written(k));
  }
  s.stall_timeout_seconds = st.get_float("stall_timeout_seconds");
  s.mpi_finalize_requested = st.get_bool("mpi_finalize_requested");
  s.max_num_domain_check_to_warn = st.get_int("max_num_domain_check_to_warn");
  s.max_num_domain_check_to_stop = st.get_int("max_num_domain_check_to_stop");

  // A namelist's partial lists (Fortran arrays: `x(3:5) = ...`, `x = 3*1.0`): the elements it
  // leaves unset are NaN up to ndim, filled below with their defaults (ParaDRAM's).
  for (auto [key, v] : {std::pair{"start_point", &s.start_point},
                        {"domain_lower", &s.domain_lower},
                        {"domain_upper", &s.domain_upper},
                        {"random_start_point_domain_lower", &s.random_start_point_domain_lower},
                        {"random_start_point_domain_upper", &s.random_start_point_domain_upper},
                        {"proposal_std", &s.proposal_std}})
    if (st.partial(key) && v->size() < d) {
      v->resize(d, kNaN);
      s.partial_layouts.emplace_back(key, *v);
    }
  guard([&] { check_length(st, "start_point", s.start_point, d, "ndim"); });
  guard([&] { check_length(st, "domain_lower", s.domain_lower, d, "ndim"); });
  guard([&] { check_length(st, "domain_upper", s.domain_upper, d, "ndim"); });
  guard([&] { check_length(st, "random_start_point_domain_lower", s.random_start_point_domain_lower, d, "ndim"); });
  guard([&] { check_length(st, "random_start_point_domain_upper", s.random_start_point_domain_upper, d, "ndim"); });
  guard([&] { check_length(st, "proposal_std", s.proposal_std, d, "ndim"); });
  // A namelist's matrix given by elements (`proposalStartCovMat(1,2) = 0.5`): placed in the
  // ndim x ndim matrix; the elements it leaves unset are the identity's, as in ParaDRAM. One
  // placed past ndim is its key's only problem.
  for (const char* key : {"proposal_cov", "proposal_cor"}) {
    std::vector<double>& v = key == std::string_view("proposal_cov") ? s.proposal_cov : s.proposal_cor;
    const bool correlation = key == std::string_view("proposal_cor");
    guard([&] {
      if (st.partial(key)) {
        lay_out_partial_matrix(st, key, v, d);
        s.partial_layouts.emplace_back(key, v);
        for (std::size_t i = 0; i < v.size(); ++i)
          if (std::isnan(v[i])) v[i] = i / d == i % d ? 1.0 : 0.0;
      }
      check_matrix_key(st, key, v, d, correlation);
    });
  }
  const bool lengths_ok = errs.empty();  // the checks below index the vectors by dimension
  if (lengths_ok) {
    // The defaults of the elements a namelist left unset, ParaDRAM's: no bound on that side,
    // the random start box's bound the domain's, a standard deviation of 1. The start point's
    // stay NaN until to_dram_options: the domain's centre, or a random draw.
    for (std::size_t i = 0; i < d; ++i) {
      if (!s.domain_lower.empty() && std::isnan(s.domain_lower[i])) s.domain_lower[i] = -kInf;
      if (!s.domain_upper.empty() && std::isnan(s.domain_upper[i])) s.domain_upper[i] = kInf;
      if (!s.random_start_point_domain_lower.empty() && std::isnan(s.random_start_point_domain_lower[i]))
        s.random_start_point_domain_lower[i] = s.domain_lower.empty() ? -kInf : s.domain_lower[i];
      if (!s.random_start_point_domain_upper.empty() && std::isnan(s.random_start_point_domain_upper[i]))
        s.random_start_point_domain_upper[i] = s.domain_upper.empty() ? kInf : s.domain_upper[i];
      if (!s.proposal_std.empty() && std::isnan(s.proposal_std[i])) s.proposal_std[i] = 1.0;
    }
    // ParaDRAM's precedence: a given start element is kept, random_start_point draws the
    // others; with every element given it draws none.
    const bool every_start_given = !s.start_point.empty() && std::none_of(s.start_point.begin(), s.start_point.end(),
                                                                          [](double x) { return std::isnan(x); });
    if (s.random_start_point && every_start_given) {
      s.notes.push_back(fmt::format(
          "{}: {} = true draws no element of the start point: {} ({}) gives every one, and a given element takes "
          "precedence, as in ParaDRAM",
          st.origin("random_start_point"), st.written("random_start_point"), st.written("start_point"),
          st.origin("start_point")));
      s.random_start_point = false;
    }
  }
  for (std::size_t i = 0; i < s.start_point.size(); ++i)
    if (!std::isnan(s.start_point[i]) && !std::isfinite(s.start_point[i]))
      fail(fmt::format("{}: {}[{}] is {}, but must be finite", st.origin("start_point"), st.written("start_point"),
                       i + 1, s.start_point[i]));
  if (s.delayed_rejection_count > 14)
    fail(fmt::format("{}: key \"{}\" is {}, but must be at most 14", st.origin("delayed_rejection_count"),
                     st.written("delayed_rejection_count"), s.delayed_rejection_count));
  else if (s.device != "cpu" && s.delayed_rejection_count > batched::kMaxStages - 1)
    // The batched kernel's path arrays have a compile-time size (batched::kMaxStages).
    fail(fmt::format("{}: key \"{}\" is {}, but device = \"{}\" allows at most {} delayed-rejection stages",
                     st.origin("delayed_rejection_count"), st.written("delayed_rejection_count"),
                     s.delayed_rejection_count, s.device, batched::kMaxStages - 1));
  if (s.target_acceptance_rate.size() == 2 &&
      !(s.target_acceptance_rate[0] > 0 && s.target_acceptance_rate[0] <= s.target_acceptance_rate[1]))
    fail(fmt::format("{}: key \"{}\" is [{}, {}], but must be a range [lo, hi] with 0 < lo <= hi <= 1",
                     st.origin("target_acceptance_rate"), st.written("target_acceptance_rate"),
                     s.target_acceptance_rate[0], s.target_acceptance_rate[1]));
  if (s.target_acceptance_rate.size() == 1 && !(s.target_acceptance_rate[0] > 0))
    fail(fmt::format("{}: key \"{}\" is {}, but must be in (0, 1]", st.origin("target_acceptance_rate"),
                     st.written("target_acceptance_rate"), s.target_acceptance_rate[0]));
  if (s.random_start_point && lengths_ok) {
    const bool lo_given = !s.random_start_point_domain_lower.empty() || !s.domain_lower.empty();
    const bool hi_given = !s.random_start_point_domain_upper.empty() || !s.domain_upper.empty();
    if (!lo_given || !hi_given)
      fail(fmt::format("{}: key \"{}\" is true, but {} are not both given: the start box must be finite",
                       st.origin("random_start_point"), st.written("random_start_point"),
                       st.namelist() ? "randomStartPointDomainLowerLimitVec / randomStartPointDomainUpperLimitVec (or "
                                       "domainLowerLimitVec / domainUpperLimitVec)"
                                     : "random_start_point_domain_lower/upper (or domain_lower/upper)"));
    else {
      const auto& lo = s.random_start_point_domain_lower.empty() ? s.domain_lower : s.random_start_point_domain_lower;
      const auto& hi = s.random_start_point_domain_upper.empty() ? s.domain_upper : s.random_start_point_domain_upper;
      const char* lo_key =
          s.random_start_point_domain_lower.empty() ? "domain_lower" : "random_start_point_domain_lower";
      const char* hi_key =
          s.random_start_point_domain_upper.empty() ? "domain_upper" : "random_start_point_domain_upper";
      for (std::size_t i = 0; i < d; ++i) {
        if (!s.start_point.empty() && !std::isnan(s.start_point[i])) continue;  // given: not drawn
        // A box reaching outside the domain gave start points outside it for some seeds,
        // refused by the kernel naming the input file: the box is refused here, for every
        // seed. The first bad dimension.
        const double dlo = s.domain_lower.empty() ? -kInf : s.domain_lower[i];
        const double dhi = s.domain_upper.empty() ? kInf : s.domain_upper[i];
        if (!(std::isfinite(lo[i]) && std::isfinite(hi[i]) && lo[i] < hi[i]))
          fail(
              fmt::format("{}: the random start box's dimension {} is [{}, {}], but must be finite and "
                          "non-empty ({} and its upper counterpart)",
                          st.origin(lo_key), i + 1, lo[i], hi[i], st.written(lo_key)));
        else if (lo[i] < dlo)
          fail(
              fmt::format("{}: {}[{}] is {}, but the random start box must lie inside the domain: at least {}[{}] "
                          "= {}",
                          st.origin(lo_key), st.written(lo_key), i + 1, lo[i], st.written("domain_lower"), i + 1, dlo));
        else if (hi[i] > dhi)
          fail(
              fmt::format("{}: {}[{}] is {}, but the random start box must lie inside the domain: at most {}[{}] "
                          "= {}",
                          st.origin(hi_key), st.written(hi_key), i + 1, hi[i], st.written("domain_upper"), i + 1, dhi));
        else continue;
        break;
      }
    }
  }
  if (lengths_ok) {
    // Each bound is checked where it is given, so that a NaN or an infinity on the wrong side
    // names its own key (the kernel's check named the input file); the first bad dimension.
    for (std::size_t i = 0; i < d; ++i) {
      const double lo = s.domain_lower.empty() ? -kInf : s.domain_lower[i];
      const double hi = s.domain_upper.empty() ? kInf : s.domain_upper[i];
      if (!s.domain_lower.empty() && !(lo < kInf))
        fail(fmt::format("{}: {}[{}] is {}, but must be a number below +inf (-inf: no lower bound)",
                         st.origin("domain_lower"), st.written("domain_lower"), i + 1, lo));
      else if (!s.domain_upper.empty() && !(hi > -kInf))
        fail(fmt::format("{}: {}[{}] is {}, but must be a number above -inf (+inf: no upper bound)",
                         st.origin("domain_upper"), st.written("domain_upper"), i + 1, hi));
      else if (!(lo < hi))
        fail(fmt::format("{}: {}[{}] is {}, but must be below {}[{}] = {}", st.origin("domain_lower"),
                         st.written("domain_lower"), i + 1, lo, st.written("domain_upper"), i + 1, hi));
      else continue;
      break;
    }
  }
  if (lengths_ok && !s.start_point.empty()) {
    for (std::size_t i = 0; i < d; ++i) {
      const double lo = s.domain_lower.empty() ? -kInf : s.domain_lower[i];
      const double hi = s.domain_upper.empty() ? kInf : s.domain_upper[i];
      if (!std::isnan(s.start_point[i]) && !(s.start_point[i] >= lo && s.start_point[i] <= hi))
        fail(fmt::format("{}: {}[{}] is {}, but must be inside the domain [{}, {}]", st.origin("start_point"),
                         st.written("start_point"), i + 1, s.start_point[i], lo, hi));
    }
  }
  const auto dr = static_cast<std::size_t>(s.delayed_rejection_count);
  if (!s.delayed_rejection_scale_factors.empty() && s.delayed_rejection_scale_factors.size() != 1 &&
      s.delayed_rejection_scale_factors.size() != dr)
    fail(fmt::format("{}: key \"{}\" has {} values, but must have 1 or {} = {}",
                     st.origin("delayed_rejection_scale_factors"), st.written("delayed_rejection_scale_factors"),
                     s.delayed_rejection_scale_factors.size(),
                     spec_name(st, "delayed_rejection_count", "delayedRejectionCount"), dr));
  // Let the kernel parse the scale factor now, so that a bad expression names the key.
  try {
    DramSampler::parse_scale_factor(s.scale_factor, ndim);
  } catch (const InputError& e) {
    fail(
        fmt::format("{}: key \"{}\" is \"{}\", but must be a positive number, \"gelman\" or "
                    "\"<number>*gelman\"",
                    st.origin("scale_factor"), st.written("scale_factor"), s.scale_factor));
  }

  // ParaMonte 2: outputStatus, the ball domain; specifications accepted with a note.
  if (st.has("output_status")) {
    s.output_status = st.get_string("output_status");
    if (s.output_status != "extend") s.overwrite = true;
  }
  s.domain = st.get_string("domain");
  if (s.domain == "sphere" || s.domain == "ellipsoid") s.domain = "ball";
  s.domain_ball_center = floats_or_empty(st, "domain_ball_center");
  auto ball_cov = floats_or_empty(st, "domain_ball_cov"), ball_cor = floats_or_empty(st, "domain_ball_cor"),
       ball_std = floats_or_empty(st, "domain_ball_std");
  const std::size_t before_ball = errs.size();
  // A namelist's partial ball keys (`domainBallStdVec(2) = 10`, `domainBallCorMat(1,2) = 0.5`):
  // the unset elements take the key's default (centre 0, radius +inf, the identity's
  // correlation); the covariance has none, so an unset element of it is refused by name.
  for (auto [key, v, fill] :
       {std::tuple{"domain_ball_center", &s.domain_ball_center, 0.0}, {"domain_ball_std", &ball_std, kInf}})
    if (st.partial(key) && v->size() <= d) {  // past ndim: check_length below names the element
      v->resize(d, kNaN);
      s.partial_layouts.emplace_back(key, *v);
      for (double& x : *v)
        if (std::isnan(x)) x = fill;
    }
  for (auto [key, v] : {std::pair{"domain_ball_cov", &ball_cov}, {"domain_ball_cor", &ball_cor}})
    guard([&, key = key, v = v] {
      const bool correlation = key == std::string_view("domain_ball_cor");
      if (st.partial(key) && (st.matrix_columns(key) > 0 || v->size() == d * d)) {
        lay_out_partial_matrix(st, key, *v, d);
        s.partial_layouts.emplace_back(key, *v);
        for (std::size_t i = 0; i < v->size(); ++i)
          if (std::isnan((*v)[i])) {
            if (correlation) {
              (*v)[i] = i / d == i % d ? 1.0 : 0.0;
            } else {
              v->clear();
              throw InputError(
                  fmt::format("{}: key \"{}\" leaves element ({},{}) unset, but the ball domain's covariance has no "
                              "default: give all {} x {} (ndim x ndim) elements, or give domainBallCorMat (an unset "
                              "element: the identity's) with domainBallStdVec",
                              st.origin(key), st.written(key), i / d + 1, i % d + 1, d, d));
            }
          }
      }
      check_matrix_key(st, key, *v, d, correlation);
    });
  guard([&] { check_length(st, "domain_ball_center", s.domain_ball_center, d, "ndim"); });
  guard([&] { check_length(st, "domain_ball_std", ball_std, d, "ndim"); });
  if (s.domain == "ball" && errs.size() == before_ball) {
    if (s.domain_ball_center.empty()) s.domain_ball_center.assign(d, 0.0);
    if (!ball_cov.empty()) {
      s.domain_ball_cov = ball_cov;
    } else {
      // Sigma = diag(std) cor diag(std), ParaMonte's construction; an infinite radius leaves
      // that dimension unbounded (its row and column of Sigma^-1 vanish).
      s.domain_ball_cov.assign(d * d, 0.0);
      for (std::size_t i = 0; i < d; ++i)
        for (std::size_t j = 0; j < d; ++j) {
          const double si = ball_std.empty() ? kInf : ball_std[i], sj = ball_std.empty() ? kInf : ball_std[j];
          const double r = ball_cor.empty() ? (i == j ? 1.0 : 0.0) : ball_cor[i * d + j];
          s.domain_ball_cov[i * d + j] = r == 0.0 ? 0.0 : r * si * sj;
        }
    }
    if (s.device != "cpu")
      fail(fmt::format("{}: key \"{}\" is \"ball\", but device = \"{}\" samples in the cube domain only",
                       st.origin("domain"), st.written("domain"), s.device));
  } else if (s.domain == "cube" &&
             (!ball_cov.empty() || !ball_cor.empty() || !ball_std.empty() || !s.domain_ball_center.empty())) {
    const char* k = !ball_cov.empty()   ? "domain_ball_cov"
                    : !ball_cor.empty() ? "domain_ball_cor"
                    : !ball_std.empty() ? "domain_ball_std"
                                        : "domain_ball_center";
    fail(fmt::format("{}: key \"{}\" is given, but domain is \"cube\": set domain = \"ball\" to sample in the ball",
                     st.origin(k), st.written(k)));
  }
  auto note = [&](const char* key, const std::string& why) {
    if (st.is_set(key))
      s.notes.push_back(fmt::format("{}: {} = {} is accepted, but {}", st.origin(key), st.written(key),
                                    st.value(key).to_string(), why));
  };
  // Keys this configuration does not read: set, each gets a note (ParaMonte's namelists set
  // such keys freely, so they are not refused); the resolved input comments them out.
  const auto unread = [&](const char* key, const std::string& why) {
    s.unread.emplace_back(key, why);
    if (st.is_set(key))
      s.notes.push_back(
          fmt::format("{}: {} = {} is not read: {}", st.origin(key), st.written(key), st.value(key).to_string(), why));
  };
  if (s.device == "cpu")
    for (const char* k : {"warmup", "thin", "batched_adaptation"})
      unread(k, "it applies to device = \"cpu_batched\" and \"cuda\", and device is \"cpu\"");
  else
    for (const char* k : {"max_num_domain_check_to_warn", "max_num_domain_check_to_stop"})
      unread(k, fmt::format("it applies to device = \"cpu\" (the serial kernel), and device is \"{}\" (its "
                            "chains reject trials outside the domain without counting them in a row)",
                            s.device));
  if (s.device == "cpu" && s.parallelization_model == "single_chain")
    unread("chains_per_rank",
           "it applies to parallelization_model = \"multi_chain\" and the batched devices, and this run is one "
           "chain (single_chain, device \"cpu\")");
  if (!s.proposal_cov.empty())
    for (const char* k : {"proposal_cor", "proposal_std"})
      unread(k, "proposal_cov is given and is the start proposal covariance (as ParaDRAM's proposalStartCovMat)");
  if (s.delayed_rejection_count == 0)
    unread("delayed_rejection_scale_factors", "delayed_rejection_count is 0 (no delayed-rejection stage)");
  if (!s.random_start_point)
    for (const char* k : {"random_start_point_domain_lower", "random_start_point_domain_upper"})
      unread(k, "random_start_point is false");
  note("restart_file_format", "herd's restart record is always <prefix>_restart/ in herd's own binary form");
  note("input_file_has_priority",
       "it has no effect: herd has no specifications set in code (herd-sample's --set always overrides the file)");
  note("system_info_file_path", "herd writes no system-information cache (the report names the host)");
  note("parallelism_num_thread",
       "herd's single-chain fork-join runs over MPI processes (mpiexec -n N); multi_chain runs chains_per_rank "
       "chains on threads");

  sort_in_input_order(s.notes);
  if (!errs.empty()) {
    sort_in_input_order(errs);
    std::string all;
    for (const auto& e : errs) all += (all.empty() ? "" : "\n") + e;
    throw InputError(all);
  }
  return s;
}

void sort_in_input_order(std::vector<std::string>& messages) {
  // The origin a message begins with: "file:LINE: ..." (group 0, by line), "--set ..." (group
  // 1), anything else (group 2).
  const auto order = [](const std::string& e) -> std::pair<int, long> {
    if (e.rfind("--set", 0) == 0) return {1, 0};
    const std::size_t a = e.find(':');
    const std::size_t b = a == std::string::npos ? a : e.find(':', a + 1);
    if (b != std::string::npos && b > a + 1 && b - a <= 10 &&
        std::all_of(e.begin() + static_cast<std::ptrdiff_t>(a) + 1, e.begin() + static_cast<std::ptrdiff_t>(b),
                    [](char c) { return c >= '0' && c <= '9'; }))
      return {0, std::stol(e.substr(a + 1, b - a - 1))};
    return {2, 0};
  };
  std::stable_sort(messages.begin(), messages.end(),
                   [&](const std::string& x, const std::string& y) { return order(x) < order(y); });
}

namespace {

/// The precision P = C^-1 `[d, d]` row-major of the ball domain's matrix C (domain_ball_cov),
/// through the inverse when every element is finite; infinite radii (the default
/// domain_ball_std) leave a diagonal C whose infinite entries are unbounded directions with a
/// zero row and column in P.
std::vector<double> ball_precision(const SamplerSpecs& s, int ndim) {
  const auto d = static_cast<Eigen::Index>(ndim);
  Eigen::MatrixXd m(d, d);
  bool infinite = false;
  for (Eigen::Index i = 0; i < d; ++i)
    for (Eigen::Index j = 0; j < d; ++j) {
      m(i, j) = s.domain_ball_cov[static_cast<std::size_t>(i * d + j)];
      infinite = infinite || std::isinf(m(i, j));
    }
  Eigen::MatrixXd inv = Eigen::MatrixXd::Zero(d, d);
  if (!infinite) {
    inv = m.inverse();
  } else {
    for (Eigen::Index i = 0; i < d; ++i)
      if (std::isfinite(m(i, i))) inv(i, i) = 1.0 / m(i, i);
  }
  std::vector<double> p(static_cast<std::size_t>(d * d));
  Eigen::Map<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(p.data(), d, d) = inv;
  return p;
}

}  // namespace

std::string spec_name(const io::Settings& st, std::string_view key, std::string_view paradram) {
  if (st.is_set(key)) return st.written(key);
  return std::string(st.namelist() ? paradram : key);
}

std::string key_reference(const SamplerSpecs& s, std::string_view key) {
  if (const auto it = s.key_references.find(key); it != s.key_references.end()) return it->second;
  return fmt::format("key \"{}\"", key);
}

void check_superchains(const SamplerSpecs& s, int ranks) {
  if (s.superchains < 2) return;
  const std::int64_t chains = static_cast<std::int64_t>(std::max(ranks, 1)) * s.chains_per_rank;
  if (chains % s.superchains != 0 || chains / s.superchains < 1 || chains < 2 * s.superchains)
    throw InputError(
        fmt::format("{} is {}, but must divide the {} chains (processes {} x "
                    "chains_per_rank {}) into groups of at least 2",
                    key_reference(s, "superchains"), s.superchains, chains, std::max(ranks, 1), s.chains_per_rank));
}

std::uint32_t start_point_chain(const SamplerSpecs& s, std::uint32_t chain_id, std::int64_t chains) {
  if (s.random_start_point_scope != "superchain" || s.superchains < 2 || chains < s.superchains) return chain_id;
  const auto per = static_cast<std::uint32_t>(chains / s.superchains);
  return chain_id / per * per;
}

RefinementOptions to_refinement_options(const SamplerSpecs& specs) {
  std::string why;
  std::optional<RefinementOptions> ro = parse_refinement_method(specs.sample_refinement_method, why);
  if (!ro)
    throw InputError(fmt::format("sample_refinement_method is \"{}\", but {}", specs.sample_refinement_method, why));
  HERD_REQUIRE(specs.sample_refinement_count >= 0, "sample_refinement_count is {}, but must be >= 0",
               specs.sample_refinement_count);
  ro->max_rounds = static_cast<std::size_t>(specs.sample_refinement_count);
  return *ro;
}

DramOptions to_dram_options(const SamplerSpecs& s, int ndim, std::uint32_t chain_id) {
  const auto d = static_cast<std::size_t>(ndim);
  DramOptions o;
  o.seed = s.random_seed;
  o.chain_id = chain_id;
  o.chain_size = s.chain_size;
  o.proposal = s.proposal_model == "uniform" ? ProposalKind::kUniform : ProposalKind::kNormal;
  o.domain_lower = s.domain_lower;
  o.domain_upper = s.domain_upper;
  if (!o.domain_lower.empty() && o.domain_upper.empty()) o.domain_upper.assign(d, kInf);
  if (!o.domain_upper.empty() && o.domain_lower.empty()) o.domain_lower.assign(d, -kInf);

  // Start point: given, random in a box, the domain's centre, or the origin; element by
  // element, as ParaDRAM sets it (an element a namelist leaves unset is NaN here).
  const auto given = [&](std::size_t i) { return i < s.start_point.size() && !std::isnan(s.start_point[i]); };
  if (s.random_start_point) {
    std::vector<double> lo = s.random_start_point_domain_lower, hi = s.random_start_point_domain_upper;
    if (lo.empty()) lo = s.domain_lower;
    if (hi.empty()) hi = s.domain_upper;
    HERD_REQUIRE(
        lo.size() == d && hi.size() == d,
        "sampler: random_start_point is true, but random_start_point_domain_lower/upper (or domain_lower/upper) "
        "are not given for all {} dimensions",
        d);
    auto c = RngStream(s.random_seed, chain_id, RngPurpose::kStartPoint).at(0);
    o.start_point.resize(d);
    for (std::size_t i = 0; i < d; ++i) {
      // Drawn for every dimension, given or not, so that a dimension's draw does not depend
      // on which others are given.
      const double u = c.uniform();
      if (given(i)) {
        o.start_point[i] = s.start_point[i];
        continue;
      }
      HERD_REQUIRE(std::isfinite(lo[i]) && std::isfinite(hi[i]) && lo[i] < hi[i],
                   "sampler: the random start box [{}, {}] of dimension {} must be finite and non-empty", lo[i], hi[i],
                   i + 1);
      o.start_point[i] = lo[i] + (hi[i] - lo[i]) * u;
    }
  } else {
    o.start_point.assign(d, 0.0);
    for (std::size_t i = 0; i < d; ++i) {
      if (given(i)) {
        o.start_point[i] = s.start_point[i];
        continue;
      }
      const double lo = s.domain_lower.empty() ? -kInf : s.domain_lower[i];
      const double hi = s.domain_upper.empty() ? kInf : s.domain_upper[i];
      if (std::isfinite(lo) && std::isfinite(hi)) o.start_point[i] = 0.5 * (lo + hi);
      else if (std::isfinite(lo) && lo > 0) o.start_point[i] = lo + 1.0;
      else if (std::isfinite(hi) && hi < 0) o.start_point[i] = hi - 1.0;
    }
  }

  // ParaDRAM's start proposal: proposalStartCovMat (given, or from proposalStartCorMat and
  // proposalStartStdVec, default the identity) times scaleFactor^2, as its proposal's
  // constructor does (ParaMonte 1.x, ParaDRAMProposal_mod.inc.f90). Unscaled, the identity
  // of a 100-D target gets no acceptances at all.
  const double sf = DramSampler::parse_scale_factor(s.scale_factor, ndim);
  if (!s.proposal_cov.empty()) {
    o.proposal_start_cov = s.proposal_cov;
    for (double& v : o.proposal_start_cov) v *= sf * sf;
  } else if (!s.proposal_cor.empty()) {
    o.proposal_start_cov = s.proposal_cor;
    for (std::size_t i = 0; i < d; ++i) {
      for (std::size_t j = 0; j < d; ++j) {
        const double si = s.proposal_std.empty() ? 1.0 : s.proposal_std[i];
        const double sj = s.proposal_std.empty() ? 1.0 : s.proposal_std[j];
        o.proposal_start_cov[i * d + j] *= si * sj * sf * sf;
      }
    }
  } else {
    o.proposal_start_std = s.proposal_std.empty() ? std::vector<double>(d, 1.0) : s.proposal_std;
    for (double& v : o.proposal_start_std) v *= sf;
  }
  o.scale_factor = s.scale_factor;
  o.adaptive_update_period = s.adaptive_update_period;
  o.adaptive_update_count = s.adaptive_update_count;
  o.greedy_adaptation_count = s.greedy_adaptation_count;
  o.target_acceptance_rate = s.target_acceptance_rate;
  if (o.target_acceptance_rate.size() == 1) o.target_acceptance_rate.push_back(o.target_acceptance_rate[0]);
  o.delayed_rejection_count = static_cast<int>(s.delayed_rejection_count);
  o.delayed_rejection_scale_factors = s.delayed_rejection_scale_factors;
  o.burnin_adaptation_measure = s.burnin_adaptation_measure;
  if (s.domain == "ball") {
    o.domain_ball_center = s.domain_ball_center;
    o.domain_ball_precision = ball_precision(s, ndim);
  }
  o.domain_check_warn = s.max_num_domain_check_to_warn;
  o.domain_check_stop = s.max_num_domain_check_to_stop;
  return o;
}

}  // namespace herd::mcmc
