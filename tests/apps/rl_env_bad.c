/* Entry points of C environments that herd-rl must refuse with one clear line: a function
 * that reports a failure, one that fills an invalid spec (no observation), one without
 * the state callbacks that herd-rl's checkpoints need, one built against a newer header,
 * and one of real-valued bounded observations (refused with env.obs_dtype = "uint8"). Linked with
 * examples/rl/c_env/corridor.c into the test library. */
#include <stdint.h>

#include "herd/rl/c_env.h"

int32_t failing_env(herd_env_spec* spec) {
  (void)spec;
  return 5;
}

int32_t corridor_env(herd_env_spec* spec);

int32_t no_obs_env(herd_env_spec* spec) {
  corridor_env(spec);
  spec->obs_dim = 0;
  return 0;
}

/* Real-valued observations bounded in [0, 1] (obs_integer 0): uint8 batches would round them. */
int32_t real_bounded_env(herd_env_spec* spec) {
  static const double low[2] = {0.0, 0.0}, high[2] = {1.0, 1.0};
  corridor_env(spec);
  spec->obs_low = low;
  spec->obs_high = high;
  return 0;
}

/* A library built against a newer c_env.h, whose spec has a field after obs_integer. */
typedef struct {
  herd_env_spec spec;
  int32_t future_field;
} newer_spec;

int32_t newer_header_env(herd_env_spec* spec) {
  corridor_env(spec);
  ((newer_spec*)spec)->future_field = 1;
  return 0;
}

int32_t no_state_env(herd_env_spec* spec) {
  corridor_env(spec);
  spec->state_dim = 0;
  spec->get_state = 0;
  spec->set_state = 0;
  return 0;
}
