// Parallel chains, exact restart and faults (parallel.hpp).
#include "herd/mcmc/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/mcmc/refinement.hpp"

namespace herd::mcmc {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Records are appended to the chain file in chunks of this many bytes; the file is synced
// (and its length recorded) only at checkpoints, and truncated back to it on resume.
constexpr std::size_t kAppendChunk = std::size_t{1} << 20;

// --- hashing ---
struct Fnv {
  std::uint64_t h = 1469598103934665603ULL;
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ULL;
    }
  }
  template <class T>
  void value(const T& v) {
    bytes(&v, sizeof(T));
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    value(v.size());
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    value(s.size());
    bytes(s.data(), s.size());
  }
};

// --- compact records as bytes (the resumable chain file) ---
std::size_t record_bytes(int d) { return 48 + 8 * static_cast<std::size_t>(d); }

template <class T>
void put(std::vector<std::byte>& b, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  b.insert(b.end(), p, p + sizeof(T));
}

template <class T>
T get(const std::byte*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

/// Buffers records as bytes until the driver appends them to the chain file.
class ByteSink final : public ChainSink {
 public:
  explicit ByteSink(ChainSink* tee_sink = nullptr) : tee(tee_sink) {}
  void begin(std::uint32_t chain_id, int ndim) override {
    if (tee) tee->begin(chain_id, ndim);
  }
  void flush() override {
    if (tee) tee->flush();
  }
  void tick(std::uint64_t proposals, std::int64_t records) override {
    if (tee) tee->tick(proposals, records);
  }
  void write(const ChainRecord& r) override {
    if (tee) tee->write(r);
    const std::size_t n0 = buf.size();
    buf.resize(n0 + record_bytes(r.ndim));
    std::byte* p = buf.data() + n0;
    auto put_at = [&p](const void* v, std::size_t n) {
      std::memcpy(p, v, n);
      p += n;
    };
    put_at(&r.step, 8);
    put_at(&r.weight, 8);
    put_at(&r.log_density, 8);
    put_at(&r.dr_stage, 4);
    put_at(&r.chain_id, 4);
    put_at(&r.accept_prob, 8);
    put_at(&r.adapt_measure, 8);
    put_at(r.point, 8 * static_cast<std::size_t>(r.ndim));
  }
  std::vector<std::byte> buf;
  ChainSink* tee = nullptr;
};

// --- the durable record of one chain: append-only chain file + atomic checkpoint ---

/// The chain checksums of a checkpoint. @throws herd::IoError when it has none (a record
/// of an earlier herd).
io::BlockChecksums load_chain_checksums(const io::CheckpointReader& r, const std::string& checkpoint_path) {
  if (!r.has("chain_crc32"))
    throw IoError(
        fmt::format("the restart record \"{}\" has no checksums of its chain file (it was written by an "
                    "earlier version of herd); set overwrite = true to start afresh",
                    checkpoint_path));
  io::BlockChecksums c;
  c.crcs = r.get<std::uint32_t>("chain_crc32");
  c.bytes = r.value<std::uint64_t>("chain_bytes");
  return c;
}

/// Appends `buf` to the chain file, updating its checksums, and empties `buf`.
void append_chain(io::AppendFile& file, io::BlockChecksums& sums, std::vector<std::byte>& buf) {
  if (buf.empty()) return;
  file.append(std::span<const std::byte>(buf));
  sums.add(std::span<const std::byte>(buf));
  buf.clear();
}

void save_result(io::CheckpointWriter& w, const DramResult& r) {
  w.add_value("result.burnin_likelihood", r.burnin_likelihood);
  w.add_value("result.burnin_adaptation", r.burnin_adaptation);
  w.add_value("result.burnin", r.burnin);
  w.add_value("result.chol_failures", r.chol_failures);
  w.add(std::string("result.proposal_cov"), r.proposal_cov);
  w.add(std::string("result.adapted_cov"), r.adapted_cov);
  w.add_value("result.seconds", r.seconds);
}

/// The result of a finished run from its checkpoint.
DramResult load_result(const io::CheckpointReader& r) {
  const DramState s = load_dram_state(r);
  DramResult out;
  out.chain_id = s.chain_id;
  out.proposals = static_cast<std::int64_t>(s.proposal_number);
  out.chain_size = s.records_written;
  out.acceptance_rate =
      s.proposal_number > 0 ? static_cast<double>(s.accepted) / static_cast<double>(s.proposal_number) : 0.0;
  out.stage_accepted = s.stage_accepted;
  out.evaluations = s.evaluations;
  out.nan_count = s.nan_count;
  out.out_of_domain = s.out_of_domain;
  out.adaptive_updates = s.updates_done;
  out.adaptive_updates_deferred = s.updates_deferred;
  out.chol_failures = s.chol_failures;
  if (r.has("result.burnin")) {
    out.burnin_likelihood = r.value<std::int64_t>("result.burnin_likelihood");
    out.burnin_adaptation = r.value<std::int64_t>("result.burnin_adaptation");
    out.burnin = r.value<std::int64_t>("result.burnin");
    out.chol_failures = r.value<std::int64_t>("result.chol_failures");
    out.proposal_cov = r.get<double>("result.proposal_cov");
    out.adapted_cov = r.get<double>("result.adapted_cov");
  }
  return out;
}

/// Opens the record of a chain: resumes from its checkpoint (state to restore, chain file
/// truncated to the checkpointed length) or starts it afresh.
struct ChainFileState {
  bool resumed = false;
  bool complete = false;
  DramResult result;                 // when complete
  std::unique_ptr<DramState> state;  // when resumed and not complete
  std::uint64_t chain_bytes = 0;
  io::BlockChecksums checksums;        // of the chain file's recorded part
  double seconds_before = 0.0;         // sampling seconds of the earlier invocations
  std::uint64_t proposals_before = 0;  // proposals made by them
};

ChainFileState open_record(const ResumableOptions& files, std::uint64_t hash) {
  ChainFileState out;
  if (files.overwrite || !std::filesystem::exists(files.checkpoint_path)) return out;
  io::CheckpointReader r(files.checkpoint_path);
  r.expect_kind("herd-dram-chain", 1);
  HERD_REQUIRE(r.value<std::uint64_t>("options_hash") == hash,
               "the checkpoint \"{}\" belongs to a run with other options; give overwrite = true to start "
               "afresh, or restore the original input",
               files.checkpoint_path);
  out.resumed = true;
  // Records written before the elapsed time was kept have none: 0.
  out.seconds_before = r.has("elapsed_seconds") ? r.value<double>("elapsed_seconds") : 0.0;
  if (r.value<std::uint8_t>("complete") != 0) {
    out.complete = true;
    out.result = load_result(r);
    out.proposals_before = static_cast<std::uint64_t>(out.result.proposals);
    return out;
  }
  out.state = std::make_unique<DramState>(load_dram_state(r));
  out.proposals_before = out.state->proposal_number;
  out.chain_bytes = r.value<std::uint64_t>("chain_bytes");
  out.checksums = load_chain_checksums(r, files.checkpoint_path);
  if (files.on_resume) files.on_resume(r);
  return out;
}

/// Appends the buffered records, syncs the chain file, and commits the checkpoint.
void commit_record(const ResumableOptions& files, std::uint64_t hash, io::AppendFile& file, io::BlockChecksums& sums,
                   ByteSink& sink, const DramState& state, const DramResult* final_result, double elapsed_seconds) {
  append_chain(file, sums, sink.buf);
  file.sync();
  io::CheckpointWriter w("herd-dram-chain", 1);
  w.add_value("options_hash", hash);
  w.add_value("chain_bytes", file.size());
  w.add("chain_crc32", sums.crcs);
  w.add_value("complete", static_cast<std::uint8_t>(final_result ? 1 : 0));
  w.add_value("elapsed_seconds", elapsed_seconds);  // sampling time of all invocations so far
  save_dram_state(w, state);
  if (final_result) save_result(w, *final_result);
  if (files.on_checkpoint) files.on_checkpoint(w);
  w.commit(files.checkpoint_path);
}

// --- multi-chain packing: everything as doubles (integers < 2^53 are exact) ---
constexpr int kResultScalars = 12;

void pack_chain(std::vector<double>& out, const MemoryChainSink& c, const DramResult& r) {
  out.push_back(static_cast<double>(c.chain_id));
  out.push_back(static_cast<double>(c.size()));
  const double res[kResultScalars] = {static_cast<double>(r.proposals),
                                      static_cast<double>(r.chain_size),
                                      r.acceptance_rate,
                                      static_cast<double>(r.evaluations),
                                      static_cast<double>(r.nan_count),
                                      static_cast<double>(r.out_of_domain),
                                      static_cast<double>(r.adaptive_updates),
                                      static_cast<double>(r.adaptive_updates_deferred),
                                      static_cast<double>(r.burnin_likelihood),
                                      static_cast<double>(r.burnin_adaptation),
                                      static_cast<double>(r.burnin),
                                      r.seconds};
  out.insert(out.end(), res, res + kResultScalars);
  for (std::size_t i = 0; i < c.size(); ++i) {
    out.push_back(static_cast<double>(c.step[i]));
    out.push_back(static_cast<double>(c.weight[i]));
    out.push_back(c.log_density[i]);
    out.push_back(static_cast<double>(c.dr_stage[i]));
    out.push_back(c.accept_prob[i]);
    out.push_back(c.adapt_measure[i]);
    out.insert(out.end(), c.point(i), c.point(i) + c.ndim);
  }
}

const double* unpack_chain(const double* p, int d, MemoryChainSink& c, DramResult& r) {
  c.begin(static_cast<std::uint32_t>(p[0]), d);
  const auto n = static_cast<std::size_t>(p[1]);
  p += 2;
  r.chain_id = c.chain_id;
  r.proposals = static_cast<std::int64_t>(p[0]);
  r.chain_size = static_cast<std::int64_t>(p[1]);
  r.acceptance_rate = p[2];
  r.evaluations = static_cast<std::int64_t>(p[3]);
  r.nan_count = static_cast<std::int64_t>(p[4]);
  r.out_of_domain = static_cast<std::int64_t>(p[5]);
  r.adaptive_updates = static_cast<std::int64_t>(p[6]);
  r.adaptive_updates_deferred = static_cast<std::int64_t>(p[7]);
  r.burnin_likelihood = static_cast<std::int64_t>(p[8]);
  r.burnin_adaptation = static_cast<std::int64_t>(p[9]);
  r.burnin = static_cast<std::int64_t>(p[10]);
  r.seconds = p[11];
  p += kResultScalars;
  for (std::size_t i = 0; i < n; ++i) {
    ChainRecord rec;
    rec.chain_id = c.chain_id;
    rec.step = static_cast<std::uint64_t>(p[0]);
    rec.weight = static_cast<std::int64_t>(p[1]);
    rec.log_density = p[2];
    rec.dr_stage = static_cast<std::int32_t>(p[3]);
    rec.accept_prob = p[4];
    rec.adapt_measure = p[5];
    rec.point = p + 6;
    rec.ndim = d;
    c.write(rec);
    p += 6 + d;
  }
  return p;
}

}  // namespace

// --- checkpoints -------------------------------------------------------------------------

void save_dram_state(io::CheckpointWriter& w, const DramState& s, std::string_view prefix) {
  const std::string p(prefix);
  w.add_value(p + "ndim", static_cast<std::int64_t>(s.ndim));
  w.add_value(p + "chain_id", s.chain_id);
  w.add_value(p + "proposal_number", s.proposal_number);
  w.add(p + "point", s.point);
  w.add_value(p + "log_density", s.log_density);
  w.add_value(p + "weight", s.weight);
  w.add_value(p + "record_step", s.record_step);
  w.add_value(p + "record_stage", s.record_stage);
  w.add_value(p + "record_accept_prob", s.record_accept_prob);
  w.add_value(p + "record_adapt_measure", s.record_adapt_measure);
  w.add_value(p + "records_written", s.records_written);
  w.add_value(p + "scale", s.scale);
  w.add(p + "chol", s.chol);
  w.add(p + "mean", s.mean);
  w.add(p + "m2", s.m2);
  w.add_value(p + "cov_weight", s.cov_weight);
  w.add_value(p + "cov_unique", s.cov_unique);
  w.add(p + "pending_points", s.pending_points);
  w.add(p + "pending_weights", s.pending_weights);
  w.add(p + "pending_new", s.pending_new);
  w.add_value(p + "current_counted", s.current_counted);
  w.add_value(p + "updates_done", s.updates_done);
  w.add_value(p + "updates_deferred", s.updates_deferred);
  w.add_value(p + "chol_failures", s.chol_failures);
  w.add_value(p + "accepted_since_update", s.accepted_since_update);
  w.add_value(p + "proposals_since_update", s.proposals_since_update);
  w.add_value(p + "accepted", s.accepted);
  w.add(p + "stage_accepted", s.stage_accepted);
  w.add_value(p + "nan_count", s.nan_count);
  w.add_value(p + "out_of_domain", s.out_of_domain);
  w.add_value(p + "evaluations", s.evaluations);
  w.add(p + "best_index", s.best_index);
  w.add(p + "best_log_density", s.best_log_density);
  w.add_value(p + "last_index_over_measure", s.last_index_over_measure);
}

DramState load_dram_state(const io::CheckpointReader& r, std::string_view prefix) {
  const std::string p(prefix);
  DramState s;
  s.ndim = static_cast<int>(r.value<std::int64_t>(p + "ndim"));
  s.chain_id = r.value<std::uint32_t>(p + "chain_id");
  s.proposal_number = r.value<std::uint64_t>(p + "proposal_number");
  s.point = r.get<double>(p + "point");
  s.log_density = r.value<double>(p + "log_density");
  s.weight = r.value<std::int64_t>(p + "weight");
  s.record_step = r.value<std::uint64_t>(p + "record_step");
  s.record_stage = r.value<std::int32_t>(p + "record_stage");
  s.record_accept_prob = r.value<double>(p + "record_accept_prob");
  s.record_adapt_measure = r.value<double>(p + "record_adapt_measure");
  s.records_written = r.value<std::int64_t>(p + "records_written");
  s.scale = r.value<double>(p + "scale");
  s.chol = r.get<double>(p + "chol");
  s.mean = r.get<double>(p + "mean");
  s.m2 = r.get<double>(p + "m2");
  s.cov_weight = r.value<double>(p + "cov_weight");
  s.cov_unique = r.value<std::int64_t>(p + "cov_unique");
  s.pending_points = r.get<double>(p + "pending_points");
  s.pending_weights = r.get<double>(p + "pending_weights");
  s.pending_new = r.get<std::uint8_t>(p + "pending_new");
  s.current_counted = r.value<std::int64_t>(p + "current_counted");
  s.updates_done = r.value<std::int64_t>(p + "updates_done");
  s.updates_deferred = r.value<std::int64_t>(p + "updates_deferred");
  s.chol_failures = r.value<std::int64_t>(p + "chol_failures");
  s.accepted_since_update = r.value<std::int64_t>(p + "accepted_since_update");
  s.proposals_since_update = r.value<std::int64_t>(p + "proposals_since_update");
  s.accepted = r.value<std::int64_t>(p + "accepted");
  s.stage_accepted = r.get<std::int64_t>(p + "stage_accepted");
  s.nan_count = r.value<std::int64_t>(p + "nan_count");
  s.out_of_domain = r.value<std::int64_t>(p + "out_of_domain");
  s.evaluations = r.value<std::int64_t>(p + "evaluations");
  s.best_index = r.get<std::int64_t>(p + "best_index");
  s.best_log_density = r.get<double>(p + "best_log_density");
  s.last_index_over_measure = r.value<std::int64_t>(p + "last_index_over_measure");
  return s;
}

std::uint64_t dram_options_hash(const DramOptions& o) {
  Fnv h;
  h.vec(o.start_point);
  h.value(o.chain_size);
  h.value(o.max_proposals);
  h.value(o.seed);
  h.value(o.chain_id);
  h.value(o.proposal);
  h.vec(o.proposal_start_cov);
  h.vec(o.proposal_start_std);
  h.str(o.scale_factor);
  h.value(o.adaptive_update_period);
  h.value(o.adaptive_update_count);
  h.value(o.greedy_adaptation_count);
  h.vec(o.target_acceptance_rate);
  h.value(o.delayed_rejection_count);
  h.vec(o.delayed_rejection_scale_factors);
  h.value(o.dr_rule);
  h.vec(o.domain_lower);
  h.vec(o.domain_upper);
  h.value(o.burnin_adaptation_measure);
  return h.h;
}

// --- faults -------------------------------------------------------------------------------

// --- restart ------------------------------------------------------------------------------

MemoryChainSink read_resumable_chain(const std::string& path, int ndim, const std::string& checkpoint_path) {
  {
    io::CheckpointReader r(checkpoint_path);
    r.expect_kind("herd-dram-chain", 1);
    load_chain_checksums(r, checkpoint_path).verify(path, "the chain file");
  }
  return read_resumable_chain(path, ndim);
}

MemoryChainSink read_resumable_chain(const std::string& path, int ndim) {
  // Read in blocks of whole records into columns reserved to their final size: the chain is
  // held once (no copy of the file, no spare capacity).
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError(fmt::format("cannot open the chain file \"{}\"", path));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  const std::size_t rb = record_bytes(ndim);
  std::error_code ec;
  const auto file_bytes = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
  if (ec) throw IoError(fmt::format("cannot read the size of the chain file \"{}\": {}", path, ec.message()));
  if (file_bytes % rb != 0)
    throw IoError(
        fmt::format("the chain file \"{}\" has {} bytes, not a whole number of {}-byte records", path, file_bytes, rb));
  const std::size_t records = file_bytes / rb;
  MemoryChainSink c;
  c.step.reserve(records);
  c.weight.reserve(records);
  c.log_density.reserve(records);
  c.dr_stage.reserve(records);
  c.accept_prob.reserve(records);
  c.adapt_measure.reserve(records);
  c.points.reserve(records * static_cast<std::size_t>(ndim));
  std::vector<double> pt(static_cast<std::size_t>(ndim));
  const std::size_t per_block = std::max<std::size_t>(1, (std::size_t{1} << 20) / rb);
  std::vector<std::byte> data(per_block * rb);
  const std::byte* p = data.data();
  for (std::size_t i = 0; i < records; ++i) {
    if (i % per_block == 0) {
      const std::size_t want = std::min(per_block, records - i) * rb;
      if (std::fread(data.data(), 1, want, f) != want)
        throw IoError(fmt::format("cannot read the chain file \"{}\" (record {} of {}): it changed while read", path, i,
                                  records));
      p = data.data();
    }
    ChainRecord r;
    r.step = get<std::uint64_t>(p);
    r.weight = get<std::int64_t>(p);
    r.log_density = get<double>(p);
    r.dr_stage = get<std::int32_t>(p);
    r.chain_id = get<std::uint32_t>(p);
    r.accept_prob = get<double>(p);
    r.adapt_measure = get<double>(p);
    std::memcpy(pt.data(), p, 8 * static_cast<std::size_t>(ndim));
    p += 8 * ndim;
    r.point = pt.data();
    r.ndim = ndim;
    if (i == 0) c.begin(r.chain_id, ndim);
    c.write(r);
  }
  if (c.size() == 0) c.ndim = ndim;
  return c;
}

ResumableRun run_resumable(const DramOptions& options, const PointLogDensity& log_density,
                           const ResumableOptions& files) {
  HERD_REQUIRE(!files.chain_path.empty() && !files.checkpoint_path.empty(),
               "run_resumable: chain_path and checkpoint_path must be given");
  HERD_REQUIRE(files.period_steps >= 0 && files.period_seconds >= 0,
               "run_resumable: the checkpoint period must be >= 0");
  Timer timer;
  ResumableRun out;
  const std::uint64_t hash = dram_options_hash(options);
  ChainFileState rec = open_record(files, hash);
  out.resumed = rec.resumed;
  out.seconds_before = rec.seconds_before;
  out.proposals_before = rec.proposals_before;
  if (rec.complete) {  // reported, not redone: the log density is not called
    out.already_complete = true;
    out.result = std::move(rec.result);
    out.result.seconds = 0.0;
    return out;
  }
  DramSampler sampler(options, log_density);
  io::AppendFile file;
  if (rec.state) {
    sampler.set_state(std::move(*rec.state));
    // The recorded part of the chain file is checked before anything is appended to it.
    rec.checksums.verify(files.chain_path, "the chain file");
    file = io::AppendFile::resume(files.chain_path, rec.chain_bytes);
  } else {
    file = io::AppendFile::create(files.chain_path);
  }
  ByteSink sink(files.tee);
  sink.begin(sampler.state().chain_id, sampler.ndim());
  auto commit = [&](const DramResult* final_result) {
    Timer t;
    commit_record(files, hash, file, rec.checksums, sink, sampler.state(), final_result,
                  rec.seconds_before + timer.seconds());
    ++out.checkpoints;
    out.checkpoint_seconds += t.seconds();
  };
  std::uint64_t next = files.period_steps > 0
                           ? sampler.state().proposal_number + static_cast<std::uint64_t>(files.period_steps)
                           : std::numeric_limits<std::uint64_t>::max();
  double next_time = files.period_seconds > 0 ? files.period_seconds : kInf;
  try {
    while (!sampler.finished()) {
      sampler.step(sink);
      if (sink.buf.size() >= kAppendChunk) {  // bounded memory; synced at the next checkpoint
        append_chain(file, rec.checksums, sink.buf);
        // The disk writes while we sample, so the checkpoint's fsync waits less; the call
        // can block when the disk falls behind, so it counts as checkpoint time.
        Timer t;
        file.start_writeback();
        out.checkpoint_seconds += t.seconds();
      }
      const std::uint64_t k = sampler.state().proposal_number;
      if (k >= next) {
        commit(nullptr);
        next = k + static_cast<std::uint64_t>(files.period_steps);
      } else if (next_time < kInf && (k & 63) == 0 && timer.seconds() >= next_time) {
        commit(nullptr);
        next_time = timer.seconds() + files.period_seconds;
      }
    }
  } catch (...) {
    if (files.tee) {
      try {
        files.tee->flush();
      } catch (...) {
      }
    }
    throw;
  }
  out.result = sampler.finish(sink, timer.seconds());
  commit(&out.result);
  return out;
}

// --- multi-chain --------------------------------------------------------------------------

MultiChainRun run_multi_chain(const DramOptions& options, const PointLogDensity& log_density, bool thread_safe,
                              Communicator& comm, int chains_per_rank, int threads,
                              const std::string& checkpoint_prefix, std::int64_t checkpoint_period_steps,
                              double checkpoint_period_seconds, bool overwrite, ChainSink* first_chain_tee,
                              std::span<const double> start_points) {
  HERD_REQUIRE(chains_per_rank >= 1, "chains_per_rank is {}, but must be >= 1", chains_per_rank);
  HERD_REQUIRE(start_points.empty() || start_points.size() == static_cast<std::size_t>(comm.size()) *
                                                                  static_cast<std::size_t>(chains_per_rank) *
                                                                  options.start_point.size(),
               "run_multi_chain: start_points has {} values, but must have chains x d = {} x {}", start_points.size(),
               comm.size() * chains_per_rank, options.start_point.size());
  Timer timer;
  const int rank = comm.rank(), size = comm.size();
  const auto m = static_cast<std::size_t>(chains_per_rank);
  const int d = static_cast<int>(options.start_point.size());
  std::vector<MemoryChainSink> local(m);
  std::vector<DramResult> local_res(m);
  std::vector<std::uint64_t> before_props(m, 0);
  std::vector<double> before_secs(m, 0.0);
  auto run_one = [&](std::size_t i) {
    DramOptions o = options;
    const std::size_t global = static_cast<std::size_t>(rank) * m + i;
    o.chain_id = options.chain_id + static_cast<std::uint32_t>(global);
    if (!start_points.empty())
      o.start_point.assign(
          start_points.begin() + static_cast<std::ptrdiff_t>(global * static_cast<std::size_t>(d)),
          start_points.begin() + static_cast<std::ptrdiff_t>((global + 1) * static_cast<std::size_t>(d)));
    ChainSink* tee = i == 0 ? first_chain_tee : nullptr;
    if (checkpoint_prefix.empty()) {
      DramSampler s(std::move(o), log_density);
      if (tee) {
        FanSink fan(local[i], *tee);
        local_res[i] = s.run(fan);
      } else {
        local_res[i] = s.run(local[i]);
      }
    } else {
      ResumableOptions f;
      f.chain_path = fmt::format("{}_{}.chain", checkpoint_prefix, o.chain_id);
      f.checkpoint_path = fmt::format("{}_{}.ckpt", checkpoint_prefix, o.chain_id);
      f.period_steps = checkpoint_period_steps;
      f.period_seconds = checkpoint_period_seconds;
      f.overwrite = overwrite;
      f.tee = tee;
      ResumableRun rr = run_resumable(o, log_density, f);
      before_props[i] = rr.proposals_before;
      before_secs[i] = rr.seconds_before;
      local_res[i] = std::move(rr.result);
      local[i] = read_resumable_chain(f.chain_path, d, f.checkpoint_path);
    }
  };
  std::size_t nthreads = threads > 0 ? static_cast<std::size_t>(threads) : m;
  nthreads = std::min(nthreads, m);
  if (!thread_safe || nthreads <= 1) {
    for (std::size_t i = 0; i < m; ++i) run_one(i);
  } else {
    ThreadPool pool(nthreads - 1);
    pool.parallel_for_each(0, m, run_one, 1);
  }
  MultiChainRun out;
  out.ranks = size;
  out.chains_per_rank = chains_per_rank;
  double props_before = 0.0, secs_before = 0.0;  // exact as a double below 2^53 proposals
  for (std::size_t i = 0; i < m; ++i) {
    props_before += static_cast<double>(before_props[i]);
    secs_before = std::max(secs_before, before_secs[i]);
  }
  if (size > 1) {
    props_before = comm.allreduce_value(props_before, ReduceOp::kSum);
    secs_before = comm.allreduce_value(secs_before, ReduceOp::kMax);
  }
  out.proposals_before = static_cast<std::uint64_t>(props_before);
  out.seconds_before = secs_before;
  if (size == 1) {
    out.chains = std::move(local);
    out.results = std::move(local_res);
    out.seconds = timer.seconds();
    return out;
  }
  // Gather: every rank packs its chains as doubles; padded to the longest pack.
  std::vector<double> pack;
  for (std::size_t i = 0; i < m; ++i) pack_chain(pack, local[i], local_res[i]);
  const auto len = static_cast<std::int64_t>(pack.size());
  const std::vector<std::int64_t> lens = comm.allgather(std::span<const std::int64_t>(&len, 1));
  const auto maxlen = static_cast<std::size_t>(*std::max_element(lens.begin(), lens.end()));
  pack.resize(maxlen, 0.0);
  std::vector<double> all(rank == 0 ? maxlen * static_cast<std::size_t>(size) : 0);
  comm.gather(pack.data(), all.data(), maxlen, DataType::kFloat64, 0);
  if (rank == 0) {
    out.chains.resize(m * static_cast<std::size_t>(size));
    out.results.resize(out.chains.size());
    for (int r = 0; r < size; ++r) {
      const double* p = all.data() + static_cast<std::size_t>(r) * maxlen;
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t k = static_cast<std::size_t>(r) * m + i;
        if (r == 0) {
          out.chains[k] = std::move(local[i]);
          out.results[k] = std::move(local_res[i]);
        } else {
          p = unpack_chain(p, d, out.chains[k], out.results[k]);
        }
      }
    }
  } else {
    out.chains = std::move(local);
    out.results = std::move(local_res);
  }
  out.seconds = timer.seconds();
  return out;
}

MultiChainDiagnostics multi_chain_diagnostics(const std::vector<MemoryChainSink>& chains,
                                              const std::vector<std::int64_t>& burnin) {
  HERD_REQUIRE(!chains.empty(), "multi_chain_diagnostics: no chains");
  HERD_REQUIRE(burnin.size() == chains.size(), "multi_chain_diagnostics: {} burn-in values for {} chains",
               burnin.size(), chains.size());
  const int d = chains[0].ndim;
  const std::size_t m = chains.size();
  // Verbose length after burn-in per chain; the cut is the shortest.
  std::size_t len = std::numeric_limits<std::size_t>::max();
  for (std::size_t c = 0; c < m; ++c) {
    HERD_REQUIRE(chains[c].ndim == d, "multi_chain_diagnostics: chain {} has dimension {}, chain 0 has {}", c,
                 chains[c].ndim, d);
    const auto b =
        static_cast<std::size_t>(std::clamp<std::int64_t>(burnin[c], 0, static_cast<std::int64_t>(chains[c].size())));
    std::size_t n = 0;
    for (std::size_t i = b; i < chains[c].size(); ++i) n += static_cast<std::size_t>(chains[c].weight[i]);
    HERD_REQUIRE(n > 0, "multi_chain_diagnostics: chain {} has no draw after its burn-in", c);
    len = std::min(len, n);
  }
  MultiChainDiagnostics out;
  out.draws = len;
  std::vector<double> values(m * len);
  for (int j = 0; j < d; ++j) {
    for (std::size_t c = 0; c < m; ++c) {
      const auto b =
          static_cast<std::size_t>(std::clamp<std::int64_t>(burnin[c], 0, static_cast<std::int64_t>(chains[c].size())));
      std::size_t t = 0;
      for (std::size_t i = b; i < chains[c].size() && t < len; ++i)
        for (std::int64_t w = 0; w < chains[c].weight[i] && t < len; ++w) values[c * len + t++] = chains[c].point(i)[j];
    }
    const DrawsView view(values, m, len);
    out.summary.push_back(summarize(view));
  }
  // ParaDRAM's pairwise KS table of the refined samples (nearly independent draws, as the
  // test assumes; the autocorrelated chains give far too small p-values).
  if (m >= 2 && m <= 16) {
    std::vector<std::vector<std::vector<double>>> samples(static_cast<std::size_t>(d),
                                                          std::vector<std::vector<double>>(m));
    for (std::size_t c = 0; c < m; ++c) {
      const MemoryChainSink& ch = chains[c];
      const auto b =
          static_cast<std::size_t>(std::clamp<std::int64_t>(burnin[c], 0, static_cast<std::int64_t>(ch.size())));
      const std::size_t n = ch.size() - b;
      const auto du = static_cast<std::size_t>(d);
      std::vector<double> states(n * (du + 1));
      std::vector<std::int64_t> w(ch.weight.begin() + static_cast<std::ptrdiff_t>(b), ch.weight.end());
      for (std::size_t i = 0; i < n; ++i) {
        states[i * (du + 1)] = ch.log_density[b + i];
        std::copy(ch.point(b + i), ch.point(b + i) + d, states.begin() + static_cast<std::ptrdiff_t>(i * (du + 1) + 1));
      }
      const RefinedSample rs = refine_sample(states, w, du + 1, RefinementOptions{});
      for (std::size_t k = 0; k < rs.index.size(); ++k)
        for (std::size_t j = 0; j < du; ++j)
          samples[j][c].insert(samples[j][c].end(), static_cast<std::size_t>(rs.weight[k]),
                               ch.point(b + rs.index[k])[j]);
    }
    for (const auto& per_var : samples) out.ks.push_back(ks_pairwise(std::span<const std::vector<double>>(per_var)));
  }
  return out;
}

// --- fork-join ------------------------------------------------------------------------------

double fork_join_predicted_speedup(double p, int ranks, double eval_seconds, double comm_seconds) {
  if (ranks <= 1) return 1.0;
  // (1 - (1 - p)^N) / p, accurate for small p.
  const double mean = p >= 1.0 ? 1.0
                      : p > 0  ? -std::expm1(static_cast<double>(ranks) * std::log1p(-p)) / p
                               : static_cast<double>(ranks);
  const double denom = eval_seconds + comm_seconds;
  return denom > 0 ? mean * eval_seconds / denom : mean;
}

ForkJoinRun run_fork_join(const DramOptions& options, const PointLogDensity& log_density, Communicator& comm,
                          ChainSink& sink, const ResumableOptions* files) {
  Timer timer;
  const int rank = comm.rank(), size = comm.size();
  const int d = static_cast<int>(options.start_point.size());
  ForkJoinRun out;
  out.rank_accepted.assign(size, 0);
  out.rank_proposals.assign(size, 0);
  // Resumable: every rank reads the checkpoint (the same state), rank 0 writes the record.
  const std::uint64_t hash = dram_options_hash(options);
  ChainFileState rec;
  io::AppendFile file;
  std::unique_ptr<ByteSink> bytes;
  std::unique_ptr<FanSink> fan;
  if (files) {
    HERD_REQUIRE(!files->chain_path.empty() && !files->checkpoint_path.empty(),
                 "run_fork_join: chain_path and checkpoint_path must be given");
    HERD_REQUIRE(files->period_steps >= 0 && files->period_seconds >= 0,
                 "run_fork_join: the checkpoint period must be >= 0");
    rec = open_record(*files, hash);
    // Every rank must have read the checkpoint before rank 0 may replace it.
    comm.barrier();
    out.resumed = rec.resumed;
    out.seconds_before = rec.seconds_before;
    out.proposals_before = rec.proposals_before;
    if (rec.complete) {
      out.already_complete = true;
      out.result = std::move(rec.result);
      out.result.seconds = 0.0;
      return out;
    }
    if (rank == 0) {
      if (rec.state) rec.checksums.verify(files->chain_path, "the chain file");
      file = rec.state ? io::AppendFile::resume(files->chain_path, rec.chain_bytes)
                       : io::AppendFile::create(files->chain_path);
      bytes = std::make_unique<ByteSink>();
      fan = std::make_unique<FanSink>(*bytes, sink);
    }
  }
  ChainSink& out_sink = fan ? static_cast<ChainSink&>(*fan) : sink;
  // The round's stage-1 trial points and their values; the kernel's log density looks them
  // up (bitwise) and evaluates anything else itself (start point, DR stages).
  struct Round {
    int n = 0;
    std::vector<double> ys, vals;  // [n, d], [size, 2] (value, failed)
    std::int64_t fallback = 0;
    std::string local_error;
  } round;
  round.ys.resize(static_cast<std::size_t>(size) * d);
  round.vals.resize(static_cast<std::size_t>(size) * 2);
  PointLogDensity lookup = [&round, &log_density, rank](const double* x, int dim) -> double {
    for (int j = 0; j < round.n; ++j) {
      if (std::memcmp(x, round.ys.data() + static_cast<std::size_t>(j) * dim, sizeof(double) * dim) == 0) {
        if (round.vals[2 * j + 1] != 0)
          throw Error(j == rank ? round.local_error
                                : fmt::format("the log density threw on rank {} (see that rank's message)", j));
        return round.vals[2 * j];
      }
    }
    ++round.fallback;
    return log_density(x, dim);
  };
  DramSampler sampler(options, lookup);
  if (rec.state) sampler.set_state(std::move(*rec.state));
  std::uint64_t next_ckpt = std::numeric_limits<std::uint64_t>::max();
  double next_time = kInf;
  if (files && rank == 0) {
    if (files->period_steps > 0)
      next_ckpt = sampler.state().proposal_number + static_cast<std::uint64_t>(files->period_steps);
    if (files->period_seconds > 0) next_time = files->period_seconds;
  }
  auto commit = [&](const DramResult* final_result) {
    Timer t;
    commit_record(*files, hash, file, rec.checksums, *bytes, sampler.state(), final_result,
                  rec.seconds_before + timer.seconds());
    ++out.checkpoints;
    out.checkpoint_seconds += t.seconds();
  };
  const std::int64_t period =
      options.adaptive_update_period == 0 ? 4 * static_cast<std::int64_t>(d) : options.adaptive_update_period;
  const auto max_prop = static_cast<std::uint64_t>(options.max_proposals);
  std::vector<double> lo = options.domain_lower, hi = options.domain_upper;
  lo.resize(d, -kInf);
  hi.resize(d, kInf);
  std::int64_t my_evals = 0;
  out_sink.begin(sampler.state().chain_id, d);
  try {
    while (!sampler.finished()) {
      const DramState& s = sampler.state();
      const std::uint64_t k = s.proposal_number;
      std::int64_t n = size;
      if (s.updates_done < options.adaptive_update_count) n = std::min(n, period - s.proposals_since_update);
      if (max_prop != 0) n = std::min<std::int64_t>(n, static_cast<std::int64_t>(max_prop - k));
      n = std::max<std::int64_t>(n, 1);
      round.n = 0;
      for (int j = 0; j < n; ++j)
        sampler.propose(k + static_cast<std::uint64_t>(j), 1, s.point.data(), s.chol.data(),
                        round.ys.data() + static_cast<std::size_t>(j) * d);
      double mine[2] = {0.0, 0.0};
      if (rank < n) {
        const double* y = round.ys.data() + static_cast<std::size_t>(rank) * d;
        bool inside = true;
        for (int i = 0; i < d; ++i) inside &= (y[i] >= lo[i]) & (y[i] <= hi[i]);
        if (inside) {
          Timer te;
          try {
            mine[0] = log_density(y, d);
          } catch (const std::exception& e) {
            mine[1] = 1.0;
            round.local_error = fmt::format("rank {}: the log density threw at proposal {}: {}", rank,
                                            k + static_cast<std::uint64_t>(rank), e.what());
          } catch (...) {
            mine[1] = 1.0;
            round.local_error = fmt::format("rank {}: the log density threw an unknown exception at proposal {}", rank,
                                            k + static_cast<std::uint64_t>(rank));
          }
          out.eval_seconds += te.seconds();
          ++my_evals;
        }
      }
      {
        Timer tc;
        comm.allgather(mine, round.vals.data(), 2, DataType::kFloat64);
        out.comm_seconds += tc.seconds();
      }
      round.n = static_cast<int>(n);
      ++out.rounds;
      for (int j = 0; j < n && !sampler.finished(); ++j) {
        const std::int64_t before = sampler.state().accepted;
        sampler.step(out_sink);
        ++out.rank_proposals[j];
        if (sampler.state().accepted != before) {
          ++out.rank_accepted[j];
          break;
        }
      }
      round.n = 0;
      if (bytes) {  // rank 0 of a resumable run: checkpoints at round boundaries
        if (bytes->buf.size() >= kAppendChunk) {
          append_chain(file, rec.checksums, bytes->buf);
          file.start_writeback();
        }
        const std::uint64_t k1 = sampler.state().proposal_number;
        if (k1 >= next_ckpt) {
          commit(nullptr);
          next_ckpt = k1 + static_cast<std::uint64_t>(files->period_steps);
        } else if (next_time < kInf && timer.seconds() >= next_time) {
          commit(nullptr);
          next_time = timer.seconds() + files->period_seconds;
        }
      }
    }
  } catch (...) {
    if (!files) {
      try {
        sampler.finish(sink, timer.seconds());
      } catch (...) {
      }
    } else {
      try {
        sink.flush();
      } catch (...) {
      }
    }
    throw;
  }
  out.fallback_evaluations = round.fallback;
  out.result = sampler.finish(out_sink, timer.seconds());
  if (bytes) commit(&out.result);
  out.seconds = timer.seconds();
  // Model prediction from the mean evaluation and communication times over ranks.
  // The allgather time of a rank includes waiting for slower ranks' evaluations; the
  // smallest over ranks is the closest to the communication itself.
  double t[2] = {out.eval_seconds, static_cast<double>(my_evals)};
  comm.allreduce(t, 2, DataType::kFloat64, ReduceOp::kSum);
  const double cmin = comm.allreduce_value(out.comm_seconds, ReduceOp::kMin);
  const double tf = t[1] > 0 ? t[0] / t[1] : 0.0;
  const double tcomm = out.rounds > 0 ? cmin / static_cast<double>(out.rounds) : 0.0;
  out.mean_eval_seconds = tf;
  out.comm_seconds_per_round = tcomm;
  out.predicted_speedup = fork_join_predicted_speedup(out.result.acceptance_rate, size, tf, tcomm);
  return out;
}

}  // namespace herd::mcmc
