// The bad-input catalogue: inputs and faults that herd-sample, herd-rl and herd-diagnose
// must refuse with one clear line and a non-zero exit code, never a crash, never a bare
// `std::bad_alloc`, never touching earlier outputs (bad input); a fault during an
// overwrite = true run leaves no partial output. One row per case in `catalogue()`;
// extend it by adding rows (docs/io.md "Guarantees" lists what the rows check).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <hdf5.h>
#include <catch2/catch.hpp>

#include "app_runner.hpp"

namespace fs = std::filesystem;

namespace {

/// One row of the catalogue.
struct BadInput {
  std::string name;     ///< what the row checks (shown when it fails)
  std::string program;  ///< "herd-sample", "herd-rl" or "herd-diagnose"
  /// Files written into the row's fresh work folder first: {relative path, text}. Files
  /// listed in `untouched` must still hold exactly this text afterwards.
  std::vector<std::pair<std::string, std::string>> files;
  std::string args;                ///< command line after the program ("@SHIM@" becomes the full-disk shim's path)
  int rc;                          ///< expected exit code (2 bad input, 1 a failed run)
  std::vector<std::string> words;  ///< each must appear in the error line
  std::vector<std::string> untouched = {};  ///< files (from `files`) whose bytes must not change
  std::string env = {};                     ///< environment assignments before the command ("@SHIM@" as in args)
  std::function<void(const fs::path&)> setup = {};  ///< extra preparation of the work folder
  std::string shell = {};  ///< shell commands before the program's, e.g. limits ("ulimit -f 100;")
  /// Files (from `files`) that must be gone afterwards: the outputs of an earlier run that an
  /// overwrite = true run removes once its input passed every check (a fault while it runs
  /// leaves no partial file in their place).
  std::vector<std::string> gone = {};
};

const std::string kTarget = "[target]\nbuiltin = \"normal\"\nndim = 3\n";

/// herd-sample inputs: a batched and a serial run of a 3-D normal; `extra` adds top-level
/// lines (before the [target] table).
std::string batched(const std::string& extra = "") {
  return "device = \"cpu_batched\"\nwarmup = 0\noutput_prefix = \"out/run\"\n" + extra + kTarget;
}
std::string serial(const std::string& extra = "") {
  return "chain_size = 2000\nrandom_seed = 1\noutput_prefix = \"out/run\"\n" + extra + kTarget;
}
const std::string kBatched = batched(), kSerial = serial();

const std::string kOld = "results of an earlier run\n";

/// A TOML text nested `n` levels deep through dotted keys, arrays or inline tables.
std::string deep(const std::string& kind, int n) {
  std::string t;
  if (kind == "dotted") {
    t = "a";
    for (int i = 0; i < n; ++i) t += ".a";
    return t + " = 1\n";
  }
  if (kind == "array")
    return "x = " + std::string(static_cast<std::size_t>(n), '[') + "1" +
           std::string(static_cast<std::size_t>(n), ']') + "\n";
  t = "x = ";
  for (int i = 0; i < n; ++i) t += "{ a = ";
  t += "1";
  for (int i = 0; i < n; ++i) t += " }";
  return t + "\n";
}

/// An HDF5 file declaring a [1000, 10^9] dataset of doubles (8 TB) that holds no data.
void declare_huge_dataset(const fs::path& dir) {
  const hid_t f = H5Fcreate((dir / "huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {1000, 1000000000}, chunk[2] = {1, 1024};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 2, chunk);
  const hid_t d = H5Dcreate2(f, "x", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

/// A setup that writes run.toml (`extra` lines, a plugin target that SIGKILLs its process
/// at call `kill_after` + 1, checkpoints every 1000 proposals), runs herd-sample until the
/// kill, then changes one byte in the middle of the restart record's file `record`.
/// Setup: a run of the kill plugin (2-D normal, a checkpoint every 1000 proposals) SIGKILLed at
/// its `kill_after`-th evaluation, leaving out/r_restart; `extra` adds top-level lines.
void interrupted_run(const fs::path& dir, const std::string& extra, int kill_after) {
  std::ofstream(dir / "run.toml") << extra
                                  << "random_seed = 4\noutput_prefix = \"out/r\"\ncheckpoint_period = 1000\n"
                                     "[target]\nlibrary = \""
                                  << HERD_TEST_KILL_PLUGIN << "\"\nndim = 2\n";
  const auto killed = herd::testing::run_shell(
      dir, "HERD_TEST_KILL_AFTER=" + std::to_string(kill_after) + " '" + HERD_SAMPLE_EXE + "' run.toml --quiet");
  REQUIRE(killed.rc != 0);
}

/// Setup: `interrupted_run`, then one byte of the restart record's file `record` flipped.
std::function<void(const fs::path&)> corrupt_restart_record(const std::string& extra, int kill_after,
                                                            const std::string& record) {
  return [=](const fs::path& dir) {
    interrupted_run(dir, extra, kill_after);
    std::string bytes = herd::testing::slurp(dir / record);
    REQUIRE(bytes.size() > 100);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x04);
    std::ofstream(dir / record, std::ios::binary | std::ios::trunc) << bytes;
  };
}

/// A ParaDRAM chain file (herd's columns, one variable x) of `rows` rows of weight 1, except
/// row `heavy` (0-based), of weight `weight`.
std::string weighted_chain(int rows, int heavy, long long weight) {
  std::string t =
      "ProcessID,DelayedRejectionStage,MeanAcceptanceRate,AdaptationMeasure,BurninLocation,SampleWeight,"
      "SampleLogFunc,x\n";
  for (int i = 0; i < rows; ++i)
    t += "1,0,0.25,0,1," + std::to_string(i == heavy ? weight : 1) + ",-1.5," + std::to_string(0.01 * i) + "\n";
  return t;
}

std::vector<BadInput> catalogue() {
  const std::string names_overwrite = serial("overwrite = true\n");
  return {
      // --- sizes and memory -----------------------------------------------------------------
      {"batched chains x draws x ndim overflows (heap overflow before)",
       "herd-sample",
       {{"run.toml", kBatched}},
       "run.toml --set chains_per_rank=4 --set chain_size=4611686018427387904",
       2,
       {"memory", "chain_size"}},
      {"serial chain_size of 2^62 needs more memory than the machine has",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set chain_size=4611686018427387904",
       2,
       {"memory", "chain_size 4611686018427387904"}},
      {"a malformed HERD_DIAGNOSTICS_RANK_BUDGET stops the run before it samples",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --quiet",
       2,
       {"HERD_DIAGNOSTICS_RANK_BUDGET", "\"-5\"", "number of bytes"},
       {},
       "HERD_DIAGNOSTICS_RANK_BUDGET=-5"},
      {"a run above max_memory is refused up front",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set chain_size=10000000 --set max_memory=1MB",
       2,
       {"max_memory is", "chain_size"}},
      {"max_memory that is not a size",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set max_memory=lots",
       2,
       {"--set max_memory=lots: key \"max_memory\" is \"lots\", but must be a number", "16GiB"}},
      {"batched warmup + chain_size beyond 2^63",
       "herd-sample",
       {{"run.toml", kBatched}},
       "run.toml --set warmup=9223372036854775000 --set chain_size=10000",
       2,
       {"warmup", "2^63"}},
      {"herd-rl: a 65,536-env x 2^20-step rollout (std::bad_alloc before)",
       "herd-rl",
       {},
       "train --quiet --set sampler.num_envs=65536 --set sampler.num_steps=1048576 --set output_prefix=out/rl",
       2,
       {"sampler.num_envs x sampler.num_steps is 65536 x 1048576", "2^32 - 1"}},
      {"herd-rl: a 65,536-env x 32,768-step rollout above max_memory",
       "herd-rl",
       {},
       "train --quiet --set sampler.num_envs=65536 --set sampler.num_steps=32768 --set max_memory=1GiB "
       "--set output_prefix=out/rl",
       2,
       {"65536 envs x 32768 steps", "max_memory is 1 GiB", "sampler.num_envs"}},
      {"herd-rl: max_memory that is not a size: the one-line form of every refused key",
       "herd-rl",
       {},
       "train --quiet --set max_memory=abc --set output_prefix=out/rl",
       2,
       {"herd-rl: error: --set max_memory=abc: key \"max_memory\" is \"abc\", but must be a number with an optional "
        "unit"}},
      {"herd-rl: a run above max_memory",
       "herd-rl",
       {},
       "train --quiet --set max_memory=1kB --set output_prefix=out/rl",
       2,
       {"max_memory is", "1000 B"}},
      {"herd-diagnose: a declared-but-unwritten 8 TB dataset",
       "herd-diagnose",
       {},
       "huge.h5 --dataset x",
       2,
       {"huge.h5", "memory", "1000 x 1000000000"},
       {},
       {},
       declare_huge_dataset},
      {"herd-diagnose: --max-memory that is not a size",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --max-memory=lots",
       2,
       {"--max-memory", "lots"}},
      {"herd-diagnose: --threads -1 (was taken silently)",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --threads=-1",
       2,
       {"herd-diagnose: error: --threads is -1", "from 1 to 4096"}},
      {"herd-diagnose: --threads that is not a number: one line in herd's form",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --threads abc",
       2,
       {"herd-diagnose: error: ", "--threads", "abc", "herd-diagnose --help"}},
      // A chain file's rows are repeated SampleWeight times in memory: one weight of 3e8 in a
      // 50-row file expanded to 12 GB, past --max-memory and the memory available.
      {"herd-diagnose: a weighted chain file that expands past --max-memory",
       "herd-diagnose",
       {{"w_chain.txt", weighted_chain(50, 49, 100000)}},
       "w_chain.txt --max-memory 1MiB --threads 1",
       2,
       {"w_chain.txt: its weighted rows (SampleWeight totals 100049 draws, of 2 columns), expanded, and their "
        "diagnostics on 1 thread needs about",
        "--max-memory is 1 MiB"}},
      {"herd-diagnose: weighted chain files that together expand past --max-memory",
       "herd-diagnose",
       {{"w_chain.txt", weighted_chain(50, 49, 60000)}, {"v_chain.txt", weighted_chain(50, 49, 60000)}},
       "w_chain.txt v_chain.txt --max-memory 8MiB --threads 1",
       2,
       {"v_chain.txt: its weighted rows (SampleWeight totals 60049 draws, of 2 columns, besides the files before it), "
        "expanded, and their diagnostics on 1 thread needs about",
        "but --max-memory is 8 MiB"}},
      {"herd-diagnose: SampleWeight 2147483647 names the real limit (it said 'must be a positive integer')",
       "herd-diagnose",
       {{"w_chain.txt", weighted_chain(50, 10, 2147483647)}},
       "w_chain.txt",
       2,
       {"w_chain.txt: line 12 column 6 (SampleWeight) is '2147483647', but must be at most 1000000000"}},
      {"herd-diagnose: SampleWeight 99999999999",
       "herd-diagnose",
       {{"w_chain.txt", weighted_chain(50, 0, 99999999999)}},
       "w_chain.txt",
       2,
       {"line 2 column 6 (SampleWeight) is '99999999999', but must be at most 1000000000"}},
      // A text file of draws with a header of no known format: once read as one chain per
      // column (R-hat 2.02 on herd-sample's own _chain.txt, exit 0); now refused, nothing guessed.
      {"herd-diagnose: a table with an unknown header is not read as chains",
       "herd-diagnose",
       {{"t.txt", "alpha beta gamma\n0.1 0.2 0.3\n0.4 0.5 0.6\n"}},
       "t.txt",
       2,
       {"t.txt", "not a header herd-diagnose knows", "ParaDRAM chain file"}},
      {"herd-diagnose: a folder given as the input (it said the file has no numeric rows)",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       ".",
       2,
       {"herd-diagnose: error: .: is a folder, but herd-diagnose reads files of draws"}},
      // --- herd-diagnose's --html report path -------------------------------------------------
      // The report is renamed over its path: an --html naming an input replaced the draws
      // (exit 0). Refused before any work, however the path is spelled.
      {"herd-diagnose: --html naming the input file",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --html ./d.csv",
       2,
       {"--html ./d.csv: is the input file d.csv, which the report would replace"},
       {"d.csv"}},
      {"herd-diagnose: --html naming a hard link of an input file",
       "herd-diagnose",
       {{"a_chain.txt", "SampleLogFunc,x\n-1,0.5\n-2,0.25\n"}, {"b_chain.txt", "SampleLogFunc,x\n-1,0.5\n-2,0.3\n"}},
       "a_chain.txt b_chain.txt --html same.html",
       2,
       {"--html same.html: is the input file b_chain.txt"},
       {"a_chain.txt", "b_chain.txt"},
       {},
       [](const fs::path& d) { fs::create_hard_link(d / "b_chain.txt", d / "same.html"); }},
      // A report path that cannot be written failed the final rename, after all the diagnostics
      // (exit 1): refused before any work.
      {"herd-diagnose: --html naming a folder",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --html out",
       2,
       {"--html out: is a folder, but must be the path of the report file to write"},
       {"d.csv"},
       {},
       [](const fs::path& d) { fs::create_directories(d / "out" / "keep"); }},
      {"herd-diagnose: --html in a missing folder",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --html nowhere/r.html",
       2,
       {"--html nowhere/r.html: the folder \"nowhere\" does not exist"}},
      {"herd-diagnose: --html under a file",
       "herd-diagnose",
       {{"d.csv", "1,2\n3,4\n"}},
       "d.csv --html d.csv/r.html",
       2,
       {"--html d.csv/r.html: \"d.csv\" is not a folder"},
       {"d.csv"}},
      // --- the batched kernel's limits name their own keys (they named where device was set) ---
      {"batched delayed_rejection_count above 4 names its --set",
       "herd-sample",
       {{"run.toml", kBatched}, {"out/run.h5", kOld}},
       "run.toml --set delayed_rejection_count=5",
       2,
       {"herd-sample: error: --set delayed_rejection_count=5: key \"delayed_rejection_count\" is 5, but device = "
        "\"cpu_batched\" allows at most 4 delayed-rejection stages"},
       {"out/run.h5"}},
      {"batched delayed_rejection_count above 4 names its line",
       "herd-sample",
       {{"run.toml", batched("delayed_rejection_count = 7\n")}},
       "run.toml",
       2,
       {"herd-sample: error: run.toml:4: key \"delayed_rejection_count\" is 7, but device = \"cpu_batched\" allows "
        "at most 4"}},
      {"superchains that do not divide the chains name their --set (no origin before)",
       "herd-sample",
       {{"run.toml", kBatched}},
       "run.toml --set chains_per_rank=8 --set superchains=3",
       2,
       {"herd-sample: error: --set superchains=3: key \"superchains\" is 3, but must divide the 8 chains"}},
      {"superchains that do not divide the chains name their line",
       "herd-sample",
       {{"run.toml", batched("chains_per_rank = 8\nsuperchains = 3\n")}},
       "run.toml",
       2,
       {"herd-sample: error: run.toml:5: key \"superchains\" is 3"}},
      {"a NaN domain bound names its key (batched: device's line before, serial: the file)",
       "herd-sample",
       {{"run.toml", kBatched}},
       "run.toml --set 'domain_upper=[nan,1,1]'",
       2,
       {"herd-sample: error: --set domain_upper=[nan,1,1]: key \"domain_upper\" element 1 is nan (a float), but must "
        "be a list of floats (not NaN)"}},
      {"a target acceptance rate of 0 is refused by the range the help gives, (0, 1]",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n  chainSize = 300\n  targetAcceptanceRate = 0.0, 0.5\n/\n"}},
       "run.nml --set target.builtin=normal --set target.ndim=3",
       2,
       {"herd-sample: error: run.nml:3: key \"targetAcceptanceRate\" element 1 is 0", "floats in (0, 1]"}},
      {"a namelist's variable name past ndim is named with its index",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n  chainSize = 300\n  variableNameList(4) = 'w'\n/\n"}},
       "run.nml --set target.builtin=normal --set target.ndim=3",
       2,
       {"herd-sample: error: run.nml:3: key \"variableNameList\" sets element 4, but there are only 3 (ndim)"}},
      {"a namelist's element beyond ndim is named with its index",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n  chainSize = 300\n  startPointVec(5) = 1.0\n/\n"}},
       "run.nml --set target.builtin=normal --set target.ndim=3",
       2,
       {"herd-sample: error: run.nml:3: key \"startPointVec\" sets element 5, but there are only 3 (ndim)"}},
      {"a NaN written in a namelist's partial list is refused, not read as unset",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n  chainSize = 300\n  domainLowerLimitVec(2) = NaN\n/\n"}},
       "run.nml --set target.builtin=normal --set target.ndim=3",
       2,
       {"run.nml:3: key \"domainLowerLimitVec\" element 2 is", "but must be a list of floats (not NaN)"}},
      {"a domain_lower of +inf names its key (serial)",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'domain_lower=[0,inf,0]'",
       2,
       {"herd-sample: error: --set domain_lower=[0,inf,0]: domain_lower[2] is inf, but must be a number below +inf"}},
      {"a random start box reaching outside the domain names its key for every seed",
       "herd-sample",
       {{"run.toml", batched("random_start_point = true\ndomain_lower = [0.0, 0.0, 0.0]\n"
                             "domain_upper = [1.0, 1.0, 1.0]\nrandom_start_point_domain_lower = [0.0, -5.0, 0.0]\n")}},
       "run.toml",
       2,
       {"herd-sample: error: run.toml:7: random_start_point_domain_lower[2] is -5, but the random start box must lie "
        "inside the domain: at least domain_lower[2] = 0"}},
      // --- narrowing and non-finite numbers ---------------------------------------------------
      {"target.ndim = 3e9 (was reported as -1294967296)",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set target.builtin=banana --set target.ndim=3e9",
       2,
       {"target.ndim", "2147483647"}},
      {"NaN in target.mean names the key",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'target.mean=[nan,0,0]'",
       2,
       {"target.mean", "finite"}},
      {"NaN target.b names the key",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set target.builtin=banana --set target.b=nan",
       2,
       {"target.b", "finite"}},
      {"inf in target.cov names the key",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'target.cov=[1,0,0,0,1,0,0,0,inf]'",
       2,
       {"target.cov", "finite"}},
      // --- target keys the chosen target does not read (were silently ignored) ---------------
      {"target.b and target.symbol set for a normal target: one line naming both",
       "herd-sample",
       {{"run.toml", kSerial + "b = 0.5\n"}, {"out/run.h5", kOld}},
       "run.toml --set target.symbol=f",
       2,
       {"--set target.symbol=f: key \"target.symbol\" is set", "target.builtin = \"normal\" does not read it",
        "it reads target.ndim, target.mean, target.cov, target.rho", "nor does it read \"target.b\" (run.toml:7)"},
       {"out/run.h5"}},
      {"target.thread_safe set for a built-in target",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set target.builtin=funnel --set target.thread_safe=true",
       2,
       {"target.thread_safe", "target.builtin = \"funnel\" does not read it", "it reads target.ndim"}},
      {"target.rho beside target.cov",
       "herd-sample",
       {{"run.toml", kSerial + "rho = 0.5\n"}},
       "run.toml --set 'target.cov=[1,0,0,0,1,0,0,0,1]'",
       2,
       {"run.toml:7", "target.rho", "target.cov is given (--set target.cov=", "give one of them"}},
      {"data.group without data.file",
       "herd-sample",
       {{"run.toml",
         "chain_size = 100\noutput_prefix = \"out/run\"\n[target]\nmodel = \"arK\"\n[data]\ngroup = "
         "\"/x\"\n"}},
       "run.toml",
       2,
       {"run.toml:6", "data.group", "data.file is not given"}},
      {"data.group with a JSON data.file",
       "herd-sample",
       {{"run.toml",
         "chain_size = 100\noutput_prefix = \"out/run\"\n[target]\nmodel = \"arK\"\n[data]\nfile = "
         "\"d.json\"\ngroup = \"/x\"\n"},
        {"d.json", "{}\n"}},
       "run.toml",
       2,
       {"run.toml:7", "data.group", "data.file \"d.json\" is not an HDF5 file"}},
      // A ParaMonte user's namelist: a second group &target is not read by ParaDRAM's rules;
      // it was skipped, and the run sampled the default model in place of the user's target.
      {"a namelist group &target beside &ParaDRAM",
       "herd-sample",
       {{"run.nml", "&ParaDRAM chainSize = 100 /\n&target builtin = 'normal' ndim = 2 /\n"}},
       "run.nml",
       2,
       {"run.nml:2: namelist group &target is not read", "as target%key = value"}},
      {"an unknown component target%bogus in a namelist: named as written",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n target%builtin = 'normal'\n target%ndim = 2\n target%bogus = 1 /\n"}},
       "run.nml",
       2,
       {"run.nml:4: unknown key \"target%bogus\"; did you mean \"target%"}},
      {"a namelist matrix element beyond ndim (proposalStartCovMat(3,3) with ndim 2) is named with its indices",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n target%builtin = 'normal'\n target%ndim = 2\n proposalStartCovMat(3,3) = 1 /\n"}},
       "run.nml",
       2,
       {"herd-sample: error: run.nml:4: key \"proposalStartCovMat\" sets element (3,3), but the matrix is 2 x 2 "
        "(ndim x ndim)"}},
      {"a namelist's matrix elements that leave the matrix asymmetric (proposalStartCovMat(1,2) alone)",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n target%builtin = 'normal'\n target%ndim = 2\n proposalStartCovMat(1,2) = 0.5 /\n"}},
       "run.nml",
       2,
       {"herd-sample: error: run.nml:4: key \"proposalStartCovMat\" is not symmetric: element (2,1) is 0, but element "
        "(1,2) is 0.5"}},
      {"no input file, and a --set target.* key that replaces the default target without naming one",
       "herd-sample",
       {},
       "--set target.ndim=3",
       2,
       {"(embedded default input): no target is given", "a --set target.* replaces the default input's target"}},
      {"the default output_prefix where a file named out is in the way",
       "herd-sample",
       {{"run.toml", "chain_size = 100\n[target]\nbuiltin = 'normal'\nndim = 2\n"}, {"out", "a file\n"}},
       "run.toml",
       2,
       {"output_prefix = \"out/herd_sample\" (its default): cannot create the lock file"},
       {"out"}},
      {"a namelist integer beyond 64 bits: the key is named",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n target%builtin = 'normal'\n target%ndim = 2\n randomSeed = 99999999999999999999 /\n"}},
       "run.nml",
       2,
       {"run.nml:4: key \"randomSeed\": integer 99999999999999999999 is out of range"}},
      // An output place that cannot be made: the key that chose it is named.
      {"outputFileName inside a file",
       "herd-sample",
       {{"run.nml", "&ParaDRAM\n target%builtin = 'normal'\n target%ndim = 2\n outputFileName = './run.nml/x' /\n"}},
       "run.nml",
       2,
       {"run.nml:4: outputFileName = \"./run.nml/x\": cannot create the lock file", "Not a directory"},
       {"run.nml"}},
      {"--output inside a file",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --output run.toml/x",
       2,
       {"error: --output run.toml/x: cannot create the lock file"},
       {"run.toml"}},
      // A folder where an output file goes failed the final rename, after the whole run.
      {"a folder where the .h5 goes, with overwrite = true",
       "herd-sample",
       {{"run.toml", serial("overwrite = true\n")}},
       "run.toml",
       2,
       {"run.toml:3: output_prefix = \"out/run\": output file \"out/run.h5\" is a folder, not a file"},
       {"run.toml"},
       "",
       [](const fs::path& d) { fs::create_directories(d / "out" / "run.h5" / "keep"); }},
      {"an input file that gives no target",
       "herd-sample",
       {{"run.nml", "&ParaDRAM chainSize = 100 outputFileName = './out/run' /\n"}},
       "run.nml",
       2,
       {"run.nml: no target is given", "target%builtin"}},
      // A matrix of the wrong length: only its length is named (the symmetry check read past
      // the end of the values and printed what lay there).
      {"a proposal_cov of 4 values for a 3-D target",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'proposal_cov=[1,0,0,1]'",
       2,
       {"proposal_cov", "has 4 values, but must have 9 (ndim x ndim)"}},
      {"a target.cov of 4 values for a 3-D target",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'target.cov=[1,0,0,1]'",
       2,
       {"target.cov", "has 4 values, but must have 9 (ndim x ndim)"}},
      {"a domain_ball_cor of 4 values for a 3-D target",
       "herd-sample",
       {{"run.toml", serial("domain = \"ball\"\ndomain_ball_cor = [1, 0, 0, 1]\n")}},
       "run.toml",
       2,
       {"run.toml:5", "domain_ball_cor", "has 4 values, but must have 9 (ndim x ndim)"}},
      {"trials in a row outside the domain stop the run at maxNumDomainCheckToStop (the key was read, then ignored)",
       "herd-sample",
       {{"run.toml", serial("domain_lower = [-1e-3, -1e-3, -1e-3]\ndomain_upper = [1e-3, 1e-3, 1e-3]\n"
                            "adaptive_update_count = 0\nmax_num_domain_check_to_warn = 1000000\n"
                            "max_num_domain_check_to_stop = 2000\n")}},
       "run.toml --quiet",
       1,
       {"chain 0: 2000 trials in a row", "fell outside the domain", "maxNumDomainCheckToStop) = 2000"}},
      {"a target.cov that is not symmetric (its upper triangle was ignored)",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'target.cov=[1,0.9,0,-0.9,1,0,0,0,1]'",
       2,
       {"target.cov", "not symmetric", "element (2,1) is -0.9, but element (1,2) is 0.9"}},
      {"an empty data.file",
       "herd-sample",
       {},
       "--set target.model=arK --set data.file= --output out/run",
       2,
       {"--set data.file=", "key \"data.file\" is empty, but must name a file"}},
      {"an empty target.library",
       "herd-sample",
       {},
       "--set target.library= --set target.ndim=2 --output out/run",
       2,
       {"--set target.library=", "key \"target.library\" is empty, but must name a file"}},
      {"herd-rl: an empty env.library",
       "herd-rl",
       {},
       "train --quiet --set env.library= --set output_prefix=out/rl",
       2,
       {"--set env.library=", "key \"env.library\" is empty, but must name a file"}},
      {"domain_ball_center with the cube domain (was ignored)",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'domain_ball_center=[0,0,0]'",
       2,
       {"domain_ball_center", "domain is \"cube\"", "domain = \"ball\""}},
      {"a model's target.ndim is refused",
       "herd-sample",
       {{"run.toml", "chain_size = 100\noutput_prefix = \"out/run\"\n[target]\nmodel = \"arK\"\nndim = 3\n"}},
       "run.toml",
       2,
       {"target.ndim", "target.model = \"arK\" does not read it", "it reads data.file, data.group"}},
      // --- herd-rl keys that other settings leave unread: refused, not ignored -----------------
      {"herd-rl: PPO's algo.epochs under algorithm = \"a2c\" (was ignored)",
       "herd-rl",
       {},
       "train --quiet --set algorithm=a2c --set algo.epochs=5 --set output_prefix=out/rl",
       2,
       {"--set algo.epochs=5: key \"algo.epochs\" is set, but algorithm = \"a2c\" does not read it", "PPO's"}},
      {"herd-rl: algo.minibatch_size that disagrees with algo.num_minibatches (was ignored)",
       "herd-rl",
       {},
       "train --quiet --set algo.num_minibatches=2 --set algo.minibatch_size=64 --set output_prefix=out/rl",
       2,
       {"--set algo.minibatch_size=64", "algo.num_minibatches = 2", "256 / 2 = 128"}},
      {"herd-rl: env.symbol without env.library (was ignored)",
       "herd-rl",
       {},
       "train --quiet --set env.symbol=my_env --set output_prefix=out/rl",
       2,
       {"--set env.symbol=my_env: key \"env.symbol\" is set, but env.library is not set"}},
      {"herd-rl: sampler.num_threads with the serial sampler (was ignored)",
       "herd-rl",
       {},
       "train --quiet --set sampler.num_threads=4 --set output_prefix=out/rl",
       2,
       {"key \"sampler.num_threads\" is set, but sampler.kind = \"serial\" does not read it", "\"parallel\""}},
      {"herd-rl: network.hidden = [] without convolutions",
       "herd-rl",
       {},
       "train --quiet --set 'network.hidden=[]' --set output_prefix=out/rl",
       2,
       {"--set network.hidden=[]: key \"network.hidden\" is [], but the network needs at least one layer"}},
      // --- herd-rl outputs ---------------------------------------------------------------------
      {"herd-rl: --resume where <prefix>.h5 exists but no checkpoint (trained afresh over it before)",
       "herd-rl",
       {{"out/rl.h5", kOld}},
       "train --quiet --resume --set total_steps=256 --set output_prefix=out/rl",
       2,
       {"--resume: out/rl.h5 exists, but out/rl.ckpt does not", "--overwrite"},
       {"out/rl.h5"}},
      {"herd-rl report --output into a missing folder (exit 1 naming a temporary before)",
       "herd-rl",
       {{"out/rl_progress.csv", "iteration,env_steps\n1,256\n"}},
       "report out/rl --output nodir/r.html",
       2,
       {"cannot write nodir/r.html: the folder \"nodir\" does not exist"},
       {"out/rl_progress.csv"}},
      {"herd-rl report --output into a file's path",
       "herd-rl",
       {{"out/rl_progress.csv", "iteration,env_steps\n1,256\n"}},
       "report out/rl --output out/rl_progress.csv/r.html",
       2,
       {"cannot write out/rl_progress.csv/r.html: \"out/rl_progress.csv\" is not a folder"},
       {"out/rl_progress.csv"}},
      {"herd-rl: algo.minibatch_size = 3e9",
       "herd-rl",
       {},
       "train --quiet --set algo.minibatch_size=3e9 --set output_prefix=out/rl",
       2,
       {"algo.minibatch_size", "2147483647"}},
      // --- input depth ------------------------------------------------------------------------
      {"a 40,000-level dotted key (stack overflow in toml++ before)",
       "herd-sample",
       {{"run.toml", deep("dotted", 40000)}},
       "run.toml",
       2,
       {"run.toml:1", "nesting", "at most 64"}},
      {"100,000 nested arrays", "herd-sample", {{"run.toml", deep("array", 100000)}}, "run.toml", 2, {"nesting"}},
      {"20,000 nested inline tables", "herd-sample", {{"run.toml", deep("inline", 20000)}}, "run.toml", 2, {"nesting"}},
      {"herd-rl: a 40,000-level dotted key",
       "herd-rl",
       {{"rl.toml", deep("dotted", 40000)}},
       "train rl.toml --quiet",
       2,
       {"rl.toml:1", "nesting"}},
      // --- enum keys ----------------------------------------------------------------------------
      {"h5_posterior = \"foo\", with overwrite = true and earlier outputs",
       "herd-sample",
       {{"run.toml", serial("overwrite = true\nh5_posterior = \"foo\"\n")},
        {"out/run.h5", kOld},
        {"out/run_chain.txt", kOld}},
       "run.toml",
       2,
       {"run.toml:5", "key \"h5_posterior\" is \"foo\"", "one of \"verbose\", \"compact\""},
       {"out/run.h5", "out/run_chain.txt"}},
      // --- names and delimiters ---------------------------------------------------------------
      {"duplicate variable_names, with overwrite = true and earlier outputs",
       "herd-sample",
       {{"run.toml", names_overwrite}, {"out/run.h5", kOld}, {"out/run_chain.txt", kOld}},
       "run.toml --set 'variable_names=[\"a\",\"b\",\"a\"]'",
       2,
       {"variable_names", "name 3 \"a\"", "repeats name 1"},
       {"out/run.h5", "out/run_chain.txt"}},
      {"an empty variable name",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'variable_names=[\"a\",\"\",\"c\"]'",
       2,
       {"variable_names", "element 2 is \"\"", "not empty"}},
      {"a variable name with '/'",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'variable_names=[\"a/b\",\"c\",\"d\"]'",
       2,
       {"variable_names", "'/'"}},
      {"a variable name \"chain\"",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set 'variable_names=[\"chain\",\"c\",\"d\"]'",
       2,
       {"variable_names", "reserved"}},
      {"a variable name containing the delimiter",
       "herd-sample",
       {{"run.toml", serial("variable_names = [\"a,b\", \"c\", \"d\"]\n")}},
       "run.toml",
       2,
       {"run.toml:4", "variable_names", "output_delimiter"}},
      {"output_delimiter = \"1\"",
       "herd-sample",
       {{"run.toml", serial("output_delimiter = \"1\"\n")}},
       "run.toml",
       2,
       {"run.toml:4", "output_delimiter", "\"1\""}},
      {"output_delimiter = \"\\n\"",
       "herd-sample",
       {{"run.toml", serial("output_delimiter = \"\\n\"\n")}},
       "run.toml",
       2,
       {"output_delimiter", "\"\\n\""}},
      {"output_delimiter = \"e\"",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set output_delimiter=e",
       2,
       {"output_delimiter", "letters"}},
      {"output_delimiter = \"-\"",
       "herd-sample",
       {{"run.toml", kSerial}},
       "run.toml --set output_delimiter=-",
       2,
       {"output_delimiter", "'-'"}},
      // --- restart records ----------------------------------------------------------------
      {"a flipped byte in <prefix>_restart/chain_0.chain (resumed silently before)",
       "herd-sample",
       {},
       "run.toml --quiet",
       1,
       {"out/r_restart/chain_0.chain", "corrupt", "block 1", "overwrite = true"},
       {},
       {},
       corrupt_restart_record("chain_size = 4000\n", 5000, "out/r_restart/chain_0.chain")},
      {"a flipped byte in the batched record <prefix>_restart/draws.bin",
       "herd-sample",
       {},
       "run.toml --quiet",
       1,
       {"out/r_restart/draws.bin", "corrupt", "block 1", "overwrite = true"},
       {},
       {},
       corrupt_restart_record("device = \"cpu_batched\"\nchains_per_rank = 4\nwarmup = 0\nchain_size = 4000\n", 10000,
                              "out/r_restart/draws.bin")},
      {"checkpoints turned off over an interrupted run's record (it started afresh and left the record, which the "
       "next run resumed over its outputs)",
       "herd-sample",
       {},
       "run.toml --quiet --set checkpoint_period=0 --set checkpoint_period_seconds=0",
       2,
       {"--set checkpoint_period_seconds=0: checkpoints are off",
        "out/r_restart holds the restart record of an interrupted run", "overwrite = true"},
       {},
       {},
       [](const fs::path& dir) {
         interrupted_run(dir, "chain_size = 4000\n", 5000);
         REQUIRE(fs::exists(dir / "out/r_restart/chain_0.ckpt"));
       }},
      // --- a full disk ------------------------------------------------------------------------
      // overwrite = true removed the earlier .h5 when sampling started; the failed write
      // publishes no partial .h5 in its place.
      {"disk full while the .h5 is written (serial; exit 139 before)",
       "herd-sample",
       {{"run.toml", serial("overwrite = true\n")}, {"out/run.h5", kOld}},
       "run.toml --quiet",
       1,
       {"out/run.h5", "no space left"},
       {},
       "LD_PRELOAD=@SHIM@ HERD_ENOSPC_AFTER=20000",
       {},
       {},
       {"out/run.h5"}},
      {"disk full while the .h5 is written (cpu_batched)",
       "herd-sample",
       {{"run.toml", batched("chain_size = 2000\noverwrite = true\n")}, {"out/run.h5", kOld}},
       "run.toml --quiet",
       1,
       {"out/run.h5", "no space left"},
       {},
       "LD_PRELOAD=@SHIM@ HERD_ENOSPC_AFTER=20000",
       {},
       {},
       {"out/run.h5"}},
      {"a file size limit reached while the chain text file is written (ulimit -f)",
       "herd-sample",
       {{"run.toml", serial("overwrite = true\n")}, {"out/run.h5", kOld}},
       "run.toml --quiet",
       1,
       {"cannot write \"out/run_chain.txt\"", "file too large"},
       {},
       {},
       {},
       "trap '' XFSZ; ulimit -f 100; ",
       {"out/run.h5"}},
      // The chain text file is written by a writer thread: its error reaches the sampler
      // (the next write, flush or checkpoint) with the same message, and nothing hangs.
      {"a file size limit reached while the chain text file is written, with checkpoints",
       "herd-sample",
       {{"run.toml", serial("overwrite = true\ncheckpoint_period = 500\n")}},
       "run.toml --quiet",
       1,
       {"cannot write \"out/run_chain.txt\"", "file too large"},
       {},
       {},
       {},
       "trap '' XFSZ; ulimit -f 100; "},
      {"a file size limit reached while a longer chain text file is written (several blocks)",
       "herd-sample",
       {{"run.toml", "chain_size = 30000\nrandom_seed = 1\noutput_prefix = \"out/run\"\noverwrite = true\n" + kTarget}},
       "run.toml --quiet",
       1,
       {"cannot write \"out/run_chain.txt\"", "file too large"},
       {},
       {},
       {},
       "trap '' XFSZ; ulimit -f 100; "},
  };
}

std::string substitute(std::string s) {
  const std::string key = "@SHIM@";
  for (auto p = s.find(key); p != std::string::npos; p = s.find(key)) s.replace(p, key.size(), HERD_TEST_ENOSPC_SHIM);
  return s;
}

std::string executable(const std::string& program) {
  if (program == "herd-sample") return HERD_SAMPLE_EXE;
  if (program == "herd-rl") return HERD_RL_EXE;
  if (program == "herd-diagnose") return HERD_DIAGNOSE_EXE;
  FAIL("unknown program " << program);
  return {};
}

}  // namespace

TEST_CASE("Bad-input catalogue: one line, the right exit code, earlier outputs intact", "[apps]") {
  const auto rows = catalogue();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BadInput& c = rows[i];
    INFO("case " << i << ": " << c.name << " (" << c.program << " " << c.args.substr(0, 200) << ")");
    const fs::path dir = herd::testing::fresh_dir(HERD_TEST_WORK_DIR, "case" + std::to_string(i));
    for (const auto& [path, text] : c.files) {
      fs::create_directories((dir / path).parent_path());
      std::ofstream(dir / path, std::ios::binary) << text;
    }
    if (c.setup) c.setup(dir);
    const std::string cmd = c.shell + (c.env.empty() ? std::string() : "env " + substitute(c.env) + " ") + "'" +
                            executable(c.program) + "' " + substitute(c.args);
    const herd::testing::AppRun r = herd::testing::run_shell(dir, cmd);
    INFO("stderr: " << r.err.substr(0, 2000));
    CHECK(r.rc == c.rc);
    // One line on stderr: the program's own message, no backtrace, no bare bad_alloc.
    std::string line = r.err;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    CHECK(!line.empty());
    CHECK(std::count(line.begin(), line.end(), '\n') == 0);
    CHECK(line.rfind(c.program + ": error", 0) == 0);
    CHECK(line != c.program + ": error: std::bad_alloc");
    for (const auto& w : c.words) {
      INFO("expected word: " << w);
      CHECK(line.find(w) != std::string::npos);
    }
    for (const auto& path : c.untouched) {
      INFO("must be untouched: " << path);
      const auto it = std::find_if(c.files.begin(), c.files.end(), [&](const auto& f) { return f.first == path; });
      REQUIRE(it != c.files.end());
      CHECK(herd::testing::slurp(dir / path) == it->second);
    }
    for (const auto& path : c.gone) {
      INFO("must be gone: " << path);
      CHECK_FALSE(fs::exists(dir / path));
    }
  }
}
