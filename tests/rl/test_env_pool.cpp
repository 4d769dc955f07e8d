// EnvPool: sync steps against standalone envs (auto-reset, final observation, flags) on all
// envs, async mode (each result exactly once, trajectories independent of thread count and
// batch size, equal to sync mode), zero-copy buffers and action validation.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/envs.hpp"
#include "herd/rl/registry.hpp"

using herd::rl::EnvBatch;
using herd::rl::EnvPool;
using herd::rl::EnvPoolOptions;

namespace {

const char* const kIds[] = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"};

/// Deterministic action of env k (global id) at its t-th step: a valid discrete action, or
/// a torque/force in [-3, 3] (outside the bounds, to exercise clipping).
double action_of(const herd::rl::Space& space, std::uint32_t k, std::uint64_t t) {
  const herd::RngStream s(77, k);
  if (space.is_discrete()) return static_cast<double>(s.u32(t) % space.n());
  return -3.0 + 6.0 * s.uniform(t);
}

/// One env's results, step by step.
struct Trajectory {
  std::vector<std::vector<float>> obs, final_obs;
  std::vector<double> reward;
  std::vector<int> term, trunc;
};

bool same(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

/// Standalone env k stepped by hand with the documented auto-reset rule.
Trajectory reference(const std::string& id, std::uint32_t k, std::uint64_t seed, int steps, std::int64_t limit) {
  auto env = herd::rl::make_env(id);
  if (limit >= 0) env->set_max_episode_steps(limit);
  env->set_global_id(k);
  Trajectory tr;
  std::vector<float> obs(env->obs_dim());
  env->reset(seed, obs.data());
  tr.obs.push_back(obs);
  for (int t = 0; t < steps; ++t) {
    const double a = action_of(env->action_space(), k, t);
    const auto r = env->step(std::span<const double>(&a, 1), obs.data());
    tr.reward.push_back(r.reward);
    tr.term.push_back(r.terminated);
    tr.trunc.push_back(r.truncated);
    if (r.terminated || r.truncated) {
      tr.final_obs.push_back(obs);
      env->reset(obs.data());
      // The new episode starts from the env's own stream, episode number + 1.
      REQUIRE(env->elapsed_steps() == 0);
    } else {
      tr.final_obs.push_back({});
    }
    tr.obs.push_back(obs);
  }
  return tr;
}

}  // namespace

TEST_CASE("sync EnvPool equals standalone envs with same-step auto-reset", "[rl][pool]") {
  for (const char* id : kIds) {
    for (std::int64_t limit : {-1, 7}) {
      for (std::size_t threads : {1u, 2u, 3u}) {
        INFO(id << " limit " << limit << " threads " << threads);
        EnvPoolOptions o;
        o.env_id = id;
        o.num_envs = 9;
        o.num_threads = threads;
        o.seed = 123;
        o.first_global_id = 100;
        o.max_episode_steps = limit;
        // Every thread used (0), or the adaptive default that keeps cheap steps serial.
        o.min_task_seconds = threads == 3 ? 20e-6 : 0.0;
        EnvPool pool(o);
        const int steps = limit > 0 ? 40 : 520;
        std::vector<Trajectory> ref;
        for (std::uint32_t k = 0; k < 9; ++k) ref.push_back(reference(id, 100 + k, 123, steps, limit));
        pool.reset();
        const float* obs_ptr = pool.obs().data();
        const std::size_t od = pool.obs_dim();
        for (std::size_t k = 0; k < 9; ++k) REQUIRE(same(ref[k].obs[0], pool.obs().data() + k * od));
        std::vector<double> actions(9 * pool.action_dim());
        int ends = 0, truncs = 0;
        for (int t = 0; t < steps; ++t) {
          for (std::uint32_t k = 0; k < 9; ++k) actions[k] = action_of(pool.action_space(), 100 + k, t);
          pool.step(actions);
          REQUIRE(pool.obs().data() == obs_ptr);  // the caller-visible buffer stays put
          for (std::size_t k = 0; k < 9; ++k) {
            INFO("env " << k << " step " << t);
            REQUIRE(same(ref[k].obs[t + 1], pool.obs().data() + k * od));
            REQUIRE(pool.rewards()[k] == ref[k].reward[t]);
            REQUIRE(pool.terminated()[k] == ref[k].term[t]);
            REQUIRE(pool.truncated()[k] == ref[k].trunc[t]);
            if (ref[k].term[t] || ref[k].trunc[t]) {
              REQUIRE(same(ref[k].final_obs[t], pool.final_obs().data() + k * od));
              ++ends;
              truncs += ref[k].trunc[t];
            }
            if (limit > 0)
              REQUIRE(bool(pool.truncated()[k]) == (pool.env(k).elapsed_steps() == 0 && !pool.terminated()[k]));
          }
        }
        CHECK(ends > 0);
        // Registered limits within 520 steps: Acrobot 500, MountainCar and Pendulum 200
        // (CartPole's random episodes terminate first; MountainCarContinuous's limit is 999).
        const std::string sid = id;
        if (limit > 0 || (sid != "CartPole-v1" && sid != "MountainCarContinuous-v0")) {
          CHECK(truncs > 0);
        }
        const EnvBatch b = pool.batch();
        CHECK(b.size() == 9);
        CHECK(b.env_ids[8] == 8);
        CHECK(b.obs.data() == obs_ptr);
      }
    }
  }
}

TEST_CASE("async EnvPool: each result once, trajectories as in sync mode", "[rl][pool]") {
  for (const char* id : {"CartPole-v1", "Pendulum-v1", "MountainCar-v0"}) {
    // At least `rounds` rounds, and then until every env has been stepped: results come in
    // the order they finish, so a worker preempted on a busy machine can hold an env's
    // result back while the others cycle (no real-time fairness is promised); one never
    // returned within max_rounds is a failure.
    const int n = 10, rounds = 300, max_rounds = 10 * rounds;
    const std::int64_t limit = 25;
    // Sync reference trajectories, long enough for any env.
    std::vector<Trajectory> ref;
    for (std::uint32_t k = 0; k < n; ++k) ref.push_back(reference(id, k, 5, max_rounds + 1, limit));
    for (std::size_t batch : {1u, 3u, 10u}) {
      for (std::size_t threads : {1u, 2u, 4u}) {
        INFO(id << " batch " << batch << " threads " << threads);
        EnvPoolOptions o;
        o.env_id = id;
        o.num_envs = n;
        o.batch_size = batch;
        o.num_threads = threads;
        o.seed = 5;
        o.max_episode_steps = limit;
        EnvPool pool(o);
        const std::size_t od = pool.obs_dim();
        std::vector<int> sent(n, 0), received(n, 0);  // results expected / seen per env
        pool.async_reset();
        for (int k = 0; k < n; ++k) sent[k] = 1;
        std::vector<int> step_of(n, -1);  // -1: reset result pending
        for (int r = 0; r < max_rounds; ++r) {
          if (r >= rounds && std::all_of(step_of.begin(), step_of.end(), [](int t) { return t > 0; })) break;
          const EnvBatch b = pool.recv();
          REQUIRE(b.size() == batch);
          std::set<int> ids(b.env_ids.begin(), b.env_ids.end());
          REQUIRE(ids.size() == batch);
          std::vector<double> actions;
          std::vector<std::int32_t> send_ids;
          for (std::size_t j = 0; j < batch; ++j) {
            const int k = b.env_ids[j];
            ++received[k];
            REQUIRE(received[k] == sent[k]);  // exactly once per reset/action sent
            const int t = step_of[k];
            const Trajectory& tr = ref[k];
            REQUIRE(same(tr.obs[t + 1], b.obs.data() + j * od));
            if (t >= 0) {
              REQUIRE(b.rewards[j] == tr.reward[t]);
              REQUIRE(b.terminated[j] == tr.term[t]);
              REQUIRE(b.truncated[j] == tr.trunc[t]);
              if (tr.term[t] || tr.trunc[t]) REQUIRE(same(tr.final_obs[t], b.final_obs.data() + j * od));
            } else {
              REQUIRE(b.rewards[j] == 0.0);
              REQUIRE(b.terminated[j] == 0);
            }
            step_of[k] = t + 1;
            actions.push_back(action_of(pool.action_space(), k, t + 1));
            send_ids.push_back(k);
          }
          if (r == 5) {
            // An env whose result has not been received cannot be sent again.
            for (int k = 0; k < n; ++k) {
              if (sent[k] > received[k] && !ids.count(k)) {
                const double a = action_of(pool.action_space(), k, 0);
                const std::int32_t kid = k;
                CHECK_THROWS_WITH(pool.send(std::span<const double>(&a, 1), std::span<const std::int32_t>(&kid, 1)),
                                  Catch::Contains("in flight"));
                break;
              }
            }
            const std::vector<std::int32_t> dup{send_ids[0], send_ids[0]};
            const std::vector<double> da{actions[0], actions[0]};
            CHECK_THROWS_WITH(pool.send(da, dup), Catch::Contains("twice"));
          }
          pool.send(actions, send_ids);
          for (int k : send_ids) ++sent[k];
        }
        // Every env stepped; total results = total sent minus those still in flight.
        int total_sent = 0, total_received = 0;
        for (int k = 0; k < n; ++k) {
          total_sent += sent[k];
          total_received += received[k];
          CHECK(step_of[k] > 0);
        }
        CHECK(static_cast<std::size_t>(total_sent - total_received) == pool.in_flight());
      }
    }
  }
}

TEST_CASE("EnvPool: int64 actions step as their float64 values", "[rl][pool]") {
  // Discrete(2) (CartPole) and Discrete(3) (Acrobot), 37 envs: not a multiple of the
  // vector widths of the conversion.
  for (const char* id : {"CartPole-v1", "Acrobot-v1"}) {
    INFO(id);
    EnvPoolOptions o;
    o.env_id = id;
    o.num_envs = 37;
    o.seed = 3;
    EnvPool a(o), b(o);
    a.reset();
    b.reset();
    const auto num = static_cast<std::uint32_t>(a.env(0).action_space().n());
    const herd::RngStream rng(4, 0);
    std::vector<std::int64_t> ia(o.num_envs);
    std::vector<double> da(o.num_envs);
    for (int t = 0; t < 60; ++t) {
      for (std::size_t k = 0; k < o.num_envs; ++k) {
        ia[k] = rng.u32(t * o.num_envs + k) % num;
        da[k] = static_cast<double>(ia[k]);
      }
      a.step(ia);
      b.step(da);
      REQUIRE(std::memcmp(a.obs().data(), b.obs().data(), a.obs().size() * sizeof(float)) == 0);
      REQUIRE(std::memcmp(a.rewards().data(), b.rewards().data(), a.rewards().size() * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("EnvPool validates actions and calls, naming env and value", "[rl][pool]") {
  EnvPoolOptions o;
  o.env_id = "CartPole-v1";
  o.num_envs = 4;
  o.first_global_id = 10;
  EnvPool pool(o);
  pool.reset();
  CHECK_THROWS_WITH(pool.step(std::vector<double>{0, 1, 2, 0}), Catch::Contains("env 12") && Catch::Contains("is 2"));
  CHECK_THROWS_WITH(pool.step(std::vector<double>{0, 1, NAN, 0}), Catch::Contains("nan"));
  CHECK_THROWS_WITH(pool.step(std::vector<double>{0, 1, 1}), Catch::Contains("has 3 values"));
  CHECK_THROWS_WITH(pool.step(std::vector<std::int64_t>{0, 1, 1, -1}),
                    Catch::Contains("env 13") && Catch::Contains("is -1"));
  // Out of range by far (the range check runs in wrapping arithmetic): the first invalid
  // env is named.
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_WITH(pool.step(std::vector<std::int64_t>{0, kMin, 1, 2}),
                    Catch::Contains("env 11") && Catch::Contains(std::to_string(kMin)));
  CHECK_THROWS_WITH(pool.step(std::vector<std::int64_t>{0, 1, kMax, 0}),
                    Catch::Contains("env 12") && Catch::Contains(std::to_string(kMax)));
  CHECK_THROWS_WITH(pool.step(std::vector<std::int64_t>{0, 1, 1, 2}),
                    Catch::Contains("env 13") && Catch::Contains("is 2"));
  CHECK_THROWS_WITH(pool.step(std::vector<std::int64_t>{kMin + 1, 0, 0, 0}), Catch::Contains("env 10"));
  CHECK_NOTHROW(pool.step(std::vector<std::int64_t>{0, 1, 1, 0}));
  CHECK_THROWS_WITH(pool.recv(), Catch::Contains("in flight"));
  std::vector<std::int32_t> ids{0, 1};
  CHECK_THROWS_WITH(pool.send(std::vector<double>{0, 1}, std::vector<std::int32_t>{0, 4}),
                    Catch::Contains("env_ids[1] is 4"));
  pool.send(std::vector<std::int64_t>{0, 1}, ids);
  CHECK(pool.in_flight() == 2);
  CHECK_THROWS_WITH(pool.step(std::vector<double>{0, 1, 1, 0}), Catch::Contains("in flight"));
  CHECK_THROWS_WITH(pool.recv(), Catch::Contains("batch_size = 4"));

  EnvPoolOptions p = o;
  p.env_id = "Pendulum-v1";
  EnvPool pend(p);
  pend.reset();
  CHECK_THROWS_WITH(pend.step(std::vector<double>{0, 0, 0, NAN}),
                    Catch::Contains("Pendulum-v1 (env 13)") && Catch::Contains("NaN"));
  CHECK_THROWS_AS(pend.step(std::vector<std::int64_t>{0, 0, 0, 0}), herd::InputError);
  CHECK_NOTHROW(pend.step(std::vector<double>{-1e9, 1e9, 0, 2}));  // clipped to the bounds

  EnvPoolOptions bad = o;
  bad.batch_size = 5;
  CHECK_THROWS_WITH(EnvPool(bad), Catch::Contains("batch_size is 5"));
  bad = o;
  bad.num_threads = 0;
  CHECK_THROWS_AS(EnvPool(bad), herd::InputError);
  bad = o;
  bad.env_id = "Nope-v0";
  CHECK_THROWS_WITH(EnvPool(bad), Catch::Contains("Nope-v0"));
}

TEST_CASE("a pool restored from env states continues bit-identically", "[rl][pool]") {
  for (const char* id : kIds) {
    INFO(id);
    EnvPoolOptions o;
    o.env_id = id;
    o.num_envs = 6;
    o.seed = 31;
    o.max_episode_steps = 9;
    EnvPool a(o), b(o);
    a.reset();
    std::vector<double> actions(6 * a.action_dim());
    auto fill = [&](int t) {
      for (std::uint32_t k = 0; k < 6; ++k) actions[k] = action_of(a.action_space(), k, t);
    };
    for (int t = 0; t < 23; ++t) {
      fill(t);
      a.step(actions);
    }
    // Checkpoint a into b: state, step count and stream position of every env.
    b.reset();
    for (std::size_t k = 0; k < 6; ++k) {
      herd::rl::Env& ea = a.env(k);
      herd::rl::Env& eb = b.env(k);
      eb.set_state(ea.get_state());
      eb.set_elapsed_steps(ea.elapsed_steps());
      eb.restore_stream(ea.seed(), ea.episode());
    }
    for (int t = 23; t < 60; ++t) {
      fill(t);
      a.step(actions);
      b.step(actions);
      REQUIRE(std::memcmp(a.obs().data(), b.obs().data(), a.obs().size() * sizeof(float)) == 0);
      for (std::size_t k = 0; k < 6; ++k) {
        REQUIRE(a.rewards()[k] == b.rewards()[k]);
        REQUIRE(a.terminated()[k] == b.terminated()[k]);
        REQUIRE(a.truncated()[k] == b.truncated()[k]);
      }
    }
  }
}

namespace {

using herd::rl::EnvSimd;

// Sets the process-wide SIMD level for its lifetime (restored on every exit).
struct SimdLevel {
  explicit SimdLevel(EnvSimd level) { herd::rl::set_env_simd(level); }
  ~SimdLevel() { herd::rl::set_env_simd(herd::rl::env_simd_supported()); }
  SimdLevel(const SimdLevel&) = delete;
  SimdLevel& operator=(const SimdLevel&) = delete;
};

// Whether n floats have identical bits.
bool same_bits(const float* a, const float* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

// Requires identical sync results, and identical states, flags, step counts and stream
// positions of every env, in two pools.
void require_same_pools(EnvPool& a, EnvPool& b) {
  const std::size_t n = a.num_envs(), od = a.obs_dim();
  REQUIRE(std::memcmp(a.obs().data(), b.obs().data(), n * od * sizeof(float)) == 0);
  for (std::size_t k = 0; k < n; ++k) {
    INFO("env " << k);
    REQUIRE(std::bit_cast<std::uint64_t>(a.rewards()[k]) == std::bit_cast<std::uint64_t>(b.rewards()[k]));
    REQUIRE(a.terminated()[k] == b.terminated()[k]);
    REQUIRE(a.truncated()[k] == b.truncated()[k]);
    if (a.terminated()[k] || a.truncated()[k])
      REQUIRE(std::memcmp(a.final_obs().data() + k * od, b.final_obs().data() + k * od, od * sizeof(float)) == 0);
    const auto sa = a.env(k).get_state(), sb = b.env(k).get_state();
    REQUIRE(std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(double)) == 0);
    REQUIRE(a.env(k).elapsed_steps() == b.env(k).elapsed_steps());
    REQUIRE(a.env(k).max_episode_steps() == b.env(k).max_episode_steps());
    REQUIRE(a.env(k).episode() == b.env(k).episode());
  }
}

// Copies every env's state, step count and stream position from `from` into `to` (a
// checkpoint restored; the after-termination flag is not part of it, as in the trainers).
void restore_pool(EnvPool& from, EnvPool& to) {
  for (std::size_t k = 0; k < from.num_envs(); ++k) {
    herd::rl::Env& f = from.env(k);
    herd::rl::Env& t = to.env(k);
    t.set_state(f.get_state());
    t.set_elapsed_steps(f.elapsed_steps());
    t.set_max_episode_steps(f.max_episode_steps());
    t.restore_stream(f.seed(), f.episode());
  }
}

}  // namespace

namespace {

// A pool of `id` with a structure-of-arrays store stepped at `level` on `threads` threads
// against one without (per-object scalar steps), bit for bit, `steps` steps, then a
// checkpoint restored into a fresh store pool that continues as many steps alongside.
void check_store_pool(const char* id, EnvSimd level, std::size_t n, std::size_t threads, int steps) {
  const bool cartpole = std::string(id) == "CartPole-v1";
  INFO(id << ", level " << herd::rl::env_simd_name(level) << ", " << n << " envs, " << threads << " threads");
  EnvPoolOptions o;
  o.env_id = id;
  o.num_envs = n;
  o.num_threads = threads;
  o.min_task_seconds = 0;  // every thread used
  o.seed = 5;
  o.max_episode_steps = 60;
  EnvPoolOptions r = o;
  r.structure_of_arrays = false;
  r.num_threads = 1;
  EnvPool soa(o), ref(r);
  REQUIRE(soa.uses_store());
  REQUIRE(!ref.uses_store());
  soa.reset();
  ref.reset();
  // Per-env time limits (set through the env, so in the store) and far-out states
  // (CartPole: an angle of 1e6, glibc's slow sincos path, envs stepped on past
  // termination; Acrobot: angles near +-pi, velocities near their bounds).
  for (std::size_t k = 0; k < n; ++k) {
    if (k % 5 == 2) {
      soa.env(k).set_max_episode_steps(17 + static_cast<std::int64_t>(k % 13));
      ref.env(k).set_max_episode_steps(17 + static_cast<std::int64_t>(k % 13));
    }
    if (k % 11 == 5) {
      const double d = 0.25 * static_cast<double>(k);
      const std::vector<double> far =
          cartpole ? std::vector<double>{0.3, -40.0, 1e6 + d, 35.0} : std::vector<double>{3.1, -3.14, 12.0 + d, -28.0};
      soa.env(k).set_state(far);
      ref.env(k).set_state(far);
    }
  }
  std::vector<double> act(n);
  const herd::RngStream rng(8, 3);
  std::size_t ends = 0;
  auto step_both = [&](int t) {
    for (std::size_t i = 0; i < n; ++i) act[i] = static_cast<double>(rng.u32(t * n + i) % (cartpole ? 2 : 3));
    {
      const SimdLevel l(level);
      soa.step(act);
    }
    {
      const SimdLevel l(EnvSimd::kScalar);
      ref.step(act);
    }
    for (std::size_t k = 0; k < n; ++k) ends += soa.terminated()[k] | soa.truncated()[k];
    require_same_pools(soa, ref);
  };
  int t = 0;
  for (; t < steps; ++t) step_both(t);
  // Single-env calls on envs in the store: a step and a reset through the Env
  // interface, on both pools.
  float row[6] = {}, row2[6] = {};
  const herd::rl::StepResult s1 = soa.env(n / 2).step(std::int64_t{1}, row);  // obs_dim 4 or 6
  const herd::rl::StepResult s2 = ref.env(n / 2).step(std::int64_t{1}, row2);
  REQUIRE(same_bits(row, row2, 6));
  REQUIRE(s1.reward == s2.reward);
  REQUIRE(s1.terminated == s2.terminated);
  REQUIRE(s1.truncated == s2.truncated);
  soa.env(n - 1).reset(row);
  ref.env(n - 1).reset(row2);
  REQUIRE(same_bits(row, row2, 6));
  // A checkpoint restored into a fresh store pool continues bit-identically.
  EnvPool restored(o);
  restored.reset();
  restore_pool(soa, restored);
  for (; t < 2 * steps; ++t) {
    step_both(t);
    {
      const SimdLevel l(level);
      restored.step(act);
    }
    require_same_pools(restored, soa);
  }
  if (cartpole || n > 5) CHECK(ends > (cartpole ? n : 0));  // Acrobot: the far-out envs end
}

}  // namespace

TEST_CASE("CartPole, Acrobot pools: structure-of-arrays store equals per-object scalar steps", "[rl][pool][simd]") {
  for (const EnvSimd level : {EnvSimd::kScalar, EnvSimd::kAvx2, EnvSimd::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(herd::rl::env_simd_supported())) continue;
    // Not multiples of the vector widths (4, 8) or of the 256-env chunks; 2 threads split
    // the envs at task boundaries that are not multiples of them either.
    for (const std::size_t threads : {1u, 2u}) {
      for (const std::size_t n : {1u, 3u, 9u, 37u, 263u, 601u}) check_store_pool("CartPole-v1", level, n, threads, 150);
      for (const std::size_t n : {1u, 3u, 9u, 37u, 263u}) check_store_pool("Acrobot-v1", level, n, threads, 40);
    }
  }
}

TEST_CASE("CartPole store pools: every env ending in one step, none, and ends in every group size",
          "[rl][pool][simd]") {
  // Time limits of 1 step end every env at every step (all reset together: full vector
  // groups of start states and a partial last one); a limit of 1000 from a fresh reset ends
  // none in the first steps; limits of 1-9 steps per env end varying subsets.
  for (const EnvSimd level : {EnvSimd::kScalar, EnvSimd::kAvx2, EnvSimd::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(herd::rl::env_simd_supported())) continue;
    for (const std::size_t n : {1u, 4u, 5u, 8u, 9u, 16u, 17u, 64u, 263u}) {
      for (const int mode : {0, 1, 2}) {
        INFO("level " << herd::rl::env_simd_name(level) << ", " << n << " envs, mode " << mode);
        EnvPoolOptions o;
        o.env_id = "CartPole-v1";
        o.num_envs = n;
        o.seed = 9;
        o.max_episode_steps = mode == 0 ? 1 : 1000;
        EnvPoolOptions r = o;
        r.structure_of_arrays = false;
        EnvPool soa(o), ref(r);
        soa.reset();
        ref.reset();
        if (mode == 2) {
          for (std::size_t k = 0; k < n; ++k) {
            soa.env(k).set_max_episode_steps(1 + static_cast<std::int64_t>((k * 7) % 9));
            ref.env(k).set_max_episode_steps(1 + static_cast<std::int64_t>((k * 7) % 9));
          }
        }
        std::vector<double> act(n);
        const herd::RngStream rng(10, 1);
        const int steps = mode == 1 ? 5 : 40;
        for (int t = 0; t < steps; ++t) {
          for (std::size_t i = 0; i < n; ++i) act[i] = static_cast<double>(rng.u32(t * n + i) & 1);
          {
            const SimdLevel l(level);
            soa.step(act);
          }
          {
            const SimdLevel l(EnvSimd::kScalar);
            ref.step(act);
          }
          std::size_t ends = 0;
          for (std::size_t k = 0; k < n; ++k) ends += soa.terminated()[k] | soa.truncated()[k];
          if (mode == 0) REQUIRE(ends == n);
          if (mode == 1) REQUIRE(ends == 0);
          require_same_pools(soa, ref);
        }
      }
    }
  }
}

TEST_CASE("CartPoleStore binds and unbinds its envs", "[rl][pool][simd]") {
  const std::size_t n = 13;
  std::vector<std::unique_ptr<herd::rl::CartPole>> a(n), b(n);
  std::vector<herd::rl::Env*> pa(n);
  std::vector<float> oa(4 * n), ob(4 * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto* v : {&a, &b}) {
      (*v)[i] = std::make_unique<herd::rl::CartPole>();
      (*v)[i]->set_global_id(static_cast<std::uint32_t>(i));
      (*v)[i]->set_max_episode_steps(25);
    }
    a[i]->reset(4, oa.data() + 4 * i);
    b[i]->reset(4, ob.data() + 4 * i);
    pa[i] = a[i].get();
  }
  std::vector<double> act(n), rew(n), rb(n);
  std::vector<std::uint8_t> te(n), tr(n);
  const herd::RngStream rng(12, 0);
  auto step_ref = [&](int t) {
    for (std::size_t i = 0; i < n; ++i) {
      act[i] = static_cast<double>(rng.u32(t * n + i) & 1);
      const herd::rl::StepResult r = b[i]->step_unchecked(&act[i], ob.data() + 4 * i);
      rb[i] = r.reward;
      if (r.truncated || (r.terminated && i % 4 != 1)) b[i]->reset(ob.data() + 4 * i);
    }
  };
  auto check = [&] {
    REQUIRE(std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)) == 0);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(a[i]->get_state() == b[i]->get_state());
      REQUIRE(a[i]->elapsed_steps() == b[i]->elapsed_steps());
    }
  };
  // Stepped on its own, then in a store, then on its own again (the values move into the
  // store and back); envs with i % 4 == 1 step on past termination until truncated (the
  // after-termination flag moves too: their rewards become 0).
  int t = 0;
  auto step_a = [&](auto&& stepper) {
    stepper();
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(rew[i] == rb[i]);
      if (tr[i] || (te[i] && i % 4 != 1)) a[i]->reset(oa.data() + 4 * i);
    }
  };
  for (; t < 30; ++t) {
    step_ref(t);
    step_a([&] { a[0]->step_batch(pa.data(), n, act.data(), oa.data(), rew.data(), te.data(), tr.data()); });
    check();
  }
  {
    auto store = a[0]->make_store(pa.data(), n);
    REQUIRE(store != nullptr);
    REQUIRE(store->size() == n);
    CHECK_THROWS_AS(a[0]->make_store(pa.data(), n), herd::InputError);  // already bound
    for (; t < 90; ++t) {
      step_ref(t);
      // Two ranges, as two pool threads would step them; ended envs reset by the store.
      store->step(0, 5, act.data(), oa.data(), rew.data(), te.data(), tr.data());
      store->step(5, n, act.data() + 5, oa.data() + 20, rew.data() + 5, te.data() + 5, tr.data() + 5);
      std::vector<std::uint8_t> reset_te(te), reset_tr(tr);
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(rew[i] == rb[i]);
        if (i % 4 == 1) reset_te[i] = 0;  // stepped on past termination
      }
      store->reset_done(0, 7, reset_te.data(), reset_tr.data(), oa.data(), nullptr);
      store->reset_done(7, n, reset_te.data() + 7, reset_tr.data() + 7, oa.data() + 28, nullptr);
      check();
    }
  }
  for (; t < 120; ++t) {  // unbound: the objects hold the values again
    step_ref(t);
    step_a([&] { a[0]->step_batch(pa.data(), n, act.data(), oa.data(), rew.data(), te.data(), tr.data()); });
    check();
  }
  // Types without a store, and pools that were asked for none.
  EnvPoolOptions o;
  o.env_id = "MountainCar-v0";
  o.num_envs = 3;
  CHECK(!EnvPool(o).uses_store());
  o.env_id = "Acrobot-v1";
  CHECK(EnvPool(o).uses_store());
  o.env_id = "CartPole-v1";
  o.structure_of_arrays = false;
  CHECK(!EnvPool(o).uses_store());
}
