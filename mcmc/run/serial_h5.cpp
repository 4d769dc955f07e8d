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

std::vector<std::int64_t> iota(std::size_t n) {
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::int64_t>(i);
  return idx;
}

/// A vector's coordinate dimension `<name>_dim_0`, once per group that uses it.
std::string vector_dim(io::H5Group& g, const ArvizVariable& v) {
  g.create_coordinate<std::int64_t>(v.name + "_dim_0", iota(v.columns.size()));
  return v.name + "_dim_0";
}

/// `posterior`: (chain, draw), a vector `beta[1..K]` as one variable with `beta_dim_0`.
void write_posterior(const SerialRun& r, io::H5Group& rootg, const std::vector<ArvizVariable>& variables) {
  const std::size_t m = r.m, ndraw = r.ndraw;
  io::H5Group post = rootg.create_group("posterior");
  post.create_coordinate<std::int64_t>("chain", chain_ids(r));
  post.create_coordinate<std::int64_t>("draw", iota(ndraw));
  for (const auto& v : variables) {
    if (!v.is_vector) {
      io::H5Dataset ds = post.write<double>(v.name, verbose_column(r, v.columns[0]), {m, ndraw});
      post.attach_dimensions(ds, {"chain", "draw"});
      continue;
    }
    const std::size_t k = v.columns.size();
    std::vector<double> data(m * ndraw * k);
    for (std::size_t e = 0; e < k; ++e) {
      const std::vector<double> column = verbose_column(r, v.columns[e]);
      for (std::size_t t = 0; t < m * ndraw; ++t) data[t * k + e] = column[t];
    }
    const std::string dim = vector_dim(post, v);
    post.write_variable<double>(v.name, data, {"chain", "draw", dim});
  }
}

/// `sample_stats`: lp, accepted, delayed-rejection stage, acceptance probability.
void write_sample_stats(const SerialRun& r, io::H5Group& rootg) {
  const std::size_t m = r.m, ndraw = r.ndraw;
  io::H5Group stats = rootg.create_group("sample_stats");
  stats.create_coordinate<std::int64_t>("chain", chain_ids(r));
  stats.create_coordinate<std::int64_t>("draw", iota(ndraw));
  auto put_stat = [&](const char* name, const auto& values) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    io::H5Dataset ds = stats.write<T>(name, values, {m, ndraw});
    stats.attach_dimensions(ds, {"chain", "draw"});
  };
  // One dataset at a time: `of(rd, i, k)` gives the value of the k-th of the weight[i] draws
  // of compact state i (the first is the one where the state was accepted), `rd` reading the
  // weights and the column `col`.
  auto per_draw = [&](const char* name, unsigned col, auto of) {
    std::vector<decltype(of(std::declval<ChainReader&>(), std::size_t{0}, std::int64_t{0}))> v;
    v.reserve(m * ndraw);
    for (std::size_t c = 0; c < m; ++c) {
      const MemoryChainSink& memory = r.chains[c];
      ChainReader rd(memory, kWeightColumn | col);
      const std::size_t before = v.size();
      for (std::size_t i = static_cast<std::size_t>(r.co[c].burnin); i < memory.size() && v.size() - before < ndraw;
           ++i) {
        const std::int64_t w = rd.weight(i);
        for (std::int64_t k = 0; k < w && v.size() - before < ndraw; ++k) v.push_back(of(rd, i, k));
      }
    }
    put_stat(name, v);
  };
  per_draw("lp", kLogDensityColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t /*k*/) -> double { return rd.log_density(i); });
  per_draw("accepted", kStepColumn, [](ChainReader& rd, std::size_t i, std::int64_t k) -> std::uint8_t {
    return k == 0 && rd.step(i) > 0 ? 1 : 0;
  });
  per_draw("dr_stage", kDrStageColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t k) -> std::int32_t { return k == 0 ? rd.dr_stage(i) : 0; });
  per_draw("acceptance_probability", kAcceptProbColumn,
           [](ChainReader& rd, std::size_t i, std::int64_t k) -> double { return k == 0 ? rd.accept_prob(i) : 0.0; });
}

/// `chain_compact`: the compact chains, every state (burn-in included), concatenated in
/// chain order; with several chains `chain` gives each row's chain and `burnin` [chains].
void write_chain_compact(const SerialRun& r, io::H5Group& rootg) {
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
  constexpr std::size_t kRows = 8192;
  auto write_in_pieces = [&](io::H5Dataset& ds, unsigned col, std::size_t width, auto& piece, auto&& append) {
    using T = typename std::decay_t<decltype(piece)>::value_type;
    piece.reserve(kRows * width);
    hsize_t at = 0;
    for (std::size_t c = 0; c < m; ++c) {
      ChainReader rd(chains[c], col);
      for (std::size_t i = 0; i < chains[c].size(); ++i) {
        append(rd, i, piece);
        if (piece.size() == kRows * width) {
          ds.write_rows<T>(at, piece);
          at += kRows;
          piece.clear();
        }
      }
    }
    ds.write_rows<T>(at, piece);
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
  }
  // h5_posterior = "compact": the derived quantities (not in `state`) on every state, which
  // the verbose file keeps in `posterior` only.
  if (r.specs.h5_posterior == "compact" && r.ncol > static_cast<std::size_t>(r.d)) {
    const auto d = static_cast<std::size_t>(r.d), nq = r.ncol - d;
    std::vector<std::string> names;
    for (std::size_t k = d; k < r.ncol; ++k) names.push_back(r.co[0].columns[k].name);
    cc.write_strings("derived_quantity", names).make_scale("derived_quantity");
    std::vector<double> q(rows * nq);
    std::size_t row = 0;
    for (std::size_t c = 0; c < m; ++c)
      for (std::size_t i = 0; i < chains[c].size(); ++i, ++row)
        for (std::size_t k = 0; k < nq; ++k) q[row * nq + k] = r.co[c].columns[d + k].compact[i];
    io::H5Dataset ds = cc.write<double>("derived_quantities", q, {rows, nq});
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
void write_sample(const SerialRun& r, io::H5Group& rootg, const std::vector<ArvizVariable>& variables) {
  const std::size_t m = r.m;
  io::H5Group sg = rootg.create_group("sample");
  sg.create_coordinate<std::int64_t>("sample", iota(static_cast<std::size_t>(r.out.sample_size)));
  std::vector<double> v;
  for (std::size_t c = 0; c < m; ++c) {
    ChainReader rd(r.chains[c], kLogDensityColumn);  // the rows are in increasing order
    for (std::size_t row : r.co[c].sample_rows) v.push_back(rd.log_density(row));
  }
  io::H5Dataset ds = sg.write<double>("lp", v);
  sg.attach_dimensions(ds, {"sample"});
  for (const auto& var : variables) {
    v.clear();
    for (std::size_t c = 0; c < m; ++c) {
      ChainReader rd(r.chains[c], kPointColumns);
      const auto d = static_cast<std::size_t>(r.chains[c].ndim);
      for (std::size_t row : r.co[c].sample_rows)
        for (std::size_t k : var.columns) v.push_back(compact_value(rd, d, r.co[c], k, row));
    }
    if (!var.is_vector) {
      io::H5Dataset dk = sg.write<double>(var.name, v);
      sg.attach_dimensions(dk, {"sample"});
    } else {
      const std::string dim = vector_dim(sg, var);
      sg.write_variable<double>(var.name, v, {"sample", dim});
    }
  }
  if (m > 1) {
    std::vector<std::int64_t> ch;
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
    write_posterior(r, rootg, variables);
    write_sample_stats(r, rootg);
  }
  write_chain_compact(r, rootg);
  write_sample(r, rootg, variables);
}

}  // namespace herd::mcmc::detail
