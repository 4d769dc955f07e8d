// User environments through the C API (c_point_env.c, compiled as C): spaces, reset seeds,
// clipping, time limit, errors, serialised callbacks, and stepping in an EnvPool unchanged.
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/rl/c_env.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/registry.hpp"

extern "C" {
herd_env_spec c_point_env_spec(void);
int c_point_env_max_active(void);
void c_point_env_clear_max_active(void);
int c_point_env_live(void);
double c_point_env_last_action(void);
}

TEST_CASE("a C environment is an Env", "[rl][c_env]") {
  const herd_env_spec spec = c_point_env_spec();
  {
    auto env = herd::rl::make_c_env(spec, "Point-c");
    CHECK(env->id() == "Point-c");
    CHECK(env->obs_dim() == 2);
    CHECK(env->action_space().is_box());
    CHECK(env->max_episode_steps() == 30);
    CHECK(env->state_dim() == 3);
    float obs[2];
    env->set_global_id(3);
    env->reset(11, obs);
    CHECK(c_point_env_live() == 1);
    const float x0 = obs[0];
    CHECK(std::abs(x0) <= 0.5f);
    // Same seed and id: same start; the next episode: another start.
    env->reset(11, obs);
    CHECK(obs[0] == x0);
    env->reset(obs);
    CHECK(obs[0] != x0);
    // Box actions are clipped to the spec's bounds before the callback sees them.
    env->step(std::vector<double>{5.0}, obs);
    CHECK(c_point_env_last_action() == 1.0);
    env->step(std::vector<double>{-0.25}, obs);
    CHECK(c_point_env_last_action() == -0.25);
    CHECK_THROWS_WITH(env->step(std::vector<double>{NAN}, obs), Catch::Contains("Point-c"));
    // State round trip through the optional callbacks.
    env->set_state(std::vector<double>{0.1, 0.2, 0.0});
    CHECK(env->get_state() == std::vector<double>{0.1, 0.2, 0.0});
    const auto r = env->step(std::vector<double>{0.0}, obs);
    CHECK(r.reward == -(0.30000000000000004 * 0.30000000000000004));
    // A non-finite observation is stopped where the callback writes it, naming it (it
    // surfaced as a NaN loss, or as a NaN action of the policy, before).
    env->set_state(std::vector<double>{NAN, 0.0, 0.0});
    CHECK_THROWS_WITH(env->step(std::vector<double>{0.0}, obs),
                      Catch::Contains("Point-c (env 3): the C callback step wrote obs[0] = nan (observations must be "
                                      "finite)"));
    // A failing callback becomes a herd::Error naming the env and the status.
    env->set_state(std::vector<double>{0.0, 0.0, 1.0});
    CHECK_THROWS_WITH(env->step(std::vector<double>{0.0}, obs),
                      Catch::Contains("Point-c (env 3)") && Catch::Contains("status 7"));
  }
  CHECK(c_point_env_live() == 0);  // destroy was called

  herd_env_spec bad = spec;
  bad.step = nullptr;
  CHECK_THROWS_WITH(herd::rl::make_c_env(bad, "Bad"), Catch::Contains("required"));
  bad = spec;
  bad.obs_dim = 0;
  CHECK_THROWS_WITH(herd::rl::make_c_env(bad, "Bad"), Catch::Contains("obs_dim is 0"));
  // Bounds the wrong way round: named in the spec's terms (Space::box's message before).
  bad = spec;
  std::swap(bad.action_low, bad.action_high);
  CHECK_THROWS_WITH(herd::rl::make_c_env(bad, "Bad"),
                    Catch::Contains("c_env \"Bad\": action_low[0] is 1 and action_high[0] is -1"));
  // Observation bounds too: named in the spec's terms when the spec is checked (registration
  // by herd-rl's [env] library), not later by Space::box without the env's name.
  const double obs_lo[2] = {0.0, 0.0}, obs_hi[2] = {1.0, -1.0};
  bad = spec;
  bad.obs_low = obs_lo;
  bad.obs_high = obs_hi;
  CHECK_THROWS_WITH(herd::rl::register_c_env("Bad-bounds", bad),
                    Catch::Contains("c_env \"Bad-bounds\": obs_low[1] is 0 and obs_high[1] is -1"));
  CHECK_FALSE(herd::rl::is_registered("Bad-bounds"));
  // An obs_dim that one environment's buffers cannot hold (a spec that forgot to set it to
  // something sane): refused by name before anything is allocated, where the process was
  // killed for memory before. Checked only where it exceeds the memory available (43 GB).
  bad = spec;
  bad.obs_dim = std::numeric_limits<std::int32_t>::max();
  if (const auto avail = herd::available_memory_bytes(); avail && *avail < 20.0 * bad.obs_dim) {
    CHECK_THROWS_WITH(herd::rl::make_c_env(bad, "Bad"),
                      Catch::Contains("c_env \"Bad\": obs_dim is 2147483647") && Catch::Contains("is obs_dim set?"));
  }
  bad = spec;
  bad.obs_low = obs_lo;
  bad.obs_high = obs_hi;
  const double nan_hi[2] = {1.0, std::nan("")};
  bad.obs_high = nan_hi;
  CHECK_THROWS_WITH(herd::rl::make_c_env(bad, "Bad"), Catch::Contains("obs_high[1] is nan"));
}

TEST_CASE("a C environment plugs into the EnvPool unchanged", "[rl][c_env][pool]") {
  herd::rl::register_c_env("Point-c-v0", c_point_env_spec());
  std::vector<std::vector<float>> obs_by_threads;
  for (std::size_t threads : {1u, 3u}) {
    herd::rl::EnvPoolOptions o;
    o.env_id = "Point-c-v0";
    o.num_envs = 16;
    o.num_threads = threads;
    o.seed = 4;
    o.min_task_seconds = 0;  // spread even these cheap steps over the threads
    herd::rl::EnvPool pool(o);
    c_point_env_clear_max_active();
    pool.reset();
    std::vector<double> actions(16);
    std::vector<float> all;
    int ends = 0;
    for (int t = 0; t < 80; ++t) {
      for (int k = 0; k < 16; ++k) actions[k] = std::sin(0.3 * t + k) * 2.0;
      pool.step(actions);
      all.insert(all.end(), pool.obs().begin(), pool.obs().end());
      for (int k = 0; k < 16; ++k) ends += pool.terminated()[k] + pool.truncated()[k];
    }
    CHECK(ends > 16);  // the 30-step limit at least
    // Not thread-safe: herd never ran two callbacks at once, even with 3 threads.
    CHECK(c_point_env_max_active() == 1);
    obs_by_threads.push_back(std::move(all));
  }
  CHECK(obs_by_threads[0] == obs_by_threads[1]);
  CHECK(c_point_env_live() == 0);
}

TEST_CASE("a C environment's observation shape and lives", "[rl][c_env]") {
  herd_env_spec spec = c_point_env_spec();
  {
    auto env = herd::rl::make_c_env(spec, "Point-c");
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{2});  // obs_ndim 0: flat
    CHECK(!env->has_lives());                                                 // no lives callback
    CHECK(env->observation_space().values() == herd::rl::BoxValues::kReal);   // obs_integer 0
  }
  {
    // obs_integer: whole-number observations (DQN's replay may keep them as bytes).
    herd_env_spec integer = spec;
    integer.obs_integer = 1;
    auto env = herd::rl::make_c_env(integer, "Point-c");
    CHECK(env->observation_space().values() == herd::rl::BoxValues::kInteger);
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{2});
  }
  {
    // The optional lives callback (the episodic-life wrapper reads it).
    herd_env_spec with_lives = spec;
    with_lives.lives = [](void*, std::int64_t* lives) -> std::int32_t {
      *lives = 2;
      return 0;
    };
    auto env = herd::rl::make_c_env(with_lives, "Point-c");
    CHECK(env->has_lives());
    CHECK(env->lives() == 2);
    with_lives.lives = [](void*, std::int64_t*) -> std::int32_t { return 4; };
    auto failing = herd::rl::make_c_env(with_lives, "Point-c");
    CHECK_THROWS_WITH(failing->lives(), Catch::Contains("the C callback lives returned status 4"));
  }
  const std::int64_t shape[3] = {2, 1, 1};
  spec.obs_ndim = 3;
  spec.obs_shape = shape;
  {
    auto env = herd::rl::make_c_env(spec, "Point-c");
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{2, 1, 1});
    CHECK(env->obs_dim() == 2);
  }
  const std::int64_t wrong[2] = {3, 1};
  spec.obs_ndim = 2;
  spec.obs_shape = wrong;
  CHECK_THROWS_WITH(herd::rl::make_c_env(spec, "Point-c"),
                    Catch::Contains("obs_shape[0] is 3, but must be in [1, obs_dim = 2]"));
  const std::int64_t short_shape[2] = {1, 1};
  spec.obs_shape = short_shape;
  CHECK_THROWS_WITH(herd::rl::make_c_env(spec, "Point-c"),
                    Catch::Contains("obs_shape [1, 1] holds 1 values, but obs_dim is 2"));
  spec.obs_shape = nullptr;
  CHECK_THROWS_WITH(herd::rl::make_c_env(spec, "Point-c"), Catch::Contains("obs_shape is NULL"));
  spec.obs_ndim = 9;
  CHECK_THROWS_WITH(herd::rl::make_c_env(spec, "Point-c"), Catch::Contains("obs_ndim is 9, but must be in [0, 8]"));
}
