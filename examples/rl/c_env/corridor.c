/* A user environment in C for herd-rl (docs/rl.md, "Your own environment").
 *
 * A corridor of 8 cells. The walker starts in one of cells 0-3 and moves left (action 0)
 * or right (action 1); reaching cell 7 ends the episode with reward +1, every other step
 * costs 0.01. Two observation forms from one library:
 *   corridor_env        a vector [position / 7, steps / 50]
 *   corridor_image_env  a one-channel 1 x 8 image: 1 at the walker's cell, else 0
 * Build:  cc -O2 -shared -fPIC -I<herd>/rl/include corridor.c -o libcorridor.so   (source tree;
 *         an installed herd: -I<prefix>/include)
 */
#include <stdint.h>
#include <stdlib.h>

#include "herd/rl/c_env.h"

#define CELLS 8

typedef struct {
  int image; /* observation form */
  int x;     /* walker's cell */
  int t;     /* steps in the episode */
} corridor;

static void observe(const corridor* c, float* obs) {
  if (c->image) {
    for (int i = 0; i < CELLS; ++i) obs[i] = i == c->x ? 1.0f : 0.0f;
  } else {
    obs[0] = (float)c->x / (CELLS - 1);
    obs[1] = (float)c->t / 50.0f;
  }
}

static void* create(void* user, uint64_t seed) {
  (void)seed;
  corridor* c = calloc(1, sizeof(corridor));
  if (c) c->image = user != NULL;
  return c;
}

static int32_t reset(void* env, uint64_t seed, float* obs) {
  corridor* c = env;
  c->x = (int)(seed >> 62); /* the top two bits of the episode's seed: cell 0-3 */
  c->t = 0;
  observe(c, obs);
  return 0;
}

static int32_t step(void* env, const double* action, float* obs, double* reward, int32_t* terminated,
                    int32_t* truncated) {
  corridor* c = env;
  c->x += action[0] > 0.5 ? 1 : -1;
  if (c->x < 0) c->x = 0;
  c->t += 1;
  *terminated = c->x == CELLS - 1;
  *reward = *terminated ? 1.0 : -0.01;
  *truncated = 0; /* herd applies max_episode_steps */
  observe(c, obs);
  return 0;
}

static void destroy(void* env) { free(env); }

static int32_t get_state(void* env, double* state) {
  const corridor* c = env;
  state[0] = c->x;
  state[1] = c->t;
  return 0;
}

static int32_t set_state(void* env, const double* state) {
  corridor* c = env;
  if (state[0] < 0 || state[0] >= CELLS) return 1;
  c->x = (int)state[0];
  c->t = (int)state[1];
  return 0;
}

static void fill(herd_env_spec* spec) {
  spec->action_kind = HERD_ACTION_DISCRETE;
  spec->num_actions = 2;
  spec->max_episode_steps = 50;
  spec->thread_safe = 1; /* no global state */
  spec->create = create;
  spec->reset = reset;
  spec->step = step;
  spec->destroy = destroy;
  spec->get_state = get_state; /* checkpoints and resume need the state */
  spec->set_state = set_state;
  spec->state_dim = 2;
}

/* The functions a herd-rl configuration names with [env] symbol. */
int32_t corridor_env(herd_env_spec* spec) {
  fill(spec);
  spec->obs_dim = 2;
  return 0;
}

int32_t corridor_image_env(herd_env_spec* spec) {
  static const int64_t shape[3] = {1, 1, CELLS}; /* channels, height, width */
  static double low[CELLS], high[CELLS];
  static int image = 1;
  for (int i = 0; i < CELLS; ++i) high[i] = 1.0;
  fill(spec);
  spec->obs_dim = CELLS;
  spec->obs_ndim = 3;
  spec->obs_shape = shape;
  spec->obs_low = low; /* pixels 0 or 1: whole numbers in [0, 1], so DQN's replay keeps bytes */
  spec->obs_high = high;
  spec->obs_integer = 1;
  spec->user = &image;
  return 0;
}
