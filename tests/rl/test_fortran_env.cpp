// A user environment written in Fortran (f_oscillator_env.f90, bind(C)) plugs into the
// EnvPool through the C API unchanged; built when a Fortran compiler is found.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/rl/c_env.hpp"
#include "herd/rl/env_pool.hpp"

extern "C" {
void* f_osc_create(void* user, std::uint64_t seed);
std::int32_t f_osc_reset(void* env, std::uint64_t seed, float* obs);
std::int32_t f_osc_step(void* env, const double* action, float* obs, double* reward, std::int32_t* terminated,
                        std::int32_t* truncated);
void f_osc_destroy(void* env);
}

TEST_CASE("a Fortran environment runs in the EnvPool", "[rl][c_env][pool]") {
  static const double lo[1] = {-1.0}, hi[1] = {1.0};
  herd_env_spec spec{};
  spec.obs_dim = 2;
  spec.action_kind = HERD_ACTION_BOX;
  spec.action_dim = 1;
  spec.action_low = lo;
  spec.action_high = hi;
  spec.max_episode_steps = 50;
  spec.thread_safe = 1;
  spec.create = f_osc_create;
  spec.reset = f_osc_reset;
  spec.step = f_osc_step;
  spec.destroy = f_osc_destroy;

  // One step by hand: x0 from the reset seed, v1 = 0.1 (clip(a) - x0), x1 = x0 + 0.1 v1
  // (x0 seen through the float32 observation, so compared to float precision).
  auto env = herd::rl::make_c_env(spec, "Oscillator-f90");
  float obs[2];
  env->reset(3, obs);
  const double x0 = obs[0];
  CHECK(x0 >= -0.5);
  CHECK(x0 < 0.5);
  const auto r = env->step(std::vector<double>{4.0}, obs);  // clipped to 1
  const double v1 = 0.1 * (1.0 - x0);
  CHECK(obs[1] == Approx(v1).epsilon(1e-6));
  CHECK(obs[0] == Approx(x0 + 0.1 * v1).epsilon(1e-6));
  CHECK(r.reward == Approx(-(x0 + 0.1 * v1) * (x0 + 0.1 * v1)).epsilon(1e-6));

  std::vector<std::vector<float>> runs;
  for (std::size_t threads : {1u, 2u}) {
    std::vector<std::unique_ptr<herd::rl::Env>> envs;
    envs.reserve(8);
    for (int k = 0; k < 8; ++k) envs.push_back(herd::rl::make_c_env(spec, "Oscillator-f90"));
    herd::rl::EnvPoolOptions o;
    o.num_threads = threads;
    o.seed = 9;
    o.min_task_seconds = 0;
    herd::rl::EnvPool pool(std::move(envs), o);
    pool.reset();
    std::vector<double> a(8);
    std::vector<float> all;
    int truncs = 0;
    for (int t = 0; t < 120; ++t) {
      for (int k = 0; k < 8; ++k) a[k] = (t + k) % 3 - 1.0;
      pool.step(a);
      all.insert(all.end(), pool.obs().begin(), pool.obs().end());
      for (int k = 0; k < 8; ++k) truncs += pool.truncated()[k];
    }
    CHECK(truncs >= 8);  // the 50-step limit
    runs.push_back(std::move(all));
  }
  CHECK(runs[0] == runs[1]);
}
