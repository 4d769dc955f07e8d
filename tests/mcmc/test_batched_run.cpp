// The batched run layer (herd/mcmc/run/): the outputs writer (draws gathered into
// posterior/<variable> and sample_stats/lp), the restart record (batched.ckpt + draws.bin:
// write, read back, resume, corruption and another run refused), and the run's totals.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "diagnostics_vectors.hpp"
#include "summary_bits.hpp"

#include "herd/core/communicator.hpp"
#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/run/batched_outputs.hpp"
#include "herd/mcmc/run/batched_record.hpp"

namespace fs = std::filesystem;
using namespace herd;
using namespace herd::mcmc;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("herd_batched_run_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

/// A known value of draw `t` of chain `c`, coordinate `j` (and j = -1: its log density).
double value(std::int64_t c, std::int64_t t, int j) { return 1000.0 * double(c) + 10.0 * double(t) + double(j); }

/// Block [first, first + n) of `m` chains in the engine's layout: x [m, n, d], lp [m, n].
void block(std::int64_t m, std::int64_t first, std::int64_t n, int d, std::vector<double>& x, std::vector<double>& lp) {
  x.assign(static_cast<std::size_t>(m * n * d), 0.0);
  lp.assign(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t c = 0; c < m; ++c)
    for (std::int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < d; ++j) x[static_cast<std::size_t>((c * n + t) * d + j)] = value(c, first + t, j);
      lp[static_cast<std::size_t>(c * n + t)] = value(c, first + t, -1);
    }
}

/// Known per-draw statistics of draw `t` of chain `c`.
std::uint8_t accepted_of(std::int64_t c, std::int64_t t) { return static_cast<std::uint8_t>((c + t) % 2); }
std::uint8_t stage_of(std::int64_t c, std::int64_t t) { return static_cast<std::uint8_t>((c + 2 * t) % 3); }
double alpha_of(std::int64_t c, std::int64_t t) { return 0.5 + 0.001 * double(c) + 0.01 * double(t); }
double measure_of(std::int64_t c, std::int64_t t) { return 0.25 * double(c) + 0.0625 * double(t); }

/// Writes draws [0, draws) of `m` chains through `sink` in blocks of `per_block`, each with
/// its statistics.
void feed(BatchedDrawSink& sink, std::int64_t m, int d, std::int64_t draws, std::int64_t per_block,
          std::int64_t from = 0) {
  std::vector<double> x, lp, alpha, measure;
  std::vector<std::uint8_t> acc, stage;
  for (std::int64_t first = from; first < draws; first += per_block) {
    const std::int64_t n = std::min(per_block, draws - first);
    block(m, first, n, d, x, lp);
    sink.write_block(first, n, x.data(), lp.data());
    acc.clear();
    stage.clear();
    alpha.clear();
    measure.clear();
    for (std::int64_t c = 0; c < m; ++c)
      for (std::int64_t t = first; t < first + n; ++t) {
        acc.push_back(accepted_of(c, t));
        stage.push_back(stage_of(c, t));
        alpha.push_back(alpha_of(c, t));
        measure.push_back(measure_of(c, t));
      }
    sink.write_stats(first, n, {acc.data(), stage.data(), alpha.data(), measure.data()});
  }
}

/// Checks the per-draw statistics kept by a sink against `feed`'s.
bool stats_match(const MemoryBatchedSink& mem) {
  bool ok = mem.accepted.size() == static_cast<std::size_t>(mem.num_chains * mem.draws);
  for (std::int64_t c = 0; c < mem.num_chains && ok; ++c)
    for (std::int64_t t = 0; t < mem.draws; ++t) {
      const auto i = static_cast<std::size_t>(c * mem.draws + t);
      ok = ok && mem.accepted[i] == accepted_of(c, t) && mem.dr_stage[i] == stage_of(c, t) &&
           mem.acceptance_probability[i] == alpha_of(c, t) && mem.adaptation_measure[i] == measure_of(c, t);
    }
  return ok;
}

/// Checks the datasets of a batched `.h5` against `value`: a [chain, draw], beta [chain, draw, 2], lp.
void check_file(const std::string& path, std::int64_t m, std::int64_t draws) {
  auto f = io::H5File::open(path);
  const auto a = f.open_dataset("posterior/a");
  CHECK(a.shape() == std::vector<hsize_t>{hsize_t(m), hsize_t(draws)});
  CHECK(a.dimension_names() == std::vector<std::string>{"chain", "draw"});
  const auto beta = f.open_dataset("posterior/beta");
  CHECK(beta.shape() == std::vector<hsize_t>{hsize_t(m), hsize_t(draws), 2});
  CHECK(beta.dimension_names() == std::vector<std::string>{"chain", "draw", "beta_dim_0"});
  const auto lp = f.open_dataset("sample_stats/lp");
  CHECK(lp.dimension_names() == std::vector<std::string>{"chain", "draw"});
  const auto av = a.read<double>(), bv = beta.read<double>(), lv = lp.read<double>();
  bool ok = true;
  for (std::int64_t c = 0; c < m; ++c)
    for (std::int64_t t = 0; t < draws; ++t) {
      const auto i = static_cast<std::size_t>(c * draws + t);
      ok = ok && av[i] == value(c, t, 0) && bv[2 * i] == value(c, t, 1) && bv[2 * i + 1] == value(c, t, 2) &&
           lv[i] == value(c, t, -1);
    }
  CHECK(ok);
  CHECK(f.open_dataset("posterior/chain").read<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2});
  std::vector<std::int64_t> idx(static_cast<std::size_t>(draws));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
  CHECK(f.open_dataset("sample_stats/draw").read<std::int64_t>() == idx);
  CHECK(f.open_dataset("posterior/beta_dim_0").read<std::int64_t>() == std::vector<std::int64_t>{0, 1});
}

}  // namespace

TEST_CASE("batched gather sink: posterior/<variable> and sample_stats/lp [chain, draw], vectors as one variable",
          "[mcmc]") {
  const fs::path dir = fresh_dir("sink");
  SelfCommunicator comm;
  const std::string path = (dir / "run.h5").string();
  {
    io::H5File h5 = io::H5File::create_atomic(path);
    BatchedGatherSink sink(comm, &h5, {"a", "beta[1]", "beta[2]"}, nullptr, 0, 256, true, dir.string());
    sink.begin(3, 0, 3, 7);
    feed(sink, 3, 3, 7, 3);  // blocks of 3, 3, 1 draws
    sink.finish();
    // The draws are kept in the store too: by quantity [chain, draw], or by group of chains.
    const BatchedDrawStore& store = sink.draws();
    CHECK(store.bytes() == 3u * 7u * ((3u + 3u) * sizeof(double) + 2u));
    std::vector<double> col;
    store.column(1, col);
    REQUIRE(col.size() == 3u * 7u);
    CHECK(col[2 * 7 + 5] == value(2, 5, 1));
    store.column(store.lp_column(), col);
    CHECK(col[1 * 7 + 6] == value(1, 6, -1));
    MemoryBatchedSink all, last;
    store.read_chains(0, 3, all);
    REQUIRE(all.x.size() == 3u * 7u * 3u);
    CHECK(all.x[(2 * 7 + 5) * 3 + 1] == value(2, 5, 1));
    CHECK(stats_match(all));
    store.read_chains(2, 1, last);
    CHECK(last.x[5 * 3 + 2] == value(2, 5, 2));
    CHECK(last.lp[6] == value(2, 6, -1));
    // The scratch file is anonymous: nothing of it in the folder.
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir))
      files += e.path().filename().string().starts_with(".herd") ? 1 : 0;
    CHECK(files == 0);
    CHECK_FALSE(fs::exists(path));  // written through a temporary until committed
    h5.commit();
  }
  check_file(path, 3, 7);
  fs::remove_all(dir);
}

TEST_CASE("batched restart record: a checkpoint reads back; a resumed run cuts draws.bin and replays it", "[mcmc]") {
  const fs::path dir = fresh_dir("record");
  SelfCommunicator comm;
  SamplerSpecs specs;
  specs.output_prefix = (dir / "run").string();
  specs.checkpoint_period = 100;
  specs.checkpoint_period_seconds = 0;
  fs::create_directories(specs.output_prefix + "_restart");
  BatchedDramOptions o;
  o.ndim = 3;
  o.num_chains = 3;
  o.warmup = 10;
  o.delayed_rejection_count = 1;
  o.adaptation = BatchedAdaptation::kPerChain;
  const std::size_t m = 3, d = 3;
  BatchedSnapshot s;
  s.next_proposal = 200;
  s.draws_done = 4;
  s.seconds = 1.5;
  s.adaptive_updates = 7;
  s.chol_failures = 1;
  auto fill = [](std::vector<double>& v, std::size_t n, double base) {
    v.resize(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = base + 0.25 * double(i);
  };
  fill(s.x, m * d, 1.0);
  fill(s.lp, m, -3.0);
  s.accepted = {1, 2, 3, 4, 5, 6};
  s.accepted_warmup = {1, 1, 1, 1, 1, 1};
  s.out_of_domain = {0, 1, 2};
  s.nan_count = {3, 0, 0};
  fill(s.chol, m * d * d, 0.5);
  fill(s.run_n, m, 10.0);
  fill(s.run_mean, m * d, -1.0);
  fill(s.run_m2, m * d * d, 2.0);
  fill(s.ad_ref, m * d, 0.0);
  s.state_step = {0, 150, 199};
  s.state_stage = {0, 1, 2};
  s.state_alpha = {1.0, 0.75, 0.125};
  s.adapt_measure = {0.5, 0.0, 0.0};
  std::uint64_t recorded = 0;
  {
    BatchedRestartRecord record(comm, specs, o, 42, false);
    CHECK(record.resume_state() == nullptr);
    CHECK_FALSE(record.resumed());
    // Rank 0 decides by proposals since the last checkpoint.
    CHECK_FALSE(record.due(50));
    CHECK(record.due(100));
    CHECK_FALSE(record.due(150));
    CHECK(record.due(200));
    io::H5File h5 = io::H5File::create_atomic((dir / "first.h5").string());
    BatchedGatherSink sink(comm, &h5, {"a", "beta[1]", "beta[2]"}, record.draws(), 0, 2, true, dir.string());
    sink.begin(3, 0, 3, 7);
    feed(sink, 3, 3, 4, 2);  // draws 0..3, then the checkpoint
    record.save(s);
    recorded = record.draws()->size();
    // Per draw and chain: x, lp, acceptance probability and adaptation measure (doubles),
    // accepted and stage (a byte each).
    CHECK(recorded == 4u * 3u * ((3u + 3u) * sizeof(double) + 2u));
    CHECK(record.checkpoints == 1);
    feed(sink, 3, 3, 6, 2, 4);  // draws 4..5 appended after the checkpoint: a kill loses them
    CHECK(record.draws()->size() > recorded);
  }
  {
    BatchedRestartRecord record(comm, specs, o, 42, true);
    const BatchedSnapshot* r = record.resume_state();
    REQUIRE(r != nullptr);
    CHECK(record.resumed());
    CHECK(r->next_proposal == 200);
    CHECK(record.resumed_at() == 200);
    CHECK(r->draws_done == 4);
    CHECK(record.draws_done() == 4);
    CHECK(r->seconds == 1.5);
    CHECK(r->adaptive_updates == 7);
    CHECK(r->chol_failures == 1);
    CHECK(r->x == s.x);
    CHECK(r->lp == s.lp);
    CHECK(r->accepted == s.accepted);
    CHECK(r->accepted_warmup == s.accepted_warmup);
    CHECK(r->out_of_domain == s.out_of_domain);
    CHECK(r->nan_count == s.nan_count);
    CHECK(r->chol == s.chol);
    CHECK(r->run_n == s.run_n);
    CHECK(r->run_mean == s.run_mean);
    CHECK(r->run_m2 == s.run_m2);
    CHECK(r->ad_ref == s.ad_ref);
    CHECK(r->state_step == s.state_step);
    CHECK(r->state_stage == s.state_stage);
    CHECK(r->state_alpha == s.state_alpha);
    CHECK(r->adapt_measure == s.adapt_measure);
    // draws.bin is cut back to the checkpoint's length, then replayed into a new file.
    CHECK(record.draws()->size() == recorded);
    CHECK(fs::file_size(specs.output_prefix + "_restart/draws.bin") == recorded);
    const std::string path = (dir / "resumed.h5").string();
    {
      io::H5File h5 = io::H5File::create_atomic(path);
      BatchedGatherSink sink(comm, &h5, {"a", "beta[1]", "beta[2]"}, record.draws(), record.draws_done(), 2, true,
                             dir.string());
      sink.begin(3, 0, 3, 7);
      feed(sink, 3, 3, 7, 2, 4);  // the engine continues at draw 4
      sink.finish();
      MemoryBatchedSink all;
      sink.draws().read_chains(0, 3, all);
      CHECK(stats_match(all));  // the replayed draws' statistics, then the new ones
      h5.commit();
    }
    check_file(path, 3, 7);
    // Once the outputs are written, the bulk of the record goes.
    record.discard();
    CHECK_FALSE(fs::exists(specs.output_prefix + "_restart/batched.ckpt"));
    CHECK_FALSE(fs::exists(specs.output_prefix + "_restart/draws.bin"));
  }
  fs::remove_all(dir);
}

TEST_CASE("batched restart record: another run's record and a changed byte of draws.bin are refused", "[mcmc]") {
  const fs::path dir = fresh_dir("refused");
  SelfCommunicator comm;
  SamplerSpecs specs;
  specs.output_prefix = (dir / "run").string();
  specs.checkpoint_period = 1;
  fs::create_directories(specs.output_prefix + "_restart");
  BatchedDramOptions o;
  o.ndim = 2;
  o.num_chains = 2;
  o.adaptation = BatchedAdaptation::kPooled;
  BatchedSnapshot s;
  s.x = {0, 1, 2, 3};
  s.lp = {-1, -2};
  s.accepted = {0, 0};
  s.out_of_domain = {0, 0};
  s.nan_count = {0, 0};
  s.chol = {1, 0, 0, 1};
  s.draws_done = 1;
  {
    BatchedRestartRecord record(comm, specs, o, 7, false);
    std::vector<double> many(300000, 1.0);  // more than one MiB: two checksum blocks
    record.draws()->append(many.data(), many.size());
    record.save(s);
  }
  // Another input (hash) or another number of chains: InputError naming overwrite.
  CHECK_THROWS_WITH(BatchedRestartRecord(comm, specs, o, 8, true),
                    Catch::Contains("another batched run") && Catch::Contains("overwrite = true"));
  BatchedDramOptions more = o;
  more.num_chains = 4;
  CHECK_THROWS_AS(BatchedRestartRecord(comm, specs, more, 7, true), InputError);
  // A record of an earlier herd holds the input's legacy hash (chains_per_rank included).
  CHECK_NOTHROW(BatchedRestartRecord(comm, specs, o, 8, true, 7));
  CHECK_THROWS_WITH(BatchedRestartRecord(comm, specs, o, 8, true, 9), Catch::Contains("another batched run"));
  // A changed byte in the second MiB: IoError naming the file and the block.
  {
    std::fstream f(specs.output_prefix + "_restart/draws.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((1 << 20) + 100);
    f.put('\x7f');
  }
  CHECK_THROWS_WITH(BatchedRestartRecord(comm, specs, o, 7, true),
                    Catch::Contains("draws.bin") && Catch::Contains("block 2 of 3"));
  // A record shorter than its checkpoint says.
  fs::resize_file(specs.output_prefix + "_restart/draws.bin", 100);
  CHECK_THROWS_WITH(BatchedRestartRecord(comm, specs, o, 7, true),
                    Catch::Contains("has 100 bytes") && Catch::Contains("overwrite = true"));
  // A record of the layout before the per-draw statistics (version 1): its draws.bin has no
  // statistics, so it is refused rather than misread.
  {
    io::CheckpointWriter w(BatchedRestartRecord::kKind, 1);
    w.add_value("input_hash", std::uint64_t{7});
    w.commit(specs.output_prefix + "_restart/batched.ckpt");
  }
  CHECK_THROWS_WITH(BatchedRestartRecord(comm, specs, o, 7, true),
                    Catch::Contains("layout version 1") && Catch::Contains("overwrite = true"));
  fs::remove_all(dir);
}

TEST_CASE("batched run totals, superchains and the posterior summary", "[mcmc]") {
  CHECK(default_superchains(256) == 16);
  CHECK(default_superchains(16) == 8);
  CHECK(default_superchains(12) == 4);
  CHECK(default_superchains(6) == 2);
  CHECK(default_superchains(3) == 0);
  SelfCommunicator comm;
  BatchedDramOptions o;
  o.adaptation = BatchedAdaptation::kPerChain;
  BatchedDramResult r;
  r.num_chains = 4;
  r.proposals_per_chain = 1000;
  r.acceptance_rate = 0.25;
  r.nan_count = 2;
  r.adaptive_updates = 3;
  r.stage_accepted = {10, 5};
  r.seconds = 2.0;
  const BatchedDramResult t = reduce_batched_result(r, o, comm);
  CHECK(t.num_chains == 4);
  CHECK(t.acceptance_rate == 0.25);
  CHECK(t.nan_count == 2);
  CHECK(t.stage_accepted == std::vector<std::int64_t>{10, 5});
  CHECK(t.chain_steps_per_second == Approx(2000.0));
  // Two chains of three draws: the summary's mean is the mean of the draws.
  const fs::path dir = fresh_dir("summary");
  BatchedDrawStore draws(dir.string(), 2, 1, 3);
  const std::vector<double> x = {1, 2, 3, 4, 5, 9}, lp = {0, 0, 0, 0, 0, 0};
  draws.write_block(0, 3, x.data(), lp.data());
  const BatchedPosterior p = summarize_batched_draws(draws, {"theta"}, 0);
  REQUIRE(p.rows.size() == 1);
  CHECK(p.rows[0].name == "theta");
  CHECK(p.rows[0].stats.mean == Approx(4.0));
  CHECK(p.diagnostics[0].mean == Approx(4.0));
  CHECK(std::isnan(p.diagnostics[0].nested_rhat));
  std::vector<double> col;
  draws.column(p.columns[0], col);
  CHECK(col == x);
  fs::remove_all(dir);
}

TEST_CASE("batched draw store: more draws than its file system has room for are refused before any is written",
          "[mcmc]") {
  const fs::path dir = fresh_dir("store_full");
  // 1e9 chains x 1e6 draws x (8 x 13 + 2) bytes: about 1e17 bytes, more than any disk here.
  try {
    BatchedDrawStore store(dir.string(), 1000000000, 10, 1000000);
    FAIL("a store larger than the free space was created");
  } catch (const herd::IoError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("needs 106000000000000000 bytes"));
    CHECK_THAT(what, Catch::Contains("bytes free"));
    CHECK_THAT(what, Catch::Contains(dir.string()));
  }
  // Nothing is left behind (the file was unlinked when created).
  CHECK(fs::is_empty(dir));
  // A store that fits is created as before.
  CHECK_NOTHROW(BatchedDrawStore(dir.string(), 2, 1, 3));
  fs::remove_all(dir);
}

TEST_CASE("batched draw store: blocks in order, columns, chain groups and compact rows; another order refused",
          "[mcmc]") {
  const fs::path dir = fresh_dir("store");
  const std::int64_t m = 5, draws = 11;
  const int d = 2;
  BatchedDrawStore store(dir.string(), m, d, draws);
  std::vector<double> x, lp;
  // Blocks of 4, 4, 3 draws; a block written again (its statistics after it) is the same block.
  for (std::int64_t first = 0; first < draws; first += 4) {
    const std::int64_t n = std::min<std::int64_t>(4, draws - first);
    block(m, first, n, d, x, lp);
    store.write_block(first, n, x.data(), lp.data());
  }
  block(m, 4, 4, d, x, lp);
  store.write_block(4, 4, x.data(), lp.data());
  CHECK_THROWS_AS(store.write_block(3, 4, x.data(), lp.data()), IoError);   // not a block boundary
  CHECK_THROWS_AS(store.write_block(11, 1, x.data(), lp.data()), IoError);  // past the draws
  std::vector<double> col;
  for (int j = -1; j < d; ++j) {
    store.column(j < 0 ? store.lp_column() : static_cast<std::size_t>(j), col);
    bool ok = col.size() == static_cast<std::size_t>(m * draws);
    for (std::int64_t c = 0; c < m && ok; ++c)
      for (std::int64_t t = 0; t < draws; ++t)
        ok = ok && col[static_cast<std::size_t>(c * draws + t)] == value(c, t, j);
    CHECK(ok);
  }
  // Ranges of the [chain, draw] layout read straight from the file: within a chain and a
  // block, across blocks, across chains, all of it; past the end refused.
  for (int j = -1; j < d; ++j) {
    const std::size_t cj = j < 0 ? store.lp_column() : static_cast<std::size_t>(j);
    store.column(cj, col);
    for (const auto& [first, len] : std::vector<std::pair<std::size_t, std::size_t>>{
             {0, 1}, {1, 3}, {2, 7}, {9, 5}, {10, 13}, {21, 34}, {0, 55}, {54, 1}, {44, 0}}) {
      INFO("column " << j << " entries [" << first << ", " << first + len << ")");
      std::vector<double> got(len, -1.0);
      store.read_range(cj, first, got);
      CHECK(std::equal(got.begin(), got.end(), col.begin() + static_cast<std::ptrdiff_t>(first)));
    }
  }
  {
    std::vector<double> past(2);
    CHECK_THROWS_AS(store.read_range(0, 54, past), IoError);
  }
  // Chains [1, 4) as a group; an appended column written for chains [2, 5) and read back.
  MemoryBatchedSink g;
  store.read_chains(1, 3, g, false);
  CHECK(g.num_chains == 3);
  CHECK(g.x[static_cast<std::size_t>((2 * draws + 9) * d + 1)] == value(3, 9, 1));
  CHECK(g.lp[static_cast<std::size_t>(0 * draws + 10)] == value(1, 10, -1));
  const std::size_t q = store.add_columns(1);
  std::vector<double> v(static_cast<std::size_t>(3 * draws));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * double(i);
  store.write_chains(q, 2, 3, v.data());
  store.column(q, col);
  CHECK(col[0] == 0.0);  // chains 0 and 1: not written, zeros
  CHECK(col[static_cast<std::size_t>(2 * draws)] == 0.0);
  CHECK(col[static_cast<std::size_t>(4 * draws + 7)] == 0.5 * double(2 * draws + 7));
  CHECK(store.chain_group() >= 1);
  CHECK(store.chain_group() <= m);
  // Compact rows, counted as the blocks come: runs of equal x and lp, across a block boundary.
  BatchedDrawStore runs(dir.string(), 2, 1, 6);
  const std::vector<double> x1 = {1, 1, 2, 5, 6, 6}, lp1 = {0, 0, 0, 0, 0, 1};  // [chain, 3 draws]
  const std::vector<double> x2 = {2, 2, 3, 6, 7, 7}, lp2 = {0, 0, 0, 1, 1, 1};
  runs.write_block(0, 3, x1.data(), lp1.data());
  runs.write_block(0, 3, x1.data(), lp1.data());  // the same block again: not counted twice
  runs.write_block(3, 3, x2.data(), lp2.data());
  CHECK(runs.compact_rows() == std::vector<std::int64_t>{3, 4});
  fs::remove_all(dir);
}

TEST_CASE("batched posterior: variables' and quantities' summaries on 1, 2 and 3 threads are summarize's, bit for bit",
          "[mcmc]") {
  // 8 chains x 600 draws of 5 coordinates (AR(1) draws of different correlations; one with
  // ties), and derived quantities: a repeat of the variable a (left out), exp(a), and a
  // vector s[1..2].
  const std::size_t m = 8, n = 600;
  const int d = 5;
  std::vector<std::vector<double>> coord;
  coord.reserve(static_cast<std::size_t>(d));
  for (int j = 0; j < d; ++j) coord.push_back(herd_test::lcg_ar1(m, n, 0.1 + 0.2 * j, 100.0 + j, 0.05 * j));
  for (double& v : coord[3]) v = std::round(v * 16.0) / 16.0;
  std::vector<double> x(m * n * static_cast<std::size_t>(d)), lp(m * n, 0.0);
  for (std::size_t q = 0; q < m * n; ++q)
    for (int j = 0; j < d; ++j) x[q * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)] = coord[j][q];
  const fs::path dir = fresh_dir("threads");
  BatchedDrawStore draws(dir.string(), static_cast<std::int64_t>(m), d, static_cast<std::int64_t>(n));
  // Blocks of 256 draws ([m, nb, d] each), as the engine writes them.
  constexpr std::size_t kBlock = 256;
  const auto du = static_cast<std::size_t>(d);
  for (std::size_t first = 0; first < n; first += kBlock) {
    const std::size_t nb = std::min(kBlock, n - first);
    std::vector<double> bx(m * nb * du), blp(m * nb, 0.0);
    for (std::size_t c = 0; c < m; ++c)
      for (std::size_t t = 0; t < nb; ++t)
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>((c * n + first + t) * du), du,
                    bx.begin() + static_cast<std::ptrdiff_t>((c * nb + t) * du));
    draws.write_block(static_cast<std::int64_t>(first), static_cast<std::int64_t>(nb), bx.data(), blp.data());
  }
  const std::vector<std::string> names = {"a", "b[1]", "b[2]", "c", "e"};
  SampleTarget target;
  target.ndim = d;
  target.quantity_names = {"a", "ea", "s[1]", "s[2]"};
  target.quantities = [](const double* p, double* q) {
    q[0] = p[0];
    q[1] = std::exp(p[0]);
    q[2] = p[1] + p[3];
    q[3] = p[1] * p[2];
  };
  // The references: summarize and nested_rhat of each column on this thread.
  std::vector<std::vector<double>> columns = coord;
  std::vector<std::vector<double>> quantity(3, std::vector<double>(m * n));
  for (std::size_t q = 0; q < m * n; ++q) {
    quantity[0][q] = std::exp(coord[0][q]);
    quantity[1][q] = coord[1][q] + coord[3][q];
    quantity[2][q] = coord[1][q] * coord[2][q];
  }
  columns.insert(columns.end(), quantity.begin(), quantity.end());
  const std::vector<std::string> row_names = {"a", "b[1]", "b[2]", "c", "e", "ea", "s[1]", "s[2]"};
  std::vector<DiagnosticSummary> one;
  std::vector<double> nested;
  for (const auto& col : columns) {
    release_diagnostics_workspace();
    one.push_back(summarize(DrawsView(col, m, n)));
    nested.push_back(nested_rhat(DrawsView(col, m, n), 4));
  }
  const auto bits = herd::mcmc::testing::summary_bits;
  // In memory (the default budget), then streamed past a budget of 0 bytes (each column read
  // from the store in blocks: the same bits).
  const std::size_t saved_budget = diagnostics_rank_budget();
  for (const bool streamed : {false, true})
    for (std::size_t threads : {1, 2, 3}) {
      INFO("threads " << threads << (streamed ? ", streamed" : ", in memory"));
      set_diagnostics_rank_budget(streamed ? 0 : saved_budget);
      CHECK(diagnostics_out_of_core(m, n) == streamed);
      BatchedPosterior p = summarize_batched_draws(draws, names, 4, threads);
      io::H5File h5 = io::H5File::create((dir / fmt::format("t{}{}.h5", threads, streamed ? "s" : "")).string());
      io::H5Group post = h5.root().create_group("posterior");  // with its scales, as the gather sink leaves it
      post.create_coordinate<std::int64_t>("chain", std::vector<std::int64_t>(m, 0));
      post.create_coordinate<std::int64_t>("draw", std::vector<std::int64_t>(n, 0));
      add_batched_quantities(h5, target, names, draws, p, 4, threads);
      REQUIRE(p.rows.size() == columns.size());
      REQUIRE(p.columns.size() == columns.size());
      REQUIRE(p.nested_rhat.size() == columns.size());
      REQUIRE(p.diagnostics.size() == names.size());
      std::vector<double> col;
      for (std::size_t k = 0; k < columns.size(); ++k) {
        INFO(row_names[k]);
        CHECK(p.rows[k].name == row_names[k]);
        draws.column(p.columns[k], col);
        CHECK(col == columns[k]);
        CHECK(bits(p.rows[k].stats) == bits(one[k]));
        CHECK(std::bit_cast<std::uint64_t>(p.nested_rhat[k]) == std::bit_cast<std::uint64_t>(nested[k]));
        if (k < names.size()) {
          CHECK(std::bit_cast<std::uint64_t>(p.diagnostics[k].nested_rhat) == std::bit_cast<std::uint64_t>(nested[k]));
          CHECK(std::bit_cast<std::uint64_t>(p.diagnostics[k].ess_bulk) ==
                std::bit_cast<std::uint64_t>(one[k].ess_bulk));
        }
      }
      // The derived quantities' `posterior` datasets: ea [chain, draw], s [chain, draw, 2].
      CHECK(post.read<double>("ea") == columns[5]);
      const std::vector<double> s = post.read<double>("s");
      REQUIRE(s.size() == 2 * m * n);
      std::size_t wrong = 0;
      for (std::size_t q = 0; q < m * n; ++q) wrong += s[2 * q] != columns[6][q] || s[2 * q + 1] != columns[7][q];
      CHECK(wrong == 0);
    }
  set_diagnostics_rank_budget(saved_budget);
  fs::remove_all(dir);
}
