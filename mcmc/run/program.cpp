// The program around a run (paradram_run.hpp, `run_sampler_program`): the run record in
// `<prefix>_restart/run.ckpt` (fresh, resume, complete, another input), the input hash,
// extending a complete run (outputStatus = "extend"), and the steps every rank takes from
// reading the input to the exit code. Serves every engine: the serial kernel
// (`run_paradram`) and the batched runs (`SamplerProgramInput::run`).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <Eigen/Dense>

#include "herd/core/error.hpp"
#include "herd/core/faults.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/parallel.hpp"
#include "outputs.hpp"

namespace herd::mcmc {

namespace fs = std::filesystem;
using detail::chain_count;
using detail::restart_folder;

namespace {

constexpr const char* kRunRecordKind = "herd-sample-run";

std::string run_record_path(const SamplerSpecs& s) { return restart_folder(s) + "/run.ckpt"; }

// Settings that do not change what a run computes: left out of the input hash.
const char* const kIgnoredInHash[] = {"overwrite",
                                      "silent_mode",
                                      "progress_report_period",
                                      "checkpoint_period",
                                      "checkpoint_period_seconds",
                                      "mpi_finalize_requested",
                                      "output_status",
                                      "restart_file_format",
                                      "input_file_has_priority",
                                      "system_info_file_path",
                                      "parallelism_num_thread",
                                      "output_splash_mode",
                                      "stall_timeout_seconds",
                                      "max_memory",
                                      "h5_posterior"};

bool ignored_in_hash(const std::string& key) {
  return std::find_if(std::begin(kIgnoredInHash), std::end(kIgnoredInHash), [&](const char* x) { return key == x; }) !=
         std::end(kIgnoredInHash);
}

/// The record's layout name: the batched device, or the serial kernel's parallelization_model.
std::string run_layout(const SamplerSpecs& s) { return s.device != "cpu" ? s.device : s.parallelization_model; }

/// The resolved input as "key\tvalue\n" lines (the settings the input hash covers).
std::string recorded_input(const std::vector<std::pair<std::string, std::string>>& attrs) {
  std::string out;
  for (const auto& [k, v] : attrs)
    if (!ignored_in_hash(k)) out.append(k).append(1, '\t').append(v).append(1, '\n');
  return out;
}

/// Which recorded settings differ from this run's (`recorded_input` form each), e.g.
/// "chain_size (40000 in the record, 40001 now)"; empty when none differs.
std::string input_differences(const std::string& before, const std::string& now) {
  auto parse = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::size_t p = 0;
    while (p < text.size()) {
      std::size_t e = text.find('\n', p);
      if (e == std::string::npos) e = text.size();
      const std::string line = text.substr(p, e - p);
      const std::size_t t = line.find('\t');
      if (t != std::string::npos) kv.emplace_back(line.substr(0, t), line.substr(t + 1));
      p = e + 1;
    }
    return kv;
  };
  const auto a = parse(before), b = parse(now);
  auto find = [](const auto& v, const std::string& k) -> const std::string* {
    for (const auto& [kk, vv] : v)
      if (kk == k) return &vv;
    return nullptr;
  };
  std::string out;
  auto add = [&](const std::string& k, const std::string* x, const std::string* y) {
    out +=
        fmt::format("{}{} ({} in the record, {} now)", out.empty() ? "" : ", ", k, x ? *x : "unset", y ? *y : "unset");
  };
  for (const auto& [k, v] : a) {
    const std::string* y = find(b, k);
    if (y == nullptr || *y != v) add(k, &v, y);
  }
  for (const auto& [k, v] : b)
    if (find(a, k) == nullptr) add(k, nullptr, &v);
  return out;
}

/// The target as the run record keeps it, to name it when a resumed run's target differs:
/// its description and dimension (a C API log function has no input key of its own).
std::string record_target(const SampleTarget& t) { return fmt::format("{} with ndim {}", t.description, t.ndim); }

void write_run_record(const SamplerSpecs& s, std::uint64_t hash, std::int64_t chains, bool complete,
                      const std::vector<std::pair<std::string, std::string>>& attrs, const std::string& target) {
  io::CheckpointWriter w(kRunRecordKind, 1);
  w.add_value("input_hash", hash);
  w.add_value("random_seed", s.random_seed);
  w.add_value("chains", chains);
  w.add_string("parallelization_model", run_layout(s));
  w.add_string("input", recorded_input(attrs));
  w.add_string("target", target);
  w.add_value("complete", static_cast<std::uint8_t>(complete ? 1 : 0));
  w.commit(run_record_path(s));
}

/// Deletes the restart folder of an earlier run of this prefix before a fresh start, but
/// only what herd made: a folder holding its run record (`run.ckpt`), or an empty one (a
/// run killed between making the folder and writing the record). Anything else of that
/// name (a user's folder or file, a link) is refused, with or without overwrite.
/// @throws herd::InputError naming the folder.
void remove_restart_folder(const SamplerSpecs& s) {
  const std::string dir = restart_folder(s);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return;
  const bool ours = fs::is_directory(st) && (fs::is_empty(dir, ec) || fs::exists(run_record_path(s), ec));
  if (!ours)
    throw InputError(
        fmt::format("\"{}\" exists but is not a restart folder of herd (it has no run record run.ckpt), "
                    "so it is not deleted: move it away or choose another output_prefix",
                    dir));
  // The run record goes last: a run killed while deleting leaves a folder that is still
  // recognised as herd's (and is deleted by the next fresh start).
  const std::string record = run_record_path(s);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().string() != record) fs::remove_all(e.path(), ec);
  if (!ec) fs::remove(record, ec);
  if (!ec) fs::remove(dir, ec);
  if (ec) throw IoError(fmt::format("cannot remove the old restart folder \"{}\": {}", dir, ec.message()));
}

/// Whether `name` is a per-chain output file of a multi_chain run of the prefix whose file
/// name is `base`: `<base>_process_<k>_chain.txt|.bin` or `<base>_process_<k>_sample.txt`
/// (k a positive decimal number without leading zeros).
bool is_process_output(const std::string& name, const std::string& base) {
  const std::string head = base + "_process_";
  if (!name.starts_with(head)) return false;
  std::size_t i = head.size();
  const std::size_t digits = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == digits || name[digits] == '0') return false;
  const std::string tail = name.substr(i);
  return tail == "_chain.txt" || tail == "_chain.bin" || tail == "_sample.txt";
}

/// Removes the outputs that an earlier run of this prefix left, before an overwrite = true
/// run samples: this run's `output_paths` and every other name herd-sample writes for the
/// prefix in any layout (`<prefix>_chain.txt|.bin`, `_sample.txt`, `_progress.txt`,
/// `_report.txt`, `_report.html`, `.h5`, and multi_chain's `<prefix>_process_<k>_...`
/// files), so that an interrupted or failed run never leaves the earlier run's `.h5` and
/// reports (complete-looking, but stale) next to its own partial chain. Regular files only:
/// `prepare_outputs` refused links, and anything else of those names is left alone. Returns
/// how many files were removed. @throws herd::IoError naming a file that cannot be removed.
std::size_t remove_earlier_outputs(const SamplerSpecs& s, int ranks) {
  const fs::path prefix(s.output_prefix);
  const fs::path folder = prefix.parent_path().empty() ? fs::path(".") : prefix.parent_path();
  const std::string base = prefix.filename().string();
  std::vector<std::string> names;
  for (const auto& path : output_paths(s, ranks)) names.push_back(fs::path(path).filename().string());
  for (const char* suffix :
       {"_chain.txt", "_chain.bin", "_sample.txt", "_progress.txt", "_report.txt", "_report.html", ".h5"})
    names.push_back(base + suffix);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (is_process_output(e.path().filename().string(), base)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::size_t removed = 0;
  for (const auto& name : names) {
    const fs::path path = folder / name;
    if (!fs::is_regular_file(fs::symlink_status(path, ec))) continue;
    if (!fs::remove(path, ec) && !ec) continue;  // gone meanwhile
    if (ec)
      throw IoError(
          fmt::format("overwrite = true: cannot remove the earlier output \"{}\": {}", path.string(), ec.message()));
    ++removed;
  }
  return removed;
}

}  // namespace

void trim_restart_folder(const std::string& output_prefix) {
  const std::string dir = output_prefix + "_restart";
  const std::string record = dir + "/run.ckpt";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::is_directory(st) || !fs::exists(record, ec)) return;  // not herd's record: untouched
  std::vector<fs::path> gone;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().string() != record) gone.push_back(e.path());
  for (const auto& p : gone) {
    fs::remove_all(p, ec);
    if (ec)
      throw IoError(
          fmt::format("cannot remove \"{}\" of the complete run's restart record: {}", p.string(), ec.message()));
  }
}

namespace {

enum class RestartStatus { kFresh = 0, kResume = 1, kComplete = 2 };

/// Whether the restart folder of `s` holds a checkpoint that a resumed run continues from:
/// a chain's `chain_<id>.ckpt` (serial, fork-join, multi_chain) or `batched.ckpt` (batched
/// devices). The run record `run.ckpt` is written before the first checkpoint, so a run
/// killed before that leaves a record without one (its rerun starts from the first
/// proposal); temporaries (`*.ckpt.tmp.*`) do not count.
bool holds_checkpoint(const SamplerSpecs& s) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(restart_folder(s), ec)) {
    const std::string name = e.path().filename().string();
    const bool chain_ckpt = name.starts_with("chain_") && name.ends_with(".ckpt");
    if ((chain_ckpt || name == "batched.ckpt") && e.is_regular_file(ec)) return true;
  }
  return false;
}

/// What the restart record of this output prefix says; the seed of the recorded run.
/// @throws herd::InputError when the record belongs to another input.
/// `legacy` (0: none) is the input's hash as an earlier herd computed it (batched devices:
/// with `chains_per_rank`); a record of it is this input's too.
RestartStatus check_restart(const SamplerSpecs& s, std::uint64_t hash, std::uint64_t legacy, std::int64_t chains,
                            std::uint64_t& seed, const std::vector<std::pair<std::string, std::string>>& attrs,
                            const std::string& target) {
  const std::string path = run_record_path(s);
  if (s.overwrite || !fs::exists(path)) return RestartStatus::kFresh;
  io::CheckpointReader r(path);
  r.expect_kind(kRunRecordKind, 1);
  const bool complete = r.value<std::uint8_t>("complete") != 0;
  const auto recorded = r.value<std::uint64_t>("input_hash");
  const bool same_input = recorded == hash || (legacy != 0 && recorded == legacy);
  // A finished run of another input: its outputs are what the overwrite check protects.
  if (!same_input && complete) return RestartStatus::kFresh;
  if (!same_input) {
    std::string what = "the record does not store its input, so the changed settings are not known";
    if (r.has("input")) {
      // A batched run resumes in any layout of its chains: chains_per_rank is not a change.
      auto settings = [&s](std::string text) {
        const std::size_t at = s.device != "cpu" ? text.find("chains_per_rank\t") : std::string::npos;
        if (at != std::string::npos && (at == 0 || text[at - 1] == '\n')) text.erase(at, text.find('\n', at) + 1 - at);
        return text;
      };
      const std::string diff = input_differences(settings(r.string("input")), settings(recorded_input(attrs)));
      if (!diff.empty()) what = "changed: " + diff;
      else if (r.has("target") && r.string("target") != target)
        what = fmt::format("the settings are the same, but the target is not: {} in the record, {} now",
                           r.string("target"), target);
      else what = "the settings are the same, so the target (its file, data or library) differs";
    }
    throw InputError(
        fmt::format("the restart record \"{}\" belongs to a run with another input ({}); set {} = "
                    "true to start afresh (this deletes \"{}\"), restore the original input, or choose "
                    "another {}",
                    path, what, s.overwrite_name, restart_folder(s), s.output_prefix_name));
  }
  const auto rc = r.value<std::int64_t>("chains");
  const std::string model = r.string("parallelization_model");
  if (rc != chains || model != run_layout(s))
    throw InputError(
        fmt::format("the restart record \"{}\" is of a {} run with {} chain(s), but this run is {} with {} "
                    "chain(s) (ranks x chains_per_rank); resume with {}, or set {} = true to start afresh",
                    path, model, rc, run_layout(s), chains,
                    model == run_layout(s) && s.device != "cpu"
                        ? fmt::format("{} chains in all (processes x chains_per_rank = {}, in any layout)", rc, rc)
                        : std::string("the same number of processes"),
                    s.overwrite_name));
  seed = r.value<std::uint64_t>("random_seed");
  return complete ? RestartStatus::kComplete : RestartStatus::kResume;
}

/// Whether the resolved input runs a batched device (`device` other than "cpu").
bool batched_input(const SampleRunOptions& options) {
  for (const auto& [k, v] : options.input_attributes)
    if (k == "device") return v != "\"cpu\"" && v != "cpu";
  return false;
}

/// `sampler_input_hash`, with `chains_per_rank` left out when `layout_free`.
std::uint64_t input_hash_of(const SampleRunOptions& options, const SampleTarget& target, bool layout_free) {
  // FNV-1a over the resolved (key, value) pairs that change what a run computes.
  std::uint64_t h = 1469598103934665603ULL;
  auto add = [&h](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
    h ^= 0xff;
    h *= 1099511628211ULL;
  };
  for (const auto& [k, v] : options.input_attributes) {
    if (ignored_in_hash(k) || (layout_free && k == "chains_per_rank")) continue;
    add(k);
    add(v);
  }
  add(target.description);
  add(std::to_string(target.ndim));
  return h;
}

}  // namespace

std::uint64_t sampler_input_hash(const SampleRunOptions& options, const SampleTarget& target) {
  return input_hash_of(options, target, batched_input(options));
}

namespace {

/// A run of `prefix` is complete when its `.h5` exists and its restart record, if any,
/// says so.
bool run_complete(const std::string& prefix) {
  if (!fs::exists(prefix + ".h5")) return false;
  const std::string rec = prefix + "_restart/run.ckpt";
  if (!fs::exists(rec)) return true;
  io::CheckpointReader r(rec);
  return r.value<std::uint8_t>("complete") != 0;
}

/// The last state and the post-burn-in sample covariance `[d, d]` of the compact chain in
/// `<last>.h5` (the whole chain when fewer than d + 2 draws follow the burn-in).
struct ExtensionStart {
  std::vector<double> last_state;
  Eigen::MatrixXd cov;
};

ExtensionStart extension_start(const std::string& last, std::size_t d) {
  io::H5File f = io::H5File::open(last + ".h5");
  io::H5Group cc = f.open_group("chain_compact");
  const auto state = cc.read<double>("state");
  const auto weight = cc.read<std::int64_t>("weight");
  const std::size_t n = weight.size();
  if (d == 0 || state.size() != n * d || n == 0)
    throw InputError(
        fmt::format("outputStatus = 'extend': \"{}.h5\" holds a chain of {} values for {} variables, "
                    "which does not fit this run's dimension",
                    last, state.size(), d));
  auto burnin = static_cast<std::size_t>(std::max<std::int64_t>(0, cc.attribute<std::int64_t>("burnin")));
  std::int64_t total = 0;
  for (std::size_t i = burnin; i < n; ++i) total += weight[i];
  if (total < static_cast<std::int64_t>(d) + 2) burnin = 0;  // too few draws after the burn-in: the whole chain
  const auto di = static_cast<Eigen::Index>(d);
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(di);
  double wsum = 0;
  for (std::size_t i = burnin; i < n; ++i) {
    mean += static_cast<double>(weight[i]) * Eigen::Map<const Eigen::VectorXd>(&state[i * d], di);
    wsum += static_cast<double>(weight[i]);
  }
  mean /= wsum;
  Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(di, di);
  for (std::size_t i = burnin; i < n; ++i) {
    const Eigen::VectorXd z = Eigen::Map<const Eigen::VectorXd>(&state[i * d], di) - mean;
    cov += static_cast<double>(weight[i]) * z * z.transpose();
  }
  cov /= std::max(1.0, wsum - 1.0);
  return {std::vector<double>(state.end() - static_cast<std::ptrdiff_t>(d), state.end()), std::move(cov)};
}

/// Sets (or adds) the input attribute `key` to the TOML array of `v`.
void set_input_attribute(SampleRunOptions& options, const std::string& key, const std::vector<double>& v) {
  std::string text = "[";
  for (std::size_t i = 0; i < v.size(); ++i) text += fmt::format("{}{:.17g}", i ? ", " : "", v[i]);
  text += "]";
  for (auto& [kk, vv] : options.input_attributes)
    if (kk == key) {
      vv = text;
      return;
    }
  options.input_attributes.emplace_back(key, text);
}

/// The seed of extension `k` (`<prefix>_run<k>`, k >= 2) of a run with the given `seed`:
/// SplitMix64 of both, in [0, 2^63 - 1] as every seed.
std::uint64_t extension_seed(std::uint64_t seed, int k) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(k);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (z ^ (z >> 31)) >> 1;
}

/// ParaMonte 2's outputStatus = "extend" on a complete run: the run continues in a new set of
/// outputs `<prefix>_run<k>` (k = 2, 3, ...: the first that is not complete; an interrupted
/// one resumes), starting from the last state of the latest complete run and with its
/// post-burn-in covariance as the start proposal covariance (times scale_factor^2, as ParaDRAM
/// initialises an extension from the earlier sample). Every rank reads the same files.
/// @throws InputError for a complete multi-chain or batched run (not extended).
void extend_complete_run(SamplerProgramInput& in) {
  SamplerSpecs& s = in.specs;
  const std::string base = s.output_prefix;
  if (!run_complete(base)) return;  // fresh, or interrupted: resumed as always
  if (s.parallelization_model != "single_chain" || s.device != "cpu")
    throw InputError(
        fmt::format("outputStatus = 'extend': the run of \"{}\" is complete, but only single-chain runs of "
                    "the serial kernel are extended; use outputStatus = 'retry' to run it again",
                    base));
  std::string last = base;
  int k = 2;
  while (run_complete(fmt::format("{}_run{}", base, k))) last = fmt::format("{}_run{}", base, k++);
  const std::string next = fmt::format("{}_run{}", base, k);
  const std::size_t d = s.variable_names.size();
  ExtensionStart start = extension_start(last, d);
  s.output_prefix = next;
  s.start_point = std::move(start.last_state);
  s.random_start_point = false;
  std::string how = "its last state";
  if (Eigen::LLT<Eigen::MatrixXd>(start.cov).info() == Eigen::Success) {
    s.proposal_cov.assign(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < d; ++j)
        s.proposal_cov[i * d + j] = start.cov(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
    s.proposal_cor.clear();
    s.proposal_std.clear();
    how += " and its sample covariance as the start proposal covariance";
  }
  // A given seed would draw the extension's proposals and uniforms from the streams the runs
  // before it drew (proposal k of each alike: an extension's draws followed the earlier run's,
  // correlation 0.7): each extension k takes its own seed, derived from the given one and k,
  // the same again when an interrupted extension resumes. A seed drawn from the system is new.
  std::string seeded;
  if (in.seed_given) {
    s.random_seed = extension_seed(s.random_seed, k);
    seeded = fmt::format(", with the seed {} (derived from random_seed and the run number {})", s.random_seed, k);
    for (auto& [kk, vv] : in.options.input_attributes)
      if (kk == "random_seed") vv = std::to_string(s.random_seed);
  }
  set_input_attribute(in.options, "start_point", s.start_point);
  if (!s.proposal_cov.empty()) set_input_attribute(in.options, "proposal_cov", s.proposal_cov);
  for (auto& [kk, vv] : in.options.input_attributes)
    if (kk == "output_prefix") vv = fmt::format("\"{}\"", next);
  s.notes.push_back(
      fmt::format("outputStatus = 'extend': the run of \"{}\" is complete; it continues in \"{}\" from {}{}", last,
                  next, how, seeded));
  in.options.resolved_input +=
      fmt::format("# outputStatus = 'extend': continues \"{}\" (output_prefix \"{}\"){}\n", last, next, seeded);
}

/// The state of one `run_sampler_program` call on one rank, shared by its steps. Members
/// are destroyed in reverse order: the watchdog, then the prefix lock, then the input.
struct ProgramRun {
  ProgramRun(Communicator& c, const std::string& name) : comm(c), program(name), rank(c.rank()), size(c.size()) {}

  Communicator& comm;
  const std::string& program;
  const int rank, size;
  SamplerProgramInput in;
  std::string err;
  std::int64_t chains = 0;     ///< the record's chain count (batched: every rank's chains)
  bool custom = false;         ///< `in.run` runs instead of run_paradram (a batched run)
  bool recorded = false;       ///< a restart record is read and written
  bool checkpointing = false;  ///< recorded, with checkpoint settings
  /// The lock on <prefix>.lock for the whole run: a second run of the same prefix (which
  /// would share the restart record) is refused. Rank 0 takes it; with several ranks it is
  /// shared and every rank joins it, so that it stays held while any rank of this run lives.
  std::unique_ptr<OutputPrefixLock> prefix_lock;
  fs::path made_parent;  ///< rank 0: the output folder this run made (removed again on refusal)
  RestartStatus status = RestartStatus::kFresh;
  /// Rank 0, when resuming: the record holds a checkpoint (`holds_checkpoint`); without one
  /// the run starts from its first proposal with the recorded seed.
  bool has_checkpoint = false;
  /// Rank 0: output files of an earlier run removed by an overwrite = true fresh start.
  std::size_t removed_outputs = 0;
  std::unique_ptr<StallWatchdog> watchdog;

  /// Prints `msg` as "<program>: error: [rank R: ]<line>" lines on stderr.
  void error(const std::string& msg) const {
    const std::string who = size > 1 ? fmt::format("rank {}: ", rank) : std::string();
    // Several problems of one input come as several lines: each is one error line.
    std::size_t start = 0;
    while (start <= msg.size()) {
      const std::size_t nl = msg.find('\n', start);
      const std::string line = msg.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!line.empty()) std::fprintf(stderr, "%s: error: %s%s\n", program.c_str(), who.c_str(), line.c_str());
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    std::fflush(stderr);
  }

  /// Releases the prefix lock on every rank, rank 0 last (collective), so that rank 0 finds
  /// itself the last holder and removes the lock file.
  void release_lock() {
    if (size > 1) {
      if (rank != 0) prefix_lock.reset();
      comm.barrier();
    }
    prefix_lock.reset();
  }

  /// A refusal on rank 0 (or on any rank; collective): nothing of this run is left behind;
  /// returns 2.
  int refuse() {
    release_lock();
    std::error_code ec;
    if (!made_parent.empty()) fs::remove(made_parent, ec);  // only when still empty: nothing earlier is touched
    return 2;
  }

  /// The lowest rank whose `local` error is not empty prints it; true when any rank failed.
  bool any_failed(const std::string& local) {
    const int first_bad =
        size > 1 ? comm.allreduce_value<int>(local.empty() ? size : rank, ReduceOp::kMin) : (local.empty() ? size : 0);
    if (first_bad < size && rank == first_bad) error(local);
    return first_bad < size;
  }
};

/// 1. Every rank reads the input; an error on any rank ends every rank (false). Then 2.,
/// the same input on every rank.
bool read_input(ProgramRun& p, const std::function<SamplerProgramInput()>& resolve) {
  try {
    check_launch(p.size);
    p.in = resolve();
    check_superchains(p.in.specs, p.size);
    if (p.in.specs.output_status == "extend") extend_complete_run(p.in);
  } catch (const std::exception& e) {
    p.err = error_text(e, "reading the input");
  }
  // One line, not one per rank: the lowest rank with an error prints it (usually rank 0,
  // and every rank reads the same input).
  if (p.any_failed(p.err)) return false;
  p.in.options.input_hash = sampler_input_hash(p.in.options, p.in.target);
  p.in.options.legacy_input_hash = batched_input(p.in.options) ? input_hash_of(p.in.options, p.in.target, false) : 0;
  try {
    check_same_input(p.comm, p.in.options.input_hash, "resolved input");
  } catch (const std::exception& e) {
    if (p.rank == 0) p.error(e.what());
    return false;
  }
  const SamplerSpecs& specs = p.in.specs;
  // Batched devices: every rank's chains (the model's chain count is the serial kernel's).
  p.chains =
      specs.device != "cpu" ? static_cast<std::int64_t>(p.size) * specs.chains_per_rank : chain_count(specs, p.size);
  p.custom = static_cast<bool>(p.in.run);
  p.recorded = !p.custom || p.in.run_restartable;
  p.checkpointing = p.recorded && (specs.checkpoint_period > 0 || specs.checkpoint_period_seconds > 0);
  return true;
}

/// 3. Rank 0: the output folder, the prefix lock, the restart record and the output files;
/// the decision and the seed are broadcast. False on a refusal (printed).
bool settle_restart(ProgramRun& p) {
  SamplerSpecs& specs = p.in.specs;
  const SampleRunOptions& opts = p.in.options;
  std::int64_t dec[3] = {0, 0, static_cast<std::int64_t>(specs.random_seed)};
  if (p.rank == 0) {
    const fs::path parent = fs::path(specs.output_prefix).parent_path();
    try {
      try {
        std::error_code ec;
        if (!parent.empty() && !fs::exists(parent, ec)) {
          fs::create_directories(parent, ec);
          if (ec)
            throw IoError(fmt::format("cannot create the output folder \"{}\": {}", parent.string(), ec.message()));
          p.made_parent = parent;
        }
        p.prefix_lock = std::make_unique<OutputPrefixLock>(specs.output_prefix, p.program);
      } catch (const IoError& e) {
        // The folder or the lock file cannot be made (no such folder, no permission, a file
        // in the way): name the key that chose the place.
        if (specs.output_prefix_origin.empty()) throw;
        throw IoError(fmt::format("{}: {}", specs.output_prefix_origin, e.what()));
      }
      if (p.size > 1) p.prefix_lock->share();  // the other ranks join it below
      std::uint64_t seed = specs.random_seed;
      const RestartStatus st = !p.recorded ? RestartStatus::kFresh
                                           : check_restart(specs, opts.input_hash, opts.legacy_input_hash, p.chains,
                                                           seed, opts.input_attributes, record_target(p.in.target));
      // An interrupted run's record with checkpoints now off: the run would neither resume
      // from it nor finish it, and the next run would resume it over this one's outputs.
      if (st == RestartStatus::kResume && !p.checkpointing)
        throw InputError(fmt::format(
            "{}: checkpoints are off (checkpoint_period = checkpoint_period_seconds = 0), but {} holds the restart "
            "record of an interrupted run of this input: resume it with checkpoints on (remove the setting), or set "
            "{} = true to start afresh",
            specs.checkpoints_off_origin.empty() ? std::string("checkpoint_period_seconds = 0")
                                                 : specs.checkpoints_off_origin,
            restart_folder(specs), specs.overwrite_name));
      if (st != RestartStatus::kFresh && !p.in.seed_given) specs.random_seed = seed;
      p.has_checkpoint = st == RestartStatus::kResume && holds_checkpoint(specs);
      dec[1] = static_cast<std::int64_t>(st);
      dec[2] = static_cast<std::int64_t>(specs.random_seed);
      prepare_outputs(specs, p.size, st != RestartStatus::kFresh);
    } catch (const std::exception& e) {
      p.err = error_text(e, "preparing the outputs");
      dec[0] = 1;
    }
  }
  p.comm.broadcast(dec, 3, DataType::kInt64, 0);
  if (dec[0] != 0) {
    if (p.rank == 0) p.error(p.err);
    return false;
  }
  specs.random_seed = static_cast<std::uint64_t>(dec[2]);
  p.status = static_cast<RestartStatus>(dec[1]);
  // Every rank holds the lock too: a rank that lives on after its job was killed (mpiexec
  // alone) keeps a new run of the prefix from starting while it may still write.
  std::string join_err;
  if (p.rank != 0) {
    try {
      p.prefix_lock = OutputPrefixLock::join(specs.output_prefix, p.program);
    } catch (const std::exception& e) {
      join_err = error_text(e, "preparing the outputs");
    }
  }
  return p.size == 1 || !p.any_failed(join_err);
}

/// 3b. Code the input names (a plugin library: its constructors run when it is loaded) is
/// loaded only now, under the lock and after the output checks, on every rank; an exit()
/// from it is reported instead of ending the run quietly. False on a failure (printed).
bool load_target(ProgramRun& p) {
  if (!p.in.load_target || p.status == RestartStatus::kComplete) return true;
  const ExitGuard guard(p.comm, p.program, "the log density's library (target.library)");
  std::string load_err;
  try {
    p.in.load_target();
  } catch (const std::exception& e) {
    load_err = e.what();
  }
  return !p.any_failed(load_err);
}

/// 3c. Rank 0, on a fresh start, once the input has passed every check: the restart folder
/// of an earlier run goes (only what herd made), with overwrite = true the earlier run's
/// outputs go too (`remove_earlier_outputs`), and a new run record is written. False on a
/// failure (printed).
bool start_fresh(ProgramRun& p) {
  const SamplerSpecs& specs = p.in.specs;
  const SampleRunOptions& opts = p.in.options;
  std::int64_t fresh_failed = 0;
  if (p.rank == 0 && p.status == RestartStatus::kFresh && (p.recorded || specs.overwrite)) {
    try {
      if (p.recorded) remove_restart_folder(specs);
      if (specs.overwrite) p.removed_outputs = remove_earlier_outputs(specs, p.size);
      if (p.recorded && p.checkpointing) {
        std::error_code ec;
        fs::create_directories(restart_folder(specs), ec);
        if (ec)
          throw IoError(
              fmt::format("cannot create the restart folder \"{}\": {}", restart_folder(specs), ec.message()));
        write_run_record(specs, opts.input_hash, p.chains, false, opts.input_attributes, record_target(p.in.target));
      }
    } catch (const std::exception& e) {
      p.err = e.what();
      fresh_failed = 1;
    }
  }
  if (p.size > 1) p.comm.broadcast(&fresh_failed, 1, DataType::kInt64, 0);
  if (fresh_failed != 0 && p.rank == 0) p.error(p.err);
  return fresh_failed == 0;
}

/// A complete run: its record is trimmed (a run killed between recording its completion
/// and trimming its record) and the terminal says so.
void report_complete(const ProgramRun& p, bool quiet) {
  const SamplerSpecs& specs = p.in.specs;
  if (p.rank == 0) {
    try {
      trim_restart_folder(specs.output_prefix);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: warning: %s\n", p.program.c_str(), e.what());
    }
  }
  if (!quiet)
    std::printf("%s: the run recorded in %s is complete; its outputs are %s.* (set %s = true to run it again)\n",
                p.program.c_str(), restart_folder(specs).c_str(), specs.output_prefix.c_str(),
                specs.overwrite_name.c_str());
}

/// The notes, the banner and whether the run resumes (from a checkpoint, or from the first
/// proposal of a record that holds none yet), on rank 0's terminal.
void print_start(const ProgramRun& p) {
  const SamplerSpecs& specs = p.in.specs;
  for (const auto& n : specs.notes) std::printf("%s: note: %s\n", p.program.c_str(), n.c_str());
  if (p.in.banner) std::printf("%s\n", p.in.banner(p.in).c_str());
  if (p.removed_outputs > 0)
    std::printf("%s: %s = true: removed the %zu output file(s) of an earlier run of %s\n", p.program.c_str(),
                specs.overwrite_name.c_str(), p.removed_outputs, specs.output_prefix.c_str());
  if (p.status == RestartStatus::kResume && p.has_checkpoint)
    std::printf("%s: resuming from the restart record in %s\n", p.program.c_str(), restart_folder(specs).c_str());
  else if (p.status == RestartStatus::kResume)
    std::printf(
        "%s: the restart record in %s holds no checkpoint yet (the earlier run stopped before its first), so "
        "the run starts from the first proposal with the recorded seed %llu\n",
        p.program.c_str(), restart_folder(specs).c_str(), static_cast<unsigned long long>(specs.random_seed));
  std::fflush(stdout);
}

/// The optional watchdog: a log-density call that never returns, or a rank that stopped,
/// ends the job naming the rank (heartbeat files in the restart folder; see StallWatchdog).
void start_watchdog(ProgramRun& p) {
  const SamplerSpecs& specs = p.in.specs;
  if (specs.stall_timeout_seconds <= 0) return;
  p.watchdog = std::make_unique<StallWatchdog>(p.comm, specs.stall_timeout_seconds, p.program, "the log density",
                                               p.checkpointing ? restart_folder(specs) + "/heartbeat." : std::string());
  StallWatchdog* w = p.watchdog.get();
  p.in.target.log_density = [f = p.in.target.log_density, w](const double* x, int n) {
    struct Leave {
      StallWatchdog* w;
      ~Leave() { w->leave(); }
    };
    w->enter();
    const Leave leave{w};
    return f(x, n);
  };
}

/// 4. The run; an error on one rank ends every rank (the checkpoints stay intact). False
/// when it failed (printed).
bool run(ProgramRun& p) {
  SamplerSpecs& specs = p.in.specs;
  SampleRunOptions& opts = p.in.options;
  try {
    // A log density that calls exit() ends the job with a message and exit code 1.
    const ExitGuard guard(p.comm, p.program, "the log density");
    abort_all_on_error(p.comm, [&] {
      if (p.custom) p.in.run(p.in, p.comm);
      else run_paradram(specs, p.in.target, opts, p.comm);
      if (p.rank == 0 && p.checkpointing)
        write_run_record(specs, opts.input_hash, p.chains, true, opts.input_attributes, record_target(p.in.target));
    });
  } catch (const std::exception& e) {
    p.error(error_text(e, "sampling"));
    return false;
  }
  return true;
}

/// 5. The run is complete (its record says so): what only an interrupted run needs goes
/// (chain records, checkpoints, heartbeats); run.ckpt stays, so that a rerun reports the
/// run as complete and outputStatus = "extend" continues it (from the .h5).
void finish(ProgramRun& p) {
  p.watchdog.reset();  // removes this rank's heartbeat file
  if (!p.checkpointing) return;
  if (p.size > 1) p.comm.barrier();  // every rank's chain files are closed, its watchdog stopped
  if (p.rank == 0) {
    try {
      trim_restart_folder(p.in.specs.output_prefix);
    } catch (const std::exception& e) {
      // The outputs are complete; the leftover record only takes disk space.
      std::fprintf(stderr, "%s: warning: %s\n", p.program.c_str(), e.what());
    }
  }
}

}  // namespace

int run_sampler_program(Communicator& comm, const std::function<SamplerProgramInput()>& resolve,
                        const std::string& program) {
  ProgramRun p(comm, program);
  if (!read_input(p, resolve)) return 2;
  if (!settle_restart(p)) return p.refuse();
  if (!load_target(p)) return p.refuse();
  if (!start_fresh(p)) return p.refuse();
  const bool quiet = p.in.options.quiet || p.in.specs.silent_mode || p.rank != 0;
  if (p.status == RestartStatus::kComplete) {
    report_complete(p, quiet);
    p.release_lock();
    return 0;
  }
  if (!quiet) print_start(p);
  p.in.resuming = p.status == RestartStatus::kResume;
  start_watchdog(p);
  if (!run(p)) return 1;
  finish(p);
  p.release_lock();
  return 0;
}

}  // namespace herd::mcmc
