// The outputs of a batched run (herd/mcmc/run/batched_outputs.hpp).
#include "herd/mcmc/run/batched_outputs.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <hdf5.h>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/proposal_setup.hpp"
#include "outputs.hpp"

namespace herd::mcmc {

BatchedGatherSink::BatchedGatherSink(Communicator& comm, io::H5File* file, std::vector<std::string> names,
                                     BatchedDrawRecord* record, std::int64_t replay, std::int64_t block_draws,
                                     bool write_posterior, std::string scratch_dir)
    : comm_(comm),
      file_(file),
      names_(std::move(names)),
      record_(record),
      replay_(replay),
      block_draws_(block_draws),
      write_posterior_(write_posterior),
      scratch_dir_(std::move(scratch_dir)) {}

BatchedDrawStore& BatchedGatherSink::draws() {
  HERD_REQUIRE(store_ != nullptr, "BatchedGatherSink::draws: only rank 0 keeps the draws, after begin");
  return *store_;
}

BatchedGatherSink::~BatchedGatherSink() { close_sets(); }

void BatchedGatherSink::begin(std::int64_t m, std::uint32_t /*first*/, int d, std::int64_t draws) {
  m_ = m;
  d_ = d;
  total_ = m * comm_.size();
  if (file_ == nullptr) return;
  store_ = std::make_unique<BatchedDrawStore>(scratch_dir_, total_, d, draws);
  if (!write_posterior_) {
    replay_record(draws);
    return;
  }
  io::H5Group root = file_->root();
  post_ = root.create_group("posterior");
  stats_ = root.create_group("sample_stats");
  detail::write_arviz_group_attributes(post_);
  detail::write_arviz_group_attributes(stats_);
  // Vector parameters (beta[1..K]) are one ArviZ variable [chain, draw, beta_dim_0].
  vars_ = arviz_variables(names_);
  for (const auto& v : vars_) ids_.push_back(create(post_, v.name, draws, v.is_vector ? v.columns.size() : 0));
  ids_.push_back(create(stats_, "lp", draws));
  replay_record(draws);
}

void BatchedGatherSink::replay_record(std::int64_t draws) {
  // A resumed run: the recorded blocks (the same blocks the engine wrote) into the file.
  std::uint64_t offset = 0;
  for (std::int64_t first = 0; first < replay_;) {
    const std::int64_t n = std::min(block_draws_, draws - first);
    const auto nx = static_cast<std::size_t>(total_ * n * d_), nl = static_cast<std::size_t>(total_ * n);
    gx_.resize(nx);
    glp_.resize(nl);
    record_->read(offset, gx_.data(), nx);
    record_->read(offset + nx * sizeof(double), glp_.data(), nl);
    offset += (nx + nl) * sizeof(double);
    store(first, n, gx_.data(), glp_.data());
    // The block's statistics follow it (write_stats).
    galpha_.resize(nl);
    gmeasure_.resize(nl);
    gaccepted_.resize(nl);
    gstage_.resize(nl);
    record_->read(offset, galpha_.data(), nl);
    record_->read(offset + nl * sizeof(double), gmeasure_.data(), nl);
    record_->read_bytes(offset + 2 * nl * sizeof(double), gaccepted_.data(), nl);
    record_->read_bytes(offset + 2 * nl * sizeof(double) + nl, gstage_.data(), nl);
    offset += 2 * nl * (sizeof(double) + 1);
    store_->write_stats(first, n, {gaccepted_.data(), gstage_.data(), galpha_.data(), gmeasure_.data()});
    first += n;
  }
}

void BatchedGatherSink::write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp) {
  const auto nx = static_cast<std::size_t>(m_ * n * d_), nl = static_cast<std::size_t>(m_ * n);
  const bool root = file_ != nullptr;
  // One process: the engine's block is the gathered block (no copy of it).
  const bool alone = comm_.size() == 1;
  if (!alone) {
    if (root) {
      gx_.resize(nx * static_cast<std::size_t>(comm_.size()));
      glp_.resize(nl * static_cast<std::size_t>(comm_.size()));
    }
    comm_.gather(x, root ? gx_.data() : nullptr, nx, DataType::kFloat64, 0);
    comm_.gather(lp, root ? glp_.data() : nullptr, nl, DataType::kFloat64, 0);
  }
  if (!root) return;
  const double* bx = alone ? x : gx_.data();
  const double* blp = alone ? lp : glp_.data();
  if (record_ != nullptr) {
    record_->append(bx, nx * static_cast<std::size_t>(comm_.size()));
    record_->append(blp, nl * static_cast<std::size_t>(comm_.size()));
  }
  store(first, n, bx, blp);
}

void BatchedGatherSink::write_stats(std::int64_t first, std::int64_t n, const BatchedDrawStats& s) {
  const auto nl = static_cast<std::size_t>(m_ * n);
  const bool root = file_ != nullptr;
  const std::size_t all = root ? nl * static_cast<std::size_t>(comm_.size()) : 0;
  BatchedDrawStats g = s;  // one process: the engine's block as it is
  if (comm_.size() > 1) {
    galpha_.resize(all);
    gmeasure_.resize(all);
    gaccepted_.resize(all);
    gstage_.resize(all);
    comm_.gather(s.acceptance_probability, root ? galpha_.data() : nullptr, nl, DataType::kFloat64, 0);
    comm_.gather(s.adaptation_measure, root ? gmeasure_.data() : nullptr, nl, DataType::kFloat64, 0);
    comm_.gather(s.accepted, root ? gaccepted_.data() : nullptr, nl, DataType::kUint8, 0);
    comm_.gather(s.dr_stage, root ? gstage_.data() : nullptr, nl, DataType::kUint8, 0);
    g = {gaccepted_.data(), gstage_.data(), galpha_.data(), gmeasure_.data()};
  }
  if (!root) return;
  if (record_ != nullptr) {
    record_->append(g.acceptance_probability, all);
    record_->append(g.adaptation_measure, all);
    record_->append_bytes(g.accepted, all);
    record_->append_bytes(g.dr_stage, all);
  }
  store_->write_stats(first, n, g);
}

void BatchedGatherSink::store(std::int64_t first, std::int64_t n, const double* x, const double* lp) {
  store_->write_block(first, n, x, lp);
  if (!write_posterior_) return;
  // x is [total, n, d]: one [total, n] slab per scalar, [total, n, K] per vector.
  const auto rows = static_cast<std::size_t>(total_ * n);
  std::vector<double> slab;
  for (std::size_t v = 0; v < vars_.size(); ++v) {
    const auto& cols = vars_[v].columns;
    slab.resize(rows * cols.size());
    for (std::size_t q = 0; q < rows; ++q)
      for (std::size_t e = 0; e < cols.size(); ++e)
        slab[q * cols.size() + e] = x[q * static_cast<std::size_t>(d_) + cols[e]];
    write(ids_[v], first, n, slab.data(), vars_[v].is_vector ? cols.size() : 0);
  }
  write(ids_.back(), first, n, lp);
}

void BatchedGatherSink::finish() {
  if (file_ == nullptr || !write_posterior_) return;
  close_sets();
  std::vector<std::int64_t> chain(static_cast<std::size_t>(total_)), draw(static_cast<std::size_t>(store_->draws()));
  for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = static_cast<std::int64_t>(i);
  for (std::size_t i = 0; i < draw.size(); ++i) draw[i] = static_cast<std::int64_t>(i);
  for (io::H5Group* g : {&post_, &stats_}) {
    g->create_coordinate<std::int64_t>("chain", chain);
    g->create_coordinate<std::int64_t>("draw", draw);
  }
  for (const auto& v : vars_) {
    io::H5Dataset ds = post_.open_dataset(v.name);
    if (!v.is_vector) {
      post_.attach_dimensions(ds, {"chain", "draw"});
      continue;
    }
    std::vector<std::int64_t> idx(v.columns.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
    post_.create_coordinate<std::int64_t>(v.name + "_dim_0", idx);
    post_.attach_dimensions(ds, {"chain", "draw", v.name + "_dim_0"});
  }
  io::H5Dataset ds = stats_.open_dataset("lp");
  stats_.attach_dimensions(ds, {"chain", "draw"});
}

hid_t BatchedGatherSink::create(const io::H5Group& g, const std::string& name, std::int64_t draws, std::size_t k) {
  // A chunked dataset [chains, draws] (k = 0) or [chains, draws, k] (a vector of k elements).
  const hsize_t dims[3] = {static_cast<hsize_t>(total_), static_cast<hsize_t>(draws), static_cast<hsize_t>(k)};
  const hsize_t chunk[3] = {static_cast<hsize_t>(std::min<std::int64_t>(total_, 64)),
                            static_cast<hsize_t>(std::clamp<std::int64_t>(draws, 1, 256)), static_cast<hsize_t>(k)};
  const int rank = k > 0 ? 3 : 2;
  const hid_t space = H5Screate_simple(rank, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, rank, chunk);
  H5Pset_obj_track_times(dcpl, false);
  const hid_t id = H5Dcreate2(g.id(), name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Sclose(space);
  if (id < 0) throw IoError(fmt::format("cannot create the dataset {}/{}", g.path(), name));
  return id;
}

void BatchedGatherSink::write(hid_t id, std::int64_t first, std::int64_t n, const double* data, std::size_t k) const {
  // Draws [first, first + n) of every chain: `data` is [chains, n] or [chains, n, k].
  const hid_t fs = H5Dget_space(id);
  const hsize_t start[3] = {0, static_cast<hsize_t>(first), 0};
  const hsize_t count[3] = {static_cast<hsize_t>(total_), static_cast<hsize_t>(n), static_cast<hsize_t>(k)};
  const int rank = k > 0 ? 3 : 2;
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hid_t ms = H5Screate_simple(rank, count, nullptr);
  const herr_t e = H5Dwrite(id, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, data);
  H5Sclose(ms);
  H5Sclose(fs);
  if (e < 0) throw IoError("writing a block of draws to the HDF5 file failed");
}

void BatchedGatherSink::close_sets() {
  for (hid_t id : ids_) H5Dclose(id);
  ids_.clear();
}

BatchedDramResult reduce_batched_result(const BatchedDramResult& r, const BatchedDramOptions& o, Communicator& comm) {
  const int size = comm.size();
  // Totals over the ranks (every rank runs the same number of chains).
  std::vector<double> sums = {r.acceptance_rate, static_cast<double>(r.nan_count), static_cast<double>(r.out_of_domain),
                              static_cast<double>(r.adaptive_updates), static_cast<double>(r.chol_failures)};
  for (auto a : r.stage_accepted) sums.push_back(static_cast<double>(a));
  comm.allreduce(sums.data(), sums.size(), DataType::kFloat64, ReduceOp::kSum);
  double seconds = r.seconds;
  comm.allreduce(&seconds, 1, DataType::kFloat64, ReduceOp::kMax);
  BatchedDramResult t = r;
  t.num_chains = r.num_chains * size;
  t.acceptance_rate = sums[0] / size;
  t.nan_count = static_cast<std::int64_t>(sums[1]);
  t.out_of_domain = static_cast<std::int64_t>(sums[2]);
  // Pooled updates are collective: every rank counts the same ones.
  const bool pooled = o.adaptation == BatchedAdaptation::kPooled;
  t.adaptive_updates = pooled ? r.adaptive_updates : static_cast<std::int64_t>(sums[3]);
  t.chol_failures = pooled ? r.chol_failures : static_cast<std::int64_t>(sums[4]);
  for (std::size_t i = 0; i < t.stage_accepted.size(); ++i)
    t.stage_accepted[i] = static_cast<std::int64_t>(sums[5 + i]);
  t.seconds = seconds;
  t.chain_steps_per_second = static_cast<double>(t.num_chains * t.proposals_per_chain) / std::max(seconds, 1e-12);
  return t;
}

std::size_t default_superchains(std::int64_t m) {
  for (std::int64_t k : {16, 8, 4, 2})
    if (m % k == 0 && m / k >= 2) return static_cast<std::size_t>(k);
  return 0;
}

bool detail::batched_streamed(const BatchedDrawStore& draws) {
  return diagnostics_out_of_core(static_cast<std::size_t>(draws.num_chains()), static_cast<std::size_t>(draws.draws()));
}

std::size_t detail::streamed_chain_group(std::size_t entries_per_chain) {
  constexpr std::size_t kGroupEntries = std::size_t{1} << 16;
  return std::max<std::size_t>(1, kGroupEntries / std::max<std::size_t>(entries_per_chain, 1));
}

namespace {

using detail::batched_streamed;

/// A streamed view's reader of the store's column `col`: a request of fewer than kSpan / 4
/// entries (the split series' windows: one split chain's draws, a few KiB) is served from a
/// window of kSpan entries read from the request on, so that the requests of consecutive
/// split chains, which come in order, cost one read of the store per kSpan entries instead of
/// a few each (one per block of draws); larger requests are read straight. One view's reader
/// is called by one thread (DrawsReader), the window shared by the view's copies.
class StoreColumnReader {
 public:
  static constexpr std::size_t kSpan = std::size_t{1} << 16;  // 512 KiB
  StoreColumnReader(const BatchedDrawStore& draws, std::size_t col)
      : draws_(&draws),
        col_(col),
        total_(static_cast<std::size_t>(draws.num_chains() * draws.draws())),
        win_(std::make_shared<Window>()) {}
  void operator()(std::size_t first, std::span<double> out) const {
    Window& w = *win_;
    if (first >= w.first && first + out.size() <= w.first + w.values.size()) {
      std::copy_n(w.values.begin() + static_cast<std::ptrdiff_t>(first - w.first), out.size(), out.begin());
      return;
    }
    if (out.size() >= kSpan / 4) {
      draws_->read_range(col_, first, out);
      return;
    }
    w.first = first;
    w.values.resize(std::min(kSpan, total_ - first));
    draws_->read_range(col_, first, w.values);
    std::copy_n(w.values.begin(), out.size(), out.begin());
  }

 private:
  struct Window {
    std::size_t first = 0;
    std::vector<double> values;
  };
  const BatchedDrawStore* draws_;
  std::size_t col_, total_;
  std::shared_ptr<Window> win_;
};

/// The summaries (and nested R-hat over `k` superchains, k > 0) of the store's columns
/// `cols`, on `threads` threads, each reading one column at a time into its buffer; past
/// diagnostics_rank_budget() (batched_streamed) each column as a streamed view read from the
/// store in blocks, nothing per draw held (the same numbers, bit for bit).
std::vector<DiagnosticSummary> summarize_columns(const BatchedDrawStore& draws, const std::vector<std::size_t>& cols,
                                                 std::size_t k, std::size_t threads, std::vector<double>& nested) {
  const auto M = static_cast<std::size_t>(draws.num_chains()), D = static_cast<std::size_t>(draws.draws());
  nested.assign(cols.size(), std::numeric_limits<double>::quiet_NaN());
  const bool streamed = batched_streamed(draws);
  return summarize_all(
      cols.size(),
      [&](std::size_t q, std::vector<double>& buffer) {
        if (streamed) {
          const std::size_t col = cols[q];
          DrawsView v(StoreColumnReader(draws, col), M, D);
          if (k > 0) nested[q] = nested_rhat(v, k);
          return v;
        }
        draws.column(cols[q], buffer);
        if (k > 0) nested[q] = nested_rhat(DrawsView(buffer, M, D), k);
        return DrawsView(buffer, M, D);
      },
      threads);
}

}  // namespace

BatchedPosterior summarize_batched_draws(const BatchedDrawStore& draws, const std::vector<std::string>& names,
                                         std::size_t k, std::size_t threads) {
  // The coordinates' summaries on `threads` threads (summarize_all: the same numbers as one
  // thread), then `batched_diagnostics`' fields from each summary.
  const auto d = static_cast<std::size_t>(draws.ndim());
  BatchedPosterior p;
  for (std::size_t j = 0; j < d; ++j) p.columns.push_back(j);
  const std::vector<DiagnosticSummary> stats = summarize_columns(draws, p.columns, k, threads, p.nested_rhat);
  for (std::size_t j = 0; j < d; ++j) {
    p.rows.push_back({names[j], stats[j]});
    const DiagnosticSummary& sum = stats[j];
    BatchedDiagnostics b;
    b.rhat = sum.rhat;
    b.ess_bulk = sum.ess_bulk;
    b.mean = sum.mean;
    b.sd = sum.sd;
    b.nested_rhat = p.nested_rhat[j];
    p.diagnostics.push_back(b);
  }
  return p;
}

namespace {

/// The quantities `index` of `target` at every draw, a group of chains at a time, into the
/// store's columns `first + e` (e: position in `index`).
void quantities_to_store(const SampleTarget& target, const std::vector<std::size_t>& index, BatchedDrawStore& draws,
                         std::size_t first) {
  const std::size_t nq = target.quantity_names.size(), ne = index.size(), dd = static_cast<std::size_t>(draws.ndim());
  const auto D = static_cast<std::size_t>(draws.draws());
  // Past the budget (batched_streamed) at most streamed_chain_group's chains per group, so
  // that what is held does not grow with the draws; else chain_group's (up to 16 MiB).
  std::int64_t group = draws.chain_group(sizeof(double) * ne);
  if (detail::batched_streamed(draws))
    group = std::min<std::int64_t>(group, static_cast<std::int64_t>(detail::streamed_chain_group(D)));
  std::vector<double> q(nq);
  std::vector<std::vector<double>> out(ne);
  MemoryBatchedSink chains;
  for (std::int64_t c0 = 0; c0 < draws.num_chains(); c0 += group) {
    const std::int64_t count = std::min(group, draws.num_chains() - c0);
    draws.read_chains(c0, count, chains, false);
    const std::size_t n = static_cast<std::size_t>(count) * D;
    for (auto& v : out) v.resize(n);
    for (std::size_t c = 0; c < n; ++c) {
      target.quantities(chains.x.data() + c * dd, q.data());
      for (std::size_t e = 0; e < ne; ++e) out[e][c] = q[index[e]];
    }
    for (std::size_t e = 0; e < ne; ++e) draws.write_chains(first + e, c0, count, out[e].data());
  }
}

}  // namespace

void add_batched_quantities(io::H5File& h5, const SampleTarget& target, const std::vector<std::string>& variable_names,
                            BatchedDrawStore& draws, BatchedPosterior& post, std::size_t superchains,
                            std::size_t threads, bool to_file) {
  if (!target.quantities || target.quantity_names.empty()) return;
  const auto M = static_cast<std::size_t>(draws.num_chains()), D = static_cast<std::size_t>(draws.draws());
  // The quantities that are not sampled coordinates, as ArviZ variables (vectors with a dimension).
  std::vector<std::string> qnames;
  std::vector<std::size_t> qindex;
  for (std::size_t i = 0; i < target.quantity_names.size(); ++i) {
    const std::string& name = target.quantity_names[i];
    if (std::find(variable_names.begin(), variable_names.end(), name) != variable_names.end()) continue;
    qnames.push_back(name);
    qindex.push_back(i);
  }
  if (qnames.empty()) return;
  const std::size_t first = draws.add_columns(qnames.size());
  quantities_to_store(target, qindex, draws, first);
  std::optional<io::H5Group> pg;
  if (to_file) pg = h5.root().open_group("posterior");
  // Their summaries on `threads` threads (summarize_all: one thread's numbers).
  std::vector<std::size_t> cols(qnames.size());
  for (std::size_t e = 0; e < cols.size(); ++e) cols[e] = first + e;
  std::vector<double> nested;
  const std::vector<DiagnosticSummary> stats = summarize_columns(draws, cols, superchains, threads, nested);
  std::vector<double> data, column;
  for (const auto& var : arviz_variables(qnames)) {
    const std::size_t k = var.columns.size();
    for (const std::size_t q : var.columns) {
      post.rows.push_back({qnames[q], stats[q]});
      post.columns.push_back(cols[q]);
      post.nested_rhat.push_back(nested[q]);
    }
    if (!pg) continue;
    // One vector's elements at a time ([chain, draw, k]; a scalar is one column), its rows
    // written a group of chains at a time: past the budget (batched_streamed) about 2^16
    // entries per group (streamed_chain_group), so that nothing per draw is held; else every
    // chain at once. The same file either way (a contiguous dataset written by rows).
    std::vector<hsize_t> shape{static_cast<hsize_t>(M), static_cast<hsize_t>(D)};
    std::vector<std::string> dims{"chain", "draw"};
    if (var.is_vector) {
      std::vector<std::int64_t> idx(k);
      for (std::size_t e = 0; e < idx.size(); ++e) idx[e] = static_cast<std::int64_t>(e);
      pg->create_coordinate<std::int64_t>(var.name + "_dim_0", idx);
      shape.push_back(static_cast<hsize_t>(k));
      dims.push_back(var.name + "_dim_0");
    }
    io::H5Dataset ds = pg->create_dataset<double>(var.name, shape);
    const std::size_t group = detail::batched_streamed(draws) ? detail::streamed_chain_group(D * k) : M;
    for (std::size_t c0 = 0; c0 < M; c0 += group) {
      const std::size_t count = std::min(group, M - c0), len = count * D;
      data.resize(len * k);
      column.resize(len);
      for (std::size_t e = 0; e < k; ++e) {
        draws.read_range(cols[var.columns[e]], c0 * D, column);
        for (std::size_t c = 0; c < len; ++c) data[c * k + e] = column[c];
      }
      ds.write_rows(c0, std::span<const double>(data));
    }
    pg->attach_dimensions(ds, dims);
  }
}

void write_batched_h5_attributes(io::H5File& h5, const BatchedRunFacts& f) {
  detail::write_h5_root_attributes(h5, "batched DRAM (herd, docs/batched.md)", *f.specs, *f.target, *f.options);
  if (f.specs->h5_posterior == "compact") h5.root().set_attribute("h5_posterior", f.specs->h5_posterior);
}

namespace {

/// True when the run adapted its proposal: an adaptation other than "none" and a warm-up to
/// adapt in (warmup = 0 leaves every chain with the start proposal).
bool adapted(const BatchedDramOptions& o) { return o.adaptation != BatchedAdaptation::kNone && o.warmup > 0; }

/// Why a run that did not adapt (`adapted` false) did not.
const char* why_not_adapted(const BatchedDramOptions& o) {
  return o.adaptation == BatchedAdaptation::kNone ? "batched_adaptation = \"none\"" : "warmup = 0";
}

/// The report's sentence on how the chains' proposal was adapted and why the chains do not
/// depend on the layout of processes: pooling is a fixed summation tree over global chain ids;
/// per chain and unadapted proposals involve no other chain.
std::string adaptation_sentence(const BatchedDramOptions& o) {
  if (!adapted(o))
    return fmt::format(
        "no adaptation ({}): every chain keeps the start proposal (a chain depends only on its global id, the "
        "same for every layout of processes)",
        why_not_adapted(o));
  if (o.adaptation == BatchedAdaptation::kPerChain)
    return "per-chain adaptation: each chain adapts its own proposal from its own warm-up (a chain depends only on "
           "its global id, the same for every layout of processes)";
  return "pooled adaptation pools the chains of all processes (a fixed summation tree over global chain ids: the "
         "same chains for every layout of processes)";
}

/// The report's line on the adaptation (`adaptation_sentence`) and nested R-hat's superchains.
std::string superchain_line(const BatchedRunFacts& f) {
  const SamplerSpecs& specs = *f.specs;
  const std::size_t k = f.superchains;
  return fmt::format("{}; nested R-hat: {}\n", adaptation_sentence(f.all_options),
                     k > 0 ? fmt::format("{} superchains of {} contiguous global chain ids ({}), {}", k,
                                         f.totals.num_chains / static_cast<std::int64_t>(k),
                                         specs.superchains >= 2 ? "superchains" : "chosen: superchains = 0",
                                         specs.random_start_point && specs.random_start_point_scope == "superchain"
                                             ? "each superchain from its own random start"
                                         : specs.random_start_point ? "every chain from its own random start"
                                                                    : "every chain from the same start")
                           : std::string("not computed (needs a chain count divisible by 2, 4, 8 or 16, >= 4)"));
}

/// The report's line on the checkpoints of this session.
std::string checkpoint_line(const BatchedRunFacts& f) {
  const SamplerSpecs& specs = *f.specs;
  const BatchedRestartRecord* record = f.record;
  if (record == nullptr)
    return "checkpoints: none (checkpoint_period = checkpoint_period_seconds = 0; an interrupted run starts afresh)\n";
  const std::string every =
      specs.checkpoint_period > 0 && specs.checkpoint_period_seconds > 0
          ? fmt::format("every {} proposals or {} s", specs.checkpoint_period, specs.checkpoint_period_seconds)
      : specs.checkpoint_period > 0 ? fmt::format("every {} proposals", specs.checkpoint_period)
                                    : fmt::format("every {} s", specs.checkpoint_period_seconds);
  std::string s = fmt::format(
      "checkpoints: {} written to {}_restart/ ({}), {:.3f} s in all ({:.2f}% of this session's wall time {:.3f} s)",
      record->checkpoints, specs.output_prefix, every, record->checkpoint_seconds,
      100.0 * record->checkpoint_seconds / std::max(f.session_seconds, 1e-12), f.session_seconds);
  if (record->resumed())
    s += fmt::format("; resumed at proposal {} with {} draws per chain recorded", record->resumed_at(),
                     record->draws_done());
  return s + "\n";
}

}  // namespace

std::string batched_text_report(const BatchedRunFacts& f, const BatchedPosterior& post, const std::string& table,
                                const std::string& warnings) {
  const SamplerSpecs& specs = *f.specs;
  const int size = f.processes;
  std::string rep = "herd-sample report (batched DRAM, docs/batched.md)\n";
  rep += fmt::format("target: {}\ndevice: {} on {} process{}, {} chains each (global chain ids rank x {} + i)\n",
                     f.target->description, specs.device, size, size > 1 ? "es" : "", specs.chains_per_rank,
                     specs.chains_per_rank);
  rep += "\n== resolved input ==\n" + f.options->resolved_input + "\n";
  rep += "\n== run ==\n" + batched_report(f.all_options, f.totals, post.diagnostics);
  rep += superchain_line(f);
  rep += checkpoint_line(f);
  rep +=
      "not used by batched devices: parallelization_model, adaptive_update_count, greedy_adaptation_count, "
      "burnin_adaptation_measure, target_acceptance_rate, chain_file_format (sample_size and the refinement make "
      "the .h5's sample group of the recorded draws)\n";
  rep += "\n== posterior (thinned draws after the warm-up): statistics and diagnostics ==\n" + table;
  if (!warnings.empty()) rep += "\n== convergence warnings ==\n" + warnings;
  rep += fmt::format("\noutputs: {}.h5 ({}chain_compact, sample, diagnostics), {}_report.txt, {}_report.html\n",
                     specs.output_prefix,
                     specs.h5_posterior == "compact" ? "" : "posterior, sample_stats/lp [chain, draw], ",
                     specs.output_prefix, specs.output_prefix);
  return rep;
}

namespace {

/// The "Run" facts of the HTML report.
std::vector<std::pair<std::string, std::string>> html_facts(const BatchedRunFacts& f) {
  const SamplerSpecs& specs = *f.specs;
  const BatchedDramResult& t = f.totals;
  const int size = f.processes;
  return {{"dimension", std::to_string(f.all_options.ndim)},
          {"chains",
           fmt::format("{} ({} process{} x {})", t.num_chains, size, size > 1 ? "es" : "", specs.chains_per_rank)},
          {"random seed", std::to_string(specs.random_seed)},
          {"warm-up proposals per chain", std::to_string(specs.warmup)},
          {"draws per chain (thinned)", fmt::format("{} (thin {})", f.draws, specs.thin)},
          {"mean acceptance rate after the warm-up", fmt::format("{:.4f}", t.acceptance_rate)},
          {"chain-steps per second", fmt::format("{:.4g}", t.chain_steps_per_second)},
          {"wall time", fmt::format("{:.3f} s", t.seconds)},
          {"outputs", specs.output_prefix + ".h5, " + specs.output_prefix + "_report.txt"}};
}

/// One quantity's draws of one chain (the store's column `col`), read in order block by block
/// from the store as states of weight 1: what the HTML report's `open_states` reads past
/// diagnostics_rank_budget() (batched_streamed), instead of a whole column per quantity.
class StoreStateSource final : public PosteriorStateSource {
 public:
  StoreStateSource(const BatchedDrawStore& draws, std::size_t col, std::size_t chain)
      : draws_(draws), col_(col), chain_(chain), n_(static_cast<std::size_t>(draws.draws())) {}
  void read(std::span<double> values, std::span<std::uint32_t> weights) override {
    const std::size_t take = std::min(values.size(), n_ - i_);
    if (take > 0) draws_.read_range(col_, chain_ * n_ + i_, values.first(take));
    std::fill(values.begin() + static_cast<std::ptrdiff_t>(take), values.end(), 0.0);
    if (!weights.empty()) {
      std::fill_n(weights.begin(), take, 1u);
      std::fill(weights.begin() + static_cast<std::ptrdiff_t>(take), weights.end(), 0u);
    }
    i_ += take;
  }

 private:
  const BatchedDrawStore& draws_;
  std::size_t col_, chain_, n_;
  std::size_t i_ = 0;  // the next draw
};

}  // namespace

void write_batched_html_report(const BatchedRunFacts& f, const BatchedPosterior& post, const BatchedDrawStore& draws) {
  if (f.draws < 1) return;
  const SamplerSpecs& specs = *f.specs;
  const BatchedDramOptions& o = f.all_options;
  PosteriorReportData h = detail::html_report_data(
      specs, *f.target, *f.options, fmt::format("batched DRAM (docs/batched.md) on {}", specs.device), post.rows,
      static_cast<std::size_t>(f.totals.num_chains), static_cast<std::size_t>(f.draws), f.totals.acceptance_rate,
      detail::start_covariance(o.proposal_start_cov, o.proposal_start_std, o.ndim));
  // One quantity's draws at a time, from the store; past diagnostics_rank_budget() each
  // chain's draws block by block (states of weight 1: the same report), nothing per draw.
  if (batched_streamed(draws)) {
    h.states = static_cast<std::size_t>(f.draws);
    h.open_states = [&](std::size_t q, std::size_t c, bool /*weights*/) -> std::unique_ptr<PosteriorStateSource> {
      return std::make_unique<StoreStateSource>(draws, post.columns[q], c);
    };
  } else {
    h.fill_values = [&](std::size_t q, std::vector<double>& out) { draws.column(post.columns[q], out); };
  }
  h.facts = html_facts(f);
  h.history_note =
      "Batched runs do not record the acceptance rate and adaptation over the run: the table gives "
      "the mean acceptance rate after the warm-up.";
  const auto du = static_cast<std::size_t>(o.ndim);
  // Without adaptation the proposal after the warm-up is the start one: shown once.
  if (adapted(o) && f.totals.proposal_cov.size() == du * du)
    h.final_covariances.emplace_back(o.adaptation == BatchedAdaptation::kPerChain
                                         ? "proposal after the warm-up (chain 1)"
                                         : "proposal after the warm-up (shared)",
                                     f.totals.proposal_cov);
  h.covariance_note = adapted(o)
                          ? "Batched runs keep the start proposal covariance and the one frozen after the warm-up, not "
                            "their history: the figure shows those two."
                          : fmt::format(
                                "This run did not adapt its proposal ({}): every chain used the start proposal "
                                "throughout, and the figure shows it.",
                                why_not_adapted(o));
  h.run_longer = kBatchedRunLonger;
  h.nested_rhat = post.nested_rhat;  // the verdicts judge superchains on nested R-hat
  h.superchains = f.superchains;
  h.superchains_share_start = !specs.random_start_point;
  write_posterior_report(specs.output_prefix + "_report.html", h);
}

void write_text_output(const std::string& path, const std::string& text) { detail::write_report_file(path, text); }

void print_batched_summary(const BatchedRunFacts& f, const std::string& table, const std::string& warnings) {
  const SamplerSpecs& specs = *f.specs;
  if (f.options->quiet || specs.silent_mode) return;
  const BatchedDramResult& t = f.totals;
  std::FILE* out = f.options->terminal != nullptr ? f.options->terminal : stdout;
  std::fprintf(out, "\n%s", table.c_str());
  std::fprintf(out,
               "\n%lld chain%s x %lld draws (thin %lld after %lld warm-up proposals), acceptance rate %.3f, "
               "%.4g chain-steps/s, %.2f s\n",
               static_cast<long long>(t.num_chains), t.num_chains == 1 ? "" : "s", static_cast<long long>(f.draws),
               static_cast<long long>(specs.thin), static_cast<long long>(specs.warmup), t.acceptance_rate,
               t.chain_steps_per_second, t.seconds);
  std::fprintf(out, "%s", warnings.c_str());
  std::fprintf(out, "%s", detail::outputs_list(output_paths(specs, f.processes)).c_str());
  std::fflush(out);
}

}  // namespace herd::mcmc
