// The serial run's `.h5` groups filled from a batched run's draws: chain_compact, sample,
// diagnostics (herd/mcmc/run/batched_outputs.hpp, write_batched_serial_groups).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <hdf5.h>

#include "herd/core/error.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/refinement.hpp"
#include "herd/mcmc/run/batched_outputs.hpp"
#include "outputs.hpp"

namespace herd::mcmc {

namespace {

/// One chain's recorded draws in compact form: runs of equal consecutive draws merged.
struct CompactDraws {
  std::vector<std::size_t> first;    ///< draw index of each compact row
  std::vector<std::int64_t> weight;  ///< its run length
};

CompactDraws compact_chain(const MemoryBatchedSink& draws, std::size_t c) {
  const auto D = static_cast<std::size_t>(draws.draws), d = static_cast<std::size_t>(draws.ndim);
  CompactDraws out;
  for (std::size_t t = 0; t < D; ++t) {
    const double* x = draws.x.data() + (c * D + t) * d;
    const bool same = t > 0 && std::equal(x, x + d, x - d) && draws.lp[c * D + t] == draws.lp[c * D + t - 1];
    if (same) {
      ++out.weight.back();
    } else {
      out.first.push_back(t);
      out.weight.push_back(1);
    }
  }
  return out;
}

/// A run of `weight` copies of draw `draw` in a chain's refined sample.
struct SampleRun {
  std::uint32_t draw, weight;
};

/// Every chain's sample, as its draw indices in order (each repeated by its weight):
/// `sample_size` evenly spaced draws, every draw (refinement count 0), or ParaDRAM's
/// refinement of the compact chain, whose runs are the only thing kept (8 bytes each).
class ChainSamples {
 public:
  ChainSamples(const SamplerSpecs& specs, std::size_t chains, std::size_t draws)
      : specs_(specs), draws_(draws), begin_(1, 0), sizes_(chains, 0) {
    HERD_REQUIRE(draws <= UINT32_MAX, "batched outputs: {} draws per chain, at most 2^32 - 1", draws);
  }
  /// Whether the sample needs the refinement (`add_refined` for every chain in order).
  bool refined() const { return draws_ > 0 && specs_.sample_size <= 0 && specs_.sample_refinement_count != 0; }
  /// Chain c's refined runs (chains in order).
  void add_refined(std::size_t c, const std::vector<SampleRun>& runs) {
    std::size_t n = 0;
    for (const SampleRun& r : runs) n += r.weight;
    sizes_[c] = n;
    runs_.insert(runs_.end(), runs.begin(), runs.end());
    begin_.push_back(runs_.size());
  }
  /// Draw indices of chain c's sample into `rows` (replaced).
  void rows(std::size_t c, std::vector<std::size_t>& rows) const {
    rows.clear();
    if (draws_ == 0) return;
    if (specs_.sample_size > 0) {
      for (std::int64_t k = 0; k < specs_.sample_size; ++k)
        rows.push_back(static_cast<std::size_t>(std::floor(
            (static_cast<double>(k) + 0.5) * static_cast<double>(draws_) / static_cast<double>(specs_.sample_size))));
      return;
    }
    if (specs_.sample_refinement_count == 0) {
      for (std::size_t t = 0; t < draws_; ++t) rows.push_back(t);
      return;
    }
    for (std::size_t i = begin_[c]; i < begin_[c + 1]; ++i) rows.insert(rows.end(), runs_[i].weight, runs_[i].draw);
  }
  /// The number of draws in chain c's sample.
  std::size_t size(std::size_t c) const {
    if (draws_ == 0) return 0;
    if (specs_.sample_size > 0) return static_cast<std::size_t>(specs_.sample_size);
    if (specs_.sample_refinement_count == 0) return draws_;
    return sizes_[c];
  }

 private:
  const SamplerSpecs& specs_;
  std::size_t draws_;
  std::vector<std::size_t> begin_;  // chain c's runs: [begin_[c], begin_[c + 1])
  std::vector<SampleRun> runs_;
  std::vector<std::size_t> sizes_;
};

/// ParaDRAM's refinement of chain c of `draws` (a group of chains), as runs of draws.
std::vector<SampleRun> refined_runs(const MemoryBatchedSink& draws, std::size_t c, const CompactDraws& cd,
                                    const SamplerSpecs& specs) {
  const auto D = static_cast<std::size_t>(draws.draws), d = static_cast<std::size_t>(draws.ndim);
  const std::size_t n = cd.first.size();
  std::vector<double> states(n * (d + 1));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t t = cd.first[i];
    states[i * (d + 1)] = draws.lp[c * D + t];
    std::copy_n(draws.x.data() + (c * D + t) * d, d, states.begin() + static_cast<std::ptrdiff_t>(i * (d + 1) + 1));
  }
  const RefinementOptions ro = to_refinement_options(specs);
  const RefinedSample r = refine_sample(states, cd.weight, d + 1, ro);
  std::vector<SampleRun> runs;
  for (std::size_t k = 0; k < r.index.size(); ++k)
    if (r.weight[k] > 0)
      runs.push_back({static_cast<std::uint32_t>(cd.first[r.index[k]]), static_cast<std::uint32_t>(r.weight[k])});
  return runs;
}

/// Calls `f(group, c, global chain)` for every chain, reading the store a group of chains at
/// a time (`extra` bytes per draw more for the caller; `stats`: with the per-draw statistics).
template <class F>
void for_each_chain(const BatchedDrawStore& draws, std::size_t extra, bool stats, F&& f) {
  MemoryBatchedSink group;
  const std::int64_t size = draws.chain_group(extra);
  for (std::int64_t c0 = 0; c0 < draws.num_chains(); c0 += size) {
    const std::int64_t count = std::min(size, draws.num_chains() - c0);
    draws.read_chains(c0, count, group, stats);
    for (std::int64_t c = 0; c < count; ++c) f(group, static_cast<std::size_t>(c), static_cast<std::size_t>(c0 + c));
  }
}

/// A dataset `[rows]` or `[rows, k]` of element type T written a block of rows at a time
/// (a chain's compact rows), so that no copy of all chains' rows is held in memory.
template <typename T>
class RowWriter {
 public:
  RowWriter(const io::H5Group& g, const std::string& name, std::size_t rows, std::size_t k = 0) : k_(k) {
    const hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(k)};
    const hsize_t chunk[2] = {static_cast<hsize_t>(std::clamp<std::size_t>(rows, 1, 4096)), static_cast<hsize_t>(k)};
    const int rank = k > 0 ? 2 : 1;
    const hid_t space = H5Screate_simple(rank, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (rows > 0) H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_obj_track_times(dcpl, false);
    id_ = H5Dcreate2(g.id(), name.c_str(), io::detail::native_type<T>(), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (id_ < 0) throw IoError(fmt::format("cannot create the dataset {}/{}", g.path(), name));
  }
  ~RowWriter() {
    if (id_ >= 0) H5Dclose(id_);
  }
  RowWriter(const RowWriter&) = delete;
  RowWriter& operator=(const RowWriter&) = delete;
  /// Appends `data.size()` / max(k, 1) rows.
  void append(const std::vector<T>& data) {
    const std::size_t n = data.size() / std::max<std::size_t>(k_, 1);
    if (n == 0) return;
    const hid_t fs = H5Dget_space(id_);
    const hsize_t start[2] = {static_cast<hsize_t>(next_), 0},
                  count[2] = {static_cast<hsize_t>(n), static_cast<hsize_t>(k_)};
    const int rank = k_ > 0 ? 2 : 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(rank, count, nullptr);
    const herr_t e = H5Dwrite(id_, io::detail::native_type<T>(), ms, fs, H5P_DEFAULT, data.data());
    H5Sclose(ms);
    H5Sclose(fs);
    if (e < 0) throw IoError("writing chain_compact to the HDF5 file failed");
    next_ += n;
  }

 private:
  hid_t id_ = -1;
  std::size_t k_, next_ = 0;
};

/// With `h5_posterior = "compact"`, `chain_compact`'s derived quantities (those the target
/// names that are not variables, which the verbose file keeps in `posterior` only):
/// `derived_quantity` [derived_quantity] (names) and `derived_quantities` [compact_draw,
/// derived_quantity], the target's quantities at each compact row's state, chain by chain.
void write_derived_quantities(io::H5Group& cc, const BatchedRunFacts& f, const BatchedDrawStore& draws,
                              std::size_t rows) {
  const SampleTarget& target = *f.target;
  if (!target.quantities || target.quantity_names.empty()) return;
  const std::vector<std::string>& vars = f.specs->variable_names;
  std::vector<std::string> names;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < target.quantity_names.size(); ++i)
    if (std::find(vars.begin(), vars.end(), target.quantity_names[i]) == vars.end()) {
      names.push_back(target.quantity_names[i]);
      index.push_back(i);
    }
  if (names.empty()) return;
  const auto D = static_cast<std::size_t>(draws.draws()), d = static_cast<std::size_t>(draws.ndim());
  cc.write_strings("derived_quantity", names).make_scale("derived_quantity");
  {
    RowWriter<double> out(cc, "derived_quantities", rows, names.size());
    std::vector<double> q(target.quantity_names.size()), block;
    for_each_chain(draws, 0, false, [&](const MemoryBatchedSink& g, std::size_t c, std::size_t /*chain*/) {
      block.clear();
      for (std::size_t t : compact_chain(g, c).first) {
        target.quantities(g.x.data() + (c * D + t) * d, q.data());
        for (std::size_t i : index) block.push_back(q[i]);
      }
      out.append(block);
    });
  }
  io::H5Dataset ds = cc.open_dataset("derived_quantities");
  cc.attach_dimensions(ds, {"compact_draw", "derived_quantity"});
}

/// `chain_compact`: every chain's recorded draws in compact form, in chain order, written
/// chain by chain from groups of chains read from the store (its `compact_rows` give the
/// datasets' sizes); in the same pass each chain's sample is refined into `samples` when
/// the input asks for ParaDRAM's refinement.
void write_chain_compact(io::H5Group& root, const BatchedRunFacts& f, const BatchedDrawStore& draws,
                         ChainSamples& samples) {
  const auto D = static_cast<std::size_t>(draws.draws()), d = static_cast<std::size_t>(draws.ndim());
  const auto m = static_cast<std::size_t>(draws.num_chains());
  std::size_t rows = 0;
  for (const std::int64_t r : draws.compact_rows()) rows += static_cast<std::size_t>(r);
  const bool refine = samples.refined();
  io::H5Group cc = root.create_group("chain_compact");
  cc.create_dimension("compact_draw", rows);
  cc.write_strings("variable", f.specs->variable_names).make_scale("variable");
  {
    RowWriter<std::uint64_t> step(cc, "step", rows);
    RowWriter<std::int64_t> weight(cc, "weight", rows);
    std::unique_ptr<RowWriter<std::int64_t>> chain;
    if (m > 1) chain = std::make_unique<RowWriter<std::int64_t>>(cc, "chain", rows);
    RowWriter<double> logd(cc, "log_density", rows), state(cc, "state", rows, d);
    // The row's state's record, as the serial run's ChainRecord (the values of its first draw:
    // every draw of a row holds the same state).
    RowWriter<std::int32_t> stage(cc, "dr_stage", rows);
    RowWriter<double> alpha(cc, "acceptance_probability", rows), measure(cc, "adaptation_measure", rows);
    for_each_chain(draws, 0, true, [&](const MemoryBatchedSink& g, std::size_t c, std::size_t global) {
      const CompactDraws cd = compact_chain(g, c);
      if (refine) samples.add_refined(global, refined_runs(g, c, cd, *f.specs));
      std::vector<std::uint64_t> st;
      std::vector<double> lp, x, al, me;
      std::vector<std::int32_t> sg;
      for (std::size_t t : cd.first) {
        sg.push_back(g.dr_stage[c * D + t]);
        al.push_back(g.acceptance_probability[c * D + t]);
        me.push_back(g.adaptation_measure[c * D + t]);
        // The proposal after which the draw was recorded (1-based, warm-up included).
        st.push_back(static_cast<std::uint64_t>(f.specs->warmup + static_cast<std::int64_t>(t + 1) * f.specs->thin));
        lp.push_back(g.lp[c * D + t]);
        x.insert(x.end(), g.x.begin() + static_cast<std::ptrdiff_t>((c * D + t) * d),
                 g.x.begin() + static_cast<std::ptrdiff_t>((c * D + t + 1) * d));
      }
      step.append(st);
      weight.append(cd.weight);
      logd.append(lp);
      state.append(x);
      stage.append(sg);
      alpha.append(al);
      measure.append(me);
      if (chain) chain->append(std::vector<std::int64_t>(cd.first.size(), static_cast<std::int64_t>(global)));
    });
  }
  for (const char* name :
       {"step", "weight", "log_density", "dr_stage", "acceptance_probability", "adaptation_measure"}) {
    io::H5Dataset ds = cc.open_dataset(name);
    cc.attach_dimensions(ds, {"compact_draw"});
  }
  io::H5Dataset st = cc.open_dataset("state");
  cc.attach_dimensions(st, {"compact_draw", "variable"});
  if (f.specs->h5_posterior == "compact") write_derived_quantities(cc, f, draws, rows);
  cc.set_attribute("burnin", std::int64_t{0});  // the warm-up is not recorded
  if (m > 1) {
    io::H5Dataset ch = cc.open_dataset("chain");
    cc.attach_dimensions(ch, {"compact_draw"});
    cc.create_dimension("chains", m);
    io::H5Dataset b = cc.write<std::int64_t>("burnin", std::vector<std::int64_t>(m, 0));
    cc.attach_dimensions(b, {"chains"});
  }
}

// Past diagnostics_rank_budget() (detail::batched_streamed) the `.h5` groups read the store's
// columns a group of chains at a time (detail::streamed_chain_group) instead of whole, as the
// summaries stream them. The same file either way.
using detail::batched_streamed;
using detail::streamed_chain_group;

/// `sample_stats`' per-draw statistics (the group and its `chain`, `draw` scales are the gather
/// sink's), with the serial run's dtypes and meaning: accepted (u8), and the accepting stage
/// (i32) and acceptance probability (f64) on accepted draws, 0 on the others. One dataset at
/// a time, so rank 0 holds at most 10 bytes per draw while writing.
void write_sample_stats(io::H5Group& root, const BatchedDrawStore& draws) {
  io::H5Group stats = root.open_group("sample_stats");
  const auto M = static_cast<std::size_t>(draws.num_chains()), D = static_cast<std::size_t>(draws.draws());
  if (batched_streamed(draws)) {
    // Each dataset made as below (the same file), its rows written a group of chains at a time.
    const std::size_t group = streamed_chain_group(D);
    std::vector<std::uint8_t> acc, st;
    const auto each_group = [&](const char* name, auto tag, auto&& fill) {
      using T = decltype(tag);
      io::H5Dataset ds = stats.create_dataset<T>(name, {M, D});
      std::vector<T> rows;
      for (std::size_t c0 = 0; c0 < M; c0 += group) {
        const std::size_t count = std::min(group, M - c0), len = count * D;
        acc.resize(len);
        draws.read_bytes_range(false, c0 * D, acc);
        rows.resize(len);
        fill(c0 * D, len, rows);
        ds.write_rows(c0, std::span<const T>(rows));
      }
      stats.attach_dimensions(ds, {"chain", "draw"});
    };
    each_group("accepted", std::uint8_t{}, [&](std::size_t, std::size_t len, std::vector<std::uint8_t>& out) {
      std::copy_n(acc.begin(), len, out.begin());
    });
    each_group("dr_stage", std::int32_t{}, [&](std::size_t first, std::size_t len, std::vector<std::int32_t>& out) {
      st.resize(len);
      draws.read_bytes_range(true, first, st);
      for (std::size_t q = 0; q < len; ++q) out[q] = acc[q] != 0 ? st[q] : 0;
    });
    each_group("acceptance_probability", double{}, [&](std::size_t first, std::size_t len, std::vector<double>& out) {
      draws.read_range(draws.alpha_column(), first, out);
      for (std::size_t q = 0; q < len; ++q)
        if (acc[q] == 0) out[q] = 0.0;
    });
    detail::describe_sample_stats(stats);
    return;
  }
  auto put = [&](const char* name, const auto& values) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    io::H5Dataset ds = stats.write<T>(name, values, {M, D});
    stats.attach_dimensions(ds, {"chain", "draw"});
  };
  std::vector<std::uint8_t> accepted;
  draws.read_bytes_column(false, accepted);
  put("accepted", accepted);
  {
    std::vector<std::uint8_t> dr_stage;
    draws.read_bytes_column(true, dr_stage);
    std::vector<std::int32_t> stage(dr_stage.size());
    for (std::size_t q = 0; q < stage.size(); ++q) stage[q] = accepted[q] != 0 ? dr_stage[q] : 0;
    put("dr_stage", stage);
  }
  std::vector<double> alpha;
  draws.column(draws.alpha_column(), alpha);
  for (std::size_t q = 0; q < alpha.size(); ++q)
    if (accepted[q] == 0) alpha[q] = 0.0;
  put("acceptance_probability", alpha);
  detail::describe_sample_stats(stats);
}

/// `sample`: the chains' samples, in chain order, a variable at a time.
void write_sample(io::H5Group& root, const BatchedRunFacts& f, const BatchedDrawStore& draws,
                  const ChainSamples& samples) {
  const auto D = static_cast<std::size_t>(draws.draws());
  const auto m = static_cast<std::size_t>(draws.num_chains());
  std::size_t n = 0;
  for (std::size_t c = 0; c < m; ++c) n += samples.size(c);
  io::H5Group sg = root.create_group("sample");
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::int64_t>(i);
  sg.create_coordinate<std::int64_t>("sample", idx);
  idx = std::vector<std::int64_t>();  // frees it (`= {}` would keep the capacity)
  std::vector<double> v;
  std::vector<std::size_t> rows;
  // The samples of the store's columns `cols` (interleaved: [sample, cols.size()]) into v.
  std::vector<std::vector<double>> cv;
  // Past diagnostics_rank_budget() (batched_streamed) the columns are read a group of chains
  // at a time (cv holds [group, D] per column, its chains from c0), else whole.
  const bool streamed = batched_streamed(draws);
  const std::size_t group = streamed ? streamed_chain_group(D) : m;
  auto sampled = [&](const std::vector<std::size_t>& cols) {
    cv.resize(cols.size());
    v.clear();
    v.reserve(n * cols.size());
    for (std::size_t c0 = 0; c0 < m; c0 += group) {
      const std::size_t count = std::min(group, m - c0);
      for (std::size_t e = 0; e < cols.size(); ++e) {
        if (!streamed) {
          draws.column(cols[e], cv[e]);
          continue;
        }
        cv[e].resize(count * D);
        draws.read_range(cols[e], c0 * D, cv[e]);
      }
      for (std::size_t c = c0; c < c0 + count; ++c) {
        samples.rows(c, rows);
        for (std::size_t t : rows)
          for (const auto& col : cv) v.push_back(col[(c - c0) * D + t]);
      }
    }
    for (auto& col : cv) col = {};
  };
  sampled({draws.lp_column()});
  io::H5Dataset lp = sg.write<double>("lp", v);
  sg.attach_dimensions(lp, {"sample"});
  for (const auto& var : arviz_variables(f.specs->variable_names)) {
    sampled(var.columns);
    if (!var.is_vector) {
      io::H5Dataset dk = sg.write<double>(var.name, v);
      sg.attach_dimensions(dk, {"sample"});
      continue;
    }
    const std::string dim = var.name + "_dim_0";
    if (!sg.contains(dim)) {
      std::vector<std::int64_t> e(var.columns.size());
      for (std::size_t i = 0; i < e.size(); ++i) e[i] = static_cast<std::int64_t>(i);
      sg.create_coordinate<std::int64_t>(dim, e);
    }
    sg.write_variable<double>(var.name, v, {"sample", dim});
  }
  if (m > 1) {
    std::vector<std::int64_t> ch;
    ch.reserve(n);
    for (std::size_t c = 0; c < m; ++c) ch.insert(ch.end(), samples.size(c), static_cast<std::int64_t>(c));
    io::H5Dataset dc = sg.write<std::int64_t>("chain_id", ch);
    sg.attach_dimensions(dc, {"sample"});
  }
}

/// ParaDRAM's pairwise KS table of the chains' samples, `[variable][chain a * M + chain b]`:
/// for 2..kMaxKsChains chains, each with a sample; else empty.
std::vector<std::vector<KsResult>> ks_tables(const BatchedDrawStore& draws, const ChainSamples& samples) {
  const auto M = static_cast<std::size_t>(draws.num_chains()), D = static_cast<std::size_t>(draws.draws());
  bool samples_ok = true;
  for (std::size_t c = 0; c < M; ++c) samples_ok = samples_ok && samples.size(c) > 0;
  if (M < 2 || M > static_cast<std::size_t>(detail::kMaxKsChains) || !samples_ok) return {};
  const auto d = static_cast<std::size_t>(draws.ndim());
  std::vector<std::vector<KsResult>> ks;
  std::vector<std::vector<double>> sample(M);
  std::vector<double> column;
  std::vector<std::size_t> rows;
  for (std::size_t j = 0; j < d; ++j) {
    // One chain's draws at a time (at most kMaxKsChains chains, each of D draws).
    column.resize(D);
    for (std::size_t c = 0; c < M; ++c) {
      draws.read_range(j, c * D, column);
      sample[c].clear();
      samples.rows(c, rows);
      for (std::size_t t : rows) sample[c].push_back(column[t]);
    }
    ks.push_back(ks_pairwise(std::span<const std::vector<double>>(sample)));
  }
  return ks;
}

/// `diagnostics` (detail::write_h5_diagnostics): the summary of every quantity (variables,
/// then derived quantities), nested R-hat over the superchains, and for 2..16 chains
/// ParaDRAM's pairwise KS table of the chains' samples.
void write_diagnostics(io::H5File& h5, const BatchedRunFacts& f, const BatchedDrawStore& draws,
                       const BatchedPosterior& post, const ChainSamples& samples) {
  const auto M = static_cast<std::size_t>(draws.num_chains());
  std::vector<double> nested;
  if (f.superchains >= 2) nested = post.nested_rhat;
  const std::vector<std::vector<KsResult>> ks = ks_tables(draws, samples);
  detail::write_h5_diagnostics(
      h5, {.summary = post.rows,
           .nested_rhat = nested,
           .superchains = f.superchains,
           .ks = ks,
           .chains = M,
           .ks_tested = "the chains' samples of the recorded (thinned) draws (sample_size, or ParaDRAM's refinement)"});
}

}  // namespace

void write_batched_serial_groups(io::H5File& h5, const BatchedRunFacts& facts, const BatchedDrawStore& draws,
                                 const BatchedPosterior& post) {
  const auto M = static_cast<std::size_t>(draws.num_chains());
  ChainSamples samples(*facts.specs, M, static_cast<std::size_t>(draws.draws()));
  io::H5Group root = h5.root();
  if (facts.specs->h5_posterior != "compact") write_sample_stats(root, draws);
  write_chain_compact(root, facts, draws, samples);  // also refines the samples
  write_sample(root, facts, draws, samples);
  write_diagnostics(h5, facts, draws, post, samples);
}

}  // namespace herd::mcmc
