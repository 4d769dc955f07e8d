/* Entry points of C environments that herd-rl must refuse with one clear line: a function
 * that reports a failure, and one that fills an invalid spec (no observation). Linked with
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
