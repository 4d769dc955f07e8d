/* Entry points of C environments that herd-rl must refuse with one clear line: a function
 * that reports a failure, one that fills an invalid spec (no observation), and one without
 * the state callbacks that herd-rl's checkpoints need. Linked with
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

int32_t no_state_env(herd_env_spec* spec) {
  corridor_env(spec);
  spec->state_dim = 0;
  spec->get_state = 0;
  spec->set_state = 0;
  return 0;
}
