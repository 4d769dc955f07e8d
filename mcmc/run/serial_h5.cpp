// The `.h5` of a serial, multi-chain or fork-join run (serial_run.hpp): ArviZ's posterior
// and sample_stats groups `[chain, draw]` (not with h5_posterior = "compact"), the compact
// chains and the refined samples (the diagnostics group is every engine's
// `write_h5_diagnostics`, outputs.hpp).
#include <algorithm>
#include <type_traits>
#include <utility>

#include "serial_run.hpp"

namespace herd::mcmc::detail {

namespace {

/// The chains' global ids and the draw indices, the `chain` and `draw` coordinates.
std::vector<std::int64_t> chain_ids(const SerialRun& r) {
  std::vector<std::int64_t> chain_idx(r.m);
  for (std::size_t c = 0; c < r.m; ++c) chain_idx[c] = static_cast<std::int64_t>(r.chains[c].chain_id);
  return chain_idx;
}

/// Rows a `.h5` writer reads from the chains: written in pieces of kRows rows.
constexpr std::size_t kRows = 8192;

/// Writes the rows of `ds` appended to `piece` (a row's `width` values, then row_done())
/// whenever kRows rows are there, and the rest at finish(): the same bytes as one write of all
/// rows, with at most kRows rows resident. Not thread-safe.
template <class T>
class RowPieces {
 public:
  RowPieces(io::H5Dataset& ds, std::vector<T>& piece, std::size_t width)
      : ds_(ds), piece_(piece), full_(kRows * width) {
    piece_.clear();
  }
  void row_done() {
    if (piece_.size() < full_) return;
    ds_.write_rows<T>(at_, piece_);
    at_ += kRows;
    piece_.clear();
  }
  void finish() { ds_.write_rows<T>(at_, piece_); }

 private:
  io::H5Dataset& ds_;
  std::vector<T>& piece_;
  std::size_t full_;
  hsize_t at_ = 0;
};

std::vector<std::int64_t> iota(std::size_t n) {
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::int64_t>(i);
  return idx;
}

/// The coordinate `name` holding 0, 1, ..., n - 1 (int64), written in pieces of 128 Ki values
/// (the `draw` coordinate has one value per draw of a chain: no whole column of them is
/// resident); the same bytes as create_coordinate of iota(n).
void iota_coordinate(io::H5Group& g, const std::string& name, std::size_t n) {
  io::H5Dataset ds = g.create_dataset<std::int64_t>(name, {static_cast<hsize_t>(n)});
  constexpr std::size_t kPiece = 131072;
  std::vector<std::int64_t> piece;
  piece.reserve(std::min(n, kPiece));
  for (std::size_t at = 0; at < n; at += kPiece) {
    piece.clear();
    for (std::size_t i = at; i < std::min(n, at + kPiece); ++i) piece.push_back(static_cast<std::int64_t>(i));
    ds.write_rows<std::int64_t>(at, piece);
  }
  ds.make_scale(name);
}

/// A vector's coordinate dimension `<name>_dim_0`, once per group that uses it.
std::string vector_dim(io::H5Group& g, const ArvizVariable& v) {
  g.create_coordinate<std::int64_t>(v.name + "_dim_0", iota(v.columns.size()));
  return v.name + "_dim_0";
}

/// Draws per piece of a verbose [chain, draw] dataset written piece by piece (1 MiB of
/// doubles): no whole verbose column is resident while the `.h5` is written (the same bytes
/// as one write).
constexpr std::size_t kDrawsPerPiece = 131072;

/// Writes the verbose draws of dataset `ds` [chain, draw] or [chain, draw, width] piece by
/// piece: chain c's posterior states (posterior_states), each repeated by its posterior
/// weight, read by a ChainReader of `columns` (with `coordinate`, as ChainReader's) and the
/// weights of chain c; `append(rd, c, i, k, piece)` adds the `width` values of the k-th draw
/// of state i to `piece`.
template <class T, class Append>
void write_verbose(const SerialRun& r, io::H5Dataset& ds, unsigned columns, int coordinate, std::size_t width,
                   Append&& append) {
  const bool with_width = ds.shape().size() == 3;
  std::vector<T> piece;
  piece.reserve((kDrawsPerPiece + 64) * width);
  for (std::size_t c = 0; c < r.m; ++c) {
    const PosteriorStates ps = posterior_states(r, c);
    ChainReader rd(r.chains[c], kWeightColumn | columns, coordinate);
    hsize_t at = 0;
    auto flush = [&] {
      const auto n = static_cast<hsize_t>(piece.size() / width);
      std::vector<hsize_t> start{static_cast<hsize_t>(c), at}, count{1, n};
      if (with_width) {
        start.push_back(0);
        count.push_back(static_cast<hsize_t>(width));
      }
      ds.write_block<T>(start, count, piece);
      at += n;
      piece.clear();
    };
    for (std::size_t i = ps.first; i < ps.end; ++i) {
      const std::int64_t w = ps.weight(i, rd.weight(i));
      for (std::int64_t k = 0; k < w; ++k) append(rd, c, i, k, piece);
      if (piece.size() >= kDrawsPerPiece * width) flush();
    }
    flush();
  }
}

/// `posterior`: (chain, draw), a vector `beta[1..K]` as one variable with `beta_dim_0`. Each
/// variable's draws are written in pieces, read from the chains block by block.
void write_posterior(const SerialRun& r, const io::H5File& file, io::H5Group& rootg,
                     const std::vector<ArvizVariable>& variables) {
  const std::size_t m = r.m, ndraw = r.ndraw;
  io::H5Group post = rootg.create_group("posterior");
  write_arviz_group_attributes(post);
  post.create_coordinate<std::int64_t>("chain", chain_ids(r));
  iota_coordinate(post, "draw", ndraw);
  const auto d = static_cast<std::size_t>(r.d);
  for (const auto& v : variables) {
    const std::size_t k = v.columns.size();
    // The coordinates read: a scalar variable's own, a vector's all; none for derived ones.
    const bool sampled = std::any_of(v.columns.begin(), v.columns.end(), [d](std::size_t j) { return j < d; });
    const unsigned columns = sampled ? kPointColumns : 0U;
    const int coordinate = sampled && !v.is_vector ? static_cast<int>(v.columns[0]) : -1;
    std::vector<double> row(k);
    std::vector<DerivedReader> dq;  // each chain's derived quantities
    for (std::size_t c = 0; c < m; ++c) dq.emplace_back(r.co[c].derived);
    auto append = [&](ChainReader& rd, std::size_t c, std::size_t i, std::int64_t draw, std::vector<double>& piece) {
      if (draw == 0)
        for (std::size_t e = 0; e < k; ++e) row[e] = compact_value(rd, dq[c], d, v.columns[e], i);
      piece.insert(piece.end(), row.begin(), row.end());
    };
    if (!v.is_vector) {
      io::H5Dataset ds = post.create_dataset<double>(v.name, {m, ndraw});
      write_verbose<double>(r, ds, columns, coordinate, 1, append);
      post.attach_dimensions(ds, {"chain", "draw"});
      file.start_writeback();
      continue;
    }
    const std::string dim = vector_dim(post, v);
    io::H5Dataset ds = post.create_dataset<double>(v.name, {m, ndraw, k});
    write_verbose<double>(r, ds, columns, coordinate, k, append);
    post.attach_dimensions(ds, {"chain", "draw", dim});
    file.start_writeback();
  }
}

/// `sample_stats`: lp, accepted, delayed-rejection stage, acceptance probability, each
/// written in pieces.
void write_sample_stats(const SerialRun& r, const io::H5File& file, io::H5Group& rootg) {
  const std::size_t m = r.m, ndraw = r.ndraw;
  io::H5Group stats = rootg.create_group("sample_stats");
  write_arviz_group_attributes(stats);
  stats.create_coordinate<std::int64_t>("chain", chain_ids(r));
  iota_coordinate(stats, "draw", ndraw);
  // One dataset at a time: `of(rd, i, k)` gives the value of the k-th of the weight[i] draws
  // of compact state i (the first is the one where the state was accepted), `rd` reading the
  // weights and the column `col`.
  auto per_draw = [&](const char* name, unsigned col, auto of) {
    using T = decltype(of(std::declval<ChainReader&>(), std::size_t{0}, std::int64_t{0}));
    io::H5Dataset ds = stats.create_dataset<T>(name, {m, ndraw});
    write_verbose<T>(r, ds, col, -1, 1,
                     [&](ChainReader& rd, std::size_t /*c*/, std::size_t i, std::int64_t k, std::vector<T>& piece) {
                       piece.push_back(of(rd, i, k));
                     });
    stats.attach_dimensions(ds, {"chain", "draw"});
    file.start_writeback();
  };
  per_draw("lp", kLogDensityColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t /*k*/) -> double { return rd.log_density(i); });
  per_draw("accepted", kStepColumn, [](ChainReader& rd, std::size_t i, std::int64_t k) -> std::uint8_t {
    return k == 0 && rd.step(i) > 0 ? 1 : 0;
  });
  per_draw("dr_stage", kDrStageColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t k) -> std::int32_t { return k == 0 ? rd.dr_stage(i) : 0; });
  // The start point (step 0) is not accepted at a proposal: 0, as accepted and dr_stage are
  // (its compact row's 1 stays in chain_compact).
  per_draw("acceptance_probability", kAcceptProbColumn | kStepColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t k) -> double {
             return k == 0 && rd.step(i) > 0 ? rd.accept_prob(i) : 0.0;
           });
  describe_sample_stats(stats);
}

/// `chain_compact`: the compact chains, every state (burn-in included), concatenated in
/// chain order; with several chains `chain` gives each row's chain and `burnin` [chains].
void write_chain_compact(const SerialRun& r, const io::H5File& file, io::H5Group& rootg) {
  const std::size_t m = r.m;
  const auto& chains = r.chains;
  io::H5Group cc = rootg.create_group("chain_compact");
  std::vector<std::int64_t> chain_of, burnins;
  std::size_t rows = 0;
  for (std::size_t c = 0; c < m; ++c) {
    rows += chains[c].size();
    if (m > 1) chain_of.insert(chain_of.end(), chains[c].size(), static_cast<std::int64_t>(chains[c].chain_id));
    burnins.push_back(r.co[c].burnin);
  }
  // Every dataset has named dimensions, so that xarray opens the group without
  // phony_dims: rows are "compact_draw", state columns "variable" (the names).
  cc.create_dimension("compact_draw", rows);
  cc.write_strings("variable", r.specs.variable_names).make_scale("variable");
  auto put = [&](const char* name, const auto& values) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    io::H5Dataset ds = cc.write<T>(name, values);
    cc.attach_dimensions(ds, {"compact_draw"});
  };
  // One column at a time, written in pieces of kRows rows read from the chains (block by
  // block): neither the chains nor a whole column are resident (the same bytes as one write).
  // `append(rd, i, piece)` adds compact state i's `width` values of the column to `piece`.
  auto write_in_pieces = [&](io::H5Dataset& ds, unsigned col, std::size_t width, auto& piece, auto&& append) {
    using T = typename std::decay_t<decltype(piece)>::value_type;
    piece.reserve(kRows * width);
    RowPieces<T> out(ds, piece, width);
    for (std::size_t c = 0; c < m; ++c) {
      ChainReader rd(chains[c], col);
      for (std::size_t i = 0; i < chains[c].size(); ++i) {
        append(rd, i, piece);
        out.row_done();
      }
    }
    out.finish();
  };
  auto put_column = [&](const char* name, unsigned col, auto of) {
    using T = decltype(of(std::declval<ChainReader&>(), std::size_t{0}));
    io::H5Dataset ds = cc.create_dataset<T>(name, {static_cast<hsize_t>(rows)});
    std::vector<T> piece;
    write_in_pieces(ds, col, 1, piece,
                    [&](ChainReader& rd, std::size_t i, std::vector<T>& p) { p.push_back(of(rd, i)); });
    cc.attach_dimensions(ds, {"compact_draw"});
  };
  put_column("step", kStepColumn, [](ChainReader& rd, std::size_t i) { return rd.step(i); });
  put_column("weight", kWeightColumn, [](ChainReader& rd, std::size_t i) { return rd.weight(i); });
  put_column("log_density", kLogDensityColumn, [](ChainReader& rd, std::size_t i) { return rd.log_density(i); });
  put_column("dr_stage", kDrStageColumn, [](ChainReader& rd, std::size_t i) { return rd.dr_stage(i); });
  put_column("acceptance_probability", kAcceptProbColumn,
             [](ChainReader& rd, std::size_t i) { return rd.accept_prob(i); });
  put_column("adaptation_measure", kAdaptMeasureColumn,
             [](ChainReader& rd, std::size_t i) { return rd.adapt_measure(i); });
  {
    const auto d = static_cast<std::size_t>(r.d);
    io::H5Dataset ds = cc.create_dataset<double>("state", {static_cast<hsize_t>(rows), static_cast<hsize_t>(d)});
    std::vector<double> piece;
    write_in_pieces(ds, kPointColumns, d, piece, [d](ChainReader& rd, std::size_t i, std::vector<double>& p) {
      const double* x = rd.point(i);
      p.insert(p.end(), x, x + d);
    });
    cc.attach_dimensions(ds, {"compact_draw", "variable"});
    file.start_writeback();
  }
  // h5_posterior = "compact": the derived quantities (not in `state`) on every state, which
  // the verbose file keeps in `posterior` only.
  if (r.specs.h5_posterior == "compact" && r.ncol > static_cast<std::size_t>(r.d)) {
    const auto d = static_cast<std::size_t>(r.d), nq = r.ncol - d;
    std::vector<std::string> names;
    for (std::size_t k = d; k < r.ncol; ++k) names.push_back(r.co[0].columns[k].name);
    cc.write_strings("derived_quantity", names).make_scale("derived_quantity");
    // In pieces of kRows rows, as the columns above (the same bytes as one write).
    io::H5Dataset ds =
        cc.create_dataset<double>("derived_quantities", {static_cast<hsize_t>(rows), static_cast<hsize_t>(nq)});
    std::vector<double> piece;
    piece.reserve(std::min(rows, kRows) * nq);
    RowPieces<double> out(ds, piece, nq);
    for (std::size_t c = 0; c < m; ++c) {
      DerivedReader dq(r.co[c].derived);
      for (std::size_t i = 0; i < chains[c].size(); ++i) {
        for (std::size_t k = 0; k < nq; ++k) piece.push_back(dq.value(k, i));
        out.row_done();
      }
    }
    out.finish();
    cc.attach_dimensions(ds, {"compact_draw", "derived_quantity"});
  }
  cc.set_attribute("burnin", r.out.burnin);
  if (m > 1) {
    put("chain", chain_of);
    cc.create_dimension("chains", m);
    io::H5Dataset ds = cc.write<std::int64_t>("burnin", burnins);
    cc.attach_dimensions(ds, {"chains"});
  }
}

/// `sample`: the refined samples (of every chain, in chain order), with their own dimension.
/// Each dataset and the `sample` coordinate are written in pieces of 8192 rows read from the
/// chains (the rows are in increasing order): no whole column of the sample is resident (the
/// same bytes as one write).
void write_sample(const SerialRun& r, io::H5Group& rootg, const std::vector<ArvizVariable>& variables) {
  const std::size_t m = r.m;
  const auto rows = static_cast<std::size_t>(r.out.sample_size);
  io::H5Group sg = rootg.create_group("sample");
  iota_coordinate(sg, "sample", rows);
  std::vector<double> piece;
  // `ds` [rows(, width)] from `append(rd, c, row)`, which adds the `width` values of sample
  // row `row` of chain c to `piece`, `rd` reading the columns `columns`.
  auto write_pieces = [&](io::H5Dataset& ds, unsigned columns, std::size_t width, auto&& append) {
    piece.clear();
    piece.reserve(std::min(rows, kRows) * width);
    RowPieces<double> out(ds, piece, width);
    for (std::size_t c = 0; c < m; ++c) {
      ChainReader rd(r.chains[c], columns);
      r.co[c].sample_rows.for_each(r.chains[c], [&](std::size_t row) {
        append(rd, c, row);
        out.row_done();
      });
    }
    out.finish();
  };
  {
    io::H5Dataset ds = sg.create_dataset<double>("lp", {static_cast<hsize_t>(rows)});
    write_pieces(ds, kLogDensityColumn, 1,
                 [&](ChainReader& rd, std::size_t /*c*/, std::size_t row) { piece.push_back(rd.log_density(row)); });
    sg.attach_dimensions(ds, {"sample"});
  }
  for (const auto& var : variables) {
    const std::size_t k = var.columns.size();
    std::vector<DerivedReader> dq;  // each chain's derived quantities
    for (std::size_t c = 0; c < m; ++c) dq.emplace_back(r.co[c].derived);
    auto append = [&](ChainReader& rd, std::size_t c, std::size_t row) {
      const auto d = static_cast<std::size_t>(r.chains[c].ndim);
      for (std::size_t col : var.columns) piece.push_back(compact_value(rd, dq[c], d, col, row));
    };
    if (!var.is_vector) {
      io::H5Dataset ds = sg.create_dataset<double>(var.name, {static_cast<hsize_t>(rows)});
      write_pieces(ds, kPointColumns, 1, append);
      sg.attach_dimensions(ds, {"sample"});
    } else {
      const std::string dim = vector_dim(sg, var);
      io::H5Dataset ds = sg.create_dataset<double>(var.name, {static_cast<hsize_t>(rows), static_cast<hsize_t>(k)});
      write_pieces(ds, kPointColumns, k, append);
      sg.attach_dimensions(ds, {"sample", dim});
    }
  }
  if (m > 1) {
    std::vector<std::int64_t> ch;
    ch.reserve(rows);
    for (std::size_t c = 0; c < m; ++c)
      ch.insert(ch.end(), r.co[c].sample_rows.size(), static_cast<std::int64_t>(r.chains[c].chain_id));
    io::H5Dataset dc = sg.write<std::int64_t>("chain_id", ch);
    sg.attach_dimensions(dc, {"sample"});
  }
}

}  // namespace

void write_h5_draws(const SerialRun& r, std::optional<io::H5File>& h5) {
  h5.emplace(io::H5File::create_atomic(r.h5_path));
  write_h5_root_attributes(*h5, "DRAM (herd, ParaDRAM-compatible)", r.specs, r.target, r.options);
  io::H5Group rootg = h5->root();
  std::vector<std::string> column_names;
  for (std::size_t k = 0; k < r.ncol; ++k) column_names.push_back(r.co[0].columns[k].name);
  const std::vector<ArvizVariable> variables = arviz_variables(column_names);
  // h5_posterior = "compact": the draws once, in chain_compact (readers expand the weights).
  if (r.specs.h5_posterior == "compact") {
    rootg.set_attribute("h5_posterior", r.specs.h5_posterior);
  } else {
    write_posterior(r, *h5, rootg, variables);
    write_sample_stats(r, *h5, rootg);
  }
  write_chain_compact(r, *h5, rootg);
  write_sample(r, rootg, variables);
}

}  // namespace herd::mcmc::detail
