// Replay buffer: sum-tree invariants, sampling probabilities (chi-square), n-step targets
// against written-out sums, wrap-around, checkpoint round trip; frame stacks stored as
// single frames and rebuilt (against the frame-stack wrapper's observations).
#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/replay_buffer.hpp"
#include "herd/rl/wrappers.hpp"

using herd::RngPurpose;
using herd::RngStream;
using namespace herd::rl;

namespace {

// One add of a single env: observation (1-D, value `o`), action, reward, flags.
void add1(ReplayBuffer& rb, float o, std::int64_t a, double r, bool term = false, bool trunc = false,
          float final_o = 0) {
  const std::uint8_t t = term, u = trunc;
  rb.add(&o, &a, &r, &t, &u, &final_o);
}

// Samples until every valid slot was seen at least once; returns slot -> (obs, next_obs,
// return, discount, steps).
struct Seen {
  float obs, next;
  double ret, disc;
  int steps;
};
std::map<std::uint64_t, Seen> sample_all(const ReplayBuffer& rb, int draws = 4000) {
  std::map<std::uint64_t, Seen> out;
  ReplaySample s;
  auto cur = RngStream(7, 0, RngPurpose::kShuffle).at(0);
  rb.sample(static_cast<std::size_t>(draws), cur, 1.0, s);
  for (int i = 0; i < draws; ++i)
    out[s.indices[static_cast<std::size_t>(i)]] = {
        s.obs[static_cast<std::size_t>(i)], s.next_obs[static_cast<std::size_t>(i)],
        s.returns[static_cast<std::size_t>(i)], s.discounts[static_cast<std::size_t>(i)],
        s.steps[static_cast<std::size_t>(i)]};
  return out;
}

// Two buffers (e.g. one restored from the other's checkpoint) draw the same `n` samples
// from the same stream (`seed`), bit for bit.
void check_same_samples(const ReplayBuffer& a, const ReplayBuffer& b, std::size_t n, double beta, std::uint64_t seed) {
  ReplaySample x, y;
  auto ca = RngStream(seed, 0, RngPurpose::kShuffle).at(1), cb = ca;
  a.sample(n, ca, beta, x);
  b.sample(n, cb, beta, y);
  CHECK(x.indices == y.indices);
  CHECK(x.obs == y.obs);
  CHECK(x.next_obs == y.next_obs);
  CHECK(x.weights == y.weights);
  CHECK(x.returns == y.returns);
  CHECK(x.discounts == y.discounts);
}

}  // namespace

TEST_CASE("SumTree keeps sums, finds by prefix and rebuilds bit for bit", "[rl][replay]") {
  SumTree t(5);  // padded to 8 leaves
  const std::vector<double> v = {0.5, 0.0, 2.0, 1.25, 0.25};
  for (std::size_t i = 0; i < v.size(); ++i) t.set(i, v[i]);
  CHECK(t.total() == 4.0);
  // Cumulative: [0, 0.5) -> 0, leaf 1 empty, [0.5, 2.5) -> 2, [2.5, 3.75) -> 3, [3.75, 4) -> 4.
  CHECK(t.find(0.0) == 0);
  CHECK(t.find(0.49) == 0);
  CHECK(t.find(0.5) == 2);
  CHECK(t.find(2.49) == 2);
  CHECK(t.find(2.5) == 3);
  CHECK(t.find(3.75) == 4);
  CHECK(t.find(3.999) == 4);
  CHECK(t.find(4.0) == 4);  // at the total (rounding): the last positive leaf
  CHECK(t.find(100.0) == 4);
  t.set(2, 0.0);
  CHECK(t.total() == 2.0);
  CHECK(t.find(0.5) == 3);
  t.set(4, 0.0);
  CHECK(t.find(1.9) == 3);
  CHECK(t.find(5.0) == 3);  // never a zero leaf
  // Random updates: every inner node equals the brute-force sums; a rebuild from the
  // leaves gives the same tree.
  SumTree a(37);
  std::vector<double> leaves(37, 0.0);
  const RngStream rng(3, 0, RngPurpose::kGeneric);
  for (std::uint64_t k = 0; k < 2000; ++k) {
    auto c = rng.at(k);
    const std::size_t i = c.below(37);
    const double x = c.uniform() < 0.2 ? 0.0 : c.uniform() * 10;
    a.set(i, x);
    leaves[i] = x;
  }
  double sum = 0;
  for (double x : leaves) sum += x;
  CHECK(a.total() == Approx(sum).epsilon(1e-12));
  double cum = 0;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i] > 0) {
      CHECK(a.find(cum + 0.5 * leaves[i]) == i);
    }
    cum += leaves[i];
  }
  SumTree b(37);
  b.assign(a.leaves());
  CHECK(b.total() == a.total());  // exactly: the sums are recomputed from children
  for (double p = 0.0; p < sum; p += sum / 97) CHECK(b.find(p) == a.find(p));
  CHECK_THROWS_AS(a.set(37, 1.0), herd::InputError);
  CHECK_THROWS_AS(a.set(0, -1.0), herd::InputError);
  CHECK_THROWS_AS(a.set(0, std::nan("")), herd::InputError);
  CHECK_THROWS_AS(SumTree(3).find(0.0), herd::InputError);
}

// Chi-square goodness of fit at level 0.001 (false-failure rate 0.1% per test, seeds fixed
// before looking at results). 0.999 quantiles: 24.322 (7 df), 20.515 (5 df).
static double chi_square(const std::vector<double>& counts, const std::vector<double>& p, double n) {
  double x = 0;
  for (std::size_t i = 0; i < p.size(); ++i) x += (counts[i] - n * p[i]) * (counts[i] - n * p[i]) / (n * p[i]);
  return x;
}

TEST_CASE("Prioritized replay samples in proportion to (|delta| + eps)^alpha", "[rl][replay]") {
  // 8 terminated one-step episodes, priorities |delta| = 1..8 (eps tiny), alpha = 1 and 0.5.
  // Power: with 20000 draws the test rejects sampling proportional to sqrt(priority) when
  // alpha = 1 (noncentrality 1663: power ~1), i.e. an exponent applied wrongly.
  for (const double alpha : {1.0, 0.5}) {
    ReplayBufferOptions o;
    o.capacity = 10;
    o.prioritized = true;
    o.alpha = alpha;
    o.priority_eps = 1e-12;
    ReplayBuffer rb(o);
    for (int i = 0; i < 8; ++i) add1(rb, static_cast<float>(i), 0, 0.0, true);
    REQUIRE(rb.size() == 8);
    // New transitions come in at the largest priority so far (1).
    for (std::uint64_t s = 0; s < 8; ++s) CHECK(rb.priority(s) == 1.0);
    std::vector<std::uint64_t> idx = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<double> err = {1, -2, 3, -4, 5, 6, -7, 8};
    rb.update_priorities(idx, err);
    CHECK(rb.max_priority() == Approx(8.0));
    std::vector<double> p(8);
    double z = 0;
    for (int i = 0; i < 8; ++i) z += std::pow(i + 1.0, alpha);
    for (int i = 0; i < 8; ++i) p[static_cast<std::size_t>(i)] = std::pow(i + 1.0, alpha) / z;
    // Batches of 1 (independent draws) and stratified batches of 16 (same marginal law).
    for (const std::size_t batch : {std::size_t{1}, std::size_t{16}}) {
      std::vector<double> counts(8, 0.0);
      const int n = 20000;
      const RngStream rng(11, 0, RngPurpose::kShuffle);
      ReplaySample s;
      for (int k = 0; k < n / static_cast<int>(batch); ++k) {
        auto c = rng.at(static_cast<std::uint64_t>(k));
        rb.sample(batch, c, 0.4, s);
        for (auto i : s.indices) counts[static_cast<std::size_t>(i)] += 1;
      }
      CHECK(chi_square(counts, p, n) < 24.322);
    }
    // Importance weights: (N P(i))^-beta over the batch's largest.
    ReplaySample s;
    auto c = RngStream(5, 0, RngPurpose::kShuffle).at(0);
    rb.sample(8, c, 0.4, s);
    double wmax = 0;
    for (auto i : s.indices) wmax = std::max(wmax, std::pow(8 * p[static_cast<std::size_t>(i)], -0.4));
    for (std::size_t k = 0; k < 8; ++k)
      CHECK(s.weights[k] == Approx(std::pow(8 * p[static_cast<std::size_t>(s.indices[k])], -0.4) / wmax));
  }
}

TEST_CASE("Uniform replay samples valid transitions equally often", "[rl][replay]") {
  // 6 valid transitions (n = 2; the newest slot of the running episode waits); 60000 draws
  // reject a cell 10% too likely with power ~1 (noncentrality 81).
  ReplayBufferOptions o;
  o.capacity = 20;
  o.n_step = 2;
  ReplayBuffer rb(o);
  for (int i = 0; i < 8; ++i) add1(rb, static_cast<float>(i), 0, 1.0);
  REQUIRE(rb.size() == 6);
  std::vector<double> counts(6, 0.0);
  ReplaySample s;
  auto c = RngStream(13, 0, RngPurpose::kShuffle).at(0);
  rb.sample(60000, c, 1.0, s);
  for (auto i : s.indices) {
    REQUIRE(i < 6);
    counts[static_cast<std::size_t>(i)] += 1;
  }
  for (double w : s.weights) REQUIRE(w == 1.0);
  CHECK(chi_square(counts, std::vector<double>(6, 1.0 / 6), 60000) < 20.515);
}

TEST_CASE("n-step returns match the written-out sums, cut at terminated, bootstrapped at truncated", "[rl][replay]") {
  ReplayBufferOptions o;
  o.capacity = 64;
  o.n_step = 3;
  o.gamma = 0.5;
  ReplayBuffer rb(o);
  // Episode A: obs 0..3, rewards 1, 2, 4, 8, terminated at its 4th step.
  add1(rb, 0, 0, 1);
  add1(rb, 1, 1, 2);
  add1(rb, 2, 0, 4);
  add1(rb, 3, 1, 8, true);
  // Episode B: obs 10, 11, rewards 16, 32, truncated at its 2nd step with final obs 12.
  add1(rb, 10, 0, 16);
  add1(rb, 11, 1, 32, false, true, 12);
  // Episode C (running): obs 20..24, rewards 64, 128, 256, 512, 1024.
  for (int k = 0; k < 5; ++k) add1(rb, 20.0f + static_cast<float>(k), 0, std::ldexp(64.0, k));
  // Slots: A 0-3, B 4-5, final obs 6, C 7-11. C's slots 9-11 wait for later steps.
  CHECK(rb.size() == 4 + 2 + 2);
  const auto seen = sample_all(rb);
  REQUIRE(seen.size() == 8);
  const auto check = [&](std::uint64_t slot, float obs, float next, double ret, double disc, int steps) {
    INFO("slot " << slot);
    REQUIRE(seen.count(slot) == 1);
    const Seen& s = seen.at(slot);
    CHECK(s.obs == obs);
    CHECK(s.next == next);
    CHECK(s.ret == ret);
    CHECK(s.disc == disc);
    CHECK(s.steps == steps);
  };
  check(0, 0, 3, 1 + 0.5 * 2 + 0.25 * 4, 0.125, 3);
  check(1, 1, 10, 2 + 0.5 * 4 + 0.25 * 8, 0.0, 3);  // terminates within the horizon (next obs unused)
  check(2, 2, 10, 4 + 0.5 * 8, 0.0, 2);             // next obs irrelevant (discount 0)
  check(3, 3, 10, 8, 0.0, 1);
  check(4, 10, 12, 16 + 0.5 * 32, 0.25, 2);  // truncated: bootstrap from the final obs
  check(5, 11, 12, 32, 0.5, 1);
  check(7, 20, 23, 64 + 0.5 * 128 + 0.25 * 256, 0.125, 3);
  check(8, 21, 24, 128 + 0.5 * 256 + 0.25 * 512, 0.125, 3);
  // One more step makes slot 9 valid.
  add1(rb, 25, 0, 2048);
  CHECK(rb.size() == 9);
  const auto again = sample_all(rb);
  REQUIRE(again.count(9) == 1);
  CHECK(again.at(9).ret == 256 + 0.5 * 512 + 0.25 * 1024);
  CHECK(again.at(9).next == 25);
}

TEST_CASE("Replay rings wrap around per env, and a checkpoint restores the buffer exactly", "[rl][replay]") {
  ReplayBufferOptions o;
  o.capacity = 12;  // 2 envs x 6 slots
  o.num_envs = 2;
  o.n_step = 2;
  o.gamma = 0.5;
  o.uint8_obs = true;
  o.prioritized = true;
  o.alpha = 0.7;
  ReplayBuffer rb(o);
  REQUIRE(rb.slots_per_env() == 6);
  CHECK(rb.bytes_per_slot() == Approx(1 + 9 + 16 * 16.0 / 12));
  // Env 0: obs 0, 1, 2, ... rewards = obs; env 1: obs 100 + k, truncated every 4th step.
  for (int k = 0; k < 15; ++k) {
    const float obs[2] = {static_cast<float>(k), static_cast<float>(100 + k)};
    const float fin[2] = {0, static_cast<float>(200 + k)};
    const std::int64_t act[2] = {k % 3, 1};
    const double rew[2] = {static_cast<double>(k), 1.0};
    const std::uint8_t term[2] = {0, 0}, trunc[2] = {0, static_cast<std::uint8_t>(k % 4 == 3)};
    rb.add(obs, act, rew, term, trunc, fin);
  }
  CHECK(rb.steps_added() == 30);
  // Env 0 wrote 15 slots: obs 9..14 remain in slots (9..14) mod 6; 9..12 are valid.
  const auto seen = sample_all(rb, 20000);
  std::vector<float> env0;
  for (const auto& [slot, s] : seen)
    if (slot < 6) {
      env0.push_back(s.obs);
      CHECK(s.steps == 2);
      CHECK(s.ret == s.obs + 0.5 * (s.obs + 1));  // across the ring's end too
      CHECK(s.next == s.obs + 2);
      CHECK(s.disc == 0.25);
    }
  std::sort(env0.begin(), env0.end());
  CHECK(env0 == std::vector<float>{9, 10, 11, 12});
  // Env 1 wrote 15 steps + 3 final slots = 18 slots: the last 6 are steps 11 (truncated),
  // final 211, steps 12, 13, 14 (the latter two waiting) -> valid: steps 10, 11 and 12.
  std::vector<float> env1;
  for (const auto& [slot, s] : seen)
    if (slot >= 6) env1.push_back(s.obs);
  std::sort(env1.begin(), env1.end());
  CHECK(env1 == std::vector<float>{110, 111, 112});
  for (const auto& [slot, s] : seen)
    if (s.obs == 111) {
      CHECK(s.next == 211);
      CHECK(s.disc == 0.5);
    }
  // Priorities, then a checkpoint round trip: the same samples bit for bit.
  ReplaySample a;
  auto c0 = RngStream(1, 0, RngPurpose::kShuffle).at(0);
  rb.sample(8, c0, 0.5, a);
  std::vector<double> err(a.indices.size());
  for (std::size_t i = 0; i < err.size(); ++i) err[i] = 0.1 * static_cast<double>(i + 1);
  rb.update_priorities(a.indices, err);
  herd::io::CheckpointWriter w("test", 1);
  rb.save(w, "rb/");
  const auto bytes = w.serialize();
  herd::io::CheckpointReader r(bytes, "memory");
  ReplayBuffer copy(o);
  copy.load(r, "rb/");
  CHECK(copy.size() == rb.size());
  CHECK(copy.max_priority() == rb.max_priority());
  check_same_samples(rb, copy, 32, 0.5, 1);
  // A buffer of other options refuses the checkpoint.
  ReplayBufferOptions o2 = o;
  o2.n_step = 3;
  ReplayBuffer other(o2);
  CHECK_THROWS_AS(other.load(r, "rb/"), herd::InputError);
}

TEST_CASE("Replay buffer refuses bad options and observations uint8 cannot hold", "[rl][replay]") {
  ReplayBufferOptions o;
  o.capacity = 8;
  o.num_envs = 3;  // 2 slots per env < n_step + 2
  CHECK_THROWS_WITH(ReplayBuffer(o), Catch::Contains("raise the buffer size to >= 9"));
  o.capacity = 9;
  o.n_step = 1;
  CHECK_NOTHROW(ReplayBuffer(o));
  o.num_envs = 1;
  o.gamma = 1.5;
  CHECK_THROWS_AS(ReplayBuffer(o), herd::InputError);
  o.gamma = 0.9;
  o.uint8_obs = true;
  ReplayBuffer rb(o);
  CHECK_THROWS_WITH(add1(rb, 0.5f, 0, 0), Catch::Contains("component 0 is 0.5"));
  CHECK_THROWS_AS(add1(rb, 256.0f, 0, 0), herd::InputError);
  CHECK(rb.steps_added() == 0);
  add1(rb, 255.0f, 0, 0, true);
  ReplaySample s;
  auto c = RngStream(1, 0, RngPurpose::kShuffle).at(0);
  rb.sample(1, c, 1, s);
  CHECK(s.obs[0] == 255.0f);
  CHECK_THROWS_AS(rb.sample(0, c, 1, s), herd::InputError);
}

namespace {

// Steps a pool of `id` with random actions into a frame-stack replay (and, as reference, a
// mirror of the stacked observation each slot should hold, kept by the slot rule of the
// class comment), and checks every sampled stack against the mirror: obs, next_obs, over
// several wraps of the rings. Returns the buffer's bytes per slot.
double check_rebuilt_stacks(const std::string& id, const WrapperOptions& w, bool uint8_obs, std::size_t per_env) {
  const std::string wrapped = register_wrapped_env(id, w);
  EnvPoolOptions po;
  po.env_id = wrapped;
  po.num_envs = 3;
  po.seed = 11;
  EnvPool pool(po);
  pool.reset();
  const std::size_t B = pool.num_envs(), D = pool.obs_dim();
  ReplayBufferOptions o;
  o.capacity = per_env * B;
  o.num_envs = B;
  o.obs_dim = D;
  o.uint8_obs = uint8_obs;
  o.frame_stack = w.frame_stack;
  o.n_step = 2;
  o.gamma = 0.9;
  o.prioritized = true;
  ReplayBuffer rb(o);
  REQUIRE(rb.slots_per_env() == per_env);
  std::vector<std::vector<float>> mirror(per_env * B);
  std::vector<std::uint64_t> written(B, 0);
  auto rng = RngStream(5, 0, RngPurpose::kPolicy).at(0);
  const auto n_actions = static_cast<std::uint32_t>(pool.action_space().n());
  std::vector<float> obs(pool.obs().begin(), pool.obs().end());
  ReplaySample s;
  std::size_t checked = 0, truncations = 0, terminations = 0;
  for (int step = 0; step < 12 * static_cast<int>(per_env); ++step) {
    std::vector<std::int64_t> act(B);
    for (auto& a : act) a = static_cast<std::int64_t>(rng.below(n_actions));
    std::vector<std::int64_t> env_act(act);
    for (auto& a : env_act) a += pool.action_space().start();
    pool.step(std::span<const std::int64_t>(env_act));
    const auto term = pool.terminated(), trunc = pool.truncated();
    rb.add(obs.data(), act.data(), pool.rewards().data(), term.data(), trunc.data(), pool.final_obs().data());
    for (std::size_t b = 0; b < B; ++b) {
      mirror[b * per_env + written[b]++ % per_env].assign(obs.begin() + static_cast<std::ptrdiff_t>(b * D),
                                                          obs.begin() + static_cast<std::ptrdiff_t>((b + 1) * D));
      terminations += term[b];
      if (trunc[b] && !term[b]) {
        ++truncations;
        const float* f = pool.final_obs().data() + b * D;
        mirror[b * per_env + written[b]++ % per_env].assign(f, f + D);
      }
    }
    obs.assign(pool.obs().begin(), pool.obs().end());
    if (step % 7 != 6 || rb.size() == 0) continue;
    auto cur = RngStream(5, 1, RngPurpose::kShuffle).at(static_cast<std::uint64_t>(step));
    rb.sample(64, cur, 0.5, s);
    for (std::size_t i = 0; i < 64; ++i) {
      const std::size_t slot = s.indices[i], env = slot / per_env, pos = slot % per_env;
      const std::size_t boot = env * per_env + (pos + static_cast<std::size_t>(s.steps[i])) % per_env;
      const std::vector<float> got(s.obs.begin() + static_cast<std::ptrdiff_t>(i * D),
                                   s.obs.begin() + static_cast<std::ptrdiff_t>((i + 1) * D));
      const std::vector<float> next(s.next_obs.begin() + static_cast<std::ptrdiff_t>(i * D),
                                    s.next_obs.begin() + static_cast<std::ptrdiff_t>((i + 1) * D));
      INFO("step " << step << " slot " << slot);
      REQUIRE(got == mirror[slot]);
      if (s.discounts[i] != 0.0) REQUIRE(next == mirror[boot]);
      ++checked;
    }
    // Priorities change the draws, not the stacks.
    std::vector<double> err(64);
    for (std::size_t i = 0; i < 64; ++i) err[i] = 0.05 * static_cast<double>(i % 9);
    rb.update_priorities(s.indices, err);
  }
  INFO(wrapped);
  CHECK(checked > 1000);
  CHECK(truncations > 10);
  CHECK(*std::min_element(written.begin(), written.end()) > 10 * per_env);  // many wraps
  if (id.rfind("MinAtar/", 0) == 0) CHECK(terminations > 10);
  return rb.bytes_per_slot();
}

}  // namespace

TEST_CASE("Frame-stack replay stores each frame once and rebuilds the wrapper's stacks exactly", "[rl][replay]") {
  // MinAtar Breakout (uint8, episodes end by terminations and by a 13-step time limit) and
  // CartPole (float32, 3 frames, 9-step limit): random episodes, resets, truncations with
  // final slots, rings wrapping many times; every sampled stack equals the stacked
  // observation the pool gave for that slot, bit for bit.
  WrapperOptions w;
  w.frame_stack = 4;
  w.max_episode_steps = 13;
  check_rebuilt_stacks("MinAtar/Breakout-v1", w, true, 24);
  w.frame_stack = 3;
  w.max_episode_steps = 9;
  check_rebuilt_stacks("CartPole-v1", w, false, 17);
}

TEST_CASE("Frame-stack replay: bytes per transition, refusals, checkpoint round trip", "[rl][replay]") {
  // Bytes per transition of MinAtar Breakout with a 4-frame stack ([16, 10, 10] as uint8),
  // capacity 2^16 (the tree needs no padding): 400 + 9 + 16 = 425 bytes, against
  // 1600 + 9 + 16 = 1625 when whole stacks are stored: 3.8 times less (the observations
  // alone: 4 times).
  ReplayBufferOptions o;
  o.capacity = 65536;
  o.obs_dim = 1600;
  o.uint8_obs = true;
  ReplayBufferOptions whole = o;
  o.frame_stack = 4;
  CHECK(ReplayBuffer(o).bytes_per_slot() == 425.0);
  CHECK(ReplayBuffer(whole).bytes_per_slot() == 1625.0);
  CHECK(ReplayBuffer::memory_need(o) == 65536.0 * 425.0);
  CHECK(ReplayBuffer::memory_need(whole) == 65536.0 * 1625.0);

  // Options: k must divide obs_dim; a ring must hold n_step + k + 1 slots.
  ReplayBufferOptions bad = o;
  bad.frame_stack = 3;
  CHECK_THROWS_WITH(ReplayBuffer(bad), Catch::Contains("frame_stack is 3, but must be >= 1 and divide obs_dim 1600"));
  bad.frame_stack = 4;
  bad.capacity = 5;
  CHECK_THROWS_WITH(ReplayBuffer(bad), Catch::Contains("n_step 1 and frame_stack 4 need at least 6"));

  // Observations that are not the wrapper's stacks are refused, nothing stored: SB3's
  // zero padding at a reset, or a stack whose older frames are not the frames before it.
  ReplayBufferOptions t;
  t.capacity = 8;
  t.obs_dim = 2;  // 2 frames of 1 value
  t.frame_stack = 2;
  ReplayBuffer rb(t);
  const auto add = [&](float older, float newest, bool term = false, bool trunc = false, float fin_older = 0,
                       float fin_newest = 0) {
    const float obs[2] = {older, newest}, fin[2] = {fin_older, fin_newest};
    const std::int64_t a = 0;
    const double r = 1.0;
    const std::uint8_t te = term, tr = trunc;
    rb.add(obs, &a, &r, &te, &tr, fin);
  };
  CHECK_THROWS_WITH(add(0, 5), Catch::Contains("component 0 (frame 0 of its stack of 2) is 0, but the frames stored "
                                               "make it the episode's first frame, 5"));
  CHECK(rb.steps_added() == 0);
  add(5, 5);
  CHECK_THROWS_WITH(add(4, 6), Catch::Contains("is 4, but the frames stored before it in its episode make it 5"));
  add(5, 6, false, true, 6, 7);  // truncated: final observation (6, 7)
  CHECK_THROWS_WITH(add(6, 8), Catch::Contains("but the frames stored make it the episode's first frame, 8"));
  CHECK_THROWS_WITH(add(9, 9, false, true, 8, 1),
                    Catch::Contains("final observation component 0 (frame 0 of its stack of 2) is 8, but as the "
                                    "observation acted on moved one frame on it must be 9"));
  CHECK(rb.steps_added() == 2);
  add(9, 9);
  add(9, 10, true);
  add(3, 3);
  ReplaySample s;
  auto c = RngStream(2, 0, RngPurpose::kShuffle).at(0);
  rb.sample(200, c, 1.0, s);
  std::map<std::uint64_t, std::vector<float>> seen;
  for (std::size_t i = 0; i < 200; ++i)
    seen[s.indices[i]] = {s.obs[2 * i], s.obs[2 * i + 1], s.next_obs[2 * i], s.next_obs[2 * i + 1]};
  // Slots: 0 (5,5)->(5,6); 1 (5,6) truncated -> final (6,7) in slot 2; 3 (9,9)->(9,10);
  // 4 (9,10) terminated; 5 (3,3) waits for its next step.
  CHECK(seen.size() == 4);
  CHECK(seen[0] == std::vector<float>{5, 5, 5, 6});
  CHECK(seen[1] == std::vector<float>{5, 6, 6, 7});
  CHECK(seen[3] == std::vector<float>{9, 9, 9, 10});
  CHECK(seen[4][0] == 9);
  CHECK(seen[4][1] == 10);

  // The checkpoint holds one frame per slot and restores the buffer exactly; a run with
  // another frame_stack (or whole observations, as checkpoints before this storage) refuses it.
  herd::io::CheckpointWriter w("test", 1);
  rb.save(w, "rb/");
  const auto bytes = w.serialize();
  herd::io::CheckpointReader r(bytes, "memory");
  CHECK(r.bytes("rb/obs_f32").size() == 6 * sizeof(float));
  ReplayBuffer copy(t);
  copy.load(r, "rb/");
  check_same_samples(rb, copy, 50, 1.0, 3);
  ReplayBufferOptions t1 = t;
  t1.frame_stack = 1;
  ReplayBuffer plain(t1);
  CHECK_THROWS_WITH(plain.load(r, "rb/"), Catch::Contains("stores the newest of 2 stacked frames per slot, but this "
                                                          "run's stores whole observations"));
}

TEST_CASE("uint8 replay storage refuses a value it cannot hold, saying why uint8 was chosen", "[rl][replay]") {
  // An env that declares integer observations (a C env's obs_integer = 1) but writes 0.5:
  // the message names the declaration that chose bytes, which is the user's to fix.
  ReplayBufferOptions o;
  o.capacity = 8;
  o.num_envs = 1;
  o.obs_dim = 2;
  o.uint8_obs = true;
  ReplayBuffer rb(o);
  const float obs[2] = {1.0f, 0.5f}, fin[2] = {0, 0};
  const std::int64_t act[1] = {0};
  const double rew[1] = {0.0};
  const std::uint8_t term[1] = {0}, trunc[1] = {0};
  CHECK_THROWS_WITH(rb.add(obs, act, rew, term, trunc, fin), Catch::Contains("env 0 observation component 1 is 0.5") &&
                                                                 Catch::Contains("a C env's obs_integer = 1"));
  CHECK(rb.steps_added() == 0);
}
