/* A small user environment written in C against herd/rl/c_env.h: a point mass on a line.
 * State (x, v, fail); obs (x, v); Box action a in [-1, 1] (herd clips); v += 0.1 a,
 * x += v; reward -x^2; terminated when |x| > 1. A nonzero `fail` makes the next step
 * report an error. Not thread-safe on purpose: it counts callbacks running at once in a
 * global, so the test can check that herd serialises them. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "herd/rl/c_env.h"

typedef struct {
  double x, v, fail;
  uint64_t create_seed;
} point_env;

static atomic_int g_active = 0;
static atomic_int g_max_active = 0;
static atomic_int g_live = 0;
static double g_last_action = 0.0;

/* Test probes. */
int c_point_env_max_active(void) { return atomic_load(&g_max_active); }
void c_point_env_clear_max_active(void) { atomic_store(&g_max_active, 0); }
int c_point_env_live(void) { return atomic_load(&g_live); }
double c_point_env_last_action(void) { return g_last_action; }

static void enter(void) {
  int now = atomic_fetch_add(&g_active, 1) + 1;
  int seen = atomic_load(&g_max_active);
  while (now > seen && !atomic_compare_exchange_weak(&g_max_active, &seen, now)) {
  }
  /* Linger a little so that overlapping calls would be seen. */
  for (volatile int i = 0; i < 200; ++i) {
  }
}
static void leave(void) { atomic_fetch_sub(&g_active, 1); }

static void* point_create(void* user, uint64_t seed) {
  (void)user;
  point_env* e = (point_env*)calloc(1, sizeof(point_env));
  if (e) e->create_seed = seed;
  atomic_fetch_add(&g_live, 1);
  return e;
}

static int32_t point_reset(void* env, uint64_t seed, float* obs) {
  enter();
  point_env* e = (point_env*)env;
  /* x in [-0.5, 0.5) from the top bits of the seed. */
  e->x = (double)(seed >> 11) * (1.0 / 9007199254740992.0) - 0.5;
  e->v = 0.0;
  e->fail = 0.0;
  obs[0] = (float)e->x;
  obs[1] = (float)e->v;
  leave();
  return 0;
}

static int32_t point_step(void* env, const double* action, float* obs, double* reward, int32_t* terminated,
                          int32_t* truncated) {
  enter();
  point_env* e = (point_env*)env;
  if (e->fail != 0.0) {
    leave();
    return 7;
  }
  g_last_action = action[0];
  e->v += 0.1 * action[0];
  e->x += e->v;
  obs[0] = (float)e->x;
  obs[1] = (float)e->v;
  *reward = -e->x * e->x;
  *terminated = e->x > 1.0 || e->x < -1.0;
  *truncated = 0;
  leave();
  return 0;
}

static void point_destroy(void* env) {
  free(env);
  atomic_fetch_sub(&g_live, 1);
}

static int32_t point_get_state(void* env, double* s) {
  point_env* e = (point_env*)env;
  s[0] = e->x;
  s[1] = e->v;
  s[2] = e->fail;
  return 0;
}

static int32_t point_set_state(void* env, const double* s) {
  point_env* e = (point_env*)env;
  e->x = s[0];
  e->v = s[1];
  e->fail = s[2];
  return 0;
}

static const double k_low[1] = {-1.0};
static const double k_high[1] = {1.0};

herd_env_spec c_point_env_spec(void) {
  herd_env_spec s = {0};
  s.obs_dim = 2;
  s.action_kind = HERD_ACTION_BOX;
  s.action_dim = 1;
  s.action_low = k_low;
  s.action_high = k_high;
  s.max_episode_steps = 30;
  s.thread_safe = 0;
  s.create = point_create;
  s.reset = point_reset;
  s.step = point_step;
  s.destroy = point_destroy;
  s.get_state = point_get_state;
  s.set_state = point_set_state;
  s.state_dim = 3;
  return s;
}
