// The format of a chain's checkpoint and chain file (parallel.hpp, checkpoint_format.hpp):
// hashing of the options, the buffer of byte records, and the sections of the kernel state and result.
#include "checkpoint_format.hpp"

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "../dram_detail.hpp"
#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {

/// 64-bit FNV-1a over the bytes of values, vectors and strings.
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

}  // namespace

namespace detail {

// --- compact records as bytes (the resumable chain file) ---

void ByteSink::begin(std::uint32_t chain_id, int ndim) {
  if (tee) tee->begin(chain_id, ndim);
}

void ByteSink::flush() {
  if (tee) tee->flush();
}

void ByteSink::tick(std::uint64_t proposals, std::int64_t records) {
  if (tee) tee->tick(proposals, records);
}

void ByteSink::resume_at(std::uint64_t proposals, std::int64_t records) {
  if (tee) tee->resume_at(proposals, records);
}

void ByteSink::write(const ChainRecord& r) {
  if (tee) tee->write(r);
  const std::size_t n0 = buf.size();
  buf.resize(n0 + chain_record_bytes(r.ndim));
  encode_chain_record(r, buf.data() + n0);
}

// --- sections of a chain checkpoint ---

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

void save_result(io::CheckpointWriter& w, const DramResult& r) {
  w.add_value("result.burnin_likelihood", r.burnin_likelihood);
  w.add_value("result.burnin_adaptation", r.burnin_adaptation);
  w.add_value("result.burnin", r.burnin);
  w.add_value("result.chol_failures", r.chol_failures);
  w.add(std::string("result.proposal_cov"), r.proposal_cov);
  w.add(std::string("result.adapted_cov"), r.adapted_cov);
  w.add_value("result.seconds", r.seconds);
}

DramResult load_result(const io::CheckpointReader& r) {
  DramResult out = dram_result_counters(load_dram_state(r));
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

}  // namespace detail

// --- checkpoints of the kernel state (public) ---

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
  // Only a ball changes the hash, so that restart records of runs without one stay valid (the
  // ball was a restriction of the log density before it was the sampler's).
  if (!o.domain_ball_center.empty()) {
    h.vec(o.domain_ball_center);
    h.vec(o.domain_ball_precision);
  }
  return h.h;
}

}  // namespace herd::mcmc
