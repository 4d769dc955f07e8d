#ifndef HERD_RL_C_ENV_H
#define HERD_RL_C_ENV_H
/**
 * @file c_env.h
 * C interface for user environments: a scientific simulator written in C, C++ or Fortran
 * (through `bind(C)`) fills a `herd_env_spec` with callbacks and plugs into herd's EnvPool
 * unchanged (C++ side: `herd::rl::make_c_env`, `herd::rl::register_c_env`).
 *
 * Layouts: observations are float32 `[obs_dim]`, actions float64 `[action_dim]` (a discrete
 * action is one float64 holding an integer in [0, num_actions)). `Box` actions are clipped
 * to [action_low, action_high] before `step` sees them. Time limits are applied by herd
 * (`max_episode_steps`); `step` reports only termination (and may report truncation of its
 * own). Callbacks return 0 on success; any other value is an error that herd reports (as a
 * `herd::Error` naming the env) without calling the instance again except `destroy`.
 *
 * Thread-safety: unless `thread_safe` is nonzero, herd never runs two callbacks of such
 * environments at the same time (one process-wide lock; they may still run on different
 * threads, one after another), so simulators with global state are safe. With `thread_safe` set, distinct instances are
 * stepped concurrently; one instance is never used by two threads at once.
 *
 * From the command line: a shared library that exports a `herd_env_spec_fn` (a function
 * that fills a spec) is named in a herd-rl configuration, `[env] library = "libmyenv.so"`
 * and `symbol = "<function>"` (docs/rl.md, "Your own environment"); herd-rl train, eval and
 * resume then load it.
 *
 * Fields added after the first release sit at the end of the struct, and zero means the
 * old behaviour, so a spec filled by older code (zero-initialised by herd or by the
 * caller) keeps working. A library built against a newer header than the herd that loads
 * it, which sets a field that herd does not know, is refused by herd-rl (the spec function
 * gets zeroed room past herd's struct, and any nonzero byte there is an error).
 */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Action space kinds of `herd_env_spec.action_kind`. */
enum herd_action_kind {
  HERD_ACTION_DISCRETE = 0, /**< integers 0 .. num_actions - 1 */
  HERD_ACTION_BOX = 1       /**< float64 vectors of action_dim components, bounded */
};

/** A user environment type: sizes, spaces and callbacks. Copied by herd at registration;
 *  the arrays it points to must stay valid while environments made from it exist. */
typedef struct herd_env_spec {
  /** Components of an observation (>= 1). */
  int32_t obs_dim;
  /** HERD_ACTION_DISCRETE or HERD_ACTION_BOX. */
  int32_t action_kind;
  /** Number of actions of a discrete space (>= 1). */
  int64_t num_actions;
  /** Components of a Box action (>= 1; ignored for discrete: 1). */
  int32_t action_dim;
  /** Box bounds, `[action_dim]` each (ignored for discrete). */
  const double* action_low;
  const double* action_high;
  /** Observation bounds, `[obs_dim]` each, or NULL for unbounded (that side); where both
   *  are given, obs_low[i] <= obs_high[i] (a spec that breaks this is refused). */
  const double* obs_low;
  const double* obs_high;
  /** Steps after which herd truncates the episode (0: no limit). */
  int64_t max_episode_steps;
  /** Nonzero when distinct instances may run callbacks concurrently. */
  int32_t thread_safe;
  /** Passed to `create` unchanged. */
  void* user;
  /** Makes one instance; `seed` is distinct per environment (from its global id).
   *  Returns NULL on failure. */
  void* (*create)(void* user, uint64_t seed);
  /** Starts an episode: draws the start state using `seed` (distinct per episode) and
   *  writes the first observation `obs[obs_dim]`. */
  int32_t (*reset)(void* env, uint64_t seed, float* obs);
  /** One step under `action[action_dim]`: writes `obs[obs_dim]`, `*reward`,
   *  `*terminated` and `*truncated` (0 or 1). */
  int32_t (*step)(void* env, const double* action, float* obs, double* reward, int32_t* terminated, int32_t* truncated);
  /** Frees the instance; may be NULL. */
  void (*destroy)(void* env);
  /** Optional: writes the internal state (`state_dim` doubles); may be NULL. */
  int32_t (*get_state)(void* env, double* state);
  /** Optional: replaces the internal state; may be NULL. */
  int32_t (*set_state)(void* env, const double* state);
  /** Number of doubles of get_state/set_state (0 when not provided). */
  int32_t state_dim;
  /** Number of dimensions of `obs_shape` (0: the observation is a flat vector
   *  `[obs_dim]`; at most 8). */
  int32_t obs_ndim;
  /** Array shape of an observation, `[obs_ndim]`, row-major (C order), whose product is
   *  obs_dim: e.g. {channels, height, width} for an image, so that networks choose
   *  convolutional layers and frame stacks stack along the channels. */
  const int64_t* obs_shape;
  /** Optional: writes the lives left in the game to `*lives` (for the episodic-life
   *  wrapper, as Atari's); NULL when the game has no lives. */
  int32_t (*lives)(void* env, int64_t* lives);
  /** Nonzero when every observation component takes whole-number values (pixels, counts,
   *  0/1 grids): DQN's replay buffer then keeps observations whose bounds lie in [0, 255]
   *  as bytes (a quarter of float32's memory) and refuses a non-integer one. 0 (default):
   *  real values, kept as float32. */
  int32_t obs_integer;
} herd_env_spec;

/** The function a shared library exports for herd-rl's `[env] symbol`: fills `*spec`
 *  (which herd zero-initialises first) and returns 0, or returns nonzero when it cannot
 *  (herd reports the status). Called once per process and library; the spec's arrays and
 *  `user` must stay valid while the library is loaded. */
typedef int32_t (*herd_env_spec_fn)(herd_env_spec* spec);

#ifdef __cplusplus
}
#endif

#endif /* HERD_RL_C_ENV_H */
